#!/usr/bin/env bash
# e2e_kill.sh: killing one rank of the PyTorch pipeline mid-run leaves no GPU clock changed.
# Three ranks drive three (fake) NVML GPUs with a Perseus plan; once every GPU has had its
# clock locked, rank 1 gets SIGKILL (its client's watchdog must reset GPU 1) and the
# launcher stops the others with SIGTERM (their clients' signal path must reset theirs).
# The fake libnvidia-ml logs every state-changing call: the last clock call of every GPU
# must be a reset. Run twice: with a local plan file, and (when this build has `ergon serve`)
# with the clocks of every window coming from a server job, which must end up "aborted".
source "$(dirname "$0")/e2e_lib.bash"
[ -n "${ERGON_FAKE_NVML:-}" ] && [ -r "$ERGON_FAKE_NVML" ] || skip_or_fail "fake NVML not built"
# The fake NVML, like the real one, refuses clock changes to non-root processes.
[ "$(id -u)" = 0 ] || skip_or_fail "needs root (the fake NVML refuses clock changes otherwise)"

S=3 M=4
export FAKE_NVML_DEVICES=$S
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages $S -o "$tmp/sim.csv" 2>/dev/null || fail "profile sim"
"$ERGON" plan perseus --profile "$tmp/sim.csv" --stages $S --microbatches $M --blocking-power 83.64 \
  --out "$tmp/frontier" --formats csv,json --quiet || fail "plan perseus"
"$ERGON" choose --frontier "$tmp/frontier" --slowdown 1.05 --out "$tmp/plan.json" >/dev/null || fail "choose"

launch_pid="" srv_pid=""
cleanup() {
  [ -n "$launch_pid" ] && kill "$launch_pid" 2>/dev/null
  [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null && wait "$srv_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# kill_run NAME TRAIN_ARGS...: start S ranks on fake GPUs, SIGKILL rank 1 once every GPU has
# had at least 3 clock locks, check that every GPU's last clock call is a reset.
kill_run() {
  local name=$1; shift
  export FAKE_NVML_LOG="$tmp/$name-nvml.log"
  rm -f "$tmp/kill"
  timeout -k 5 200 "$PY" "$EX/launch.py" --nproc $S --timeout 180 --kill-rank 1 \
    --kill-when-file "$tmp/kill" -- "$TRAIN" --microbatches $M --steps 100000 \
    --gpu "nvml:$ERGON_FAKE_NVML" "$@" >"$tmp/$name-out.txt" 2>&1 &
  launch_pid=$!
  local ok=0 d n
  for _ in $(seq 1500); do
    ok=1
    for d in 0 1 2; do
      n=$(grep -c "^nvmlDeviceSetGpuLockedClocks $d .* = 0" "$FAKE_NVML_LOG" 2>/dev/null)
      [ "${n:-0}" -ge 3 ] || ok=0
    done
    [ $ok = 1 ] && break
    kill -0 "$launch_pid" 2>/dev/null || { cat "$tmp/$name-out.txt"; fail "$name: the run ended before the kill"; }
    sleep 0.1
  done
  [ $ok = 1 ] || { cat "$tmp/$name-out.txt"; fail "$name: clocks were never locked on all $S GPUs"; }
  local before; before=$(wc -l <"$FAKE_NVML_LOG")
  touch "$tmp/kill"
  wait "$launch_pid"; local rc=$?; launch_pid=""
  grep -v '^step \|^window ' "$tmp/$name-out.txt" | grep -v '^ \|^Traceback\|^RuntimeError'
  [ $rc -eq 137 ] || fail "$name: launcher exit $rc, expected 137 (rank 1 killed by SIGKILL)"
  grep -q "SIGKILL to rank 1" "$tmp/$name-out.txt" || fail "$name: rank 1 was not killed"
  for d in 0 1 2; do
    local last; last=$(grep -E "^nvmlDevice(Set|Reset)GpuLockedClocks $d " "$FAKE_NVML_LOG" | tail -1)
    case "$last" in
      "nvmlDeviceResetGpuLockedClocks $d = 0") echo "$name: GPU $d: clocks reset ($last)";;
      *) tail -20 "$FAKE_NVML_LOG"; fail "$name: GPU $d: last clock call is '$last', not a reset";;
    esac
  done
  # GPU 1's reset came after the kill (its owner could not do it: the watchdog did).
  tail -n +"$((before + 1))" "$FAKE_NVML_LOG" | grep -q "^nvmlDeviceResetGpuLockedClocks 1 = 0" ||
    fail "$name: no reset of GPU 1 after rank 1 was killed"
}

