#!/usr/bin/env bash
# torchtitan_pipeline.sh: ergon inside torchtitan's own Trainer (requirements.txt's torchtitan,
# ergon.integration.torchtitan: one --override.imports switch). On 4 CPU ranks (gloo, the
# integration's CPU shim), torchtitan's debug Llama model (llama3 / llama3_debugmodel, seq_len
# 16) with PP = 4, M = 8 (local batch 8, microbatch 1), for torchtitan's 1F1B,
# Interleaved1F1B, ZBVZeroBubble, DualPipeV and a pipeline_parallel_schedule_csv of
# `ergon schedule ours --format torch-csv` (torch's _PipelineScheduleRuntime); each at all-max
# (clock max) and with a Perseus plan, 2 steps. Checks, per case:
#   * on every rank and step the (stage, kind, microbatch) order the hooks saw equals
#     `ergon schedule NAME --ranks 4 --microbatches 8 --format torch-csv`;
#   * the losses of the all-max and the planned run are bitwise identical;
#   * every instruction of every rank ran at its clock -- the top clock in the all-max run, the
#     plan's in the planned run -- checked one by one from the client logs (--ergon.log_dir,
#     --ergon.wait_clock: each instruction waits at its begin for its clock, and the log's
#     freq_run is the clock it ran at; tests/e2e/check_clocks.py), not by a count of clock
#     changes; the same logs checked against the plan with one instruction of one rank 15 MHz
#     off must fail (the check sees a 15 MHz difference);
#   * receive waits were measured on every rank.
# Then an InstructionProfiler job on `ergon serve` profiles a torchtitan 1F1B run (M = 4, 5 clocks
# from 1410 to 870 MHz, the simulated GPU paced) and its CSV gives a Perseus frontier (M = 8).
# The tokenizer and the dataset are made here (torchtitan's wheel ships neither, and no hub is
# reachable): a word-level tokenizer of 2,003 tokens and 64 lines of its words.
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv torch torchtitan.trainer
tmp=$(mktemp -d)
spid=""
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
P=4 M=8
export HF_HOME="$tmp/hf" HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1
"$VPY" "$ERGON_SRC/examples/torchtitan/make_assets.py" "$tmp/assets" || fail "tokenizer and data"
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages $P --split-backward -o "$tmp/sim.csv" \
  >/dev/null 2>&1 || fail "profile sim"
"$ERGON" schedule ours --ranks $P --microbatches $M --format torch-csv -o "$tmp/ours.csv" ||
  fail "ergon schedule ours"
# ergon's schedule name : torchtitan's pipeline_parallel_schedule
cases="1f1b:1F1B interleaved-1f1b:Interleaved1F1B zbv:ZBVZeroBubble dualpipev:DualPipeV ours:1F1B"
for c in $cases; do
  s=${c%%:*}
  "$ERGON" schedule $s --ranks $P --microbatches $M --format torch-csv -o "$tmp/$s.expect.csv" ||
    fail "ergon schedule $s"
  "$ERGON" plan perseus --profile "$tmp/sim.csv" --schedule $s --stages $P --microbatches $M \
    --blocking-power 83.64 --out "$tmp/$s-f" --formats csv,json --quiet || fail "$s: plan perseus"
  "$ERGON" choose --frontier "$tmp/$s-f" --slowdown 1.05 --out "$tmp/$s.json" >/dev/null ||
    fail "$s: choose"
done
"$ERGON" serve --port 0 --db "$tmp/s.db" --dump "$tmp/dump" >"$tmp/serve.out" 2>"$tmp/serve.log" &
spid=$!
for _ in $(seq 600); do grep -q listening "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$tmp/serve.out")
[ -n "$port" ] || fail "ergon serve did not start: $(cat "$tmp/serve.log")"
"$VPY" - "$tmp" "$cases" "http://127.0.0.1:$port" <<'PY' || fail "writing the cases"
import json, sys
tmp, cases, url = sys.argv[1], sys.argv[2].split(), sys.argv[3]
common = ["--module", "llama3", "--config", "llama3_debugmodel",
          "--hf_assets_path", tmp + "/assets/tokenizer",
          "--dataloader.dataset_path", tmp + "/assets/c4_test",
          "--parallelism.pipeline_parallel_degree", "4",
          "--parallelism.pipeline_parallel_microbatch_size", "1", "--training.seq_len", "16", "--training.disable_cuda_graphs",
          "--validator.no-enable", "--checkpoint.no-enable", "--debug.seed", "7",
          "--debug.deterministic", "--metrics.log_freq", "100", "--dump_folder", tmp + "/titan"]
