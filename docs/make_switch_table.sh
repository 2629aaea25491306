#!/usr/bin/env bash
# make_switch_table.sh: the Perseus frontier planned at clock-switch latencies 0, 1 and 10 ms
# side by side (docs/emulate.md, "Switch-aware planning"): for each latency L, the plans
# `choose --slowdown X` picks on the frontier planned with L, emulated at L (time and energy
# against all-max clocks, clock switches per iteration), and the latency-free frontier's plan
# for the same target emulated at L. Prints a markdown table.
#   docs/make_switch_table.sh [PROFILE] [STAGES] [MICROBATCHES] [UNIT] [GPU]
# default: gpt3-175b on A40, 8 stages, 96 microbatches, 0.1 ms (about a minute per latency on
# this 2-core machine). Needs a built ergon ($ERGON, default build/ergon).
set -eu
cd "$(dirname "$0")/.."
ERGON=${ERGON:-build/ergon}
prof=${1:-tests/data/published/perseus-sosp24/stage_profile/gpt3-175b+a40_bf16.csv}
S=${2:-8}; M=${3:-96}; unit=${4:-0.0001}; gpu=${5:-A40}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
lats="0 0.001 0.01"
targets="1.00 1.01 1.02 1.05 min"
num() { sed -n "s/.*\"$2\": \([-0-9.e+]*\).*/\1/p" "$1"; }
for L in $lats; do
  /usr/bin/time -f "%e" -o "$tmp/t$L" "$ERGON" plan perseus --profile "$prof" --gpu "$gpu" \
    --stages "$S" --microbatches "$M" --unit-time "$unit" --switch-latency "$L" --quiet \
    --out "$tmp/f$L" 2>/dev/null
done
emax=$(sed -n 's/^all_max_energy_j,//p' "$tmp/f0/frontier-info.csv")
tmax=$(sed -n 's/^all_max_time_s,//p' "$tmp/f0/frontier-info.csv")
# cell DIR TARGET L: "time% / saving% / switches" of the plan choose picks on DIR, emulated at L
cell() {
  local d=$1 x=$2 L=$3 sel
  if [ "$x" = min ]; then sel="--deadline 1e9"; else sel="--slowdown $x"; fi
  if ! "$ERGON" choose --frontier "$d" $sel --out "$tmp/p.json" --json >"$tmp/c" 2>/dev/null; then
    echo "none"; return; fi
  # a latency of 1e-9 s counts the clock changes of a latency-free run without changing it
  local l=$L; [ "$L" = 0 ] && l=1e-9
  "$ERGON" emulate --profile "$d/profile.csv" --plan "$tmp/p.json" --gpu "$gpu" \
    --switch-latency "$l" --json >"$tmp/e" 2>/dev/null
  awk -v t="$(num "$tmp/e" time_s)" -v e="$(num "$tmp/e" energy_j)" -v n="$(num "$tmp/e" num_switches)" \
    -v tm="$tmax" -v em="$emax" \
    'BEGIN { printf "%+.2f%% / %.2f%% / %d", 100 * (t / tm - 1), 100 * (1 - e / em), n }'
}
echo "Profile $(basename "$prof"), $S stages, $M microbatches, unit $unit s, all-max clocks $tmax s, $emax J."
echo "Cells: iteration time vs all-max / energy saved vs all-max / clock switches per iteration,"
echo "emulated at the column's latency L (docs/emulate.md)."
echo
printf "| target | plan |"; for L in $lats; do printf " L = %g ms |" "$(awk -v l=$L 'BEGIN{print l*1000}')"; done; echo
printf "|---|---|"; for L in $lats; do printf -- "---|"; done; echo
for x in $targets; do
  name=$([ "$x" = min ] && echo "minimum energy" || echo "slowdown $x")
  printf "| %s | switch-aware (planned at L) |" "$name"
  for L in $lats; do printf " %s |" "$(cell "$tmp/f$L" "$x" "$L")"; done; echo
  printf "| %s | latency-free frontier's plan |" "$name"
  for L in $lats; do printf " %s |" "$(cell "$tmp/f0" "$x" "$L")"; done; echo
done
printf "| frontier | plans (planning s, 2 cores shared) |"
for L in $lats; do printf " %s (%s s) |" "$(($(wc -l <"$tmp/f$L/frontier.csv") - 1))" "$(cat "$tmp/t$L")"; done; echo
