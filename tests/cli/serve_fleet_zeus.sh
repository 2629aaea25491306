#!/usr/bin/env bash
# serve_fleet_zeus.sh: a Zeus PFO job in the fleet of `ergon serve` (issue 40; docs/fleet.md,
# docs/zeus-protocol.md §11). The server is configured the Zeus way, ZEUS_PFO_SCHEDULER=Frontier
# with ZEUS_PFO_SCHEDULER_ARGS naming a frontier directory (2 stages x 4 microbatches on a
# simulated A100, written with Zeus-format plan files, freqs_pipeline_%05d.py); a /v1 job runs
# the same Frontier (the configuration's counterpart) and joins the fleet first; a cap is set.
# Then 2 ranks of the REAL Zeus client (zeus==0.16.0's PipelineFrequencyOptimizer, on
# torch.distributed/gloo, clocks through the fake NVML as in cli/zeus_real_client) register a
# Zeus job: it joins the fleet (an "arrive" decision), and each rank's schedule, whose names its
# trainer checks instruction by instruction over its iterations, is exactly its stage's entry of
# the plan file of the point the fleet assigned; Zeus's FrequencyController sets those clocks.
# The real client fetched window 0 and never reports (docs/zeus-protocol.md §7), so the fleet
# counts the Zeus job, fixed, at window 0's point (docs/fleet.md, "The rule"): the cap is lowered to
# what the /v1 job can absorb alone, and /v1/fleet and /metrics still count the Zeus job at window
# 0's point while the /v1 job takes the whole cut within the cap (before the rule, the lower cap
# moved the Zeus job's counted point while its GPUs ran the old plan); a cap below the Zeus job's
# own power is reported infeasible, the /v1 job at its least power, the shortfall as negative
# headroom. The server restarts on the same database and counts the same points. Then the test
# reports window 0 through Zeus's protocol with Zeus's own types (POST /result/{job_id} with a
# ProfilingResult from every rank, then GET /schedule/{job_id}?rank=R, parsed by
# FrequencySchedule): the "window" decision moves the Zeus job to a lower-power point, whose plan
# file its window 1 is, and the /v1 job's next window runs its own new point; the /v1 job ends:
# the Zeus job stays counted at window 1's point until it reports window 1, then its window 2 is
# the point it gets alone. fleet_assignments names the Zeus job exactly at arrive, window,
# window with those points; no feasible decision exceeds its cap; /metrics has its power.
# Then the fleet's own way of starting the server (--scheduler Frontier, docs/fleet.md) serves
# Zeus jobs the same Frontier, two different frontiers for the two protocols stop start-up, and
# a Zeus job of another pipeline depth than the frontier's is refused at /register_job (500).
# Every step waits on requests and windows (barriers), never on time.
# Zeus 0.16's client itself asks for one schedule (docs/zeus-protocol.md §7): the later windows
# are the protocol's requests, made here as Zeus's server loop defines them.
# Skip by design: the ASan build (venv_lib.bash). Needs root (the fake NVML refuses clock changes
# to other users, as NVML does).
set -euo pipefail
: "${ERGON:?}"
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv zeus.optimizer.pipeline_frequency.optimizer torch httpx
[ -n "${ERGON_FAKE_NVML:-}" ] && [ -f "$ERGON_FAKE_NVML" ] || { echo "FAIL: the fake NVML is not built (ERGON_FAKE_NVML='${ERGON_FAKE_NVML:-}')"; exit 1; }
command -v curl >/dev/null || skip_or_fail "curl not installed"
[ "$(id -u)" = 0 ] || skip_or_fail "the fake NVML refuses clock changes to non-root users, as NVML does (run as root)"
work=$(mktemp -d)
pid=""; rpids=()
cleanup() {
  for p in "${rpids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$work/slog" ] && tail -5 "$work/slog"; exit 1; }
cd "$work"
P=2 M=4 ITERS=2

