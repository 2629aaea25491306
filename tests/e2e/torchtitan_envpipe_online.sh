#!/usr/bin/env bash
# torchtitan_envpipe_online.sh: EnvPipe online inside torchtitan's own Trainer. 4 CPU ranks
# (gloo, ergon.integration.torchtitan's CPU shim), the debug Llama model, torchtitan's 1F1B,
# PP = 4, M = 4, one iteration per window, the simulated GPU paced with bert-large's stage
# times: a job of `ergon serve`'s EnvPipe scheduler (--ergon.server, scheduler EnvPipe) that
# profiles 4 clocks, plans with erg_plan_envpipe from the receive waits every rank measures
# inside torch's runtime (wait_breakdown), reconfigures one step per window until EnvPipe's
# termination rule holds, serves the final plan and ends the job; training then goes on at the
# top clock. Then an all-max run of as many steps in the same process group. Checks: the job
# terminated (dump: envpipe.log, envpipe-windows.csv: warm-up, 4 profile windows, >= 3
# reconfiguration windows, one final), every rank ran every window the server served, some
# window ran below 1410 MHz, every rank measured receive waits, and the losses are bitwise
# identical to the all-max run's. (tests/e2e/e2e_envpipe_online.sh: the same on the example
# trainer.)
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv torch torchtitan.trainer
tmp=$(mktemp -d)
spid=""
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export HF_HOME="$tmp/hf" HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1
"$VPY" "$ERGON_SRC/examples/torchtitan/make_assets.py" "$tmp/assets" || fail "tokenizer and data"
"$ERGON" serve --port 0 --db "$tmp/s.db" --dump "$tmp/dump" >"$tmp/serve.out" 2>"$tmp/serve.log" &
spid=$!
for _ in $(seq 600); do grep -q listening "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$tmp/serve.out")
[ -n "$port" ] || fail "ergon serve did not start: $(cat "$tmp/serve.log")"
# The step budget is EnvPipe's worst case, so that termination never depends on how noisy
# the measured waits are (a loaded host moves the critical path from window to window): a
# reconfiguration window that changes something raises at least one instruction by one
# 60 MHz step and nothing is ever lowered; from the energy-valley plan (stages 0-2 at 1230,
# their F0 and B3 already at 1410 in the outer envelope) that is at most 3 stages x 6
# instructions x 3 steps = 54 changing windows, then finish_limit + 1 = 3 quiet ones. So
# 1 warm-up + 4 profile + 57 + 1 final = 63 windows, one step each; 64 steps.
STEPS=64
"$VPY" - "$tmp" "http://127.0.0.1:$port" $STEPS <<'PY' || fail "writing the cases"
import json, sys
tmp, url, steps = sys.argv[1], sys.argv[2], sys.argv[3]
args = ["--module", "llama3", "--config", "llama3_debugmodel",
        "--hf_assets_path", tmp + "/assets/tokenizer",
        "--dataloader.dataset_path", tmp + "/assets/c4_test",
        "--parallelism.pipeline_parallel_degree", "4", "--parallelism.pipeline_parallel_schedule",
        "1F1B", "--training.local_batch_size", "4",
        "--parallelism.pipeline_parallel_microbatch_size", "1", "--training.seq_len", "16",
        "--training.steps", steps, "--training.disable_cuda_graphs", "--validator.no-enable",
        "--checkpoint.no-enable", "--debug.seed", "7", "--debug.deterministic",
        "--metrics.log_freq", "100", "--dump_folder", tmp + "/titan", "activation-checkpoint:none"]
sargs = {"blocking_power_w": 83.64, "type": "envelope", "scheduling": "1f1b",
         "reconfigure": "balanced", "reconfig_step_mhz": 60, "warmup_windows": 1,
         "finish_limit": 2, "final_windows": 1}
gpu = "sim:a100:bert-large:4"
json.dump([{"name": "1f1b EnvPipe online", "args": args, "settings": {
               "gpu": gpu, "out": tmp + "/out/envpipe", "server": url, "scheduler": "EnvPipe",
               "scheduler_args": sargs, "power_states": "1410:1230:60", "window_steps": 1,
               "pace": True, "job_file": tmp + "/job.txt"}},
           {"name": "1f1b all-max", "args": args, "settings": {
               "gpu": gpu, "out": tmp + "/out/max", "clock": "max"}}],
          open(tmp + "/cases.json", "w"), indent=1)
PY
timeout -k 5 600 "$VPY" "$ERGON_SRC/examples/pytorch_pipeline/launch.py" --nproc 4 \
  --timeout 580 -- "$ERGON_SRC/tests/python/torchtitan_check.py" "$tmp/cases.json" \
  >"$tmp/run.log" 2>&1
rc=$?
grep '^case ' "$tmp/run.log"
[ $rc -eq 0 ] || { grep -v '^\[titan\]' "$tmp/run.log" | tail -40; fail "the torchtitan launch exited $rc"; }
"$VPY" - "$tmp" $STEPS <<'PY' || { cat "$tmp"/dump/*EnvPipe*/envpipe.log 2>/dev/null; fail "the EnvPipe job did not do what it claims"; }
import csv, glob, json, sys
tmp, steps = sys.argv[1], int(sys.argv[2])
job = open(tmp + "/job.txt").read().strip()
d = tmp + "/dump/" + job
log = open(d + "/envpipe.log").read()
rows = list(csv.DictReader(open(d + "/envpipe-windows.csv")))
phases = [r["phase"] for r in rows]
assert phases[:5] == ["warmup"] + ["profile"] * 4, phases
rec = [r for r in rows if r["phase"] == "reconfigure"]
assert len(rec) >= 3 and [r["changed"] for r in rec[-3:]] == ["0"] * 3, phases
assert phases[-1] == "final" and phases.count("final") == 1, phases
assert "terminated after %d reconfiguration windows" % len(rec) in log, log
res = [json.load(open("%s/out/envpipe/ergon-rank-%d.json" % (tmp, r))) for r in range(4)]
mx = [json.load(open("%s/out/max/ergon-rank-%d.json" % (tmp, r))) for r in range(4)]
for r, x in enumerate(res):
    assert x["server"]["job_id"] == job and x["server"]["windows"] == len(rows), (r, x["server"])
    assert len(x["steps"]) == steps, (r, len(x["steps"]))
    assert sum(sum(v) for s in x["steps"] for v in s["waits"].values()) > 0, r
lowered = [w for x in res for w in x["server"]["power_states"][5:] if min(w) < 1410]
assert lowered, "no window ran below 1410 MHz"
loss = lambda rs: [l for x in rs for s in x["steps"] for l in s.get("losses", [])]
assert len(loss(mx)) == steps * 4 and loss(res) == loss(mx), (loss(res)[:4], loss(mx)[:4])
print("EnvPipe online in torchtitan's Trainer: %d windows (5 profiling, %d reconfiguration, "
      "1 final), %d windows below 1410 MHz; %d losses bitwise identical to all-max; %s"
      % (len(rows), len(rec), len(lowered), len(loss(mx)),
         [l for l in log.splitlines() if l.startswith("terminated")][0]))
PY
echo "PASS"
