#!/usr/bin/python3
"""train.py: a pipeline-parallel trainer on torch.distributed (gloo), one process per stage,
whose schedule order comes from libergon and whose every forward and backward goes through
ergon's hooks (per-instruction GPU clocks, time and energy measurement). One file of ~800
lines on purpose: an example a user copies and runs as a single script (its models, launch,
runtimes and server loop read top to bottom); the library code it shows lives in python/ergon.

Start it like any torchrun job (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT):

    torchrun --nproc-per-node 4 train.py --model llama --microbatches 8 --steps 20
    python3 launch.py --nproc 4 -- train.py ...          # the same, with a timeout

With WORLD_SIZE 1 and --stages S it runs the one-process reference: every stage in this
process, microbatch by microbatch (forward then backward), for checking the pipeline's math.

HOW THE PIPELINE WORKS
  * Each rank runs the order libergon gives it (erg_order_new through ergon.rank_order:
    1F1B, GPipe, EnvPipe's "ours", interleaved-1f1b, looped-bfs, interleaved-zb, zbv), so
    this trainer and the planner can never disagree about the order. With V chunks per
    rank the model is split into P*V stages, placed as libergon places them (loop: stage s
    on rank s mod P; zbv's V shape: rank r holds stages r and 2P-1-r).
  * Zero-bubble schedules run I and W as separate autograd passes: I is
    torch.autograd.grad w.r.t. the stage input (retaining the graph), W is
    torch.autograd.grad w.r.t. the weights, accumulated into .grad, so the optimizer step
    is the one a full backward would feed.
  * Point-to-point transfers use two process groups per neighbour pair: one that carries
    activations s -> s+1, one that carries gradients s+1 -> s (docs/e2e.md).
    A send is posted (isend) right after the unit that produced it and completed at the end
    of the step; a receive is posted, blocking, right before the unit that consumes it.
    Sends never wait for anything but the transport, and receives wait only for a unit
    that the schedule orders earlier (the orders form an acyclic graph with the
    cross-stage edges), so the run cannot deadlock whatever the transport buffers: a send
    and a receive with the same neighbour are on different groups and never serialise.
  * The optimizer steps once per iteration (synchronous pipeline): gradients accumulate
    over the microbatches in backward order, which is microbatch order in every schedule,
    so 1F1B, "ours" and the reference compute bitwise the same losses.

GPU CLOCKS
  The GPU back-end is NVML when one opens, else amdsmi, else ergon's simulated GPU
  ("sim:a100:gpt3-xl:S", device s = stage s). The simulated GPU models clocks, time and
  energy; the torch compute runs on the CPU, so on it the clocks change what the device
  reports, not how long the CPU computes. On a real GPU the kernels run at the clocks
  ergon applies. The math never depends on the clock.
"""
import argparse
import datetime
import importlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _import_ergon():
    """ergon from the source tree (python/) unless it is installed."""
    root = os.path.dirname(os.path.dirname(HERE))
    try:
        import ergon  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(root, "python"))
        import ergon  # noqa: F811
    if not os.environ.get("ERGON_LIBRARY"):
        lib = os.path.join(root, "build", "libergon.so.0")
        if os.path.exists(lib):
            os.environ["ERGON_LIBRARY"] = lib
    import ergon.integration
    return ergon


