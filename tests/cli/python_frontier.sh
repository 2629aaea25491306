#!/usr/bin/env bash
# python_frontier.sh: ergon.frontier's tests (tests/python/test_frontier.py): frontier directories written and read by libergon from Python.
set -u
: "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
source "$(dirname "$0")/../lib/skip_lib.bash"
command -v python3 >/dev/null || skip_or_fail "python3 missing"
[ -n "${ERGON_SANITIZED:-}" ] &&
  skip_by_design "an ASan-instrumented libergon cannot be loaded into an uninstrumented python3"
need_data "${ERGON_TEST_DATA:?}/published/perseus-sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv"
lib="$ERGON_BIN_DIR/libergon.so.0"
[ -r "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
cd "$ERGON_SRC/tests/python" || exit 1
ERGON_LIBRARY="$lib" PYTHONPATH="$ERGON_SRC/python" PYTHONDONTWRITEBYTECODE=1 \
  ERGON="${ERGON:-$ERGON_BIN_DIR/ergon}" python3 -m unittest -v test_frontier 2>&1
