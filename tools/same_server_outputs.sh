#!/usr/bin/env bash
# same_server_outputs.sh: what the server's schedulers and plan loaders produce -- every window's
# clocks, every dump file a scheduler writes, every error -- for each scheduler class on fixed
# synthetic results, so that two builds can be compared byte for byte (a refactoring of
# src/server or src/plan must not change it):
#   tools/same_server_outputs.sh OLD_SRC OLD_BUILD /tmp/before.txt
#   tools/same_server_outputs.sh NEW_SRC NEW_BUILD /tmp/after.txt
#   diff /tmp/before.txt /tmp/after.txt && echo identical
# SRC is a source tree, BUILD its build directory (libergon_static.a and the ergon CLI, which
# plans the Frontier fixture). The harness is this tree's tests/compare/server_outputs.c,
# compiled against SRC's headers. A few seconds.
set -u
src=${1:?usage: same_server_outputs.sh SRC_TREE BUILD_DIR OUT_FILE}
build=${2:?usage: same_server_outputs.sh SRC_TREE BUILD_DIR OUT_FILE}
out=${3:?usage: same_server_outputs.sh SRC_TREE BUILD_DIR OUT_FILE}
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
d=$tmp/data
mkdir -p "$d/dir"
printf '[[1410, 1305, 1200, 1095],\n [1200, 1200, 990, 990],]\n# est\n' >"$d/kronos.py"
cp "$d/kronos.py" "$d/dir/a.py"
printf '[[1305, 1305, 1305, 1305],[1410,1410,1410,1410]]\n' >"$d/dir/b.py"
printf '[\n  [("forward", 1410), ("load", 3), ("forward", 1305), ("backward", 1200), ("backward", 1095)],\n  [("forward", 990), ("backward", 990), ("forward", 1200), ("backward", 1200),],\n]\n' >"$d/tuples.py"
printf '[[["forward", 1410], ["backward", 1305], ["forward", 1200], ["backward", 990]], [["forward", 885], ["backward", 780], ["forward", 885], ["backward", 780]]]\n' >"$d/list_pairs.py"
printf '[[("forward", 1410), ("p2p", 1), ("forward", 1410), ("backward", 1305), ("p2p", 2), ("backward", 1305)], [("forward", 1200), ("backward", 1200), ("p2p", 0), ("forward", 990), ("backward", 990)]]\n' >"$d/names.py"
printf '[[("forward", 1410), ("backward" 1200)]]\n' >"$d/bad1.py"
printf '[[("forward", 1410)], [("backward", "x")]]\n' >"$d/bad2.py"
printf '[[("forward", 1410), ("backward", 1305)], []]\n' >"$d/empty_stage.py"
printf '[[1410, 1410, 1410], [1410, 1410, 1410]]\n' >"$d/zb.py"
export ERGON_GPU_TABLE=${ERGON_GPU_TABLE:-$here/data/gpus.csv}
"$build/ergon" profile sim --gpu a100 --model gpt3-xl --stages 2 -o "$d/p.csv" 2>/dev/null &&
  "$build/ergon" plan perseus --profile "$d/p.csv" --stages 2 --microbatches 2 --gpu A100 \
    --unit-time 0.002 --out "$d/front" >/dev/null 2>&1 || { echo "FAIL: the frontier fixture"; exit 1; }
libs=$(pkg-config --libs jansson cminpack cairo libmicrohttpd libcurl sqlite3 openblas) || exit 1
cc -O1 -std=c11 -D_GNU_SOURCE -I"$src/include" -I"$src/src" "$here/tests/compare/server_outputs.c" \
  "$build/libergon_static.a" $libs -lglpk -lm -lpthread -ldl -o "$tmp/h" || exit 1
# the fixtures' directory is a temp path: name it the same way in every run
"$tmp/h" "$d" 2>&1 | sed "s|$d|DATA|g" >"$out"
