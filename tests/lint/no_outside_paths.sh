#!/usr/bin/env bash
# no_outside_paths.sh: the tests need nothing outside the repository. No test, build file, tool
# or benchmark a test runs names the shared folder beside the checkout (dot-dot-slash shared:
# the published data is in tests/data/published; this file never writes that path out), an
# absolute path under a machine's own folders (/work, /home, /root, /mnt, /srv, /data, /opt,
# /scratch, /media, /nfs, /Users) or a path above the source tree ($ERGON_SRC/..,
# ${CMAKE_SOURCE_DIR}/.., ERG_SOURCE_DIR "/.."). System paths (/usr, /tmp, /proc, /run, /dev)
# are the machine's, not data, and stay allowed; so do the data files themselves (an HLO
# module's metadata names the paths it was traced from). A reference planted in a copy must be
# caught, naming file:line.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_SRC:?}"
command -v git >/dev/null || skip_or_fail "git missing (the tracked files are the ones checked)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pattern='\.\./shared|(^|[^A-Za-z0-9_.$}-])/(work|home|root|mnt|srv|Users|data|opt|scratch|media|nfs)/|(\$\{?ERGON_SRC\}?|\$\{CMAKE_SOURCE_DIR\}|ERG_SOURCE_DIR ?")/\.\.'
# files ROOT: the files checked, one per line (tracked, or every file for a copy)
files() {
  if git -C "$1" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$1" ls-files -- tests CMakeLists.txt README.md tools bench
  else
    (cd "$1" && find tests CMakeLists.txt README.md tools bench -type f)
  fi | grep -v -e '^tests/data/' -e '^tests/fuzz/corpus/' -e '^tests/lint/no_outside_paths\.sh$'
}
# check ROOT: print every outside path as file:line: text; exit 1 when there is one.
check() {
  (cd "$1" && files "$1" | tr '\n' '\0' | xargs -0 grep -nIE "$pattern" 2>/dev/null) && return 1
  return 0
}
[ -n "$(files "$ERGON_SRC")" ] || { echo "FAIL: no files to check in $ERGON_SRC"; exit 1; }
if ! out=$(check "$ERGON_SRC"); then
  echo "FAIL: paths outside the repository (the tests must need nothing outside it):"
  echo "$out"
  exit 1
fi
# The check must catch each kind, planted in a copy.
mkdir -p "$tmp/t"
cp -r "$ERGON_SRC/tests" "$ERGON_SRC/tools" "$ERGON_SRC/bench" "$ERGON_SRC/CMakeLists.txt" \
  "$ERGON_SRC/README.md" "$tmp/t/"
rm -rf "$tmp/t/tests/fuzz/corpus"
[ -z "$(files "$tmp/t" | head -1)" ] && { echo "FAIL: no files in the copy"; exit 1; }
check "$tmp/t" >/dev/null || { echo "FAIL: the unchanged copy fails the check"; exit 1; }
n=0
up=..  # the planted references are built here, so that grep finds none in this file
for plant in "data=\${ERGON_DATA:-$up/shared/data}" 'H=/work/shared/data/hlo' \
             "p=\"\$ERGON_SRC/$up/x\"" '#define D "/home/me/data"'; do
  n=$((n + 1))
  rm -rf "$tmp/c"; cp -r "$tmp/t" "$tmp/c"
  echo "$plant" >>"$tmp/c/tests/cli/shard.sh"
  line=$(wc -l <"$tmp/c/tests/cli/shard.sh")
  if out=$(check "$tmp/c"); then
    echo "FAIL: planted reference $n not caught: $plant"; exit 1
  fi
  echo "$out" | grep -qF "tests/cli/shard.sh:$line:" || { echo "FAIL: planted $n not named file:line: $out"; exit 1; }
done
echo "ok: no paths outside the repository in $(files "$ERGON_SRC" | wc -l) files; $n planted references caught"