out = []
for c in cases:
    s, cls = c.split(":")
    args = common + ["--parallelism.pipeline_parallel_schedule", cls, "--training.steps", "2",
                     "--training.local_batch_size", "8"]
    if s == "ours":
        args += ["--parallelism.pipeline_parallel_schedule_csv", tmp + "/ours.csv"]
    args.append("activation-checkpoint:none")
    for run in ("max", "plan"):
        st = {"gpu": "sim:a100:gpt3-xl:4", "out": "%s/out/%s-%s" % (tmp, s, run),
              "log_dir": "%s/logs/%s-%s" % (tmp, s, run), "wait_clock": True}
        st.update({"clock": "max"} if run == "max" else {"plan": "%s/%s.json" % (tmp, s)})
        out.append({"name": "%s %s" % (s, run), "args": args, "settings": st})
# InstructionProfiler: 2 warm-up windows and one per clock (5, 135 MHz apart: Perseus fits a
# curve to >= 4), 2 steps each (the server drops a window's first step), M = 4; the simulated
# GPU paced with gpt3-6.7b's stage times (100 ms a forward, 200 ms a backward at 1410 MHz),
# well above the CPU's compute of the debug model; a sample is the device's time and energy.
args = common + ["--parallelism.pipeline_parallel_schedule", "1F1B", "--training.steps", "15",
                 "--training.local_batch_size", "4", "activation-checkpoint:none"]
out.append({"name": "1f1b InstructionProfiler", "args": args, "settings": {
    "gpu": "sim:a100:gpt3-6.7b:4", "out": tmp + "/out/profile", "server": url,
    "scheduler": "InstructionProfiler", "scheduler_args": {"minimum_power_state": 870},
    "power_states": "1410:870:135", "window_steps": 2, "pace": True,
    "job_file": tmp + "/job.txt"}})
json.dump(out, open(tmp + "/cases.json", "w"), indent=1)
PY
start=$(date +%s)
timeout -k 5 400 "$VPY" "$ERGON_SRC/examples/pytorch_pipeline/launch.py" --nproc $P \
  --timeout 380 -- "$ERGON_SRC/tests/python/torchtitan_check.py" "$tmp/cases.json" \
  >"$tmp/run.log" 2>&1
rc=$?
grep '^case ' "$tmp/run.log"
[ $rc -eq 0 ] || { grep -v '^\[titan\]' "$tmp/run.log" | tail -40; fail "the torchtitan launch exited $rc"; }
echo "4 ranks, $(grep -c '^case ' "$tmp/run.log") torchtitan Trainer runs in $(( $(date +%s) - start )) s"
"$VPY" - "$tmp" "$cases" $P <<'PY' || fail "checks"
import csv, io, json, sys
from ergon.integration.torchtitan import csv_order
tmp, cases, P = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
bad = []
for c in cases:
    s = c.split(":")[0]
    expect = [["%d%s%d" % (st, k, m) for k, st, m in csv_order("%s/%s.expect.csv" % (tmp, s), r)]
              for r in range(P)]
    res = {run: [json.load(open("%s/out/%s-%s/ergon-rank-%d.json" % (tmp, s, run, r)))
                 for r in range(P)] for run in ("max", "plan")}
    for run, rs in res.items():
        for r, x in enumerate(rs):
            if len(x["steps"]) != 2:
                bad.append("%s %s rank %d: %d steps" % (s, run, r, len(x["steps"])))
            for i, st in enumerate(x["steps"]):
                if st["order"] != expect[r]:
                    bad.append("%s %s rank %d step %d: hooks saw %s, ergon schedule says %s"
                               % (s, run, r, i, " ".join(st["order"]), " ".join(expect[r])))
                if not sum(sum(v) for v in (st["waits"] or {}).values()) > 0:
                    bad.append("%s %s rank %d step %d: no receive wait measured" % (s, run, r, i))
    loss = {run: [l for x in rs for st in x["steps"] for l in st.get("losses", [])]
            for run, rs in res.items()}
    if not loss["max"] or loss["max"] != loss["plan"]:
        bad.append("%s: losses all-max %s, planned %s" % (s, loss["max"], loss["plan"]))
    print("%-16s P=%d M=8: order = ergon schedule on %d ranks x 2 steps x 2 runs; %d losses "
          "bitwise identical; receive waits %s ms"
          % (s, P, P, len(loss["max"]),
             "/".join("%.0f" % (1e3 * sum(sum(v) for st in x["steps"] for v in st["waits"].values()))
                      for x in res["plan"])))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
