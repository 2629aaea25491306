#!/usr/bin/env bash
# architecture_claims.sh: tools/check_architecture.py passes on the tree, and fails, naming what
# is wrong, on copies with a broken claim: a file the map names that is gone, a library file the
# map never names (a module paragraph that omits a back-end), a public header of the layer
# table that is not there, a function of "Where each feature lives" that no header declares.
# No by-design skip: python3 is part of the build's Debian packages.
set -u
: "${ERGON_SRC:?}"
command -v python3 >/dev/null || { echo "FAIL: python3 missing"; exit 1; }
check="$ERGON_SRC/tools/check_architecture.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$(python3 "$check" --src "$ERGON_SRC" 2>&1) || fail "ARCHITECTURE.md is not true of the tree:
$out"
echo "$out"

copy() {
  rm -rf "$tmp/t" && mkdir -p "$tmp/t" &&
    cp -r "$ERGON_SRC/src" "$ERGON_SRC/include" "$ERGON_SRC/tools" "$ERGON_SRC/python" \
      "$ERGON_SRC/data" "$ERGON_SRC/tests" "$ERGON_SRC/docs" "$ERGON_SRC/ARCHITECTURE.md" "$tmp/t/"
}
# expect_fail PATTERN: the check on $tmp/t exits 1 and prints a line matching PATTERN.
expect_fail() {
  local got rc
  got=$(python3 "$check" --src "$tmp/t" 2>&1); rc=$?
  [ "$rc" = 1 ] || fail "$2 passed (exit $rc): $got"
  echo "$got" | grep -q -- "$1" || fail "$2: the report does not say '$1': $got"
  echo "ok: $2 caught: $(echo "$got" | head -1)"
}
copy; rm "$tmp/t/src/gpu/energy.c"
expect_fail "names 'energy.c', which is not in the repository" "a named file removed"
copy; sed -i 's/backend_amdsmi\.c/backend_amd.c/g' "$tmp/t/ARCHITECTURE.md"
expect_fail "src/gpu/backend_amdsmi.c is part of the library but the map never names it" "an omitted back-end"
copy; rm "$tmp/t/include/ergon/sparse.h"
expect_fail "public header 'sparse.h' is not in include/ergon/" "a missing public header"
copy; sed -i 's/`erg_emulate_ex`/`erg_emulate_exx`/' "$tmp/t/ARCHITECTURE.md"
expect_fail "'erg_emulate_exx' is not declared in include/ergon/" "an undeclared function"
echo "ok: architecture claims"
