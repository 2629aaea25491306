#!/usr/bin/env bash
# (the `make e2e` blocks of README.md, docs/e2e.md and examples/pytorch_pipeline/README.md run this
# story at full size)
# e2e_story.sh: the `make e2e` story, small: profile a 2-stage PyTorch pipeline on the
# simulated GPU (a sparse InstructionProfiler job on `ergon serve` over the A100's 15 MHz grid
# from 1410 to 855 MHz, or a local clock sweep when the build has no server), the profile CSV
# (the server's: measured and predicted rows, cross-checked with `ergon profile logs`), `ergon plan perseus`, `ergon choose --slowdown 1.01`, train at all-max and with the plan, compare with
# `ergon emulate`. run_e2e.py exits 1 unless (none of it depends on load; nothing skips for
# load): losses bitwise identical; on the simulated GPU's own accounting (each instruction's
# model time and energy at the clock it had when it began, however long the host took):
# every instruction of every step at its plan's clock, busy time and energy of every step
# equal to `ergon emulate` of the same plan on the simulated GPU's profile within 1e-6, the
# planned run's accounted energy below all-max's; the plan's promise, a slowdown within 1 %
# on the profile it was chosen on. Circular by construction: the server profiles, the planner
# plans and the run runs the same simulated GPU model, and the slowdown promise is choose's
# own number; the accounting against the model's profile is the independent check beside it
# (it fails when an instruction runs at another clock). Wall-clock time and energy next to
# the emulation on the measured profile are printed and decide nothing.
source "$(dirname "$0")/e2e_lib.bash"

timeout -k 5 600 "$PY" "$RUN_E2E" --ergon "$ERGON" --out "$tmp/out" --stages 2 \
  --microbatches 4 --sim-model gpt3-xl --sweep 1410:855:15 --window-steps 2 --steps 4 \
  --allow-repeat-windows \
  --timeout 60 >"$tmp/log.txt" 2>&1
rc=$?
sed -n '/== 0/,/== 1/p;/== 2/,/== 3/p;/== 7/,$p' "$tmp/log.txt" | grep -v '^\$ '

[ $rc -eq 0 ] || { cat "$tmp/log.txt"; fail "run_e2e.py exit $rc"; }
# The profile has every clock of the sweep (38 clocks x 2 stages x forward/backward): with the
# server, at most a sixth measured (column source) in >= 4x fewer windows than a full sweep's
# 40; and the chosen plan really lowers some clocks below the maximum.
serve=0; "$ERGON" serve --help >/dev/null 2>&1 && serve=1
"$PY" - "$tmp/out" $serve <<'PY' || fail "profile or plan not as expected"
import csv, json, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/profile.csv")))
clocks = sorted({int(r["frequency"]) for r in rows})
assert clocks == list(range(855, 1411, 15)), clocks
assert len(rows) == 152, len(rows)
plan = json.load(open(d + "/plan.json"))
f = [x for s in plan["stages"] for x in s["freq_mhz"]]
assert min(f) < 1410 and set(f) <= set(clocks), sorted(set(f))
s = json.load(open(d + "/summary.json"))
assert all(s["checks"].values()), s["checks"]
if sys.argv[2] == "1":  # this build has `ergon serve`: the profile came from its InstructionProfiler
    assert s["server"] and s["job_id"].endswith("+InstructionProfiler"), (s["server"], s["job_id"])
    import glob
    assert glob.glob(d + "/dump/*/*.csv"), "no InstructionProfiler CSV in the dump"
    src = [r["source"] for r in rows]
    meas = src.count("measured")
    assert set(src) == {"measured", "predicted"} and 6 * meas <= len(rows), (meas, len(rows))
    assert s["profile"]["mode"] == "sparse" and s["profile"]["sparse"]["measured"] == meas, s
    sp = s["profile"]["sparse"]
    w = s["profile"]["windows"]
    # >= 4x fewer windows than the full sweep's 40; a loaded machine (other tests share the
    # CPUs) can make samples unstable and cost extra windows: then at most one per repeat
    assert 4 * (w - sp["repeated_measurements"]) <= 40, s["profile"]
    if sp["repeated_measurements"] == 0:
        assert 4 * w <= 40, s["profile"]
    print("sparse profile: %d of %d rows measured, %d windows (full sweep: 40), %d repeated "
          "measurements" % (meas, len(rows), w, sp["repeated_measurements"]))
print("profile clocks %s; plan clocks %s" % (clocks, sorted(set(f))))
PY
echo "PASS"
