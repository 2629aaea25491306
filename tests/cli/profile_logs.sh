#!/usr/bin/env bash
# profile_logs.sh: `ergon profile logs` labels rows from the recorded clocks and names bad input.
set -u
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$tmp/logs"
for r in 0 1; do
  {
    echo "instruction,microbatch,start,end,freq_start,freq_end"
    # 1410 MHz window: forward 1 s, backward 2 s; then 1200 MHz; one mixed record (dropped)
    echo "forward,0,10,11,1410,1410"
    echo "backward,0,11,13,1410,1410"
    echo "forward,1,13,14.5,1410,1200"
    echo "forward,0,20,21.5,1200,1200"
    echo "backward,0,21.5,24.5,1200,1200"
  } >"$tmp/logs/instructions-$r.csv"
  # energy: 100 W from t=0 to 30 s (cumulative joules)
  printf 'time,energy\n0,0\n30,3000\n' >"$tmp/logs/time-energy-$r.csv"
done
"$ERGON" profile logs "$tmp/logs" -o "$tmp/p.csv" || fail "profile logs failed"
cat >"$tmp/want.csv" <<'W'
stage,instruction,frequency,time,energy
0,forward,1410,1.0,100.0
0,backward,1410,2.0,200.0
0,forward,1200,1.5,150.0
0,backward,1200,3.0,300.0
1,forward,1410,1.0,100.0
1,backward,1410,2.0,200.0
1,forward,1200,1.5,150.0
1,backward,1200,3.0,300.0
W
diff -u "$tmp/want.csv" "$tmp/p.csv" || fail "unexpected profile"
"$ERGON" profile logs "$tmp/logs" --stages 3 -o "$tmp/x.csv" 2>"$tmp/err"; [ $? -eq 1 ] || fail "missing rank exit"
grep -q "instructions-2.csv" "$tmp/err" || fail "missing rank not named: $(cat "$tmp/err")"
echo "forward,0,29,31,1410,1410" >>"$tmp/logs/instructions-1.csv"
"$ERGON" profile logs "$tmp/logs" -o "$tmp/x.csv" 2>"$tmp/err"; [ $? -eq 1 ] || fail "out of range exit"
grep -q "outside the energy samples" "$tmp/err" || fail "out-of-range message: $(cat "$tmp/err")"
"$ERGON" profile logs -o "$tmp/x.csv" 2>/dev/null; [ $? -eq 2 ] || fail "no dir: usage"
"$ERGON" profile logs "$tmp/nope" -o "$tmp/x.csv" 2>/dev/null; [ $? -eq 1 ] || fail "bad dir"
echo ok
