#!/usr/bin/env bash
# zeus_python.sh: ergon.zeus.PipelineFrequencyOptimizer (Zeus's constructor and methods on
# libergon) against `ergon serve` started with Zeus's documented variables: it registers,
# fetches its schedule once, sets each instruction's clock through libergon's client (a
# simulated GPU here), checks instruction names and counts like Zeus, restores at close.
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
cat > freqs_pipeline_00001.py <<'PY'
[
[('forward', 1395), ('forward', 1380), ('backward', 1200), ('backward', 1410)],
]
PY
ZEUS_PFO_SCHEDULER_ARGS='{"solution_path": "freqs_pipeline_00001.py"}' \
  "$ERGON" serve --port 0 --db "$work/s.db" >"$work/out.txt" 2>"$work/log.txt" &
pid=$!
for _ in $(seq 600); do grep -q listening "$work/out.txt" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out.txt")
[ -n "$port" ] || { echo "FAIL: server did not start: $(cat "$work/log.txt")"; exit 1; }
pre=""
if [ -n "${ERGON_SANITIZED:-}" ]; then
  pre=$(gcc -print-file-name=libasan.so 2>/dev/null || true)
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi
LD_PRELOAD="$pre" ERGON_LIBRARY="$lib" ERGON_GPU=sim:a100 PYTHONPATH="$ERGON_SRC/python" \
  python3 - "$port" <<'PY'
import inspect, sys
from ergon.zeus import PipelineFrequencyOptimizer
params = list(inspect.signature(PipelineFrequencyOptimizer.__init__).parameters)
assert params == ["self", "rank", "dp_rank", "pp_rank", "tp_rank", "device_id", "dp_degree",
                  "pp_degree", "tp_degree", "world_size", "server_url", "job_metadata"], params
url = "http://127.0.0.1:%s" % sys.argv[1]
opt = PipelineFrequencyOptimizer(rank=0, dp_rank=0, pp_rank=0, tp_rank=0, device_id=0,
                                 dp_degree=1, pp_degree=1, tp_degree=1, world_size=1,
                                 server_url=url, job_metadata="pytest")
assert opt.job_id.endswith("+dp1+pp1+tp1+PointSolution+pytest"), opt.job_id
assert opt.freq_schedule == [("forward", 1395), ("forward", 1380), ("backward", 1200),
                             ("backward", 1410)], opt.freq_schedule
for step in range(2):
    opt.on_step_begin()
    for name, want in opt.freq_schedule:
        opt.on_instruction_begin(name)
        opt._client.sync(5.0)
        assert opt._client.active_clock == want, (name, opt._client.active_clock, want)
        opt.on_instruction_end(name)
    opt.on_step_end()
# Zeus's checks: a wrong name, an iteration too long, one too short.
try:
    opt.on_instruction_begin("backward")
    raise SystemExit("a wrong instruction name must raise")
except RuntimeError as e:
    assert "not backward: forward" in str(e), e
opt.freq_schedule_iter = iter(opt.freq_schedule)
for name, _ in opt.freq_schedule:
    opt.on_instruction_begin(name)
try:
    opt.on_instruction_begin("forward")
    raise SystemExit("an extra instruction must raise")
except RuntimeError as e:
    assert "fewer frequencies" in str(e), e
opt.freq_schedule_iter = iter(opt.freq_schedule)
opt.on_instruction_begin("forward")
try:
    opt.on_step_end()
    raise SystemExit("a short iteration must raise")
except RuntimeError as e:
    assert "more frequencies than expected" in str(e), e
opt.close()
print("ok")
PY
grep -q '"event":"register_job"' "$work/log.txt" || { echo "FAIL: no register_job in the log"; exit 1; }
