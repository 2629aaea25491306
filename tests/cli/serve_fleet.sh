#!/usr/bin/env bash
# The fleet in `ergon serve` (docs/fleet.md): jobs of the Frontier scheduler on two published
# frontiers (GPT-3 175B on A100, BLOOM on A40; 8 stages x 12 microbatches) join the fleet as they
# start, a job registered through Perseus's routes too. Under a cap set through /v1/fleet every
# arrival, straggler, weight change, departure and cap change is solved again: the sum of the assigned plans' average powers stays within the cap,
# a job that starts runs its assigned plan from its first window (frontier_choice), a straggler's
# job is never assigned a plan faster than the straggler's pace, a heavier weight never makes a
# job slower, lifting the cap releases every job, and a restarted server (same database) has the
# cap, the members and the decisions back. Every decision is a row of fleet_decisions; /metrics
# has the fleet's gauges; bad requests are refused with 400/404.
set -u
: "${ERGON:?}"
source "$(dirname "$0")/../lib/skip_lib.bash"
data=${ERGON_TEST_DATA:?}/published/perseus-sosp24/stage_profile
need_data "$data"
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/slog" ] && tail -5 "$tmp/slog"; exit 1; }
mkdir -p "$tmp/plans"
"$ERGON" plan perseus --profile "$data/gpt3-175b+a100_sxm_bf16.csv" --gpu A100 --stages 8 \
  --microbatches 12 --quiet --out "$tmp/plans/gpt3" >/dev/null || fail "plan gpt3"
"$ERGON" plan perseus --profile "$data/bloom+a40_bf16.csv" --gpu A40 --stages 8 \
  --microbatches 12 --quiet --out "$tmp/plans/bloom" >/dev/null || fail "plan bloom"
start() {
  rm -f "$tmp/sout"
  "$ERGON" serve --port 0 --db "$tmp/s.db" --dump "$tmp/dump" --plans-dir "$tmp/plans" --scheduler Frontier \
    --scheduler-args "{\"frontier_dir\": \"$tmp/plans/gpt3\"}" >"$tmp/sout" 2>>"$tmp/slog" & pid=$!
  for _ in $(seq 600); do grep -q listening "$tmp/sout" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$tmp/sout")
  [ -n "$port" ] || fail "the server did not start"
}
cat >"$tmp/t.py" <<'PYEOF'
import csv, json, sqlite3, sys, urllib.request, urllib.error
url, tmp, data, phase = sys.argv[1:5]

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

def within_cap(fl, what):
    check(fl["power_w"] <= fl["cap_w"] * (1 + 1e-9), f"{what}: {fl['power_w']} W over the cap {fl['cap_w']} W")
    check(abs(fl["headroom_w"] - (fl["cap_w"] - fl["power_w"])) < 1e-6, f"{what}: headroom")

def clocks(profile):
    return sorted({int(float(r["frequency"])) for r in csv.DictReader(open(profile))}, reverse=True)

def register(frontier, profile, dp):
    S, M = 8, 12
    st, j = req("POST", "/v1/jobs", {"pp_degree": S, "dp_degree": dp, "tp_degree": 1,
        "world_size": S * dp, "framework": "f", "model_name": frontier, "partition_method": "p",
        "microbatch_size": 1, "num_microbatches": M, "scheduler": "Frontier",
        "scheduler_args": {"frontier_dir": f"{tmp}/plans/{frontier}", "slowdown": 1.0}})
    check(st == 201, f"register: {st} {j}")
    cl = clocks(profile)
    for d in range(dp):
        for r in range(S):
            w = min(S - r - 1, M)
            order = ["forward"] * w + ["forward", "backward"] * (M - w) + ["backward"] * w
            st, b = req("POST", f"/v1/jobs/{j['job_id']}/ranks", {"rank": d * S + r, "dp_rank": d,
                "pp_rank": r, "tp_rank": 0, "pipe_schedule": order, "power_state_range": cl})
            check(st in (200, 201), f"rank {r}: {st} {b}")
    return j["job_id"]

