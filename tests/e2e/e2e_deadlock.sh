#!/usr/bin/env bash
# e2e_deadlock.sh: the PyTorch pipeline never deadlocks: S in {2,3,4}, M in {S, S+1, 2S},
# 1F1B and EnvPipe's "ours" (r = all forwards first, which increases along the stages, and a
# decreasing r), each launch under a timeout; and, as a negative control, the naive design
# (one channel per neighbour pair, blocking sends) does deadlock, so the check can fail.
source "$(dirname "$0")/e2e_lib.bash"

for S in 2 3 4; do
  out="$tmp/S$S.txt"
  launch "$S" 150 --deadlock-check --steps 2 --pace off --p2p-timeout 30 >"$out" 2>&1
  rc=$?
  cat "$out" | grep -v '^ergon:'
  [ $rc -eq 0 ] || fail "S=$S: exit $rc (124 = timeout: deadlock)"
  n=$(grep -c "^S=$S M=.*same as 1f1b" "$out")
  [ "$n" -eq 9 ] || fail "S=$S: $n of 9 cases finished with losses equal to 1F1B's"
  # The cases really used EnvPipe orders with extra warm-up (r > 0 somewhere).
  grep -q "^S=$S M=$((2 * S)) ours r=$((S)),.*same" "$out" || fail "S=$S: no 'ours' case with r > 0"
done

# Negative control: S=2, M=3, blocking sends on one shared channel (original EnvPipe's P2P) must
# deadlock, and the test must see where. Every rank writes a line, flushed, right before and
# right after each blocking send and receive (--block-marks); gloo's sends are rendezvous, so
# once every rank's last line is "enter send" no rank can post the receive another one waits
# for: that state is the deadlock. The test waits for it (as long as importing torch takes:
# the wait has no verdict of its own), then watches 10 s from the moment all ranks are there:
# no rank may leave its send, and the launch must still be running. An exit before every rank
# is in a blocking send fails, whatever its status (a 124 from a launcher timeout proves nothing).
marks="$tmp/marks"
mkdir -p "$marks"
timeout -k 5 620 "$PY" "$EX/launch.py" --nproc 2 --timeout 600 -- "$TRAIN" \
  --microbatches 3 --steps 2 --pace off --runtime ergon --p2p shared-blocking \
  --p2p-timeout 600 --block-marks "$marks" >"$tmp/neg.txt" 2>&1 &
lpid=$!
trap 'kill $lpid 2>/dev/null; wait $lpid 2>/dev/null; rm -rf "$tmp"' EXIT
all_in_send() {
  local r
  for r in 0 1; do tail -n 1 "$marks/rank-$r.txt" 2>/dev/null | grep -q '^enter send' || return 1; done
}
while ! all_in_send; do
  kill -0 $lpid 2>/dev/null || {
    wait $lpid; rc=$?
    cat "$tmp/neg.txt"; for r in 0 1; do echo "rank $r's marks:"; cat "$marks/rank-$r.txt" 2>/dev/null; done
    fail "naive shared blocking channel: the launch ended (exit $rc) before every rank was in a blocking send"; }
  sleep 0.1
done
before=$(for r in 0 1; do echo "rank $r: $(tr '\n' '|' <"$marks/rank-$r.txt")"; done)
sleep 10
after=$(for r in 0 1; do echo "rank $r: $(tr '\n' '|' <"$marks/rank-$r.txt")"; done)
[ "$before" = "$after" ] || fail "naive shared blocking channel: a rank left its blocking send (no deadlock):
$before
then
$after"
kill -0 $lpid 2>/dev/null || fail "naive shared blocking channel: the launch ended while every rank was in a send"
echo "$after"
kill -TERM $lpid; wait $lpid 2>/dev/null
echo "negative control: both ranks blocked in a send to each other (rendezvous), no progress for 10 s after the last got there: the naive shared blocking channel deadlocks, as expected"
echo "PASS"
