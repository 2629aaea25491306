#!/usr/bin/env bash
# bench/gpu_inventory.py (the read-only hardware inventory for docs/runtime.md) on the fake NVML:
# every device listed with its clocks, power and an energy-counter check, and not one
# state-changing NVML call made (the fake logs every setter); clear errors without NVML/devices.
# Skip by design: the ASan build (python3 cannot load its instrumented fake NVML).
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_SRC:?}"
if [ -n "${ERGON_SANITIZED:-}" ]; then
  skip_by_design "the sanitizer build's fake NVML cannot be loaded into an uninstrumented python3 (the release build runs this)"
fi
[ -n "${ERGON_FAKE_NVML:-}" ] && [ -r "$ERGON_FAKE_NVML" ] || skip_or_fail "fake NVML not built"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
PY=/usr/bin/python3
INV="$ERGON_SRC/bench/gpu_inventory.py"
FAKE_NVML_DEVICES=3 FAKE_NVML_LOG="$tmp/log" ERGON_NVML_LIBRARY="$ERGON_FAKE_NVML" \
  "$PY" "$INV" --seconds 0.3 --json "$tmp/inv.json" >"$tmp/out" 2>"$tmp/err" || fail "inventory: $(cat "$tmp/err")"
"$PY" - "$tmp/inv.json" <<'PYEOF' || fail "inventory content: $(cat "$tmp/out")"
import json, sys
d = json.load(open(sys.argv[1]))
devs = d["devices"]
assert len(devs) == 3, len(devs)
for x in devs:
    assert x["name"] == "Fake NVIDIA A100-SXM4-40GB", x["name"]
    assert x["sm_clocks_mhz"] == {"max": 1410, "min": 210, "count": 81, "steps_mhz": [15]}, x["sm_clocks_mhz"]
    assert x["memory_clocks_mhz"] == [1215]
    assert x["power_limit_w"] == 400.0 and x["power_w"] > 0
    e = x["energy_check"]
    # the fake's counter integrates its own power: the two agree closely
    assert e["counter_j"] > 0 and abs(e["relative_difference"]) < 0.05, e
    lat = x["median_latency_us_of_200_calls"]
    assert isinstance(lat["energy counter read"], float), lat
    assert lat["clock query (nvmlDeviceGetClockInfo SM)"].startswith("not provided"), lat
PYEOF
# read-only: the fake logs every state-changing call; only init and shutdown may appear
bad=$(grep -v -E '^(nvmlInit_v2|nvmlShutdown) = 0$' "$tmp/log" || true)
[ -z "$bad" ] || fail "state-changing NVML calls made: $bad"
grep -q '^nvmlInit_v2 = 0$' "$tmp/log" || fail "the fake was not used: $(cat "$tmp/log")"
# errors: no library, no device, bad option
"$PY" "$INV" --library /nonexistent/libnvidia-ml.so.1 >/dev/null 2>"$tmp/err"; [ $? -eq 1 ] || fail "no library exit"
grep -q "cannot load NVML /nonexistent/libnvidia-ml.so.1" "$tmp/err" || fail "no library message: $(cat "$tmp/err")"
FAKE_NVML_DEVICES=0 "$PY" "$INV" --library "$ERGON_FAKE_NVML" >/dev/null 2>"$tmp/err"; [ $? -eq 1 ] || fail "no device exit"
grep -q "no device" "$tmp/err" || fail "no device message: $(cat "$tmp/err")"
"$PY" "$INV" --seconds -1 >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad --seconds exit"
echo "ok: gpu_inventory lists 3 fake devices read-only"
