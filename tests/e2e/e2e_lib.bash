# e2e_lib.bash: shared set-up of the tests/e2e/e2e_*.sh tests (sourced, not a test itself):
# skip without PyTorch or in the sanitizer build, paths, a temporary directory, helpers.
set -u
: "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}" "${ERGON:?}"
# The venv's python (requirements.txt, `make py-deps`): torch 2.x, whose
# torch.distributed.pipelining the trainer runs every schedule PyTorch ships on (--runtime
# auto); `ours` runs on the example's own loop. need_venv skips with a message (fails under
# CI=true) without it, and in the sanitizer build.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/venv_lib.bash"
need_venv torch torch.distributed.pipelining
PY=${ERGON_E2E_PYTHON:-$VPY}
"$PY" -c 'import torch, torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null || {
  echo "FAIL: $PY: torch has no gloo back-end"; exit 1; }
# Debian's python3-torch 1.13 + python3-torchvision (make e2e-deps): only for the ResNet
# model (torchvision is not in requirements.txt); the example's own loop runs it.
DEB_PY=/usr/bin/python3
# need_deb_torchvision: skip (fail under CI=true) when Debian's torch + torchvision are missing.
need_deb_torchvision() {
  "$DEB_PY" -c 'import torch, torchvision' 2>/dev/null && return 0
  skip_or_fail "$DEB_PY cannot import torch + torchvision (make e2e-deps)"
}
export ERGON_LIBRARY="$ERGON_BIN_DIR/libergon.so.0"
[ -r "$ERGON_LIBRARY" ] || { echo "FAIL: $ERGON_LIBRARY not built"; exit 1; }
export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
EX="$ERGON_SRC/examples/pytorch_pipeline"
# The example's train.py with what only the tests need (the pacer and the simulated GPU's
# accounting in the results, fake kernels, a stalling rank, the blocking-transport deadlock
# control, the deadlock cases): harness/trainer.py; the `make e2e` story with its checks:
# harness/run_e2e.py.
TRAIN="$ERGON_SRC/tests/e2e/harness/trainer.py"
RUN_E2E="$ERGON_SRC/tests/e2e/harness/run_e2e.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# launch NPROC LAUNCHER_TIMEOUT_S TRAIN_ARGS...: N ranks of $TRAIN; an outer timeout too.
# A timeout of 60 s or more is at least 240 s: importing torch 2.x alone took 30-80 s per
# process on this 2-core machine under load; a shorter one stays as given (no test uses one:
# a timeout is never the evidence of a deadlock, see e2e_deadlock.sh's negative control).
launch() {
  local n=$1 t=$2; shift 2
  if [ "${t%.*}" -ge 60 ] && [ "${t%.*}" -lt 240 ]; then t=240; fi
  timeout -k 5 $((${t%.*} + 20)) "$PY" "$EX/launch.py" --nproc "$n" --timeout "$t" -- \
    "$TRAIN" "$@"
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
