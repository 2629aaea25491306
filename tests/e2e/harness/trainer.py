#!/usr/bin/python3
"""trainer.py: examples/pytorch_pipeline/train.py as the e2e tests run it (not a test itself).

The example's trainer is what a user runs; this wrapper imports it and adds what only a test
needs, then runs the example's main() with the remaining options:

  * `--pace auto|on|off` (pacer.py): on the simulated GPU each instruction is held for the
    model's time at the applied clock, the device busy meanwhile, and the simulated GPU's own
    accounting of it is recorded; on a fake vendor library (tests/fake_nvml,
    tests/fake_amdsmi: `--gpu nvml:LIB` or `amdsmi:LIB`) each instruction is a fake kernel
    whose time at the device's clock the fake gives (with FAKE_GPU_ACTIVITY=1 the fake draws
    its clock's power only while a kernel runs). auto (the default) paces on either. With
    `--out DIR` each step's row of DIR/result-RANK.json gets the accounting under `sim`
    (the clocks in run order, busy time and energy), the result `paced`, `overruns` (the
    instructions the CPU took longer for than the model) and `instructions`: the
    load-independent numbers the tests decide on;
  * `--stall-rank R --stall-step N`: rank R stops (sleeps) before iteration N, holding its
    clock (e2e_kill: a silent rank);
  * `--p2p shared-blocking [--block-marks DIR]`: the naive transport, one group per
    neighbour pair and blocking sends, the deadlock test's negative control; DIR/rank-R.txt
    gets a flushed line right before and right after every blocking send and receive
    ("enter send ...", "left send ..."): the evidence of where each rank is blocked;
  * `--deadlock-check [--rel-tol X]`: every (M, schedule) case of the deadlock test in one
    process group, on the example's own loop (see deadlock_check()).

    python3 tests/e2e/harness/trainer.py [TEST OPTIONS] [train.py OPTIONS]
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch_pipeline"))
import train as T  # noqa: E402  the example
sys.path.insert(0, HERE)
import pacer as pacing  # noqa: E402

ergon, dist = T.ergon, T.dist


def parse_test_args(argv):
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--stall-rank", type=int, default=-1)
    p.add_argument("--stall-step", type=int, default=1)
    p.add_argument("--p2p", choices=["split", "shared-blocking"], default="split")
    p.add_argument("--block-marks", default="")
    p.add_argument("--deadlock-check", action="store_true")
    p.add_argument("--rel-tol", type=float, default=1e-6)
    p.add_argument("--pace", choices=["auto", "on", "off"], default="auto")
    return p.parse_known_args(argv)


PACE = {}  # this process's GPU (from the example's open_gpu) and pacer, per-step accounting


def capturing_open_gpu(open_gpu):
    """The example's open_gpu, remembering what it opened for the pacer."""
    def run(args, S):
        gpu, sim = open_gpu(args, S)
        PACE.update(gpu=gpu, sim=sim, spec="sim:%s:%s:%d" % (args.sim_gpu, args.sim_model, S))
        return gpu, sim
    return run


def the_pacer(client):
    """This process's pacer (pacer.py), made once, with the first stage that has a client."""
    if "pacer" not in PACE:
        rank = int(os.environ.get("RANK", "0"))
        dev = rank if PACE.get("sim") else int(os.environ.get("LOCAL_RANK", str(rank)))
        PACE["pacer"] = None if client is None else pacing.make_pacer(
            ergon, TEST.pace, PACE.get("gpu"), client, dev, PACE.get("sim"), PACE.get("spec"),
            rank)
    return PACE["pacer"]


def paced_call(call):
    """Stage.call (the example's own loop) with the pacer innermost, inside the recorder and
    the client's hooks."""
    def run(self, kind, s, mb, fn, *args):
        pacer = the_pacer(self.client)
        if pacer is not None:
            fn = pacer.wrap(kind, fn, self.V)
        return call(self, kind, s, mb, fn, *args)
    return run


def paced_wrap(wrap):
    """TorchStage._wrap (PyTorch's runtime; TorchPipeliningHooks' wrap) with the pacer
    innermost."""
    def run(self, kind, fn):
        pacer = the_pacer(self.client)
        if pacer is not None:
            fn = pacer.wrap(kind, fn, self.V)
        return wrap(self, kind, fn)
    return run


