#!/usr/bin/env bash
# profile_sparse.sh: `ergon profile sparse --replay` measures a sixth of a sweep, writes a full
# profile with a source column that every profile reader accepts; emulate/compare fidelity
# options (switch latency, transfer) and their usage errors.
set -u
: "${ERGON:?ERGON must name the ergon binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$ERGON" profile sim --gpu a100 --stages 4 --model gpt3-2.7b -o "$tmp/full.csv" 2>/dev/null || fail "sim"
"$ERGON" profile sparse --replay "$tmp/full.csv" -o "$tmp/pred.csv" --verbose >"$tmp/out" 2>"$tmp/err" \
  || fail "profile sparse: $(cat "$tmp/err")"
grep -q '^measured [0-9]* of 304 (stage, instruction, clock) points' "$tmp/out" || fail "summary: $(cat "$tmp/out")"
meas=$(sed -n 's/^measured \([0-9]*\) of.*/\1/p' "$tmp/out")
[ "$meas" -le 50 ] || fail "measured $meas > 304/6"
grep -q '^  stage 3 backward: .*1410' "$tmp/out" || fail "--verbose lists clocks: $(cat "$tmp/out")"
head -1 "$tmp/pred.csv" | grep -qx 'stage,instruction,frequency,time,energy,source' || fail "header"
[ "$(($(wc -l <"$tmp/pred.csv") - 1))" -eq 304 ] || fail "rows"
[ "$(grep -c ',measured$' "$tmp/pred.csv")" -eq "$meas" ] || fail "measured rows"
grep -q '^0,forward,1410,.*,measured$' "$tmp/pred.csv" || fail "max clock not measured"
# the predicted profile is a profile: the planner and the emulator take it
"$ERGON" plan perseus --profile "$tmp/pred.csv" --stages 4 --microbatches 6 --blocking-power 80 \
  --out "$tmp/front" --formats csv,json --quiet || fail "plan on the sparse profile"
"$ERGON" emulate --profile "$tmp/full.csv" --plan "$tmp/front/plan_00000.json" --blocking-power 80 \
  >/dev/null || fail "emulate"
# budget, check
"$ERGON" profile sparse --replay "$tmp/full.csv" -o "$tmp/p2.csv" --budget 32 | grep -q '^measured 32 of 304' \
  || fail "--budget 32"
"$ERGON" profile sparse --replay "$tmp/full.csv" -o "$tmp/p3.csv" --check 4 --blocking-power 80 \
  --unit-time 0.001 >"$tmp/out" || fail "--check"
[ "$(grep -c '^check M=4 ' "$tmp/out")" -eq 3 ] || fail "--check lines: $(cat "$tmp/out")"
# under noise (--time-noise >= 0.005): fitted, at most a quarter measured, the points it would
# measure again listed (deterministic +-1 % jitter on every time and energy)
awk -F, 'NR == 1 { print; next } { j = ((NR * 7919) % 21 - 10) / 1000; printf "%s,%s,%s,%.9g,%.9g\n", $1, $2, $3, $4 * (1 + j), $5 * (1 - j) }' \
  "$tmp/full.csv" >"$tmp/noisy.csv"
"$ERGON" profile sparse --replay "$tmp/noisy.csv" -o "$tmp/pn.csv" --time-noise 0.01 >"$tmp/out" \
  || fail "noisy replay"
meas=$(sed -n 's/^measured \([0-9]*\) of.*/\1/p' "$tmp/out")
[ "$meas" -le 76 ] && [ "$meas" -gt 50 ] || fail "under noise measured $meas (want 51..76 of 304)"
grep -q '^noise 1.00%: fitted; [0-9]* measured points depart from the fit' "$tmp/out" \
  || fail "noise line: $(cat "$tmp/out")"
[ "$(($(wc -l <"$tmp/pn.csv") - 1))" -eq 304 ] || fail "noisy rows"
# --time-noise auto: the noise estimated from the measurements. The +-1 % jitter above is linear
# in the row number (7919 = 2 mod 21), which the estimate's double differences cancel; here a
# quadratic-residue jitter, uniform over +-1.75 % (standard deviation 1.04 %), on a time and
# independently on an energy. Noise-free: below 0.5 %, a sixth measured.
"$ERGON" profile sparse --replay "$tmp/full.csv" -o "$tmp/pa.csv" --time-noise auto >"$tmp/out" \
  || fail "auto replay"
grep -q '^noise 0\.[0-4][0-9]% (estimated from [0-9]* points): below 0.50%' "$tmp/out" \
  || fail "noise-free estimate: $(cat "$tmp/out")"
meas=$(sed -n 's/^measured \([0-9]*\) of.*/\1/p' "$tmp/out")
[ "$meas" -le 50 ] || fail "noise-free, estimated: measured $meas > 304/6"
awk -F, 'NR == 1 { print; next } { j = ((NR * NR * 7919 + NR * 13) % 2003 / 2003 - 0.5) * 0.035
  k = ((NR * NR * 104729 + NR * 7) % 1999 / 1999 - 0.5) * 0.035
  printf "%s,%s,%s,%.9g,%.9g\n", $1, $2, $3, $4 * (1 + j), $5 * (1 + k) }' \
  "$tmp/full.csv" >"$tmp/noisy1.csv"
