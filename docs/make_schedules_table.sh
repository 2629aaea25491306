#!/usr/bin/env bash
# make_schedules_table.sh: the schedules table of docs/results.md: Perseus frontiers of every
# schedule on the four published profiles (P = 8 ranks, M = 12 and 96, I/W from
# --backward-split 0.5, 1 ms unit).
# usage: docs/make_schedules_table.sh [ERGON_BINARY] [DATA_DIR] > table.md
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ergon=${1:-$here/../build/ergon}
data=${2:-$here/../tests/data/published/perseus-sosp24}
[ -d "$data/stage_profile" ] || { echo "no published profiles at $data (tests/data/published is part of the repository)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
num() { sed -n "s/^$1 *plan [0-9]*: \([0-9.e+-]*\) s ([^)]*), \([0-9.e+-]*\) J.*/\1 \2/p"; }
for prof in gpt3-175b+a100_sxm gpt3-175b+a40 bloom+a100_sxm bloom+a40; do
  gpu=${prof#*+}; gpu=${gpu%_sxm}
  for m in 12 96; do
    echo "### $prof, P = 8, M = $m"
    echo
    echo "| schedule | all-max time (s) | all-max energy (J) | frontier at all-max time (J) | at 1 % slowdown (J) | minimum (J) | min-energy time (s) | vs 1F1B all-max at ≤ 1 % |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    base=""
    for sched in 1f1b interleaved-1f1b interleaved-zb zbv dualpipev; do
      extra=""
      [ "$sched" = 1f1b ] || extra="--chunks 2 --backward-split 0.5"
      if ! "$ergon" plan perseus --profile "$data/stage_profile/${prof}_bf16.csv" --stages 8 \
          --microbatches $m --gpu "$gpu" --schedule $sched $extra --formats csv \
          --out "$tmp/f" >"$tmp/out" 2>"$tmp/err"; then
        echo "| $sched | refused: $(sed 's/^ergon plan perseus: //; s/|/\//g' "$tmp/err" | head -1) | | | | | | |"
        continue
      fi
      read -r ta ea < <(sed -n 's/^all-max clocks: *\([0-9.e+-]*\) s, \([0-9.e+-]*\) J.*/\1 \2/p' "$tmp/out")
      read -r t0 e0 < <(num "at the all-max time" <"$tmp/out")
      read -r t1 e1 < <(num "within 1% slowdown" <"$tmp/out")
      read -r tm em < <(num "minimum-energy plan" <"$tmp/out")
      [ -n "$base" ] || base=$ea
      awk -v s="$sched" -v ta="$ta" -v ea="$ea" -v e0="$e0" -v e1="$e1" -v em="$em" -v tm="$tm" -v b="$base" \
        'BEGIN { printf "| %s | %.4f | %.1f | %.1f | %.1f | %.1f | %.4f | %+.2f%% |\n", s, ta, ea, e0, e1, em, tm, 100 * (e1 / b - 1) }'
    done
    echo
  done
done
