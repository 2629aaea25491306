#!/usr/bin/env bash
# make demo: the main job on a built-in default, no GPU and no external file:
# simulated A100 profile of a GPT-3 XL pipeline -> Perseus frontier -> summary.
set -euo pipefail
ergon=${1:-build/ergon}
out=${DEMO_OUT:-demo-out}
rm -rf "$out"; mkdir -p "$out"
echo "== 1. profile: simulated A100, gpt3-xl, 4 stages ($out/profile.csv)"
"$ergon" profile sim --gpu a100 --model gpt3-xl --stages 4 -o "$out/profile.csv"
echo
echo "== 2. plan: the whole time-energy frontier, 4 stages x 16 microbatches, 1 ms unit"
"$ergon" plan perseus --profile "$out/profile.csv" --stages 4 --microbatches 16 \
    --blocking-power 83.64 --unit-time 0.001 --out "$out/frontier"
echo
echo "== 3. choose: the plan for a straggler 1% slower than all-max clocks"
"$ergon" choose --frontier "$out/frontier" --slowdown 1.01 --out "$out/chosen.json"
echo
echo "== 4. emulate the chosen plan with the profiled values"
"$ergon" emulate --profile "$out/profile.csv" --plan "$out/chosen.json" --blocking-power 83.64
echo
echo "outputs in $out/: profile.csv, frontier/frontier.csv, frontier/plans.ergon (every plan),"
echo "frontier/profile.csv, frontier/frontier-info.csv, chosen.json"
