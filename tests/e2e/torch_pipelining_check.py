"""torch_pipelining_check.py: one rank of the real-PyTorch-pipelining test (tests/e2e/
torch_pipelining.sh starts 4 of them with examples/pytorch_pipeline/launch.py).

For every case NAME:M of --cases, on this rank: the example's Llama-style model split into
P*V stages, real `PipelineStage` objects, the real schedule class of torch 2.x, ergon's hooks
(ergon.integration.torch_pipelining.TorchPipeliningHooks) on a simulated GPU, and
  1. --steps iterations at all-max clocks, then --steps with the case's plan
     (--plans DIR/NAME-M.json, a Perseus plan: clocks change per instruction);
  2. the (kind, stage, microbatch) sequence the hooks saw in every iteration must equal
     this rank's row of `ergon schedule NAME --ranks P --microbatches M --format torch-csv`
     (an OVERLAP_F_B cell as its two parts, in the cell's order: how torch runs it);
  3. the losses of both runs must be bitwise identical (checked on the last stage's rank,
     the verdict shared with every rank);
  4. receive waits were measured (hooks.last_waits) on every rank but the first stage's.
The client waits for each instruction's clock at begin (ergon.CLIENT_WAIT_CLOCK) and logs the
clock every instruction ran at (--logs DIR, column freq_run): the shell checks them against
the plans, instruction by instruction on every rank (tests/e2e/check_clocks.py: per case
--steps at the top clock, then --steps at the plan's clocks).
A case torch refuses (its constructor raises ValueError) is reported as refused, and must
be one that `ergon schedule` refuses too. Prints one line per case on rank 0; exit 1 if
any check fails.
"""
import argparse
import csv
import datetime
import io
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch_pipeline"))
sys.path.insert(0, os.path.join(ROOT, "python"))

import ergon  # noqa: E402
from ergon.integration.torch_pipelining import TorchPipeliningHooks  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch_runtime  # noqa: E402


