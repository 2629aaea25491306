#!/usr/bin/env bash
# perseus_incr_compare.sh: the Perseus frontier planned by the incremental crashing step (the
# default) and by the full pass (ERGON_PERSEUS_FULL_PASS=1, which rebuilds CPM, the critical
# sub-DAG and the flow network for every plan), compared byte for byte (frontier.csv,
# frontier-info.csv, plans.ergon, profile.csv) on the large cases the unit test
# (tests/unit/test_perseus_incr.c) leaves out: every published profile at M = 12 and 96, 0.1 and
# 1 ms, and interleaved-1F1B, ZBV and DualPipeV (P = 8, V = 2, --backward-split 0.5) on
# gpt3-175b A40 at M = 12 (DualPipeV: 16) and 96, 0.1 ms. Prints a markdown table with the user CPU seconds and
# peak RSS of both (one core each, run back to back) and exits 1 when any frontier differs.
#   tools/perseus_incr_compare.sh [BUILD_DIR]     (default: build; needs BUILD_DIR/ergon)
#   tools/perseus_incr_compare.sh BUILD_DIR BASE_BUILD_DIR
#       this build against another one (e.g. main's), both the default (incremental) way, on
#       the same cases: the "full pass" columns are then BASE_BUILD_DIR's.
# Cases: PERSEUS_CMP_CASES, lines of "profile M unit [extra options]". Reads the published
# profiles in tests/data/published. About 3 minutes on one idle core.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
ergon=$build/ergon
data=$here/tests/data/published/perseus-sosp24/stage_profile
[ -d "$data" ] || { echo "FAIL: no published profiles at $data (they are part of the repository)"; exit 1; }
[ -x "$ergon" ] || { echo "no $ergon: build first (make build)"; exit 1; }
base=${2:-}
[ -z "$base" ] || [ -x "$base/ergon" ] || { echo "no $base/ergon"; exit 1; }
export ERGON_GPU_TABLE=${ERGON_GPU_TABLE:-$here/data/gpus.csv}
cases=${PERSEUS_CMP_CASES:-}
if [ -z "$cases" ]; then
    for prof in gpt3-175b+a40_bf16.csv gpt3-175b+a100_sxm_bf16.csv bloom+a40_bf16.csv \
                bloom+a100_sxm_bf16.csv; do
        for M in 12 96; do
            for unit in 0.0001 0.001; do
                cases+="$prof $M $unit"$'\n'
            done
        done
    done
    for sched in interleaved-1f1b zbv dualpipev; do
        for M in 12 96; do
            # DualPipeV needs M >= P V = 16
            [ $sched = dualpipev ] && [ $M = 12 ] && M=16
            cases+="gpt3-175b+a40_bf16.csv $M 0.0001 --schedule $sched --chunks 2 --backward-split 0.5"$'\n'
        done
    done
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
status=0
if [ -n "$base" ]; then
    echo "| case | plans | frontier | user s ($base) | user s ($build) | ratio | peak RSS MB ($base) | peak RSS MB ($build) |"
else
    echo "| case | plans | frontier | user s (full pass) | user s (incremental) | full / incremental | peak RSS MB (full) | peak RSS MB (incremental) |"
fi
echo "|---|---:|---|---:|---:|---:|---:|---:|"
while read -r prof M unit extra; do
    [ -n "$prof" ] || continue
    case "$prof" in *a40*) gpu=A40 ;; *) gpu=A100 ;; esac
    args=(plan perseus --profile "$data/$prof" --stages 8 --microbatches "$M" --unit-time "$unit"
          --gpu "$gpu" --quiet)
    # shellcheck disable=SC2206
    [ -n "$extra" ] && args+=($extra)
    for way in full incr; do
        rm -rf "$tmp/$way"
        if [ $way = full ]; then fp=1; else fp=0; fi
        b=$build
        if [ $way = full ] && [ -n "$base" ]; then fp=0; b=$base; fi
        if ! ERGON_PERSEUS_FULL_PASS=$fp LD_LIBRARY_PATH=$b${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
            /usr/bin/time -f "%U %M" -o "$tmp/$way.time" \
            taskset -c 0 "$b/ergon" "${args[@]}" --out "$tmp/$way" >"$tmp/$way.log" 2>&1; then
            echo "| ${prof%%+*} $gpu M=$M unit $unit $extra | - | FAILED ($way): $(tail -1 "$tmp/$way.log") | | | | | |"
            status=1
            continue 2
        fi
    done
    if diff -r "$tmp/full" "$tmp/incr" >/dev/null; then same=identical; else same=DIFFERENT; status=1; fi
    plans=$(($(wc -l <"$tmp/full/frontier.csv") - 1))
    read -r uf rf <"$tmp/full.time"
    read -r ui ri <"$tmp/incr.time"
    awk -v c="${prof%%+*} $gpu M=$M unit $unit${extra:+ $extra}" -v p="$plans" -v s="$same" \
        -v uf="$uf" -v ui="$ui" -v rf="$rf" -v ri="$ri" 'BEGIN {
        printf "| %s | %d | %s | %.2f | %.2f | %s | %.1f | %.1f |\n", c, p, s, uf, ui,
               (ui > 0 ? sprintf("%.2f", uf / ui) : "-"), rf / 1024, ri / 1024 }'
done <<<"$cases"
exit $status
