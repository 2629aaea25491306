#!/usr/bin/env bash
# Our NVML declarations (src/gpu/nvml_decl.h) against NVIDIA's nvml.h: every return code and
# call prototype must match (tests/lint/nvml_header/check_nvml_decl.c, compiled with -Werror), and a
# deliberately wrong declaration or code must make that compile fail.
# nvml.h comes from the CUDA toolkit (/usr/local/cuda/include) or, on machines whose toolkit
# lacks it, from NVIDIA's nvidia-nvml-dev package in the PyPI environment (requirements.txt).
# Skipped with a message where no nvml.h is found; under CI=true that is a failure.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_SRC:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
hdr=""
for d in ${NVML_INCLUDE_DIR:-} /usr/local/cuda/include /usr/include \
         ${ERGON_PY_VENV:+"$ERGON_PY_VENV"/lib/python3*/site-packages/nvidia/cu*/include}; do
  [ -r "$d/nvml.h" ] && { hdr=$d; break; }
done
if [ -z "$hdr" ]; then
  msg="no nvml.h (CUDA toolkit, or nvidia-nvml-dev in ${ERGON_PY_VENV:-the venv}: make py-deps)"
  skip_or_fail "$msg"
fi
echo "nvml.h: $hdr/nvml.h ($(grep -m1 -o 'NVML_API_VERSION *[0-9]*' "$hdr/nvml.h" || echo '?'))"
CC=${CC:-cc}
check() { # INCLUDE_DIR_OF_DECL [EXTRA_FLAGS...]
  local inc=$1; shift
  "$CC" -std=c11 -Werror -Wall -Wno-unused-const-variable -Wno-unused-variable -fsyntax-only \
    -I"$hdr" -I"$inc" "$@" "$ERGON_SRC/tests/lint/nvml_header/check_nvml_decl.c" 2>&1
}
out=$(check "$ERGON_SRC/src") || { echo "FAIL: our declarations differ from nvml.h:"; echo "$out"; exit 1; }
out=$(check "$ERGON_SRC/src" -DNVML_NO_UNVERSIONED_FUNC_DEFS) || {
  echo "FAIL: the unversioned fallbacks differ from nvml.h:"; echo "$out"; exit 1; }
echo "ok: every return code and call in nvml_decl.h matches"
# Deliberately wrong copies of nvml_decl.h: each must fail to compile.
mkdir -p "$tmp/gpu"
wrong() { # DESCRIPTION SED_EXPRESSION
  sed "$2" "$ERGON_SRC/src/gpu/nvml_decl.h" > "$tmp/gpu/nvml_decl.h"
  cmp -s "$tmp/gpu/nvml_decl.h" "$ERGON_SRC/src/gpu/nvml_decl.h" && { echo "FAIL: '$1' changed nothing"; exit 1; }
  if check "$tmp" >/dev/null; then echo "FAIL: $1 was not caught"; exit 1; fi
  echo "ok: $1 caught"
}
wrong "energy counter as unsigned int *" 's/(erg_nvml_dev, unsigned long long \*)/(erg_nvml_dev, unsigned int *)/'
wrong "locked clocks with one argument" 's/X(set_locked, nvmlDeviceSetGpuLockedClocks, NULL, 1, erg_nvml_ret,/X(set_locked, nvmlDeviceSetGpuLockedClocks, NULL, 1, erg_nvml_ret, (erg_nvml_dev, unsigned int)) X(set_locked_dummy, nvmlDeviceSetGpuLockedClocks, NULL, 1, erg_nvml_ret,/'
wrong "NVML_ERROR_NOT_FOUND = 5" 's/X(NVML_ERROR_NOT_FOUND, 6)/X(NVML_ERROR_NOT_FOUND, 5)/'
wrong "the error string returning char *" 's/1, const char \*, (erg_nvml_ret)/1, char *, (erg_nvml_ret)/'

