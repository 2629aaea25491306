# venv_lib.bash: sourced (not a test itself) by the tests that run ergon inside the real
# training stacks from PyPI (requirements.txt, installed by `make py-deps` into ERGON_PY_VENV).
#   need_venv MODULE...   the venv's python imports every MODULE, else the test skips with a
#                         message; under CI=true it fails instead (no silent skip in CI). Skip
#                         by design: the ASan build (Python cannot load an instrumented libergon).
# It sources skip_lib.bash (skip_or_fail, skip_by_design, note_or_fail, need_data).
# After it: VPY is that python; ERGON_LIBRARY the built libergon; PYTHONPATH has python/.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/skip_lib.bash"
: "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
VPY="${ERGON_PY_VENV:-}/bin/python"
need_venv() {
  if [ -n "${ERGON_SANITIZED:-}" ]; then
    skip_by_design "an ASan-instrumented libergon cannot be loaded into an uninstrumented python"
  fi
  local why=""
  if [ -z "${ERGON_PY_VENV:-}" ] || [ ! -x "$VPY" ]; then
    why="no virtual environment at '${ERGON_PY_VENV:-}' (run: make py-deps)"
  elif ! err=$("$VPY" -c "import $(IFS=,; echo "$*")" 2>&1); then
    why="$VPY cannot import $*: $(printf '%s' "$err" | tail -1) (run: make py-deps)"
  fi
  [ -z "$why" ] || skip_or_fail "$why"
  export ERGON_LIBRARY="$ERGON_BIN_DIR/libergon.so.0"
  export PYTHONPATH="$ERGON_SRC/python${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
}
