"""ergon inside torchtitan's Trainer (pytorch/torchtitan, written and tested against torchtitan
0.3.0 on torch 2.15), through torchtitan's own extension point: no torchtitan file is edited
or copied.

One switch on torchtitan's own command line turns it on (`--override.imports`, torchtitan's
documented override mechanism, torchtitan/config/override.py):

    torchrun ... -m torchtitan.train --module llama3 --config llama3_8b ... \
        --override.imports 'ergon.integration.torchtitan.ergon={"plan": "plan.json"}'

or the same through ergon's entry point, which takes `--ergon.KEY VALUE` switches, adds that
override and runs torchtitan's own `torchtitan.train.main()` (and, on a machine without
CUDA, the CPU shim below first):

    torchrun ... -m ergon.integration.torchtitan --ergon.plan plan.json --module llama3 ...

Settings (the override's JSON object, or `--ergon.KEY VALUE`; see SETTINGS):
  gpu SPEC           the GPU back-end (ergon.Gpu: nvml, amdsmi, sim:GPU:MODEL:N, daemon:SOCK;
                     default auto = NVML, else amdsmi)
  plan PATH          a JSON plan (`ergon choose`): each instruction's clock, per rank
  clock max|MHZ      one clock for the whole run (the all-max baseline: max)
  server URL         windows driven by `ergon serve` (/v1): the job's scheduler (scheduler,
                     scheduler_args) serves each window's clocks (InstructionProfiler,
                     PointSolution, Frontier: the straggler target set by POST
                     /v1/jobs/ID/straggler, EnvPipe); every rank reports time, energy,
                     per-instruction samples and receive waits per window; power_states
                     HI:LO:STEP are the clocks offered (default: the GPU's), window_steps the
                     iterations of a window (default 1), max_windows ends the job after that
                     many (0: the server ends it), job_file where rank 0 writes the job id
  schedule NAME      ergon's name of the schedule (default: torchtitan's
                     parallelism.pipeline_parallel_schedule; give it with
                     pipeline_parallel_schedule_csv in server mode, e.g. ours)
  pace true          on a simulated GPU, hold each instruction for the model's time at its clock
                     (server samples are then the device's time and energy, see _wrap)
  out DIR            each rank writes DIR/ergon-rank-R.json (R: the global rank): per step the
                     order the hooks saw, time, energy, receive waits and the losses (float
                     hex), clock changes, and in server mode the clocks each window was served
  log_dir DIR        the client's logs (docs/runtime.md "Logs"): instructions-R.csv, R the
                     global rank, with the clock each instruction ran at (freq_run)
  wait_clock true    each instruction waits at its begin until its clock is applied
                     (ERG_CLIENT_WAIT_CLOCK: freq_run is then the clock it ran at; on a real
                     GPU a stall per clock change)

Ranks: the client's rank and a server job's rank are the process's global rank (torchtitan's
mesh puts pp outermost: the ranks of pipeline stage s are s*W/P ... (s+1)*W/P - 1, W the world
size); its stage is its pp rank, and in a server job its dp_rank counts the data-parallel
replicas (dp_replicate x dp_shard x cp) and tp_rank the tensor-parallel ones, so a job of PP x
DP ranks registers every rank and the server serves each replica's stage ranks the stage's
clocks.

HOW: the override claims torchtitan's checkpoint-manager config (the one component the
Trainer builds with a reference to itself: `states={"train_state": trainer}`, after the
pipeline schedule exists) and returns the same config in a subclass whose build() builds the
checkpoint manager exactly as before, then attaches ergon to the trainer:
TorchPipeliningHooks (ergon.integration.torch_pipelining: the same hooks as for any
torch.distributed.pipelining program) wrap the schedule's stages (`pp_schedule._stages`, or
`_stage` of a single-stage class), and the schedule object's `step` (an instance attribute)
runs each `Trainer.pp_forward_backward_step` call as one ergon step. The checkpoint manager's
`close` (Trainer.close calls it) puts the stages back, ends a server job and restores clocks.
Every schedule torchtitan runs is covered: the named classes and a
`pipeline_parallel_schedule_csv` (torch's _PipelineScheduleRuntime), e.g. the CSV of
`ergon schedule ours --format torch-csv`.

No GPU: torchtitan 0.3.0 picks its device once, when torchtitan.tools.utils is imported
(`torch._utils._get_available_device_type() or "cuda"`), so a CPU-only machine gets "cuda"
and fails in set_device. `cpu_shim()` (called by the entry point when CUDA is unavailable,
before torchtitan is imported) answers "cpu" to that one call and gives torchtitan, for the
CPU, the device module it expects (torch.cpu plus the memory-monitor calls
torchtitan.components.metrics makes: device name, capacity, memory stats); gloo is then
torch's default backend for "cpu". Importing this module before torchtitan on a machine
without CUDA applies the shim too (as torchtitan's override.imports does when the entry point
or a test program imports it first). One model path cannot run on the CPU: torch 2.15's
FlexAttention has no CPU backward (NotImplementedError "FlexAttention does not support
backward on CPU"), and torchtitan's language models use it; on the CPU the entry point adds a
second override, `ergon.integration.torchtitan.sdpa_on_cpu`, which swaps each layer's
FlexAttention for torchtitan's own ScaledDotProductAttention (causal; the CPU then trains
without document masking). Nothing else changes. Keep `--training.disable_cuda_graphs`
(torchtitan refuses CUDA graphs with pipeline parallelism).
"""
import csv
import io
import json
import os
import sys
import time
import types