# job_state URL JOB: "<state> <message>" of a server job (GET /v1/jobs/{id}).
job_state() {
  "$PY" - "$1" "$2" <<'PY'
import json, sys, urllib.parse, urllib.request
url, job = sys.argv[1], sys.argv[2]
with urllib.request.urlopen("%s/v1/jobs/%s" % (url, urllib.parse.quote(job, safe="")), timeout=5) as r:
    d = json.load(r)
print(d["state"], d.get("message", ""))
PY
}

kill_run plan --plan "$tmp/plan.json"

# Without permission to change clocks (FAKE_NVML_DENY, as for a non-root user on real NVML)
# the run stops after its first iteration with a clear message, not silently at max clocks.
FAKE_NVML_DENY=1 FAKE_NVML_LOG="$tmp/deny.log" launch $S 60 --microbatches $M --steps 50 \
  --gpu "nvml:$ERGON_FAKE_NVML" --plan "$tmp/plan.json" >"$tmp/deny.txt" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "a run without permission to change clocks succeeded"
grep -q "the GPU clocks could not be changed: EPERM" "$tmp/deny.txt" || {
  cat "$tmp/deny.txt"; fail "no clear permission error"; }
echo "without permission: $(grep -m1 'could not be changed' "$tmp/deny.txt")"

if ! "$ERGON" serve --help >/dev/null 2>&1; then
  note_or_fail "this build has no \`ergon serve\`: the server part (job marked aborted) cannot run"
  echo "PASS"; exit 0
fi
# The server runs TwoFrequencies (forward 1200 MHz, backward 1305 MHz: clocks change every
# instruction), aborts a job whose rank is silent for 5 s, and the surviving ranks abort the
# job themselves when their neighbour's connection breaks.
"$ERGON" serve --port 0 --db "$tmp/s.db" --dump "$tmp/dump" --scheduler TwoFrequencies \
  --scheduler-args '{"forward_freq": 1200, "backward_freq": 1305}' --rank-timeout 5 \
  >"$tmp/srv.txt" 2>"$tmp/srv.log" &
srv_pid=$!
for _ in $(seq 600); do grep -q listening "$tmp/srv.txt" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/.*listening on \(http[^ ]*\)$/\1/p' "$tmp/srv.txt")
[ -n "$url" ] || { cat "$tmp/srv.log"; fail "ergon serve did not start"; }
kill_run server --server "$url" --window-steps 2 --job-file "$tmp/job.txt"
job=$(cat "$tmp/job.txt")
state=""
for _ in $(seq 100); do
  state=$(job_state "$url" "$job")
  case "$state" in aborted*) break;; esac
  sleep 0.2
done
echo "server: job $job: $state"
case "$state" in aborted*) ;; *) cat "$tmp/srv.log" | tail -5; fail "the server did not mark the job aborted ($state)";; esac

# (Waits allow for torch 2.x, whose import alone takes tens of seconds on a loaded machine.)
# A rank that hangs without dying (it sleeps at step 3: no request, no heartbeat, its
# neighbours block in their receives) is noticed by the server alone (--rank-timeout 5).
export FAKE_NVML_LOG="$tmp/stall-nvml.log"
timeout -k 5 200 "$PY" "$EX/launch.py" --nproc $S --timeout 180 -- "$TRAIN" \
  --microbatches $M --steps 100000 --gpu "nvml:$ERGON_FAKE_NVML" --server "$url" \
  --window-steps 2 --job-file "$tmp/job2.txt" --stall-rank 1 --stall-step 3 \
  >"$tmp/stall-out.txt" 2>&1 &
launch_pid=$!
state=""
for _ in $(seq 1500); do
  if [ -s "$tmp/job2.txt" ]; then
    state=$(job_state "$url" "$(cat "$tmp/job2.txt")")
    case "$state" in aborted*) break;; esac
  fi
  sleep 0.1
done
echo "server: stalled job: $state"
kill -TERM "$launch_pid" 2>/dev/null; wait "$launch_pid"; launch_pid=""
case "$state" in aborted*) ;; *) cat "$tmp/stall-out.txt"; fail "the server did not abort the job of a silent rank ($state)";; esac
grep -q "rank 1 stalls at step 3" "$tmp/stall-out.txt" || fail "rank 1 did not stall"
for d in 0 1 2; do
  last=$(grep -E "^nvmlDevice(Set|Reset)GpuLockedClocks $d " "$FAKE_NVML_LOG" | tail -1)
  [ "$last" = "nvmlDeviceResetGpuLockedClocks $d = 0" ] || fail "stall: GPU $d: last clock call '$last'"
done
echo "stall: every GPU's clocks reset after the launcher was stopped"
echo "PASS"
