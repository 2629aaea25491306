#!/usr/bin/env bash
# plan_default_output_fits.sh: issue 16 item 2. `plan perseus` writes by default the frontier
# CSV plus one compact file holding every plan (plans.ergon), not two files per plan (gpt3-175b
# A40, S=8, M=96 at 0.1 ms wrote 131,689 files, 1.90 GB); choose, sample and show read it and
# give the same plans as the per-plan files; the summary says "N plans in X s (plus Y s
# writing Z MB ...)"; re-planning into a non-empty directory replaces the old plans (stale
# files made choose fail with "391 rows but 695 plan files"); a damaged plans.ergon is an
# error naming the file and line. On the published profile the M=96 case itself must stay within
# 50 MB and 10 files (~10 s in Release). Skip by design: that M=96 case in the ASan build (too slow).
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
# cairo/fontconfig keep caches LeakSanitizer reports (as envpipe.sh)
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan-fontconfig.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages 4 -o "$tmp/p.csv" 2>/dev/null || fail "profile sim"
plan() { "$ERGON" plan perseus --profile "$tmp/p.csv" --stages 4 --microbatches 8 --blocking-power 83.64 "$@"; }

# 1. default output: a handful of files, the plans in one
plan --unit-time 0.001 --out "$tmp/d" >"$tmp/sum" 2>"$tmp/err" || fail "plan: $(cat "$tmp/err")"
n=$(sed -n 's/^\([0-9]*\) plans in .*/\1/p' "$tmp/sum")
[ "${n:-0}" -gt 100 ] || fail "summary: $(cat "$tmp/sum")"
grep -qE "^$n plans in [0-9.]+ s \(plus [0-9.]+ s writing [0-9.]+ MB in 4 files to " "$tmp/sum" || fail "report: $(head -1 "$tmp/sum")"
[ "$(ls "$tmp/d" | sort | tr '\n' ' ')" = "frontier-info.csv frontier.csv plans.ergon profile.csv " ] || fail "files: $(ls "$tmp/d")"
head -1 "$tmp/d/plans.ergon" | grep -qx "ergon-plans 1" || fail "plans.ergon header: $(head -1 "$tmp/d/plans.ergon")"

