#!/usr/bin/env bash
# readme_tour.sh: the README's "A tour" block, run literally (issue 16 item 3: the tour ran
# `compare --gpu a40` against an A100 frontier computed at 83.64 W, and the picture showed
# "uniform" below the "Perseus frontier"). Every line but the sharding one runs, in order
# (the schedule lines too: a zbv schedule file planned and chosen from plans.ergon);
# the choose line and the summary agree; the picture is made; a compare at another blocking
# power is refused by `show --compare`, naming both powers.
set -u
# cairo/fontconfig keep caches LeakSanitizer reports (as envpipe.sh)
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan-fontconfig.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
: "${ERGON:?}" "${ERGON_SRC:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# the block after "## A tour", continuation lines joined, comments dropped
awk '/^## A tour/ {t=1} t && /^```/ {n++; if (n == 2) exit; next} t && n == 1' "$ERGON_SRC/README.md" |
  sed -e 's/ *#.*$//' | awk '{ if (sub(/\\$/, "")) { l = l $0 } else { print l $0; l = "" } }' |
  grep -v "^ergon shard" >"$tmp/tour"
[ "$(wc -l <"$tmp/tour")" -ge 10 ] || fail "tour not found: $(cat "$tmp/tour")"
grep -q "a40\|70.38" "$tmp/tour" && fail "the tour mixes GPUs: $(cat "$tmp/tour")"
cd "$tmp" || exit 1
n=0
while read -r line; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  eval "\"\$ERGON\" ${line#ergon }" >"out$n" 2>"err$n" || fail "tour line $n: $line: $(cat "err$n")"
done <"$tmp/tour"
[ -s frontier.png ] || fail "no frontier.png"
grep -q "blocking_power_w" cmp.csv || fail "cmp.csv does not carry its blocking power: $(head -1 cmp.csv)"
# the schedule lines: a zbv schedule file planned into plans.ergon (2 ranks x 2 chunks, its
# order carried), and choose on it picks the summary's plan (the same baseline as plan's)
zs=$(grep -l "^schedule zbv.csv: 2 ranks, 4 pipeline stages" out*) || fail "no zbv plan summary"
grep -qx "schedule file" zbv/plans.ergon && grep -qx "num_chunks 2" zbv/plans.ergon &&
  grep -q "^order 1 " zbv/plans.ergon || fail "zbv/plans.ergon: $(sed -n '1,/^base/p' zbv/plans.ergon | cut -c1-80)"
k=$(sed -n 's/^within 1% slowdown *plan \([0-9]*\):.*/\1/p' "$zs")
grep -q "^plan $k: .*vs all-max clocks" $(grep -l "zbv/plans.ergon (plan" out*) ||
  fail "zbv: summary plan $k, choose: $(cat $(grep -l "zbv/plans.ergon" out*))"
"$ERGON" emulate --profile profile.csv --plan zbv-plan.json --blocking-power 83.64 >/dev/null ||
  fail "zbv-plan.json does not emulate"
# the same comparison at the A40's blocking power is refused
"$ERGON" compare --profile profile.csv --stages 4 --microbatches 16 --gpu a40 --no-frontier \
  --format csv -o cmp40.csv 2>/dev/null || fail "compare a40"
"$ERGON" show frontier --frontier frontier/ --compare cmp40.csv -o f40.png 2>err; rc=$?
[ $rc -eq 1 ] || fail "show --compare at another blocking power: exit $rc"
grep -q "blocking power of 70.38 W, the frontier frontier/ with 83.64 W" err || fail "message: $(cat err)"
[ -e f40.png ] && fail "a refused picture was written"
echo "ok: $n tour lines"
