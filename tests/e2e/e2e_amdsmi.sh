#!/usr/bin/env bash
# e2e_amdsmi.sh: the PyTorch pipeline on (fake) AMD GPUs through `--gpu amdsmi:LIB`, the short
# path of `make e2e E2E_GPU=amdsmi:LIB`: a profiling sweep on 2 ranks whose client logs make a
# stage profile, and a killed rank whose clock its client's watchdog resets. The fake
# libamd_smi.so logs every state-changing call.
source "$(dirname "$0")/e2e_lib.bash"
[ -n "${ERGON_FAKE_AMDSMI:-}" ] && [ -r "$ERGON_FAKE_AMDSMI" ] || skip_or_fail "fake amdsmi not built"
[ "$(id -u)" = 0 ] || skip_or_fail "needs root (the fake amdsmi refuses clock changes otherwise)"
G="amdsmi:$ERGON_FAKE_AMDSMI"
launch_pid=""
cleanup() { [ -n "$launch_pid" ] && kill "$launch_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# 1. A profiling sweep at 1700 and 1200 MHz on two AMD GPUs, then a profile from its logs.
export FAKE_AMDSMI_DEVICES=2 FAKE_AMDSMI_LOG="$tmp/sweep.log"
launch 2 120 --microbatches 4 --gpu "$G" --sweep 1700,1200 --window-steps 1 \
  --log-dir "$tmp/logs" --out "$tmp/sweep" >"$tmp/sweep.txt" 2>&1 || { cat "$tmp/sweep.txt"; fail "sweep run"; }
for d in 0 1; do
  for c in 1700 1200; do
    grep -qx "amdsmi_set_gpu_clk_range $d $((c - 1)) $c 0 = 0" "$tmp/sweep.log" || { cat "$tmp/sweep.log"; fail "GPU $d never at $c MHz"; }
  done
  last=$(grep "^amdsmi_set_gpu_clk_range $d " "$tmp/sweep.log" | tail -1)
  [ "$last" = "amdsmi_set_gpu_clk_range $d 500 1700 0 = 0" ] || fail "sweep: GPU $d: last clock call '$last', not a reset"
done
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["gpu"] == "amdsmi", d["gpu"]' \
  "$tmp/sweep/result-0.json" || fail "the trainer did not run on amdsmi"
"$ERGON" profile logs "$tmp/logs" -o "$tmp/profile.csv" 2>"$tmp/err" || { cat "$tmp/err"; fail "profile from the AMD logs"; }
grep -q "^0,forward,1200," "$tmp/profile.csv" && grep -q "^1,backward,1700," "$tmp/profile.csv" || { cat "$tmp/profile.csv"; fail "profile rows"; }
echo "sweep: both GPUs at 1700 and 1200 MHz, reset at the end; profile from the logs"

# 2. SIGKILL of rank 1 holding 1300 MHz: its client's watchdog resets GPU 1; the launcher
# stops rank 0 with SIGTERM and its signal path resets GPU 0.
export FAKE_AMDSMI_LOG="$tmp/kill.log"
rm -f "$tmp/kill"
timeout -k 5 90 "$PY" "$EX/launch.py" --nproc 2 --timeout 60 --kill-rank 1 \
  --kill-when-file "$tmp/kill" -- "$TRAIN" --microbatches 4 --steps 100000 \
  --gpu "$G" --clock 1300 >"$tmp/kill.txt" 2>&1 &
launch_pid=$!
ok=0
for _ in $(seq 600); do
  ok=1
  for d in 0 1; do grep -q "^amdsmi_set_gpu_clk_range $d 1299 1300 0 = 0" "$tmp/kill.log" 2>/dev/null || ok=0; done
  [ $ok = 1 ] && break
  kill -0 "$launch_pid" 2>/dev/null || { cat "$tmp/kill.txt"; fail "the run ended before the kill"; }
  sleep 0.1
done
[ $ok = 1 ] || { cat "$tmp/kill.txt"; fail "clocks were never locked on both GPUs"; }
sleep 0.5
before=$(wc -l <"$tmp/kill.log")
touch "$tmp/kill"
wait "$launch_pid"; rc=$?; launch_pid=""
[ $rc -eq 137 ] || { cat "$tmp/kill.txt"; fail "launcher exit $rc, expected 137 (rank 1 killed by SIGKILL)"; }
for _ in $(seq 50); do
  tail -n +"$((before + 1))" "$tmp/kill.log" | grep -q "^amdsmi_set_gpu_clk_range 1 500 1700 0 = 0" && break
  sleep 0.1
done
for d in 0 1; do
  last=$(grep "^amdsmi_set_gpu_clk_range $d " "$tmp/kill.log" | tail -1)
  [ "$last" = "amdsmi_set_gpu_clk_range $d 500 1700 0 = 0" ] || { tail "$tmp/kill.log"; fail "kill: GPU $d: last clock call '$last', not a reset"; }
done
tail -n +"$((before + 1))" "$tmp/kill.log" | grep -q "^amdsmi_set_gpu_clk_range 1 500 1700 0 = 0" ||
  fail "no reset of GPU 1 after rank 1 was killed"
echo "kill: GPU 1 reset by the watchdog, GPU 0 by the signal path"
echo "PASS"