def accounted(run_step):
    """run_step that keeps the pacer's accounting of each step (PACE["steps"], in step
    order: the example writes one result row per run_step)."""
    def run(self, step, order, M):
        loss = run_step(self, step, order, M)
        pacer = the_pacer(self.client)
        PACE.setdefault("steps", []).append(pacer.take() if pacer is not None else None)
        return loss
    return run


def add_accounting(out_dir, rank):
    """The pacer's numbers into the example's out_dir/result-RANK.json (when it wrote one)."""
    path = os.path.join(out_dir, "result-%d.json" % rank)
    if not out_dir or not os.path.exists(path):
        return
    with open(path) as f:
        res = json.load(f)
    pacer, steps = PACE.get("pacer"), PACE.get("steps", [])
    if len(steps) != len(res["steps"]):
        raise SystemExit("harness: %d steps accounted, the result has %d rows"
                         % (len(steps), len(res["steps"])))
    if pacer is not None:
        for row, acc in zip(res["steps"], steps):
            row["sim"] = acc
    res.update(paced=pacer is not None, overruns=pacer.overruns if pacer else 0,
               instructions=pacer.instructions if pacer else 0)
    with open(path + ".tmp", "w") as f:
        json.dump(res, f, indent=1)
    os.replace(path + ".tmp", path)


def stalling(run_step, test):
    """run_step that stops rank --stall-rank before iteration --stall-step, for an hour."""
    def run(self, step, order, M):
        if self.rank_id == test.stall_rank and step == test.stall_step:
            print("rank %d stalls at step %d (test)" % (self.rank_id, step), flush=True)
            time.sleep(3600)
        return run_step(self, step, order, M)
    return run


