#!/usr/bin/env bash
# e2e_schedules_deadlock.sh: the PyTorch pipeline runs the multi-chunk and zero-bubble
# schedules (interleaved-1f1b V=2, looped-bfs V=2, interleaved-zb, zbv; orders and placement from libergon,
# I and W as separate autograd passes) without deadlock for P in {2,4}, M in {P, 2P}, each
# launch under a timeout, and their losses equal 1F1B's (same model, P stages) within 1e-6
# relative.
source "$(dirname "$0")/e2e_lib.bash"

scheds=interleaved-1f1b,looped-bfs,interleaved-zb,zbv
for P in 2 4; do
  out="$tmp/P$P.txt"
  launch "$P" 100 --deadlock-check --schedule $scheds --chunks 2 --steps 2 --pace off \
    --p2p-timeout 40 --rel-tol 1e-6 >"$out" 2>&1
  rc=$?
  grep -v '^ergon:' "$out"
  [ $rc -eq 0 ] || fail "P=$P: exit $rc (124 = timeout: deadlock)"
  for s in ${scheds//,/ }; do
    for M in $P $((2 * P)); do
      grep -Eq "^P=$P V=2 M=$M $s +2 steps .*max rel diff [0-9.e+-]+  same as 1f1b$" "$out" ||
        fail "P=$P M=$M $s: no run with losses equal to 1F1B's"
    done
  done
done
echo "PASS"
