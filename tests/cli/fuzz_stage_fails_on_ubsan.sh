#!/usr/bin/env bash
# fuzz_stage_fails_on_ubsan.sh: tests/fuzz/run.sh (the CI fuzz stage) fails when a
# target reports undefined behaviour. UBSan reports and goes on unless
# halt_on_error=1; a run script that does not set it let qsort(NULL) in logs.c
# pass CI. A probe "fuzz target" built with recoverable UBSan and a signed
# overflow must make run.sh exit 1 and print the UBSan report with a stack.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_SRC:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cc=$(command -v cc || command -v gcc || command -v clang) || skip_or_fail "no C compiler"
mkdir -p "$tmp/build/tests/fuzz"
cat >"$tmp/probe.c" <<'C'
#include <limits.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    (void)argv;
    volatile int x = INT_MAX;
    x += argc; /* signed overflow: reported by UBSan, recoverable by default */
    printf("probe survived (%d)\n", x);
    return 0;
}
C
# -fsanitize-recover: the probe only halts if the run script asks UBSan to.
if ! "$cc" -fsanitize=undefined -fsanitize-recover=undefined -O0 -o "$tmp/build/tests/fuzz/fuzz_ubsan_probe" \
     "$tmp/probe.c" 2>"$tmp/cc.err"; then
  skip_or_fail "$cc cannot build with -fsanitize=undefined: $(head -3 "$tmp/cc.err")"
fi
# Sanity: without halt_on_error the probe itself exits 0 (else this test proves nothing).
UBSAN_OPTIONS=halt_on_error=0 "$tmp/build/tests/fuzz/fuzz_ubsan_probe" >/dev/null 2>&1 \
  || fail "the probe fails even without halt_on_error; the test cannot tell"
# A caller's UBSAN_OPTIONS (as CI may set) must not switch the halting off, in either mode:
# open exploration (make fuzz) and the fixed-seed stage of make test (make fuzz-check).
for mode in explore fixed; do
  if [ $mode = fixed ]; then args=(--fixed "$tmp/build" 10 1); else args=("$tmp/build" 1); fi
  UBSAN_OPTIONS=halt_on_error=0:print_stacktrace=0 bash "$ERGON_SRC/tests/fuzz/run.sh" "${args[@]}" \
    >"$tmp/out" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] || fail "$mode: run.sh exited $rc on a target with undefined behaviour: $(cat "$tmp/out")"
  grep -q 'FAILED: fuzz_ubsan_probe' "$tmp/out" || fail "$mode: no FAILED line: $(cat "$tmp/out")"
  grep -q 'runtime error' "$tmp/out" || fail "$mode: the UBSan report is not shown: $(cat "$tmp/out")"
  grep -qE '^ +#0 ' "$tmp/out" || fail "$mode: no stack trace (print_stacktrace): $(cat "$tmp/out")"
  grep -q 'probe survived' "$tmp/out" && fail "$mode: the probe ran on past the UBSan finding"
done
echo ok
