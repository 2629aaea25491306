#!/usr/bin/env bash
# frontier_is_perseus.sh: frontier.csv is the planner's frontier, row for row as Perseus wrote
# it, and the all-max fallback is carried beside it (issue 39).
#
# 1. Every published A100 frontier (perseus-sosp24/frontier_a100_sxm: gpt3-175b and bloom,
#    M = 12, 24, 48, 96; no A40 frontier is published), planned with the reference's fitted
#    curves (lowtime_fits.csv): the same header, the same number of rows, every time column
#    byte for byte (Python repr floats), and every energy within 1e-13 relative. Why not
#    byte for byte: the energies are sums of the same fitted terms in another order, and
#    they differ in the last digits (at most 1.5e-14 relative, 6.8e-10 J, on the eight
#    files; 21 to 192 rows per file are byte-identical). With our own fit instead of the
#    reference's (the coefficients differ by ~1e-8, as scipy's do between machines): 1e-8.
# 2. gpt3-175b M=12 is the case where the fastest planned plan runs slower than all-max clocks
#    by the profiled values: frontier.csv has Perseus's 639 rows (it had 640, the last a
#    dominated all-max point); plans.ergon carries the fallback as its last plan ("fallback
#    all_max"), frontier-info.csv names it, and `ergon choose --slowdown 1.0` still finds it:
#    from plans.ergon, from plan files alone (--formats csv,py) and in a sample.
set -u
: "${ERGON:?}"
source "$(dirname "$0")/../lib/skip_lib.bash"
root=${ERGON_TEST_DATA:?}/published/perseus-sosp24
need_data "$root/frontier_a100_sxm" "$root/stage_profile"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# cmp_frontier OURS REF REL: header, row count and times identical, energies within REL
cmp_frontier() {
  awk -F, -v rel="$3" -v ours="$1" -v ref="$2" '
    NR == FNR { t[FNR] = $1; e[FNR] = $2; n = FNR; next }
    { m = FNR
      if (FNR > n) { printf "%s: %d rows, %s has more\n", ours, n - 1, ref; bad = 1; exit }
      if ($1 != t[FNR]) { printf "%s:%d: time %s, %s has %s\n", ours, FNR, t[FNR], ref, $1; bad = 1; exit }
      if (FNR == 1) { if ($2 != e[1]) { print ours ": header " t[1] "," e[1]; bad = 1; exit } ; next }
      d = e[FNR] - $2; if (d < 0) d = -d
      if (d > rel * $2) { printf "%s:%d: energy %s, %s has %s\n", ours, FNR, e[FNR], ref, $2; bad = 1; exit } }
    END { if (!bad && m != n) { printf "%s: %d rows, %s has %d\n", ours, n - 1, ref, m - 1; bad = 1 }
          exit bad }' "$1" "$2"
}
prof=$root/stage_profile
for model in gpt3-175b bloom; do
  case_=${model%%-*}_a100sxm_mb12_u1ms
  for mb in 12 24 48 96; do
    d=$tmp/$model-$mb
    "$ERGON" plan perseus --profile "$prof/$model+a100_sxm_bf16.csv" --stages 8 --microbatches $mb \
      --gpu A100 --fits "$root/lowtime_fits.csv" --fits-case "$case_" --out "$d" --quiet \
      2>"$tmp/err" || fail "plan $model M=$mb: $(cat "$tmp/err")"
    out=$(cmp_frontier "$d/frontier.csv" "$root/frontier_a100_sxm/${model}_bf16_mb$mb.csv" 1e-13) ||
      fail "$model M=$mb with the reference's fits: $out"
  done
  d=$tmp/$model-own
  "$ERGON" plan perseus --profile "$prof/$model+a100_sxm_bf16.csv" --stages 8 --microbatches 12 \
    --gpu A100 --out "$d" --quiet 2>"$tmp/err" || fail "plan $model own fit: $(cat "$tmp/err")"
  out=$(cmp_frontier "$d/frontier.csv" "$root/frontier_a100_sxm/${model}_bf16_mb12.csv" 1e-8) ||
    fail "$model M=12 with our own fit: $out"
done
echo "ok - 8 published A100 frontiers: rows and times identical, energies within 1e-13 (own fit 1e-8)"

# 2. the fallback beside the frontier
d=$tmp/gpt3-175b-12
rows=$(($(wc -l <"$d/frontier.csv") - 1))
[ "$rows" = 639 ] || fail "gpt3-175b M=12: $rows rows in frontier.csv, Perseus has 639"
grep -qx "fallback all_max" "$d/plans.ergon" || fail "plans.ergon carries no fallback"
grep -qx "num_plans 640" "$d/plans.ergon" || fail "plans.ergon: $(grep num_plans "$d/plans.ergon")"
grep -qx "fallback,all_max" "$d/frontier-info.csv" || fail "frontier-info.csv names no fallback"
allmax=$(sed -n 's/^all_max_time_s,//p' "$d/frontier-info.csv")
"$ERGON" plan perseus --profile "$prof/gpt3-175b+a100_sxm_bf16.csv" --stages 8 --microbatches 12 \
  --gpu A100 --fits "$root/lowtime_fits.csv" --fits-case gpt3_a100sxm_mb12_u1ms --formats csv,py \
  --out "$tmp/files" --quiet 2>"$tmp/err" || fail "plan --formats csv,py: $(cat "$tmp/err")"
cmp -s "$d/frontier.csv" "$tmp/files/frontier.csv" || fail "plan files: another frontier.csv"
[ -f "$tmp/files/freqs_pipeline_00639.py" ] || fail "no plan file for the fallback"
"$ERGON" sample "$d" "$tmp/sampled" -n 100 >/dev/null 2>"$tmp/err" || fail "sample: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/sampled/frontier.csv")" = 9 ] || fail "sample: $(cat "$tmp/sampled/frontier.csv")"
for dir in "$d" "$tmp/files" "$tmp/sampled"; do
  "$ERGON" choose --frontier "$dir" --slowdown 1.0 >"$tmp/ch" 2>"$tmp/err" ||
    fail "choose --slowdown 1.0 in $dir: $(cat "$tmp/err")"
  k=$(sed -n 's/^plan \([0-9]*\):.*/\1/p' "$tmp/ch")
  want=639; [ "$dir" = "$tmp/sampled" ] && want=8
  [ "$k" = "$want" ] || fail "choose --slowdown 1.0 in $dir: plan $k, the fallback is $want: $(cat "$tmp/ch")"
done
echo "ok - the all-max fallback (all-max $allmax s) is beside frontier.csv and choose finds it"
