#!/usr/bin/env bash
# zeus_real_client.sh: the real Zeus package (zeus==0.16.0 from PyPI, requirements.txt) and its
# own PipelineFrequencyOptimizer on 4 CPU ranks (torch.distributed, gloo) against `ergon serve`
# (issue 22 item 4; docs/zeus-protocol.md §12): PointSolution with a Zeus-format plan and
# InstructionProfiler, on a server started the Perseus way (--scheduler/--scheduler-args, as
# the README says) and the Zeus way (ZEUS_PFO_SCHEDULER/_ARGS). Every rank registers through
# Zeus's client, gets its schedule, runs every iteration of a small real 1F1B pipeline
# (send/recv of activations and gradients between the ranks) calling the optimizer's
# on_step_begin/on_instruction_begin/on_instruction_end/on_step_end, with no error; its GPU
# clocks are set by Zeus's FrequencyController process through pynvml.
# What is not Zeus's: the GPU. pynvml dlopens libnvidia-ml.so.1, found here through
# LD_LIBRARY_PATH in ergon's fake NVML (tests/fake_nvml, 4 devices), whose call log shows the
# clocks Zeus set. PyTorch has no CUDA device here, so the three CUDA calls Zeus makes are
# answered by the trainer: torch.cuda.set_device (PipelineFrequencyOptimizer.__init__) and
# torch.cuda.synchronize (sync_execution, in on_instruction_begin) do nothing, and
# torch.cuda.is_available (zeus.utils.framework.torch_is_available, which sync_execution asks
# first) says True; nothing of the zeus package is patched. The four servers (two kinds x two
# ways of starting) run side by side and the same 4 rank processes train against each in turn
# (one torch import per rank: this machine has 2 cores). A fifth server has a token and TLS:
# Zeus's client reaches it through server_url="https://ergon:TOKEN@host:port" and
# SSL_CERT_FILE.
# Skip by design: the ASan build (the venv's Python cannot load an instrumented libergon;
# venv_lib.bash).
set -euo pipefail
: "${ERGON:?}"
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv zeus.optimizer.pipeline_frequency.optimizer torch
[ -n "${ERGON_FAKE_NVML:-}" ] && [ -f "$ERGON_FAKE_NVML" ] || { echo "FAIL: the fake NVML is not built (ERGON_FAKE_NVML='${ERGON_FAKE_NVML:-}')"; exit 1; }
command -v curl >/dev/null || skip_or_fail "curl not installed"
work=$(mktemp -d)
pid=""; rpids=()
cleanup() {
  for p in "${rpids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"
P=4 M=4 ITERS=3

# The stages' 1F1B order, as the trainer runs it, and a Zeus plan in lowtime's layout
# (freqs_pipeline_%05d.py: a repr'd list of (name, clock) tuples per stage) on the fake
# GPU's clocks (1410..210 MHz in 15 MHz steps).
cat > order.py <<'PY'
def one_f_one_b(P, M, s):
    warm = min(P - s - 1, M)
    out = ["forward"] * warm
    for _ in range(M - warm):
        out += ["forward", "backward"]
    return out + ["backward"] * warm
PY
"$VPY" - "$P" "$M" <<'PY'
import sys
sys.path.insert(0, ".")
from order import one_f_one_b
P, M = int(sys.argv[1]), int(sys.argv[2])
with open("freqs_pipeline_00042.py", "w") as f:
    f.write("[\n")
    for s in range(P):
        names = one_f_one_b(P, M, s)
        plan = [(n, 1410 - 15 * ((3 * s + k) % 7)) for k, n in enumerate(names)]
        f.write(repr(plan) + ",\n")
    f.write("]\n# Iteration 42 cost change: -1.0\n# Iteration 42 total cost: 10.0\n"
            "# Iteration 42 total cost with P2P: 12.0\n")
PY

cat > trainer.py <<'PY'
# One pipeline rank of a small model, with Zeus's PipelineFrequencyOptimizer, trained against
# each server in turn.
import json, os, sys
import torch
import torch.distributed as dist
rank, world, iters, M = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
urls = sys.argv[5:]
sys.path.insert(0, os.getcwd())
from order import one_f_one_b
# No CUDA device here: Zeus's three CUDA calls are answered (see the test's header).
torch.cuda.set_device = lambda device: None
torch.cuda.synchronize = lambda device=None: None
torch.cuda.is_available = lambda: True
from zeus.optimizer.pipeline_frequency import PipelineFrequencyOptimizer
dist.init_process_group("gloo", init_method="file://" + os.path.abspath("rdv"), rank=rank, world_size=world)
order = one_f_one_b(world, M, rank)
for run, url in enumerate(urls):
    opt = PipelineFrequencyOptimizer(rank=rank, dp_rank=0, pp_rank=rank, tp_rank=0, device_id=rank,
                                     dp_degree=1, pp_degree=world, tp_degree=1, world_size=world,
                                     server_url=url, job_metadata="ci")
    json.dump({"job": opt.job_id, "schedule": opt.freq_schedule}, open("sched%d_%d.json" % (run, rank), "w"))
    torch.manual_seed(rank)
    lin = torch.nn.Linear(16, 16)
    sgd = torch.optim.SGD(lin.parameters(), lr=0.01)
    for it in range(iters):
        opt.on_step_begin()
        stash, sends, fi, bi = {}, [], 0, 0
        for name in order:
            opt.on_instruction_begin(name)
            if name == "forward":
                if rank == 0:
                    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(it * M + fi))
                else:
                    x = torch.empty(4, 16)
                    dist.recv(x, src=rank - 1)
                x.requires_grad_()
                y = lin(x)
                stash[fi] = (x, y)
                if rank < world - 1:
                    sends.append(dist.isend(y.detach().contiguous(), dst=rank + 1))
                fi += 1
            else:
                x, y = stash.pop(bi)
                if rank == world - 1:
                    y.pow(2).mean().backward()
                else:
                    g = torch.empty(4, 16)
                    dist.recv(g, src=rank + 1)
                    y.backward(g)
                if rank > 0:
                    sends.append(dist.isend(x.grad.contiguous(), dst=rank - 1))
                bi += 1
            opt.on_instruction_end(name)
        for h in sends:
            h.wait()
        sgd.step()
        sgd.zero_grad()
        opt.on_step_end()
    dist.barrier()
    print("rank %d run %d finished %d iterations" % (rank, run, iters), flush=True)
