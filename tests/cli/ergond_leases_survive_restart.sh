#!/usr/bin/env bash
# ergond_leases_survive_restart.sh: ergond SIGKILLed and restarted keeps its leases (issue 15
# item 5): a live holder is re-adopted and its clock reset when it dies later; a holder that
# died while ergond was down, a reused pid, a pending change, a missing or corrupt state file
# all lead to a reset at start-up; state from an earlier boot is dropped. The fake NVML keeps
# its settings in a file (FAKE_NVML_STATE), as a real GPU keeps them across ergond restarts.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}" "${ERGON_BIN_DIR:?}"
ERGOND="$ERGON_BIN_DIR/tools/ergond/ergond"
[ "$(id -u)" = 0 ] || skip_or_fail "needs root (the fake NVML refuses setters otherwise)"
[ -n "${ERGON_FAKE_NVML:-}" ] && [ -r "$ERGON_FAKE_NVML" ] || skip_or_fail "fake NVML not built"
command -v curl >/dev/null || skip_or_fail "no curl"
[ -r /proc/self/stat ] || skip_or_fail "no /proc"

tmp=$(mktemp -d); chmod 755 "$tmp"
dpid=""; h1=""; h2=""; spid=""
cleanup() {
  for p in $h1 $h2 $spid; do kill -KILL "$p" 2>/dev/null; done
  [ -n "$dpid" ] && kill -KILL "$dpid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"; echo "--- daemon log"; cat "$tmp"/dlog* 2>/dev/null
  echo "--- gpu state"; cat "$tmp/gpu.state" 2>/dev/null
  echo "--- lease state"; cat "$tmp/state/leases" 2>/dev/null; exit 1
}

printf 'allow * uid:54321\n' >"$tmp/conf"
sock="$tmp/ergond.sock"
state="$tmp/state"
export FAKE_NVML_STATE="$tmp/gpu.state" FAKE_NVML_LOG="$tmp/nvml.log"
n=0
start_daemon() {
  n=$((n + 1))
  "$ERGOND" --socket "$sock" --config "$tmp/conf" --gpu "nvml:$ERGON_FAKE_NVML" \
    --state-dir "$state" --socket-mode 0600 2>"$tmp/dlog$n" &
  dpid=$!
  for _ in $(seq 100); do curl -s -o /dev/null --unix-socket "$sock" http://x/time && return 0; sleep 0.05; done
  fail "ergond $n did not start"
}
kill9_daemon() { kill -KILL "$dpid"; wait "$dpid" 2>/dev/null; dpid=""; }
# GPU state line of device $1: "DEV LOCK_MIN LOCK_MAX MEM_LOCK LIMIT_MW"
gpu() { grep "^$1 " "$tmp/gpu.state" 2>/dev/null; }
wait_gpu() { for _ in $(seq 100); do [ "$(gpu "$1" | cut -d' ' -f2-3)" = "$2" ] && return 0; sleep 0.05; done; return 1; }
hold() { "$ERGON" gpu lock --gpu "daemon:$sock" --device "$1" --clock "$2" --hold >/dev/null 2>&1 & }
# wait_for CMD...: poll a condition the daemon reaches just after the GPU shows the change.
wait_for() { for _ in $(seq 100); do "$@" && return 0; sleep 0.05; done; "$@"; }
no_lease() { ! grep -q "^lease " "$state/leases"; }
start_ticks() { sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f20; }