ergon = _import_ergon()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, HERE)
import models  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama", choices=["llama", "resnet"])
    p.add_argument("--stages", type=int, default=0,
                   help="ranks (default WORLD_SIZE; with WORLD_SIZE 1: the reference with this "
                        "many stages)")
    p.add_argument("--microbatches", type=int, default=4, help="microbatches per iteration (M)")
    p.add_argument("--microbatch-size", type=int, default=4)
    p.add_argument("--steps", type=int, default=10, help="iterations")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--schedule", default="",
                   help="1f1b, gpipe, ours (EnvPipe), interleaved-1f1b, looped-bfs, "
                        "interleaved-zb or zbv (the order from libergon); default: the JSON "
                        "plan's schedule, else 1f1b")
    p.add_argument("--runtime", choices=["auto", "torch", "ergon"], default="auto",
                   help="torch: PyTorch's own pipeline runtime (torch.distributed.pipelining: "
                        "real PipelineStage objects and schedule classes, ergon's hooks "
                        "around their forward/backward); ergon: this example's own loop in "
                        "libergon's order; auto (default): torch for every schedule PyTorch "
                        "ships when this torch has torch.distributed.pipelining, else ergon "
                        "(always for ours, which PyTorch lacks)")
    p.add_argument("--chunks", type=int, default=0,
                   help="stages per rank V for the multi-chunk schedules (default: the "
                        "plan's, else the schedule's default, 2); the model is split into "
                        "WORLD_SIZE*V stages")
    p.add_argument("--extra-warmup", default="",
                   help="ours: r_s per stage, comma list, or 'max' (every non-last stage runs "
                        "all its forwards first), or 'dec' (r_s = S-1-s); default: the plan's")
    p.add_argument("--plan", help="plan file (JSON or freqs_pipeline .py): per-instruction clocks")
    p.add_argument("--clock", default="",
                   help="one clock for everything: MHz, or 'max' (all-max run)")
    p.add_argument("--sweep", default="", type=ergon.clock_list,
                   help="profiling sweep: clocks 'HI:LO:STEP' (MHz) or a comma list; "
                        "--window-steps iterations at each, after one warm-up iteration")
    p.add_argument("--window-steps", type=int, default=3)
    p.add_argument("--gpu", default="auto",
                   help="ergon GPU spec: auto (nvml, else amdsmi, else sim), nvml, nvml:LIB, "
                        "amdsmi, amdsmi:LIB, sim:GPU:MODEL:N, daemon:SOCKET, or none (no ergon "
                        "client at all)")
    p.add_argument("--sim-gpu", default="a100")
    p.add_argument("--sim-model", default="gpt3-xl")
    p.add_argument("--log-dir", help="ergon client logs (instructions-R.csv, time-energy-R.csv)")
    p.add_argument("--out", help="directory for result-RANK.json")
    p.add_argument("--p2p-timeout", type=float, default=60.0,
                   help="seconds a send/receive may wait before the run fails")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per process")
    p.add_argument("--server", default="",
                   help="URL of `ergon serve` (e.g. http://127.0.0.1:7787): the clocks of every "
                        "window come from the server's scheduler (/v1 API), results go back")
    p.add_argument("--scheduler", default="",
                   help="with --server: the job's scheduler (default: the server's), e.g. "
                        "InstructionProfiler, PointSolution, Frontier")
    p.add_argument("--scheduler-args", default="", help="with --server: JSON object")
    p.add_argument("--power-states", default="", type=ergon.clock_list,
                   help="with --server: the clocks the job offers the server, 'HI:LO:STEP' or a "
                        "comma list (default: every clock the GPU supports)")
    p.add_argument("--job-file", default="", help="with --server: rank 0 writes the job id here")
    p.add_argument("--max-windows", type=int, default=0,
                   help="with --server: stop after this many windows and end the job (for "
                        "schedulers that never end, e.g. Frontier); 0 = until the server ends it")
    return p.parse_args(argv)


def parse_extra_warmup(spec, S, M):
    if spec in ("", "0"):
        return [0] * S
    if spec == "max":
        return [max(0, M - (S - s)) if s < S - 1 else 0 for s in range(S)]
    if spec == "dec":
        return [S - 1 - s for s in range(S)]
    r = [int(x) for x in spec.split(",")]
    if len(r) != S:
        raise SystemExit("--extra-warmup: %d values for %d stages" % (len(r), S))
    return r


KIND_NAMES = {0: "forward", 1: "backward", 2: "backward_input", 3: "backward_weight"}


class Recorder:
    """Per-instruction (time_s, energy_j) samples for the server's ProfilingResult: wall
    time around the instruction and the GPU energy counter's difference."""

    def __init__(self, gpu, dev):
        self.gpu, self.dev = gpu, dev
        self.samples = {"forward": [], "backward": []}

    def wrap(self, kind, fn):
        name = KIND_NAMES[kind]

        def run(*args, **kwargs):
            e0, t0 = self.gpu.energy_mj(self.dev), time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                t = time.monotonic() - t0
                self.samples.setdefault(name, []).append(
                    (t, (self.gpu.energy_mj(self.dev) - e0) / 1000.0))
        return run

    def take(self):
        s, self.samples = self.samples, {"forward": [], "backward": []}
        return s


