#!/usr/bin/env bash
# e2e_schedules_server.sh: the PyTorch trainer on a zero-bubble schedule (zbv, P=2, V=2, M=4)
# driven by `ergon serve` (/v1): a PointSolution job serves a `plan perseus --schedule zbv`
# plan (after one all-max warm-up window), and every rank runs exactly the plan's clocks
# for its F/I/W instructions -- checked instruction by instruction on the clock each one ran
# at, from the client's logs (tests/e2e/check_clocks.py: the warm-up window's 2 iterations at
# 1410 MHz, then 2 at the plan's clocks) -- with the losses of the same steps at all-max; an
# InstructionProfiler job gets backward_input and backward_weight rows from the trainer's
# per-instruction samples.
source "$(dirname "$0")/e2e_lib.bash"
"$ERGON" serve --help >/dev/null 2>&1 || skip_or_fail "this build has no ergon serve"

P=2 M=4
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages $P --split-backward -o "$tmp/sim.csv" \
  >/dev/null 2>&1 || fail "profile sim"
"$ERGON" plan perseus --profile "$tmp/sim.csv" --schedule zbv --stages $P --microbatches $M \
  --blocking-power 83.64 --out "$tmp/frontier" --formats csv,json --quiet || fail "plan perseus"
"$ERGON" choose --frontier "$tmp/frontier" --slowdown 1.01 --out "$tmp/plan.json" >/dev/null || fail "choose"
"$ERGON" serve --port 0 --db "$tmp/s.db" --dump "$tmp/dump" --plans-dir "$tmp" \
  >"$tmp/out.txt" 2>"$tmp/serve.log" &
spid=$!
trap 'kill $spid 2>/dev/null; wait $spid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 600); do grep -q listening "$tmp/out.txt" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$tmp/out.txt")
[ -n "$port" ] || fail "server did not start"
common=(--server "http://127.0.0.1:$port" --schedule zbv --microbatches $M --window-steps 2)
launch $P 90 "${common[@]}" --scheduler PointSolution --power-states 1410:1000:15 \
  --scheduler-args "{\"solution_path\": \"$tmp/plan.json\", \"warmup_iters\": 1}" \
  --log-dir "$tmp/served-logs" --out "$tmp/served" >"$tmp/served.log" 2>&1 ||
  { cat "$tmp/served.log"; fail "PointSolution run"; }
# What ran, not what was sent: each instruction's clock from the client's logs.
"$PY" "$ERGON_SRC/tests/e2e/check_clocks.py" "$tmp/served-logs" --ranks $P \
  --segment "2:1410@$tmp/plan.json" --segment "2:$tmp/plan.json" ||
  fail "PointSolution run: an instruction did not run at the served plan's clock"
launch $P 90 --schedule zbv --microbatches $M --steps 4 --clock max --out "$tmp/max" \
  >"$tmp/max.log" 2>&1 || { cat "$tmp/max.log"; fail "all-max run"; }
launch $P 90 "${common[@]}" --scheduler InstructionProfiler --power-states 1410:1335:75 \
  --scheduler-args '{"minimum_power_state": 1335}' --out "$tmp/prof" >"$tmp/prof.log" 2>&1 ||
  { cat "$tmp/prof.log"; fail "InstructionProfiler run"; }
"$PY" - "$tmp" $P <<'PY' || fail "served runs not as expected"
import csv, glob, json, sys
tmp, P = sys.argv[1], int(sys.argv[2])
plan = json.load(open(tmp + "/plan.json"))
served = [json.load(open("%s/served/result-%d.json" % (tmp, r))) for r in range(P)]
for r, res in enumerate(served):
    assert res["schedule"] == "zbv" and res["chunks"] == 2 and res["windows"] == 2, res["windows"]
    assert set(res["power_states"][0]) == {1410}, res["power_states"][0]
    assert res["power_states"][1] == plan["stages"][r]["freq_mhz"], (r, res["power_states"][1])
assert min(f for s in plan["stages"] for f in s["freq_mhz"]) < 1410
loss = lambda rs: [s["loss_hex"] for x in rs for s in x["steps"] if "loss_hex" in s]
mx = [json.load(open("%s/max/result-%d.json" % (tmp, r))) for r in range(P)]
assert loss(served) == loss(mx) and len(loss(mx)) == 4, (loss(served), loss(mx))
rows = list(csv.DictReader(open(glob.glob(tmp + "/dump/*InstructionProfiler/*.csv")[0])))
got = {(int(x["stage"]), x["instruction"], int(x["frequency"])) for x in rows if x["time"]}
for r in range(P):
    for k in ("forward", "backward_input", "backward_weight"):
        for f in (1410, 1335):
            assert (r, k, f) in got, (r, k, f, sorted(got))
print("PointSolution: every rank ran the zbv plan's %d clocks, losses == all-max; "
      "InstructionProfiler rows: %s" % (len(plan["stages"][0]["freq_mhz"]),
                                        sorted({k for _, k, _ in got})))
PY
echo "PASS"
