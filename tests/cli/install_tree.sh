#!/usr/bin/env bash
# install_tree.sh: `cmake --install` of this build into a DESTDIR (what `make install
# PREFIX=... DESTDIR=...` does) puts every piece where packaging/install.cmake says, and
# what it installed is usable from there: a C program via ergon.pc, a CMake project via
# find_package(ergon) -> ergon::ergon, the Python package (from the install and from
# `pip install ./python`), which names what to install when the library is missing.
# No root needed; nothing outside a temporary directory is touched. Skip by design: the ASan
# build (a sanitized build is not installed).
# The README.md block `make install` / `pip install ./python` is what this test runs (into a
# DESTDIR, not /usr/local).
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
if [ -n "${ERGON_SANITIZED:-}" ]; then
  skip_by_design "a sanitized build is not installed (and python3 cannot load its library)"
fi
for t in cmake cc pkg-config; do command -v $t >/dev/null || skip_or_fail "$t missing"; done
py=/usr/bin/python3
[ -x $py ] || py=$(command -v python3) || skip_or_fail "no python3"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
B=$ERGON_BIN_DIR
cache() { sed -n "s/^$1:[A-Z]*=//p" "$B/CMakeCache.txt"; }
prefix=$(cache CMAKE_INSTALL_PREFIX); libdir=$(cache CMAKE_INSTALL_LIBDIR)
[ -n "$prefix" ] && [ -n "$libdir" ] || fail "no install prefix/libdir in $B/CMakeCache.txt"
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac

# Install into a DESTDIR. cmake --install rewrites the build's install_manifest.txt (which
# `make uninstall` reads): keep the one of a real `make install`.
manifest="$B/install_manifest.txt"
[ -f "$manifest" ] && cp -p "$manifest" "$tmp/manifest.saved"
restore() { if [ -f "$tmp/manifest.saved" ]; then cp -p "$tmp/manifest.saved" "$manifest"; else rm -f "$manifest"; fi; }
trap 'restore; rm -rf "$tmp"' EXIT
DESTDIR="$tmp/root" cmake --install "$B" >"$tmp/log" 2>&1 || fail "cmake --install: $(tail -20 "$tmp/log")"
restore
R="$tmp/root$prefix"; L="$tmp/root$libdir"
for f in "$L/libergon.so.0" "$L/libergon.so" "$R/include/ergon/ergon.h" "$L/pkgconfig/ergon.pc" \
         "$L/cmake/ergon/ergonConfig.cmake" "$L/cmake/ergon/ergonConfigVersion.cmake" \
         "$L/cmake/ergon/ergonTargets.cmake" "$R/bin/ergon" "$R/sbin/ergond" \
         "$R/share/bash-completion/completions/ergon" "$R/share/bash-completion/completions/ergond" \
         "$R/share/doc/ergon/install.md" "$R/share/doc/ergon/ergond.md" "$L/ergon/ergon-watchdog"; do
  [ -e "$f" ] || fail "not installed: ${f#$tmp/root}"
done
[ "$(readlink "$L/libergon.so.0")" = "libergon.so.0.1.0" ] || fail "libergon.so.0 -> $(readlink "$L/libergon.so.0")"
if grep -q '^ERGON_MANPAGES:BOOL=ON' "$B/CMakeCache.txt"; then
  for m in man1/ergon.1 man1/ergon-plan.1 man1/ergon-gpu.1 man8/ergond.8; do
    [ -s "$R/share/man/$m" ] || fail "man page $m not installed"
  done
  n=$("$B/ergon" --help | awk '/^commands:/{l=1;next} l&&/^  [a-z]/{n++} l&&!/^  /{l=0} END{print n}')
  [ "$(ls "$R/share/man/man1" | grep -c '^ergon-')" = "$n" ] || fail "not one ergon-COMMAND(1) per command ($n commands)"
  MANWIDTH=80 man -l "$R/share/man/man8/ergond.8" 2>"$tmp/err" | grep -q -- "--socket-mode" || fail "ergond(8) does not render its options: $(cat "$tmp/err")"
fi
unit=$(find "$tmp/root" -name ergond.service | head -1)
[ -n "$unit" ] || fail "ergond.service not installed"
grep -q "^ExecStart=$prefix/sbin/ergond " "$unit" || fail "unit ExecStart does not point at the installed ergond: $(grep ExecStart "$unit")"
conf=$(find "$tmp/root" -name ergond.conf | head -1)
[ -n "$conf" ] && grep -q "^allow \* group:ergon" "$conf" || fail "default ergond.conf missing or not 'allow * group:ergon'"
grep -q -- "--config ${conf#$tmp/root} " "$unit" || fail "unit --config is not the installed ergond.conf"
# The client's watchdog runs from there (RUNPATH $ORIGIN/.. or a system library dir).
env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$L" "$L/ergon/ergon-watchdog" --help | grep -q -- "--control-fd" ||
  fail "installed ergon-watchdog does not run"
# The installed CLI runs (RUNPATH or a system library dir), without the build tree.
out=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$L" "$R/bin/ergon" version) || fail "installed ergon does not run"
[ "$out" = "ergon $("$B/ergon" version | cut -d' ' -f2)" ] || fail "installed ergon version: $out"

