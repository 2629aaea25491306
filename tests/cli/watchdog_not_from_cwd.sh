#!/usr/bin/env bash
# watchdog_not_from_cwd.sh: libergon reached through a relative path (ERGON_LIBRARY=./libergon.so.0,
# or LD_LIBRARY_PATH=.) still starts its own ergon-watchdog, never one from the directory the
# process is in when it creates a client. Python loads the library in the build directory, then
# moves into a directory holding a planted `ergon-watchdog` (a script that writes a marker file)
# and creates an NVML client (which spawns the watchdog): the planted one must not run, and the
# real one (beside the library) must, or no client would come back.
set -u
: "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
need() { # a missing prerequisite: skip with a message, fail under CI=true
  if [ "${CI:-}" = true ]; then echo "FAIL: $*"; exit 1; fi
  echo "SKIP: $*"; exit 77
}
command -v python3 >/dev/null || need "no python3"
if [ -n "${ERGON_SANITIZED:-}" ]; then
  echo "SKIP: an ASan-instrumented libergon cannot be loaded into an uninstrumented python3"
  exit 77
fi
[ -n "${ERGON_FAKE_NVML:-}" ] && [ -r "$ERGON_FAKE_NVML" ] || need "fake NVML not built"
[ -r "$ERGON_BIN_DIR/libergon.so.0" ] && [ -x "$ERGON_BIN_DIR/ergon-watchdog" ] ||
  { echo "FAIL: libergon.so.0 or ergon-watchdog not built in $ERGON_BIN_DIR"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plant="$tmp/plant"
mkdir "$plant"
cat >"$plant/ergon-watchdog" <<EOS
#!/bin/sh
echo "planted ergon-watchdog ran in \$(pwd) as: \$0 \$*" >>"$tmp/marker"
EOS
chmod 755 "$plant/ergon-watchdog"

script='
import os, sys
import ergon
ergon.load_library()  # loaded here, in the build directory, through the relative path
os.chdir(sys.argv[1])
with ergon.Gpu("nvml") as g:
    c = ergon.Client(g, 0)
    c.close()
print("client created and closed")
'
failed=0
for form in "ERGON_LIBRARY=./libergon.so.0" "LD_LIBRARY_PATH=."; do
  rm -f "$tmp/marker"
  out=$(cd "$ERGON_BIN_DIR" && env -u ERGON_WATCHDOG -u ERGON_LIBRARY -u LD_LIBRARY_PATH \
    PYTHONPATH="$ERGON_SRC/python" PYTHONDONTWRITEBYTECODE=1 ERGON_NVML_LIBRARY="$ERGON_FAKE_NVML" \
    FAKE_NVML_LOG="$tmp/nvml.log" "$form" python3 -c "$script" "$plant" 2>&1)
  rc=$?
  if [ -e "$tmp/marker" ]; then
    echo "FAIL ($form): the ergon-watchdog of the current directory ran: $(cat "$tmp/marker")"
    echo "$out" | tail -5
    failed=1
  elif [ $rc -ne 0 ] || ! grep -q "client created and closed" <<<"$out"; then
    echo "FAIL ($form): no client (exit $rc): $(echo "$out" | tail -5)"
    failed=1
  else
    echo "ok ($form): the library's own watchdog ran, not the planted one"
  fi
done

# ERGON_WATCHDOG must name an absolute path: a relative one would also be found from whatever
# the current directory is when the client starts.
rm -f "$tmp/marker"
out=$(cd "$plant" && env -u LD_LIBRARY_PATH ERGON_LIBRARY="$ERGON_BIN_DIR/libergon.so.0" \
  ERGON_WATCHDOG=./ergon-watchdog PYTHONPATH="$ERGON_SRC/python" PYTHONDONTWRITEBYTECODE=1 \
  ERGON_NVML_LIBRARY="$ERGON_FAKE_NVML" FAKE_NVML_LOG="$tmp/nvml.log" python3 -c '
import ergon
with ergon.Gpu("nvml") as g:
    try:
        ergon.Client(g, 0).close()
        print("client created")
    except ergon.ErgonError as e:
        print("refused:", e)
' 2>&1)
if [ -e "$tmp/marker" ]; then
  echo "FAIL (ERGON_WATCHDOG=./ergon-watchdog): the relative path ran: $(cat "$tmp/marker")"; failed=1
elif ! grep -q "refused:.*ERGON_WATCHDOG=./ergon-watchdog.*absolute" <<<"$out"; then
  echo "FAIL (ERGON_WATCHDOG=./ergon-watchdog): not refused clearly: $out"; failed=1
else
  echo "ok (ERGON_WATCHDOG=./ergon-watchdog): refused: $out"
fi
exit $failed
