#!/usr/bin/env bash
# make_swing_table.sh: what a bound on a job's power swing costs (docs/fleet.md, "Swing-bounded
# plans"). For each published Perseus profile (8 stages, M microbatches), the 1 %-slowdown plan's
# swing over a window of W seconds, and at bounds of 90 % and 80 % of it: the least slowdown
# (steps of 0.5 %) at which a plan of the frontier meets the bound with clocks alone (choose
# --max-swing), its energy against the unbounded 1 % plan; and, at 1 %, the per-GPU power floor
# that meets it (choose --max-swing --power-floor) and the energy it burns. Prints a markdown
# table.   docs/make_swing_table.sh [DATA_DIR] [MICROBATCHES] [WINDOW_S]
# Needs a built ergon ($ERGON, default build/ergon); about a minute on this 2-core machine.
set -eu
cd "$(dirname "$0")/.."
ERGON=${ERGON:-build/ergon}
data=${1:-tests/data/published}/perseus-sosp24/stage_profile
M=${2:-16}; W=${3:-1}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
num() { python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2:]: d = d[k]
print(d)' "$@"; }
echo "Window $W s, 8 stages, $M microbatches, 1F1B; energy per iteration; the bound is on the job's swing."
echo
echo "| profile | swing at 1 % | bound | clocks only: slowdown, energy | floor at 1 %: W per GPU, energy |"
echo "|---|---|---|---|---|"
for p in gpt3-175b+a100_sxm_bf16 gpt3-175b+a40_bf16 bloom+a100_sxm_bf16 bloom+a40_bf16; do
  case $p in *a100*) gpu=A100;; *) gpu=A40;; esac
  "$ERGON" plan perseus --profile "$data/$p.csv" --gpu $gpu --stages 8 --microbatches "$M" \
    --quiet --out "$tmp/$p" >/dev/null
  "$ERGON" choose --frontier "$tmp/$p" --slowdown 1.01 --max-swing 1e9 --power-window "$W" \
    --json >"$tmp/c"
  sw=$(num "$tmp/c" power swing_w); e0=$(num "$tmp/c" energy_j)
  for frac in 0.9 0.8; do
    b=$(awk -v s="$sw" -v f="$frac" 'BEGIN { printf "%.1f", s * f }')
    clocks="none up to +20 %"
    for x in $(seq 1.01 0.005 1.20); do
      if "$ERGON" choose --frontier "$tmp/$p" --slowdown "$x" --max-swing "$b" \
           --power-window "$W" --json >"$tmp/b" 2>/dev/null; then
        clocks=$(awk -v x="$x" -v e="$(num "$tmp/b" energy_j)" -v e0="$e0" \
          'BEGIN { printf "+%.1f %%, %+.2f %%", 100 * (x - 1), 100 * (e / e0 - 1) }')
        break
      fi
    done
    "$ERGON" choose --frontier "$tmp/$p" --slowdown 1.01 --max-swing "$b" --power-window "$W" \
      --power-floor --json >"$tmp/f"
    fl=$(awk -v w="$(num "$tmp/f" power floor_w)" -v e="$(num "$tmp/f" energy_j)" \
      -v fe="$(num "$tmp/f" power floor_energy_j)" -v e0="$e0" \
      'BEGIN { printf "%.0f W, %+.2f %%", w, 100 * ((e + fe) / e0 - 1) }')
    printf "| %s | %.0f W | %.0f W (%.0f %%) | %s | %s |\n" "$p" "$sw" "$b" "$(awk -v f=$frac 'BEGIN{print f*100}')" "$clocks" "$fl"
  done
done
