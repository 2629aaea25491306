# e2e_lib.bash: shared set-up of the tests/cli/e2e_*.sh tests (sourced, not a test itself):
# skip without PyTorch or in the sanitizer build, paths, a temporary directory, helpers.
set -u
: "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}" "${ERGON:?}"
# Debian's python (python3-torch is a Debian package), not whatever python3 is on PATH.
PY=${ERGON_E2E_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || { echo "SKIP: $PY missing"; exit 77; }
if [ -n "${ERGON_SANITIZED:-}" ]; then
  echo "SKIP: an ASan-instrumented libergon cannot be loaded into an uninstrumented python3"
  exit 77
fi
"$PY" -c 'import torch, torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null || {
  echo "SKIP: PyTorch with gloo not importable by $PY (make e2e installs python3-torch)"; exit 77; }
export ERGON_LIBRARY="$ERGON_BIN_DIR/libergon.so.0"
[ -r "$ERGON_LIBRARY" ] || { echo "FAIL: $ERGON_LIBRARY not built"; exit 1; }
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
EX="$ERGON_SRC/examples/pytorch_pipeline"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# launch NPROC LAUNCHER_TIMEOUT_S TRAIN_ARGS...: N ranks of train.py; an outer timeout too.
launch() {
  local n=$1 t=$2; shift 2
  timeout -k 5 $((${t%.*} + 20)) "$PY" "$EX/launch.py" --nproc "$n" --timeout "$t" -- \
    "$EX/train.py" "$@"
}
# losses FILE: the last rank's losses as hex, one per line.
losses() {
  "$PY" -c 'import json,sys
d = json.load(open(sys.argv[1]))
for s in d.get("steps", []):
    print(s["loss_hex"])
for h in d.get("loss_hex", []):
    print(h)' "$1"
}
