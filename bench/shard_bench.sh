#!/bin/bash
# shard_bench.sh: CFP planner timings (parse+analysis, profiling, DP vs ILP search) on the
# shared HLO modules; prints the markdown table of docs/benchmarks-cfp.md.
# usage: bash bench/shard_bench.sh [path/to/ergon] [shared data dir]
set -u
E=${1:-build/ergon}
H=${2:-../shared/data}/hlo
echo "| model | mesh | blocks | segments (unique) | analyze s | DP time ms | ILP time ms | gap | DP search s | ILP search s |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for f in baseline_bert_1 gpt2_tp-1_n_layer-2; do
  for mesh in 1x4 2x2 1x8; do
    a=$($E shard analyze --hlo "$H/$f.hlo" --mesh $mesh 2>"/tmp/shard_bench_err.$$")
    at=$(sed -n 's/.*analysis \([0-9.]*\) s/\1/p' "/tmp/shard_bench_err.$$")
    nb=$(echo "$a" | sed -n 's/^ParallelBlocks: \([0-9]*\).*/\1/p')
    sg=$(echo "$a" | sed -n 's/^unique segments: \([0-9]*\) of \([0-9]*\).*/\2 (\1)/p')
    s=$($E shard search --hlo "$H/$f.hlo" --mesh $mesh --method both)
    dpt=$(echo "$s" | sed -n 's/^iteration time \([0-9.]*\) ms.*/\1/p')
    ilpt=$(echo "$s" | sed -n 's/^ILP (GLPK): iteration time \([0-9.]*\) ms.*/\1/p')
    gap=$(echo "$s" | sed -n 's/^gap DP - ILP: [-0-9.]* ms (\([-0-9.]*%\)).*/\1/p')
    dps=$(echo "$s" | sed -n 's/^search time \([0-9.]*\) s/\1/p')
    ilps=$(echo "$s" | sed -n 's/.*ILP (GLPK).*search \([0-9.]*\) s.*/\1/p')
    echo "| $f | $mesh | $nb | $sg | $at | $dpt | $ilpt | $gap | $dps | $ilps |"
  done
done
rm -f "/tmp/shard_bench_err.$$"