class BlockingStage(T.Stage):
    """The naive transport: blocking sends on the group that also carries the receives, with
    the marks of --block-marks."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.marks = None
        if TEST.block_marks:
            self.marks = open(os.path.join(TEST.block_marks, "rank-%d.txt" % self.rank), "a")

    def mark(self, what):
        """One line, flushed before the call it announces."""
        if self.marks is not None:
            self.marks.write(what + "\n")
            self.marks.flush()

    def send(self, t, dst, group, tag):
        self.mark("enter send to %d tag %d" % (dst, tag))
        dist.send(t, dst=dst, group=group, tag=tag)
        self.mark("left send to %d tag %d" % (dst, tag))
        return None

    def recv(self, shape, src, group, tag):
        self.mark("enter recv from %d tag %d" % (src, tag))
        t = super().recv(shape, src, group, tag)
        self.mark("left recv from %d tag %d" % (src, tag))
        return t


def shared_groups(args, placement):
    """One gloo group per pipeline-stage boundary that crosses ranks, for both directions."""
    NS = len(placement)
    act = [None] * (NS - 1)
    for b in range(NS - 1):
        if placement[b] != placement[b + 1]:
            act[b] = dist.new_group(sorted((placement[b], placement[b + 1])))
    return act, list(act)


def run_losses(stage, order, M, steps):
    """`steps` iterations; every rank returns the losses (from the rank holding the last
    stage, broadcast) and the wall time."""
    stage.reset(M)
    t0 = time.monotonic()
    losses = []
    for step in range(steps):
        if stage.hooks:
            with stage.hooks.step():
                losses.append(stage.run_step(step, order, M))
        else:
            losses.append(stage.run_step(step, order, M))
    dt = time.monotonic() - t0
    box = [losses]
    dist.broadcast_object_list(box, src=stage.placement[-1])
    return box[0], dt


def deadlock_check(args, stage, client, gpu, S, M, rank, sched, order):
    """Every (M, schedule) case of the deadlock test in one process group (in the place of the
    example's train()). Without --schedule: M in {S, S+1, 2S} x {1f1b, ours max, ours dec},
    losses bitwise equal. With --schedule NAME[,NAME...] (multi-chunk): M in {S, 2S} x {1f1b
    on S stages, NAME on S*V stages}, losses within --rel-tol of 1F1B's (I/W as separate
    passes round differently)."""
    failures = 0
    if TEST.schedules:
        names = TEST.schedules.split(",")
        chunked = {}
        for name in names:
            sc = ergon.Schedule(name, chunks=TEST.chunks)
            placement = sc.rank_order(S, 2 * S, rank)[1]
            chunked[name] = T.Stage(args, rank, placement, T.make_groups(args, placement),
                                    stage.hooks, None)
        for M, name in [(M, n) for M in sorted({S, 2 * S}) for n in names]:
            ref, dt0 = run_losses(stage, ergon.rank_order("1f1b", S, M, rank)[0], M,
                                  args.steps)
            sc = ergon.Schedule(name, chunks=TEST.chunks)
            order, placement = sc.rank_order(S, M, rank)
            if placement != chunked[name].placement:
                raise SystemExit("placement changed with M: %r" % placement)
            got, dt = run_losses(chunked[name], order, M, args.steps)
            rel = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
            ok = rel <= TEST.rel_tol
            failures += not ok
            if rank == 0:
                print("P=%d V=%d M=%d %-16s %d steps %.2f s (1f1b %.2f s)  losses %s  "
                      "max rel diff %.2e  %s"
                      % (S, chunked[name].V, M, sc.name, args.steps, dt, dt0,
                         " ".join("%.6f" % l for l in got), rel,
                         "same as 1f1b" if ok else "DIFFERENT FROM 1f1b"), flush=True)
        return 1 if failures else 0
    for M in sorted({S, S + 1, 2 * S}):
        ref = None
        for name, r in (("1f1b", ""), ("ours", "max"), ("ours", "dec")):
            sc = ergon.Schedule(name)
            if sc.kind == ergon.SCHED_ENVPIPE:
                sc = ergon.Schedule(sc.kind, T.parse_extra_warmup(r, S, M))
            order = sc.rank_order(S, M, rank)[0]
            losses, dt = run_losses(stage, order, M, args.steps)
            if rank == S - 1:
                hexes = [l.hex() for l in losses]
                same = ref is None or hexes == ref
                ref = ref or hexes
                failures += not same
                print("S=%d M=%d %-4s r=%-12s %d steps %.2f s  losses %s  %s"
                      % (S, M, sc.name, ",".join(map(str, sc.extra_warmup[:S])),
                         args.steps, dt, " ".join("%.5f" % l for l in losses),
                         "same as 1f1b" if same else "DIFFERENT FROM 1f1b"), flush=True)
    return 1 if failures else 0


def take_option(argv, name, default):
    """Remove `name VALUE` from argv; VALUE, or default when absent."""
    if name not in argv:
        return default
    i = argv.index(name)
    value = argv[i + 1]
    del argv[i:i + 2]
    return value


TEST = None


def main(argv=None):
    global TEST
    TEST, rest = parse_test_args(sys.argv[1:] if argv is None else argv)
    rank = int(os.environ.get("RANK", "0"))
    T.open_gpu = capturing_open_gpu(T.open_gpu)
    T.Stage.call = paced_call(T.Stage.call)
    T.TorchStage._wrap = paced_wrap(T.TorchStage._wrap)
    for cls in (T.Stage, T.TorchStage):
        cls.rank_id = rank
        cls.run_step = stalling(accounted(cls.run_step), TEST)
    if TEST.p2p == "shared-blocking":
        T.Stage, T.make_groups = BlockingStage, shared_groups
    if TEST.deadlock_check:
        # the example's own loop, from 1F1B at M = S; deadlock_check picks its cases itself
        if "--runtime" in rest and rest[rest.index("--runtime") + 1] == "torch":
            raise SystemExit("--deadlock-check checks the example's own loop (--runtime "
                             "ergon); PyTorch's runtime: tests/e2e/torch_pipelining.sh")
        TEST.schedules = take_option(rest, "--schedule", "")
        chunks = take_option(rest, "--chunks", "0")
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rest += ["--schedule", "1f1b", "--runtime", "ergon", "--microbatches", str(world)]
        TEST.chunks = int(chunks)
        T.train = deadlock_check
    elif TEST.p2p != "split" and "--runtime" in rest and \
            rest[rest.index("--runtime") + 1] == "torch":
        raise SystemExit("--p2p %s is the example's own loop's (--runtime ergon)" % TEST.p2p)
    out = T.parse_args(rest).out
    rc = T.main(rest)
    if rc == 0 and out:
        add_accounting(out, rank)
    return rc


if __name__ == "__main__":
    sys.exit(main())
