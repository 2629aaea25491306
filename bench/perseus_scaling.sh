#!/usr/bin/env bash
# perseus_scaling.sh: cost per plan x instruction of `ergon plan perseus` as M grows
# (docs/benchmarks.md, "Incremental crashing"): for each M, the plans, the DAG's instructions
# (2 S M for 1F1B), user CPU seconds of the whole process (one core), ns per plan x
# instruction, peak RSS and -- with BENCH_IR=1 -- valgrind cachegrind's instruction count
# (counts only, x30-50 slower) and instructions per plan x instruction. With a second build
# directory it runs both on the same cases, back to back.
#   bench/perseus_scaling.sh [BUILD [BASE_BUILD]]     (default: build)
# BENCH_SCALING_M (default "12 24 48 96 192"), BENCH_SCALING_CASE (default
# "gpt3-175b+a40_bf16.csv 8 0.0001 A40": profile, S, unit, GPU). Reads the published profiles
# in tests/data/published.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
data=$here/tests/data/published/perseus-sosp24/stage_profile
[ -d "$data" ] || { echo "FAIL: $data is absent (it is part of the repository)"; exit 1; }
builds=("${1:-build}"); [ -n "${2:-}" ] && builds+=("$2")
read -r prof S unit gpu <<<"${BENCH_SCALING_CASE:-gpt3-175b+a40_bf16.csv 8 0.0001 A40}"
export ERGON_GPU_TABLE=${ERGON_GPU_TABLE:-$here/data/gpus.csv}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "| build | M | instructions in the DAG | plans | user s | ns per plan x instruction | peak RSS MB | instructions executed | per plan x instruction |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for M in ${BENCH_SCALING_M:-12 24 48 96 192}; do
    for b in "${builds[@]}"; do
        args=(plan perseus --profile "$data/$prof" --stages "$S" --microbatches "$M"
              --unit-time "$unit" --gpu "$gpu" --quiet --formats csv --out "$tmp/out")
        /usr/bin/time -f "%U %M" -o "$tmp/t" env LD_LIBRARY_PATH="$b" taskset -c 0 "$b/ergon" \
            "${args[@]}" >/dev/null 2>&1
        read -r us rss <"$tmp/t"
        plans=$(($(wc -l <"$tmp/out/frontier.csv") - 1))
        n=$((2 * S * M))
        ir=-
        if [ "${BENCH_IR:-0}" = 1 ]; then
            ir=$(LD_LIBRARY_PATH="$b" valgrind --tool=cachegrind --cache-sim=no \
                 --cachegrind-out-file=/dev/null "$b/ergon" "${args[@]}" 2>&1 >/dev/null |
                 sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' | tr -d ,)
        fi
        awk -v b="$b" -v M="$M" -v n="$n" -v p="$plans" -v us="$us" -v rss="$rss" -v ir="$ir" \
            'BEGIN { printf "| %s | %d | %d | %d | %.2f | %.1f | %.1f | %s | %s |\n", b, M, n, p, us,
                     1e9 * us / (p * n), rss / 1024,
                     ir == "-" ? "-" : sprintf("%.1f M", ir / 1e6),
                     ir == "-" ? "-" : sprintf("%.0f", ir / (p * n)) }'
    done
done
