#!/usr/bin/env bash
# same_outputs.sh: write the outputs a refactoring must not change -- Perseus frontiers and plan
# files, switch-aware frontiers, EnvPipe and Zeus plans, emulations, sparse-profiling predictions
# and their plan check --
# for the published profiles, into one directory, so that two builds can be compared byte for
# byte:
#   tools/same_outputs.sh OLD/ergon /tmp/before
#   tools/same_outputs.sh NEW/ergon /tmp/after
#   diff -r /tmp/before /tmp/after && echo identical
# Reads ../shared/data (or $ERGON_DATA); exits 77 with a message when it is absent. A few seconds
# on one core (small M, 1 ms unit).
set -u
ergon=${1:?usage: same_outputs.sh ERGON_BINARY OUT_DIR}
out=${2:?usage: same_outputs.sh ERGON_BINARY OUT_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
data=${ERGON_DATA:-$here/../shared/data}/perseus-sosp24/stage_profile
[ -d "$data" ] || { echo "SKIP: no published profiles at $data"; exit 77; }
mkdir -p "$out" || exit 1
# The same clock table for any binary (the CLI otherwise looks beside its executable).
export ERGON_GPU_TABLE=${ERGON_GPU_TABLE:-$here/data/gpus.csv}
run() { # NAME CMD...: stdout and exit status into OUT/NAME.out, stderr into OUT/NAME.err
    local name=$1; shift
    "$@" >"$out/$name.out" 2>"$out/$name.err"
    echo "exit $?" >>"$out/$name.out"
}
for prof in "$data"/*.csv; do
    base=$(basename "$prof" .csv)
    case "$base" in *a40*) gpu=A40 ;; *) gpu=A100 ;; esac
    d=$out/$base
    mkdir -p "$d"
    run "$base/perseus" "$ergon" plan perseus --profile "$prof" --stages 8 --microbatches 8 \
        --gpu "$gpu" --unit-time 0.002 --per-plan-files --out "$d/perseus"
    run "$base/perseus-switch" "$ergon" plan perseus --profile "$prof" --stages 8 --microbatches 8 \
        --gpu "$gpu" --unit-time 0.002 --switch-latency default --out "$d/perseus-switch"
    run "$base/envpipe" "$ergon" plan envpipe --profile "$prof" --stages 8 --microbatches 8 \
        --gpu "$gpu" --out "$d/envpipe"
    # EnvPipe's phases under each knob: --type, --reconfig, the schedule, the memory cap, the
    # measured-wait rule, the per-iteration printout, and Perseus's emulation of it.
    for ty in baseline uniform envelope; do
        for rc in default greedy balanced; do
            run "$base/envpipe-$ty-$rc" "$ergon" plan envpipe --profile "$prof" --stages 8 \
                --microbatches 8 --gpu "$gpu" --type "$ty" --reconfig "$rc" --quiet \
                --out "$d/envpipe-$ty-$rc.json"
        done
    done
    run "$base/envpipe-1f1b" "$ergon" plan envpipe --profile "$prof" --stages 8 --microbatches 8 \
        --gpu "$gpu" --schedule 1f1b --out "$d/envpipe-1f1b.json"
    run "$base/envpipe-inflight" "$ergon" plan envpipe --profile "$prof" --stages 8 \
        --microbatches 12 --gpu "$gpu" --max-inflight 10 --out "$d/envpipe-inflight.json"
    run "$base/envpipe-iterations" "$ergon" plan envpipe --profile "$prof" --stages 4 \
        --microbatches 6 --gpu "$gpu" --threshold-scale 4 --transfer-time 0.001 \
        --print-iterations --out "$d/envpipe-iterations.json"
    run "$base/envpipe-perseus" "$ergon" plan envpipe --profile "$prof" --stages 8 \
        --microbatches 8 --gpu "$gpu" --variant perseus-emulation --unit-time 0.002 \
        --out "$d/envpipe-perseus.json"
    run "$base/zeus-global" "$ergon" plan zeus-global --profile "$prof" --stages 8 \
        --microbatches 8 --gpu "$gpu" --out "$d/zeus-global"
    run "$base/zeus-stage" "$ergon" plan zeus-stage --profile "$prof" --stages 8 \
        --microbatches 8 --gpu "$gpu" --out "$d/zeus-stage"
    first=$(ls "$d/perseus"/freqs_pipeline_*.py 2>/dev/null | head -1)
    [ -n "$first" ] && run "$base/emulate" "$ergon" emulate --profile "$d/perseus/profile.csv" \
        --plan "$first" --gpu "$gpu" --json
    run "$base/sparse" "$ergon" profile sparse --replay "$prof" --stages 8 -o "$d/sparse.csv" \
        --check 8 --gpu "$gpu" --unit-time 0.002
done
# The other schedules' DAGs (chunks, split backward passes) through the Perseus planner.
prof=$(ls "$data"/*.csv | head -1)
for sched in gpipe interleaved-1f1b interleaved-zb zbv; do
    mkdir -p "$out/sched-$sched"
    run "sched-$sched/perseus" "$ergon" plan perseus --profile "$prof" --stages 4 --microbatches 8 \
        --schedule "$sched" --gpu A100 --unit-time 0.002 --out "$out/sched-$sched/perseus"
done
# Timings and the output directory vary from run to run: normalise the lines that report them.
for f in "$out"/*/*.out "$out"/*/*.err; do
    sed -i -E "s#$out/#OUT/#g; s/(in|plus|after) [0-9]+(\.[0-9]+)? (ms|s)\b/\1 T \3/g" "$f"
done
echo "outputs in $out"