class Stage:
    """One rank's pipeline stages (one per chunk: V = 1 for gpipe/1f1b/ours, V = 2 or more
    for interleaved-1f1b, looped-bfs, interleaved-zb and zbv): modules, optimizers, groups,
    hooks. Stage s of the P*V pipeline stages lives on rank placement[s] (libergon's
    placement: loop s mod P, or V shape); `chunk` of a local stage is its position among
    this rank's stages in ascending order (the client's chunk numbering)."""

    def __init__(self, args, rank, placement, groups, hooks=None, recorder=None):
        self.args, self.rank = args, rank
        self.placement = list(placement)
        self.NS = len(self.placement)                # pipeline stages P*V
        self.P = max(self.placement) + 1
        self.V = self.NS // self.P
        self.local = [s for s in range(self.NS) if self.placement[s] == rank]
        self.chunk = {s: c for c, s in enumerate(self.local)}
        self.act, self.grad = groups
        self.data = models.SyntheticData(args.model, args.microbatch_size, args.seed)
        self.hooks, self.recorder = hooks, recorder
        self.client = hooks.client if hooks else None

    def send(self, t, dst, group, tag):
        """Posted right after the unit that produced `t`; completed at the end of the step."""
        return dist.isend(t, dst=dst, group=group, tag=tag)

    def recv(self, shape, src, group, tag):
        """A blocking receive right before the instruction that consumes it; its host-clock
        wait (bubble + transfer, EnvPipe's recv time) is charged to that instruction through
        the client (hooks.recv) and reported to the server as wait_breakdown."""
        t = torch.empty(shape)
        t0 = time.monotonic()
        if self.hooks is not None:
            with self.hooks.recv():
                dist.recv(t, src=src, group=group, tag=tag)
        else:
            dist.recv(t, src=src, group=group, tag=tag)
        self.wait_s += time.monotonic() - t0
        return t

    def reset(self, M):
        """A fresh model (same seed) for an M-microbatch run."""
        a = self.args
        stages = models.build_stages(a.model, self.NS, a.seed)
        self.shapes = models.boundary_shapes(stages, self.data, M)
        self.modules = {s: stages[s] for s in self.local}
        self.opts = {}
        for s, m in self.modules.items():
            m.train()
            self.opts[s] = torch.optim.SGD(m.parameters(), lr=a.lr, momentum=0.9)

    def call(self, kind, s, mb, fn, *args):
        """One instruction through the recorder and the client's kind + chunk hooks (the
        planned clock of (kind, chunk, microbatch))."""
        chunk = self.chunk[s]
        run = fn
        if self.recorder:
            run = self.recorder.wrap(kind, run)
        if self.client is None:
            return run(*args)
        self.client.instruction_begin_chunk(kind, chunk, mb)
        try:
            return run(*args)
        finally:
            self.client.instruction_end_chunk(kind, chunk, mb)

    def _forward(self, s, x, target):
        y = self.modules[s](x)
        if target is not None:
            return self.data.loss(y, target) / self.M
        return y

    def _backward(self, out, g):
        torch.autograd.backward(out, g)

    @staticmethod
    def _backward_input(out, g, x):
        """I: the gradient w.r.t. the stage's input only; the graph stays for W."""
        if x is None:           # the first stage's input (token ids) has no gradient
            return None
        gx, = torch.autograd.grad(out, [x], g, retain_graph=True)
        return gx

    def _backward_weight(self, s, out, g):
        """W: the gradients w.r.t. the stage's weights, accumulated into .grad as a full
        backward would, so the optimizer step is the same."""
        params = [p for p in self.modules[s].parameters() if p.requires_grad]
        grads = torch.autograd.grad(out, params, g, allow_unused=True)
        with torch.no_grad():
            for p, gp in zip(params, grads):
                if gp is None:
                    continue
                if p.grad is None:
                    p.grad = gp
                else:
                    p.grad += gp

    def run_step(self, step, order, M):
        """One iteration in this rank's order (tuples as ergon.rank_order gives them);
        returns the iteration loss on the rank that holds the last stage."""
        NS, me, place = self.NS, self.rank, self.placement
        self.M = M
        self.wait_s = 0.0
        inputs, outputs, sends, losses = {}, {}, [], {}
        local_act, local_grad, pending_w = {}, {}, {}

        def forward(s, mb):
            x_data, target = self.data.microbatch(step, mb, M)
            last = s == NS - 1
            if s == 0:
                x = x_data
            else:
                if place[s - 1] == me:
                    x = local_act.pop((s - 1, mb))
                else:
                    x = self.recv(self.shapes[s - 1], place[s - 1], self.act[s - 1], mb)
                x.requires_grad_()
            inputs[(s, mb)] = x
            out = self.call(ergon.FORWARD, s, mb, self._forward, s, x, target if last else None)
            outputs[(s, mb)] = out
            if last:
                losses[mb] = out.detach()
            elif place[s + 1] == me:
                local_act[(s, mb)] = out.detach()
            else:
                sends.append(self.send(out.detach(), place[s + 1], self.act[s], mb))

        def backward(kind, s, mb):
            g = None
            if s < NS - 1:
                if place[s + 1] == me:
                    g = local_grad.pop((s, mb))
                else:
                    g = self.recv(self.shapes[s], place[s + 1], self.grad[s], mb)
            out, x = outputs.pop((s, mb)), inputs.pop((s, mb))
            if kind == ergon.BACKWARD:
                self.call(kind, s, mb, self._backward, out, g)
                gx = x.grad if s > 0 else None
            else:
                gx = self.call(kind, s, mb, self._backward_input, out, g, x if s > 0 else None)
                pending_w[(s, mb)] = (out, g)
            if s > 0:
                if place[s - 1] == me:
                    local_grad[(s - 1, mb)] = gx
                else:
                    sends.append(self.send(gx, place[s - 1], self.grad[s - 1], mb))

        for kind, s, mb, kind2, s2, mb2 in order:
            if kind == ergon.FORWARD:
                forward(s, mb)
            elif kind in (ergon.BACKWARD, ergon.BACKWARD_INPUT):
                backward(kind, s, mb)
            elif kind == ergon.BACKWARD_WEIGHT:
                out, g = pending_w.pop((s, mb))
                self.call(kind, s, mb, self._backward_weight, s, out, g)
            else:
                raise SystemExit("train.py runs no %s step (kind %d): DualPipeV's overlapped "
                                 "steps are not implemented in this example" % (
                                     "OVERLAP_F_B" if kind == ergon.OVERLAP_F_B else "such",
                                     kind))
        if pending_w:
            raise SystemExit("schedule left %d W steps unrun" % len(pending_w))
        for w in sends:
            if w is not None:
                w.wait()
        for s in self.local:
            self.opts[s].step()
            self.opts[s].zero_grad(set_to_none=True)
        if NS - 1 in self.local:
            total = torch.zeros((), dtype=torch.float32)
            for mb in range(M):
                total = total + losses[mb]
            return float(total)
        return None


