#!/usr/bin/env bash
# ergond_peer_in_other_pid_namespace.sh: ergond in its own PID namespace (a container without
# the host's PID namespace) and a client outside it: the kernel reports the client's pid as 0
# (SO_PEERCRED), so ergond could never tell when it exits. Setting a clock is refused with a
# message that says why and what to do; reading and resetting work; nothing reaches the GPU.
# Needs root (unshare --pid); skips (77) with a message where the namespace cannot be made.
set -u
: "${ERGON:?}" "${ERGON_BIN_DIR:?}"
ERGOND="$ERGON_BIN_DIR/tools/ergond/ergond"
need() { # a missing prerequisite: skip with a message, fail under CI=true
  if [ "${CI:-}" = true ]; then echo "FAIL: $*"; exit 1; fi
  echo "SKIP: $*"; exit 77
}
[ -n "${ERGON_FAKE_NVML:-}" ] && [ -r "$ERGON_FAKE_NVML" ] || need "fake NVML not built"
command -v unshare >/dev/null || need "no unshare (Debian package util-linux)"
command -v curl >/dev/null || need "no curl"
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: a PID namespace cannot be made: not root (needs CAP_SYS_ADMIN)"
  exit 77
fi
if ! out=$(unshare --pid --fork --mount-proc true 2>&1); then
  echo "SKIP: a PID namespace cannot be made here: unshare: $out"
  exit 77
fi

tmp=$(mktemp -d); chmod 755 "$tmp"
dpid=""
cleanup() { # unshare ignores SIGTERM: stop ergond (its child), and unshare exits with it
  if [ -n "$dpid" ]; then
    for c in $(pgrep -P "$dpid"); do kill "$c"; done
    kill -0 "$dpid" 2>/dev/null && { sleep 2; kill -KILL "$dpid" 2>/dev/null; }
    wait "$dpid" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- daemon log"; cat "$tmp/dlog"; echo "--- nvml log"; cat "$tmp/nvml.log"; exit 1; }

printf 'allow * uid:0\n' >"$tmp/conf"
sock="$tmp/ergond.sock"
export FAKE_NVML_LOG="$tmp/nvml.log"
# ergond is pid 1 of a new PID namespace (unshare --fork execs it as the namespace's first
# process; if unshare is killed, --kill-child stops it).
unshare --pid --fork --mount-proc --kill-child=SIGTERM \
  "$ERGOND" --socket "$sock" --config "$tmp/conf" --gpu "nvml:$ERGON_FAKE_NVML" \
  --state-dir "$tmp/state" 2>"$tmp/dlog" &
dpid=$!
for _ in $(seq 200); do curl -s -o /dev/null --unix-socket "$sock" http://x/time && break; sleep 0.05; done
[ -S "$sock" ] || fail "no socket"

# Reading works from outside the namespace.
"$ERGON" gpu energy --gpu "daemon:$sock" >/dev/null 2>"$tmp/err" || fail "read refused: $(cat "$tmp/err")"
# Setting a clock is refused, with the reason and the remedy.
"$ERGON" gpu lock --gpu "daemon:$sock" --clock 1305 2>"$tmp/err"; rc=$?
[ $rc -ne 0 ] || fail "a client whose pid ergond cannot see set a clock (exit 0): its lease could never expire"
grep -q "pid 0" "$tmp/err" && grep -q "PID namespace" "$tmp/err" || fail "refusal does not say why: $(cat "$tmp/err")"
grep -q "SetGpuLockedClocks" "$tmp/nvml.log" 2>/dev/null && fail "the refused request reached NVML"
grep -q "pid 0" "$tmp/dlog" || fail "the refusal is not in ergond's log"
# The same over curl: HTTP 403 with the message in the JSON body.
code=$(curl -s -o "$tmp/body" -w '%{http_code}' -X POST --unix-socket "$sock" \
  "http://x/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true")
[ "$code" = 403 ] && grep -q "PID namespace" "$tmp/body" || fail "set_power_limit: HTTP $code $(cat "$tmp/body")"
grep -q "SetPowerManagementLimit 0 200000" "$tmp/nvml.log" 2>/dev/null && fail "the refused power limit reached NVML"
# A reset leaves the GPU at its defaults and needs no lease: allowed.
for ep in reset_locked_clocks reset_power_limit; do
  code=$(curl -s -o "$tmp/body" -w '%{http_code}' -X POST --unix-socket "$sock" "http://x/gpu/$ep?gpu_ids=0&block=true")
  [ "$code" = 200 ] || fail "$ep: HTTP $code $(cat "$tmp/body")"
done
echo "ok: a client in another PID namespace may read and reset, not set"
