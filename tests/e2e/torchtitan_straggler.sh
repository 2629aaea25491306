#!/usr/bin/env bash
# torchtitan_straggler.sh: straggler targets changed while torchtitan's own Trainer runs a
# Frontier job on `ergon serve`. 4 CPU ranks (gloo, ergon.integration.torchtitan's CPU shim),
# the debug Llama model, torchtitan's 1F1B, PP = 4, M = 4, one iteration per window: the job
# (--ergon.server, scheduler Frontier on a Perseus frontier of the simulated A100, slowdown 1.0)
# runs 6 windows, then training goes on one step at the top clock. Mid-run the target changes
# through the server's API (POST /v1/jobs/ID/straggler): rank 0 posts slowdown 1.2 after the
# step of window 1 and before reporting it, and slowdown 1.1 likewise in window 3
# (tests/python/torchtitan_check.py, "straggler"); window W cannot complete before rank 0
# reports it, so the server answers applies_from_window = W + 1 -- the test synchronises on
# windows, never on time. The same job then runs on PP = 2 x DP = 2 (torchtitan's
# data_parallel_replicate_degree 2: two replicas of a 2-stage pipeline on the 4 ranks).
# Checks, for both:
#   * the server's answers are applies_from_window 2 and 4, and its windows table records no
#     target for windows 0-1 (the job's slowdown 1.0), 1.2 for 2-3 and 1.1 for 4-5, and for
#     each window the frontier plan `ergon choose --slowdown X` picks for that target;
#   * on every rank, each window's served clocks are the plan `ergon choose --slowdown X`
#     picks from the same frontier for that window's target X, and that plan differs on every
#     rank before and after each change;
#   * every instruction of every rank ran at that plan's clock, window by window, and the
#     step after the job at 1410 MHz: the client logs' freq_run (--ergon.log_dir,
#     --ergon.wait_clock), checked one by one by tests/e2e/check_clocks.py, for each replica;
#   * every rank of every replica registered under its own rank (global rank g: dp_rank g % DP,
#     pp_rank g // DP, as torchtitan's mesh has pp outermost) and reported every window.
# (FSDP, data_parallel_shard_degree > 1, cannot run here: gloo has no ReduceOp.PREMUL_SUM.)
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv torch torchtitan.trainer
tmp=$(mktemp -d)
spid=""
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export HF_HOME="$tmp/hf" HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1
M=4 WINDOWS=6 STEPS=7
"$VPY" "$ERGON_SRC/examples/torchtitan/make_assets.py" "$tmp/assets" || fail "tokenizer and data"
mkdir -p "$tmp/plans"
for P in 4 2; do
  "$ERGON" profile sim --gpu a100 --model gpt3-xl --stages $P --split-backward \
    -o "$tmp/sim$P.csv" >/dev/null 2>&1 || fail "profile sim"
  "$ERGON" plan perseus --profile "$tmp/sim$P.csv" --schedule 1f1b --stages $P --microbatches $M \
    --blocking-power 83.64 --out "$tmp/plans/f$P" --formats csv,json --quiet || fail "plan perseus"
  for x in 1.0 1.2 1.1; do
    "$ERGON" choose --frontier "$tmp/plans/f$P" --slowdown $x --out "$tmp/p$P-$x.json" \
      >"$tmp/p$P-$x.txt" || fail "choose --slowdown $x"
  done
done
"$ERGON" serve --port 0 --db "$tmp/s.db" --dump "$tmp/dump" --plans-dir "$tmp/plans" \
  >"$tmp/serve.out" 2>"$tmp/serve.log" &
