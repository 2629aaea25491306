#!/usr/bin/env python3
"""train.py: DeepSpeed's real pipeline engine (deepspeed.pipe.PipelineModule +
PipelineEngine) with ergon's hooks: every forward and backward runs at its planned GPU clock,
receive waits are measured, and the schedule is DeepSpeed's own 1F1B (TrainSchedule) or
ergon's (1F1B or EnvPipe's "ours", r_s from a plan made by libergon). One process per stage;
start it like any torch.distributed job:

    torchrun --standalone --nproc-per-node 4 train.py --model llama --microbatches 8 --steps 5
    torchrun ... train.py --schedule ours --plan plan.json          # EnvPipe order + clocks
    torchrun ... train.py --server http://127.0.0.1:7787 --scheduler EnvPipe \\
        --scheduler-args '{"blocking_power_w": 83.64}'             # EnvPipe online

No GPU is needed: the compute runs on the CPU with gloo (DeepSpeed's CPU accelerator,
DS_ACCELERATOR=cpu) and the clocks go to ergon's simulated GPU (sim:a100:MODEL:N, device =
rank), which, paced, holds each instruction for the time the GPU model gives at the applied
clock. On a machine with GPUs use --gpu nvml (or daemon:SOCKET) and DeepSpeed's CUDA
accelerator.

Each rank writes its steps (loss, time, energy, the order its hooks saw, the simulated GPU's
accounting) to OUT/result-RANK.json.
"""
import argparse
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
if not os.environ.get("ERGON_LIBRARY"):     # a source tree's build, unless one is installed
    _lib = os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "libergon.so.0")
    if os.path.exists(_lib):
        os.environ["ERGON_LIBRARY"] = _lib
sys.path.insert(0, HERE)

import torch  # noqa: E402
import deepspeed  # noqa: E402
import deepspeed.comm as dist  # noqa: E402
from deepspeed.pipe import PipelineModule  # noqa: E402

import ergon  # noqa: E402
from ergon.integration import deepspeed as eds  # noqa: E402
import models  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama",
                   help="llama (Hugging Face LlamaConfig) or gpt")
    p.add_argument("--microbatches", type=int, default=4, help="M (gradient accumulation)")
    p.add_argument("--microbatch-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=3, help="batches (train_batch calls)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--schedule", default="deepspeed",
                   help="deepspeed (its TrainSchedule), 1f1b or ours (ergon's order, set with "
                        "the DeepSpeed config key pipeline.ergon_schedule)")
    p.add_argument("--plan", default="", help="JSON plan: its clocks (and, for ours, its r_s)")
    p.add_argument("--schedule-from", default="",
                   help="take the order (ours: r_s) from this plan but not its clocks")
    p.add_argument("--extra-warmup", default="", help="ours: r_s per stage, comma list")
    p.add_argument("--clock", default="max", help="without --plan: max or MHz for everything")
    p.add_argument("--gpu", default="sim", help="sim (sim:GPU:MODEL:N), nvml, daemon:SOCKET...")
    p.add_argument("--sim-gpu", default="a100")
    p.add_argument("--sim-model", default="bert-large")
    p.add_argument("--no-pace", action="store_true", help="sim: do not hold instructions")
    p.add_argument("--shm-comm", action="store_true",
                   help="let DeepSpeed build and use its shared-memory collectives on the CPU "
                        "(a C++ op compiled on first use, about a minute; the pipeline itself "
                        "only needs gloo's point-to-point)")
    p.add_argument("--p2p-timeout", type=float, default=5.0,
                   help="seconds a gloo send/receive may wait before the run fails")
    p.add_argument("--server", default="", help="URL of `ergon serve`: clocks per window")
    p.add_argument("--scheduler", default="", help="with --server: the job's scheduler")
    p.add_argument("--scheduler-args", default="", help="with --server: JSON object")
    p.add_argument("--power-states", default="", type=ergon.clock_list,
                   help="with --server: HI:LO:STEP or list")
    p.add_argument("--window-steps", type=int, default=1)
    p.add_argument("--max-windows", type=int, default=0)
    p.add_argument("--out", default="", help="directory for result-RANK.json")
    return p.parse_args(argv)


def build_engine(args, name, M, pipeline_cfg=None):
    torch.manual_seed(args.seed)
    module = PipelineModule(layers=models.layers(name), num_stages=dist.get_world_size(),
                            loss_fn=models.loss_fn, partition_method="uniform")
    cfg = {"train_micro_batch_size_per_gpu": args.microbatch_size,
           "gradient_accumulation_steps": M, "steps_per_print": 1 << 30,
           "pipeline": dict(pipeline_cfg or {})}
    opt = torch.optim.SGD(module.parameters(), lr=args.lr)
    engine, _, _, _ = deepspeed.initialize(model=module, optimizer=opt, config=cfg)
    return engine


