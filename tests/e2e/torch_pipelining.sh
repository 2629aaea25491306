#!/usr/bin/env bash
# torch_pipelining.sh: ergon inside PyTorch's own pipeline runtime (torch.distributed.pipelining
# of the venv's torch 2.x, `make py-deps`). On 4 CPU ranks (gloo), the example's Llama-style
# model in real PipelineStage objects, every schedule class torch ships (ScheduleGPipe,
# Schedule1F1B, ScheduleInterleaved1F1B, ScheduleLoopedBFS, ScheduleInterleavedZeroBubble,
# ScheduleZBVZeroBubble, ScheduleDualPipeV), M in {P, 2P}, ergon's hooks
# (ergon.integration.torch_pipelining) applying each instruction's clock on the simulated GPU:
#   * the per-rank (kind, stage, microbatch) sequence the hooks saw equals `ergon schedule NAME
#     --format torch-csv` (overlapped steps as their two parts);
#   * all-max and Perseus-planned runs give bitwise identical losses;
#   * every instruction of every rank ran at its clock: the top clock in the all-max runs, the
#     plan's in the planned runs, from the client logs (freq_run; tests/e2e/check_clocks.py);
#   * receive waits are measured inside torch's runtime;
#   * a case torch refuses (dualpipev M=4) ergon refuses too; no hang (launch.py timeout).
# All cases in one process group (one python per rank).
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv torch torch.distributed.pipelining
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
P=4
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages $P --split-backward -o "$tmp/sim.csv" \
  >/dev/null 2>&1 || fail "profile sim"
cases="" segs=()
for s in gpipe 1f1b interleaved-1f1b looped-bfs interleaved-zb zbv dualpipev; do
  for M in $P $((2 * P)); do
    cases="$cases${cases:+,}$s:$M"
    [ $s = dualpipev ] && [ $M -lt $((2 * P)) ] && continue   # refused by both (checked)
    "$ERGON" plan perseus --profile "$tmp/sim.csv" --schedule $s --stages $P --microbatches $M \
      --blocking-power 83.64 --out "$tmp/$s-$M-f" --formats csv,json --quiet ||
      fail "$s M=$M: plan perseus"
    "$ERGON" choose --frontier "$tmp/$s-$M-f" --slowdown 1.05 --out "$tmp/$s-$M.json" \
      >/dev/null || fail "$s M=$M: choose"
    segs+=(--segment "2:1410@$tmp/$s-$M.json" --segment "2:$tmp/$s-$M.json")
  done
done
export OMP_NUM_THREADS=1
timeout -k 5 280 "$VPY" "$ERGON_SRC/examples/pytorch_pipeline/launch.py" --nproc $P \
  --timeout 240 -- "$ERGON_SRC/tests/e2e/torch_pipelining_check.py" --ergon "$ERGON" \
  --plans "$tmp" --cases "$cases" --steps 2 --logs "$tmp/logs" >"$tmp/out.log" 2>&1
rc=$?
cat "$tmp/out.log"
[ $rc -eq 0 ] || fail "torch pipelining check exited $rc"
n=$(grep -c ' ok$' "$tmp/out.log")
[ "$n" -eq 14 ] || fail "expected 14 cases ok, got $n"
# Per rank, per instruction: the clock it ran at (the top clock, 1410 MHz, then the plan's).
"$VPY" "$ERGON_SRC/tests/e2e/check_clocks.py" "$tmp/logs" --ranks $P "${segs[@]}" ||
  fail "an instruction did not run at its clock"
echo "PASS: 14 (schedule, M) cases on torch $("$VPY" -c 'import torch; print(torch.__version__)')"