# 1. A client holds GPU 0 at 1200 MHz; ergond is SIGKILLed and restarted.
start_daemon
grep -q "no lease state in $state" "$tmp/dlog1" || fail "first start did not note the missing state"
[ "$(stat -c %a "$state")" = 700 ] || fail "state dir mode $(stat -c %a "$state")"
hold 0 1200; h1=$!
wait_gpu 0 "1200 1200" || fail "no lock"
# The fake GPU shows the lock as soon as the driver call returns; the lease is recorded just
# after (before the client's answer): wait for it rather than race it.
for _ in $(seq 100); do grep -q "^lease $h1 [0-9]* 0 0 1$" "$state/leases" 2>/dev/null && break; sleep 0.05; done
grep -q "^lease $h1 [0-9]* 0 0 1$" "$state/leases" || fail "lease of pid $h1 not recorded"
[ "$(stat -c %a "$state/leases")" = 600 ] || fail "state file mode $(stat -c %a "$state/leases")"
kill9_daemon
[ "$(gpu 0 | cut -d' ' -f2-3)" = "1200 1200" ] || fail "GPU 0 not locked after the daemon died"
start_daemon
grep -q "pid $h1 (uid 0) still holds GPU 0: lease re-adopted" "$tmp/dlog2" || fail "lease not re-adopted"
sleep 0.3
[ "$(gpu 0 | cut -d' ' -f2-3)" = "1200 1200" ] || fail "GPU 0 reset while its holder is alive"
# The holder dies: the restarted ergond resets the GPU (today: stuck at 1200 MHz forever).
kill -KILL "$h1"; wait "$h1" 2>/dev/null; dead1=$h1; h1=""
wait_gpu 0 "0 0" || fail "GPU 0 not reset after its holder died (restarted ergond forgot the lease)"
wait_for grep -q "pid $dead1 exited: GPU 0 restored" "$tmp/dlog2" || fail "no lease expiry line"
wait_for no_lease || fail "expired lease still in the state file"

# 1b. A holder changing a clock it already holds does not rewrite the state (no fsync per
# clock change); a new GPU does.
python3 - "$sock" "$state/leases" <<'PY' || fail "repeated set by one holder"
import os, socket, sys
sock, leases = sys.argv[1], sys.argv[2]
def post(q):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    s.sendall(("POST /gpu/set_gpu_locked_clocks?%s HTTP/1.1\r\nHost: x\r\n\r\n" % q).encode())
    r = s.recv(4096).decode()
    s.close()
    assert " 200 " in r.split("\r\n")[0], r
post("gpu_ids=1&min_clock_mhz=1200&max_clock_mhz=1200")
st = os.stat(leases)
assert ("lease %d " % os.getpid()) in open(leases).read()
post("gpu_ids=1&min_clock_mhz=1110&max_clock_mhz=1110")
st2 = os.stat(leases)
assert (st2.st_ino, st2.st_mtime_ns) == (st.st_ino, st.st_mtime_ns), \
    "state rewritten for a clock the process already held"
post("gpu_ids=0&min_clock_mhz=1110&max_clock_mhz=1110")
# A new GPU is recorded (the file is replaced twice, pending then final, so
# its inode number may come back: look at the content).
mine = [l.split() for l in open(leases) if l.startswith("lease %d " % os.getpid())]
assert sorted(int(l[4]) for l in mine) == [0, 1], "state not rewritten for a new GPU: %r" % mine
PY
wait_gpu 1 "0 0" && wait_gpu 0 "0 0" || fail "python holder's GPUs not reset after it exited"

# 2. The holder dies while ergond is down: reset at start-up.
hold 1 1095; h2=$!
wait_gpu 1 "1095 1095" || fail "no lock on GPU 1"
wait_for grep -q "^lease $h2 " "$state/leases" || fail "lease of pid $h2 not recorded"
kill9_daemon
kill -KILL "$h2"; wait "$h2" 2>/dev/null; dead2=$h2; h2=""
start_daemon
wait_gpu 1 "0 0" || fail "GPU 1 not reset at start-up though its holder died while ergond was down"
grep -q "pid $dead2 (uid 0) exited while ergond was down: resetting GPU 1" "$tmp/dlog3" || fail "no start-up reset line"
kill -TERM "$dpid"; wait "$dpid"; rc=$?; dpid=""
[ $rc -eq 0 ] || fail "exit $rc after SIGTERM"