class TorchStage:
    """This rank's stages run by PyTorch's own runtime (torch_runtime.TorchPipeline: real
    PipelineStage objects, the real schedule class), with ergon's hooks
    (ergon.integration.torch_pipelining.TorchPipeliningHooks) around every forward, backward, I and W
    the schedule runs, the recorder (server samples) inside them. The interface train() and train_server() use: reset, run_step, hooks, wait_s."""

    def __init__(self, args, rank, placement, sched, client, recorder=None):
        import torch_runtime
        self.pipe = torch_runtime.TorchPipeline(args.model, sched.name, placement, rank,
                                                args.microbatch_size, args.seed, args.lr)
        self.placement = list(placement)
        self.NS = len(self.placement)
        self.P = max(self.placement) + 1
        self.V = self.NS // self.P
        self.local = self.pipe.local
        self.client, self.recorder = client, recorder

    @property
    def hooks(self):
        return self.pipe.hooks

    @property
    def wait_s(self):
        """Receive waits of the last step (hooks.last_waits), seconds."""
        waits = self.pipe.hooks.last_waits if self.pipe.hooks else None
        return sum(sum(v) for v in waits.values()) if waits else 0.0

    def _wrap(self, kind, fn):
        if self.recorder:
            return self.recorder.wrap(kind, fn)
        return fn

    def reset(self, M):
        from ergon.integration.torch_pipelining import TorchPipeliningHooks
        factory = None
        if self.client is not None:
            def factory(stages):
                return TorchPipeliningHooks(self.client, stages, wrap=self._wrap)
        self.pipe.reset(M, factory)

    def run_step(self, step, order, M):
        if M != self.pipe.M:
            raise SystemExit("run_step: M=%d but the pipeline was built for M=%d"
                             % (M, self.pipe.M))
        return self.pipe.run_step(step)

    def order_ran(self):
        """What the hooks saw in the last step: [kind letter, stage, microbatch] ..."""
        return [list(x) for x in self.pipe.hooks.seen] if self.pipe.hooks else None

    def close(self):
        self.pipe.close()