def run_window(jid, world):
    """Every rank takes the current window's schedule and reports it; returns the next window."""
    for r in range(world):
        st, b = req("GET", f"/v1/jobs/{jid}/schedule?rank={r}&wait=0")
        check(st in (200, 202), f"schedule: {st} {b}")
    for r in range(world):
        st, b = req("GET", f"/v1/jobs/{jid}/schedule?rank={r}&wait=5")
        check(st == 200 and not b["done"], f"schedule after the barrier: {st} {b}")
        w = b["window"]
        st, b = req("POST", f"/v1/jobs/{jid}/results", {"rank": r, "window": w,
            "iter_time": [1.0], "iter_energy": [100.0]})
        check(st == 200, f"result: {st} {b}")
    return w + 1

if phase == "phase1":
    st, b = req("POST", "/v1/fleet", {"cap_w": -5})
    check(st == 400 and "cap_w" in b["error"], f"negative cap: {st} {b}")
    st, b = req("POST", "/v1/fleet/jobs/nosuchjob", {"weight": 2})
    check(st == 404, f"weight of an unknown job: {st} {b}")
    gpt, bloom = f"{data}/gpt3-175b+a100_sxm_bf16.csv", f"{data}/bloom+a40_bf16.csv"
    # without a cap the jobs run their own target (slowdown 1.0): that is the fleet's full power
    ids = [register("gpt3", gpt, 1), register("bloom", bloom, 2)]
    st, fl = req("GET", "/v1/fleet")
    check(st == 200 and fl["members"] == 2 and fl["cap_w"] is None, f"fleet: {fl}")
    j0, j1 = ([x for x in fl["jobs"] if x["job_id"] == i][0] for i in ids)
    check(abs(fl["power_w"] - j0["power_w"] - j1["power_w"]) < 1e-6, "the fleet's power is its jobs'")
    check(j0["min_power_w"] < j0["power_w"] <= j0["max_power_w"], f"job 0's power range: {j0}")
    # the five jobs below: three GPT-3 of 8 GPUs, BLOOM of 16 and of 8: a cap halfway between
    # their least and their greatest power binds and can be met
    lo = 3 * j0["min_power_w"] + 1.5 * j1["min_power_w"]
    hi = 3 * j0["max_power_w"] + 1.5 * j1["max_power_w"]
    cap = lo + 0.5 * (hi - lo)
    # a cap below every job's least power: reported, every job at its least power
    st, fl = req("POST", "/v1/fleet", {"cap_w": 0.5 * (j0["min_power_w"] + j1["min_power_w"])})
    check(st == 200 and not fl["last_decision"]["feasible"], f"an impossible cap: {fl}")
    check(all(abs(x["power_w"] - x["min_power_w"]) < 1e-6 for x in fl["jobs"]), "least power")
    st, fl = req("POST", "/v1/fleet", {"cap_w": cap})
    check(st == 200 and fl["cap_w"] == cap, f"set cap: {st} {fl}")
    within_cap(fl, "cap set")
    for name, prof, dp in [("gpt3", gpt, 1), ("bloom", bloom, 1), ("gpt3", gpt, 1)]:
        jid = register(name, prof, dp)
        ids.append(jid)
        st, fl = req("GET", "/v1/fleet")
        within_cap(fl, f"after {jid} arrived")
        mine = [x for x in fl["jobs"] if x["job_id"] == jid][0]
        st, js = req("GET", f"/v1/jobs/{jid}")
        check(mine["assigned"] and js["frontier_choice"] == mine["point"],
              f"{jid} runs plan {js['frontier_choice']} in window 0, the fleet assigned {mine['point']}")
    check(fl["members"] == 5 and fl["last_decision"]["feasible"], f"five members: {fl}")
    # the first job ran its own target (slowdown 1.0) in window 0, before the cap; the fleet's
    # plan reaches it in the next window through the protocol it speaks (its schedules)
    st, js = req("GET", f"/v1/jobs/{ids[0]}")
    first = [x for x in fl["jobs"] if x["job_id"] == ids[0]][0]
    check(js["window"] == 0 and js["frontier_choice"] != first["point"],
          f"the first job's window 0 plan is already the fleet's ({js}, {first})")
    w = run_window(ids[0], 8)
    st, js = req("GET", f"/v1/jobs/{ids[0]}")
    check(js["window"] == w == 1 and js["frontier_choice"] == first["point"],
          f"window 1 runs plan {js['frontier_choice']}, the fleet assigned {first['point']}")
    check(all(x["slowdown"] >= 1 for x in fl["jobs"]), "slowdowns")
    check(any(x["slowdown"] > 1.001 for x in fl["jobs"]), "the cap slowed nobody: it does not bind")
    # a job speaking Perseus's protocol (/register_job, /register_rank; the server's default
    # scheduler, Frontier on the GPT-3 frontier) joins the same way, and its first window runs
    # its assigned plan; it leaves again
    st, pid = req("POST", "/register_job", {"job_id": "", "pp_degree": 8, "dp_degree": 1,
        "tp_degree": 1, "world_size": 8, "framework": "perseus", "model_name": "gpt3",
        "partition_method": "p", "microbatch_size": 1, "num_microbatches": 12})
    check(st == 200 and isinstance(pid, str), f"Perseus register_job: {st} {pid}")
    cl = clocks(gpt)
    for r in range(8):
        w = min(8 - r - 1, 12)
        order = ["forward"] * w + ["forward", "backward"] * (12 - w) + ["backward"] * w
        st, b = req("POST", "/register_rank", {"job_id": pid, "rank": r, "dp_rank": 0, "pp_rank": r,
            "tp_rank": 0, "pipe_schedule": order, "power_state_range": cl})
        check(st == 200, f"Perseus register_rank: {st} {b}")
    st, fl = req("GET", "/v1/fleet")
    within_cap(fl, "after a Perseus job arrived")
    mine = [x for x in fl["jobs"] if x["job_id"] == pid]
    st, js = req("GET", f"/v1/jobs/{pid}")
    check(mine and mine[0]["assigned"] and js["frontier_choice"] == mine[0]["point"],
          f"the Perseus job: {mine} runs {js.get('frontier_choice')}")
    st, b = req("POST", f"/v1/jobs/{pid}/end", {})
    check(st == 200, f"end the Perseus job: {st} {b}")
    # a straggler: its job is never assigned a plan faster than the straggler's pace
    st, b = req("POST", f"/v1/jobs/{ids[2]}/straggler", {"slowdown": 1.15})
    check(st == 200, f"straggler: {st} {b}")
    st, fl = req("GET", "/v1/fleet")
    within_cap(fl, "after a straggler")
    s = [x for x in fl["jobs"] if x["job_id"] == ids[2]][0]
    check(s.get("straggler") == {"slowdown": 1.15}, f"straggler recorded: {s}")
    check(abs(s["slowdown"] - 1) < 1e-9, f"the straggler's job pays no slowdown below its pace: {s}")
    # a heavier weight never makes a job slower
    before = {x["job_id"]: x["slowdown"] for x in fl["jobs"]}
    slowest = max(before, key=before.get)
    st, fl = req("POST", f"/v1/fleet/jobs/{slowest}", {"weight": 20})
    check(st == 200, f"weight: {st} {fl}")
    within_cap(fl, "after a weight")
    after = {x["job_id"]: x["slowdown"] for x in fl["jobs"]}
    check(after[slowest] <= before[slowest] + 1e-12, f"weight 20 made {slowest} slower: {before[slowest]} -> {after[slowest]}")
    # a job leaves
    st, b = req("POST", f"/v1/jobs/{ids[1]}/end", {})
    check(st == 200, f"end: {st} {b}")
    st, fl = req("GET", "/v1/fleet")
    check(fl["members"] == 4, f"four members after one left: {fl['members']}")
    within_cap(fl, "after a job left")
    # a tighter cap
    st, fl = req("POST", "/v1/fleet", {"cap_w": lo + 0.3 * (hi - lo)})
    within_cap(fl, "a tighter cap")
    st, met = 200, urllib.request.urlopen(url + "/metrics").read().decode()
    for name in ["ergon_fleet_cap_watts", "ergon_fleet_headroom_watts", "ergon_fleet_power_watts",
                 "ergon_fleet_job_power_watts{job=", "ergon_fleet_job_slowdown{job=",
                 "ergon_fleet_job_energy_per_iteration_joules{job=", "ergon_fleet_decisions_total"]:
        check(name in met, f"/metrics has no {name}")
    json.dump({"ids": ids, "power_w": fl["power_w"], "cap_w": fl["cap_w"],
               "decisions": fl["decisions"]}, open(f"{tmp}/state.json", "w"))
    print(f"ok: 5 jobs joined, {fl['decisions']} decisions; {fl['power_w']:.0f} W under a cap of {fl['cap_w']:.0f} W")
