#!/usr/bin/env bash
# serve_restart_python.sh: ergon's Python clients do not notice a server restart: a rank's
# ServerClient keeps its window across `kill -9` + restart (state in SQLite; lost
# connections retried with backoff), and ergon.zeus.PipelineFrequencyOptimizer started while
# the server is still down registers once it is up.
set -euo pipefail
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}" "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
command -v python3 >/dev/null || skip_or_fail "python3 not installed"
lib="$ERGON_BIN_DIR/libergon.so"
work=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > freqs_pipeline_00000.py <<'PY'
[[('forward', 1395), ('backward', 1380)],]
PY
# One configuration for both protocols: the Perseus-side job runs PointSolution on the same
# plan (2 all-max warm-up windows, then the plan: windows 0, 1, 2, then the end).
serve() {
  # synchronously: the background job truncates its output file only once it runs, and a
  # previous server's "listening" line must not be read as this one's
  rm -f "$work/out.txt"
  ZEUS_PFO_SCHEDULER_ARGS='{"solution_path": "freqs_pipeline_00000.py"}' \
    "$ERGON" serve --port "$port" --db "$work/s.db" >"$work/out.txt" 2>>"$work/log.txt" &
  pid=$!
  for _ in $(seq 600); do grep -q listening "$work/out.txt" 2>/dev/null && return 0; sleep 0.1; done
  fail "server did not start: $(tail -3 "$work/log.txt")"
}
wait_for() { for _ in $(seq 200); do grep -q "$1" "$2" 2>/dev/null && return 0; sleep 0.1; done; fail "no '$1' in $2: $(cat "$2")"; }
pre=""
if [ -n "${ERGON_SANITIZED:-}" ]; then
  pre=$(gcc -print-file-name=libasan.so 2>/dev/null || true)
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi
export LD_PRELOAD="$pre" ERGON_LIBRARY="$lib" PYTHONPATH="$ERGON_SRC/python" ERGON_GPU=sim:a100

cat > rank.py <<'PY'
import os, sys, time
from ergon.server_client import ServerClient
url = "http://127.0.0.1:%s" % sys.argv[1]
c = ServerClient(url, backoff_initial_s=0.1, backoff_max_s=0.5, max_retries=40, schedule_wait_s=5)
job = c.register_job(pp_degree=1, framework="torch", model_name="restart",
                     partition_method="uniform", microbatch_size=1, num_microbatches=1)
c.register_rank(job, rank=0, dp_rank=0, pp_rank=0, tp_rank=0,
                pipe_schedule=["forward", "backward"], power_states=[1410, 1395, 1380])
windows = []
while True:
    got = c.fetch_schedule(job, rank=0)
    if got is None:
        break
    w, states = got
    windows.append(w)
    c.report(job, w, rank=0, iterations=[(1.0, 100.0, {"forward": [(0.3, 30.0)]})])
    if w == 0:
        print("reported 0", flush=True)
        while not os.path.exists("killed"):  # the server is killed now
            time.sleep(0.05)
print("windows", windows, flush=True)
PY
serve
python3 rank.py "$port" >"$work/rank.txt" 2>&1 &
py=$!
wait_for "reported 0" "$work/rank.txt"
kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""
touch killed
sleep 1
serve
wait "$py" || fail "rank failed: $(cat "$work/rank.txt")"
grep -q "windows \[0, 1, 2\]" "$work/rank.txt" || fail "windows: $(cat "$work/rank.txt")"
grep -q '"event":"restore"' "$work/log.txt" || fail "the restarted server did not restore the job"

# The Zeus optimizer, started while the server is down.
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
python3 - "$port" >"$work/zeus.txt" 2>&1 <<'PY' &
import sys
from ergon.zeus import PipelineFrequencyOptimizer
opt = PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, "http://127.0.0.1:%s" % sys.argv[1])
assert opt.freq_schedule == [("forward", 1395), ("backward", 1380)], opt.freq_schedule
opt.close()
print("zeus ok", flush=True)
PY
zpy=$!
sleep 1
serve
wait "$zpy" || fail "Zeus optimizer failed: $(cat "$work/zeus.txt")"
grep -q "zeus ok" "$work/zeus.txt" || fail "$(cat "$work/zeus.txt")"
echo ok
