#!/usr/bin/env bash
# gpu_cmd.sh: `ergon gpu` on the simulated GPU and the fake NVML: reads, locks, clear errors.
set -u
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$ERGON" gpu list --gpu sim:a40:gpt3-xl:3 >"$tmp/out" || fail "sim list"
[ "$(wc -l <"$tmp/out")" -eq 3 ] || fail "sim list: $(cat "$tmp/out")"
grep -q "NVIDIA A40 (simulated)" "$tmp/out" || fail "sim name"
[ "$("$ERGON" gpu clocks --gpu sim:a40 | head -1)" = 1740 ] || fail "sim clocks"
"$ERGON" gpu lock --gpu sim:a40 --clock 1741 2>"$tmp/err"; [ $? -eq 1 ] || fail "unsupported clock exit"
grep -q "does not support SM clock 1741 MHz" "$tmp/err" || fail "unsupported clock message"
"$ERGON" gpu lock --gpu sim:a40 --device 5 --clock 1740 2>"$tmp/err"; [ $? -eq 1 ] || fail "bad device"
grep -q "GPU 5 does not exist" "$tmp/err" || fail "bad device message"
"$ERGON" gpu lock --gpu sim:a40 2>/dev/null; [ $? -eq 2 ] || fail "lock without --clock"
"$ERGON" gpu frobnicate 2>/dev/null; [ $? -eq 2 ] || fail "unknown subcommand"
"$ERGON" gpu list --gpu cuda 2>/dev/null; [ $? -eq 1 ] || fail "unknown back-end"
"$ERGON" gpu --help | grep -q "daemon:SOCKET" || fail "--help"

# NVML without a library: a clear message, exit 1.
ERGON_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "$ERGON" gpu list 2>"$tmp/err"; [ $? -eq 1 ] || fail "no NVML exit"
grep -q "NVML unavailable" "$tmp/err" || fail "no NVML message: $(cat "$tmp/err")"

if [ -n "${ERGON_FAKE_NVML:-}" ] && [ -r "$ERGON_FAKE_NVML" ]; then
  export ERGON_NVML_LIBRARY="$ERGON_FAKE_NVML" FAKE_NVML_LOG="$tmp/log"
  "$ERGON" gpu list | grep -q "Fake NVIDIA A100" || fail "fake list"
  "$ERGON" gpu lock --device 1 --clock 1200 || fail "fake lock"
  grep -qx "nvmlDeviceSetGpuLockedClocks 1 1200 1200 = 0" "$tmp/log" || fail "fake log: $(cat "$tmp/log")"
  FAKE_NVML_DENY=1 "$ERGON" gpu lock --clock 1200 2>"$tmp/err"; [ $? -eq 1 ] || fail "denied exit"
  grep -q "Insufficient Permissions" "$tmp/err" && grep -q "ergond" "$tmp/err" || fail "denied message: $(cat "$tmp/err")"
  "$ERGON" gpu reset --device 1 || fail "fake reset"
  grep -q "nvmlDeviceResetGpuLockedClocks 1 = 0" "$tmp/log" || fail "no reset in log"
  grep -q "nvmlDeviceSetPowerManagementLimit 1 400000 = 0" "$tmp/log" || fail "power limit not restored"
fi
echo ok
