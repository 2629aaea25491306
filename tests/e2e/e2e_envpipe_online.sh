#!/usr/bin/env bash
# e2e_envpipe_online.sh: EnvPipe online. The PyTorch trainer (S=3, M=4, 1F1B, one iteration
# per window, the paced simulated GPU with bert-large timings so a window takes ~0.3 s) runs a job of the server's EnvPipe scheduler: the
# ranks run PyTorch's own runtime (Schedule1F1B of the venv's torch 2), measure the
# host-clock wait of every receive PyTorch waits on (ergon.integration.torch_pipelining) and report it
# (wait_breakdown); the scheduler profiles 4 clocks, plans with erg_plan_envpipe, applies one
# measured reconfiguration step per window until EnvPipe's termination rule holds, serves the
# final plan for one window and ends the job. Checks: the job ran to termination (dump:
# envpipe.log, envpipe-windows.csv), reconfiguration windows ran with measured waits, the
# plan lowered clocks, and the losses are bitwise identical to an all-max run of as many steps.
source "$(dirname "$0")/e2e_lib.bash"
"$ERGON" serve --help >/dev/null 2>&1 || skip_or_fail "this build has no ergon serve"

S=3 M=4
"$ERGON" serve --port 0 --db "$tmp/s.db" --dump "$tmp/dump" >"$tmp/out.txt" 2>"$tmp/serve.log" &
spid=$!
trap 'kill $spid 2>/dev/null; wait $spid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 600); do grep -q listening "$tmp/out.txt" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$tmp/out.txt")
[ -n "$port" ] || fail "server did not start"
args='{"blocking_power_w": 83.64, "type": "envelope", "scheduling": "1f1b",
       "reconfigure": "balanced", "reconfig_step_mhz": 60, "warmup_windows": 1,
       "finish_limit": 2, "final_windows": 1}'
launch $S 150 --server "http://127.0.0.1:$port" --model llama --sim-model bert-large --microbatches $M --window-steps 1 \
  --scheduler EnvPipe --scheduler-args "$args" --power-states 1410:1230:60 \
  --out "$tmp/envpipe" >"$tmp/envpipe.log" 2>&1 || { cat "$tmp/envpipe.log"; fail "EnvPipe run"; }
steps=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["steps"]))' \
  "$tmp/envpipe/result-$((S - 1)).json")
launch $S 150 --model llama --sim-model bert-large --microbatches $M --steps "$steps" --clock max --out "$tmp/max" \
  >"$tmp/max.log" 2>&1 || { cat "$tmp/max.log"; fail "all-max run"; }
losses "$tmp/envpipe/result-$((S - 1)).json" >"$tmp/envpipe.txt"
losses "$tmp/max/result-$((S - 1)).json" >"$tmp/max.txt"
[ "$(wc -l <"$tmp/max.txt")" -eq "$steps" ] || fail "all-max run has no $steps losses"
cmp -s "$tmp/envpipe.txt" "$tmp/max.txt" || {
  paste "$tmp/envpipe.txt" "$tmp/max.txt"; fail "EnvPipe online losses differ from all-max"; }
"$PY" - "$tmp" $S <<'PY' || { cat "$tmp"/dump/*EnvPipe*/envpipe.log 2>/dev/null; fail "the EnvPipe job did not do what it claims"; }
import csv, glob, json, sys
tmp, S = sys.argv[1], int(sys.argv[2])
d = glob.glob(tmp + "/dump/*EnvPipe*")
assert len(d) == 1, d
log = open(d[0] + "/envpipe.log").read()
rows = list(csv.DictReader(open(d[0] + "/envpipe-windows.csv")))
phases = [r["phase"] for r in rows]
assert phases[:5] == ["warmup"] + ["profile"] * 4, phases
rec = [r for r in rows if r["phase"] == "reconfigure"]
assert len(rec) >= 3, phases                  # finish_limit 2: at least 3 quiet windows
assert [r["changed"] for r in rec[-3:]] == ["0"] * 3, [r["changed"] for r in rec]
assert all(r["path"].startswith("S0B3") and r["path"].endswith("S0F0") for r in rec), rec
assert phases[-1] == "final" and phases.count("final") == 1, phases
assert "threshold " in log and "terminated after %d reconfiguration windows" % len(rec) in log, log
assert log.count("Stage 0 |") == len(rec), log
res = [json.load(open("%s/envpipe/result-%d.json" % (tmp, r))) for r in range(S)]
for x in res:
    assert x["windows"] == len(rows) and x["paced"] and x["gpu"] == "sim", (x["windows"], len(rows))
    # PyTorch's own runtime (Schedule1F1B of the venv's torch 2): the waits are its receives'
    assert x["runtime"] == "torch" and not x["torch"].startswith("1."), (x["runtime"], x["torch"])
# the plan lowered clocks below the top one (profiled energy valley) on some stage
lowered = [w for x in res for w in x["power_states"][5:] if min(w) < 1410]
assert lowered, "no window ran below 1410 MHz"
# waits were measured: every non-first rank waited in some receive
assert all(sum(s["recv_wait_s"] for s in x["steps"]) > 0 for x in res[1:])
changed = sum(r["changed"] == "1" for r in rec)
print("EnvPipe online on PyTorch %s's Schedule1F1B: %d windows (5 profiling, %d reconfiguration of which %d changed clocks, "
      "1 final); %s" % (res[0]["torch"], len(rows), len(rec), changed,
                       [l for l in log.splitlines() if l.startswith("terminated")][0]))
PY
echo "EnvPipe online: $steps losses == all-max"
echo "PASS"
