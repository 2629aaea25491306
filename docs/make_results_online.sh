#!/usr/bin/env bash
# make_results_online.sh: the sparse-profiling and emulator-fidelity tables of docs/results.md.
# usage: docs/make_results_online.sh [ERGON_BINARY] [DATA_DIR] [PART]   (PART: sparse, switch, all)
# Prints Markdown on stdout. The sparse part plans at 0.1 ms with M = 96: ~10 minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ergon=${1:-$here/../build/ergon}
data=${2:-$here/../tests/data/published/perseus-sosp24}
part=${3:-all}
[ -d "$data/stage_profile" ] || { echo "no published profiles at $data (tests/data/published is part of the repository)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
profiles="gpt3-175b+a100_sxm bloom+a100_sxm gpt3-175b+a40 bloom+a40"
gpu_of() { case $1 in *a40) echo A40;; *) echo A100;; esac; }

if [ "$part" = all ] || [ "$part" = sparse ]; then
  echo "| profile | measured / full sweep | rounds | M | target | plan on real profile (s, J) | plan on prediction, run on real (s, J) | energy gap | meets target |"
  echo "|---|---|---:|---:|---|---|---|---:|---|"
  for p in $profiles; do
    out=$("$ergon" profile sparse --replay "$data/stage_profile/${p}_bf16.csv" -o "$tmp/pred.csv" \
      --check 12,96 --gpu "$(gpu_of "$p")" --unit-time 0.0001)
    meas=$(echo "$out" | sed -n 's/^measured \([0-9]*\) of \([0-9]*\) .* in \([0-9]*\) rounds$/\1 \/ \2 (1\/X) \3/p')
    read -r a _ b _ r <<<"$meas"
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "1/%.1f", b / a }')
    echo "$out" | grep '^check' | while IFS= read -r line; do
      m=$(echo "$line" | sed 's/^check M=\([0-9]*\).*/\1/')
      tgt=$(echo "$line" | sed 's/^check M=[0-9]* \(.*[a-z]\) *: real.*/\1/')
      rp=$(echo "$line" | sed 's/.*real-profile plan \([0-9.]*\) s \([0-9.]*\) J.*/\1 s, \2 J/')
      pp=$(echo "$line" | sed 's/.*predicted-profile plan \([0-9.]*\) s \([0-9.]*\) J.*/\1 s, \2 J/')
      gap=$(echo "$line" | sed 's/.*J (\([-+0-9.]*%\)).*/\1/')
      ok=yes; case $line in *SLOWER*) ok="**no (late)**";; esac
      echo "| $p | $a / $b ($ratio) | $r | $m | $tgt | $rp | $pp | $gap | $ok |"
    done
  done
  echo
fi

if [ "$part" = all ] || [ "$part" = switch ]; then
  for m in 12 96; do
    unit=0.0001; [ $m = 96 ] && unit=0.001
    for p in $profiles; do
      for l in 0 0.001 0.01; do
        "$ergon" compare --profile "$data/stage_profile/${p}_bf16.csv" --microbatches $m \
          --gpu "$(gpu_of "$p")" --unit-time $unit --switch-latency $l --format csv -o "$tmp/$p-$m-$l.csv"
      done
      "$ergon" compare --profile "$data/stage_profile/${p}_bf16.csv" --microbatches $m \
        --gpu "$(gpu_of "$p")" --unit-time $unit --transfer-time 0.001 --no-frontier --format csv \
        -o "$tmp/$p-$m-x.csv"
      echo "#### $p, M = $m (frontier unit $unit s)"
      echo
      echo "| method | saving, 0 ms | saving, 1 ms | saving, 10 ms | slowdown, 0 / 1 / 10 ms | saving with 1 ms transfers |"
      echo "|---|---:|---:|---:|---|---:|"
      # columns: method,time,energy,saving,slowdown,pj,ps,oj,os,true_time,true_energy,true_saving,true_slowdown
      join -t, <(tail -n +2 "$tmp/$p-$m-0.csv" | sort -t, -k1,1) <(tail -n +2 "$tmp/$p-$m-0.001.csv" | sort -t, -k1,1) |
        join -t, - <(tail -n +2 "$tmp/$p-$m-0.01.csv" | sort -t, -k1,1) |
        join -t, -a1 - <(tail -n +2 "$tmp/$p-$m-x.csv" | sort -t, -k1,1) |
        awk -F, '{ x = (NF >= 45) ? sprintf("%.2f%%", $(NF-1)) : "-";
                   printf "| %s | %.2f%% | %.2f%% | %.2f%% | %.2f / %.2f / %.2f %% | %s |\n",
                   $1, $12, $24, $36, $13, $25, $37, x }' |
        sort -t'|' -k2,2
      echo
    done
  done
fi