spid=$!
for _ in $(seq 600); do grep -q listening "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$tmp/serve.out")
[ -n "$port" ] || fail "ergon serve did not start: $(cat "$tmp/serve.log")"
"$VPY" - "$tmp" "http://127.0.0.1:$port" $M $WINDOWS $STEPS <<'PY' || fail "writing the cases"
import json, sys
tmp, url, M, windows, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
common = ["--module", "llama3", "--config", "llama3_debugmodel",
          "--hf_assets_path", tmp + "/assets/tokenizer",
          "--dataloader.dataset_path", tmp + "/assets/c4_test",
          "--parallelism.pipeline_parallel_schedule", "1F1B", "--training.local_batch_size", M,
          "--parallelism.pipeline_parallel_microbatch_size", "1", "--training.seq_len", "16",
          "--training.steps", steps, "--training.disable_cuda_graphs", "--validator.no-enable",
          "--checkpoint.no-enable", "--debug.seed", "7", "--debug.deterministic",
          "--metrics.log_freq", "100", "--dump_folder", tmp + "/titan"]
cases = []
for name, P, extra in (("pp4", 4, []), ("pp2dp2", 2, [
        "--parallelism.data_parallel_replicate_degree", "2",
        "--parallelism.data_parallel_shard_degree", "1"])):
    cases.append({"name": "1f1b Frontier %s" % name, "straggler": [
        {"window": 1, "slowdown": 1.2}, {"window": 3, "slowdown": 1.1}],
        "args": common + ["--parallelism.pipeline_parallel_degree", str(P)] + extra +
        ["activation-checkpoint:none"],
        "settings": {"gpu": "sim:a100:gpt3-xl:%d" % P, "out": "%s/out/%s" % (tmp, name),
                     "log_dir": "%s/logs/%s" % (tmp, name), "wait_clock": True, "server": url,
                     "scheduler": "Frontier", "scheduler_args": {
                         "frontier_dir": "%s/plans/f%d" % (tmp, P), "slowdown": 1.0},
                     "window_steps": 1, "max_windows": windows,
                     "job_file": "%s/job-%s.txt" % (tmp, name)}})
json.dump(cases, open(tmp + "/cases.json", "w"), indent=1)
PY
start=$(date +%s)
timeout -k 5 400 "$VPY" "$ERGON_SRC/examples/pytorch_pipeline/launch.py" --nproc 4 \
  --timeout 380 -- "$ERGON_SRC/tests/python/torchtitan_check.py" "$tmp/cases.json" \
  >"$tmp/run.log" 2>&1