def resolve_runtime(args, sched, rank):
    """'torch' or 'ergon' (see --runtime)."""
    why = ""
    try:
        importlib.import_module("torch.distributed.pipelining")
        from ergon.integration.torch_pipelining import SCHEDULE_CLASSES
        if sched.name not in SCHEDULE_CLASSES:
            why = "PyTorch ships no %s schedule" % sched.name
    except ImportError:
        why = "torch %s has no torch.distributed.pipelining" % torch.__version__
    if args.runtime == "torch" and why:
        raise SystemExit("--runtime torch: %s" % why)
    if args.runtime == "ergon" or why:
        if args.runtime == "auto" and rank == 0:
            print("runtime: this example's own loop (%s)" % why, flush=True)
        return "ergon"
    return "torch"


def reference_losses(args, S, M, steps):
    """Every stage in one process, microbatch by microbatch: the math the pipeline must
    reproduce bitwise."""
    stages = models.build_stages(args.model, S, args.seed)
    data = models.SyntheticData(args.model, args.microbatch_size, args.seed)
    opts = [torch.optim.SGD(st.parameters(), lr=args.lr, momentum=0.9) for st in stages]
    out = []
    for step in range(steps):
        losses = []
        for mb in range(M):
            x, target = data.microbatch(step, mb, M)
            for st in stages:
                x = st(x)
            loss = data.loss(x, target) / M
            loss.backward()
            losses.append(loss.detach())
        for o in opts:
            o.step()
            o.zero_grad(set_to_none=True)
        total = torch.zeros((), dtype=torch.float32)
        for l in losses:
            total = total + l
        out.append(float(total))
    return out


