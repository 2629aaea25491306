#!/usr/bin/env bash
# serve_python.sh: the Python binding of the server client (python/ergon/server_client.py)
# drives a 2-rank job through `ergon serve` to its end, plus an error path.
set -euo pipefail
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}" "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
command -v python3 >/dev/null || skip_or_fail "python3 not installed"
lib="$ERGON_BIN_DIR/libergon.so"
[ -e "$lib" ] || { echo "FAIL: $lib missing"; exit 1; }
work=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
"$ERGON" serve --port 0 --db "$work/s.db" --dump "$work/dump" --scheduler AllMaxFrequency \
  --scheduler-args '{"num_iters": 2}' >"$work/out.txt" 2>"$work/log.txt" &
pid=$!
for _ in $(seq 600); do grep -q listening "$work/out.txt" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out.txt")
[ -n "$port" ] || { echo "FAIL: server did not start"; exit 1; }
# ASan builds: the binding loads an instrumented library into python.
pre=""
if [ -n "${ERGON_SANITIZED:-}" ]; then
  pre=$(gcc -print-file-name=libasan.so 2>/dev/null || true)
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi
LD_PRELOAD="$pre" ERGON_LIBRARY="$lib" PYTHONPATH="$ERGON_SRC/python" python3 - "$port" <<'PY'
import sys, threading
from ergon.server_client import ServerClient, ServerError
url = "http://127.0.0.1:%s" % sys.argv[1]
c = ServerClient(url)
job = c.register_job(pp_degree=2, framework="torch", model_name="py", partition_method="uniform",
                     microbatch_size=1, num_microbatches=2)
assert "+torch+py+uniform+dp1+pp2+tp1+mbs1+nmb2+AllMaxFrequency" in job, job
sched = ["forward", "forward", "p2p", "backward", "backward", "step"]
seen = {}
def rank(r):
    with ServerClient(url, schedule_wait_s=2) as cl:
        cl.register_rank(job, rank=r, dp_rank=0, pp_rank=r, tp_rank=0, pipe_schedule=sched,
                         power_states=[1410, 1200])
        while True:
            got = cl.fetch_schedule(job, r)
            if got is None:
                break
            window, states = got
            assert states == [1410] * len(sched), states
            seen.setdefault(r, []).append(window)
            # window 1 also carries receive waits (wait_breakdown, the EnvPipe scheduler's)
            waits = {"forward": [0.0, 0.05], "backward": [0.01, 0.0]} if window == 1 else {}
            cl.report(job, window, r,
                      [(1.0, 200.0, {"forward": [(0.1, 20.0), (0.1, None)]}, waits)] * 3)
ts = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
[t.start() for t in ts]
[t.join() for t in ts]
assert seen == {0: [0, 1], 1: [0, 1]}, seen
try:
    c.set_straggler(job, slowdown=1.2)
    raise SystemExit("set_straggler on a non-Frontier job must fail")
except ServerError as e:
    assert "Frontier" in str(e), e
try:
    c.fetch_schedule("no-such-job", 0)
    raise SystemExit("unknown job must fail")
except ServerError as e:
    assert e.status == 6, e.status
# Options and the job description cross by name and as JSON (no mirrored struct): what the
# library checks comes back as its own error.
for bad in ({"request_timeout_s": -1}, {"max_retries": -1}, {"backoff_max_s": 0.01, "backoff_initial_s": 1}):
    try:
        ServerClient(url, **bad)
        raise SystemExit("options %r must be refused" % (bad,))
    except ServerError as e:
        assert e.status == 1 and "invalid client timeouts" in str(e), (bad, e)
try:
    ServerClient(url, max_retries=2.5)
    raise SystemExit("a fractional max_retries must be refused")
except TypeError as e:
    assert "max_retries" in str(e), e
with ServerClient(url, max_retries=0, request_timeout_s=5, schedule_timeout_s=float("inf")) as c2:
    j2 = c2.register_job(pp_degree=1, framework="jax", model_name="opt", partition_method="p",
                         microbatch_size=2, num_microbatches=3, dp_degree=2, tp_degree=1,
                         scheduler="AllMaxFrequency", scheduler_args={"num_iters": 1},
                         mode="frequency")
    assert "+jax+opt+p+dp2+pp1+tp1+mbs2+nmb3+AllMaxFrequency" in j2, j2
    try:
        c2.register_job(pp_degree=1, framework="jax", model_name="opt", partition_method="p",
                        microbatch_size=2, num_microbatches=3, scheduler_args=[1, 2])
        raise SystemExit("scheduler_args that are not an object must be refused")
    except ServerError as e:
        assert e.status == 1 and "scheduler_args" in str(e), e
c.close()
print("python ok")
PY
# the waits reached the server: window 1's dump has them, window 0's (none sent) does not
grep -q '"wait_breakdown": {"forward": \[\[0.0, 0.05\], \[0.0, 0.05\], \[0.0, 0.05\]\], "backward"' \
  "$work"/dump/*/1.prof.json || { echo "FAIL: no wait_breakdown in 1.prof.json"; exit 1; }
! grep -q wait_breakdown "$work"/dump/*/0.prof.json || { echo "FAIL: 0.prof.json has waits"; exit 1; }
echo ok