"$ERGON" profile sparse --replay "$tmp/noisy1.csv" -o "$tmp/pa.csv" --time-noise auto >"$tmp/out" \
  || fail "auto replay, noisy"
est=$(sed -n 's/^noise \([0-9.]*\)% (estimated from [0-9]* points)$/\1/p' "$tmp/out")
awk -v e="${est:-0}" 'BEGIN { exit !(e >= 1.04 / 1.5 && e <= 1.04 * 1.5) }' \
  || fail "estimate of 1.04 % noise: $(cat "$tmp/out")"
grep -q "^noise $est%: fitted;" "$tmp/out" || fail "auto: not fitted: $(cat "$tmp/out")"
"$ERGON" profile sparse --replay "$tmp/full.csv" -o "$tmp/x.csv" --time-noise autox 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "or 'auto', got 'autox'" "$tmp/err" || fail "--time-noise autox: $(cat "$tmp/err")"
"$ERGON" profile sparse --replay "$tmp/full.csv" -o "$tmp/x.csv" --time-noise 1.5 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "got '1.5'" "$tmp/err" || fail "--time-noise 1.5: $(cat "$tmp/err")"
"$ERGON" profile sparse --help | grep -q -- '--time-noise auto' || fail "--help: --time-noise auto"
# usage errors
"$ERGON" profile sparse -o "$tmp/x.csv" 2>/dev/null; [ $? -eq 2 ] || fail "missing --replay"
"$ERGON" profile sparse --replay "$tmp/full.csv" 2>/dev/null; [ $? -eq 2 ] || fail "missing -o"
"$ERGON" profile sparse --replay "$tmp/full.csv" -o "$tmp/x.csv" --budget 0 2>/dev/null; [ $? -eq 2 ] || fail "budget 0"
"$ERGON" profile sparse --replay "$tmp/full.csv" -o "$tmp/x.csv" --budget 3 2>"$tmp/err"; [ $? -ne 0 ] || fail "budget below one per curve"
"$ERGON" profile sparse --replay "$tmp/full.csv" -o "$tmp/x.csv" --check 4 2>/dev/null; [ $? -eq 2 ] || fail "--check without power"
"$ERGON" profile sparse --replay "$tmp/nope.csv" -o "$tmp/x.csv" 2>"$tmp/err"; [ $? -eq 1 ] || fail "missing file"
grep -q nope.csv "$tmp/err" || fail "missing file not named"
"$ERGON" profile sparse --help | grep -q -- '--budget' || fail "--help"

# emulate: switch latency and transfer
"$ERGON" plan perseus --profile "$tmp/full.csv" --stages 4 --microbatches 6 --blocking-power 80 \
  --out "$tmp/f2" --formats json --quiet || fail "plan"
last=$(ls "$tmp/f2" | grep plan_ | sort | tail -1)
base=$("$ERGON" emulate --profile "$tmp/full.csv" --plan "$tmp/f2/$last" --blocking-power 80 --json)
sw=$("$ERGON" emulate --profile "$tmp/full.csv" --plan "$tmp/f2/$last" --blocking-power 80 --json --switch-latency default)
python3 - "$base" "$sw" <<'PY' || fail "switch latency not in the time: $base / $sw"
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert b["switch_latency_s"] == 0.01 and b["num_switches"] > 0
assert b["time_s"] > a["time_s"] and b["energy_j"] > a["energy_j"]
PY
"$ERGON" emulate --profile "$tmp/full.csv" --plan "$tmp/f2/$last" --blocking-power 80 --transfer-time 0.002 \
  | grep -q 'transfer 0.002000 s per cross-rank edge' || fail "transfer line"
"$ERGON" emulate --profile "$tmp/full.csv" --plan "$tmp/f2/$last" --blocking-power 80 --transfer-bytes 1e6 \
  2>/dev/null; [ $? -eq 2 ] || fail "bytes without bandwidth"
"$ERGON" emulate --profile "$tmp/full.csv" --plan "$tmp/f2/$last" --blocking-power 80 --switch-latency -1 \
  2>/dev/null; [ $? -eq 2 ] || fail "negative latency"
"$ERGON" compare --profile "$tmp/full.csv" --microbatches 6 --blocking-power 80 --no-frontier \
  --switch-latency 0.001 --format csv | head -1 | grep -q 'true_saving_pct' || fail "compare columns"
"$ERGON" plan perseus --profile "$tmp/full.csv" --stages 4 --microbatches 6 --blocking-power 80 \
  --out "$tmp/f3" --formats csv --switch-latency 0.01 | grep -q 'true time with switch latency 0.01 s' \
  || fail "plan perseus post-check"
echo ok
