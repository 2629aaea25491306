#!/usr/bin/env bash
# layering.sh: tools/check_layers.py passes on the tree and fails, naming file:line and the
# arrow, on copies of it with a deliberate back-arrow: a module including a public header to its
# right, a module reaching into another's private header, a public header including one to its
# right, the CLI including a private header; and a layer table that runs back is refused.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_SRC:?}"
command -v python3 >/dev/null || {
  skip_or_fail "python3 missing"; }
check="$ERGON_SRC/tools/check_layers.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$(python3 "$check" --root "$ERGON_SRC" 2>&1) || fail "the tree breaks the layering:
$out"
echo "$out"

# copy: a fresh copy of what the check reads
copy() {
  rm -rf "$tmp/t" && mkdir -p "$tmp/t" &&
  cp -r "$ERGON_SRC/src" "$ERGON_SRC/include" "$ERGON_SRC/tools" "$ERGON_SRC/ARCHITECTURE.md" "$tmp/t/"
}
# expect_fail FILE INCLUDE PATTERN: add `#include "INCLUDE"` at the end of FILE in a copy; the
# check must exit 1 and print a line matching PATTERN (file:line and the arrow).
expect_fail() {
  copy || fail "cannot copy the tree"
  [ -f "$tmp/t/$1" ] || fail "$1 is missing from the tree (update this test)"
  printf '#include "%s"\n' "$2" >>"$tmp/t/$1"
  local line; line=$(wc -l <"$tmp/t/$1")
  local got rc
  got=$(python3 "$check" --root "$tmp/t" 2>&1); rc=$?
  [ "$rc" = 1 ] || fail "a back-arrow $1 -> $2 passed (exit $rc): $got"
  echo "$got" | grep -q -- "^$1:$line: $3" || fail "the report of $1 -> $2 does not name $1:$line and '$3': $got"
  echo "ok: $1 -> $2 refused: $(echo "$got" | head -1)"
}
expect_fail src/profile/profile.c ergon/planner.h "profile -> planner (ergon/planner.h)"
expect_fail src/gpu/gpu.c ergon/daemon.h "gpu -> daemon (ergon/daemon.h)"
expect_fail src/planner/ctab.h ergon/emulate.h "planner -> emulate (ergon/emulate.h)"
expect_fail src/planner/perseus.c pipeline/dag_internal.h "planner -> pipeline private header"
expect_fail include/ergon/profile.h ergon/plan.h "profile -> plan (ergon/plan.h)"
expect_fail include/ergon/plan.h core/internal.h "public header includes core/internal.h"
expect_fail tools/ergon/cmd_plan.c core/internal.h "tools -> core/internal.h"
expect_fail src/core/util.c ergon/nonexistent.h "ergon/nonexistent.h is not in"

# A table whose row allows a module on a later row (a cycle) is refused outright.
copy
sed -i 's/^| profile | profile.h, sparse.h | core |$/| profile | profile.h, sparse.h | core, planner |/' "$tmp/t/ARCHITECTURE.md"
grep -q '| core, planner |' "$tmp/t/ARCHITECTURE.md" || fail "cannot find the profile row of ARCHITECTURE.md (update this test)"
got=$(python3 "$check" --root "$tmp/t" 2>&1); rc=$?
[ "$rc" = 2 ] && echo "$got" | grep -q "not on an earlier row" || fail "a table running back was accepted (exit $rc): $got"
echo "ok: a table running back refused"
# No table: exit 2, not a silent pass.
copy; sed -i '/layers: begin/d' "$tmp/t/ARCHITECTURE.md"
python3 "$check" --root "$tmp/t" >/dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || fail "no layer table, exit $rc"
echo "ok: layering"
