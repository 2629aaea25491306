#!/usr/bin/env bash
# demo.sh: what `make demo` runs after building (the README.md set-up block): tools/demo.sh on
# the built ergon, with no GPU and no input file: it ends with every output it names, and the
# chosen plan saves energy against all-max clocks within the 1 % slowdown it was asked for.
# Circular by construction: the numbers on choose's line are choose's own report about its
# plan. Beside them, the independent check: this test writes the all-max plan itself (every
# instruction of chosen.json at the A100's 1410 MHz) and `ergon emulate`s both on the demo's
# profile: the chosen plan must take <= 1.01 x all-max's time and less energy, and choose's
# printed numbers must be the emulated ones (within their printed rounding).
set -u
: "${ERGON:?}" "${ERGON_SRC:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
DEMO_OUT="$tmp/demo-out" bash "$ERGON_SRC/tools/demo.sh" "$ERGON" >"$tmp/out" 2>"$tmp/err" ||
  fail "tools/demo.sh: $(tail -5 "$tmp/err")"
for f in profile.csv frontier/frontier.csv frontier/plans.ergon frontier/profile.csv \
         frontier/frontier-info.csv chosen.json; do
  [ -s "$tmp/demo-out/$f" ] || fail "demo-out/$f missing"
done
line=$(grep "^plan [0-9]*: .*vs all-max clocks" "$tmp/out") || fail "no choice: $(cat "$tmp/out")"
python3 - "$line" <<'PYEOF' || fail "the demo's plan: $line"
import re, sys
m = re.search(r"([-+][0-9.]+)% time, ([-+][0-9.]+)% energy", sys.argv[1])
t, e = float(m.group(1)), float(m.group(2))
assert t <= 1.0 + 1e-9 and e < 0, (t, e)
PYEOF
python3 - "$tmp/demo-out/chosen.json" "$tmp/allmax.json" <<'PYEOF' || fail "all-max plan"
import json, sys
p = json.load(open(sys.argv[1]))
p["method"] = "all-max"
for st in p["stages"]:
    st["freq_mhz"] = [1410] * len(st["freq_mhz"])
for k in ("time_s", "energy_j", "provenance"):
    p.pop(k, None)
json.dump(p, open(sys.argv[2], "w"))
PYEOF
for x in demo-out/chosen allmax; do
  "$ERGON" emulate --profile "$tmp/demo-out/profile.csv" --plan "$tmp/$x.json" \
    --blocking-power 83.64 --json >"$tmp/$(basename $x)-emul.json" || fail "emulate $x"
done
python3 - "$line" "$tmp/chosen-emul.json" "$tmp/allmax-emul.json" <<'PYEOF' || fail "the emulator disagrees with choose: $line"
import json, re, sys
c, m = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
slow, save = c["time_s"] / m["time_s"], 1 - c["energy_j"] / m["energy_j"]
print("emulated: chosen %.6f s, %.3f J; all-max %.6f s, %.3f J: time %+.3f%%, energy %+.3f%%"
      % (c["time_s"], c["energy_j"], m["time_s"], m["energy_j"], 100 * (slow - 1), -100 * save))
assert slow <= 1.01 + 1e-9 and save > 0, (slow, save)
# choose's line: "plan N: T s, E J (...; +t% time, -e% energy vs all-max clocks: T0 s, E0 J)"
g = re.search(r": ([0-9.]+) s, ([0-9.]+) J .*: ([0-9.]+) s, ([0-9.]+) J\)", sys.argv[1])
for said, emul in zip(map(float, g.groups()), (c["time_s"], c["energy_j"], m["time_s"],
                                               m["energy_j"])):
    assert abs(said / emul - 1) <= 1e-5, (said, emul)
PYEOF
echo "ok: make demo's job: $line"
