#!/usr/bin/env bash
# `ergon emulate --power-trace`: on a published profile (GPT-3 175B, A100, 8 stages x 16
# microbatches), the 1 %-slowdown plan's power trace covers the iteration without gaps, each row's
# job power is the sum of its GPUs' and of its compute and blocking parts, the trace's energy is
# the emulator's energy, and the JSON's power fields agree with the trace (average, peak,
# trough; the swing within peak - trough). A non-positive window is a usage error. `ergon show
# power` draws the trace with the same average, peak and trough in its title, and the plan
# `choose --out` wrote carries them ("power"); frontier-info.csv has all-max clocks' power.
set -u
: "${ERGON:?}"
source "$(dirname "$0")/../lib/skip_lib.bash"
# fontconfig keeps its caches for the process (show power draws text): not our leak
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan-fontconfig.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
data=${ERGON_TEST_DATA:?}/published/perseus-sosp24/stage_profile
need_data "$data"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
prof=$data/gpt3-175b+a100_sxm_bf16.csv
"$ERGON" plan perseus --profile "$prof" --gpu A100 --stages 8 --microbatches 16 \
  --out "$tmp/fr" >/dev/null || fail "plan perseus"
"$ERGON" choose --frontier "$tmp/fr" --slowdown 1.01 --out "$tmp/p.json" >/dev/null || fail "choose"
"$ERGON" emulate --profile "$prof" --plan "$tmp/p.json" --gpu A100 --json --power-window 0.5 \
  --power-trace "$tmp/trace.csv" >"$tmp/em.json" || fail "emulate --power-trace"
head -1 "$tmp/trace.csv" | grep -qx 'start_s,end_s,total_w,compute_w,blocking_w,gpu0_w,gpu1_w,gpu2_w,gpu3_w,gpu4_w,gpu5_w,gpu6_w,gpu7_w' \
  || fail "trace header: $(head -1 "$tmp/trace.csv")"
read -r T E avg peak trough swing ramp < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); p = d["power"]
print(d["time_s"], d["energy_j"], p["avg_w"], p["peak_w"], p["trough_w"], p["swing_w"], p["ramp_w_per_s"])' "$tmp/em.json") \
  || fail "emulate --json has no power fields: $(cat "$tmp/em.json")"
awk -F, -v T="$T" -v E="$E" -v avg="$avg" -v peak="$peak" -v trough="$trough" -v swing="$swing" '
  function abs(x) { return x < 0 ? -x : x }
  NR == 1 { next }
  {
    if (NR == 2 && $1 != 0) { print "the trace starts at " $1; bad = 1 }
    if (NR > 2 && abs($1 - last) > 1e-6) { print "gap before row " NR ": " last " -> " $1; bad = 1 }
    last = $2; s = 0
    for (i = 6; i <= NF; i++) s += $i
    if (abs(s - $3) > 1e-3 || abs($4 + $5 - $3) > 1e-3) { print "row " NR ": parts do not add up"; bad = 1 }
    e += $3 * ($2 - $1)
    if (NR == 2 || $3 > hi) hi = $3
    if (NR == 2 || $3 < lo) lo = $3
    rows++
  }
  END {
    if (abs(last - T) > 1e-6) { print "the trace ends at " last ", the iteration at " T; bad = 1 }
    if (abs(e - E) > 1e-6 * E) { print "trace energy " e " J, emulated " E " J"; bad = 1 }
    if (abs(avg * T - E) > 1e-6 * E) { print "average " avg " W x " T " s != " E " J"; bad = 1 }
    if (abs(hi - peak) > 1e-3 || abs(lo - trough) > 1e-3) { print "peak/trough " hi "/" lo " vs " peak "/" trough; bad = 1 }
    if (!(swing > 0 && swing <= peak - trough + 1e-6)) { print "swing " swing " outside (0, peak - trough]"; bad = 1 }
    printf "ok: %d steps over %.4f s, %.1f J; average %.1f W, peak %.1f W, trough %.1f W, swing over 0.5 s %.1f W\n", rows, T, e, avg, peak, trough, swing
    exit bad
  }' "$tmp/trace.csv" || fail "the trace disagrees with the emulation"
