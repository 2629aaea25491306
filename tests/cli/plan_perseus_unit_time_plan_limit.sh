#!/usr/bin/env bash
# plan_perseus_unit_time_plan_limit.sh: a fine --unit-time cannot fill the disk (issue 15
# item 7: --unit-time 1e-7 wrote 7 M files, 29 GB, in two minutes).
# - the plan count is estimated before planning; past the limit (default 200000)
#   the command refuses at once with the estimate and the flags that force it,
#   creating nothing;
# - --max-plans N / --force lift it, and the estimate bounds the real count;
# - progress reaches stderr also when it is not a terminal: one line at a time.
set -u
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ERGON" profile sim --gpu a100 --stages 4 --model gpt3-xl -o "$tmp/p.csv" 2>/dev/null || fail "profile sim"
run() { "$ERGON" plan perseus --profile "$tmp/p.csv" --stages 4 --microbatches 8 --gpu a100 "$@"; }

# (timeout: a build without the limit would plan and write millions of files)
timeout 20 "$ERGON" plan perseus --profile "$tmp/p.csv" --stages 4 --microbatches 8 --gpu a100 \
  --unit-time 1e-7 --out "$tmp/o" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 124 ] && fail "--unit-time 1e-7 was not refused within 20 s"
[ $rc -eq 1 ] || fail "--unit-time 1e-7: exit $rc, expected 1: $(cat "$tmp/err")"
grep -Eq "about [0-9]{7} plans at a time unit of 1e-07 s .*more than the limit of 200000 plans" "$tmp/err" \
  || fail "no estimate: $(cat "$tmp/err")"
grep -q -- "--max-plans N / --force" "$tmp/err" || fail "the forcing flags are not named: $(cat "$tmp/err")"
[ -e "$tmp/o" ] && fail "the refused run created $tmp/o"

# a lower limit: the estimate, then exactly that limit passes and bounds the count
run --unit-time 5e-5 --max-plans 1000 --out "$tmp/o" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] || fail "--max-plans 1000: exit $rc"
est=$(sed -n 's/.*about \([0-9]*\) plans.*/\1/p' "$tmp/err")
[ -n "$est" ] && [ "$est" -gt 1000 ] || fail "estimate '$est': $(cat "$tmp/err")"
ERGON_PROGRESS_INTERVAL_S=0.005 run --unit-time 5e-5 --max-plans "$est" --formats csv --out "$tmp/o" \
  >"$tmp/out" 2>"$tmp/err" || fail "--max-plans $est: $(cat "$tmp/err")"
rows=$(($(wc -l <"$tmp/o/frontier.csv") - 1))
[ "$rows" -ge 1 ] && [ "$rows" -le "$est" ] || fail "$rows plans, estimated $est"
# stderr is a file here: progress lines, each a whole line, no carriage returns
grep -Eq "^ergon: planning: [0-9]+/$est \([0-9.]+%\), [0-9.]+ s elapsed" "$tmp/err" \
  || fail "no progress line on a non-terminal stderr: $(head -5 "$tmp/err")"
grep -q $'\r' "$tmp/err" && fail "terminal bar (\\r) written to a file"
# the default interval keeps a short run silent
rm -rf "$tmp/o"
run --unit-time 1e-3 --formats csv --out "$tmp/o" >/dev/null 2>"$tmp/err" || fail "default run"
[ -s "$tmp/err" ] && fail "a short run printed progress: $(head -3 "$tmp/err")"
rm -rf "$tmp/o"
run --unit-time 5e-5 --max-plans 1000 --force --formats csv --out "$tmp/o" >/dev/null 2>"$tmp/err" \
  || fail "--force: $(cat "$tmp/err")"
echo ok