import ergon
from .torch_pipelining import TorchPipeliningHooks

__all__ = ["cpu_shim", "main", "with_override", "csv_order", "SETTINGS", "ErgonTrainer"]

# The settings (override kwargs / --ergon.KEY switches) and their types.
SETTINGS = {"gpu": str, "plan": str, "clock": str, "server": str, "scheduler": str,
            "scheduler_args": dict, "power_states": str, "window_steps": int,
            "max_windows": int, "job_file": str, "schedule": str, "pace": bool, "out": str,
            "log_dir": str, "wait_clock": bool}
_KIND_NAMES = {ergon.FORWARD: "forward", ergon.BACKWARD: "backward",
               ergon.BACKWARD_INPUT: "backward_input", ergon.BACKWARD_WEIGHT: "backward_weight"}
_LETTERS = {"F": ergon.FORWARD, "B": ergon.BACKWARD, "I": ergon.BACKWARD_INPUT,
            "W": ergon.BACKWARD_WEIGHT}


def check_settings(settings):
    """The settings, type-checked (ValueError naming the key otherwise)."""
    out = {}
    for key, val in settings.items():
        typ = SETTINGS.get(key)
        if typ is None:
            raise ValueError("ergon: unknown torchtitan setting %r (known: %s)"
                             % (key, ", ".join(sorted(SETTINGS))))
        if typ is dict and isinstance(val, str):
            val = json.loads(val)
        elif typ is int and isinstance(val, str):
            val = int(val)
        elif typ is bool and isinstance(val, str):
            if val.lower() not in ("true", "false", "1", "0"):
                raise ValueError("ergon: setting %s wants true or false, not %r" % (key, val))
            val = val.lower() in ("true", "1")
        if not isinstance(val, typ):
            raise ValueError("ergon: setting %s wants a %s, not %r" % (key, typ.__name__, val))
        out[key] = val
    clock = out.get("clock")
    if clock is not None and clock != "max" and not (clock.isdigit() and int(clock) > 0):
        raise ValueError("ergon: setting clock wants max or a clock in MHz, not %r" % clock)
    if "plan" in out and "clock" in out:
        raise ValueError("ergon: give plan or clock, not both")
    if "server" in out and ("plan" in out or "clock" in out):
        raise ValueError("ergon: with server the job's scheduler gives the clocks (no plan, clock)")
    return out


# -- the CPU shim ------------------------------------------------------------------------

