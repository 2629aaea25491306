#!/usr/bin/env bash
# plan_zeus_format.sh: `ergon plan perseus --formats zeus-py` writes Zeus PFO's
# freqs_pipeline_%05d.py (per stage a list of ("forward"|"backward", clock) tuples, the
# layout of Zeus's run_optimization.py); ergon's readers take it like the kronos literal
# (same emulated plan); perseus-py and zeus-py exclude each other. docs/zeus-protocol.md §8.
set -euo pipefail
E=${ERGON:?}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
{
  echo "stage,instruction,frequency,time,energy"
  for s in 0 1; do
    for i in 0 1 2 3 4; do
      f=$((1410 - 15 * i))
      awk -v s=$s -v i=$i -v f=$f 'BEGIN{t=0.0105+0.001*i+0.001*s; e=3.0*exp(-0.2*i)+1.0+0.05*i;
        printf "%d,forward,%d,%.6f,%.6f\n", s, f, t, e;
        printf "%d,backward,%d,%.6f,%.6f\n", s, f, 2*t, 2*e}'
    done
  done
} > "$T/p.csv"
"$E" plan perseus --profile "$T/p.csv" --stages 2 --microbatches 2 --blocking-power 10 \
  --out "$T/k" --formats csv,perseus-py --quiet
"$E" plan perseus --profile "$T/p.csv" --stages 2 --microbatches 2 --blocking-power 10 \
  --out "$T/z" --formats zeus-py --quiet
n=$(ls "$T/z" | grep -c '^freqs_pipeline_[0-9]\{5\}\.py$')
[ "$n" -ge 2 ] || fail "zeus-py wrote $n plan files"
[ "$n" = "$(ls "$T/k" | grep -c '^freqs_pipeline_')" ] || fail "plan counts differ"
z="$T/z/freqs_pipeline_00000.py"
# Zeus's layout: "[", one repr'd list of tuples per stage with a trailing comma, "]", comments.
sed -n 1p "$z" | grep -qx '\[' || fail "first line: $(sed -n 1p "$z")"
sed -n 2p "$z" | grep -Eqx "\[\('forward', [0-9]+\), \('forward', [0-9]+\), \('backward', [0-9]+\), \('backward', [0-9]+\)\]," \
  || fail "stage 0 (1F1B with 2 stages: F F B B): $(sed -n 2p "$z")"
sed -n 3p "$z" | grep -Eqx "\[\('forward', [0-9]+\), \('backward', [0-9]+\), \('forward', [0-9]+\), \('backward', [0-9]+\)\]," \
  || fail "stage 1 (F B F B): $(sed -n 3p "$z")"
sed -n 4p "$z" | grep -qx '\]' || fail "closing line"
grep -q '^# Iteration 0 total cost with P2P: ' "$z" || fail "comment lines: $(tail -3 "$z")"
# The clocks are the kronos file's, in the same order.
zk=$(sed -n '2,3p' "$z" | grep -o '[0-9]\+)' | tr -d ')' | tr '\n' ' ')
kk=$(sed -n '2,3p' "$T/k/freqs_pipeline_00000.py" | grep -o '[0-9]\+' | tr '\n' ' ')
[ "$zk" = "$kk" ] || fail "clocks differ: zeus '$zk' kronos '$kk'"
# Readers take both formats: the same emulation.
a=$("$E" emulate --profile "$T/p.csv" --plan "$z" --blocking-power 10 --json)
b=$("$E" emulate --profile "$T/p.csv" --plan "$T/k/freqs_pipeline_00000.py" --blocking-power 10 --json)
[ "$a" = "$b" ] || fail "emulating the Zeus file differs from the kronos file"
# A malformed Zeus file names file, line and column.
printf "[\n[('forward', 1410), ('backward' 1395)],\n]\n" > "$T/bad.py"
set +e
out=$("$E" emulate --profile "$T/p.csv" --plan "$T/bad.py" --blocking-power 10 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "bad.py:2:" <<<"$out" || fail "bad Zeus plan ($rc): $out"
out=$("$E" plan perseus --profile "$T/p.csv" --stages 2 --microbatches 2 --blocking-power 10 \
  --out "$T/x" --formats perseus-py,zeus-py 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "pick one" <<<"$out" || fail "both py formats ($rc): $out"
set -e
# Zero-bubble schedules: each rank's list in its own order with the kinds' names
# (backward_input, backward_weight), read back to the same emulation as the kronos file.
"$E" profile sim --gpu a100 --stages 2 --split-backward -o "$T/pz.csv" >/dev/null
"$E" plan perseus --profile "$T/pz.csv" --schedule zbv --stages 2 --microbatches 2 \
  --blocking-power 80 --out "$T/zz" --formats zeus-py >/dev/null 2>&1 || fail "zbv zeus-py"
"$E" plan perseus --profile "$T/pz.csv" --schedule zbv --stages 2 --microbatches 2 \
  --blocking-power 80 --out "$T/zk" --formats perseus-py >/dev/null 2>&1 || fail "zbv perseus-py"
grep -q "('backward_input', [0-9]*), ('backward_weight', [0-9]*)" "$T/zz/freqs_pipeline_00000.py" \
  || fail "zbv zeus-py lacks I/W names: $(head -3 "$T/zz/freqs_pipeline_00000.py")"
a=$("$E" emulate --profile "$T/pz.csv" --schedule zbv --plan "$T/zz/freqs_pipeline_00001.py" --blocking-power 80 --json)
b=$("$E" emulate --profile "$T/pz.csv" --schedule zbv --plan "$T/zk/freqs_pipeline_00001.py" --blocking-power 80 --json)
[ "$a" = "$b" ] || fail "zbv: the Zeus file emulates differently from the kronos file"
"$E" plan perseus --help | grep -q "zeus-py" || fail "--help lacks zeus-py"
echo ok
