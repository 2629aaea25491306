#!/usr/bin/env bash
# shard_compare.sh: do two ergon builds give the same `ergon shard` output? For a change that
# must not change results (a faster analysis, a file split), run the build before it and the
# build after it over every HLO module in tests/data, tests/fuzz/corpus/hlo and
# tests/data/published/hlo on several meshes, and compare byte for byte:
#   analyze --members (stdout), search's plan (stdout, without the timing lines), the
#   annotated module (--out-hlo) and the plan JSON (--out-json, without search_s).
# A module that one build refuses must be refused by the other with the same message.
#
# usage: tools/shard_compare.sh OLD_ERGON NEW_ERGON [HLO...]
#   MESHES="1x2 2x2 1x4 4x2 3x2" (default) selects the meshes. Exit 0 when all are identical,
#   1 with the differing cases listed.
set -u
old=${1:?usage: shard_compare.sh OLD_ERGON NEW_ERGON [HLO...]}
new=${2:?usage: shard_compare.sh OLD_ERGON NEW_ERGON [HLO...]}
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
data=$here/tests/data/published
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  for f in "$here"/tests/data/*.hlo "$here"/tests/fuzz/corpus/hlo/* "$data"/hlo/*.hlo; do
    [ -f "$f" ] && files+=("$f")
  done
fi
meshes=${MESHES:-1x2 2x2 1x4 4x2 3x2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# run BIN TAG FILE MESH: every output of one case under $tmp/TAG/
run() {
  local bin=$1 d=$tmp/$2 f=$3 mesh=$4
  rm -rf "$d"; mkdir -p "$d"
  "$bin" shard analyze --hlo "$f" --mesh "$mesh" --members >"$d/analyze" 2>"$d/analyze.err"
  echo "rc $?" >>"$d/analyze"
  sed -i '/^parse [0-9.]* s, analysis [0-9.]* s$/d' "$d/analyze.err"
  "$bin" shard search --hlo "$f" --mesh "$mesh" --out-hlo "$d/out.hlo" --out-json "$d/out.json" \
    >"$d/search" 2>"$d/search.err"
  echo "rc $?" >>"$d/search"
  sed -i -e '/^search time /d' -e '/^DP tables /d' "$d/search"
  [ -f "$d/out.json" ] && sed -i '/"search_s"/d' "$d/out.json"
  # progress lines carry timings
  sed -i '/^ergon: .*elapsed/d' "$d/search.err" "$d/analyze.err"
}
n=0; bad=0
for f in "${files[@]}"; do
  for mesh in $meshes; do
    run "$old" a "$f" "$mesh"
    run "$new" b "$f" "$mesh"
    n=$((n + 1))
    if ! diff -r "$tmp/a" "$tmp/b" >"$tmp/diff" 2>&1; then
      bad=$((bad + 1))
      echo "DIFFERS: $f on $mesh"
      head -20 "$tmp/diff"
    fi
  done
done
echo "$n cases ($((${#files[@]})) modules x meshes $meshes): $((n - bad)) identical, $bad differ"
[ "$bad" -eq 0 ]
