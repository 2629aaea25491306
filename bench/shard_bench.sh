#!/bin/bash
# shard_bench.sh: CFP planner timings (analysis, profiling, DP vs block ILP vs per-operator
# ILP) on the shared HLO modules; prints the markdown table of docs/benchmarks.md.
# usage: bash bench/shard_bench.sh [path/to/ergon] [shared data dir] [ILP time limit s]
set -u
E=${1:-build/ergon}
H=${2:-../shared/data}/hlo
LIM=${3:-60}
err=$(mktemp)
echo "| model | mesh | blocks | segments (unique) | analyze s | profile s | DP ms | block-ILP ms | gap | DP search s | block-ILP s | op-ILP vars | op-ILP ms | op-ILP s | op-ILP / DP time |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for f in baseline_bert_1 gpt2_tp-1_n_layer-2; do
  for mesh in 1x4 2x2 1x8; do
    a=$($E shard analyze --hlo "$H/$f.hlo" --mesh $mesh 2>"$err")
    at=$(sed -n 's/.*analysis \([0-9.]*\) s/\1/p' "$err")
    nb=$(echo "$a" | sed -n 's/^ParallelBlocks: \([0-9]*\).*/\1/p')
    sg=$(echo "$a" | sed -n 's/^unique segments: \([0-9]*\) of \([0-9]*\).*/\2 (\1)/p')
    pt=$($E shard profile --hlo "$H/$f.hlo" --mesh $mesh --rows 1 | sed -n 's/.*profiling \([0-9.]*\) s.*/\1/p')
    s=$($E shard search --hlo "$H/$f.hlo" --mesh $mesh --method both --time-limit "$LIM")
    dpt=$(echo "$s" | sed -n 's/^iteration time \([0-9.]*\) ms.*/\1/p')
    ilpt=$(echo "$s" | sed -n 's/^ILP (GLPK): iteration time \([0-9.]*\) ms.*/\1/p')
    gap=$(echo "$s" | sed -n 's/^gap DP - ILP: [-0-9.]* ms (\([-0-9.]*%\)).*/\1/p')
    dps=$(echo "$s" | sed -n 's/^search time \([0-9.]*\) s/\1/p')
    ilps=$(echo "$s" | sed -n 's/.*ILP (GLPK).*search \([0-9.]*\) s.*/\1/p')
    ov=$(echo "$s" | sed -n 's/^per-operator ILP.*GLPK, \([0-9]*\) variables.*/\1/p')
    om=$(echo "$s" | sed -n 's/^per-operator ILP.*objective \([0-9.a-z]*\) ms.*/\1/p')
    os=$(echo "$s" | sed -n 's/^per-operator ILP.*search \([0-9.]*\) s.*/\1/p')
    lim=$(echo "$s" | grep -q "time limit hit" && echo " (limit)")
    ratio=$(awk -v a="$os" -v b="$dps" 'BEGIN{ if (b > 0) printf "%.0fx", a / b; else print "-" }')
    echo "| $f | $mesh | $nb | $sg | $at | $pt | $dpt | $ilpt | $gap | $dps | $ilps | $ov | $om$lim | $os | $ratio |"
  done
done
rm -f "$err"