def pipeline_config(args):
    """The DeepSpeed config keys that select ergon's schedule (read by instrument_deepspeed)."""
    if args.schedule == "deepspeed":
        return {}
    cfg = {"ergon_schedule": args.schedule}
    if args.schedule_from or (args.plan and args.schedule == "ours"):
        cfg["ergon_plan"] = args.schedule_from or args.plan
    if args.extra_warmup:
        cfg["ergon_extra_warmup"] = [int(x) for x in args.extra_warmup.split(",")]
    return cfg


def apply_clock(client, gpu, rank, plan, clock):
    if plan:
        client.load_plan(plan, rank)
    else:
        clocks = gpu.sm_clocks(rank)
        client.set_uniform_clock(max(clocks) if clock == "max" else int(clock))
    client.sync(10.0)


def run_train(args, client, gpu, rank, out):
    engine = build_engine(args, args.model, args.microbatches, pipeline_config(args))
    hooks = eds.instrument_deepspeed(engine, client, gpu=gpu, device=rank,
                                     pace=gpu.backend == "sim" and not args.no_pace)
    sched = eds.current_schedule(engine)
    data = models.SyntheticData(args.microbatch_size, args.seed)
    rows = []

    def on_step(step, window, loss, hooks):
        t, e = hooks.last_step
        rows.append({"step": step, "window": window, "loss": float(loss),
                     "loss_hex": float(loss).hex(), "time_s": t, "energy_j": e,
                     "recv_wait_s": sum(sum(v) for v in (hooks.last_waits or {}).values()),
                     "order": hooks.last_order, "sim": hooks.last_sim})
        if rank == dist.get_world_size() - 1:
            print("step %d%s loss %.6f time %.3f s energy %.1f J" % (
                step, "" if window is None else " window %d" % window, float(loss), t, e),
                flush=True)

    t0 = time.time()
    windows = 0
    if args.server:
        windows = eds.serve_windows(
            engine, hooks, args.server, data, window_steps=args.window_steps,
            power_states=args.power_states or None,
            scheduler=args.scheduler or None,
            scheduler_args=json.loads(args.scheduler_args) if args.scheduler_args else None,
            model_name=args.model, max_windows=args.max_windows, on_step=on_step,
            work_dir=out or ".")
    else:
        apply_clock(client, gpu, rank, args.plan, args.clock)
        for step in range(args.steps):
            loss = engine.train_batch(data)
            on_step(step, None, loss, hooks)
    res = {"rank": rank, "stages": engine.num_stages, "microbatches": engine.micro_batches,
           "schedule": sched.name, "extra_warmup": sched.extra_warmup[:engine.num_stages],
           "deepspeed_schedule": args.schedule == "deepspeed", "plan": args.plan,
           "server": args.server, "windows": windows, "gpu": gpu.backend,
           "paced": hooks.pace, "overruns": hooks.overruns, "instructions": hooks.instructions,
           "clock_changes": client.clock_changes, "wall_s": time.time() - t0, "steps": rows}
    if out:
        with open(os.path.join(out, "result-%d.json" % rank), "w") as f:
            json.dump(res, f, indent=1)
    return 0


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if not args.shm_comm:
        # DeepSpeed's CPU back-end JIT-compiles its shm collective op at init_distributed
        # when the op is "compatible"; its op table is meant to be edited (deepspeed/ops).
        import deepspeed.ops
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    deepspeed.init_distributed(dist_backend="gloo",
                               timeout=datetime.timedelta(seconds=args.p2p_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    out = args.out
    if out:
        os.makedirs(out, exist_ok=True)
    spec = args.gpu
    if spec == "sim":
        spec = "sim:%s:%s:%d" % (args.sim_gpu, args.sim_model, world)
    gpu = ergon.Gpu(spec)
    dev = rank if gpu.backend == "sim" else int(os.environ.get("LOCAL_RANK", rank))
    client = ergon.Client(gpu, device=dev, rank=rank)
    rc = 1
    try:
        rc = run_train(args, client, gpu, rank, out)
    finally:
        for obj in (client, gpu):       # resets the clocks on every path
            try:
                obj.close()
            except ergon.ErgonError as e:
                print("ergon: closing the %s: %s" % (type(obj).__name__.lower(), e),
                      file=sys.stderr, flush=True)
                rc = 1
    dist.barrier()
    return rc


if __name__ == "__main__":
    sys.exit(main())
