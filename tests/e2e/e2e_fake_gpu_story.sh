#!/usr/bin/env bash
# e2e_fake_gpu_story.sh: the `make e2e` story, small, on (fake) AMD GPUs: `make e2e
# E2E_GPU=amdsmi:<fake>` at 2 stages. The fake libamd_smi.so models compute at the lowest level
# (fake_gpu_kernel_begin/end: a kernel lasts its work at the device's clock, and with
# FAKE_GPU_ACTIVITY the device draws its clock's power only while one runs), so the profiling
# sees the clock change time and energy, the planner finds a frontier, and the planned run
# runs the plan: every planned instruction at clock f took the fake kernel time
# (0.5 + 0.5 x 1700 / f) x its all-max one (the kernel's own time, not the host's). run_e2e.py
# exits 1 unless: losses bitwise identical; every instruction of every step ran at its plan's
# clock (the clock the client had applied at its begin); the plan's promise (slowdown within
# 1 % on the profile it was chosen on: choose's own numbers, circular by construction). The fake integrates its power over real time, so its energy
# and the iteration times are the host's: printed next to the emulation, deciding nothing.
# Nothing skips for load.
source "$(dirname "$0")/e2e_lib.bash"
[ -n "${ERGON_FAKE_AMDSMI:-}" ] && [ -r "$ERGON_FAKE_AMDSMI" ] || skip_or_fail "fake amdsmi not built"
[ "$(id -u)" = 0 ] || skip_or_fail "needs root (the fake amdsmi refuses clock changes otherwise)"
unset FAKE_AMDSMI_STATE FAKE_AMDSMI_DENY FAKE_AMDSMI_QUIRK FAKE_AMDSMI_LOG FAKE_AMDSMI_DEVICES FAKE_GPU_ACTIVITY
timeout -k 5 800 "$PY" "$RUN_E2E" --ergon "$ERGON" --out "$tmp/out" --stages 2 \
  --microbatches 4 --sim-model gpt3-xl --gpu "amdsmi:$ERGON_FAKE_AMDSMI" --window-steps 2 \
  --steps 4 --allow-repeat-windows --timeout 240 --trainer "$TRAIN" >"$tmp/log.txt" 2>&1
rc=$?
sed -n '/== 2/,/== 3/p;/== 7/,$p' "$tmp/log.txt" | grep -v '^\$ '
[ $rc -eq 0 ] || { cat "$tmp/log.txt"; fail "run_e2e.py exit $rc"; }
"$PY" - "$tmp/out" <<'PY' || fail "profile or plan not as expected"
import csv, json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
assert s["backend"] == "amdsmi", s["backend"]
assert all(s["checks"].values()), s["checks"]
rows = list(csv.DictReader(open(d + "/profile.csv")))
clocks = sorted({int(r["frequency"]) for r in rows})
assert clocks == list(range(775, 1701, 25)), clocks  # the fake's 38 highest clocks
plan = json.load(open(d + "/plan.json"))
f = [x for st in plan["stages"] for x in st["freq_mhz"]]
assert min(f) < 1700 and set(f) <= set(clocks), sorted(set(f))
# The time of a forward at the lowest clock vs the highest in the measured profile: the fake's
# kernel model (half memory-bound: 0.5 + 0.5 * 1700 / 775 = 1.60) plus the CPU's share, which
# the load changes: printed only.
t = {(int(r["stage"]), r["instruction"], int(r["frequency"])): float(r["time"]) for r in rows}
ratio = t[(0, "forward", 775)] / t[(0, "forward", 1700)]
print("planned clocks %s; measured profile: forward time at 775 / at 1700 MHz: %.2f"
      % (sorted(set(f)), ratio))
# Load-independent: the clocks changed the fake kernels' own times (what the trainer's pacer
# recorded from fake_gpu_kernel_begin, not the host's time) exactly as the fake's model says:
# every instruction of the planned run at f took 0.5 + 0.5 * 1700 / f times its all-max time.
worst, n = 0.0, 0
for r in range(2):
    mx = json.load(open("%s/all-max/result-%d.json" % (d, r)))["steps"]
    pl = json.load(open("%s/planned/result-%d.json" % (d, r)))["steps"]
    for a, b in zip(mx, pl):
        for fa, ta, fb, tb in zip(a["sim"]["clocks"], a["sim"]["times_s"], b["sim"]["clocks"],
                                  b["sim"]["times_s"]):
            assert fa == 1700, fa
            worst = max(worst, abs(tb / ta / (0.5 + 0.5 * 1700 / fb) - 1))
            n += 1
print("fake kernel times of %d planned instructions / all-max: the model's ratio within %.1e"
      % (n, worst))
assert n > 0 and worst <= 1e-9, worst
src = {r.get("energy_source") for r in csv.DictReader(open(d + "/profile-logs.csv"))}
assert src == {"counter"}, src  # the fake's counter, checked and trusted (client logs)
PY
echo "PASS"