# The clocks, instruction by instruction on every rank (the client logs' freq_run): all-max at
# 1410 MHz, the planned run at the plan's clocks; then the control: the same planned logs
# against the plan with one instruction of rank 2 15 MHz lower must fail.
for c in $cases; do
  s=${c%%:*}
  "$VPY" "$ERGON_SRC/tests/e2e/check_clocks.py" "$tmp/logs/$s-max" --ranks $P \
    --segment "2:1410@$tmp/$s.json" >"$tmp/clocks.txt" 2>&1 ||
    { cat "$tmp/clocks.txt"; fail "$s all-max: an instruction did not run at 1410 MHz"; }
  "$VPY" "$ERGON_SRC/tests/e2e/check_clocks.py" "$tmp/logs/$s-plan" --ranks $P \
    --segment "2:$tmp/$s.json" >"$tmp/clocks.txt" 2>&1 ||
    { cat "$tmp/clocks.txt"; fail "$s: an instruction did not run at the plan's clock"; }
  echo "$s clocks: $(tail -1 "$tmp/clocks.txt")"
done
"$VPY" - "$tmp/1f1b.json" "$tmp/1f1b-off.json" <<'PY' || fail "writing the control plan"
import json, sys
plan = json.load(open(sys.argv[1]))
st = next(x for x in plan["stages"] if x["stage"] == 2)
st["freq_mhz"][3] -= 15
json.dump(plan, open(sys.argv[2], "w"))
PY
if "$VPY" "$ERGON_SRC/tests/e2e/check_clocks.py" "$tmp/logs/1f1b-plan" --ranks $P \
     --segment "2:$tmp/1f1b-off.json" >"$tmp/clocks.txt" 2>&1; then
  cat "$tmp/clocks.txt"; fail "check_clocks passed a plan with one instruction 15 MHz off"
fi
grep -q "rank 2 segment 0 (1f1b-off.json) iteration 0, instruction .*planned" "$tmp/clocks.txt" ||
  { cat "$tmp/clocks.txt"; fail "check_clocks failed the control for another reason"; }
echo "control: $(grep FAIL "$tmp/clocks.txt")"
# The InstructionProfiler job: its CSV has every rank's forward and backward at every clock,
# and it is a profile `ergon plan perseus` turns into a frontier.
job=$(cat "$tmp/job.txt") || fail "no job id"
prof=$(ls "$tmp/dump/$job"/*.csv 2>/dev/null | head -1)
[ -n "$prof" ] || fail "no InstructionProfiler CSV in $tmp/dump/$job: $(ls "$tmp/dump" 2>&1)"
"$VPY" - "$prof" $P <<'PY' || fail "InstructionProfiler rows"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
got = {(int(x["stage"]), x["instruction"], int(x["frequency"])) for x in rows if x["time"]}
clocks = (1410, 1275, 1140, 1005, 870)
need = {(r, k, f) for r in range(int(sys.argv[2])) for k in ("forward", "backward")
        for f in clocks}
assert need <= got, sorted(need - got)
print("InstructionProfiler: %d rows, every rank's forward and backward at %s MHz"
      % (len(rows), "/".join(map(str, clocks))))
PY
"$ERGON" plan perseus --profile "$prof" --stages $P --microbatches $M --blocking-power 83.64 \
  --out "$tmp/prof-f" --formats csv,json >"$tmp/perseus.txt" 2>&1 ||
  { cat "$tmp/perseus.txt"; fail "plan perseus on the torchtitan profile"; }
n=$(ls "$tmp/prof-f"/plan_*.json 2>/dev/null | wc -l)
[ "$n" -ge 1 ] || { cat "$tmp/perseus.txt"; fail "no plan in the frontier of the torchtitan profile"; }
echo "frontier of the torchtitan profile: $n plans; $(grep -m1 'plans in' "$tmp/perseus.txt")"
echo "PASS"