# A C program through the installed ergon.pc (the DESTDIR as the sysroot).
cat >"$tmp/main.c" <<'EOF'
#include <ergon/ergon.h>
#include <stdio.h>
int main(void) { printf("%s %s\n", erg_version(), erg_strerror(ERG_EPARSE)); return 0; }
EOF
export PKG_CONFIG_PATH="$L/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$tmp/root"
cc -Wall -Werror -o "$tmp/c" "$tmp/main.c" $(pkg-config --cflags --libs ergon) 2>"$tmp/err" || fail "cc with ergon.pc: $(cat "$tmp/err")"
out=$(LD_LIBRARY_PATH="$L" "$tmp/c") || fail "C program did not run"
case "$out" in *" malformed input") ;; *) fail "C program printed '$out'" ;; esac
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
# A CMake project through find_package(ergon) (the package is relocatable).
mkdir "$tmp/cm"
cat >"$tmp/cm/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(uses_ergon C)
find_package(ergon 0.1 REQUIRED)
add_executable(app $tmp/main.c)
target_link_libraries(app PRIVATE ergon::ergon)
EOF
cmake -S "$tmp/cm" -B "$tmp/cm/b" -DCMAKE_PREFIX_PATH="$R" >"$tmp/log" 2>&1 && cmake --build "$tmp/cm/b" >>"$tmp/log" 2>&1 ||
  fail "CMake project with find_package(ergon): $(tail -20 "$tmp/log")"
[ "$(LD_LIBRARY_PATH="$L" "$tmp/cm/b/app")" = "$out" ] || fail "CMake-built program differs"
# A newer major/minor is refused by the version file.
sed -i 's/find_package(ergon 0.1 REQUIRED)/find_package(ergon 9.0 REQUIRED)/' "$tmp/cm/CMakeLists.txt"
cmake -S "$tmp/cm" -B "$tmp/cm/b2" -DCMAKE_PREFIX_PATH="$R" >"$tmp/log" 2>&1 && fail "find_package(ergon 9.0) accepted 0.1"

# The installed Python package: finds the library (here by the loader path), and says what
# to install when there is none.
pydir=$(dirname "$(find "$tmp/root" -path '*-packages/ergon/__init__.py' | head -1)")
[ -f "$pydir/_install.py" ] && [ -f "$pydir/_libfind.py" ] || fail "Python package not installed with _install.py and _libfind.py"
for f in __init__.py deepspeed.py megatron.py; do
  [ -f "$pydir/integration/$f" ] || fail "Python subpackage ergon.integration not installed ($f)"
done
out=$(cd / && env -i PATH=/usr/bin:/bin PYTHONPATH="$(dirname "$pydir")" LD_LIBRARY_PATH="$L" $py -c "import ergon; print(ergon.version())" 2>&1)
[ "$out" = "$("$B/ergon" version | cut -d' ' -f2)" ] || fail "installed Python package: $out"
msg() { cd / && env -i PATH=/usr/bin:/bin PYTHONPATH="$1" $py -c "import ergon
try:
    ergon.version()
except ergon.ErgonError as e:
    print(e)" 2>&1; }
if ! [ -e /usr/lib/x86_64-linux-gnu/libergon.so.0 ] && ! ldconfig -p 2>/dev/null | grep -q libergon.so.0; then
  out=$(msg "$(dirname "$pydir")")
  case "$out" in *"libergon0"*"make install"*) ;; *) fail "no clear error without the library: $out" ;; esac
fi
# pip install ./python (offline), from a copy so the source tree gets no build/ or egg-info.
if $py -m pip --version >/dev/null 2>&1 && $py -c "import setuptools" 2>/dev/null; then
  cp -r "$ERGON_SRC/python" "$tmp/pysrc"
  rm -rf "$tmp/pysrc/ergon/__pycache__" "$tmp/pysrc/ergon/integration/__pycache__"
  $py -m pip install --no-build-isolation --no-deps --no-index --target "$tmp/pip" "$tmp/pysrc" >"$tmp/log" 2>&1 ||
    fail "pip install ./python: $(tail -20 "$tmp/log")"
  [ -f "$tmp/pip/ergon/_libfind.py" ] || fail "pip did not install ergon/_libfind.py"
  [ -f "$tmp/pip/ergon/integration/deepspeed.py" ] || fail "pip did not install ergon.integration"
  out=$(cd / && env -i PATH=/usr/bin:/bin PYTHONPATH="$tmp/pip" ERGON_LIBRARY="$B/libergon.so.0" $py -c "import ergon; print(ergon.version())" 2>&1)
  [ "$out" = "$("$B/ergon" version | cut -d' ' -f2)" ] || fail "pip-installed package: $out"
  if ! ldconfig -p 2>/dev/null | grep -q libergon.so.0; then
    out=$(msg "$tmp/pip")
    case "$out" in *"cannot load libergon"*"libergon0"*) ;; *) fail "pip-installed package without the library: $out" ;; esac
  fi
else
  note_or_fail "pip or setuptools missing for $py, 'pip install ./python' not checked"
fi
echo "ok: installed tree complete and usable (prefix $prefix, libdir $libdir)"
