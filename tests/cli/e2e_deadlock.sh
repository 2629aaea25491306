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
# hang; gloo sends are rendezvous, so this deadlocks and the launcher's timeout fires.
launch 2 12 --microbatches 3 --steps 2 --pace off --runtime ergon --p2p shared-blocking >"$tmp/neg.txt" 2>&1
rc=$?
[ $rc -eq 124 ] || { cat "$tmp/neg.txt"; fail "naive shared blocking channel: exit $rc, expected a deadlock (124)"; }
echo "negative control: the naive shared blocking channel deadlocks (timeout), as expected"
echo "PASS"
