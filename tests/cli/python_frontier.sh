#!/usr/bin/env bash
# python_frontier.sh: ergon.frontier's tests (tests/python/test_frontier.py): frontier directories written and read by libergon from Python.
set -u
: "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
command -v python3 >/dev/null || { echo "SKIP: python3 missing"; exit 77; }
if [ -n "${ERGON_SANITIZED:-}" ]; then
  echo "SKIP: an ASan-instrumented libergon cannot be loaded into an uninstrumented python3"
  exit 77
fi
lib="$ERGON_BIN_DIR/libergon.so.0"
[ -r "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
cd "$ERGON_SRC/tests/python" || exit 1
ERGON_LIBRARY="$lib" PYTHONPATH="$ERGON_SRC/python" PYTHONDONTWRITEBYTECODE=1 \
  ERGON="${ERGON:-$ERGON_BIN_DIR/ergon}" python3 -m unittest -v test_frontier 2>&1
