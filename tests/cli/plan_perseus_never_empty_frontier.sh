#!/usr/bin/env bash
# plan_perseus_never_empty_frontier.sh: `ergon plan perseus` on a flat profile or with a
# coarse --unit-time writes at least the minimum-energy (slowest) plan, or exits 1
# with the reason; it never exits 0 with an empty frontier.csv (issue 15 item 13:
# it printed "no plan" and exited 0 with a header-only frontier.csv).
set -u
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
rows() { echo $(($(wc -l <"$1") - 1)); }
# flat: every clock takes the same time and energy
{ echo "stage,instruction,frequency,time,energy"
  for s in 0 1; do for f in 1410 1395 1380; do
    echo "$s,forward,$f,0.1,30"; echo "$s,backward,$f,0.2,60"; done; done; } >"$tmp/flat.csv"
"$ERGON" plan perseus --profile "$tmp/flat.csv" --stages 2 --microbatches 4 --gpu a100 \
  --out "$tmp/o" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] || fail "flat profile: exit $rc: $(cat "$tmp/err")"
[ "$(rows "$tmp/o/frontier.csv")" -ge 1 ] || fail "flat profile: empty frontier.csv"
grep -q "one plan only: the pipeline cannot be made faster" "$tmp/out" || fail "no explanation: $(cat "$tmp/out")"
# the plan is real: emulating it gives the frontier's time
"$ERGON" emulate --profile "$tmp/flat.csv" --plan "$tmp/o/plan_00000.json" --gpu a100 --json >"$tmp/em" \
  || fail "the plan does not emulate"
t=$(sed -n 2p "$tmp/o/frontier.csv" | cut -d, -f1)
grep -q "\"time_s\": 1.50000000000000[0-9]*," "$tmp/em" || fail "emulated time: $(cat "$tmp/em")"
[ "$t" = "1.5" ] || fail "frontier time $t, expected 1.5"
"$ERGON" choose --frontier "$tmp/o" --deadline 10 >/dev/null 2>"$tmp/err" || fail "choose on one plan: $(cat "$tmp/err")"

# coarse units on a simulated profile: each run has plans or exits 1 with a reason
"$ERGON" profile sim --gpu a100 --stages 2 --model bert-large -o "$tmp/p.csv" 2>/dev/null || fail "profile sim"
for u in 0.02 0.04 0.1 10; do
  rm -rf "$tmp/c"
  "$ERGON" plan perseus --profile "$tmp/p.csv" --stages 2 --microbatches 4 --gpu a100 \
    --unit-time $u --out "$tmp/c" >"$tmp/out" 2>"$tmp/err"; rc=$?
  case $rc in
    0) [ "$(rows "$tmp/c/frontier.csv")" -ge 1 ] || fail "--unit-time $u: exit 0 with an empty frontier.csv" ;;
    1) [ -s "$tmp/err" ] || fail "--unit-time $u: exit 1 without a reason" ;;
    *) fail "--unit-time $u: exit $rc: $(cat "$tmp/err")" ;;
  esac
done
"$ERGON" plan perseus --profile "$tmp/p.csv" --stages 2 --microbatches 4 --gpu a100 \
  --unit-time 10 --out "$tmp/c" >/dev/null 2>"$tmp/err"
grep -q "time unit of 10 s is longer than every instruction" "$tmp/err" || fail "unit 10: $(cat "$tmp/err")"
echo ok
