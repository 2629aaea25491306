#!/bin/bash
# shard_chain_bounded.sh: `ergon shard analyze` stays near-linear on chained dots that all read
# one weight (issue 21: cubic before: 2,000 dots took 9-19 s, 4,000 over a minute, 20,000
# never finished; bench/shard_chain.sh measures it). 2,000 such dots must finish within the
# hang guard (0.1 s in a Release build, a few seconds under ASan), and the report must say
# that twin searches stopped at the window (what keeps it linear: without the window there is
# no note); --twin-window is honoured, a long run prints progress on stderr, and a bad window
# is a usage error.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
fail() { echo "FAIL: $*" >&2; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
E=$ERGON
command -v python3 >/dev/null || skip_or_fail "python3 absent (bench/gen_chain_hlo.py)"
python3 "$ERGON_SRC/bench/gen_chain_hlo.py" 2000 > "$T/chain.hlo" || fail "generator"
ERGON_PROGRESS_INTERVAL_S=0.000001 timeout 60 $E shard analyze --hlo "$T/chain.hlo" --mesh 1x2 \
  >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 124 ] && fail "analyze of 2,000 chained dots did not finish in 60 s"
[ $rc = 0 ] || fail "analyze exit $rc: $(cat "$T/err")"
grep -q "^ParallelBlocks: 2000 " "$T/out" || fail "blocks: $(head -5 "$T/out")"
grep -q "^note: [0-9]* backward-twin searches stopped at the window of 64 candidate dots (the first for anchor 'x1')" "$T/out" \
  || fail "no note on the twin window: $(head -5 "$T/out")"
grep -q "^ergon: analyze: [0-9]*/2002 " "$T/err" || fail "no progress on stderr: $(cat "$T/err")"
# A wider window searches further: fewer searches stop at it (on 600 dots, to stay quick).
python3 "$ERGON_SRC/bench/gen_chain_hlo.py" 600 > "$T/c600.hlo" || fail "generator"
$E shard analyze --hlo "$T/c600.hlo" --mesh 1x2 >"$T/out1" 2>/dev/null || fail "600 dots"
timeout 60 $E shard analyze --hlo "$T/c600.hlo" --mesh 1x2 --twin-window 200 >"$T/out2" 2>/dev/null \
  || fail "--twin-window 200"
c1=$(sed -n 's/^note: \([0-9]*\) .*/\1/p' "$T/out1"); c2=$(sed -n 's/^note: \([0-9]*\) .*/\1/p' "$T/out2")
[ -n "$c2" ] && [ "$c2" -lt "$c1" ] || fail "window 200 cut $c2 searches, window 64 cut $c1"
grep -q "window of 200 candidate" "$T/out2" || fail "the note does not name the window"
# A small training module never reaches the window: no note.
$E shard analyze --hlo "$ERGON_TEST_DATA/shard_mlp.hlo" --mesh 2x2 >"$T/mlp" 2>/dev/null || fail "mlp"
grep -q "^note: .*twin" "$T/mlp" && fail "the MLP reports a cut twin search"
# Bad windows are usage errors.
for w in 0 -3 x 1000001; do
  $E shard analyze --hlo "$T/chain.hlo" --mesh 1x2 --twin-window "$w" >/dev/null 2>&1
  [ $? = 2 ] || fail "--twin-window $w must be a usage error"
done
$E shard analyze --help | grep -q -- "--twin-window N" || fail "--help lacks --twin-window"
echo ok
