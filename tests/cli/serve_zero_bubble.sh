#!/usr/bin/env bash
# serve_zero_bubble.sh: /v1 jobs of a zero-bubble schedule (zbv, P=2, V=2, M=4) through
# `ergon serve` and the Python server client: ranks register pipe_schedules with
# backward_input/backward_weight (their libergon order, p2p between); a PointSolution job
# serves a `plan perseus --schedule zbv` plan (each compute instruction gets the plan's
# clock, in the rank's order); an InstructionProfiler job writes backward_input and
# backward_weight rows from the reported breakdowns.
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
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages 2 --split-backward -o sim.csv >/dev/null 2>&1
"$ERGON" plan perseus --profile sim.csv --schedule zbv --stages 2 --microbatches 4 \
  --blocking-power 83.64 --out frontier --formats csv,json --quiet
"$ERGON" choose --frontier frontier --slowdown 1.01 --out plan.json >/dev/null
"$ERGON" serve --port 0 --db "$work/s.db" --dump "$work/dump" --plans-dir "$work" >"$work/out.txt" 2>"$work/log.txt" &
pid=$!
for _ in $(seq 600); do grep -q listening "$work/out.txt" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out.txt")
[ -n "$port" ] || { echo "FAIL: server did not start"; exit 1; }
pre=""
if [ -n "${ERGON_SANITIZED:-}" ]; then
  pre=$(gcc -print-file-name=libasan.so 2>/dev/null || true)
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi
LD_PRELOAD="$pre" ERGON_LIBRARY="$lib" PYTHONPATH="$ERGON_SRC/python" python3 - "$port" "$work" <<'PY'
import csv, glob, json, sys, threading
import ergon
from ergon.server_client import ServerClient
url, work = "http://127.0.0.1:%s" % sys.argv[1], sys.argv[2]
NAMES = {ergon.FORWARD: "forward", ergon.BACKWARD: "backward",
         ergon.BACKWARD_INPUT: "backward_input", ergon.BACKWARD_WEIGHT: "backward_weight"}
P, M = 2, 4
pipes = {}
for r in range(P):
    order, _ = ergon.rank_order("zbv", P, M, r)
    pipe = ["load"]
    for k, *_ in order:
        pipe += [NAMES[k], "p2p"]
    pipes[r] = pipe + ["step"]
    assert "backward_input" in pipe and "backward_weight" in pipe
plan = json.load(open(work + "/plan.json"))
assert plan["schedule"] == "zbv"
states = sorted({f for s in plan["stages"] for f in s["freq_mhz"]} | {1410, 1395}, reverse=True)

def run_job(scheduler, args, fn):
    c = ServerClient(url)
    job = c.register_job(pp_degree=P, framework="torch", model_name="zb", partition_method="uniform",
                         microbatch_size=1, num_microbatches=M, scheduler=scheduler,
                         scheduler_args=args, mode="frequency")
    seen, errs = {}, []
    def rank(r):
        try:
            with ServerClient(url, schedule_wait_s=5) as cl:
                cl.register_rank(job, rank=r, dp_rank=0, pp_rank=r, tp_rank=0,
                                 pipe_schedule=pipes[r], power_states=states)
                while True:
                    got = cl.fetch_schedule(job, r)
                    if got is None:
                        break
                    window, ps = got
                    seen.setdefault(r, []).append(ps)
                    cl.report(job, window, r, fn(r, ps))
        except Exception as e:
            errs.append(repr(e))
    ts = [threading.Thread(target=rank, args=(r,)) for r in range(P)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errs, errs
    c.close()
    return job, seen

def its(r, ps):
    bd = {"forward": [(0.1, 20.0)] * (2 * M), "backward_input": [(0.12, 25.0)] * (2 * M),
          "backward_weight": [(0.08, 15.0)] * (2 * M)}
    return [(1.0, 200.0, bd)] * 3

# PointSolution: one window of uniform(max) warm-up, then the plan, then the end.
job, seen = run_job("PointSolution", {"solution_path": work + "/plan.json", "warmup_iters": 1}, its)
for r in range(P):
    assert len(seen[r]) == 2, seen[r]
    assert set(seen[r][0]) == {max(states)}, seen[r][0]
    compute = [s for s, n in zip(seen[r][1], pipes[r]) if n in NAMES.values()]
    assert compute == plan["stages"][r]["freq_mhz"], (r, compute, plan["stages"][r]["freq_mhz"])
    assert min(compute) < 1410, compute
print("PointSolution served the zbv plan: %d clocks per rank, %d distinct"
      % (len(compute), len(set(f for s in plan["stages"] for f in s["freq_mhz"]))))

# InstructionProfiler: 2 windows at max, one per state down to the minimum.
job, seen = run_job("InstructionProfiler", {"minimum_power_state": 1395}, its)
files = glob.glob(work + "/dump/*InstructionProfiler*/*.csv")
assert files, glob.glob(work + "/dump/*/*")
rows = list(csv.DictReader(open(files[0])))
kinds = {(int(x["stage"]), x["instruction"]) for x in rows}
for r in range(P):
    assert (r, "backward_input") in kinds and (r, "backward_weight") in kinds, kinds
bi = [x for x in rows if x["instruction"] == "backward_input"]
assert all(abs(float(x["time"]) - 0.12) < 1e-9 for x in bi), bi
print("InstructionProfiler wrote %d rows: %s" % (len(rows), sorted({k for _, k in kinds})))
PY
echo PASS