# 2. the same plans as the per-plan files
plan --unit-time 0.001 --per-plan-files --out "$tmp/pp" >/dev/null 2>&1 || fail "plan --per-plan-files"
[ "$(ls "$tmp/pp"/freqs_pipeline_*.py | wc -l)" -eq "$n" ] && [ "$(ls "$tmp/pp"/plan_*.json | wc -l)" -eq "$n" ] || fail "per-plan files"
"$ERGON" sample "$tmp/d" "$tmp/s1" -n 1 >/dev/null || fail "sample -n 1 of packed"
cmp -s "$tmp/d/frontier.csv" "$tmp/s1/frontier.csv" || fail "sample -n 1 changed frontier.csv"
same_clocks() { python3 -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
sys.exit(0 if [s["freq_mhz"] for s in a["stages"]] == [s["freq_mhz"] for s in b["stages"]] else 1)' "$1" "$2"; }
for sl in 1.0 1.01 1.05 1.2; do
  k=$("$ERGON" choose --frontier "$tmp/d" --slowdown $sl --out "$tmp/a.json" | sed -n 's/^plan \([0-9]*\):.*/\1/p')
  [ -n "$k" ] || fail "choose --slowdown $sl on plans.ergon"
  same_clocks "$tmp/a.json" "$tmp/pp/plan_$(printf %05d "$k").json" || fail "slowdown $sl: plan $k of plans.ergon differs from plan_$k.json"
done
"$ERGON" sample "$tmp/d" "$tmp/s" -n 10 >/dev/null || fail "sample packed"
[ -s "$tmp/s/plans.ergon" ] && [ -s "$tmp/s/frontier-info.csv" ] || fail "sample output: $(ls "$tmp/s")"
[ "$(($(wc -l <"$tmp/s/frontier.csv") - 1))" -eq $(( (n - 1) / 10 + 1 + ( (n - 1) % 10 != 0 ) )) ] || fail "sample rows: $(wc -l <"$tmp/s/frontier.csv") of $n"
"$ERGON" choose --frontier "$tmp/s" --slowdown 1.05 >/dev/null || fail "choose on a sampled packed frontier"
"$ERGON" show frontier --frontier "$tmp/d" -o "$tmp/f.png" 2>"$tmp/err" || fail "show: $(cat "$tmp/err")"

# 3. re-planning into a non-empty directory: the old plans go, other files stay
echo keep >"$tmp/pp/notes.txt"
plan --unit-time 0.004 --out "$tmp/pp" >"$tmp/sum2" 2>"$tmp/err" || fail "re-plan: $(cat "$tmp/err")"
grep -q "^replaced $((2 * n + 4)) files of an earlier frontier" "$tmp/sum2" || fail "no replacement note: $(cat "$tmp/sum2")"
ls "$tmp/pp" | grep -q "freqs_pipeline_\|plan_0" && fail "stale plan files remain: $(ls "$tmp/pp" | head)"
[ -e "$tmp/pp/notes.txt" ] || fail "a user file was removed"
"$ERGON" choose --frontier "$tmp/pp" --slowdown 1.01 >/dev/null 2>"$tmp/err" || fail "choose after re-planning: $(cat "$tmp/err")"
# and the other way: per-plan files after a packed frontier
plan --unit-time 0.004 --per-plan-files --out "$tmp/d" >/dev/null 2>&1 || fail "re-plan with files"
"$ERGON" choose --frontier "$tmp/d" --slowdown 1.01 >/dev/null 2>"$tmp/err" || fail "choose after re-planning with files: $(cat "$tmp/err")"

# 4. a damaged plans.ergon names the file and the line
b=$(grep -n '^base ' "$tmp/s/plans.ergon" | cut -d: -f1) # plan 1 is on line b + 2
sed "$((b + 2))s/.*/1.5 abc 1 2/" "$tmp/s/plans.ergon" >"$tmp/bad.ergon"; mkdir "$tmp/bad"; cp "$tmp/bad.ergon" "$tmp/bad/plans.ergon"
"$ERGON" choose --frontier "$tmp/bad" --slowdown 1.01 2>"$tmp/err"; [ $? -eq 1 ] || fail "damaged file accepted"
grep -q "bad/plans.ergon:$((b + 2)): plan 1: expected" "$tmp/err" || fail "damaged file message: $(cat "$tmp/err")"
head -$((b + 1)) "$tmp/s/plans.ergon" >"$tmp/bad/plans.ergon"
"$ERGON" choose --frontier "$tmp/bad" --slowdown 1.01 2>"$tmp/err"; [ $? -eq 1 ] && grep -q "truncated" "$tmp/err" || fail "truncated: $(cat "$tmp/err")"

# 5. the issue's case: gpt3-175b on A40, S=8, M=96, 0.1 ms
prof=$ERGON_TEST_DATA/published/perseus-sosp24/stage_profile/gpt3-175b+a40_bf16.csv
need_data "$prof"
if [ -n "${ERGON_SANITIZED:-}" ]; then
  echo "ok (skipped by design: the M=96 case under sanitizers, too slow)"; exit 0
fi
"$ERGON" plan perseus --profile "$prof" --stages 8 --microbatches 96 --gpu a40 --unit-time 0.0001 \
  --out "$tmp/big" >"$tmp/sum" 2>"$tmp/err" || fail "M=96: $(cat "$tmp/err")"
files=$(find "$tmp/big" -type f | wc -l); kb=$(du -sk "$tmp/big" | cut -f1)
[ "$files" -le 10 ] || fail "M=96: $files files"
[ "$kb" -le 51200 ] || fail "M=96: $kb KB"
"$ERGON" choose --frontier "$tmp/big" --slowdown 1.01 >/dev/null || fail "M=96 choose"
echo "ok: M=96 default output $files files, $kb KB; $(head -1 "$tmp/sum")"
