#!/usr/bin/env bash
# runpath_no_cwd.sh: no executable or shared library of the build tree or the install tree
# searches the current directory for libraries. Every ELF file's RPATH/RUNPATH entries must be
# absolute or $ORIGIN-relative: an empty entry (CMake pads a build RUNPATH with ':' to make
# room for the installed one) or a relative one ('.', 'lib') is resolved against the cwd of
# whoever runs the program. Then the proof: `ergon version` (built and installed) run in a
# directory holding a planted libm.so.6 and libc.so.6 (not ELF: the loader fails loudly if it
# opens them) works.
set -u
: "${ERGON:?}" "${ERGON_BIN_DIR:?}"
need() { # a missing prerequisite: skip with a message, fail under CI=true
  if [ "${CI:-}" = true ]; then echo "FAIL: $*"; exit 1; fi
  echo "SKIP: $*"; exit 77
}
command -v readelf >/dev/null || need "no readelf (Debian package binutils)"
command -v cmake >/dev/null || need "no cmake"
B=$ERGON_BIN_DIR
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
failed=0

# bad_entries FILE: prints each RPATH/RUNPATH entry of FILE that is neither absolute nor
# $ORIGIN-relative ("" for an empty one).
bad_entries() {
  local rp e rest
  while IFS= read -r rp; do
    rest="$rp:" # a trailing ':' of the value becomes one empty entry
    while [ -n "$rest" ]; do
      e=${rest%%:*}; rest=${rest#*:}
      case $e in
        /*|'$ORIGIN'|'$ORIGIN/'*|'${ORIGIN}'|'${ORIGIN}/'*) ;;
        *) printf '"%s" ' "$e" ;;
      esac
    done
  done < <(readelf -d "$1" 2>/dev/null | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]$/\2/p')
}

# check_tree DIR WHAT: every ELF executable and shared library under DIR (what we built: not
# CMake's scratch files nor a Python venv's wheels).
check_tree() {
  local f bad n=0
  while IFS= read -r -d '' f; do
    [ "$(od -An -N4 -tx1 "$f" | tr -d ' ')" = 7f454c46 ] || continue
    n=$((n + 1))
    bad=$(bad_entries "$f")
    if [ -n "$bad" ]; then
      echo "FAIL ($2): ${f#$1/} searches the current directory: RPATH/RUNPATH entries $bad(readelf: $(readelf -d "$f" | grep -E 'R(UN)?PATH' | sed 's/.*: //'))"
      failed=1
    fi
  done < <(find "$1" \( -name CMakeFiles -o -name venv -o -name _deps \) -prune -o \
             -type f \( -perm -u+x -o -name '*.so' -o -name '*.so.*' \) -print0)
  [ $n -gt 0 ] || { echo "FAIL ($2): no ELF file found under $1"; failed=1; }
  echo "# $2: $n ELF files checked"
}

check_tree "$B" "build tree"

# The install tree (a DESTDIR). Installing the component "Unspecified" (every rule of ours)
# writes install_manifest_Unspecified.txt, not the install_manifest.txt of a real `make install`.
if [ -n "${ERGON_SANITIZED:-}" ]; then
  echo "# install tree: not checked (a sanitized build is not installed)"
  inst=""
else
  DESTDIR="$tmp/root" cmake --install "$B" --component Unspecified >"$tmp/log" 2>&1 ||
    { echo "FAIL: cmake --install: $(tail -20 "$tmp/log")"; exit 1; }
  rm -f "$B/install_manifest_Unspecified.txt"
  check_tree "$tmp/root" "install tree"
  inst=$(find "$tmp/root" -path '*/bin/ergon' -type f | head -1)
  [ -n "$inst" ] || { echo "FAIL: no bin/ergon installed"; failed=1; }
fi

# A planted libm.so.6 and libc.so.6 in the current directory are never opened.
mkdir "$tmp/cwd"
for l in libm.so.6 libc.so.6; do echo "planted $l: not a library" >"$tmp/cwd/$l"; done
for exe in "$ERGON" $inst; do
  out=$(cd "$tmp/cwd" && env -u LD_LIBRARY_PATH "$exe" version 2>&1); rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL: $exe version in a directory with a planted libm.so.6 (exit $rc): $out"
    failed=1
  else
    echo "ok: $exe version with a planted libm.so.6 in the cwd: $out"
  fi
done
exit $failed
