#!/bin/bash
# shard_bench.sh: CFP planner timings (analysis, profiling, DP vs block ILP vs per-operator
# ILP) on the published HLO modules; prints the markdown table of docs/benchmarks.md.
# usage: bash bench/shard_bench.sh [path/to/ergon] [data dir (tests/data/published)] [ILP time limit s] [runs]
# DP and block-ILP search times, profile and DP-table times are the best of `runs` separate
# processes (default 5): the development machine is shared, so single sub-millisecond
# timings are noisy.
set -u
E=${1:-build/ergon}
H=${2:-tests/data/published}/hlo
LIM=${3:-60}
RUNS=${4:-5}
err=$(mktemp)
best() { # best search time of $RUNS runs of: ergon shard search ... --method $1
  local m=$1 b="" t
  shift
  for _ in $(seq "$RUNS"); do
    t=$($E shard search "$@" --method "$m" --time-limit "$LIM" | sed -n 's/^search time \([0-9.]*\) s/\1/p')
    b=$(awk -v a="$t" -v b="$b" 'BEGIN{ if (b == "" || a < b) print a; else print b }')
  done
  echo "$b"
}
echo "| model | mesh | blocks | segments (unique) | analyze s | profile s | DP tables s | DP ms | block-ILP ms | gap | DP kind | DP search s | block-ILP s | ILP / DP | ILP / (DP + tables) | op-ILP vars | op-ILP ms | op-ILP s | op-ILP / DP |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for f in baseline_bert_1 gpt2_tp-1_n_layer-2; do
  for mesh in 1x4 2x2 1x8; do
    a=$($E shard analyze --hlo "$H/$f.hlo" --mesh $mesh 2>"$err")
    at=$(sed -n 's/.*analysis \([0-9.]*\) s/\1/p' "$err")
    nb=$(echo "$a" | sed -n 's/^ParallelBlocks: \([0-9]*\).*/\1/p')
    sg=$(echo "$a" | sed -n 's/^unique segments: \([0-9]*\) of \([0-9]*\).*/\2 (\1)/p')
    pt=""; tt=""
    for _ in $(seq "$RUNS"); do
      pr=$($E shard profile --hlo "$H/$f.hlo" --mesh $mesh --rows 1 | head -1)
      p1=$(echo "$pr" | sed -n 's/.*profiling \([0-9.]*\) s.*/\1/p')
      t1=$(echo "$pr" | sed -n 's/.*DP tables \([0-9.]*\) s.*/\1/p')
      pt=$(awk -v a="$p1" -v b="$pt" 'BEGIN{ if (b == "" || a < b) print a; else print b }')
      tt=$(awk -v a="$t1" -v b="$tt" 'BEGIN{ if (b == "" || a < b) print a; else print b }')
    done
    s=$($E shard search --hlo "$H/$f.hlo" --mesh $mesh --method both --time-limit "$LIM")
    dpt=$(echo "$s" | sed -n 's/^iteration time \([0-9.]*\) ms.*/\1/p')
    ilpt=$(echo "$s" | sed -n 's/^ILP (GLPK): iteration time \([0-9.]*\) ms.*/\1/p')
    gap=$(echo "$s" | sed -n 's/^gap DP - ILP: [-0-9.]* ms (\([-0-9.]*%\)).*/\1/p')
    kind=$(echo "$s" | grep -q "blocks eliminated" && echo "block elimination" ||
           (echo "$s" | grep -q "^DP exact" && echo "segment frontier" || echo "chain + 2nd pass"))
    ov=$(echo "$s" | sed -n 's/^per-operator ILP.*GLPK, \([0-9]*\) variables.*/\1/p')
    om=$(echo "$s" | sed -n 's/^per-operator ILP.*objective \([0-9.a-z]*\) ms.*/\1/p')
    os=$(echo "$s" | sed -n 's/^per-operator ILP.*search \([0-9.]*\) s.*/\1/p')
    lim=$(echo "$s" | grep -q "time limit hit" && echo " (limit)")
    dps=$(best dp --hlo "$H/$f.hlo" --mesh $mesh)
    ilps=$(best ilp --hlo "$H/$f.hlo" --mesh $mesh)
    r1=$(awk -v a="$ilps" -v b="$dps" 'BEGIN{ if (b > 0) printf "%.0fx", a / b; else print "-" }')
    r3=$(awk -v a="$ilps" -v b="$dps" -v c="$tt" 'BEGIN{ if (b + c > 0) printf "%.0fx", a / (b + c); else print "-" }')
    r2=$(awk -v a="$os" -v b="$dps" 'BEGIN{ if (b > 0) printf "%.0fx", a / b; else print "-" }')
    echo "| $f | $mesh | $nb | $sg | $at | $pt | $tt | $dpt | $ilpt | $gap | $kind | $dps | $ilps | $r1 | $r3 | $ov | $om$lim | $os | $r2 |"
  done
done
rm -f "$err"
