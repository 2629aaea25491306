# venv_lib.bash: sourced (not a test itself) by the tests that run ergon inside the real
# training stacks from PyPI (requirements.txt, installed by `make py-deps` into ERGON_PY_VENV).
#   need_venv MODULE...   the venv's python imports every MODULE, else the test skips with a
#                         message; under CI=true it fails instead (no silent skip in CI).
# After it: VPY is that python; ERGON_LIBRARY the built libergon; PYTHONPATH has python/.
set -u
: "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
VPY="${ERGON_PY_VENV:-}/bin/python"
need_venv() {
  if [ -n "${ERGON_SANITIZED:-}" ]; then
    echo "SKIP: an ASan-instrumented libergon cannot be loaded into an uninstrumented python"
    exit 77
  fi
  local why=""
  if [ -z "${ERGON_PY_VENV:-}" ] || [ ! -x "$VPY" ]; then
    why="no virtual environment at '${ERGON_PY_VENV:-}' (run: make py-deps)"
  elif ! err=$("$VPY" -c "import $(IFS=,; echo "$*")" 2>&1); then
    why="$VPY cannot import $*: $(printf '%s' "$err" | tail -1) (run: make py-deps)"
  fi
  if [ -n "$why" ]; then
    if [ "${CI:-}" = true ]; then echo "FAIL: $why"; exit 1; fi
    echo "SKIP: $why"; exit 77
  fi
  export ERGON_LIBRARY="$ERGON_BIN_DIR/libergon.so.0"
  export PYTHONPATH="$ERGON_SRC/python${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
}