def open_gpu(args, S):
    spec = args.gpu
    if spec == "none":
        return None, False
    if spec == "auto":
        try:
            g = ergon.Gpu("auto")  # NVML, else amdsmi
            return g, False
        except ergon.ErgonError as e:
            if os.environ.get("RANK", "0") == "0":
                print("ergon: %s; using the simulated GPU sim:%s:%s:%d (it models the clock's "
                      "effect on time and energy; the compute runs on the CPU)"
                      % (e, args.sim_gpu, args.sim_model, S), flush=True)
            spec = "sim:%s:%s:%d" % (args.sim_gpu, args.sim_model, S)
    g = ergon.Gpu(spec)
    return g, g.backend == "sim"


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    S = args.stages or world
    M = args.microbatches
    if args.out:
        os.makedirs(args.out, exist_ok=True)

    if world == 1 and S > 1:
        losses = reference_losses(args, S, M, args.steps)
        res = {"mode": "reference", "stages": S, "microbatches": M, "losses": losses,
               "loss_hex": [l.hex() for l in losses]}
        if args.out:
            with open(os.path.join(args.out, "reference.json"), "w") as f:
                json.dump(res, f, indent=1)
        for i, l in enumerate(losses):
            print("reference step %d loss %.6f (%s)" % (i, l, l.hex()))
        return 0
    if S != world:
        raise SystemExit("--stages %d but WORLD_SIZE %d (one process per stage)" % (S, world))

    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.p2p_timeout))
    sched = resolve_schedule(args, S, M)
    runtime = resolve_runtime(args, sched, rank)
    if sched.kind == ergon.SCHED_DUALPIPEV and runtime != "torch":
        raise SystemExit("train.py's own loop does not run dualpipev (its OVERLAP_F_B "
                         "steps): use --runtime torch (PyTorch's ScheduleDualPipeV)")
    order, placement = sched.rank_order(S, M, rank)
    act = grad = None
    if runtime == "ergon":
        act, grad = make_groups(args, placement)

    gpu, sim = open_gpu(args, S)
    client = hooks = None
    if gpu is not None:
        dev = rank if sim else local_rank
        client = ergon.Client(gpu, device=dev, rank=rank, log_dir=args.log_dir)
        hooks = ergon.integration.PipelineHooks(client)
    recorder = Recorder(gpu, dev) if (args.server and gpu is not None) else None
    if args.server and gpu is None:
        raise SystemExit("--server needs a GPU back-end (not --gpu none)")
    if runtime == "torch":
        stage = TorchStage(args, rank, placement, sched, client, recorder)
    else:
        stage = Stage(args, rank, placement, (act, grad), hooks, recorder)
    stage.runtime = runtime
    rc = 1
    try:
        if args.server:
            rc = train_server(args, stage, client, gpu, dev, S, M, rank, sched, order)
        else:
            rc = train(args, stage, client, gpu, S, M, rank, sched, order)
    finally:
        if runtime == "torch":
            stage.close()      # torch's stage methods back, before the client goes
        # Close (resets the clocks) on every path; a failure here must not hide the error
        # that brought us here, and fails an otherwise good run.
        for obj in (client, gpu):
            if obj is not None:
                try:
                    obj.close()
                except ergon.ErgonError as e:
                    print("ergon: closing the %s: %s" % (type(obj).__name__.lower(), e),
                          file=sys.stderr, flush=True)
                    rc = 1
    dist.destroy_process_group()
    return rc


def resolve_schedule(args, S, M):
    """The order: --schedule/--extra-warmup when given, else the JSON plan's schedule, else
    1F1B. A plan's clocks are per (kind, microbatch), so they apply to any order."""
    sched = None
    if args.plan and args.plan.endswith(".json"):
        sched, pS, pM = ergon.plan_schedule(args.plan)
        if (pS, pM) != (S, M):
            raise SystemExit("plan %s is for S=%d M=%d, this run is S=%d M=%d"
                             % (args.plan, pS, pM, S, M))
    if args.schedule:
        sched = ergon.Schedule(args.schedule, chunks=args.chunks or
                               (sched.chunks if sched is not None else 0))
    elif sched is None:
        sched = ergon.Schedule("1f1b")
    elif args.chunks:
        sched.chunks = args.chunks
    if sched.kind == ergon.SCHED_ENVPIPE and (args.extra_warmup or not any(sched.extra_warmup)):
        sched = ergon.Schedule(sched.kind, parse_extra_warmup(args.extra_warmup, S, M))
    return sched


def train(args, stage, client, gpu, S, M, rank, sched, order):
    windows = [(None, args.steps)]
    if args.sweep:
        windows = [(c, args.window_steps + 1) for c in args.sweep]
    if client is not None:
        if args.plan:
            client.load_plan(args.plan, rank)
        elif args.clock:
            clocks = gpu.sm_clocks(client_dev(client, gpu, rank))
            client.set_uniform_clock(max(clocks) if args.clock == "max" else int(args.clock))
    stage.reset(M)
    rows = []
    step = 0
    t_start = time.time()
    for clock, n in windows:
        if clock is not None and client is not None:
            client.set_uniform_clock(clock)
        for _ in range(n):
            if stage.hooks:
                with stage.hooks.step():
                    loss = stage.run_step(step, order, M)
                t, e = stage.hooks.last_step
            else:
                t0 = time.monotonic()
                loss = stage.run_step(step, order, M)
                t, e = time.monotonic() - t0, float("nan")
            row = {"step": step, "time_s": t, "energy_j": e, "clock": clock,
                   "recv_wait_s": stage.wait_s}
            if loss is not None:
                row["loss"], row["loss_hex"] = loss, loss.hex()
                print("step %d loss %.6f time %.3f s" % (step, loss, t), flush=True)
            rows.append(row)
            step += 1
            if step == 1 and client is not None:
                check_clocks(client)
    res = {"rank": rank, "stages": S, "microbatches": M, "schedule": sched.name,
           "chunks": stage.V, "local_stages": stage.local,
           "extra_warmup": sched.extra_warmup[:S], "order": order,
           "plan": args.plan, "clock": args.clock, "gpu": gpu.backend if gpu else "none",
           "wall_s": time.time() - t_start, "steps": rows, "runtime": stage.runtime,
           "torch": torch.__version__,
           "order_ran": stage.order_ran() if stage.runtime == "torch" else None}
    if client is not None:
        client.sync(10.0)
        res["clock_changes"] = client.clock_changes
    if args.out:
        with open(os.path.join(args.out, "result-%d.json" % rank), "w") as f:
            json.dump(res, f, indent=1)
    return 0


