#!/usr/bin/env bash
# choose_agrees_with_plan_summary.sh: one baseline (issue 16 item 1). The plan summary's
# "within 1% slowdown" plan and `ergon choose --slowdown 1.01` on the same frontier are the
# same plan, both measured against all-max clocks evaluated with the profile, and choose
# shows its saving against all-max (it used to pick relative to the fastest plan's estimate,
# e.g. plan 652 vs 666 in `make demo`, and print "-0.44 % energy vs the fastest plan").
# Also: the frontier CSV path is accepted by choose, --deadline and --slowdown exclude
# each other, and printed paths carry no double slash.
set -u
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages 4 -o "$tmp/p.csv" 2>/dev/null || fail "profile sim"
"$ERGON" plan perseus --profile "$tmp/p.csv" --stages 4 --microbatches 8 --blocking-power 83.64 \
  --unit-time 0.002 --out "$tmp/f/" >"$tmp/sum" 2>"$tmp/err" || fail "plan: $(cat "$tmp/err")"
grep -q "//" "$tmp/sum" && fail "double slash in a printed path: $(cat "$tmp/sum")"
grep -q "fastest plan: .*(planner estimate)" "$tmp/sum" || fail "estimates not labelled: $(cat "$tmp/sum")"
sum_k=$(sed -n 's/^within 1% slowdown *plan \([0-9]*\):.*/\1/p' "$tmp/sum")
[ -n "$sum_k" ] || fail "no 1% plan in the summary: $(cat "$tmp/sum")"
sum_e=$(sed -n 's/^within 1% slowdown.*J (\([-+0-9.]*\)% vs all-max.*/\1/p' "$tmp/sum")
allmax=$(sed -n 's/^all-max clocks: *\([0-9.e+-]*\) s, \([0-9.e+-]*\) J.*/\1 \2/p' "$tmp/sum")
[ -n "$allmax" ] || fail "no all-max line: $(cat "$tmp/sum")"
for arg in "$tmp/f" "$tmp/f/" "$tmp/f/frontier.csv"; do
  "$ERGON" choose --frontier "$arg" --slowdown 1.01 >"$tmp/ch" 2>"$tmp/err" || fail "choose $arg: $(cat "$tmp/err")"
  ch_k=$(sed -n 's/^plan \([0-9]*\):.*/\1/p' "$tmp/ch")
  [ "$ch_k" = "$sum_k" ] || fail "summary picks plan $sum_k, choose --frontier $arg plan $ch_k: $(cat "$tmp/sum" "$tmp/ch")"
  grep -q "vs all-max clocks: ${allmax% *} s" "$tmp/ch" || fail "choose not against all-max ($allmax): $(cat "$tmp/ch")"
  grep -q "energy vs all-max" "$tmp/ch" && grep -q "profiled values" "$tmp/ch" || fail "no saving vs all-max: $(cat "$tmp/ch")"
  grep -qF -- "$sum_e% energy vs all-max" "$tmp/ch" || fail "summary says $sum_e% energy, choose: $(cat "$tmp/ch")"
  grep -q "^planner estimate: " "$tmp/ch" || fail "estimate not labelled: $(cat "$tmp/ch")"
done
# a deadline equal to 1.01 x the all-max time picks the same plan
dl=$(awk -v t="${allmax% *}" 'BEGIN { printf "%.17g", 1.01 * t }')
"$ERGON" choose --frontier "$tmp/f" --deadline "$dl" >"$tmp/ch" 2>"$tmp/err" || fail "choose --deadline: $(cat "$tmp/err")"
grep -q "^plan $sum_k:" "$tmp/ch" || fail "--deadline $dl: $(cat "$tmp/ch")"
# the JSON form carries the same
"$ERGON" choose --frontier "$tmp/f" --slowdown 1.01 --json >"$tmp/j" || fail "choose --json"
grep -q "\"index\": $sum_k," "$tmp/j" && grep -q '"all_max_energy_j"' "$tmp/j" || fail "json: $(cat "$tmp/j")"
# the two criteria exclude each other, and say so
"$ERGON" choose --frontier "$tmp/f" --deadline 2.9 --slowdown 1.01 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "exclude each other" "$tmp/err" || fail "both criteria: exit $rc: $(cat "$tmp/err")"
echo "ok: summary and choose both pick plan $sum_k ($sum_e% energy vs all-max)"
