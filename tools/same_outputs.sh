#!/usr/bin/env bash
# same_outputs.sh: the outputs a refactoring must not change, byte for byte, for two builds --
# Perseus frontiers and plan files, switch-aware frontiers, EnvPipe (every --type and --reconfig,
# its schedules, the memory cap, the measured-wait rule with every iteration printed, Perseus's
# emulation of it) and Zeus plans, emulations, sparse-profiling predictions and their plan check
# on the published profiles; `ergon shard` analyses, plans, annotated HLO and plan JSON on the
# shared HLO modules; and the dump of an `ergon serve` job (Perseus protocol, two windows).
#
#   tools/same_outputs.sh ERGON OUT_DIR       write one build's outputs into OUT_DIR
#   tools/same_outputs.sh --compare OLD NEW   write both builds' outputs and compare them
#   tools/same_outputs.sh --rev REV [NEW]     build git revision REV (a detached worktree in a
#                                             temporary directory, Release, -j${JOBS:-2}) and
#                                             compare it with NEW (default build/ergon)
#   tools/same_outputs.sh --digest OUT_DIR    one SHA-256 per output (a directory of plan files
#                                             or a dump: one line for all of it), sorted
#
# ctest runs it as cli/same_outputs: the digest of this build's outputs must equal the committed
# tests/data/same_outputs.digest (ARCHITECTURE.md, "Checks").
# Reads the published data in tests/data/published; fails with a message when it is absent. A few
# seconds on one core (small M, 1 ms unit). Exit: 0 written or identical, 1 different or failed,
# 2 usage.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
usage() {
    sed -n '9,16p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# --digest DIR: "SHA256  PATH" for every file one or two levels down, and one line for each
# directory two levels down (the SHA-256 of its own sorted listing of SHA-256s).
digest() {
    local dir=$1
    [ -d "$dir" ] || { echo "same_outputs.sh: no directory $dir" >&2; exit 1; }
    (
        cd "$dir" || exit 1
        find . -mindepth 1 -maxdepth 2 -type f -printf '%P\n' | LC_ALL=C sort |
            while IFS= read -r f; do sha256sum "$f"; done
        find . -mindepth 2 -maxdepth 2 -type d -printf '%P\n' | LC_ALL=C sort |
            while IFS= read -r d; do
                h=$(cd "$d" && find . -type f -printf '%P\n' | LC_ALL=C sort |
                    while IFS= read -r f; do sha256sum "$f"; done | sha256sum)
                echo "${h%% *}  $d/"
            done
    ) | LC_ALL=C sort -k2
}

# compare OLD NEW: both builds' outputs into a temporary directory, then diff -r.
compare() {
    local old new tmp rc
    old=$(realpath "$1") && new=$(realpath "$2") || exit 1
    tmp=$(mktemp -d)
    "$0" "$old" "$tmp/old" >/dev/null
    rc=$?
    [ $rc = 77 ] && { rm -rf "$tmp"; exit 77; }
    "$0" "$new" "$tmp/new" >/dev/null
    if diff -r "$tmp/old" "$tmp/new" >"$tmp/diff"; then
        echo "same outputs: $(find "$tmp/new" -type f | wc -l) files identical ($old, $new)"
        rm -rf "$tmp"
        return 0
    fi
    echo "outputs differ ($old vs $new):"
    head -60 "$tmp/diff"
    echo "(both trees kept in $tmp)"
    return 1
}

case "${1:-}" in
--digest)
    [ $# = 2 ] || usage
    digest "$2"
    exit $?
    ;;
--compare)
    [ $# = 3 ] || usage
    compare "$2" "$3"
    exit $?
    ;;
--rev)
    [ $# = 2 ] || [ $# = 3 ] || usage
    rev=$2
    new=${3:-$here/build/ergon}
    [ -x "$new" ] || { echo "same_outputs.sh: no build at $new (make build, or name it)" >&2; exit 1; }
    wt=$(mktemp -d)
    git -C "$here" worktree add --detach "$wt/src" "$rev" >/dev/null 2>&1 ||
        { echo "same_outputs.sh: cannot check out '$rev'" >&2; rm -rf "$wt"; exit 1; }
    echo "building $rev in $wt/src/build ..."
    (cmake -S "$wt/src" -B "$wt/src/build" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
        make -C "$wt/src/build" -j"${JOBS:-2}" ergon_cli >/dev/null) ||
        { echo "same_outputs.sh: $rev does not build" >&2; exit 1; }
    compare "$wt/src/build/ergon" "$new"
    rc=$?
    git -C "$here" worktree remove --force "$wt/src" >/dev/null 2>&1
    rm -rf "$wt"
    exit $rc
    ;;
-h | --help | "") usage ;;
esac

