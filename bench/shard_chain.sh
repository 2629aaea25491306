#!/bin/bash
# shard_chain.sh: `ergon shard analyze` on N chained dots that all read one weight
# (bench/gen_chain_hlo.py), the case that made the analysis cubic (issue 21): wall time and
# peak RSS per size, for the build under test and, optionally, an older build in the same run
# (sizes it cannot finish within LIMIT seconds are shown as "> LIMIT s").
# usage: bash bench/shard_chain.sh NEW_ERGON [OLD_ERGON|""] [N...]
#   MESH (default 1x2), LIMIT (default 120) seconds for the old build.
set -u
E=${1:-build/ergon}
OLD=${2:-}
shift 2 2>/dev/null
SIZES=${*:-1000 2000 4000 20000}
MESH=${MESH:-1x2}
LIMIT=${LIMIT:-120}
D=$(dirname "$0")
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
# one BIN FILE: "seconds RSS_MB" or "> LIMIT s"
one() {
  if timeout "$LIMIT" /usr/bin/time -f "%e %M" "$1" shard analyze --hlo "$2" --mesh "$MESH" \
       >"$T/out" 2>"$T/err"; then
    tail -1 "$T/err" | awk '{ printf "%.2f s, %.0f MB", $1, $2 / 1024 }'
  else
    echo "> $LIMIT s"
  fi
}
if [ -n "$OLD" ]; then
  echo "| dots | instructions | before | after | blocks | twin searches cut |"
  echo "|---|---|---|---|---|---|"
else
  echo "| dots | instructions | analyze | blocks | twin searches cut |"
  echo "|---|---|---|---|---|"
fi
for n in $SIZES; do
  f="$T/chain$n.hlo"
  python3 "$D/gen_chain_hlo.py" "$n" > "$f"
  ni=$(grep -c " = " "$f")
  before=""
  [ -n "$OLD" ] && before="$(one "$OLD" "$f") | "
  after=$(one "$E" "$f")
  nb=$(sed -n 's/^ParallelBlocks: \([0-9]*\).*/\1/p' "$T/out")
  cut=$(sed -n 's/^note: \([0-9]*\) backward-twin searches stopped.*/\1/p' "$T/out")
  echo "| $n | $ni | $before$after | ${nb:-?} | ${cut:-0} |"
done