class _CpuDeviceModule(types.ModuleType):
    """torch.cpu, plus what torchtitan's DeviceMemoryMonitor asks of a device module."""

    def __init__(self):
        super().__init__("ergon_torchtitan_cpu")
        import torch
        self._cpu = torch.cpu

    def __getattr__(self, name):
        return getattr(self._cpu, name)

    @staticmethod
    def get_device_name(device=None):
        return "cpu"

    @staticmethod
    def get_device_properties(device=None):
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return types.SimpleNamespace(name="cpu", total_memory=total)

    @staticmethod
    def current_device():
        return 0        # torchtitan passes it as a device id (barrier(device_ids=[...]))

    @staticmethod
    def memory_stats(device=None):
        return {}

    @staticmethod
    def reset_peak_memory_stats(device=None):
        return None

    @staticmethod
    def empty_cache():
        return None


def cpu_shim():
    """Make torchtitan run on the CPU (module docstring). Call it before anything imports
    torchtitan; a no-op when torchtitan already chose the CPU."""
    mod = sys.modules.get("torchtitan.tools.utils")
    if mod is not None:
        if getattr(mod, "device_type", None) != "cpu":
            raise RuntimeError("ergon.integration.torchtitan.cpu_shim() must run before "
                               "torchtitan is imported (it chose %r)" % mod.device_type)
        return
    import torch._utils as tu
    saved = tu._get_available_device_type, tu._get_device_module
    cpu = _CpuDeviceModule()
    tu._get_available_device_type = lambda: "cpu"
    tu._get_device_module = lambda device_type=None: (
        cpu if device_type == "cpu" else saved[1](device_type))
    try:
        import torchtitan.tools.utils  # noqa: F401  (binds device_type, device_module)
    finally:
        tu._get_available_device_type, tu._get_device_module = saved


# -- the per-rank integration ---------------------------------------------------------------

def csv_order(path, rank):
    """This rank's (kind, stage, microbatch) from a compute-only CSV (torch's _dump_csv, as
    `ergon schedule --format torch-csv` writes), an OVERLAP_F_B cell as its two parts."""
    with open(path) as f:
        rows = [r for r in csv.reader(io.StringIO(f.read())) if r and not r[0].startswith("#")]
    out = []
    for cell in rows[rank]:
        cell = cell.strip()
        if not cell:
            continue
        parts = cell[1:cell.index(")")].split(";") if cell.startswith("(") else [cell]
        for p in parts:
            i = next(k for k, ch in enumerate(p) if ch.isalpha())
            out.append((p[i], int(p[:i]), int(p[i + 1:])))
    return out


def _parse_clocks(spec):
    hi, lo, step = (int(x) for x in spec.split(":"))
    return list(range(hi, lo - 1, -step))