dist.destroy_process_group()
PY

export LD_LIBRARY_PATH="$(dirname "$ERGON_FAKE_NVML")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FAKE_NVML_DEVICES=4 FAKE_NVML_LOG="$work/nvml.log"
unset CUDA_VISIBLE_DEVICES

names=(); kinds=(); urls=(); spids=()
serve() { # name, kind (point|profiler), env assignments... -- serve options...
  local name=$1 kind=$2; shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  # synchronously: the background job truncates its output file only once it runs, and a
  # previous server's "listening" line must not be read as this one's
  rm -f "$work/out-$name.txt" "$work/log-$name.txt"
  env "${envs[@]}" "$ERGON" serve --port 0 --db "$work/$name.db" --dump "$work/dump-$name" "$@" \
    >"$work/out-$name.txt" 2>"$work/log-$name.txt" &
  local p=$!
  spids+=($p)
  for _ in $(seq 600); do grep -q listening "$work/out-$name.txt" 2>/dev/null && break; sleep 0.1; done
  local port; port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out-$name.txt")
  [ -n "$port" ] || fail "$name: server did not start: $(cat "$work/log-$name.txt")"
  names+=("$name"); kinds+=("$kind"); urls+=("http://127.0.0.1:$port")
}
cleanup_servers() { for p in "${spids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done; }
trap 'cleanup_servers; cleanup' EXIT

if [ "$(id -u)" != 0 ]; then
  why="the fake NVML refuses clock changes to non-root users, as NVML does (run as root)"
  skip_or_fail "$why"
fi
serve point-perseus-way point -- \
  --scheduler PointSolution --scheduler-args '{"solution_path": "freqs_pipeline_00042.py"}' --mode frequency
serve point-zeus-way point ZEUS_PFO_SCHEDULER_ARGS='{"solution_path": "freqs_pipeline_00042.py"}' --
serve profiler-zeus-way profiler ZEUS_PFO_SCHEDULER=InstructionProfiler \
  ZEUS_PFO_SCHEDULER_ARGS="{\"num_microbatches\": $M}" --
serve profiler-perseus-way profiler -- \
  --scheduler InstructionProfiler --scheduler-args "{\"num_microbatches\": $M}" --mode frequency
# A token and TLS: Zeus's client sends no header of its own, but httpx sends the URL's
# user:password as Basic credentials and verifies https against SSL_CERT_FILE.
(umask 077; openssl rand -hex 32 > token)
openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 2 -subj /CN=localhost \
  -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null || fail "openssl req"
serve point-token-tls point -- --token-file token --tls-cert cert.pem --tls-key key.pem \
  --scheduler PointSolution --scheduler-args '{"solution_path": "freqs_pipeline_00042.py"}' --mode frequency
urls[4]="https://ergon:$(cat token)@127.0.0.1:${urls[4]##*:}"
export SSL_CERT_FILE="$work/cert.pem"

for r in $(seq 0 $((P - 1))); do
  timeout 600 "$VPY" trainer.py "$r" "$P" "$ITERS" "$M" "${urls[@]}" >"rank$r.txt" 2>&1 &
  rpids+=($!)
done
bad=0
for r in $(seq 0 $((P - 1))); do
  wait "${rpids[$r]}" || { bad=1; echo "# rank $r failed: $(tail -8 "rank$r.txt")"; }
done
rpids=()
[ $bad = 0 ] || fail "a rank failed"
for r in $(seq 0 $((P - 1))); do
  for i in "${!names[@]}"; do
    grep -q "rank $r run $i finished $ITERS iterations" "rank$r.txt" || fail "${names[$i]}: rank $r: $(cat "rank$r.txt")"
  done
  grep -qi "error\|warning\|traceback" "rank$r.txt" && fail "rank $r printed: $(cat "rank$r.txt")"
done
"$VPY" - "$P" "$M" "$FAKE_NVML_LOG" "${names[@]/%/=}" "${kinds[@]}" <<'PY' || fail "schedules or clocks"
import ast, json, sys
sys.path.insert(0, ".")
from order import one_f_one_b
P, M, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rest = sys.argv[4:]
names = [n.rstrip("=") for n in rest[: len(rest) // 2]]
kinds = rest[len(rest) // 2:]
plan = ast.literal_eval(open("freqs_pipeline_00042.py").read())
sets, resets = {}, set()
for line in open(log):
    f = line.split()
    if f[0] == "nvmlDeviceSetGpuLockedClocks" and f[-1] == "0":
        sets.setdefault(int(f[1]), set()).add(int(f[2]))
    if f[0] == "nvmlDeviceResetGpuLockedClocks" and f[-1] == "0":
        resets.add(int(f[1]))
for run, (name, kind) in enumerate(zip(names, kinds)):
    jobs = set()
    for r in range(P):
        d = json.load(open("sched%d_%d.json" % (run, r)))
        jobs.add(d["job"])
        got = [tuple(x) for x in d["schedule"]]
        want = plan[r] if kind == "point" else [(n, 1410) for n in one_f_one_b(P, M, r)]
        assert got == want, (name, r, got, want)
        clocks = {c for _, c in want}
        assert clocks <= sets.get(r, set()), (name, "device", r, "set", sets.get(r), "want", clocks)
    assert len(jobs) == 1, (name, jobs)
    job = jobs.pop()
    sched = "PointSolution" if kind == "point" else "InstructionProfiler"
    assert job.endswith("+dp1+pp%d+tp1+%s+ci" % (P, sched)), (name, job)
    print("# %s: job %s: %d ranks got the planned schedules" % (name, job, P))
assert resets == set(range(P)), ("Zeus's controller reset the clocks of devices", resets)
print("# clocks set on every device (%s); reset on exit" % {d: sorted(c) for d, c in sets.items()})
PY
echo ok