else:
    old = json.load(open(f"{tmp}/state.json"))
    st, fl = req("GET", "/v1/fleet")
    check(st == 200 and fl["cap_w"] == old["cap_w"] and fl["members"] == 4, f"after a restart: {fl}")
    within_cap(fl, "after a restart")
    db = sqlite3.connect(f"{tmp}/s.db")
    reasons = [r[0] for r in db.execute("SELECT reason FROM fleet_decisions ORDER BY id")]
    for want in ["cap", "arrive", "straggler", "weight", "leave", "restart"]:
        check(want in reasons, f"no '{want}' decision in the database: {reasons}")
    n = db.execute("SELECT count(*) FROM fleet_assignments").fetchone()[0]
    check(n >= 5, f"{n} assignment rows")
    print(f"ok: restart kept the cap and 4 members; {len(reasons)} decisions stored ({', '.join(sorted(set(reasons)))})")
PYEOF
start
python3 "$tmp/t.py" "http://127.0.0.1:$port" "$tmp" "$data" phase1 || fail "phase 1"
kill $pid; wait $pid 2>/dev/null; pid=""
start
python3 "$tmp/t.py" "http://127.0.0.1:$port" "$tmp" "$data" phase2 || fail "phase 2"
# the operator's CLI: a weight, then the cap lifted, which releases every job
u="http://127.0.0.1:$port"
job=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ids"][0])' "$tmp/state.json")
"$ERGON" fleet weight --server "$u" "$job" 3 >"$tmp/w.json" || fail "ergon fleet weight"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
w=[x["weight"] for x in d["jobs"] if x["job_id"] == sys.argv[2]]
sys.exit(0 if w == [3] else 1)' "$tmp/w.json" "$job" || fail "the weight is not 3: $(cat "$tmp/w.json")"
"$ERGON" fleet cap --server "$u" none >"$tmp/c.json" || fail "ergon fleet cap none"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
sys.exit(0 if d["cap_w"] is None and d["members"] == 4 and not any(x["assigned"] for x in d["jobs"]) else 1)' \
  "$tmp/c.json" || fail "lifting the cap did not release every job: $(cat "$tmp/c.json")"
out=$("$ERGON" fleet cap --server "$u" -- -3 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "ergon fleet cap -3: exit $rc: $out"
out=$("$ERGON" fleet weight --server "$u" nosuchjob 2 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -q 404 <<<"$out" || fail "weight of an unknown job: exit $rc: $out"
"$ERGON" fleet status --server "$u" | grep -q '"cap_w": *null' || fail "ergon fleet status"
python3 -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
d = db.execute("SELECT id FROM fleet_decisions WHERE reason = ? AND cap_w IS NULL", ("cap",)).fetchall()
n = db.execute("SELECT count(*) FROM fleet_assignments WHERE decision = ? AND point = -1", (d[-1][0],)).fetchone()[0] if d else 0
sys.exit(0 if n == 4 else 1)' "$tmp/s.db" || fail "lifting the cap is not a decision releasing 4 jobs in the database"
echo "ok: ergon fleet weight, cap none, status"
