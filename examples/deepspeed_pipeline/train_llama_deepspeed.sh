#!/usr/bin/env bash
# train_llama_deepspeed.sh: EnvPipe inside DeepSpeed, with the options of EnvPipe's own
# benchmarks/examples/train_llama_deepspeed.sh. The Llama of train.py trains on DeepSpeed's
# pipeline engine while `ergon serve`'s EnvPipe scheduler profiles it, plans (energy valley,
# outer envelope, r_s), reconfigures the critical path window by window until EnvPipe's
# termination rule holds, and serves the final plan.
usage() {
  cat <<'EOF'
Usage: ./train_llama_deepspeed.sh [options] [-- more train.py options]

Options:
  --type TYPE                ENVPIPE_TYPE (baseline, uniform, envelope). Required.
  --scheduling SCHEDULING    ENVPIPE_SCHEDULING (1f1b, ours). Required.
  --reconfig RECONFIGURE     ENVPIPE_RECONFIGURE (default, greedy, balanced). Required.
  --gpus GPUS                GPU numbers (comma-separated, e.g. 0,1,3): one pipeline stage
                             each. Required. With --gpu sim (the default when no NVIDIA GPU
                             is there) they name simulated devices.
  --microbatches M           microbatches per iteration (default 4)
  --gpu SPEC                 ergon GPU back-end: sim (default without nvidia-smi), nvml,
                             daemon:SOCKET
  --sim-model MODEL          the simulated GPU's timings (default bert-large)
  --profile CSV              ours on a real GPU: a stage profile for the r_s (with sim it is
                             made by `ergon profile sim`)
  --server URL               a running `ergon serve` (default: start one here, dump in OUT)
  --scheduler-args JSON      more EnvPipe scheduler arguments (e.g. '{"finish_limit": 2}')
  --out DIR                  results and the server dump (default ./envpipe-out)
  -h, --help                 this help

Environment: ERGON (the ergon binary, default: ergon on PATH), PYTHON (the python with
deepspeed and transformers, default python3), BLOCKING_POWER_W (default 83.64, A100).
EOF
}
set -u
ERGON=${ERGON:-ergon}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
type="" sched="" reconfig="" gpus="" M=4 gpu="" simmodel=bert-large profile="" server=""
extra='{}' out=./envpipe-out
while [ $# -gt 0 ]; do
  case "$1" in
    --type) type=$2; shift 2 ;;
    --scheduling) sched=$2; shift 2 ;;
    --reconfig) reconfig=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --microbatches) M=$2; shift 2 ;;
    --gpu) gpu=$2; shift 2 ;;
    --sim-model) simmodel=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --server) server=$2; shift 2 ;;
    --scheduler-args) extra=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "train_llama_deepspeed.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "train_llama_deepspeed.sh: $*" >&2; exit 2; }
case "$type" in baseline|uniform|envelope) ;; *) die "--type must be baseline, uniform or envelope, not '$type'" ;; esac
case "$sched" in 1f1b|ours) ;; *) die "--scheduling must be 1f1b or ours, not '$sched'" ;; esac
case "$reconfig" in default|greedy|balanced) ;; *) die "--reconfig must be default, greedy or balanced, not '$reconfig'" ;; esac
[ -n "$gpus" ] || die "--gpus is required (e.g. --gpus 0,1,2,3)"
N=$(echo "$gpus" | tr ',' '\n' | grep -c .)
[ "$N" -ge 2 ] || die "--gpus: a pipeline needs at least 2 GPUs"
if [ -z "$gpu" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=nvml; else gpu=sim; fi
fi
if [ "$gpu" != sim ]; then
  export CUDA_VISIBLE_DEVICES=$gpus DS_ACCELERATOR=${DS_ACCELERATOR:-cuda}
fi
mkdir -p "$out"
bp=${BLOCKING_POWER_W:-83.64}
args=(--model llama --microbatches "$M" --gpu "$gpu" --sim-model "$simmodel" --window-steps 1
      --out "$out/result")
if [ "$sched" = ours ]; then
  # EnvPipe's order needs r_s before the ranks register: libergon plans them (the server
  # plans the same r_s from its measured profile and refuses a job whose order differs).
  if [ -z "$profile" ]; then
    [ "$gpu" = sim ] || die "--scheduling ours on a real GPU needs --profile CSV (for the r_s)"
    profile=$out/profile.csv
    "$ERGON" profile sim --gpu a100 --stages "$N" --model "$simmodel" -o "$profile" 2>/dev/null ||
      die "ergon profile sim failed"
  fi
  "$ERGON" plan envpipe --profile "$profile" --microbatches "$M" --blocking-power "$bp" \
    --type "$type" --schedule ours --reconfig default --out "$out/order.json" >"$out/order.log" 2>&1 ||
    { cat "$out/order.log" >&2; die "ergon plan envpipe (for the r_s) failed"; }
  args+=(--schedule ours --schedule-from "$out/order.json")
fi
spid=""
cleanup() { [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null; }
trap cleanup EXIT
if [ -z "$server" ]; then
  rm -f "$out/serve.out"  # a rerun into the same directory must not read the last server's port
  "$ERGON" serve --port 0 --db "$out/server.db" --dump "$out/dump" >"$out/serve.out" 2>"$out/serve.log" &
  spid=$!
  for _ in $(seq 600); do grep -q listening "$out/serve.out" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$out/serve.out")
  [ -n "$port" ] || die "ergon serve did not start (see $out/serve.log)"
  server=http://127.0.0.1:$port
fi
sargs=$("$PYTHON" -c 'import json, sys
a = {"blocking_power_w": float(sys.argv[1]), "type": sys.argv[2], "scheduling": sys.argv[3],
     "reconfigure": sys.argv[4]}
a.update(json.loads(sys.argv[5]))
print(json.dumps(a))' "$bp" "$type" "$sched" "$reconfig" "$extra") || die "--scheduler-args: not a JSON object"
"$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "$N" "$HERE/train.py" "${args[@]}" \
  --server "$server" --scheduler EnvPipe --scheduler-args "$sargs" "$@"
rc=$?
if [ -n "$spid" ]; then
  grep -h "^terminated" "$out"/dump/*EnvPipe*/envpipe.log 2>/dev/null
fi
exit $rc
