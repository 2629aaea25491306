#!/usr/bin/env bash
# e2e_bitwise.sh: clocks never change the math. The losses of the PyTorch pipeline are
# bitwise identical step by step between: the one-process reference, the all-max run, a
# run with a Perseus plan (clocks really changing, on the simulated GPU with pacing), and a
# run with an EnvPipe plan (its "ours" order and r taken from the plan file); for the
# Llama-style model (reference == all-max for the ResNet: e2e_bitwise_resnet.sh). The 1F1B runs are
# PyTorch's own runtime (venv torch 2, Schedule1F1B); "ours" is the example's own loop, and
# must match them bitwise.
source "$(dirname "$0")/e2e_lib.bash"

S=3 M=4 STEPS=3
# A plan with varied clocks for this pipeline from the simulated GPU's profile.
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages $S -o "$tmp/sim.csv" 2>/dev/null || fail "profile sim"
"$ERGON" plan perseus --profile "$tmp/sim.csv" --stages $S --microbatches $M --blocking-power 83.64 \
  --out "$tmp/frontier" --formats csv,json --quiet || fail "plan perseus"
"$ERGON" choose --frontier "$tmp/frontier" --slowdown 1.05 --out "$tmp/plan.json" >/dev/null || fail "choose"
# An EnvPipe plan: schedule "ours" with its extra warm-up forwards r, which the trainer
# must take from the plan file (no --schedule), and lowered clocks.
"$ERGON" plan envpipe --profile "$tmp/sim.csv" --microbatches $M --gpu A100 \
  --out "$tmp/envpipe.json" >/dev/null || fail "plan envpipe"

model=llama
common=(--model "$model" --microbatches $M --steps $STEPS)
"$PY" "$EX/train.py" --stages $S "${common[@]}" --out "$tmp/$model-ref" >/dev/null || fail "$model reference"
launch $S 90 "${common[@]}" --clock max --out "$tmp/$model-max" >/dev/null 2>&1 || fail "$model all-max run"
losses "$tmp/$model-ref/reference.json" >"$tmp/$model-ref.txt"
[ "$(wc -l <"$tmp/$model-ref.txt")" -eq $STEPS ] || fail "$model: reference has no $STEPS losses"
losses "$tmp/$model-max/result-$((S - 1)).json" >"$tmp/$model-max.txt"
cmp -s "$tmp/$model-ref.txt" "$tmp/$model-max.txt" || {
  paste "$tmp/$model-ref.txt" "$tmp/$model-max.txt"; fail "$model: pipeline losses differ from the reference"; }
echo "$model: reference == pipelined all-max ($("$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print("runtime %s, torch %s" % (d["runtime"], d["torch"]))' "$tmp/$model-max/result-0.json")):" \
  "$(tr '\n' ' ' <"$tmp/$model-ref.txt")"

# Planned (paced simulated GPU) and "ours" + lowest clocks, llama.
launch $S 120 --model llama --microbatches $M --steps $STEPS --plan "$tmp/plan.json" \
  --out "$tmp/planned" --log-dir "$tmp/planned-logs" >/dev/null 2>&1 || fail "planned run"
launch $S 120 --model llama --microbatches $M --steps $STEPS --plan "$tmp/envpipe.json" \
  --out "$tmp/ours" >/dev/null 2>&1 || fail "EnvPipe plan run"
for run in planned ours; do
  losses "$tmp/$run/result-$((S - 1)).json" >"$tmp/$run.txt"
  cmp -s "$tmp/llama-max.txt" "$tmp/$run.txt" || {
    paste "$tmp/llama-max.txt" "$tmp/$run.txt"; fail "llama: $run losses differ from all-max"; }
  [ "$(wc -l <"$tmp/$run.txt")" -eq $STEPS ] || fail "llama: $run has no $STEPS losses"
done
# Not vacuous: the planned run really ran its instructions at several clocks, and the
# "ours" run really used an EnvPipe order with extra warm-up forwards.
"$PY" - "$tmp" $S <<'PY' || fail "the planned/ours runs did not do what they claim"
import csv, json, sys
tmp, S = sys.argv[1], int(sys.argv[2])
clocks = set()
for r in range(S):
    res = json.load(open("%s/planned/result-%d.json" % (tmp, r)))
    assert res["paced"] and res["gpu"] == "sim", res["gpu"]
    for row in csv.DictReader(open("%s/planned-logs/instructions-%d.csv" % (tmp, r))):
        if row["freq_start"] == row["freq_end"]:
            clocks.add(int(row["freq_end"]))
assert len(clocks) >= 2, clocks
planned = json.load(open("%s/planned/result-0.json" % tmp))
assert planned["runtime"] == "torch", planned["runtime"]    # Schedule1F1B of torch 2
ours = json.load(open("%s/ours/result-0.json" % tmp))
assert ours["runtime"] == "ergon", ours["runtime"]          # PyTorch has no "ours"
plan = json.load(open("%s/envpipe.json" % tmp))
r = plan["extra_warmup"][:S]
assert plan["schedule"] == "ours" and any(r), (plan["schedule"], r)
assert ours["schedule"] == "ours" and ours["extra_warmup"] == r, (ours["extra_warmup"], r)
k0 = min(plan["num_microbatches"], S + r[0])
assert [o[0] for o in ours["order"][:k0]] == [0] * k0, ours["order"]
print("planned run: instructions ran at clocks %s MHz; EnvPipe plan ran 'ours' with r=%s"
      % (sorted(clocks), r))
PY
echo "llama: all-max == Perseus plan == EnvPipe plan (ours), bitwise, $STEPS steps"
echo "PASS"
