#!/bin/bash
# shard_scaling.sh: how `ergon shard` scales with model depth (issue 14.6). Generates GPT
# training steps of 4..768 layers with bench/gen_gpt_hlo.py and prints, per mesh, the
# analysis time and peak RSS (`analyze`) and the profiling time, DP table time and peak RSS
# (`profile`), best of `runs`; markdown for docs/benchmarks.md.
# usage: bash bench/shard_scaling.sh [path/to/ergon] [runs] [layers...]
set -u
E=${1:-build/ergon}
RUNS=${2:-3}
shift 2 2>/dev/null
LAYERS=${*:-4 16 64 256 768}
D=$(dirname "$0")
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
min() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b == "" || a + 0 < b + 0) print a; else print b }'; }
echo "| layers | HLO MB | instructions | mesh | blocks | analysis s | analyze RSS MB | profiling s | DP tables s | profile RSS MB |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for L in $LAYERS; do
  f="$T/gpt$L.hlo"
  python3 "$D/gen_gpt_hlo.py" "$L" > "$f"
  mb=$(awk -v b="$(stat -c %s "$f")" 'BEGIN{ printf "%.2f", b / 1e6 }')
  ni=$(grep -c " = " "$f")
  for mesh in 1x4 2x2; do
    at=""; ar=""; pt=""; tt=""; pr=""; nb=""
    for _ in $(seq "$RUNS"); do
      /usr/bin/time -f "RSS %M" "$E" shard analyze --hlo "$f" --mesh $mesh > "$T/a.txt" 2> "$T/e.txt"
      nb=$(sed -n 's/^ParallelBlocks: \([0-9]*\).*/\1/p' "$T/a.txt")
      at=$(min "$(sed -n 's/.*analysis \([0-9.]*\) s/\1/p' "$T/e.txt")" "$at")
      ar=$(min "$(sed -n 's/^RSS \([0-9]*\)/\1/p' "$T/e.txt")" "$ar")
      /usr/bin/time -f "RSS %M" "$E" shard profile --hlo "$f" --mesh $mesh --rows 1 > "$T/p.txt" 2> "$T/e.txt"
      pt=$(min "$(sed -n 's/.*profiling \([0-9.]*\) s.*/\1/p' "$T/p.txt" | head -1)" "$pt")
      tt=$(min "$(sed -n 's/.*DP tables \([0-9.]*\) s.*/\1/p' "$T/p.txt" | head -1)" "$tt")
      pr=$(min "$(sed -n 's/^RSS \([0-9]*\)/\1/p' "$T/e.txt")" "$pr")
    done
    echo "| $L | $mb | $ni | $mesh | $nb | $at | $(awk -v k="$ar" 'BEGIN{printf "%.0f", k/1024}') | $pt | $tt | $(awk -v k="$pr" 'BEGIN{printf "%.0f", k/1024}') |"
  done
done
