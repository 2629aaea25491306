#!/usr/bin/env bash
# profile_logs_ranks_contiguous_no_fifo_hang.sh: `ergon profile logs` (issue 15 item 16)
# - the ranks of instructions-<rank>.csv must be 0..R-1: ranks 0 and 99999999 are
#   an error naming the missing rank, like ranks 0 and 2 (99999999 used to be
#   skipped silently, giving a 1-stage profile);
# - a FIFO (or any non-regular file) named like a log is an error naming it, at
#   once: opening it blocked forever waiting for a writer.
set -u
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
rank() { # rank DIR R: a good pair of logs for rank R
  { echo "instruction,microbatch,start,end,freq_start,freq_end"
    echo "forward,0,10,11,1410,1410"; echo "backward,0,11,13,1410,1410"; } >"$1/instructions-$2.csv"
  printf 'time,energy\n0,0\n30,3000\n' >"$1/time-energy-$2.csv"
}
mkdir "$tmp/ok" "$tmp/gap" "$tmp/huge" "$tmp/fifo" "$tmp/fifo2" "$tmp/dir"
rank "$tmp/ok" 0; rank "$tmp/ok" 1
"$ERGON" profile logs "$tmp/ok" -o "$tmp/p.csv" 2>"$tmp/err" || fail "good logs: $(cat "$tmp/err")"
# names that are not a rank are not logs: no leading zeros, signs, other suffixes
touch "$tmp/ok/instructions-01.csv" "$tmp/ok/instructions-+1.csv" "$tmp/ok/instructions-2.csv.bak"
"$ERGON" profile logs "$tmp/ok" -o "$tmp/p.csv" 2>"$tmp/err" || fail "odd names counted: $(cat "$tmp/err")"
[ "$(cut -d, -f1 "$tmp/p.csv" | sort -u | tr '\n' ' ')" = "0 1 stage " ] || fail "stages: $(cat "$tmp/p.csv")"

rank "$tmp/gap" 0; rank "$tmp/gap" 2
"$ERGON" profile logs "$tmp/gap" -o "$tmp/x.csv" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] || fail "ranks 0,2: exit $rc"
grep -q "ranks are not 0\.\.2 .*found 2 files, rank 1 is missing" "$tmp/err" || fail "ranks 0,2: $(cat "$tmp/err")"

for r in 99999999 4096 99999999999999999999999; do
  rm -f "$tmp/huge"/*; rank "$tmp/huge" 0; rank "$tmp/huge" $r
  "$ERGON" profile logs "$tmp/huge" -o "$tmp/x.csv" 2>"$tmp/err"; rc=$?
  [ $rc -eq 1 ] || fail "ranks 0,$r: exit $rc (a profile of $(($(wc -l <"$tmp/x.csv" 2>/dev/null || echo 1) - 1)) rows)"
  grep -q "ranks are not 0\.\..*found 2 files, rank 1 is missing" "$tmp/err" || fail "ranks 0,$r: $(cat "$tmp/err")"
  [ -e "$tmp/x.csv" ] && fail "ranks 0,$r wrote a profile"
done

# FIFOs in place of either log: an error within seconds, naming the file
rank "$tmp/fifo" 0; rm "$tmp/fifo/instructions-0.csv"; mkfifo "$tmp/fifo/instructions-0.csv"
rank "$tmp/fifo2" 0; rm "$tmp/fifo2/time-energy-0.csv"; mkfifo "$tmp/fifo2/time-energy-0.csv"
mkfifo "$tmp/fifo2/README"  # an unrelated FIFO is never opened
for d in fifo fifo2; do
  timeout 20 "$ERGON" profile logs "$tmp/$d" -o "$tmp/x.csv" 2>"$tmp/err"; rc=$?
  [ $rc -eq 124 ] && fail "$d: hangs on a FIFO"
  [ $rc -eq 1 ] || fail "$d: exit $rc: $(cat "$tmp/err")"
  grep -q "\.csv: not a regular file (a FIFO)" "$tmp/err" || fail "$d: message: $(cat "$tmp/err")"
done
timeout 20 "$ERGON" profile logs "$tmp/fifo" --stages 1 -o "$tmp/x.csv" 2>"$tmp/err"
[ $? -eq 1 ] || fail "--stages 1 with a FIFO"
# a directory named like a log
rank "$tmp/dir" 0; rm "$tmp/dir/instructions-0.csv"; mkdir "$tmp/dir/instructions-0.csv"
"$ERGON" profile logs "$tmp/dir" -o "$tmp/x.csv" 2>"$tmp/err"
[ $? -eq 1 ] || fail "directory as a log"
grep -q "not a regular file (a directory)" "$tmp/err" || fail "directory: $(cat "$tmp/err")"
echo ok
