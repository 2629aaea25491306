#!/usr/bin/env bash
# gpu_amdsmi.sh: `ergon gpu` and ergond on the fake libamd_smi.so: list, lock, reset, permission,
# the MI250 pair, `energy --check` (healthy and stalled counters), ergond's lease on SIGKILL and
# its one warning for a stalled counter.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}" "${ERGON_BIN_DIR:?}"
ERGOND="$ERGON_BIN_DIR/tools/ergond/ergond"
[ -n "${ERGON_FAKE_AMDSMI:-}" ] && [ -r "$ERGON_FAKE_AMDSMI" ] || skip_or_fail "fake amdsmi not built"
tmp=$(mktemp -d); chmod 755 "$tmp"
dpid=""; hpid=""
cleanup() {
  [ -n "$hpid" ] && kill -KILL "$hpid" 2>/dev/null && wait "$hpid" 2>/dev/null
  [ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/dlog "$tmp"/amd.log; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
G="amdsmi:$ERGON_FAKE_AMDSMI"
export FAKE_AMDSMI_LOG="$tmp/amd.log"

"$ERGON" gpu list --gpu "$G" >"$tmp/out" || fail "list"
[ "$(wc -l <"$tmp/out")" -eq 2 ] || fail "list: $(cat "$tmp/out")"
grep -q "AMD Instinct MI210.*energy: counter (gpu)" "$tmp/out" || fail "list: $(cat "$tmp/out")"
[ "$("$ERGON" gpu clocks --gpu "$G" | head -1)" = 1700 ] || fail "clocks"
"$ERGON" gpu lock --gpu "$G" --device 1 --clock 1210 2>"$tmp/err"; [ $? -eq 1 ] || fail "unsupported clock exit"
grep -q "does not support SM clock 1210 MHz" "$tmp/err" || fail "unsupported clock: $(cat "$tmp/err")"
"$ERGON" gpu lock --gpu "$G" --device 1 --clock 1200 || fail "lock"
grep -qx "amdsmi_set_gpu_clk_range 1 1199 1200 0 = 0" "$tmp/amd.log" || fail "lock call"
FAKE_AMDSMI_DENY=1 "$ERGON" gpu lock --gpu "$G" --clock 1200 2>"$tmp/err"; [ $? -eq 1 ] || fail "denied exit"
grep -q "Permission Denied" "$tmp/err" && grep -q ergond "$tmp/err" || fail "denied: $(cat "$tmp/err")"
"$ERGON" gpu reset --gpu "$G" --device 1 || fail "reset"
grep -qx "amdsmi_set_gpu_clk_range 1 500 1700 0 = 0" "$tmp/amd.log" || fail "reset call"
grep -qx "amdsmi_set_power_cap 1 300000000 = 0" "$tmp/amd.log" || fail "power cap not restored"
# auto picks amdsmi when NVML does not open.
ERGON_NVML_LIBRARY=/nonexistent.so ERGON_AMDSMI_LIBRARY="$ERGON_FAKE_AMDSMI" "$ERGON" gpu list --gpu auto | grep -q MI210 || fail "auto"
ERGON_NVML_LIBRARY=/nonexistent.so ERGON_AMDSMI_LIBRARY=/nonexistent.so "$ERGON" gpu list --gpu auto 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "NVML unavailable" "$tmp/err" && grep -q "amdsmi unavailable" "$tmp/err" || fail "auto without libraries: $(cat "$tmp/err")"

# MI250X: the odd die has no reading of its own.
FAKE_AMDSMI_QUIRK=mi250 "$ERGON" gpu list --gpu "$G" >"$tmp/out" || fail "mi250 list"
grep -q "^0.*MI250X.*600000 mW.*energy: counter (package)" "$tmp/out" || fail "mi250 die 0: $(cat "$tmp/out")"
grep -q "^1.*MI250X	-	-	energy: none (counted on GPU 0)" "$tmp/out" || fail "mi250 die 1: $(cat "$tmp/out")"

# energy --check: a healthy counter agrees, a stalled one fails with the verdict.
"$ERGON" gpu energy --check --seconds 0.6 --gpu "$G" >"$tmp/out" 2>/dev/null || fail "check healthy: $(cat "$tmp/out")"
grep -qx "verdict	agree" "$tmp/out" || fail "check verdict: $(cat "$tmp/out")"
grep -q "^counter.*resolution 0.015259 mJ, scope gpu" "$tmp/out" || fail "check counter line: $(cat "$tmp/out")"
FAKE_AMDSMI_QUIRK=stall FAKE_AMDSMI_QUIRK_AFTER_S=0.1 "$ERGON" gpu energy --check --seconds 1.5 --gpu "$G" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] || fail "check stalled exit: $(cat "$tmp/out")"
grep -qx "verdict	counter stalled" "$tmp/out" || fail "check stalled verdict: $(cat "$tmp/out")"
"$ERGON" gpu list --check --gpu "$G" 2>/dev/null; [ $? -eq 2 ] || fail "--check outside energy"

# ergond on amdsmi: the lease resets the clock of a SIGKILLed holder; a stalled counter is
# reported once and the dump of get_cumulative_energy names the source.
[ "$(id -u)" = 0 ] || skip_or_fail "ergond needs root"
command -v curl >/dev/null || skip_or_fail "no curl"
printf '# test allow list\nallow * uid:0\n' >"$tmp/conf"
sock="$tmp/ergond.sock"
: >"$tmp/amd.log"
FAKE_AMDSMI_QUIRK=stall FAKE_AMDSMI_QUIRK_AFTER_S=0.1 "$ERGOND" --socket "$sock" --config "$tmp/conf" --gpu "$G" \
  --state-dir "$tmp/state" --socket-mode 0600 2>"$tmp/dlog" &
dpid=$!
for _ in $(seq 100); do curl -s -o /dev/null --unix-socket "$sock" http://x/time && break; sleep 0.05; done
[ -S "$sock" ] || fail "no socket"
: >"$tmp/amd.log" # after the start-up restore
wait_log() { for _ in $(seq 100); do grep -q "$1" "$tmp/amd.log" 2>/dev/null && return 0; sleep 0.05; done; return 1; }
"$ERGON" gpu lock --gpu "daemon:$sock" --clock 1300 --hold >"$tmp/hold.out" 2>&1 &
hpid=$!
wait_log "amdsmi_set_gpu_clk_range 0 1299 1300 0 = 0" || fail "hold: no lock"
sleep 0.2
grep -q "amdsmi_set_gpu_clk_range 0 500 1700" "$tmp/amd.log" && fail "reset while the holder is alive"
kill -KILL "$hpid"; wait "$hpid" 2>/dev/null; killed=$hpid; hpid=""
wait_log "amdsmi_set_gpu_clk_range 0 500 1700 0 = 0" || fail "no reset after SIGKILL"
grep -q "pid $killed exited: GPU 0 restored" "$tmp/dlog" || fail "lease log line for pid $killed"
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
  curl -s --unix-socket "$sock" "http://x/gpu/get_cumulative_energy?gpu_ids=0" >"$tmp/e.json" || fail "energy request"
  sleep 0.1
done
grep -q '"energy_source": "integrated", "energy_scope": "gpu"' "$tmp/e.json" || fail "energy source: $(cat "$tmp/e.json")"
[ "$(grep -c "energy counter not trusted: it stalled" "$tmp/dlog")" -eq 1 ] || fail "stall warning not logged once"
"$ERGON" gpu list --gpu "daemon:$sock" | grep -q "energy: integrated (gpu)" || fail "client side source via ergond"
echo ok