class ErgonTrainer:
    """ergon attached to one rank of a torchtitan Trainer (see the module docstring)."""

    def __init__(self, trainer, settings):
        import torch
        import torch.distributed as dist
        self.settings = s = check_settings(settings)
        if not trainer.parallel_dims.pp_enabled:
            raise ValueError("ergon: torchtitan runs without pipeline parallelism "
                             "(parallelism.pipeline_parallel_degree is 1)")
        self.trainer = trainer
        sched = trainer.pp_schedule
        stages = list(getattr(sched, "_stages", None) or [sched._stage])
        pd = trainer.parallel_dims
        self.pp_rank = pd.get_mesh("pp").get_local_rank()
        self.P = pd.pp
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.tp = pd.tp
        per_stage = self.world // self.P
        if self.rank // per_stage != self.pp_rank:
            raise RuntimeError("ergon: global rank %d of %d has pp rank %d; expected torchtitan's "
                               "mesh with pp outermost (pp rank %d)"
                               % (self.rank, self.world, self.pp_rank, self.rank // per_stage))
        self.dp_rank = (self.rank % per_stage) // self.tp
        self.tp_rank = self.rank % self.tp
        self.M = trainer.num_pipeline_parallel_microbatches
        par = trainer.config.parallelism
        self.csv = par.pipeline_parallel_schedule_csv or None
        self.schedule = s.get("schedule") or (None if self.csv else
                                              par.pipeline_parallel_schedule)
        self.gpu = ergon.Gpu(s.get("gpu", "auto"))
        sim = self.gpu.backend == "sim"
        self.dev = self.pp_rank if sim else int(os.environ.get("LOCAL_RANK", 0))
        self.client = ergon.Client(self.gpu, device=self.dev, rank=self.rank,
                                   log_dir=s.get("log_dir"),
                                   flags=ergon.CLIENT_WAIT_CLOCK if s.get("wait_clock") else 0)
        self.top = max(self.gpu.sm_clocks(self.dev))
        if "plan" in s:
            self.client.load_plan(s["plan"], self.pp_rank)
        elif "clock" in s:
            self.client.set_uniform_clock(self.top if s["clock"] == "max" else int(s["clock"]))
        self.samples = {}
        sync = torch.cuda.current_stream().synchronize if torch.cuda.is_available() else None
        self.hooks = TorchPipeliningHooks(self.client, stages, sync=sync, wrap=self._wrap)
        self._pace = bool(s.get("pace")) and sim
        self._chunks = len(stages)   # each of the rank's stages: 1/V of the device's stage
        self.records = []
        self.server = _ServerJob(self, dist) if "server" in s else None
        self._orig_step = sched.step
        sched.step = self.step            # an instance attribute: what the Trainer calls
        self._sched = sched
        self._closed = False

    def order(self):
        """This rank's (kind letter, stage, microbatch) per the schedule ergon names (or the
        CSV torchtitan runs)."""
        if self.csv and not self.settings.get("schedule"):
            return csv_order(self.csv, self.pp_rank)
        if not self.schedule:
            raise ValueError("ergon: give the setting schedule (ergon's name of the CSV's "
                             "schedule, e.g. ours) for server mode")
        return _expand(ergon.Schedule(self.schedule), self.P, self.M, self.pp_rank)

    def _wrap(self, kind, fn):
        """Around each instruction's compute (inside the hooks): the per-instruction samples a
        server job reports, (time_s, energy_j). With `pace` on a simulated GPU the instruction
        is held for the model's time at the applied clock (the device busy meanwhile), and its
        sample is the device's: that time, and the energy the simulated counter measured scaled
        to it (the host's wall clock adds scheduling jitter, which on a loaded machine reorders
        samples of neighbouring clocks)."""
        def run(*args, **kwargs):
            e0, t0 = self.gpu.energy_mj(self.dev), time.monotonic()
            t_dev = None
            try:
                if not self._pace:
                    return fn(*args, **kwargs)
                try:
                    self.client.sync(10.0)   # the clock instruction_begin asked for is applied
                except ergon.ErgonError:
                    pass                     # a refused clock: the clock count shows it
                t_dev = self.gpu.sim_set_activity(self.dev, True, kind) / self._chunks
                try:
                    return fn(*args, **kwargs)
                finally:
                    rest = t_dev - (time.monotonic() - t0)
                    if rest > 0:
                        time.sleep(rest)
                    self.gpu.sim_set_activity(self.dev, False)
            finally:
                t = time.monotonic() - t0
                e = (self.gpu.energy_mj(self.dev) - e0) / 1000.0
                if t_dev is not None and t > 0:
                    t, e = t_dev, e * t_dev / t
                self.samples.setdefault(_KIND_NAMES[kind], []).append((t, e))
        return run

    def step(self, *args, **kwargs):
        """One Trainer.pp_forward_backward_step: one ergon step (and server window part)."""
        try:
            if self.server is not None:
                self.server.before_step()
            self.samples = {}
            losses = kwargs.get("losses")
            with self.hooks.step():
                out = self._orig_step(*args, **kwargs)
        except BaseException as ex:
            if self.server is not None:   # the job cannot go on: say why, end it here
                self.server.abort("rank %d: %s" % (self.rank,
                                                   str(ex)[:200] or type(ex).__name__))
            raise
        t, e = self.hooks.last_step
        rec = {"order": ["%d%s%d" % (s, k, m) for k, s, m in self.hooks.seen],
               "time_s": t, "energy_j": e, "waits": self.hooks.last_waits,
               "clock_changes": self.client.clock_changes}
        if losses:
            rec["losses"] = [float(x.detach()).hex() for x in losses]
        self.records.append(rec)
        if self.server is not None:
            self.server.after_step(t, e, self.samples, self.hooks.last_waits)
        return out

    def close(self):
        if self._closed:
            return
        self._closed = True
        try:
            if self.server is not None:
                self.server.close()
        finally:
            self._sched.__dict__.pop("step", None)
            self.hooks.close()
            out = self.settings.get("out")
            try:
                self.client.sync(10.0)   # the last clock asked for is applied (and counted)
            except ergon.ErgonError:
                pass                     # a clock the back-end refused: the count says so
            if out:
                os.makedirs(out, exist_ok=True)
                res = {"rank": self.rank, "pp_rank": self.pp_rank, "dp_rank": self.dp_rank,
                       "tp_rank": self.tp_rank, "world_size": self.world, "P": self.P, "M": self.M,
                       "schedule": self.schedule, "csv": self.csv,
                       "clock_changes": self.client.clock_changes, "steps": self.records,
                       "server": self.server.summary() if self.server else None}
                with open(os.path.join(out, "ergon-rank-%d.json" % self.rank), "w") as f:
                    json.dump(res, f, indent=1)
            self.client.close()          # puts the GPU's clocks back
            self.gpu.close()


class _ServerJob:
    """Windows driven by `ergon serve` (/v1 API), as the example trainer's train_server:
    global rank 0 registers the job (pp_degree P, dp_degree and tp_degree: the world is
    P x dp x tp ranks) and broadcasts its id to every rank; every rank registers under its
    global rank (dp_rank, pp_rank, tp_rank) its instructions and the clocks it offers (the
    server serves stage s's clocks to every rank with pp_rank s); each window: fetch its
    clocks, run window_steps iterations, report time, energy, per-instruction samples and
    receive waits. When the server ends the job (e.g. InstructionProfiler done), training goes
    on at the top clock."""

    def __init__(self, run, dist):
        from ergon.server_client import ServerClient
        self.run, self.dist = run, dist
        s = run.settings
        self.sc = ServerClient(s["server"], schedule_wait_s=5)
        self.window_steps = max(1, s.get("window_steps", 1))
        self.job, self.window, self.left, self.its = None, None, 0, []
        self.windows, self.power_states, self.window_ids, self.done = 0, [], [], False
        self.plan_path = os.path.join(s.get("out") or ".", ".ergon-window-%d.json" % run.rank)

    def _register(self):
        r = self.run
        s = r.settings
        order = r.order()
        job = None
        if r.rank == 0:
            job = self.sc.register_job(
                pp_degree=r.P, dp_degree=r.world // (r.P * r.tp), tp_degree=r.tp,
                framework="torchtitan",
                model_name=str(getattr(r.trainer.config.model_spec, "name", "model")),
                partition_method="uniform",
                microbatch_size=r.trainer.config.parallelism.pipeline_parallel_microbatch_size,
                num_microbatches=r.M, scheduler=s.get("scheduler"),
                scheduler_args=s.get("scheduler_args"), mode="frequency")
            if s.get("job_file"):
                with open(s["job_file"], "w") as f:
                    f.write(job + "\n")
        box = [job]
        self.dist.broadcast_object_list(box, src=0)   # every rank of the job
        self.job = box[0]
        states = (_parse_clocks(s["power_states"]) if s.get("power_states")
                  else r.gpu.sm_clocks(r.dev))
        self.order = order
        self.sc.register_rank(self.job, rank=r.rank, dp_rank=r.dp_rank, pp_rank=r.pp_rank,
                              tp_rank=r.tp_rank, pipe_schedule=[_KIND_NAMES[_LETTERS[k]]
                                                        for k, _, _ in order],
                              power_states=states)

    def before_step(self):
        if self.done:
            return
        if self.job is None:
            self._register()
        if self.left == 0:
            got = self.sc.fetch_schedule(self.job, self.run.rank)
            if got is None:           # the job ended: train on at the top clock
                self.done = True
                self.run.client.set_uniform_clock(self.run.top)
                return
            self.window, ps = got
            self.window_ids.append(self.window)
            self._apply(ps)
            self.power_states.append(ps)
            self.run.client.sync(10.0)
            self.run.client.energy_source(reset=True)
            self.left, self.its = self.window_steps, []
        self.sc.heartbeat(self.job, self.run.rank)

    def after_step(self, t, e, samples, waits):
        if self.done or self.left == 0:
            return
        self.its.append((t, e, samples, waits))
        self.left -= 1
        if self.left == 0:
            self.sc.report(self.job, self.window, self.run.rank, self.its,
                           energy_source=self.run.client.energy_source(reset=True))
            self.windows += 1
            mw = self.run.settings.get("max_windows", 0)
            if mw and self.windows >= mw:
                self._end("torchtitan: %d windows done" % self.windows)

    def _apply(self, ps):
        """A window's clocks: one per instruction of this rank's order (0 = keep the
        previous one)."""
        r = self.run
        if len(ps) != len(self.order):
            raise RuntimeError("ergon: the server sent %d power states for %d instructions"
                               % (len(ps), len(self.order)))
        if all(v == ps[0] for v in ps):
            r.client.set_uniform_clock(ps[0] or r.top)
            return
        clocks, cur = [], next((v for v in ps if v > 0), r.top)
        for v in ps:
            cur = v if v > 0 else cur
            clocks.append(cur)
        sched = ergon.Schedule(r.schedule)
        chunked = sched.kind not in (ergon.SCHED_1F1B, ergon.SCHED_GPIPE, ergon.SCHED_ENVPIPE)
        stages = []
        for st in range(r.P):
            n = len(self.order) if st == r.pp_rank else len(
                sched.rank_order(r.P, r.M, st)[0])
            x = {"stage": st, "freq_mhz": clocks if st == r.pp_rank else [r.top] * n}
            if chunked:
                x["order"] = ["%d%s%d" % (s, k, m) for k, s, m in (
                    self.order if st == r.pp_rank else _expand(sched, r.P, r.M, st))]
            stages.append(x)
        plan = {"format": "ergon-plan", "version": 1, "schedule": sched.name,
                "num_stages": r.P, "num_microbatches": r.M, "method": "server",
                "stages": stages}
        if chunked:
            plan["num_chunks"] = sched.num_chunks
        os.makedirs(os.path.dirname(self.plan_path) or ".", exist_ok=True)
        with open(self.plan_path, "w") as f:
            json.dump(plan, f)
        r.client.load_plan(self.plan_path, r.pp_rank)

    def abort(self, why):
        if self.job is not None and not self.done:
            self.done = True
            try:
                self.sc.abort_job(self.job, why)
            except Exception:  # the server may be gone too; the training error is raised
                pass

    def _end(self, why):
        self.dist.barrier()   # every rank of the job reported its last window
        if self.run.rank == 0:
            self.sc.end_job(self.job, why)
        self.done = True
        self.run.client.set_uniform_clock(self.run.top)

    def close(self):
        try:
            if self.job is not None and not self.done:
                self._end("torchtitan: training ended")
        finally:
            if os.path.exists(self.plan_path):
                os.unlink(self.plan_path)
            self.sc.close()

    def summary(self):
        return {"job_id": self.job, "windows": self.windows, "power_states": self.power_states,
                "window_ids": self.window_ids}


def _expand(sched, P, M, rank):
    letters = {v: k for k, v in _LETTERS.items()}
    out = []
    for x in sched.rank_order(P, M, rank)[0]:
        if x[0] == ergon.OVERLAP_F_B:
            out += [("F", x[1], x[2]), (letters[x[3]], x[4], x[5])]
        else:
            out.append((letters[x[0]], x[1], x[2]))
    return out


# -- torchtitan's override -------------------------------------------------------------------

def _attach_on_build(base, settings):
    """A dataclass subclass of the checkpoint config `base` whose build() builds the
    checkpoint manager as `base` does, then attaches ergon to the trainer."""
    from dataclasses import dataclass

    @dataclass(kw_only=True, slots=True)
    class ErgonCheckpointConfig(base):
        def build(self, **kwargs):
            mgr = base.build(self, **kwargs)
            trainer = kwargs["states"]["train_state"]
            run = ErgonTrainer(trainer, settings)
            trainer.ergon = run
            close = mgr.close

            def close_all():
                try:
                    run.close()
                finally:
                    close()
            mgr.close = close_all
            return mgr

    ErgonCheckpointConfig.__qualname__ = "ErgonCheckpointConfig[%s]" % base.__qualname__
    return ErgonCheckpointConfig


def _register():
    from dataclasses import fields
    from torchtitan.components.checkpointer import BaseCheckpointManager
    from torchtitan.config.override import override
    from torchtitan.models.common.attention import FlexAttention, ScaledDotProductAttention

    @override(target=BaseCheckpointManager.Config,
              description="ergon: per-instruction GPU clocks and measurement around the "
                          "pipeline schedule (ergon.integration.torchtitan)")
    def ergon(cfg, **settings):  # noqa: F811  (the target name users list: ...torchtitan.ergon)
        settings = check_settings(settings)
        cls = _attach_on_build(type(cfg), settings)
        return cls(**{f.name: getattr(cfg, f.name) for f in fields(cfg) if f.init})

    @override(target=FlexAttention.Config, exact=True,
              description="ergon's CPU shim: torch's FlexAttention has no backward on the "
                          "CPU; torchtitan's own ScaledDotProductAttention (causal) instead")
    def sdpa_on_cpu(cfg):
        return ScaledDotProductAttention.Config()

    return ergon


# -- the entry point -------------------------------------------------------------------------

TARGET = "ergon.integration.torchtitan.ergon"
CPU_TARGET = "ergon.integration.torchtitan.sdpa_on_cpu"


def parse_switches(argv):
    """(settings, the other arguments): --ergon.KEY VALUE / --ergon.KEY=VALUE switches
    (--ergon.pace alone = true)."""
    settings, rest, i = {}, [], 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--ergon."):
            key, eq, val = a[len("--ergon."):].partition("=")
            key = key.replace("-", "_")
            if not eq:
                if SETTINGS.get(key) is bool and (i + 1 >= len(argv) or
                                                  argv[i + 1].startswith("--")):
                    val = "true"
                else:
                    if i + 1 >= len(argv):
                        raise ValueError("ergon: --ergon.%s needs a value" % key)
                    i += 1
                    val = argv[i]
            settings[key] = val
        else:
            rest.append(a)
        i += 1
    return check_settings(settings), rest


def with_override(args, settings, cpu=False):
    """torchtitan's arguments with ergon's override (and on the CPU the attention one)
    added to --override.imports."""
    tokens = ["%s=%s" % (TARGET, json.dumps(settings, separators=(",", ":")))]
    if cpu:
        tokens.append(CPU_TARGET)
    args = list(args)
    for i, a in enumerate(args):
        if a == "--override.imports":
            return args[:i + 1] + tokens + args[i + 1:]
        if a.startswith("--override.imports="):
            return args[:i] + ["--override.imports", a.split("=", 1)[1]] + tokens + args[i + 1:]
    return ["--override.imports"] + tokens + args


def main(argv=None):
    """python -m ergon.integration.torchtitan [--ergon.KEY VALUE ...] TORCHTITAN_ARGS"""
    argv = sys.argv[1:] if argv is None else argv
    settings, rest = parse_switches(argv)
    cpu = _cpu_only()
    if cpu:
        cpu_shim()
    sys.argv = [sys.argv[0]] + with_override(rest, settings, cpu)
    from torchtitan.train import main as titan_main
    titan_main()


def _cpu_only():
    import torch
    return not torch.cuda.is_available()


if __name__ == "__main__":
    main()
else:
    # Imported (by torchtitan's --override.imports, or a program) before torchtitan on a
    # machine without CUDA: torchtitan runs on the CPU.
    if "torchtitan.tools.utils" not in sys.modules and _cpu_only():
        cpu_shim()
    ergon_override = _register()
