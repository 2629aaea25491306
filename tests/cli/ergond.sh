#!/usr/bin/env bash
# ergond.sh: the daemon with two real users: allow list, validation, leases, 10,000 random requests.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}" "${ERGON_BIN_DIR:?}"
ERGOND="$ERGON_BIN_DIR/tools/ergond/ergond"
[ "$(id -u)" = 0 ] || skip_or_fail "needs root to create test users"
command -v useradd >/dev/null && command -v setpriv >/dev/null || skip_or_fail "no useradd/setpriv"
command -v curl >/dev/null || skip_or_fail "no curl"
command -v python3 >/dev/null || skip_or_fail "no python3"
[ -n "${ERGON_FAKE_NVML:-}" ] && [ -r "$ERGON_FAKE_NVML" ] || skip_or_fail "fake NVML not built"

ALLOWED="ergta$$"; DENIED="ergtd$$"
tmp=$(mktemp -d); chmod 755 "$tmp"
dpid=""; hpid=""
cleanup() {
  [ -n "$hpid" ] && kill -KILL "$hpid" 2>/dev/null && wait "$hpid" 2>/dev/null
  [ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
  userdel "$ALLOWED" 2>/dev/null; userdel "$DENIED" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- daemon log"; cat "$tmp/dlog"; echo "--- nvml log"; cat "$tmp/nvml.log"; exit 1; }

useradd -M -N -s /usr/sbin/nologin "$ALLOWED" || fail "useradd"
useradd -M -N -s /usr/sbin/nologin "$DENIED" || fail "useradd"
as() { local u=$1; shift; setpriv --reuid="$(id -u "$u")" --regid="$(id -g "$u")" --clear-groups "$@"; }

printf '# test allow list\nallow 0 user:%s\n' "$ALLOWED" >"$tmp/conf"
sock="$tmp/ergond.sock"
export FAKE_NVML_LOG="$tmp/nvml.log"
"$ERGOND" --socket "$sock" --config "$tmp/conf" --gpu "nvml:$ERGON_FAKE_NVML" \
  --lock-file "$tmp/admin.lock" --state-dir "$tmp/state" --socket-mode 0666 2>"$tmp/dlog" &
dpid=$!
for _ in $(seq 100); do curl -s -o /dev/null --unix-socket "$sock" http://x/time && break; sleep 0.05; done
[ -S "$sock" ] || fail "no socket"
[ "$(stat -c %a "$sock")" = 666 ] || fail "socket mode $(stat -c %a "$sock")"

wait_log() { for _ in $(seq 100); do grep -q "$1" "$tmp/nvml.log" 2>/dev/null && return 0; sleep 0.05; done; return 1; }

# A user not in the allow list gets a clear error and nothing reaches NVML.
as "$DENIED" "$ERGON" gpu lock --gpu "daemon:$sock" --clock 1305 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] || fail "denied user: exit $rc"
grep -q "may not change GPU 0" "$tmp/err" || fail "denied user message: $(cat "$tmp/err")"
grep -q "SetGpuLockedClocks 0 1305" "$tmp/nvml.log" && fail "denied request reached NVML"
# ...but may read.
as "$DENIED" "$ERGON" gpu energy --gpu "daemon:$sock" >/dev/null || fail "denied user cannot read"

# The allowed user succeeds; its process exits, so the lease resets the clock.
as "$ALLOWED" "$ERGON" gpu lock --gpu "daemon:$sock" --clock 1305 2>"$tmp/err" || fail "allowed user: $(cat "$tmp/err")"
wait_log "SetGpuLockedClocks 0 1305 1305 = 0" || fail "no lock"
wait_log "ResetGpuLockedClocks 0 = 0" || fail "no reset after the process exited"
# Only GPU 0 is allowed.
as "$ALLOWED" "$ERGON" gpu lock --gpu "daemon:$sock" --device 1 --clock 1305 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "may not change GPU 1" "$tmp/err" || fail "GPU 1 not refused"

# Unsupported clocks and malformed requests are refused.
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -X POST --unix-socket "$sock" \
  "http://x/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=1301&max_clock_mhz=1301&block=true")
[ "$code" = 400 ] && grep -q "does not support SM clock 1301" "$tmp/body" || fail "unsupported clock: $code $(cat "$tmp/body")"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --unix-socket "$sock" \
  "http://x/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=1410&max_clock_mhz=1200")
[ "$code" = 400 ] || fail "min > max: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --unix-socket "$sock" "http://x/gpu/set_power_limit?gpu_ids=7&power_limit_mw=200000")
[ "$code" = 400 ] || fail "bad gpu id: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --unix-socket "$sock" "http://x/gpu/set_power_limit?gpu_ids=0&power_limit_mw=5")
[ "$code" = 400 ] || fail "power limit out of range: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" "http://x/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000")
[ "$code" = 405 ] || fail "GET on a setter: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" "http://x/nope")
[ "$code" = 404 ] || fail "unknown path: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" -H "X-Big: $(head -c 9000 /dev/zero | tr '\0' a)" "http://x/time")
[ "$code" = 431 ] || fail "huge header: $code"