def write_stage_plan(path, sched, S, M, stage, clocks):
    """A JSON plan (docs/formats.md, docs/schedules.md) whose rank `stage` runs `clocks` (one
    per instruction in the rank's order); the other ranks are filled with the same top clock
    (the client reads only its own rank). Multi-chunk schedules name each rank's order."""
    top = max(clocks)
    letters = {ergon.FORWARD: "F", ergon.BACKWARD: "B", ergon.BACKWARD_INPUT: "I",
               ergon.BACKWARD_WEIGHT: "W"}
    chunked = sched.kind not in (ergon.SCHED_1F1B, ergon.SCHED_GPIPE, ergon.SCHED_ENVPIPE)
    stages = []
    for s in range(S):
        order = sched.rank_order(S, M, s)[0]
        st = {"stage": s, "freq_mhz": list(clocks) if s == stage else [top] * len(order)}
        if chunked:
            st["order"] = ["%d%s%d" % (x[1], letters[x[0]], x[2]) for x in order]
        stages.append(st)
    plan = {"format": "ergon-plan", "version": 1, "schedule": sched.name, "num_stages": S,
            "num_microbatches": M, "method": "server", "stages": stages}
    if chunked:
        plan["num_chunks"] = sched.num_chunks
    if sched.kind == ergon.SCHED_ENVPIPE:
        plan["extra_warmup"] = sched.extra_warmup[:S]
    with open(path, "w") as f:
        json.dump(plan, f)


def apply_power_states(client, states, sched, S, M, rank, path):
    """A window's schedule from the server: one clock per instruction of this stage's order
    (0 = leave the clock alone: the previous instruction's, or unlocked at the start)."""
    n = len(sched.rank_order(S, M, rank)[0])
    if len(states) != n:
        raise SystemExit("server sent %d power states for %d instructions" % (len(states), n))
    if all(v == states[0] for v in states):
        client.set_uniform_clock(states[0])
        return
    clocks, cur = [], next((v for v in states if v > 0), 0)
    for v in states:
        cur = v if v > 0 else cur
        clocks.append(cur)
    write_stage_plan(path, sched, S, M, rank, clocks)
    client.load_plan(path, rank)


