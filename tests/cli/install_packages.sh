#!/usr/bin/env bash
# install_packages.sh: build the Debian packages (packaging/build-deb.sh, lintian included),
# install them with dpkg -i on this machine, use them as a user would (ergon version, man
# pages, a C program via pkg-config, a CMake project via find_package, the Python package
# with no environment variable, ergond started as the unit's ExecStart line says: a client
# outside the group ergon is refused, a member locks a clock), purge them (which stops
# ergond, resetting the clock) and check that nothing is left: files, group, unit links.
# Needs root and Debian's packaging tools (make deb-deps), and a machine without ergon's
# packages, group, state or systemd: skips otherwise, fails under CI=true. Skip by design: the
# ASan build (the packages are built from the source tree; the Release suite runs it). The machine is
# left as it was, also on failure (trap). Builds in a temporary directory, not in build/.
# The README.md and docs/install.md blocks `make deb` + `dpkg -i` are what this test runs.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_SRC:?}"
[ "$(id -u)" = 0 ] || skip_or_fail "needs root (dpkg -i, dpkg --purge)"
if [ -n "${ERGON_SANITIZED:-}" ]; then
  skip_by_design "the packages are built from the source tree, not from this (sanitized) build; the Release suite runs this test"
fi
for t in dpkg-buildpackage dh dh_python3 lintian addgroup setpriv start-stop-daemon cmake cc pkg-config man; do
  command -v "$t" >/dev/null || skip_or_fail "$t missing (make deb-deps installs the packaging tools)"
done
[ -n "${ERGON_FAKE_NVML:-}" ] && [ -r "$ERGON_FAKE_NVML" ] || skip_or_fail "fake NVML not built"
PKGS="python3-ergon ergond ergon libergon-dev libergon0"
for p in $PKGS; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv "not-installed"; then
    skip_or_fail "package $p is already on this machine (status: $(dpkg-query -W -f='${Status}' "$p")); this test would remove it"
  fi
done
getent group ergon >/dev/null && skip_or_fail "a group 'ergon' already exists; this test would remove it"
[ -e /run/ergond ] && skip_or_fail "/run/ergond exists (an ergond runs here?)"
[ -e /var/lib/ergond ] && skip_or_fail "/var/lib/ergond exists (ergond's lease state); this test would remove it"
if [ -d /run/systemd/system ]; then
  skip_or_fail "systemd runs here: installing ergond would start the real service on this machine"
fi

