#!/usr/bin/env bash
# python_constants.sh: every constant of the Python binding (python/ergon/_lib.py) equals its C
# definition in include/ergon/*.h, and every enumerator the binding mirrors has a Python name
# (tests/python/test_constants.py). Negative controls: the same test must fail, naming the
# constant, against a copy of the binding with one value changed, a copy of the headers with an
# enumerator added, and a copy of the package where another module copies a constant by hand.
set -u
: "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
command -v python3 >/dev/null || {
  [ "${CI:-}" = true ] && { echo "FAIL: python3 missing (CI=true)"; exit 1; }
  echo "SKIP: python3 missing"; exit 77; }
lib="$ERGON_BIN_DIR/libergon.so.0"
[ -r "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# run PYTHON_DIR INCLUDE_DIR [LIBRARY]: the test against a package and headers (no library for
# the negative controls: an ASan build's library cannot be loaded into python3 either)
run() {
  (cd "$ERGON_SRC/tests/python" && ERGON_LIBRARY="${3:-}" ERGON_INCLUDE_DIR="$2" PYTHONPATH="$1" \
     PYTHONDONTWRITEBYTECODE=1 CI= python3 -m unittest -v test_constants 2>&1)
}
if [ -n "${ERGON_SANITIZED:-}" ]; then
  out=$(run "$ERGON_SRC/python" "$ERGON_SRC/include/ergon") || fail "constants differ: $out"
else
  out=$(run "$ERGON_SRC/python" "$ERGON_SRC/include/ergon" "$lib") || fail "constants differ: $out"
  echo "$out" | grep -q "test_library_names_agree .* ok" || fail "the library's names were not checked: $out"
fi
echo "$out"

copy() { rm -rf "$tmp/py" "$tmp/inc"; mkdir -p "$tmp/py"; cp -r "$ERGON_SRC/python/ergon" "$tmp/py/";
         cp -r "$ERGON_SRC/include/ergon" "$tmp/inc"; }
# 1. a value that differs
copy; sed -i 's/^SCHED_ZBV = 6$/SCHED_ZBV = 7/' "$tmp/py/ergon/_lib.py"
grep -q "^SCHED_ZBV = 7$" "$tmp/py/ergon/_lib.py" || fail "cannot find SCHED_ZBV in _lib.py (update this test)"
out=$(run "$tmp/py" "$tmp/inc") && fail "SCHED_ZBV = 7 was not caught: $out"
echo "$out" | grep -q "SCHED_ZBV = 7 in ergon/_lib.py, but ERG_SCHED_ZBV = 6 in include/ergon/pipeline.h" ||
  fail "the report does not name the constant and both values: $out"
echo "ok: a value that differs is caught"
# 2. an enumerator the binding lacks
copy; sed -i 's/^\( *\)ERG_SCHED_FILE = 8,/&\n\1ERG_SCHED_NEXT,/' "$tmp/inc/pipeline.h"
grep -q "ERG_SCHED_NEXT," "$tmp/inc/pipeline.h" || fail "cannot find ERG_SCHED_FILE in pipeline.h (update this test)"
out=$(run "$tmp/py" "$tmp/inc") && fail "a missing ERG_SCHED_NEXT was not caught: $out"
echo "$out" | grep -q "ERG_SCHED_NEXT (include/ergon/pipeline.h) has no SCHED_NEXT in ergon/_lib.py" ||
  fail "the report does not name the missing enumerator: $out"
echo "ok: an enumerator without a Python name is caught"
# 3. a status code added to ERG_STATUS_MAP
copy; sed -i 's/^\( *\)X(EINTERNAL, 16, "internal error")/\1X(EINTERNAL, 16, "internal error") X(EAGAIN, 17, "again")/' "$tmp/inc/ergon.h"
grep -q "EAGAIN, 17" "$tmp/inc/ergon.h" || fail "cannot find X(EINTERNAL, ...) in ergon.h (update this test)"
out=$(run "$tmp/py" "$tmp/inc") && fail "a missing ERG_EAGAIN was not caught: $out"
echo "$out" | grep -q "ERG_EAGAIN (include/ergon/ergon.h) has no EAGAIN in ergon/_lib.py" ||
  fail "the report does not name the missing status: $out"
echo "ok: a status code without a Python name is caught"
# 4. a constant copied by hand into another module
copy; printf '\n_CLIENT_LOCK_MEMORY = 8\n' >>"$tmp/py/ergon/zeus.py"
out=$(run "$tmp/py" "$tmp/inc") && fail "a hand copy in zeus.py was not caught: $out"
echo "$out" | grep -q "zeus.py:[0-9]*: _CLIENT_LOCK_MEMORY = 8 copies ERG_CLIENT_LOCK_MEMORY" ||
  fail "the report does not name the copy: $out"
echo "ok: a constant copied by hand is caught"