"$ERGON" profile sim --gpu a100 --stages $P -o profile.csv >/dev/null || fail "profile sim"
"$ERGON" plan perseus --profile profile.csv --gpu A100 --stages $P --microbatches $M --quiet \
  --formats csv,packed,zeus-py --out "$work/fr" >/dev/null || fail "plan perseus"

ZEUS_PFO_SCHEDULER=Frontier ZEUS_PFO_SCHEDULER_ARGS="{\"frontier_dir\": \"$work/fr\"}" \
  "$ERGON" serve --port 0 --db "$work/s.db" --dump "$work/dump" >"$work/sout" 2>"$work/slog" &
pid=$!
for _ in $(seq 600); do grep -q listening "$work/sout" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/sout")
[ -n "$port" ] || fail "the server did not start: $(cat "$work/slog")"
url=http://127.0.0.1:$port

cat >order.py <<'PY'
def one_f_one_b(P, M, s):
    warm = min(P - s - 1, M)
    out = ["forward"] * warm
    for _ in range(M - warm):
        out += ["forward", "backward"]
    return out + ["backward"] * warm
PY

cat >t.py <<'PY'
# The test's side of the fleet: /v1 requests, and a Zeus client's later windows.
import ast, csv, json, sqlite3, sys, threading, urllib.error, urllib.request
import httpx
from zeus.optimizer.pipeline_frequency.common import (GET_FREQUENCY_SCHEDULE_URL,
    REPORT_PROFILING_RESULT_URL, FrequencySchedule, ProfilingResult)
sys.path.insert(0, ".")
from order import one_f_one_b
url, phase, P, M = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
state = json.load(open("state.json")) if phase != "setup" else {}

