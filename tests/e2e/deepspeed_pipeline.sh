#!/usr/bin/env bash
# deepspeed_pipeline.sh: the REAL DeepSpeed pipeline engine (requirements.txt's deepspeed, CPU,
# gloo, 4 ranks, one launch) with ergon's hooks, on a Hugging Face Llama built from a
# LlamaConfig and on a GPT-style model, both split with LayerSpecs. Cases per model, M in
# {4, 8}: DeepSpeed's own TrainSchedule at all-max clocks and at a 1F1B EnvPipe plan's clocks,
# ergon's `ours` (r_s of an `ergon plan envpipe --schedule ours` plan, read through the
# binding) at all-max and at that plan's clocks, ergon's 1f1b (M=8). Checks:
#   - the order each rank ran, as its hooks saw it, is `ergon schedule 1f1b` (DeepSpeed's
#     TrainSchedule and ergon's 1f1b) or ergon.rank_order of the plan's schedule (ours);
#   - ours' losses equal TrainSchedule's within 1e-6 relative; planned and all-max runs are
#     bitwise identical;
#   - on the simulated GPU's own accounting (Gpu.sim_account: each instruction's model time
#     and energy at the clock the device had when it began, however long the host took; it
#     does not depend on load): every instruction of every step ran at its case's clock (the
#     plan's, or 1410 MHz), the accounted busy time and energy of every step equal `ergon
#     emulate`'s of that plan within 1e-6, and the planned runs' accounted energy (busy +
#     blocking power x idle over the emulated iteration) is below all-max's. The wall-clock
#     energy counter, which counts how long the host took, decides nothing;
#   - every non-first rank measured receive waits; no deadlock (gloo P2P timeout 5 s, the
#     whole launch under a timeout).
# All cases run in one launch of examples/deepspeed_pipeline/train.py's engine through
# tests/e2e/harness/deepspeed_cases.py; then the example itself, as docs/integrations.md
# (DeepSpeed) launches it, runs `ours` at the plan's clocks: orders and losses equal that case's.
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv deepspeed transformers
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
S=4
"$ERGON" profile sim --gpu a100 --stages $S --model bert-large -o "$tmp/profile.csv" 2>/dev/null ||
  fail "ergon profile sim"
cases=()
for M in 4 8; do
  for s in ours 1f1b; do
    "$ERGON" plan envpipe --profile "$tmp/profile.csv" --microbatches $M --gpu a100 \
      --schedule $s --out "$tmp/$s$M.json" >"$tmp/plan.log" 2>&1 || { cat "$tmp/plan.log"; fail "plan $s M=$M"; }
  done
  "$ERGON" schedule 1f1b --ranks $S --microbatches $M >"$tmp/1f1b-order-$M.txt" || fail "ergon schedule"
  cases+=(--case deepspeed,$M --case deepspeed,$M,"$tmp/1f1b$M.json",plan
          --case ours,$M,"$tmp/ours$M.json" --case ours,$M,"$tmp/ours$M.json",plan)
done
cases+=(--case 1f1b,8)
start=$(date +%s)
timeout -k 5 300 "$VPY" -m torch.distributed.run --standalone --nproc-per-node $S \
  "$ERGON_SRC/tests/e2e/harness/deepspeed_cases.py" --model llama,gpt "${cases[@]}" \
  --case-steps 2 --p2p-timeout 5 --out "$tmp/out" >"$tmp/run.log" 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -40 "$tmp/run.log"; fail "the DeepSpeed launch exited $rc (124: timeout, a deadlock?)"; }
grep -E "^(llama|gpt) " "$tmp/run.log"
"$VPY" - "$tmp" $S "$ERGON" <<'PY' || fail "checks"
import json, subprocess, sys
import ergon
tmp, S, ERGON = sys.argv[1], int(sys.argv[2]), sys.argv[3]
BLOCKING_W = 83.64