ergon=${1:?}
out=${2:-}
[ -n "$out" ] && [ $# = 2 ] || usage
data_root=$here/tests/data/published
data=$data_root/perseus-sosp24/stage_profile
[ -d "$data" ] || { echo "FAIL: no published profiles at $data (they are part of the repository)"; exit 1; }
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
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
# Operator sharding on the shared HLO modules: the analysis with its members, and the DP plan
# (stdout, annotated module, plan JSON) on two meshes.
if [ -d "$data_root/hlo" ]; then
    for f in "$data_root"/hlo/*.hlo; do
        m=hlo-$(basename "$f" .hlo)
        mkdir -p "$out/$m"
        run "$m/analyze-2x2" "$ergon" shard analyze --hlo "$f" --mesh 2x2 --members
        for mesh in 2x2 1x4; do
            run "$m/search-$mesh" "$ergon" shard search --hlo "$f" --mesh "$mesh" \
                --out-hlo "$out/$m/search-$mesh.hlo" --out-json "$out/$m/search-$mesh.json"
            sed -i -e '/^search time /d' -e '/^DP tables /d' "$out/$m/search-$mesh.out"
            [ -f "$out/$m/search-$mesh.json" ] && sed -i '/"search_s"/d' "$out/$m/search-$mesh.json"
        done
        sed -i -e '/^parse [0-9.]* s, analysis [0-9.]* s$/d' -e '/^ergon: .*elapsed/d' \
            "$out/$m"/*.err
    done
else
    echo "note: no shared HLO at $data_root/hlo: ergon shard not compared"
fi
# A server dump: one Perseus-protocol job (PointSolution on a 2-stage plan, two windows with
# fixed results) through `ergon serve`; the job id's time stamp is normalised.
serve_dump() {
    local w=$out/serve pid port= u job stamp c0 c1
    mkdir -p "$w"
    printf '[[1200, 1200, 1000, 1000],\n [1000, 1000, 1200, 1200],]\n# estimated: 1.23 s\n' \
        >"$w/plan.py"
    "$ergon" serve --port 0 --db "$w/s.db" --dump "$w/dump" --scheduler PointSolution \
        --scheduler-args "{\"solution_path\": \"$w/plan.py\", \"warmup_iters\": 1}" \
        --mode frequency >"$w/serve.stdout" 2>"$w/serve.log" &
    pid=$!
    for _ in $(seq 300); do
        port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$w/serve.stdout" 2>/dev/null)
        [ -n "$port" ] && break
        sleep 0.05
    done
    if [ -z "$port" ]; then
        echo "server did not start" >"$w/error"
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return
    fi
    u=http://127.0.0.1:$port
    job=$(curl -sf -X POST "$u/register_job" -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"framework":"merak","model_name":"gpt3-xl","partition_method":"custom:0,8,14","microbatch_size":8,"num_microbatches":2}')
    job=${job//\"/}
    for r in 0 1; do
        curl -sf -X POST "$u/register_rank" -d "{\"job_id\":\"$job\",\"rank\":$r,\"dp_rank\":0,\"pp_rank\":$r,\"tp_rank\":0,\"pipe_schedule\":[\"load\",\"forward\",\"p2p\",\"forward\",\"p2p\",\"backward\",\"p2p\",\"backward\",\"step\"],\"power_state_range\":[1410,1200,1000]}" >/dev/null
    done
    for win in 0 1; do
        curl -s "$u/schedule/$job?rank=0" >"$w/schedule-$win-0.json" & c0=$!
        curl -s "$u/schedule/$job?rank=1" >"$w/schedule-$win-1.json" & c1=$!
        wait $c0 $c1
        for r in 0 1; do
            curl -sf -X POST "$u/result/$job" -d "{\"rank\":$r,\"iter_time\":[1.5,1.25],\"iter_energy\":[300,290],\"time_breakdown\":{\"forward\":[[0.1,0.1],[0.1,0.1]],\"backward\":[[0.2,0.2],[0.2,0.2]]},\"energy_breakdown\":{\"forward\":[],\"backward\":[]}}" >>"$w/results.out"
            echo >>"$w/results.out"
        done
    done
    curl -s "$u/schedule/$job?rank=0" >"$w/end.out"
    kill "$pid"
    wait "$pid" 2>/dev/null
    rm -f "$w/s.db"* "$w/serve.log" "$w/serve.stdout" "$w/plan.py"
    [ -n "$job" ] && [ -d "$w/dump/$job" ] && mv "$w/dump/$job" "$w/dump/JOB"
    stamp=${job%%+*}
    [ -n "$job" ] && find "$w" -type f -exec sed -i "s#$job#JOB#g; s#$stamp#STAMP#g; s#$out/#OUT/#g" {} +
}
if command -v curl >/dev/null; then
    serve_dump
else
    echo "note: curl absent: no server dump"
fi
# Timings, the output directory and where the data lie vary from run to run and machine to
# machine: normalise the lines that report them.
for f in "$out"/*/*.out "$out"/*/*.err; do
    sed -i -E "s#$out/#OUT/#g; s#$data_root/#DATA/#g; s#$here/#SRC/#g; \
        s/(in|plus|after) [0-9]+(\.[0-9]+)? (ms|s)\b/\1 T \3/g" "$f"
done
echo "outputs in $out"
