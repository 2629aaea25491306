#!/usr/bin/env bash
# e2e_schedules_bitwise.sh: clocks never change the math on the multi-chunk schedules, on
# PyTorch's own runtime (venv torch 2). For interleaved-1f1b (V=2) and interleaved-zb on P=4
# ranks (8 stages, M=4), and dualpipev (M=8: its OVERLAP_F_B steps as PyTorch runs them), the
# losses of the all-max run and of a run with a Perseus plan for that schedule (clocks really
# changing on the simulated GPU) are bitwise identical step by step, and on every rank
# PyTorch's runtime ran exactly ergon's order. (zbv: e2e_schedules_energy.sh; every class and
# M: torch_pipelining.sh; the own loop's deadlock test: e2e_schedules_deadlock.sh.)
source "$(dirname "$0")/e2e_lib.bash"

P=4 M=4 STEPS=2
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages $P --split-backward -o "$tmp/sim.csv" \
  >/dev/null 2>&1 || fail "profile sim"
# last_losses DIR: the losses (hex) of the rank that holds the last stage.
last_losses() {
  "$PY" -c 'import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/result-*.json")):
    for s in json.load(open(f))["steps"]:
        if "loss_hex" in s:
            print(s["loss_hex"])' "$1"
}
for s in interleaved-1f1b interleaved-zb dualpipev; do
  M=4
  [ $s = dualpipev ] && M=8     # DualPipeV needs M >= 2P (PyTorch and ergon)
  "$ERGON" plan perseus --profile "$tmp/sim.csv" --schedule $s --chunks 2 --stages $P \
    --microbatches $M --blocking-power 83.64 --out "$tmp/$s-frontier" --formats csv,json --quiet ||
    fail "$s: plan perseus"
  "$ERGON" choose --frontier "$tmp/$s-frontier" --slowdown 1.05 --out "$tmp/$s.json" >/dev/null ||
    fail "$s: choose"
  launch $P 90 --microbatches $M --steps $STEPS --schedule $s --chunks 2 --clock max --pace off \
    --out "$tmp/$s-max" >"$tmp/$s-max.log" 2>&1 || { cat "$tmp/$s-max.log"; fail "$s: all-max run"; }
  launch $P 90 --microbatches $M --steps $STEPS --plan "$tmp/$s.json" --pace off \
    --out "$tmp/$s-plan" --log-dir "$tmp/$s-logs" >"$tmp/$s-plan.log" 2>&1 ||
    { cat "$tmp/$s-plan.log"; fail "$s: planned run"; }
  last_losses "$tmp/$s-max" >"$tmp/$s-max.txt"
  last_losses "$tmp/$s-plan" >"$tmp/$s-plan.txt"
  [ "$(wc -l <"$tmp/$s-max.txt")" -eq $STEPS ] || fail "$s: all-max run has no $STEPS losses"
  cmp -s "$tmp/$s-max.txt" "$tmp/$s-plan.txt" || {
    paste "$tmp/$s-max.txt" "$tmp/$s-plan.txt"; fail "$s: planned losses differ from all-max"; }
  # Not vacuous: the planned run ran this schedule with 2 chunks per rank, at several clocks.
  "$PY" - "$tmp" $P $s <<'PY' || fail "$s: the planned run did not do what it claims"
import csv, json, sys
tmp, P, s = sys.argv[1], int(sys.argv[2]), sys.argv[3]
clocks = set()
letters = {0: "F", 1: "B", 2: "I", 3: "W"}
for r in range(P):
    res = json.load(open("%s/%s-plan/result-%d.json" % (tmp, s, r)))
    local = [r, 2 * P - 1 - r] if s == "dualpipev" else [r, r + P]
    assert res["schedule"] == s and res["chunks"] == 2 and res["local_stages"] == local, res
    # PyTorch's runtime ran it, in ergon's order (an OVERLAP_F_B step as its two parts)
    assert res["runtime"] == "torch", res["runtime"]
    want = []
    for k, st, mb, k2, st2, mb2 in res["order"]:
        want.append([letters[0 if k == 4 else k], st, mb])
        if k == 4:
            want.append([letters[k2], st2, mb2])
    assert res["order_ran"] == want, (res["order_ran"], want)
    for row in csv.DictReader(open("%s/%s-logs/instructions-%d.csv" % (tmp, s, r))):
        if row["freq_start"] == row["freq_end"]:
            clocks.add(int(row["freq_end"]))
assert len(clocks) >= 2, clocks
print("%s: planned run ran at clocks %s MHz" % (s, sorted(clocks)))
PY
  echo "$s: all-max == Perseus plan, bitwise: $(tr '\n' ' ' <"$tmp/$s-max.txt")"
done
echo "PASS"