out=$("$ERGON" emulate --profile "$prof" --plan "$tmp/p.json" --gpu A100 --power-window 0 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--power-window" <<<"$out" || fail "--power-window 0: exit $rc: $out"
out=$("$ERGON" emulate --profile "$prof" --plan "$tmp/p.json" --gpu A100 --power-trace /nonexistent/x.csv 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -q "/nonexistent/x.csv" <<<"$out" || fail "unwritable trace: exit $rc: $out"
echo "ok: usage and write errors"
# the plan choose wrote carries the same power ("power" in the plan JSON)
python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))["power"]; a, k, t = map(float, sys.argv[2:5])
sys.exit(0 if abs(p["avg_w"] - a) < 1e-6 * a and abs(p["peak_w"] - k) < 1e-6 * k and abs(p["trough_w"] - t) < 1e-6 * t else 1)' \
  "$tmp/p.json" "$avg" "$peak" "$trough" || fail "the chosen plan's power: $(grep -o '"power"[^}]*}' "$tmp/p.json")"
echo "ok: the plan JSON's power agrees"
# frontier-info.csv: all-max clocks' power, the same as ergon emulate --power of all-max clocks
# (a per-GPU limit no instruction reaches runs every one at its highest clock)
"$ERGON" plan power-limit --profile "$prof" --gpu A100 --stages 8 --microbatches 16 --limit 100000 \
  --quiet --out "$tmp/allmax.json" >/dev/null || fail "plan power-limit"
"$ERGON" emulate --profile "$prof" --plan "$tmp/allmax.json" --gpu A100 --power --json >"$tmp/am.json" ||
  fail "emulate all-max"
python3 - "$tmp/fr/frontier-info.csv" "$tmp/am.json" <<'PYEOF' || fail "frontier-info.csv's power rows"
import csv, json, sys
info = {r["key"]: r["value"] for r in csv.DictReader(open(sys.argv[1]))}
em = json.load(open(sys.argv[2]))
for k in ("avg", "peak", "trough"):
    a, b = float(info[f"all_max_{k}_power_w"]), em["power"][f"{k}_w"]
    if abs(a - b) > 1e-6 * b:
        print(f"FAIL: all_max_{k}_power_w {a} vs emulate {b}"); sys.exit(1)
a = float(info["all_max_energy_j"]) / float(info["all_max_time_s"])
if abs(a - float(info["all_max_avg_power_w"])) > 1e-6 * a:
    print("FAIL: the average is not all-max energy over time"); sys.exit(1)
print(f"ok: frontier-info.csv: all-max {float(info['all_max_avg_power_w']):.1f} W on average, peak {float(info['all_max_peak_power_w']):.1f} W")
PYEOF
# the picture: ergon show power, its title the trace's average, peak and trough
"$ERGON" show power --profile "$prof" --plan "$tmp/p.json" --gpu A100 -o "$tmp/power.pdf" >/dev/null ||
  fail "show power"
if command -v pdftotext >/dev/null; then
  want=$(awk -v a="$avg" -v p="$peak" -v t="$trough" 'BEGIN { printf "average %.0f W, peak %.0f W, trough %.0f W", a, p, t }')
  pdftotext "$tmp/power.pdf" - | grep -qF "Power over one iteration: $want" ||
    fail "show power's title is not '$want': $(pdftotext "$tmp/power.pdf" - | head -3)"
  pdftotext "$tmp/power.pdf" - | grep -q "computing GPUs" || fail "show power has no legend"
  echo "ok: show power: $want"
else
  note_or_fail "pdftotext missing (Debian poppler-utils): the picture's text is not checked"
fi
"$ERGON" show power --profile "$prof" --plan "$tmp/p.json" --gpu A100 -o "$tmp/power.txt" >/dev/null 2>"$tmp/err"
[ $? -ne 0 ] && grep -q "picture format" "$tmp/err" || fail "show power -o power.txt: $(cat "$tmp/err")"
