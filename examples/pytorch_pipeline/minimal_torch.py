"""minimal_torch.py: a plain torch.distributed.pipelining training script plus the lines
ergon needs (marked "# ergon"): every forward, backward, I and W that PyTorch's schedule runs
goes at the plan's clock, and each step's GPU time and energy is measured.
docs/integrations.md shows it; tests/e2e/torch_integration_doc.sh runs it.

    torchrun --standalone --nproc-per-node 4 minimal_torch.py --schedule zbv --plan plan.json
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage, schedules

import ergon                                                  # ergon
from ergon.integration.torch_pipelining import TorchPipeliningHooks  # ergon

CLASSES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B",
           "interleaved-1f1b": "ScheduleInterleaved1F1B", "looped-bfs": "ScheduleLoopedBFS",
           "interleaved-zb": "ScheduleInterleavedZeroBubble", "zbv": "ScheduleZBVZeroBubble",
           "dualpipev": "ScheduleDualPipeV"}

ap = argparse.ArgumentParser()
ap.add_argument("--schedule", default="zbv", choices=sorted(CLASSES))
ap.add_argument("--microbatches", type=int, default=8)
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--plan", help="ergon plan (JSON) for this schedule, ranks and microbatches")
ap.add_argument("--gpu", default="", help="ergon GPU: nvml (default when a driver is "
                "there), else the simulated sim:a100:gpt3-xl:WORLD_SIZE")
ap.add_argument("--log-dir", help="ergon client logs (the clock each instruction ran at)")
args = ap.parse_args()

dist.init_process_group("gloo")
rank, P = dist.get_rank(), dist.get_world_size()
M = args.microbatches
V = 1 if args.schedule in ("gpipe", "1f1b") else 2
# PyTorch's placement: loop (stage s on rank s % P) or V shape (rank r: stages r, 2P-1-r).
mine = [rank, 2 * P - 1 - rank] if args.schedule in ("zbv", "dualpipev") else \
    [rank + P * c for c in range(V)]
torch.manual_seed(0)
layers = [nn.Sequential(nn.Linear(32, 32), nn.GELU()) for _ in range(P * V)]
stages = [PipelineStage(layers[s], s, P * V, torch.device("cpu")) for s in mine]
opt = torch.optim.SGD([p for s in mine for p in layers[s].parameters()], lr=0.01)
cls = getattr(schedules, CLASSES[args.schedule])
schedule = cls(stages[0] if V == 1 else stages, n_microbatches=M,
               loss_fn=lambda out, y: ((out - y) ** 2).mean())

spec = args.gpu or ("nvml" if os.path.exists("/dev/nvidiactl") else "sim:a100:gpt3-xl:%d" % P)
gpu = ergon.Gpu(spec)                                                        # ergon
dev = rank if gpu.backend == "sim" else int(os.environ.get("LOCAL_RANK", 0))  # ergon
# the simulated GPU computes on the CPU: each instruction waits until its clock is set  # ergon
flags = ergon.CLIENT_WAIT_CLOCK if gpu.backend == "sim" else 0               # ergon
client = ergon.Client(gpu, device=dev, rank=rank, log_dir=args.log_dir, flags=flags)  # ergon
if args.plan:                                                                # ergon
    client.load_plan(args.plan, rank)        # this rank's clock per instruction  # ergon
hooks = TorchPipeliningHooks(client, stages)                                 # ergon

g = torch.Generator().manual_seed(1)
for step in range(args.steps):
    x, y = torch.randn(M * 2, 32, generator=g), torch.randn(M * 2, 32, generator=g)
    kw = {}
    if 0 in mine:
        kw["x"] = (x,)
    losses = [] if P * V - 1 in mine else None
    with hooks.step():                                                       # ergon
        schedule.step(*kw.get("x", ()), target=y if losses is not None else None,
                      losses=losses)
    opt.step()
    opt.zero_grad()
    t, e = hooks.last_step                                                   # ergon
    # one write per line ("\n" included): the ranks share stdout, and print's separate
    # write of the newline lets another rank's line in when Python runs unbuffered
    print("rank %d step %d: %.3f s, %.3f J (ergon)%s\n" % (
        rank, step, t, e, "" if losses is None else
        ", loss %.6f" % float(sum(l.detach() for l in losses) / M)), end="", flush=True)

print("rank %d: %d clock changes\n" % (rank, client.clock_changes), end="", flush=True)  # ergon
hooks.close()                                                                # ergon
client.close()          # puts the GPU's clocks back                          # ergon
gpu.close()                                                                  # ergon
dist.destroy_process_group()