# 3. A reused pid (alive, other start time) does not keep a lease; the same process does.
boot=$(cat /proc/sys/kernel/random/boot_id)
sleep 60 & spid=$!
st=$(start_ticks "$spid")
lock_gpu0() { printf '0 1410 1410 0 400000\n1 0 0 0 400000\n' >"$tmp/gpu.state"; }
lock_gpu0
printf 'ergond-leases 1\nboot %s\nlease %s %s 0 0 1\n' "$boot" "$spid" "$((st + 1))" >"$state/leases"
start_daemon
wait_gpu 0 "0 0" || fail "a reused pid kept the lease"
kill -TERM "$dpid"; wait "$dpid"; dpid=""
lock_gpu0
printf 'ergond-leases 1\nboot %s\nlease %s %s 0 0 1\n' "$boot" "$spid" "$st" >"$state/leases"
start_daemon
grep -q "pid $spid (uid 0) still holds GPU 0: lease re-adopted" "$tmp/dlog$n" || fail "same process not re-adopted"
sleep 0.2
[ "$(gpu 0 | cut -d' ' -f2-3)" = "1410 1410" ] || fail "GPU 0 reset though the same process lives"
kill -KILL "$spid"; wait "$spid" 2>/dev/null; spid=""
wait_gpu 0 "0 0" || fail "re-adopted lease not reset when its holder died"
kill -TERM "$dpid"; wait "$dpid"; dpid=""

# 4. A change in progress when ergond died ("pending") is reset.
lock_gpu0
printf 'ergond-leases 1\nboot %s\npending 0 1\n' "$boot" >"$state/leases"
start_daemon
wait_gpu 0 "0 0" || fail "pending change not reset"
kill -TERM "$dpid"; wait "$dpid"; dpid=""

# 4b. Write-ahead for real: ergond is SIGKILLed while the driver call is in progress (the fake
# NVML's setter sleeps); the pending record is there and the restarted ergond resets the GPU.
export FAKE_NVML_SET_DELAY_US=800000
start_daemon
curl -s -o /dev/null -m 5 -X POST --unix-socket "$sock" \
  "http://x/gpu/set_gpu_locked_clocks?gpu_ids=1&min_clock_mhz=1200&max_clock_mhz=1200" & cpid=$!
for _ in $(seq 100); do grep -q "^pending 1 1$" "$state/leases" && break; sleep 0.02; done
grep -q "^pending 1 1$" "$state/leases" || fail "no pending record while the driver call runs"
kill9_daemon; wait "$cpid" 2>/dev/null
unset FAKE_NVML_SET_DELAY_US
: >"$tmp/nvml.log"
start_daemon
grep -q "a change on GPU 1 was in progress when ergond stopped: resetting it" "$tmp/dlog$n" || fail "pending change of a killed ergond not noticed"
grep -q "ResetGpuLockedClocks 1 = 0" "$tmp/nvml.log" || fail "pending change of a killed ergond not reset"
kill -TERM "$dpid"; wait "$dpid"; dpid=""

# 5. A missing or corrupt state file: every GPU is reset; an earlier boot's state is dropped.
for case in missing corrupt; do
  lock_gpu0
  if [ $case = missing ]; then rm -f "$state/leases"; else printf 'ergond-leases 1\nlease x\n' >"$state/leases"; fi
  start_daemon
  wait_gpu 0 "0 0" || fail "$case state: GPU 0 not reset"
  kill -TERM "$dpid"; wait "$dpid"; dpid=""
done
grep -q "$state/leases:2: expected 'lease PID" "$tmp/dlog$n" || fail "corrupt state message"
lock_gpu0
printf 'ergond-leases 1\nboot 00000000-0000-0000-0000-000000000000\nlease 1 1 0 0 1\n' >"$state/leases"
start_daemon
grep -q "written before the last boot" "$tmp/dlog$n" || fail "earlier boot not recognised"
sleep 0.2
[ "$(gpu 0 | cut -d' ' -f2-3)" = "1410 1410" ] || fail "earlier boot's state reset a GPU"
kill -TERM "$dpid"; wait "$dpid"; dpid=""

# 6. An unwritable state directory is a start-up error, not a silent daemon without memory.
chmod 777 "$state"
"$ERGOND" --socket "$sock" --config "$tmp/conf" --gpu "nvml:$ERGON_FAKE_NVML" --state-dir "$state" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "refusing state directory" "$tmp/err" || fail "world-writable state dir: exit $rc $(cat "$tmp/err")"
echo ok
