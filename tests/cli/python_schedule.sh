#!/usr/bin/env bash
# python_schedule.sh: the schedule binding's tests (tests/python/test_schedule.py).
# Skip by design: the ASan build (python3 cannot load an instrumented libergon).
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
command -v python3 >/dev/null || skip_or_fail "python3 missing"
if [ -n "${ERGON_SANITIZED:-}" ]; then
  skip_by_design "an ASan-instrumented libergon cannot be loaded into an uninstrumented python3"
fi
lib="$ERGON_BIN_DIR/libergon.so.0"
[ -r "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
cd "$ERGON_SRC/tests/python" || exit 1
ERGON_LIBRARY="$lib" PYTHONPATH="$ERGON_SRC/python" PYTHONDONTWRITEBYTECODE=1 \
  ERGON="${ERGON:-$ERGON_BIN_DIR/ergon}" python3 -m unittest -v test_schedule 2>&1
