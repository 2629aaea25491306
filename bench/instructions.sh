#!/usr/bin/env bash
# instructions.sh: instruction counts (valgrind cachegrind, no cache simulation) and seconds of
# whole `ergon plan perseus` processes, which do not move with the machine's load the way
# seconds do (docs/benchmarks.md, "Instruction counts"). With two build directories it runs
# both on the same cases in the same run and prints their ratio.
#   bench/instructions.sh [BUILD [BASE_BUILD]]     (default: build)
# Cases: BENCH_IR_CASES, lines of "profile S M unit gpu [extra options]"; default below.
# Each case runs once under cachegrind (x30-50 slower) and once natively (seconds, one core).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
data=$here/tests/data/published/perseus-sosp24/stage_profile
new=${1:-build}; base=${2:-}
command -v valgrind >/dev/null || { echo "skipped: valgrind is not installed"; exit 0; }
[ -d "$data" ] || { echo "FAIL: $data is absent (it is part of the repository)"; exit 1; }
cases=${BENCH_IR_CASES:-"gpt3-175b+a40_bf16.csv 8 12 0.0001 A40
gpt3-175b+a40_bf16.csv 8 12 0.001 A40
gpt3-175b+a100_sxm_bf16.csv 8 96 0.001 A100
gpt3-175b+a40_bf16.csv 8 24 0.0001 A40"}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# ir BUILD ARGS...: instructions of the whole process
ir() {
  local b=$1; shift
  LD_LIBRARY_PATH="$b" valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
    "$b/ergon" "$@" 2>&1 >/dev/null | sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' | tr -d ,
}
secs() {
  local b=$1; shift
  /usr/bin/time -f %U -o "$tmp/t" env LD_LIBRARY_PATH="$b" taskset -c 0 "$b/ergon" "$@" >/dev/null 2>&1
  cat "$tmp/t"
}
if [ -n "$base" ]; then
  echo "| case | instructions ($base) | instructions ($new) | ratio | user s ($base) | user s ($new) |"
  echo "|---|---:|---:|---:|---:|---:|"
else
  echo "| case | instructions | user s |"
  echo "|---|---:|---:|"
fi
while read -r prof S M unit gpu extra; do
  [ -n "$prof" ] || continue
  args=(plan perseus --profile "$data/$prof" --stages "$S" --microbatches "$M" --unit-time "$unit"
        --gpu "$gpu" --quiet --formats csv --out "$tmp/out" $extra)
  name="${prof%%+*} $gpu S=$S M=$M unit $unit s${extra:+ $extra}"
  n1=$(ir "$new" "${args[@]}"); s1=$(secs "$new" "${args[@]}")
  if [ -n "$base" ]; then
    n0=$(ir "$base" "${args[@]}"); s0=$(secs "$base" "${args[@]}")
    awk -v c="$name" -v a="$n0" -v b="$n1" -v sa="$s0" -v sb="$s1" \
      'BEGIN { printf "| %s | %.1f M | %.1f M | %.4f | %s | %s |\n", c, a / 1e6, b / 1e6, b / a, sa, sb }'
  else
    awk -v c="$name" -v b="$n1" -v sb="$s1" 'BEGIN { printf "| %s | %.1f M | %s |\n", c, b / 1e6, sb }'
  fi
done <<<"$cases"