def emulated(plan_file, all_max):
    """The plan's clocks (or 1410 MHz everywhere) in run order per rank, and `ergon emulate`
    of them on the simulated GPU's profile."""
    p = json.load(open(plan_file))
    if all_max:
        p["stages"] = [dict(st, freq_mhz=[1410] * len(st["freq_mhz"])) for st in p["stages"]]
        for k in ("time_s", "energy_j", "provenance"):
            p.pop(k, None)
        plan_file = plan_file[:-5] + "-allmax.json"
        json.dump(p, open(plan_file, "w"))
    out = subprocess.run([ERGON, "emulate", "--profile", tmp + "/profile.csv", "--plan",
                          plan_file, "--blocking-power", str(BLOCKING_W), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return [st["freq_mhz"] for st in p["stages"]], json.loads(out)
res = [json.load(open("%s/out/cases-%d.json" % (tmp, r))) for r in range(S)]
for x in res:    # eval_batch ran after each model's cases, outside the hooks
    evals = [c for c in x["cases"] if "eval_loss" in c]
    assert [c["model"] for c in evals] == ["llama", "gpt"], evals
    x["cases"] = [c for c in x["cases"] if "eval_loss" not in c]
letters = {"F": ergon.FORWARD, "B": ergon.BACKWARD}

def cli_order(M, r):  # `ergon schedule 1f1b` text: "rank R: 0F0 0F1 ..."
    for line in open("%s/1f1b-order-%d.txt" % (tmp, M)):
        if line.startswith("rank %d:" % r):
            out = []
            for tok in line.split()[2:]:
                i = tok.index("F") if "F" in tok else tok.index("B")
                out.append((letters[tok[i]], int(tok[i + 1:])))
            return out
    raise SystemExit("no rank %d in the ergon schedule output" % r)

bad = []
n = len(res[0]["cases"])
for i in range(n):
    c0 = res[0]["cases"][i]
    name = "%s %s M=%d %s" % (c0["model"], c0["schedule"], c0["M"], c0["clock"])
    for r in range(S):
        c = res[r]["cases"][i]
        if c["schedule"] == "ours":
            want = [(k, mb) for k, _, mb, *_ in
                    ergon.rank_order(ergon.plan_schedule(c["plan"])[0], S, c["M"], r)[0]]
            assert any(c["extra_warmup"]), c["extra_warmup"]   # a real EnvPipe order
        else:
            want = cli_order(c["M"], r)
        for step, got in enumerate(c["orders"]):
            if [tuple(x) for x in got] != want:
                bad.append("%s rank %d step %d ran %s, ergon says %s" % (name, r, step, got, want))
        if r > 0 and not sum(sum(v) for v in c["waits"].values()) > 0:
            bad.append("%s rank %d measured no receive wait" % (name, r))
    # losses (every rank holds the batch loss): same on all ranks
    if len({tuple(res[r]["cases"][i]["loss_hex"]) for r in range(S)}) != 1:
        bad.append("%s: ranks disagree on the losses" % name)

def find(model, sched, M, clock):
    for i, c in enumerate(res[0]["cases"]):
        if (c["model"], c["schedule"], c["M"], c["clock"]) == (model, sched, M, clock):
            return i, c
    raise SystemExit("case %s %s %d %s missing" % (model, sched, M, clock))

for model in ("llama", "gpt"):
    for M in (4, 8):
        _, ds = find(model, "deepspeed", M, "max")
        _, ours = find(model, "ours", M, "max")
        rel = max(abs(a - b) / abs(b) for a, b in zip(ours["losses"], ds["losses"]))
        if rel > 1e-6:
            bad.append("%s M=%d: ours differs from DeepSpeed's 1F1B by %.2e" % (model, M, rel))
        for sched in ("deepspeed", "ours"):
            i_max, mx = find(model, sched, M, "max")
            i_pl, pl = find(model, sched, M, "plan")
            if pl["loss_hex"] != mx["loss_hex"]:
                bad.append("%s %s M=%d: planned losses %s != all-max %s"
                           % (model, sched, M, pl["losses"], mx["losses"]))
            plan_file = pl["plan"]
            acc = {}
            for k, i, all_max in (("all-max", i_max, True), ("planned", i_pl, False)):
                clocks, emu = emulated(plan_file, all_max)
                T = emu["time_s"]
                want_t = S * T - emu["blocking_energy_j"] / BLOCKING_W
                want_e = emu["compute_energy_j"]
                sims = [res[r]["cases"][i]["sim"] for r in range(S)]
                for r in range(S):
                    for step, sm in enumerate(sims[r]):
                        if sm["clocks"] != clocks[r]:
                            bad.append("%s %s M=%d %s rank %d step %d: ran clocks %s, the plan's %s"
                                       % (model, sched, M, k, r, step, sm["clocks"], clocks[r]))
                for step in range(len(sims[0])):
                    bt = sum(sims[r][step]["busy_time_s"] for r in range(S))
                    be = sum(sims[r][step]["busy_energy_j"] for r in range(S))
                    if abs(bt / want_t - 1) > 1e-6 or abs(be / want_e - 1) > 1e-6:
                        bad.append("%s %s M=%d %s step %d: accounted busy %.6f s, %.4f J; "
                                   "emulated %.6f s, %.4f J" % (model, sched, M, k, step, bt, be,
                                                                 want_t, want_e))
                    acc[k] = be + BLOCKING_W * (S * T - bt)
            if not acc["planned"] < acc["all-max"]:
                bad.append("%s %s M=%d: planned accounted energy %.2f J not below all-max %.2f J"
                           % (model, sched, M, acc["planned"], acc["all-max"]))
            e_max = sum(sum(res[r]["cases"][i_max]["energy_j"]) for r in range(S))
            e_pl = sum(sum(res[r]["cases"][i_pl]["energy_j"]) for r in range(S))
            print("%s %s M=%d: accounted energy %.2f J planned, %.2f J all-max (%+.2f%%); wall-"
                  "clock counter (printed only) %.1f J, %.1f J" % (
                      model, sched, M, acc["planned"], acc["all-max"],
                      100 * (acc["planned"] / acc["all-max"] - 1), e_pl, e_max))
        print("%s M=%d: ours r=%s losses == DeepSpeed 1F1B (max rel %.1e), plans bitwise == "
              "all-max" % (model, M, ours["extra_warmup"], rel))
    _, f = find(model, "1f1b", 8, "max")
    _, ds = find(model, "deepspeed", 8, "max")
    if f["loss_hex"] != ds["loss_hex"]:
        bad.append("%s: ergon's 1f1b losses differ from TrainSchedule's" % model)
if bad:
    print("\n".join(bad[:20]))
    sys.exit(1)
print("orders seen by the hooks == ergon's on every rank, step and case (%d cases x %d ranks)"
      % (n, S))
PY
echo "DeepSpeed pipeline: $(( $(date +%s) - start )) s for one launch"
# The example as docs/integrations.md launches it: EnvPipe's order at the plan's clocks.
timeout -k 5 200 "$VPY" -m torch.distributed.run --standalone --nproc-per-node $S \
  "$ERGON_SRC/examples/deepspeed_pipeline/train.py" --model llama --microbatches 8 --steps 2 \
  --schedule ours --plan "$tmp/ours8.json" --p2p-timeout 5 --out "$tmp/plain" >"$tmp/plain.log" 2>&1 ||
  { tail -40 "$tmp/plain.log"; fail "the example's own launch failed"; }
"$VPY" - "$tmp" $S <<'PY' || fail "the example's own launch differs from its case"
import json, sys
tmp, S = sys.argv[1], int(sys.argv[2])
for r in range(S):
    got = json.load(open("%s/plain/result-%d.json" % (tmp, r)))
    case = [c for c in json.load(open("%s/out/cases-%d.json" % (tmp, r)))["cases"]
            if (c.get("model"), c.get("schedule"), c.get("M"), c.get("plan"), c.get("clock")) ==
            ("llama", "ours", 8, got["plan"], "plan")][0]
    orders = [x["order"] for x in got["steps"]]
    losses = [x["loss_hex"] for x in got["steps"]]
    if got["schedule"] != "ours" or orders != case["orders"] or losses != case["loss_hex"]:
        sys.exit("rank %d: the example ran %s %s losses %s; its case %s losses %s" % (
            r, got["schedule"], orders, losses, case["orders"], case["loss_hex"]))
print("the example's own launch (llama, ours, M=8, plan): orders and losses == its case's")
PY
echo "PASS"