def req(method, path, body=None):
    r = urllib.request.Request(url + path, method=method,
                               data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(r) as f:
            return f.status, json.loads(f.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")

def check(cond, what):
    if not cond:
        print("FAIL:", what); sys.exit(1)

def plan(point):
    """Each stage's (name, clock) list in the frontier's Zeus-format plan file of that point."""
    return [[tuple(x) for x in st] for st in
            ast.literal_eval(open("fr/freqs_pipeline_%05d.py" % point).read())]

def fleet_job(jid):
    st, fl = req("GET", "/v1/fleet")
    check(st == 200, f"GET /v1/fleet: {st} {fl}")
    check(fl["power_w"] <= fl["cap_w"] * (1 + 1e-9), f"the fleet draws {fl['power_w']} W over the cap {fl['cap_w']} W")
    mine = [x for x in fl["jobs"] if x["job_id"] == jid]
    check(len(mine) == 1 and mine[0]["assigned"], f"{jid} is not an assigned member of the fleet: {fl}")
    return mine[0], fl

def v1_window(jid):
    """Every /v1 rank takes its current window and reports it; the next window's plan index."""
    for r in range(P):
        st, b = req("GET", f"/v1/jobs/{jid}/schedule?rank={r}&wait=0")
        check(st in (200, 202), f"/v1 schedule: {st} {b}")
    for r in range(P):
        st, b = req("GET", f"/v1/jobs/{jid}/schedule?rank={r}&wait=30")
        check(st == 200 and not b["done"], f"/v1 schedule after the barrier: {st} {b}")
        st, b = req("POST", f"/v1/jobs/{jid}/results", {"rank": r, "window": b["window"],
                    "iter_time": [1.0], "iter_energy": [100.0]})
        check(st == 200, f"/v1 result: {st} {b}")
    st, js = req("GET", f"/v1/jobs/{jid}")
    return js["frontier_choice"]

def zeus_window(jid):
    """The Zeus protocol's next window (Zeus's server loop: every rank's ProfilingResult, then
    every rank's GET /schedule, which waits at the barrier): each rank's FrequencySchedule."""
    for r in range(P):
        res = ProfilingResult(rank=r, iter_time=[1.0, 1.0], iter_energy=[200.0, 200.0])
        resp = httpx.post(url + REPORT_PROFILING_RESULT_URL.format(job_id=jid), json=res.dict())
        check(resp.status_code == 200, f"Zeus result of rank {r}: {resp.status_code} {resp.text}")
    out = [None] * P
    def ask(r):
        out[r] = httpx.get(url + GET_FREQUENCY_SCHEDULE_URL.format(job_id=jid), params={"rank": r},
                           timeout=300)  # a bound against a hang, not a pace
    th = [threading.Thread(target=ask, args=(r,)) for r in range(P)]
    for t in th: t.start()
    for t in th: t.join()
    scheds = []
    for r, resp in enumerate(out):
        check(resp.status_code == 200, f"Zeus schedule of rank {r}: {resp.status_code} {resp.text}")
        s = FrequencySchedule.parse_raw(resp.text)
        check(s.rank == r, f"rank {r} got rank {s.rank}'s schedule")
        scheds.append([tuple(x) for x in s.frequencies])
    return scheds

def same_plan(scheds, point, what):
    want = plan(point)
    for r in range(P):
        check(scheds[r] == want[r], f"{what}: rank {r} runs {scheds[r]}, plan file {point} says {want[r]}")
        check([n for n, _ in scheds[r]] == one_f_one_b(P, M, r), f"{what}: rank {r}'s names")

if phase == "setup":
    st, info = req("GET", "/info")
    z = info["zeus"]
    check(z["served"] and z["scheduler"] == "Frontier", f"/info: Zeus jobs do not run Frontier: {z}")
    # a /v1 job with no scheduler of its own runs the server's: the Zeus configuration's
    # counterpart, Frontier on the same frontier
    st, j = req("POST", "/v1/jobs", {"pp_degree": P, "dp_degree": 1, "tp_degree": 1,
        "world_size": P, "framework": "f", "model_name": "m", "partition_method": "p",
        "microbatch_size": 1, "num_microbatches": M})
    check(st == 201, f"/v1 register: {st} {j}")
    v1 = j["job_id"]
    cl = sorted({int(float(x["frequency"])) for x in csv.DictReader(open("profile.csv"))}, reverse=True)
    for r in range(P):
        st, b = req("POST", f"/v1/jobs/{v1}/ranks", {"rank": r, "dp_rank": 0, "pp_rank": r,
            "tp_rank": 0, "pipe_schedule": one_f_one_b(P, M, r), "power_state_range": cl})
        check(st in (200, 201), f"/v1 rank {r}: {st} {b}")
    st, fl = req("GET", "/v1/fleet")
    check(st == 200 and fl["members"] == 1, f"the /v1 job is not the fleet's member: {fl}")
    lo, hi = fl["jobs"][0]["min_power_w"], fl["jobs"][0]["max_power_w"]
    check(lo < hi, f"the frontier's power range is empty: {lo} {hi}")
    # two such jobs: the cap lets them draw 3/4 of their range
    cap = 2 * lo + 1.5 * (hi - lo)
    st, fl = req("POST", "/v1/fleet", {"cap_w": cap})
    check(st == 200 and fl["cap_w"] == cap, f"set cap: {st} {fl}")
    json.dump({"v1": v1}, open("state.json", "w"))
    print("# /v1 job %s in the fleet; cap %.1f W (one job: %.1f-%.1f W)" % (v1, cap, lo, hi))
    sys.exit(0)

def arrived():
    """Phase "after": the real Zeus client's ranks registered, got their schedule and trained."""
    scheds, jobs = [], set()
    for r in range(P):
        d = json.load(open("sched_%d.json" % r))
        jobs.add(d["job"])
        scheds.append([tuple(x) for x in d["schedule"]])
    check(len(jobs) == 1, f"the ranks joined different jobs: {jobs}")
    zj, v1 = jobs.pop(), state["v1"]
    check(zj.endswith("+dp1+pp%d+tp1+Frontier+fleet" % P), f"Zeus job id {zj}")
    mine, fl = fleet_job(zj)
    check(fl["members"] == 2, f"the fleet does not hold both jobs: {fl}")
    p1 = mine["point"]
    st, js = req("GET", f"/v1/jobs/{zj}")
    check(mine.get("window") == 0 and mine.get("window_point") == p1, f"/v1/fleet's window_point: {mine}")
    check(st == 200 and js["window"] == 0 and js["frontier_choice"] == p1,
          f"the Zeus job's first window runs plan {js.get('frontier_choice')}, the fleet assigned {p1}: {js}")
    same_plan(scheds, p1, "first window (the real Zeus client)")
    print("# Zeus job %s joined the fleet at point %d (%.1f W); its ranks ran plan file %05d" % (zj, p1, mine["power_w"], p1))
    state.update({"zj": zj, "p1": p1, "p1w": mine["power_w"]})
    json.dump(state, open("state.json", "w"))

if phase == "after":
    arrived()
p1, p1w = state["p1"], state["p1w"]

def metric(name, jid=None):
    with urllib.request.urlopen(url + "/metrics") as f:
        text = f.read().decode()
    key = name + ('{job="%s"}' % jid if jid else "")
    line = [l for l in text.splitlines() if l.startswith(key + " ")]
    check(len(line) == 1, f"/metrics has no single {key}: {line}")
    return float(line[0].split()[-1])

def counted_at(jid, point, power, what):
    """The member is counted at the plan its window runs: fixed, in /v1/fleet and /metrics."""
    st, fl = req("GET", "/v1/fleet")
    x = [x for x in fl["jobs"] if x["job_id"] == jid][0]
    check(x["point"] == point and x["window_point"] == point and x.get("fixed") is True
          and abs(x["power_w"] - power) <= 1e-9 * power,
          f"{what}: the Zeus job, whose ranks run point {point} ({power} W), is counted at {x}")
    check(abs(metric("ergon_fleet_job_power_watts", jid) - power) <= 1e-6 * power,
          f"{what}: /metrics counts the Zeus job at another power than its window's {power} W")
    return fl

if phase == "after":
    # the real Zeus client fetched window 0 and reports nothing: the cap is lowered to what the
    # /v1 job can absorb alone; the Zeus job stays counted at window 0's point, the /v1 job's
    # point takes the whole cut
    zj, v1 = state["zj"], state["v1"]
    vm, fl = fleet_job(v1)
    lo, hi = vm["min_power_w"], vm["max_power_w"]
    c1 = p1w + lo + 0.25 * (hi - lo)
    check(c1 < fl["cap_w"], f"the test's second cap {c1} W does not lower the first {fl['cap_w']} W")
    st, fl = req("POST", "/v1/fleet", {"cap_w": c1})
    check(st == 200 and fl["last_decision"]["feasible"], f"lower the cap to {c1} W: {st} {fl}")
    fl = counted_at(zj, p1, p1w, "after the cap was lowered")
    vm2, fl = fleet_job(v1)
    check(vm2["power_w"] < vm["power_w"] and vm2["power_w"] <= c1 - p1w + 1e-9 * c1,
          f"the /v1 job did not absorb the cut: {vm} -> {vm2} under {c1} W with the Zeus job at {p1w} W")
    check(abs(metric("ergon_fleet_power_watts") - (p1w + vm2["power_w"])) <= 1e-6 * c1
          and metric("ergon_fleet_power_watts") <= c1 * (1 + 1e-9), "/metrics: the fleet's power")
    print("# cap %.1f W: the Zeus job (window 0 only) stays counted at point %d (%.1f W), the /v1 job "
          "absorbs the cut: point %d (%.1f W)" % (c1, p1, p1w, vm2["point"], vm2["power_w"]))
    # a cap the fixed Zeus job alone exceeds: impossible, said so, the /v1 job at its least power
    cx = 0.9 * p1w
    st, fl = req("POST", "/v1/fleet", {"cap_w": cx})
    check(st == 200 and not fl["last_decision"]["feasible"], f"a cap below the fixed job's power: {fl}")
    fl = counted_at(zj, p1, p1w, "under an impossible cap")
    vx = [x for x in fl["jobs"] if x["job_id"] == v1][0]
    check(abs(vx["power_w"] - vx["min_power_w"]) < 1e-9 * vx["min_power_w"]
          and abs(fl["power_w"] - (p1w + vx["min_power_w"])) < 1e-9 * fl["power_w"]
          and abs(fl["headroom_w"] - (cx - fl["power_w"])) < 1e-6 * fl["power_w"] and fl["headroom_w"] < 0,
          f"the impossible cap's decision: {fl}")
    st, fl = req("POST", "/v1/fleet", {"cap_w": c1})
    check(st == 200 and fl["last_decision"]["feasible"], f"the cap back to {c1} W: {fl}")
    counted_at(zj, p1, p1w, "the cap back")
    vm3, _ = fleet_job(v1)
    check(vm3["point"] == vm2["point"], f"the same cap, another /v1 point: {vm2} {vm3}")
    state.update({"c1": c1, "vq": vm2["point"]})
    json.dump(state, open("state.json", "w"))
    sys.exit(0)

# phase "resume": a restarted server (the same database) has the same fleet
zj, v1, c1 = state["zj"], state["v1"], state["c1"]
st, fl = req("GET", "/v1/fleet")
check(st == 200 and fl["cap_w"] == c1 and fl["members"] == 2, f"after a restart: {fl}")
fl = counted_at(zj, p1, p1w, "after a restart")
vm, fl = fleet_job(v1)
check(vm["point"] == state["vq"], f"after a restart the /v1 job has point {vm['point']}, before {state['vq']}")
check(v1_window(v1) == vm["point"], f"the /v1 job's next window does not run its point {vm['point']}")
print("# restarted: the same cap, the Zeus job counted at point %d, the /v1 job at %d" % (p1, vm["point"]))

# the Zeus job's ranks report window 0 (Zeus's /result) and ask for the next (/schedule): it is
# free to move at that window's end, and its window 1 runs the point that decision gave it
scheds = zeus_window(zj)
mine2, fl = fleet_job(zj)
p2 = mine2["point"]
check(mine2["power_w"] < p1w and p2 != p1, f"reported: the Zeus job was not moved under the lower cap: {mine2}")
same_plan(scheds, p2, "after the cap change and the Zeus job's results")
st, js = req("GET", f"/v1/jobs/{zj}")
check(js["window"] == 1 and js["frontier_choice"] == p2, f"Zeus job window 1: {js}")
counted_at(zj, p2, mine2["power_w"], "in window 1")
vm2, fl = fleet_job(v1)
check(vm2["power_w"] >= vm["power_w"], f"the /v1 job lost power when the Zeus job gave some up: {vm} -> {vm2}")
check(v1_window(v1) == vm2["point"], f"the /v1 job's next window does not run its point {vm2['point']}")
print("# cap %.1f W: the Zeus job's window 1 runs point %d (%.1f W) = plan file %05d" % (c1, p2, mine2["power_w"], p2))

# the /v1 job leaves: the Zeus job stays counted at window 1's point until it reports window 1,
# then, alone under the cap, its window 2 runs a faster point
st, b = req("POST", f"/v1/jobs/{v1}/end", {})
check(st == 200, f"end the /v1 job: {st} {b}")
fl = counted_at(zj, p2, mine2["power_w"], "after the /v1 job left")
check(fl["members"] == 1, f"after the departure: {fl}")
scheds = zeus_window(zj)
mine3, fl = fleet_job(zj)
p3 = mine3["point"]
check(mine3["power_w"] > mine2["power_w"], f"alone, the Zeus job was not given more power: {mine2} -> {mine3}")
same_plan(scheds, p3, "after the /v1 job left")
print("# the /v1 job left: the Zeus job's window 2 runs point %d (%.1f W) = plan file %05d" % (p3, mine3["power_w"], p3))

# the decisions in the database: the Zeus job's rows are the points its windows ran, and every
# feasible decision's counted power is within its cap
db = sqlite3.connect("s.db")
rows = db.execute("SELECT d.reason, a.point FROM fleet_assignments a JOIN fleet_decisions d "
                  "ON d.id = a.decision WHERE a.job_id = ? ORDER BY d.id", (zj,)).fetchall()
check(rows == [("arrive", p1), ("window", p2), ("window", p3)], f"fleet_assignments of the Zeus job: {rows}")
bad = db.execute("SELECT id, reason, cap_w, power_w FROM fleet_decisions WHERE cap_w IS NOT NULL AND "
                 "feasible = 1 AND power_w > cap_w * (1 + 1e-9)").fetchall()
check(not bad, f"decisions over their cap: {bad}")
check(abs(metric("ergon_fleet_job_power_watts", zj) - mine3["power_w"]) < 1e-6 * mine3["power_w"],
      "/metrics for the Zeus job")
print("# fleet_assignments and /metrics name the Zeus job: %s" % rows)
PY

cat >trainer.py <<'PY'
# One pipeline rank with Zeus's PipelineFrequencyOptimizer: registers, takes its schedule, and
# runs its iterations calling the optimizer at every instruction (Zeus checks the names).
import json, os, sys
import torch
import torch.distributed as dist
rank, world, iters, M, url = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
sys.path.insert(0, os.getcwd())
from order import one_f_one_b
# No CUDA device here: Zeus's three CUDA calls are answered (cli/zeus_real_client's header).
torch.cuda.set_device = lambda device: None
torch.cuda.synchronize = lambda device=None: None
torch.cuda.is_available = lambda: True
from zeus.optimizer.pipeline_frequency import PipelineFrequencyOptimizer
dist.init_process_group("gloo", init_method="file://" + os.path.abspath("rdv"), rank=rank, world_size=world)
opt = PipelineFrequencyOptimizer(rank=rank, dp_rank=0, pp_rank=rank, tp_rank=0, device_id=rank,
                                 dp_degree=1, pp_degree=world, tp_degree=1, world_size=world,
                                 server_url=url, job_metadata="fleet")
json.dump({"job": opt.job_id, "schedule": opt.freq_schedule}, open("sched_%d.json" % rank, "w"))
for it in range(iters):
    opt.on_step_begin()
    for name in one_f_one_b(world, M, rank):
        opt.on_instruction_begin(name)
        opt.on_instruction_end(name)
    opt.on_step_end()
dist.barrier()
print("rank %d finished %d iterations" % (rank, iters), flush=True)
dist.destroy_process_group()
PY

"$VPY" t.py "$url" setup $P $M || fail "setup"
export LD_LIBRARY_PATH="$(dirname "$ERGON_FAKE_NVML")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FAKE_NVML_DEVICES=$P FAKE_NVML_LOG="$work/nvml.log"
unset CUDA_VISIBLE_DEVICES
for r in $(seq 0 $((P - 1))); do
  timeout 600 "$VPY" trainer.py "$r" "$P" "$ITERS" "$M" "$url" >"rank$r.txt" 2>&1 &
  rpids+=($!)
done
for r in $(seq 0 $((P - 1))); do
  wait "${rpids[$r]}" || fail "Zeus rank $r: $(tail -8 "rank$r.txt")"
  grep -q "rank $r finished $ITERS iterations" "rank$r.txt" || fail "rank $r: $(cat "rank$r.txt")"
  grep -qi "error\|warning\|traceback" "rank$r.txt" && fail "rank $r printed: $(cat "rank$r.txt")"
done
rpids=()
"$VPY" t.py "$url" after $P $M || fail "the Zeus job in the fleet"
# a restart (the same database and configuration) replays the same fleet; then the Zeus job's
# later windows, through the restarted server
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
rm -f "$work/sout"
ZEUS_PFO_SCHEDULER=Frontier ZEUS_PFO_SCHEDULER_ARGS="{\"frontier_dir\": \"$work/fr\"}" \
  "$ERGON" serve --port 0 --db "$work/s.db" --dump "$work/dump" >"$work/sout" 2>>"$work/slog" &
pid=$!
for _ in $(seq 600); do grep -q listening "$work/sout" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/sout")
[ -n "$port" ] || fail "the server did not restart: $(tail -5 "$work/slog")"
"$VPY" t.py "http://127.0.0.1:$port" resume $P $M || fail "the Zeus job in the restarted fleet"
# Zeus's FrequencyController set each rank's planned clocks on its device
"$VPY" - "$P" "$FAKE_NVML_LOG" <<'PY' || fail "clocks"
import json, sys
P, log = int(sys.argv[1]), sys.argv[2]
sets = {}
for line in open(log):
    f = line.split()
    if f[0] == "nvmlDeviceSetGpuLockedClocks" and f[-1] == "0":
        sets.setdefault(int(f[1]), set()).add(int(f[2]))
for r in range(P):
    want = {c for _, c in json.load(open("sched_%d.json" % r))["schedule"]}
    assert want <= sets.get(r, set()), ("device", r, "set", sets.get(r), "plan", want)
print("# Zeus set the plan's clocks: %s" % {d: sorted(c) for d, c in sets.items()})
PY
# The fleet's own way of starting the server (docs/fleet.md: --scheduler Frontier alone) serves
# Zeus jobs the same Frontier; both configurations given must name the same frontier; a Zeus job
# whose pipeline is not the frontier's is refused at registration, before its ranks wait.
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
"$ERGON" plan perseus --profile profile.csv --gpu A100 --stages $P --microbatches 2 --quiet --out "$work/fr2" >/dev/null ||
  fail "plan perseus (2 microbatches)"
out=$(ZEUS_PFO_SCHEDULER=Frontier ZEUS_PFO_SCHEDULER_ARGS="{\"frontier_dir\": \"$work/fr2\"}" "$ERGON" serve --port 0 \
  --db "$work/c.db" --no-dump --scheduler Frontier --scheduler-args "{\"frontier_dir\": \"$work/fr\"}" 2>&1) && rc=0 || rc=$?
[ $rc -eq 1 ] && grep -q 'conflicting configuration: Perseus and /v1 jobs would run Frontier' <<<"$out" ||
  fail "two frontiers were not refused ($rc): $out"
rm -f "$work/sout"
"$ERGON" serve --port 0 --db "$work/s2.db" --no-dump --scheduler Frontier \
  --scheduler-args "{\"frontier_dir\": \"$work/fr\"}" >"$work/sout" 2>"$work/slog" &
pid=$!
for _ in $(seq 600); do grep -q listening "$work/sout" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/sout")
[ -n "$port" ] || fail "the server (--scheduler Frontier) did not start: $(cat "$work/slog")"
curl -sf "http://127.0.0.1:$port/info" | grep -q '"zeus": *{[^}]*"served": *true[^}]*"scheduler": *"Frontier"' ||
  fail "--scheduler Frontier does not serve Zeus jobs: $(curl -s "http://127.0.0.1:$port/info")"
zj=$(curl -sf -X POST "http://127.0.0.1:$port/register_job" \
  -d "{\"job_id\":\"\",\"pp_degree\":$P,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":$P,\"job_metadata\":null}") ||
  fail "Zeus register_job on --scheduler Frontier: $(tail -2 "$work/slog")"
[[ $zj == *"+Frontier\"" ]] || fail "Zeus job id $zj"
code=$(curl -s -o body -w '%{http_code}' -X POST "http://127.0.0.1:$port/register_job" \
  -d '{"job_id":"","pp_degree":3,"dp_degree":1,"tp_degree":1,"world_size":3,"job_metadata":null}')
[ "$code" = 500 ] && grep -q "has $P stages but the job has pp_degree 3" body ||
  fail "a 3-stage Zeus job on a $P-stage frontier: $code $(cat body)"
echo ok
