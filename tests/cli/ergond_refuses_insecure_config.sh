#!/usr/bin/env bash
# ergond_refuses_insecure_config.sh: a world-writable ergond.conf owned by a normal user, or one
# in a directory others can write, is refused at start-up with a clear message, as sshd's
# StrictModes does (issue 15 item 18); a root-owned 0644 one in a safe directory is accepted.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_BIN_DIR:?}"
ERGOND="$ERGON_BIN_DIR/tools/ergond/ergond"
command -v curl >/dev/null || skip_or_fail "no curl"
tmp=$(mktemp -d); chmod 755 "$tmp"
dpid=""
cleanup() { [ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -m 755 "$tmp/etc"
conf="$tmp/etc/ergond.conf"
printf 'allow * uid:54321\n' >"$conf"
run() {
  "$ERGOND" --socket "$tmp/s" --config "$conf" --gpu sim:a100:gpt3-xl:2 --state-dir "$tmp/state" \
    --socket-mode 0600 2>"$tmp/err" &
  dpid=$!
  for _ in $(seq 60); do
    kill -0 "$dpid" 2>/dev/null || { wait "$dpid"; rc=$?; dpid=""; return $rc; }
    curl -s -o /dev/null --unix-socket "$tmp/s" http://x/time && { kill "$dpid"; wait "$dpid"; dpid=""; return 0; }
    sleep 0.05
  done
  fail "ergond neither started nor exited"
}

chmod 666 "$conf"
[ "$(id -u)" = 0 ] && chown 54321:54321 "$conf"
run; rc=$?
[ $rc -eq 1 ] || fail "world-writable config: exit $rc ($(cat "$tmp/err"))"
grep -q "refusing config file $conf: $conf .*is writable by its group and everyone (mode 0666).*StrictModes.*chmod go-w $conf" "$tmp/err" || fail "message: $(cat "$tmp/err")"
[ "$(id -u)" = 0 ] && { grep -q "is owned by uid 54321, not by root" "$tmp/err" || fail "owner not named: $(cat "$tmp/err")"; }
if [ "$(id -u)" = 0 ]; then
  chmod 644 "$conf"
  run; rc=$?
  [ $rc -eq 1 ] && grep -q "is owned by uid 54321" "$tmp/err" || fail "config of another user: $rc $(cat "$tmp/err")"
  chown 0:0 "$conf"
fi
chmod 644 "$conf"; chmod 777 "$tmp/etc"
run; rc=$?
[ $rc -eq 1 ] && grep -q "directory $tmp/etc is writable by its group and everyone (mode 0777)" "$tmp/err" || fail "writable directory: $rc $(cat "$tmp/err")"
chmod 755 "$tmp/etc"
run || fail "a safe config was refused: $(cat "$tmp/err")"
echo ok
