#!/usr/bin/env bash
# megatron_pipeline.sh: Megatron-core's REAL schedules (requirements.txt's megatron-core,
# get_forward_backward_func(): 1F1B and interleaved 1F1B with V=2) on 4 CPU ranks (gloo, P2P
# timeout 5 s, one launch) with ergon.integration.megatron's hooks on forward_step and
# backward_step (and its cpu_shim for the schedule path's two CUDA allocations). For M in
# {4, 8} each schedule runs at all-max and at a plan's clocks. Checks: the order each rank ran,
# as its hooks saw it, equals `ergon schedule 1f1b` / ergon.rank_order('interleaved-1f1b', V=2)
# on every rank and step; every non-first rank measured receive waits (the P2PCommunicator
# receives, timed); every instruction of every rank ran at its clock -- the top clock in the
# all-max runs, the plan's in the planned runs -- checked one by one from the client logs
# (the client waits for each clock at begin and logs it: freq_run; tests/e2e/check_clocks.py),
# not by a count of clock changes (which depends on how often the clock thread ran); the
# planned runs' losses are bitwise identical to the all-max runs'; no deadlock (the launch
# ends under a timeout).
# All cases run in one launch of examples/megatron_pipeline/train.py's pipeline through
# tests/e2e/harness/megatron_cases.py; then the example itself, as docs/integrations.md
# (Megatron-core) launches it, runs one case: its losses equal that case's in the launch.
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv megatron.core
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
P=4 V=2
"$VPY" - "$tmp" $P $V <<'PY' || fail "writing the plans"
import json, sys
import ergon
tmp, P, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
letters = {ergon.FORWARD: "F", ergon.BACKWARD: "B"}
clocks = [1410, 1230, 1050, 1335, 1140]
for name, sched in (("1f1b", ergon.Schedule("1f1b")),
                    ("interleaved", ergon.Schedule("interleaved-1f1b", chunks=V))):
    for M in (4, 8):
        stages = []
        for r in range(P):
            order = ergon.rank_order(sched, P, M, r)[0]
            st = {"stage": r, "freq_mhz": [clocks[(r + i) % len(clocks)] for i in range(len(order))]}
            if name != "1f1b":
                st["order"] = ["%d%s%d" % (x[1], letters[x[0]], x[2]) for x in order]
            stages.append(st)
        plan = {"format": "ergon-plan", "version": 1, "schedule": sched.name, "num_stages": P,
                "num_microbatches": M, "method": "test", "stages": stages}
        if name != "1f1b":
            plan["num_chunks"] = V
        json.dump(plan, open("%s/%s%d.json" % (tmp, name, M), "w"))
PY
for M in 4 8; do
  "$ERGON" schedule 1f1b --ranks $P --microbatches $M >"$tmp/1f1b-order-$M.txt" || fail "ergon schedule"
done
cases=() segs=()
for s in 1f1b interleaved; do
  for M in 4 8; do
    cases+=(--case $s,$M --case $s,$M,"$tmp/$s$M.json")
    segs+=(--segment "2:1410@$tmp/$s$M.json" --segment "2:$tmp/$s$M.json")
  done
done
start=$(date +%s)
timeout -k 5 300 "$VPY" -m torch.distributed.run --standalone --nproc-per-node $P \
  "$ERGON_SRC/tests/e2e/harness/megatron_cases.py" "${cases[@]}" --chunks $V --steps 2 \
  --p2p-timeout 5 --out "$tmp/out" --log-dir "$tmp/logs" >"$tmp/run.log" 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -40 "$tmp/run.log"; fail "the Megatron launch exited $rc (124: timeout, a deadlock?)"; }
grep "^megatron " "$tmp/run.log"
"$VPY" - "$tmp" $P $V <<'PY' || fail "checks"
import json, sys
import ergon
tmp, P, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
res = [json.load(open("%s/out/result-%d.json" % (tmp, r))) for r in range(P)]
L = {"F": ergon.FORWARD, "B": ergon.BACKWARD}

def expected(c, r):
    if c["schedule"] == "1f1b":      # the CLI's text: "rank R: 0F0 0F1 ... 0B0 ..."
        for line in open("%s/1f1b-order-%d.txt" % (tmp, c["M"])):
            if line.startswith("rank %d:" % r):
                out = []
                for tok in line.split()[2:]:
                    i = tok.index("F") if "F" in tok else tok.index("B")
                    out.append((L[tok[i]], 0, int(tok[i + 1:])))
                return out
        raise SystemExit("rank %d missing from ergon schedule's output" % r)
    order, place = ergon.rank_order(ergon.Schedule("interleaved-1f1b", chunks=V), P, c["M"], r)
    local = sorted(s for s in range(len(place)) if place[s] == r)
    return [(k, local.index(s), mb) for k, s, mb, *_ in order]

bad = []
n = len(res[0]["cases"])
for i in range(n):
    c0 = res[0]["cases"][i]
    name = "%s V=%d M=%d %s" % (c0["schedule"], c0["V"], c0["M"], "plan" if c0["plan"] else "max")
    for r in range(P):
        c = res[r]["cases"][i]
        want = expected(c, r)
        if r > 0 and not all(w > 0 for w in c["recv_wait_s"]):
            bad.append("%s rank %d measured no receive wait: %s" % (name, r, c["recv_wait_s"]))
        for step, got in enumerate(c["orders"]):
            if [tuple(x) for x in got] != want:
                bad.append("%s rank %d step %d ran %s, ergon says %s" % (name, r, step, got, want))
    if c0["plan"]:
        mx = next(x for x in res[0]["cases"] if (x["schedule"], x["M"], x["plan"]) ==
                  (c0["schedule"], c0["M"], ""))
        if c0["loss_hex"] != mx["loss_hex"]:
            bad.append("%s: losses %s != all-max %s" % (name, c0["losses"], mx["losses"]))
        print("%s: orders == ergon's on every rank, losses bitwise == all-max" % name)
if bad:
    print("\n".join(bad[:20]))
    sys.exit(1)
PY
# The clocks, per rank and per instruction: the case order of the launch, 2 steps each.
"$VPY" "$ERGON_SRC/tests/e2e/check_clocks.py" "$tmp/logs" --ranks $P "${segs[@]}" ||
  fail "an instruction did not run at its clock"
echo "Megatron pipeline: $(( $(date +%s) - start )) s for one launch"
# The example as docs/integrations.md launches it: one schedule, the plan's clocks.
timeout -k 5 200 "$VPY" -m torch.distributed.run --standalone --nproc-per-node $P \
  "$ERGON_SRC/examples/megatron_pipeline/train.py" --schedule interleaved --microbatches 8 \
  --plan "$tmp/interleaved8.json" --out "$tmp/plain" >"$tmp/plain.log" 2>&1 ||
  { tail -40 "$tmp/plain.log"; fail "the example's own launch failed"; }
"$VPY" - "$tmp" $P <<'PY' || fail "the example's own launch differs from its case"
import json, sys
tmp, P = sys.argv[1], int(sys.argv[2])
for r in range(P):
    got = json.load(open("%s/plain/result-%d.json" % (tmp, r)))
    case = [c for c in json.load(open("%s/out/result-%d.json" % (tmp, r)))["cases"]
            if (c["schedule"], c["M"], c["plan"]) == ("interleaved", 8, got["plan"])][0]
    for k in ("orders", "loss_hex"):
        if got[k] != case[k]:
            sys.exit("rank %d: the example's %s %s, its case in the launch %s" % (r, k, got[k], case[k]))
print("the example's own launch (interleaved, M=8, plan): orders and losses == its case's")
PY
echo "PASS"
