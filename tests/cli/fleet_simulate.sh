#!/usr/bin/env bash
# `ergon fleet simulate` (docs/fleet.md, "A simulated day"), small: 40 jobs (20 at the start) of
# two published frontiers (GPT-3 175B on A100, BLOOM on A40, 8 stages x 8) and a simulated one
# over 3 hours, through the in-process server. The fleet's power never exceeds the cap (exit 0,
# no violation, no hour over it, every timeline row within it), the cap binds (without it the
# jobs draw more, for a while), at the same cap the fleet's mean slowdown is no worse than one
# per-GPU power limit's, and every event left its decision in the server's database.
set -u
: "${ERGON:?}"
source "$(dirname "$0")/../lib/skip_lib.bash"
data=${ERGON_TEST_DATA:?}/published/perseus-sosp24/stage_profile
need_data "$data"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ERGON" plan perseus --profile "$data/gpt3-175b+a100_sxm_bf16.csv" --gpu A100 --stages 8 \
  --microbatches 8 --quiet --out "$tmp/gpt3" >/dev/null || fail "plan gpt3"
"$ERGON" plan perseus --profile "$data/bloom+a40_bf16.csv" --gpu A40 --stages 8 \
  --microbatches 8 --quiet --out "$tmp/bloom" >/dev/null || fail "plan bloom"
"$ERGON" profile sim --gpu a100 --stages 8 --model gpt3-2.7b -o "$tmp/sim.csv" >/dev/null 2>&1 ||
  fail "profile sim"
"$ERGON" plan perseus --profile "$tmp/sim.csv" --gpu A100 --stages 8 --microbatches 8 --quiet \
  --out "$tmp/sim" >/dev/null || fail "plan sim"
"$ERGON" fleet simulate --frontiers "$tmp/gpt3,$tmp/bloom,$tmp/sim" --out "$tmp/day" --jobs 40 \
  --initial 20 --hours 3 >"$tmp/out" 2>&1 || fail "fleet simulate (exit $?): $(cat "$tmp/out")"
cat "$tmp/out"
python3 - "$tmp/day" <<'PYEOF' || fail "the simulated day"
import csv, json, sqlite3, sys
d = sys.argv[1]
s = json.load(open(f"{d}/summary.json"))
def check(c, what):
    if not c:
        print("FAIL:", what); sys.exit(1)
check(s["violations"] == 0 and s["fleet"]["over_h"] == 0, f"the fleet went over the cap: {s}")
check(s["no_cap"]["over_h"] > 0, f"the cap never binds: {s}")
check(s["fleet"]["mean_slowdown"] <= s["power_limit"]["mean_slowdown"] + 1e-9,
      f"the fleet is slower than one power limit: {s}")
rows = list(csv.DictReader(open(f"{d}/timeline.csv")))
check(len(rows) > 10, f"{len(rows)} timeline rows")
for r in rows:
    check(float(r["fleet_w"]) <= float(r["cap_w"]) * (1 + 1e-9), f"over the cap: {r}")
    check(8 <= int(r["gpus"]) / max(int(r["jobs"]), 1) <= 64, f"GPUs per job: {r}")
db = sqlite3.connect(f"{d}/fleet.db")
n = db.execute("SELECT count(*) FROM fleet_decisions").fetchone()[0]
reasons = {r[0] for r in db.execute("SELECT reason FROM fleet_decisions")}
check(n >= 40 and {"cap", "arrive", "leave"} <= reasons, f"{n} decisions, reasons {reasons}")
jobs = db.execute("SELECT count(*) FROM jobs").fetchone()[0]
check(jobs == 40, f"{jobs} jobs in the server's database")
print(f"ok: {n} decisions ({', '.join(sorted(reasons))}), fleet slowdown "
      f"{s['fleet']['mean_slowdown']:.4f} vs power limit {s['power_limit']['mean_slowdown']:.4f}")
PYEOF
