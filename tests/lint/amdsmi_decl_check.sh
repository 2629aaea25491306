#!/usr/bin/env bash
# Our AMD SMI declarations (src/gpu/amdsmi_decl.h) against AMD's: every status code, define,
# struct layout (sizeof, offset/size/type of each field we name) and call signature must match
# the ctypes binding AMD generates from amdsmi.h, amdsmi_wrapper.py of the PyPI package `amdsmi`
# (requirements.txt, in the venv): tests/lint/amdsmi_decl/check_amdsmi_decl.py, which compiles
# tests/lint/amdsmi_decl/amdsmi_decl_facts.c against the header. Then deliberately wrong copies of the
# header must each fail it, naming the difference.
# Needs no libergon and no libamd_smi.so, so it runs in the sanitizer build too. Skipped with a
# message where the venv or its amdsmi package is missing; under CI=true that is a failure.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_SRC:?}"
VPY="${ERGON_PY_VENV:-}/bin/python"
why=""
if [ -z "${ERGON_PY_VENV:-}" ] || [ ! -x "$VPY" ]; then
  why="no virtual environment at '${ERGON_PY_VENV:-}' (run: make py-deps)"
elif ! err=$("$VPY" -c 'import importlib.util as u, os, sys
s = u.find_spec("amdsmi")
sys.exit(0 if s and os.path.isfile(os.path.join(list(s.submodule_search_locations)[0], "amdsmi_wrapper.py")) else 1)' 2>&1); then
  why="$VPY has no amdsmi package with amdsmi_wrapper.py${err:+: $err} (run: make py-deps)"
fi
[ -z "$why" ] || skip_or_fail "$why"
export PYTHONDONTWRITEBYTECODE=1
checker="$ERGON_SRC/tests/lint/amdsmi_decl/check_amdsmi_decl.py"
hdr="$ERGON_SRC/src/gpu/amdsmi_decl.h"
"$VPY" "$checker" --header "$hdr" || { echo "FAIL: amdsmi_decl.h differs from AMD's amdsmi (above)"; exit 1; }

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
wrong() { # DESCRIPTION SED_EXPRESSION EXPECTED_MESSAGE_PART
  sed "$2" "$hdr" > "$tmp/amdsmi_decl.h"
  cmp -s "$tmp/amdsmi_decl.h" "$hdr" && { echo "FAIL: '$1' changed nothing"; exit 1; }
  out=$("$VPY" "$checker" --header "$tmp/amdsmi_decl.h" 2>&1); rc=$?
  if [ "$rc" -ne 1 ] || ! grep -qF -- "$3" <<<"$out"; then
    echo "FAIL: $1 was not caught as a difference naming '$3' (exit $rc):"; echo "$out"; exit 1
  fi
  echo "ok: $1 caught: $(grep -m1 -F -- "$3" <<<"$out")"
}
wrong "AMDSMI_STATUS_NOT_FOUND = 32" 's/X(AMDSMI_STATUS_NOT_FOUND, 31)/X(AMDSMI_STATUS_NOT_FOUND, 32)/' \
  "status code AMDSMI_STATUS_NOT_FOUND = 32"
wrong "CLK_TYPE_MEM = 3" 's/define ERG_AMDSMI_CLK_TYPE_MEM 4/define ERG_AMDSMI_CLK_TYPE_MEM 3/' \
  "ERG_AMDSMI_CLK_TYPE_MEM = 3"
wrong "32 frequencies" 's/define ERG_AMDSMI_MAX_NUM_FREQUENCIES 33/define ERG_AMDSMI_MAX_NUM_FREQUENCIES 32/' \
  "sizeof(erg_amdsmi_frequencies)"
wrong "current_socket_power as uint64_t" 's/uint32_t current_socket_power;/uint64_t current_socket_power;/' \
  "erg_amdsmi_power_info.current_socket_power"
wrong "a field AMD lacks" 's/uint32_t oam_id;/uint32_t oam_index;/' \
  "erg_amdsmi_asic_info.oam_index: struct_amdsmi_asic_info_t has no such field"
wrong "counter resolution as double *" 's/(erg_amdsmi_handle, uint64_t \*, float \*, uint64_t \*)/(erg_amdsmi_handle, uint64_t *, double *, uint64_t *)/' \
  "amdsmi_get_energy_count parameter 3"
wrong "power cap set without its sensor" 's/X(set_power_cap, amdsmi_set_power_cap, 0, (erg_amdsmi_handle, uint32_t, uint64_t))/X(set_power_cap, amdsmi_set_power_cap, 0, (erg_amdsmi_handle, uint64_t))/' \
  "amdsmi_set_power_cap: 2 parameters, AMD's has 3"
wrong "power info pointing at the cap struct" 's/X(power_info, amdsmi_get_power_info, 1, (erg_amdsmi_handle, erg_amdsmi_power_info \*))/X(power_info, amdsmi_get_power_info, 1, (erg_amdsmi_handle, erg_amdsmi_power_cap_info *))/' \
  "amdsmi_get_power_info parameter 2"
wrong "a handle passed as uint64_t" 's/(erg_amdsmi_handle, erg_amdsmi_asic_info \*)/(uint64_t, erg_amdsmi_asic_info *)/' \
  "amdsmi_get_gpu_asic_info parameter 1 (uint64_t): u8 of 8 bytes; AMD's: p:v"
wrong "a 64-bit status" 's/typedef uint32_t erg_amdsmi_ret;/typedef uint64_t erg_amdsmi_ret;/' \
  "erg_amdsmi_ret is u8 of 8 bytes"
