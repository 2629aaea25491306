#!/usr/bin/env bash
# ergond_per_uid_conn_limit.sh: one local user cannot lock others out of ergond (issue 15
# item 6). A uid that opens all 64 connections gets only 8 (the rest 503 with the reason) and
# root and another uid are still served; seven uids holding 8 each leave the last 8 slots to
# root; --max-conns-per-uid changes the limit. The socket is 0660 and owned by the group given
# (default 'ergon'; a missing default group is reported and the socket stays root's).
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}" "${ERGON_BIN_DIR:?}"
ERGOND="$ERGON_BIN_DIR/tools/ergond/ergond"
[ "$(id -u)" = 0 ] || skip_or_fail "needs root to act as other uids"
command -v python3 >/dev/null || skip_or_fail "no python3"
command -v curl >/dev/null || skip_or_fail "no curl"
command -v groupadd >/dev/null || skip_or_fail "no groupadd"

tmp=$(mktemp -d); chmod 755 "$tmp"
dpid=""; GROUP="ergtg$$"
cleanup() {
  [ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
  getent group "$GROUP" >/dev/null && groupdel "$GROUP"
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- daemon log"; cat "$tmp"/dlog* 2>/dev/null; exit 1; }

printf 'allow 0 uid:54321\n' >"$tmp/conf"
sock="$tmp/ergond.sock"
n=0
start_daemon() {
  n=$((n + 1))
  "$ERGOND" --socket "$sock" --config "$tmp/conf" --gpu sim:a100:gpt3-xl:2 \
    --state-dir "$tmp/state" "$@" 2>"$tmp/dlog$n" &
  dpid=$!
  for _ in $(seq 100); do curl -s -o /dev/null --unix-socket "$sock" http://x/time && return 0; sleep 0.05; done
  fail "ergond did not start: $(cat "$tmp/dlog$n")"
}
stop_daemon() { kill -TERM "$dpid"; wait "$dpid"; local rc=$?; dpid=""; [ $rc -eq 0 ] || fail "ergond exit $rc"; }

# flood.py SOCK PER_UID_EXPECTED UIDS...: each uid (a forked process after setuid) opens 64
# connections and keeps them; reports how many were kept and what the refused ones said. Then,
# while they are held: root, a fresh uid and one more connection of the first uid try a request.
cat >"$tmp/flood.py" <<'PY'
import os, socket, sys, time
sock, expect, uids = sys.argv[1], int(sys.argv[2]), [int(u) for u in sys.argv[3:]]
def request(path="/discover"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(sock)
    # A refused connection is answered (503) and closed at once, before any request: read it
    # rather than race the close with a send.
    s.setblocking(False)
    time.sleep(0.1)
    try:
        early = s.recv(65536)
    except BlockingIOError:
        early = None
    s.settimeout(3)
    if early is not None:
        return early.decode(errors="replace")
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    return data.decode(errors="replace")
def as_uid(uid, fn):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.setgroups([]); os.setgid(uid); os.setuid(uid)
        try:
            out = fn()
        except Exception as e:
            out = "exception %r" % e
        os.write(w, out.encode()); os._exit(0)
    os.close(w)
    return pid, r
def hold():
    conns, refused = [], []
    for _ in range(64):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock)
        conns.append(s)
    time.sleep(0.5)
    kept = 0
    for s in conns:
        s.setblocking(False)
        try:
            b = s.recv(4096)
            refused.append(b.decode(errors="replace"))
        except BlockingIOError:
            kept += 1
    msg = refused[0].split("\r\n\r\n", 1)[-1] if refused else ""
    hold.conns = conns  # the kept ones stay open until the parent is done
    return "%d|%s" % (kept, msg)
holders = []
for uid in uids:
    rr, ww = os.pipe(); gor, gow = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rr); os.close(gow)
        os.setgroups([]); os.setgid(uid); os.setuid(uid)
        out = hold()
        os.write(ww, out.encode()); os.close(ww)
        os.read(gor, 1)  # hold until told
        os._exit(0)
    os.close(ww); os.close(gor)
    rep = os.read(rr, 4096).decode(); os.close(rr)
    kept, msg = rep.split("|", 1)
    print("uid %d kept %s refused: %s" % (uid, kept, msg))
    if int(kept) != expect:
        print("FAIL: uid %d kept %s connections, expected %d" % (uid, kept, expect)); sys.exit(1)
    holders.append((pid, gow))
t0 = time.time()
root = request()
print("root:", root.split("\r\n", 1)[0])
def other():
    return request()
pid, r = as_uid(54399, other)
other_reply = os.read(r, 65536).decode(); os.waitpid(pid, 0)
print("uid 54399:", other_reply.split("\r\n", 1)[0], other_reply.split("\r\n\r\n", 1)[-1][:100])
pid, r = as_uid(uids[0], other)
again = os.read(r, 65536).decode(); os.waitpid(pid, 0)
print("uid %d again:" % uids[0], again.split("\r\n", 1)[0], again.split("\r\n\r\n", 1)[-1])
for pid, gow in holders:
    os.write(gow, b"x"); os.waitpid(pid, 0)
if time.time() - t0 > 4:
    print("FAIL: too slow, the idle timeout may have freed slots"); sys.exit(1)
PY

# 1. One uid floods: it keeps 8, root and another uid are served, its 9th is refused.
start_daemon --socket-mode 0666
python3 "$tmp/flood.py" "$sock" 8 54321 >"$tmp/out" 2>&1 || fail "flood: $(cat "$tmp/out")"
cat "$tmp/out"
grep -q "^uid 54321 kept 8 refused: .*too many connections from uid 54321 (at most 8 at once per uid)" "$tmp/out" || fail "per-uid refusal: $(cat "$tmp/out")"
grep -q "^root: HTTP/1.1 200" "$tmp/out" || fail "root not served while one uid floods: $(cat "$tmp/out")"
grep -q "^uid 54399: HTTP/1.1 200" "$tmp/out" || fail "another uid not served: $(cat "$tmp/out")"
grep -q "^uid 54321 again: HTTP/1.1 503 .*at most 8 at once per uid" "$tmp/out" || fail "9th connection: $(cat "$tmp/out")"

# 2. Seven uids hold 8 each (56): the last 8 slots stay for root, an 8th uid is refused.
python3 "$tmp/flood.py" "$sock" 8 54321 54322 54323 54324 54325 54326 54327 >"$tmp/out" 2>&1 || fail "7 uids: $(cat "$tmp/out")"
grep -q "^root: HTTP/1.1 200" "$tmp/out" || fail "root not served with 56 slots taken: $(cat "$tmp/out")"
grep -q "^uid 54399: HTTP/1.1 503 .*kept for root" "$tmp/out" || fail "8th uid: $(cat "$tmp/out")"
kill -0 "$dpid" || fail "daemon died"
stop_daemon

# 3. The limit is configurable.
start_daemon --socket-mode 0666 --max-conns-per-uid 3
python3 "$tmp/flood.py" "$sock" 3 54321 >"$tmp/out" 2>&1 || fail "limit 3: $(cat "$tmp/out")"
grep -q "at most 3 at once per uid" "$tmp/out" || fail "limit 3 message: $(cat "$tmp/out")"
stop_daemon
"$ERGOND" --socket "$sock" --config "$tmp/conf" --max-conns-per-uid 0 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "expects an integer in \[1, 56\]" "$tmp/err" || fail "--max-conns-per-uid 0: $rc $(cat "$tmp/err")"

# 4. The socket: 0660, owned by the named group; its members may connect, others may not.
groupadd "$GROUP" || fail "groupadd"
gid=$(getent group "$GROUP" | cut -d: -f3)
start_daemon --socket-group "$GROUP"
[ "$(stat -c '%a %G' "$sock")" = "660 $GROUP" ] || fail "socket: $(stat -c '%a %G' "$sock")"
python3 - "$sock" "$gid" <<'PY' || fail "group access"
import os, socket, sys
sock, gid = sys.argv[1], int(sys.argv[2])
def try_as(uid, gid):
    pid = os.fork()
    if pid == 0:
        os.setgroups([]); os.setgid(gid); os.setuid(uid)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(sock)
        except PermissionError:
            os._exit(13)
        os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
assert try_as(54321, gid) == 0, "a member of the socket's group cannot connect"
assert try_as(54321, 54321) == 13, "a non-member can connect"
PY
stop_daemon
# 5. A group in the allow list also matches a supplementary group of the client
#    (SO_PEERGROUPS): `adduser alice ergon` is enough to change clocks.
printf 'allow * gid:%s\n' "$gid" >"$tmp/conf_group"
"$ERGOND" --socket "$sock" --config "$tmp/conf_group" --gpu sim:a100:gpt3-xl:2 \
  --state-dir "$tmp/state" --socket-mode 0666 2>"$tmp/dlog_group" &
dpid=$!
for _ in $(seq 100); do curl -s -o /dev/null --unix-socket "$sock" http://x/time && break; sleep 0.05; done
python3 - "$sock" "$gid" <<'PY' || fail "supplementary group write"
import os, socket, sys
sock, gid = sys.argv[1], int(sys.argv[2])
def lock_as(uid, primary, groups):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.setgroups(groups); os.setgid(primary); os.setuid(uid)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(sock)
        s.sendall(b"POST /gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=1200&max_clock_mhz=1200&block=true HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
        os.write(w, data.split(b"\r\n", 1)[0]); os._exit(0)
    os.close(w)
    line = os.read(r, 4096).decode(); os.close(r); os.waitpid(pid, 0)
    return line
member = lock_as(54323, 54323, [gid])
print("supplementary member:", member)
assert " 200" in member, member
outsider = lock_as(54324, 54324, [])
print("no group:", outsider)
assert " 403" in outsider, outsider
PY
stop_daemon

# Default: group 'ergon'; when it does not exist, ergond says so and the socket stays root's.
start_daemon
if getent group ergon >/dev/null; then
  [ "$(stat -c '%a %G' "$sock")" = "660 ergon" ] || fail "default socket: $(stat -c '%a %G' "$sock")"
else
  [ "$(stat -c '%a %g' "$sock")" = "660 0" ] || fail "fallback socket: $(stat -c '%a %g' "$sock")"
  grep -q "group 'ergon' does not exist: the socket stays in ergond's own group" "$tmp/dlog$n" || fail "no warning about the missing group"
fi
stop_daemon
"$ERGOND" --socket "$sock" --config "$tmp/conf" --socket-group nosuchgroup$$ 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "group 'nosuchgroup$$' does not exist" "$tmp/err" || fail "unknown group: $rc $(cat "$tmp/err")"
echo ok
