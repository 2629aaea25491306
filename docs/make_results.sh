#!/usr/bin/env bash
# make_results.sh: regenerate the tables and pictures of docs/results.md.
# usage: docs/make_results.sh [ERGON_BINARY] [DATA_DIR]   (writes docs/results_tables.md, docs/img/)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ergon=${1:-$here/../build/ergon}
data=${2:-$here/../tests/data/published/perseus-sosp24}
[ -d "$data/stage_profile" ] || { echo "no published profiles at $data (tests/data/published is part of the repository)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$here/results_tables.md
: >"$out"
for prof in gpt3-175b+a100_sxm gpt3-175b+a40 bloom+a100_sxm bloom+a40; do
  gpu=${prof#*+}
  for m in 12 96; do
    csv=$tmp/$prof-$m.csv
    "$ergon" compare --profile "$data/stage_profile/${prof}_bf16.csv" --microbatches $m --gpu "$gpu" \
      --unit-time 0.0001 --format csv -o "$csv"
    {
      echo "### $prof, M = $m"
      echo
      echo "| method | time (s) | energy (J) | saving | slowdown | Perseus 1F1B at same time (J) | saving | Perseus on ours at same time (J) | saving |"
      echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
      tail -n +2 "$csv" | awk -F, '{ printf "| %s | %.4f | %.1f | %.2f%% | %.2f%% | %s | %s | %s | %s |\n",
        $1, $2, $3, $4, $5, ($6 == "" ? "-" : sprintf("%.1f", $6)), ($7 == "" ? "-" : $7 "%"),
        ($8 == "" ? "-" : sprintf("%.1f", $8)), ($9 == "" ? "-" : $9 "%") }'
      echo
    } >>"$out"
    cp "$csv" "$tmp/keep-$prof-$m.csv"
  done
done
# pictures: GPT-3 175B on A100-SXM, M = 12
p=$data/stage_profile/gpt3-175b+a100_sxm_bf16.csv
mkdir -p "$here/img"
"$ergon" plan envpipe --profile "$p" --microbatches 12 --gpu a100 --out "$tmp/envpipe.json" --quiet
"$ergon" show plan --profile "$p" --plan "$tmp/envpipe.json" --gpu a100 --width 1100 \
  --title "EnvPipe (envelope, ours, balanced): GPT-3 175B on A100-SXM, 8 stages, 12 microbatches" \
  -o "$here/img/envpipe_timeline_gpt3_a100_mb12.png"
"$ergon" compare --profile "$p" --microbatches 12 --gpu a100 --unit-time 0.0001 --format csv \
  --frontier-dir "$tmp/fr" -o "$tmp/cmp.csv"
"$ergon" show frontier --frontier "Perseus frontier (1F1B)=$tmp/fr/1f1b" \
  --frontier "Perseus frontier (ours)=$tmp/fr/ours" --compare "$tmp/cmp.csv" --width 1000 \
  --title "GPT-3 175B on A100-SXM, 8 stages, 12 microbatches" \
  -o "$here/img/frontier_gpt3_a100_mb12.png"
echo "wrote $out and $here/img/"
