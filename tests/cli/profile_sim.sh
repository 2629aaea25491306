#!/usr/bin/env bash
# profile_sim.sh: `ergon profile sim` writes a readable profile and refuses bad input.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?ERGON must name the ergon binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$ERGON" profile sim --gpu a100 --stages 4 --model gpt3-2.7b -o "$tmp/p.csv" 2>"$tmp/err" \
  || fail "profile sim failed: $(cat "$tmp/err")"
head -1 "$tmp/p.csv" | grep -qx 'stage,instruction,frequency,time,energy' || fail "bad header"
# 4 stages x 2 kinds x 38 clocks (1410..855 step 15)
rows=$(($(wc -l <"$tmp/p.csv") - 1))
[ "$rows" -eq 304 ] || fail "expected 304 rows, got $rows"
grep -q 'blocking power 83.64 W' "$tmp/err" || fail "no blocking power on stderr"
grep -q '^3,backward,855,' "$tmp/p.csv" || fail "no row for stage 3 backward at 855 MHz"
awk -F, 'NR>1 && ($4<=0 || $5<=0) {exit 1}' "$tmp/p.csv" || fail "non-positive time/energy"

"$ERGON" profile sim --info --gpu a40 | grep -q 'blocking power     70.38 W' || fail "--info"
"$ERGON" profile sim --help | grep -q -- '--gpu' || fail "--help"

"$ERGON" profile sim --gpu a100 --stages 4 --min-freq 900 -o "$tmp/q.csv" 2>/dev/null || fail "min-freq"
tail -1 "$tmp/q.csv" | grep -q ',900,' || fail "min-freq 900 not last row: $(tail -1 "$tmp/q.csv")"

"$ERGON" profile sim --gpu rtx9090 --stages 4 -o "$tmp/x.csv" 2>"$tmp/err"; [ $? -eq 1 ] || fail "unknown gpu exit"
grep -q rtx9090 "$tmp/err" || fail "unknown gpu not named"
"$ERGON" profile sim --gpu a100 --stages 99 -o "$tmp/x.csv" 2>/dev/null; [ $? -eq 1 ] || fail "too many stages"
"$ERGON" profile sim --gpu a100 -o "$tmp/x.csv" 2>/dev/null; [ $? -eq 2 ] || fail "missing --stages"
"$ERGON" profile sim --gpu a100 --stages x -o "$tmp/x.csv" 2>/dev/null; [ $? -eq 2 ] || fail "bad --stages"
"$ERGON" profile sim --gpu a100 --stages 2 --bogus 1 2>/dev/null; [ $? -eq 2 ] || fail "unknown option"
# Profiling mode on the simulated GPU: measured values close to the model's.
"$ERGON" profile run --gpu sim:a100:bert-large:4 --stage 3 --min-freq 1380 --iters 2 \
  --blocking-s 0.2 -o "$tmp/run.csv" 2>"$tmp/err" || fail "profile run: $(cat "$tmp/err")"
grep -q 'blocking power of stage 3: 8[34]\.' "$tmp/err" || fail "blocking power: $(cat "$tmp/err")"
[ "$(($(wc -l <"$tmp/run.csv") - 1))" -eq 6 ] || fail "profile run rows: $(cat "$tmp/run.csv")"
"$ERGON" profile sim --gpu a100 --model bert-large --stages 4 --min-freq 1380 -o "$tmp/ref.csv" 2>/dev/null
"$ERGON" profile run --gpu nvml -o "$tmp/x.csv" 2>/dev/null; [ $? -eq 2 ] || fail "profile run on nvml"
command -v python3 >/dev/null || skip_or_fail "python3 missing: the model comparison cannot run"
python3 - "$tmp/run.csv" "$tmp/ref.csv" <<'PY' || fail "measured profile differs from the model"
import csv, sys
run = {(r["stage"], r["instruction"], r["frequency"]): r for r in csv.DictReader(open(sys.argv[1]))}
ref = {(r["stage"], r["instruction"], r["frequency"]): r for r in csv.DictReader(open(sys.argv[2]))}
# Sleeping can only overshoot (a loaded machine adds milliseconds), and the simulated
# GPU stays busy meanwhile: time may grow, power (energy / time) must match.
for k, r in run.items():
    t, e = float(r["time"]), float(r["energy"])
    tr, er = float(ref[k]["time"]), float(ref[k]["energy"])
    assert 0.98 * tr <= t <= 10.0 * tr, (k, "time", t, tr)
    assert abs((e / t) / (er / tr) - 1) < 0.05, (k, "power", e / t, er / tr)
PY
echo ok
