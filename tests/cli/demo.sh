#!/usr/bin/env bash
# demo.sh: what `make demo` runs after building (the README.md set-up block): tools/demo.sh on
# the built ergon, with no GPU and no input file: it ends with every output it names, and the
# chosen plan saves energy against all-max clocks within the 1 % slowdown it was asked for.
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
echo "ok: make demo's job: $line"