rc=$?
grep '^case ' "$tmp/run.log"
[ $rc -eq 0 ] || { grep -v '^\[titan\]' "$tmp/run.log" | tail -40; fail "the torchtitan launch exited $rc"; }
echo "4 ranks, $(grep -c '^case ' "$tmp/run.log") torchtitan Trainer runs in $(( $(date +%s) - start )) s"
kill $spid && wait $spid 2>/dev/null
spid=""
# Window by window: the target the server recorded, the clocks it served, the plan for it.
"$VPY" - "$tmp" $WINDOWS $STEPS pp4:4:1 pp2dp2:2:2 <<'PY' >"$tmp/check.txt" 2>&1 || { cat "$tmp/check.txt"; fail "the straggler targets did not do what they claim"; }
import json, re, sqlite3, sys
tmp, windows, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
target = lambda w: 1.0 if w < 2 else 1.2 if w < 4 else 1.1
db = sqlite3.connect("file:%s/s.db?mode=ro" % tmp, uri=True)
for spec in sys.argv[4:]:
    name, P, DP = spec.split(":")
    P, DP = int(P), int(DP)
    job = open("%s/job-%s.txt" % (tmp, name)).read().strip()
    answers = json.load(open("%s/out/%s/straggler.json" % (tmp, name)))
    assert [a["answer"]["applies_from_window"] for a in answers] == [2, 4], answers
    rows = db.execute("SELECT window, tkind, tval, choice FROM windows WHERE job_id = ? "
                      "ORDER BY window", (job,)).fetchall()
    pick = {x: int(re.match(r"plan (\d+):", open("%s/p%d-%s.txt" % (tmp, P, x)).read()).group(1))
            for x in (1.0, 1.2, 1.1)}
    choices = [c for _, _, _, c in rows[:windows]]
    assert choices == [pick[target(w)] for w in range(windows)], (choices, pick)
    rows = [r[:3] for r in rows]
    # The targets (kind 0: no target posted yet, the job's own slowdown 1.0; one more row: the window the
    # server scheduled after the last one, which the job's end left unrun.)
    want = [(w, 0, 0.0) if w < 2 else (w, 1, target(w)) for w in range(windows)]
    assert rows[:windows] == want and len(rows) <= windows + 1, rows
    plan = {x: [s["freq_mhz"] for s in json.load(open("%s/p%d-%s.json" % (tmp, P, x)))["stages"]]
            for x in (1.0, 1.2, 1.1)}
    # Every rank of every replica registered under its own rank and reported every window.
    got = sorted((r, json.loads(i)["dp_rank"], json.loads(i)["pp_rank"]) for r, i in db.execute(
        "SELECT rank, info FROM ranks WHERE job_id = ?", (job,)))
    assert got == [(g, g % DP, g // DP) for g in range(P * DP)], got   # pp outermost
    got = db.execute("SELECT window, COUNT(DISTINCT rank) FROM results WHERE job_id = ? "
                     "GROUP BY window ORDER BY window", (job,)).fetchall()
    assert got == [(w, P * DP) for w in range(windows)], got
    for r in range(P):
        assert plan[1.0][r] != plan[1.2][r] and plan[1.2][r] != plan[1.1][r], (r, plan)
    for g in range(P * DP):
        x = json.load(open("%s/out/%s/ergon-rank-%d.json" % (tmp, name, g)))
        pp = x.get("pp_rank", x["rank"])
        srv = x["server"]
        assert srv["job_id"] == job and srv["window_ids"] == list(range(windows)), (g, srv)
        assert len(x["steps"]) == steps, (g, len(x["steps"]))
        for w, ps in enumerate(srv["power_states"]):
            assert ps == plan[target(w)][pp], (g, w, ps, plan[target(w)][pp])
    print("%s: %d ranks registered as (dp, pp) %s, each reported windows 0-%d; targets %s; "
          "every rank's served clocks = ergon choose's plan for its window's target (%s)"
          % (name, P * DP, " ".join("(%d,%d)" % (g % DP, g // DP) for g in range(P * DP)),
             windows - 1, "/".join("%g" % target(w) for w in range(windows)), job))
PY
cat "$tmp/check.txt"
# Instruction by instruction: the plan of each window's target, then the top clock.
for spec in pp4:4:1 pp2dp2:2:2; do
  IFS=: read -r name P DP <<<"$spec"
  segs=()
  for w in $(seq 0 $((WINDOWS - 1))); do
    x=1.0; [ $w -ge 2 ] && x=1.2; [ $w -ge 4 ] && x=1.1
    segs+=(--segment "1:$tmp/p$P-$x.json")
  done
  segs+=(--segment "$((STEPS - WINDOWS)):1410@$tmp/p$P-1.0.json")
  # Each data-parallel replica d is a pipeline of its own: stage s is global rank s*DP + d.
  for d in $(seq 0 $((DP - 1))); do
    mkdir -p "$tmp/logs/$name-dp$d"
    for s in $(seq 0 $((P - 1))); do
      ln -s "$tmp/logs/$name/instructions-$((s * DP + d)).csv" "$tmp/logs/$name-dp$d/instructions-$s.csv"
    done
    "$VPY" "$ERGON_SRC/tests/e2e/check_clocks.py" "$tmp/logs/$name-dp$d" --ranks $P "${segs[@]}" \
      >"$tmp/clocks.txt" 2>&1 || { cat "$tmp/clocks.txt"; fail "$name replica $d: an instruction did not run at its window's clock"; }
    echo "$name replica $d clocks: $(tail -1 "$tmp/clocks.txt")"
  done
done
echo "PASS"