# The admin lock file disables writes, not reads.
touch "$tmp/admin.lock"
as "$ALLOWED" "$ERGON" gpu lock --gpu "daemon:$sock" --clock 1305 2>"$tmp/err"; [ $? -eq 1 ] || fail "admin lock: exit"
grep -q "disabled by the administrator" "$tmp/err" || fail "admin lock message: $(cat "$tmp/err")"
as "$ALLOWED" "$ERGON" gpu energy --gpu "daemon:$sock" >/dev/null || fail "admin lock blocks reads"
rm -f "$tmp/admin.lock"

# SIGKILL of a client that holds a clock: the daemon's pidfd lease resets it.
: >"$tmp/nvml.log"
setpriv --reuid="$(id -u "$ALLOWED")" --regid="$(id -g "$ALLOWED")" --clear-groups \
  "$ERGON" gpu lock --gpu "daemon:$sock" --clock 1200 --hold >"$tmp/hold.out" 2>&1 &
hpid=$!
wait_log "SetGpuLockedClocks 0 1200 1200 = 0" || fail "hold: no lock"
sleep 0.2
grep -q "ResetGpuLockedClocks" "$tmp/nvml.log" && fail "reset while the holder is alive"
kill -KILL "$hpid"; wait "$hpid" 2>/dev/null; killed=$hpid; hpid=""
wait_log "ResetGpuLockedClocks 0 = 0" || fail "no reset after SIGKILL"
grep -q "pid $killed exited: GPU 0 restored" "$tmp/dlog" || fail "lease log line for pid $killed"

# SIGTERM of a holder: it resets the clock itself (which releases its lease).
: >"$tmp/nvml.log"
setpriv --reuid="$(id -u "$ALLOWED")" --regid="$(id -g "$ALLOWED")" --clear-groups \
  "$ERGON" gpu lock --gpu "daemon:$sock" --clock 1095 --hold >"$tmp/hold.out" 2>&1 &
hpid=$!
wait_log "SetGpuLockedClocks 0 1095 1095 = 0" || fail "hold 2: no lock"
kill -TERM "$hpid"; wait "$hpid"; rc=$?; hpid=""
[ $rc -eq 0 ] || fail "holder exit after SIGTERM: $rc"
wait_log "ResetGpuLockedClocks 0 = 0" || fail "no reset after SIGTERM"
sleep 0.2
[ "$(grep -c ResetGpuLockedClocks "$tmp/nvml.log")" -eq 1 ] || fail "reset twice after SIGTERM"

# 10,000 random requests, then it still serves.
python3 - "$sock" <<'PY' || fail "fuzzing the daemon"
import os, random, socket, sys
sock = sys.argv[1]
random.seed(4)
paths = ["/discover", "/time", "/gpu/set_gpu_locked_clocks", "/gpu/reset_gpu_locked_clocks",
         "/gpu/set_power_limit", "/gpu/get_cumulative_energy", "/gpu/get_power", "/x", "//", ""]
keys = ["gpu_ids", "min_clock_mhz", "max_clock_mhz", "power_limit_mw", "block", "zz", "", "%"]
vals = ["0", "1", "0,1", "1410", "1395", "-1", "99999999999", "true", "%zz", "", ",", "0,,1"]
def junk():
    k = random.random()
    if k < 0.25:
        return os.urandom(random.randint(0, 300))
    q = "&".join(random.choice(keys) + random.choice(["=", ""]) + random.choice(vals)
                 for _ in range(random.randint(0, 20)))
    line = "%s %s?%s %s\r\n" % (random.choice(["GET", "POST", "PUT", "get", "", "GET GET"]),
                                 random.choice(paths), q,
                                 random.choice(["HTTP/1.1", "HTTP/1.0", "HTTP/2", "xx", ""]))
    hdrs = "".join(random.choice(["Content-Length: %d\r\n" % random.randint(-5, 6000),
                                  "Host: x\r\n", ": bad\r\n", "Transfer-Encoding: chunked\r\n",
                                  "A" * random.randint(0, 3000) + "\r\n"])
                   for _ in range(random.randint(0, 5)))
    data = (line + hdrs + random.choice(["\r\n", "", "\n"])).encode()
    if random.random() < 0.1:
        data = data[:random.randint(0, len(data))]
    return data
for i in range(10000):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock)
    try:
        s.sendall(junk())
        s.shutdown(socket.SHUT_WR)
        s.recv(65536)
    except (BrokenPipeError, ConnectionResetError):
        pass
    s.close()
PY
kill -0 "$dpid" || fail "daemon died"
code=$(curl -s -o "$tmp/body" -w '%{http_code}' --unix-socket "$sock" "http://x/discover")
[ "$code" = 200 ] && grep -q '"gpus"' "$tmp/body" || fail "daemon not serving after fuzzing: $code"

# Clean stop; nothing left leased.
kill -TERM "$dpid"; wait "$dpid"; rc=$?; dpid=""
[ $rc -eq 0 ] || fail "daemon exit $rc"
[ ! -e "$sock" ] || fail "socket not removed"
grep -q "ergond stopped after" "$tmp/dlog" || fail "no stop line"
echo ok
