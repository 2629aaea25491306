#!/usr/bin/env bash
# public_headers_together.sh: every public header of include/ergon/ in one translation unit,
# in C11 and (where a C++ compiler exists) C++, with -Wall -Wextra -Werror. A program that
# plans (envpipe.h) and drives GPUs (gpu.h), or runs a server (server.h) beside a daemon
# (daemon.h), must be able to include them all: before, erg_gpu_spec was both a type
# (envpipe.h) and a function (gpu.h), and erg_log_fn had two different definitions
# (daemon.h, server.h).
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_SRC:?}"
CC_BIN=${CC:-cc}
command -v "$CC_BIN" >/dev/null || skip_or_fail "no C compiler ($CC_BIN)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  for h in "$ERGON_SRC"/include/ergon/*.h; do echo "#include \"ergon/$(basename "$h")\""; done
  echo "int main(void) { return 0; }"
} >"$tmp/all.c"
n=$(grep -c '#include' "$tmp/all.c")
[ "$n" -ge 10 ] || { echo "FAIL: only $n headers found in $ERGON_SRC/include/ergon"; exit 1; }
"$CC_BIN" -std=c11 -Wall -Wextra -Werror -I"$ERGON_SRC/include" -c "$tmp/all.c" -o "$tmp/all.o" \
  || { echo "FAIL: the $n public headers do not compile together as C11"; exit 1; }
echo "ok: $n public headers together, C11"
if command -v c++ >/dev/null; then
  c++ -x c++ -Wall -Wextra -Werror -I"$ERGON_SRC/include" -c "$tmp/all.c" -o "$tmp/all.o" \
    || { echo "FAIL: the $n public headers do not compile together as C++"; exit 1; }
  echo "ok: $n public headers together, C++"
fi
echo PASS
