#!/usr/bin/env bash
# torch_pipelining_nvml.sh: ergon's hooks inside PyTorch's own pipeline runtime set real NVML
# clocks: the run of torch_pipelining.sh for zbv and dualpipev (P=4, M=8; zero-bubble I/W and
# DualPipeV's overlapped steps) with `--gpu nvml:FAKE` (the fake libnvidia-ml.so, loaded by
# the real dlopen path, logging every call; 4 devices, device = rank). Checks: the order the
# hooks saw equals `ergon schedule`, all-max and planned losses bitwise identical (the check
# script's), every GPU had several different clocks locked during the planned runs, every
# instruction ran at its clock (the top clock, then the plan's: the client logs' freq_run, the
# clock the fake NVML took; tests/e2e/check_clocks.py), and every GPU's last clock call is a
# reset (the client restores the clocks when it closes).
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv torch torch.distributed.pipelining
[ -n "${ERGON_FAKE_NVML:-}" ] && [ -r "$ERGON_FAKE_NVML" ] || skip_or_fail "fake NVML not built"
# The fake NVML, like the real one, refuses clock changes to non-root processes.
[ "$(id -u)" = 0 ] || skip_or_fail "needs root (the fake NVML refuses clock changes otherwise)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
P=4 M=8
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages $P --split-backward -o "$tmp/sim.csv" \
  >/dev/null 2>&1 || fail "profile sim"
for s in zbv dualpipev; do
  "$ERGON" plan perseus --profile "$tmp/sim.csv" --schedule $s --stages $P --microbatches $M \
    --blocking-power 83.64 --out "$tmp/$s-$M-f" --formats csv,json --quiet || fail "$s: plan perseus"
  "$ERGON" choose --frontier "$tmp/$s-$M-f" --slowdown 1.05 --out "$tmp/$s-$M.json" >/dev/null ||
    fail "$s: choose"
done
export FAKE_NVML_DEVICES=$P FAKE_NVML_LOG="$tmp/nvml.log" OMP_NUM_THREADS=1
timeout -k 5 280 "$VPY" "$ERGON_SRC/examples/pytorch_pipeline/launch.py" --nproc $P \
  --timeout 240 -- "$ERGON_SRC/tests/e2e/torch_pipelining_check.py" --ergon "$ERGON" \
  --plans "$tmp" --cases "zbv:$M,dualpipev:$M" --steps 2 --gpu "nvml:$ERGON_FAKE_NVML" \
  --logs "$tmp/logs" >"$tmp/out.log" 2>&1
rc=$?
cat "$tmp/out.log"
[ $rc -eq 0 ] || fail "torch pipelining check on the fake NVML exited $rc"
[ "$(grep -c ' ok$' "$tmp/out.log")" -eq 2 ] || fail "expected 2 cases ok"
"$VPY" "$ERGON_SRC/tests/e2e/check_clocks.py" "$tmp/logs" --ranks $P \
  --segment "2:1410@$tmp/zbv-$M.json" --segment "2:$tmp/zbv-$M.json" \
  --segment "2:1410@$tmp/dualpipev-$M.json" --segment "2:$tmp/dualpipev-$M.json" ||
  fail "an instruction did not run at its clock"
for d in $(seq 0 $((P - 1))); do
  n=$(grep -E "^nvmlDeviceSetGpuLockedClocks $d [0-9]+ [0-9]+ = 0" "$tmp/nvml.log" |
      awk '{print $3}' | sort -u | wc -l)
  [ "$n" -ge 2 ] || fail "GPU $d: $n distinct clocks locked"
  last=$(grep -E "^nvmlDevice(Set|Reset)GpuLockedClocks $d " "$tmp/nvml.log" | tail -1)
  [ "$last" = "nvmlDeviceResetGpuLockedClocks $d = 0" ] || fail "GPU $d: last clock call '$last'"
  echo "GPU $d: $n distinct clocks locked, last call a reset"
done
echo "PASS"