def train_server(args, stage, client, gpu, dev, S, M, rank, sched, order):
    """Windows driven by `ergon serve` (/v1 API through ergon.server_client): rank 0
    registers the job and broadcasts its id, every rank registers its instruction list and
    the clocks it offers, then: fetch the window's clocks (barrier), run --window-steps
    iterations, report time, energy and per-instruction samples; until the job ends. A rank
    whose training fails aborts the job; heartbeats every iteration let a server started
    with --rank-timeout abort it when a rank dies silently."""
    from ergon.server_client import ServerClient
    sc = ServerClient(args.server, schedule_wait_s=5)
    job = None
    if rank == 0:
        job = sc.register_job(
            pp_degree=S, framework="torch", model_name=args.model, partition_method="uniform",
            microbatch_size=args.microbatch_size, num_microbatches=M,
            scheduler=args.scheduler or None,
            scheduler_args=json.loads(args.scheduler_args) if args.scheduler_args else None,
            mode="frequency")
        if args.job_file:
            with open(args.job_file, "w") as f:
                f.write(job + "\n")
        print("server job %s" % job, flush=True)
    box = [job]
    dist.broadcast_object_list(box, src=0)
    job = box[0]
    states = args.power_states or gpu.sm_clocks(dev)
    pipe = [KIND_NAMES[k] for k, *_ in order]
    sc.register_rank(job, rank=rank, dp_rank=0, pp_rank=rank, tp_rank=0, pipe_schedule=pipe,
                     power_states=states)
    plan_path = os.path.join(args.out or ".", ".window-plan-%d.json" % rank)
    stage.reset(M)
    rows, step, windows, states_seen = [], 0, 0, []
    t_start = time.time()
    try:
        while True:
            got = sc.fetch_schedule(job, rank)
            if got is None:
                break
            window, ps = got
            apply_power_states(client, ps, sched, S, M, rank, plan_path)
            client.sync(10.0)
            client.energy_source(reset=True)  # the window's steps only
            its = []
            for _ in range(args.window_steps):
                sc.heartbeat(job, rank)
                stage.recorder.take()
                with stage.hooks.step():
                    loss = stage.run_step(step, order, M)
                t, e = stage.hooks.last_step
                its.append((t, e, stage.recorder.take(), stage.hooks.last_waits))
                row = {"step": step, "time_s": t, "energy_j": e, "window": window,
                       "clock": ps[0] if len(set(ps)) == 1 else None,
                       "recv_wait_s": stage.wait_s}
                if loss is not None:
                    row["loss"], row["loss_hex"] = loss, loss.hex()
                    print("window %d step %d loss %.6f time %.3f s" % (window, step, loss, t),
                          flush=True)
                rows.append(row)
                step += 1
            # where the window's energies came from (the counter, or power integrated
            # once the counter was not trusted): the server keeps it in its dumps
            sc.report(job, window, rank, its, energy_source=client.energy_source(reset=True))
            windows += 1
            states_seen.append(ps)
            if args.max_windows and windows >= args.max_windows:
                # Every rank has reported before rank 0 ends the job (a result for an ended
                # job is refused).
                dist.barrier()
                if rank == 0:
                    sc.end_job(job, "trainer: %d windows done" % windows)
                break
    except BaseException as ex:
        try:
            sc.abort_job(job, "rank %d: %s" % (rank, str(ex)[:200] or type(ex).__name__))
        except Exception:
            pass
        raise
    finally:
        if os.path.exists(plan_path):
            os.unlink(plan_path)
        sc.close()
    res = {"rank": rank, "stages": S, "microbatches": M, "schedule": sched.name,
           "chunks": stage.V, "local_stages": stage.local,
           "extra_warmup": sched.extra_warmup[:S], "order": order, "server": args.server,
           "job_id": job, "windows": windows, "power_states": states_seen, "gpu": gpu.backend,
           "wall_s": time.time() - t_start, "steps": rows, "runtime": stage.runtime,
           "torch": torch.__version__,
           "order_ran": stage.order_ran() if stage.runtime == "torch" else None}
    if args.out:
        with open(os.path.join(args.out, "result-%d.json" % rank), "w") as f:
            json.dump(res, f, indent=1)
    return 0


def check_clocks(client):
    """After the first iteration: did the client's clock changes work? (Without privilege
    NVML refuses them; the client's clock thread records the error.)"""
    try:
        client.sync(10.0)
    except ergon.ErgonError as e:
        msg = str(e)
    else:
        return
    raise SystemExit("ergon: the GPU clocks could not be changed: %s\n(without root or "
                     "CAP_SYS_ADMIN, run ergond and use --gpu daemon:SOCKET)" % msg)


def client_dev(client, gpu, rank):
    return rank if gpu.backend == "sim" else int(os.environ.get("LOCAL_RANK", rank))


def make_groups(args, placement):
    """Two gloo groups per pipeline-stage boundary that crosses ranks: activations s -> s+1
    and gradients s+1 -> s never share a channel (a boundary inside a rank, the V shape's
    turn, needs none). Collective: every rank creates every group, in the same order."""
    NS = len(placement)
    act, grad = [None] * (NS - 1), [None] * (NS - 1)
    for b in range(NS - 1):
        if placement[b] != placement[b + 1]:
            pair = sorted((placement[b], placement[b + 1]))
            act[b] = dist.new_group(pair)
            grad[b] = dist.new_group(pair)
    return act, grad


if __name__ == "__main__":
    sys.exit(main())
