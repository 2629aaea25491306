#!/usr/bin/env bash
# Run the benchmarks (make bench). Results go to stdout as Markdown tables;
# copy them into docs/benchmarks.md together with the machine description.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
data=$here/tests/data/published
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F)"
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  name=$(basename "$b")
  echo; echo "== $name"
  case "$name" in
    bench_planner)
      echo "Perseus frontier planner (one core)"
      taskset -c 0 "$b" "$data" "${BENCH_REPS:-3}" ;;
    bench_replan)
      echo "Answering a straggler target from a stored frontier vs re-planning (one core)"
      taskset -c 0 "$b" "$data" "${BENCH_REPS:-3}" ;;
    bench_fleet)
      echo "Re-solving a fleet's power-cap assignment: 1,000 jobs of ~1,000-point frontiers (one core)"
      taskset -c 0 "$b" "$data" 1000 "${BENCH_REPS:-5}" ;;
    bench_client_overhead)
      fake="$build/tests/fake_nvml/libnvidia-ml.so.1"
      "$b"
      if [ -r "$fake" ]; then
        "$b" --nvml "$fake"
        "$b" --nvml "$fake" --iters 20000 --work-us 100
      fi ;;
    bench_wide)
      echo "One job of 4,096 ranks (PP 16 x DP 256) on each protocol against ergon serve (raw sockets, one poll loop)"
      "$b" --serve-arg --max-connections --serve-arg 8192 \
           --serve-arg --max-connections-per-ip --serve-arg 8192 ;;
    *) "$b" ;;
  esac
done
echo; echo "== shard_chain"
echo "ergon shard analyze on N chained dots reading one weight (bench/shard_chain.sh)"
bash "$here/bench/shard_chain.sh" "$build/ergon" "" 1000 4000 20000
# instruction counts (do not move with the load): bench/instructions.sh BUILD [BASE_BUILD]
echo; echo "== instructions (valgrind cachegrind, whole plan perseus process)"
"$here/bench/instructions.sh" "$build" ${BENCH_BASE_BUILD:-}
