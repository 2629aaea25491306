#!/usr/bin/env bash
# Run the benchmarks (make bench). Results go to stdout as Markdown tables;
# copy them into docs/benchmarks.md together with the machine description.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
data=${ERGON_DATA:-$here/../shared/data}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F)"
echo
echo "## Perseus frontier planner (one core)"
taskset -c 0 "$build/bench/bench_planner" "$data" "${BENCH_REPS:-3}"
for b in "$build"/bench/bench_*; do
  [ "$(basename "$b")" = bench_planner ] && continue
  [ -x "$b" ] || continue
  echo; echo "## $(basename "$b")"
  "$b" || true
done