def cli_order(ergon_bin, name, P, M, rank):
    """This rank's compute actions from `ergon schedule ... --format torch-csv`, overlap
    cells expanded; None (and the message) when ergon refuses the case."""
    r = subprocess.run([ergon_bin, "schedule", name, "--ranks", str(P), "--microbatches",
                        str(M), "--format", "torch-csv"], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    rows = [row for row in csv.reader(io.StringIO(r.stdout))
            if row and not row[0].startswith("#")]
    out = []
    for cell in rows[rank]:
        cell = cell.strip()
        if not cell:
            continue
        parts = cell[1:cell.index(")")].split(";") if cell.startswith("(") else [cell]
        for p in parts:
            i = next(k for k, ch in enumerate(p) if ch.isalpha())
            out.append((p[i], int(p[:i]), int(p[i + 1:])))
    return out, ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ergon", required=True)
    ap.add_argument("--plans", required=True, help="directory of NAME-M.json plans")
    ap.add_argument("--cases", required=True, help="NAME:M,NAME:M,...")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--gpu", default="sim:a100:gpt3-xl:4")
    ap.add_argument("--logs", default=None, help="the client logs' directory")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    P = world
    gpu = ergon.Gpu(a.gpu)
    client = ergon.Client(gpu, device=rank, rank=rank, log_dir=a.logs,
                          flags=ergon.CLIENT_WAIT_CLOCK)
    top = max(gpu.sm_clocks(rank))
    failures = 0
    try:
        for case in a.cases.split(","):
            name, M = case.split(":")
            M = int(M)
            failures += run_case(a, client, top, name, P, M, rank)
    finally:
        client.close()
        gpu.close()
    bad = torch.tensor([failures])
    dist.all_reduce(bad)
    dist.destroy_process_group()
    return 1 if int(bad) else 0


def run_case(a, client, top, name, P, M, rank):
    t0 = time.monotonic()
    expect, why = cli_order(a.ergon, name, P, M, rank)
    sched = ergon.Schedule(name)
    placement = None
    for m in (M, 2 * P):   # the placement does not depend on M: build what ergon refuses too
        try:
            placement = sched.rank_order(P, m, rank)[1]
            break
        except ergon.ErgonError:
            pass
    pipe = None
    if placement is not None:
        pipe = torch_runtime.TorchPipeline("llama", name, placement, rank, 2, 1234, 0.05)
        try:
            pipe.reset(M, lambda st: TorchPipeliningHooks(client, st))
        except ValueError as e:   # torch's constructor refuses the case
            pipe, why_torch = None, str(e)
    else:
        why_torch = "(not constructed: ergon refuses it)"
    if pipe is None:
        ok = expect is None    # both refuse
        if rank == 0:
            print("%-16s P=%d M=%-2d refused by torch: %s; by ergon: %s  %s"
                  % (name, P, M, why_torch.splitlines()[0][:90], why or "NO (accepted)",
                     "ok" if ok else "FAIL"), flush=True)
        return 0 if ok else 1
    if expect is None:
        if rank == 0:
            print("%-16s P=%d M=%-2d torch accepts it but ergon refuses it: %s FAIL"
                  % (name, P, M, why), flush=True)
        pipe.close()
        return 1
    fails = []
    runs = {}
    waits = {}
    for run in ("all-max", "planned"):
        if run == "all-max":
            client.set_uniform_clock(top)
        else:
            client.load_plan(os.path.join(a.plans, "%s-%d.json" % (name, M)), rank)
        pipe.reset(M, lambda st: TorchPipeliningHooks(client, st))
        losses = []
        for step in range(a.steps):
            with pipe.hooks.step():
                losses.append(pipe.run_step(step))
            if pipe.hooks.seen != expect:
                fails.append("%s step %d: hooks saw %s, ergon schedule says %s" % (
                    run, step, fmt(pipe.hooks.seen), fmt(expect)))
            for k, v in (pipe.hooks.last_waits or {}).items():
                waits.setdefault(k, []).extend(v)
        client.sync(10.0)
        runs[run] = broadcast_losses(losses, placement)
    pipe.close()
    same = [x.hex() for x in runs["all-max"]] == [x.hex() for x in runs["planned"]]
    if not same:
        fails.append("losses differ: all-max %s, planned %s" % (
            [x.hex() for x in runs["all-max"]], [x.hex() for x in runs["planned"]]))
    first_stage_only = placement[0] == rank and all(
        placement[s] != rank or s == 0 for s in range(len(placement)))
    wait_s = sum(sum(v) for v in waits.values())
    if not first_stage_only and not wait_s > 0:
        fails.append("no receive wait measured")
    # The clocks each instruction ran at are checked from the client logs (the shell).
    info = torch.tensor([len(fails), wait_s], dtype=torch.float64)
    allinfo = [torch.zeros(2, dtype=torch.float64) for _ in range(P)]
    dist.all_gather(allinfo, info)
    for f in fails:
        print("rank %d %s M=%d: %s" % (rank, name, M, f), flush=True)
    if rank == 0:
        bad = sum(int(x[0]) for x in allinfo)
        print("%-16s P=%d M=%-2d %2d instructions/rank0, %d steps x 2 runs %.1f s; losses %s; "
              "receive waits %s ms  %s"
              % (name, P, M, len(expect), a.steps, time.monotonic() - t0,
                 "bitwise identical" if same else "DIFFERENT",
                 "/".join("%.0f" % (1e3 * float(x[1])) for x in allinfo), "ok" if not bad else "FAIL"),
              flush=True)
    return 1 if fails else 0


def broadcast_losses(losses, placement):
    """Every rank gets the losses of the rank that holds the last stage."""
    box = [losses]
    dist.broadcast_object_list(box, src=placement[-1])
    return box[0]


def fmt(seq):
    return " ".join("%d%s%d" % (s, k, m) for k, s, m in seq)


if __name__ == "__main__":
    sys.exit(main())