tmp=$(mktemp -d /tmp/ergon-install-test.XXXXXX)
chmod 755 "$tmp"
dpid=""; hpid=""; made_rundir=0
cleanup() {
  [ -n "$hpid" ] && kill "$hpid" 2>/dev/null && wait "$hpid" 2>/dev/null
  [ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
  for p in $PKGS; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv "not-installed"; then
      dpkg --purge "$p" >/dev/null 2>&1 || echo "cleanup: could not purge $p"
    fi
  done
  [ $made_rundir = 1 ] && rm -rf /run/ergond /var/lib/ergond
  getent group ergon >/dev/null && groupdel ergon 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*"; for f in "$tmp/dlog" "$tmp/nvml.log" "$tmp/out"; do [ -s "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done; exit 1; }
t0=$(date +%s)

# --- Build (in $tmp, never in the source tree) and lintian. noopt (-O0), -g0 and no debug-symbol
# packages keep it short; `make deb` builds them optimised. nice: the timing-sensitive tests
# that ctest runs beside this one keep their CPU.
DEB_BUILD_OPTIONS="noautodbgsym noopt ${DEB_BUILD_OPTIONS:-}" DEB_CFLAGS_APPEND=-g0 JOBS=${JOBS:-$(nproc)} nice -n 19 bash "$ERGON_SRC/packaging/build-deb.sh" "$tmp/deb" >"$tmp/out" 2>&1 || fail "make deb failed: $(tail -30 "$tmp/out")"
echo "built and lintian-checked in $(( $(date +%s) - t0 )) s:"; ls "$tmp/deb"/*.deb | sed 's|.*/|  |'
debs=""
for p in $PKGS; do
  f=$(ls "$tmp"/deb/"${p}"_*.deb 2>/dev/null) || fail "no package $p"
  debs="$debs $f"
done
version=$(dpkg-deb -f "$tmp"/deb/libergon0_*.deb Version)
# Every path the packages ship that is not on the machine yet: all must be gone after the purge.
for f in $debs; do dpkg-deb -c "$f"; done | awk '{print substr($6, 3)}' | sed 's|/$||' | sort -u |
  while read -r p; do [ -n "$p" ] && ! [ -e "/$p" ] && ! [ -L "/$p" ] && echo "$p"; done >"$tmp/new_paths"
grep -q "^usr/sbin/ergond$" "$tmp/new_paths" || fail "the package paths could not be listed"

# --- Install.
# (--path-include: man pages and docs even where a minimal image excludes them in dpkg.cfg.d)
dpkg --path-include='/usr/share/man/*' --path-include='/usr/share/doc/*' -i $debs >"$tmp/out" 2>&1 ||
  fail "dpkg -i: $(cat "$tmp/out")"
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" | grep -q "install ok installed" || fail "$p not installed"
done
getent group ergon >/dev/null || fail "ergond did not create the group ergon"
[ -L /etc/systemd/system/multi-user.target.wants/ergond.service ] || fail "ergond.service not enabled"
echo "installed $version"

# --- The CLI.
out=$(/usr/bin/ergon version) || fail "ergon version"
[ "$out" = "ergon $version" ] || fail "ergon version printed '$out', package is $version"
# --- Man pages render (ergon(1), a command's page, ergond(8)).
for page in "1 ergon" "1 ergon-plan" "8 ergond"; do
  MANWIDTH=80 MANPAGER=cat PAGER=cat man $page >"$tmp/man" 2>"$tmp/manerr" || fail "man $page: $(cat "$tmp/manerr")"
  name=${page#* }
  grep -q "^NAME" "$tmp/man" && grep -Eq "$name +- " "$tmp/man" || fail "man $page did not render: $(head -5 "$tmp/man")"
done
grep -q "ergon-plan(1)" < <(MANPAGER=cat man 1 ergon) || fail "ergon(1) does not point at ergon-plan(1)"
grep -q "ergon plan perseus" < <(MANPAGER=cat man 1 ergon-plan) || fail "ergon-plan(1) lacks the perseus method"
# --- Bash completion is installed where bash-completion looks, and completes commands.
comp=/usr/share/bash-completion/completions/ergon
[ -r "$comp" ] || fail "no $comp"
got=$(bash -c 'source '"$comp"'; COMP_WORDS=(ergon pl); COMP_CWORD=1; _ergon; echo "${COMPREPLY[*]}"')
[ "$got" = plan ] || fail "completion of 'ergon pl' gave '$got'"

# --- A C program through pkg-config.
mkdir "$tmp/c"
cat >"$tmp/c/main.c" <<'EOF'
#include <ergon/ergon.h>
#include <ergon/profile.h>
#include <stdio.h>
int main(void)
{
    erg_error err;
    double w = 0;
    if (erg_blocking_power_w("a100", &w, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    printf("%s %s %.2f\n", erg_version(), erg_status_name(ERG_EPARSE), w);
    return 0;
}
EOF
(cd "$tmp/c" && cc -Wall -Werror -o main main.c $(pkg-config --cflags --libs ergon)) >"$tmp/out" 2>&1 || fail "cc with pkg-config: $(cat "$tmp/out")"
out=$(env -i PATH=/usr/bin:/bin "$tmp/c/main") || fail "C program did not run"
[ "$out" = "$version EPARSE 83.64" ] || fail "C program printed '$out'"
# --- A CMake project through find_package(ergon).
mkdir "$tmp/cm"
cat >"$tmp/cm/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(uses_ergon C)
find_package(ergon 0.1 REQUIRED)
add_executable(app ../c/main.c)
target_link_libraries(app PRIVATE ergon::ergon)
EOF
(cmake -S "$tmp/cm" -B "$tmp/cm/b" && cmake --build "$tmp/cm/b") >"$tmp/out" 2>&1 || fail "CMake project: $(tail -20 "$tmp/out")"
out=$(env -i PATH=/usr/bin:/bin "$tmp/cm/b/app") || fail "CMake-built program did not run"
[ "$out" = "$version EPARSE 83.64" ] || fail "CMake-built program printed '$out'"
# --- Python, no environment variable: the system interpreter the package is for.
out=$(cd / && env -i PATH=/usr/bin:/bin /usr/bin/python3 -c "import ergon; print(ergon.version())" 2>&1) || fail "python3: $out"
[ "$out" = "$version" ] || fail "python3 printed '$out'"
out=$(cd / && env -i PATH=/usr/bin:/bin /usr/bin/python3 -c "import ergon.server_client as s; s._load(); print('ok')" 2>&1)
[ "$out" = ok ] || fail "ergon.server_client cannot load the library: $out"

# --- ergond as the unit starts it: ExecStart verbatim, with the unit's Group= and
# RuntimeDirectory= done the way systemd does them (the NVML back-end is the fake one).
unit=$(ls /lib/systemd/system/ergond.service /usr/lib/systemd/system/ergond.service 2>/dev/null | head -1)
[ -n "$unit" ] || fail "no ergond.service installed"
key() { sed -n "s/^$1=//p" "$unit" | tail -1; }
exec_start=$(key ExecStart); group=$(key Group); rundir=$(key RuntimeDirectory); runmode=$(key RuntimeDirectoryMode)
statedir=$(key StateDirectory); statemode=$(key StateDirectoryMode)
[ -n "$exec_start" ] && [ -n "$rundir" ] || fail "unit lacks ExecStart or RuntimeDirectory"
sock=$(echo "$exec_start" | sed -n 's/.*--socket \([^ ]*\).*/\1/p')
[ "$rundir" = ergond ] && [ "$sock" = /run/ergond/ergond.sock ] || fail "unexpected socket $sock / runtime dir $rundir"
made_rundir=1
install -d -m "${runmode:-0755}" -o root -g "${group:-root}" "/run/$rundir"
[ -n "$statedir" ] && install -d -m "${statemode:-0755}" -o root -g "${group:-root}" "/var/lib/$statedir"
gid=$(getent group ergon | cut -d: -f3)
export ERGON_NVML_LIBRARY="$ERGON_FAKE_NVML" FAKE_NVML_LOG="$tmp/nvml.log"
read -r -a argv <<<"$exec_start"
if [ -n "$group" ]; then
  setpriv --regid="$group" --clear-groups -- "${argv[@]}" 2>"$tmp/dlog" &
else
  "${argv[@]}" 2>"$tmp/dlog" &
fi
dpid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "ergond did not create $sock"
perm=$(stat -c '%a %U %G' "$sock")
echo "ergond: $exec_start -> $sock $perm"
case "$perm" in 660\ root\ ergon) ;; *) fail "socket is '$perm', not 0660 root:ergon" ;; esac
as() { local u=$1 g=$2; shift 2; setpriv --reuid="$u" --regid="$g" --clear-groups "$@"; }
# A client outside the group ergon cannot reach the daemon, and nothing reaches NVML.
as 65534 65534 /usr/bin/ergon gpu lock --gpu "daemon:$sock" --clock 1305 >"$tmp/out" 2>&1 && fail "a client outside the group ergon changed a clock"
grep -qi "denied\|permission\|may not" "$tmp/out" || fail "refusal does not say why: $(cat "$tmp/out")"
as 65534 65534 /usr/bin/ergon gpu list --gpu "daemon:$sock" >/dev/null 2>&1 && fail "a client outside the group ergon reached the daemon"
grep -q "SetGpuLockedClocks" "$tmp/nvml.log" 2>/dev/null && fail "a refused request reached NVML"
# A supplementary member of the group ergon reaches the daemon (reads).
setpriv --reuid=65534 --regid=65534 --groups="$gid" /usr/bin/ergon gpu list --gpu "daemon:$sock" >"$tmp/out" 2>&1 ||
  fail "a supplementary member of ergon cannot reach the daemon: $(cat "$tmp/out")"
# A member of the group ergon (as its primary group) locks a clock and holds it.
as 65534 "$gid" /usr/bin/ergon gpu lock --gpu "daemon:$sock" --clock 1305 --hold >"$tmp/hold" 2>&1 &
hpid=$!
for _ in $(seq 100); do grep -q "SetGpuLockedClocks 0 1305 1305 = 0" "$tmp/nvml.log" 2>/dev/null && break; sleep 0.05; done
grep -q "SetGpuLockedClocks 0 1305 1305 = 0" "$tmp/nvml.log" || fail "a member of ergon could not lock a clock: $(cat "$tmp/hold")"
# ergond resets every GPU at its first start; what counts is a reset after the lock.
reset_after_lock() { awk '/SetGpuLockedClocks 0 1305 1305 = 0/ {l = 1; next} l && /ResetGpuLockedClocks 0 = 0/ {f = 1} END {exit !f}' "$tmp/nvml.log"; }
sleep 0.3
reset_after_lock && fail "clock reset while its holder is alive"

# --- Purge everything while ergond runs (no systemd here): removal stops it, which resets
# the held clock.
dpkg --purge $PKGS >"$tmp/out" 2>&1 || fail "dpkg --purge: $(cat "$tmp/out")"
for _ in $(seq 100); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$dpid" 2>/dev/null && fail "ergond still runs after the purge"
wait "$dpid" 2>/dev/null; dpid=""
reset_after_lock || fail "removing ergond did not reset the held clock"
kill "$hpid" 2>/dev/null; wait "$hpid" 2>/dev/null; hpid=""
[ -e "$sock" ] && fail "the socket outlived ergond"
rm -rf /run/ergond; made_rundir=0   # systemd removes the RuntimeDirectory when the unit stops

# --- Nothing left: packages, files, group, unit links and state.
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -qv "not-installed" && fail "$p still known to dpkg: $(dpkg-query -W -f='${Status}' "$p")"
done
left=""
while read -r p; do
  [ -e "/$p" ] || [ -L "/$p" ] && left="$left /$p"
done <"$tmp/new_paths"
[ -z "$left" ] || fail "left behind:$left"
[ -e /etc/ergond.conf ] && fail "/etc/ergond.conf left behind"
[ -e /var/lib/ergond ] && fail "/var/lib/ergond (lease state) left behind"
getent group ergon >/dev/null && fail "group ergon left behind"
ls /etc/systemd/system/*/ergond.service /etc/systemd/system/ergond.service \
   /var/lib/systemd/deb-systemd-helper-enabled/ergond.service* \
   /var/lib/systemd/deb-systemd-helper-enabled/*/ergond.service \
   /var/lib/systemd/deb-systemd-helper-masked/ergond.service 2>/dev/null | grep . && fail "unit links or state left behind"
[ -n "$(ls /var/lib/dpkg/info/{libergon0,libergon-dev,ergon,ergond,python3-ergon}[.:]* 2>/dev/null)" ] && fail "dpkg info files left behind"
echo "ok: built, installed, used, purged, nothing left ($(( $(date +%s) - t0 )) s)"
