"""DeepSpeed's pipeline engine (deepspeed.runtime.pipe, checked against DeepSpeed 0.19.8).

What DeepSpeed really calls (runtime/pipe/engine.py): `PipelineEngine.train_batch` builds a
`PipeSchedule` with `self._train_schedule()` (a `TrainSchedule`, synchronous 1F1B) and
`_exec_schedule` runs every `PipeInstruction` the schedule yields through
`self._INSTRUCTION_MAP[type(cmd)]` (a class attribute read through the instance), bound with
`MethodType` and called with the instruction's kwargs (`buffer_id=...`): `_exec_forward_pass`,
`_exec_backward_pass`, `_exec_recv_activations`, `_exec_recv_grads`, `_exec_send_*`,
`_exec_load_micro_batch`, `_exec_reduce_*`, `_exec_optimizer_step`. Instructions carry a
pipeline *buffer* id, not a microbatch: every schedule DeepSpeed ships (and `ours` below) runs
the forwards, and the backwards, of a stage in microbatch order, so the n-th ForwardPass
(BackwardPass) of a batch is microbatch n.

`instrument_deepspeed(engine, client)` gives the engine its own `_INSTRUCTION_MAP`:
ForwardPass/BackwardPass run between `client.instruction_begin/_end(kind, microbatch)` (the
planned clock of that instruction; with the simulated GPU and `pace=True` each is held for the
time the GPU model gives at the applied clock), RecvActivation/RecvGrad are timed as receive
waits (`client.recv_begin/_end`, charged to the next instruction, EnvPipe's measurement) and
`train_batch` is one step. After each batch: `hooks.last_order` (the (kind, microbatch) order
this rank ran), `hooks.last_step` (time_s, energy_j), `hooks.last_waits` (per-instruction
receive waits) and, with a GPU, `hooks.take_samples()` (per-instruction time and energy).

`ErgonSchedule` is a `PipeSchedule` that runs ergon's order (libergon's erg_schedule_stage_order
through the binding): 1F1B or EnvPipe's `ours` with the extra warm-up forwards r_s of a plan.
Select it with one call, `use_ergon_schedule(engine, schedule)`, or with the DeepSpeed config
key `"pipeline": {"ergon_schedule": "ours", "ergon_plan": "plan.json"}` (read by
`instrument_deepspeed`). Its P2P order cannot deadlock with blocking send/recv (DeepSpeed's
p2p.send/recv are blocking): see `ErgonSchedule`.

`serve_windows(...)` runs training windows whose clocks come from `ergon serve` (any scheduler,
EnvPipe online included) and reports time, energy, per-instruction samples and receive waits.
"""
import contextlib
import functools
import json
import os
import time

import deepspeed.comm as ds_dist
from deepspeed.runtime.pipe import schedule as ds_schedule

import ergon
from ergon.integration import PipelineHooks

__all__ = ["DeepSpeedHooks", "instrument_deepspeed", "ErgonSchedule", "use_ergon_schedule",
           "schedule_from_config", "serve_windows", "KIND_NAMES"]

KIND_NAMES = {ergon.FORWARD: "forward", ergon.BACKWARD: "backward"}


class DeepSpeedHooks(PipelineHooks):
    """PipelineHooks for DeepSpeed's instruction handlers (see the module docstring).

    gpu, device: an ergon.Gpu and this rank's device on it: per-instruction (time_s,
    energy_j) samples for the server's time/energy breakdown. pace: with the simulated GPU,
    hold each forward/backward for the simulated time at the applied clock with the device
    marked busy (the compute itself runs on the CPU), so clocks change time and energy as the
    GPU model says."""

    def __init__(self, client, sync=None, gpu=None, device=0, pace=False):
        super().__init__(client, sync=sync)
        if pace and (gpu is None or gpu.backend != "sim"):
            raise ValueError("pace=True needs the simulated GPU (an ergon.Gpu('sim:...'))")
        self.gpu, self.device, self.pace = gpu, device, pace
        self.order = []
        self.in_step = False
        self.last_order = None       # [(kind, microbatch), ...] of the last batch
        self.overruns = 0            # paced instructions whose CPU compute outlasted the model
        self.sync_wait_s = 0.0       # paced: time spent waiting for clock changes to land
        self.paced_s = 0.0           # paced: the simulated time of the instructions held
        self.late_s = 0.0            # paced: how much longer the sleeps held them (a loaded host)
        self.instructions = 0
        self._samples = {"forward": [], "backward": []}
        # paced: the simulated GPU's own accounting (Gpu.sim_account) of each instruction of
        # the step, (clock at its begin, model time, model energy), whatever the host took
        self.sim_trace = []
        self.last_sim = None         # the last step's: {"clocks", "busy_time_s", "busy_energy_j"}
        self._acct = gpu.sim_account(device) if pace else None

    @contextlib.contextmanager
    def step(self):
        self.order = []
        self.sim_trace = []
        self.in_step = True
        try:
            with super().step():
                yield self
        finally:
            self.in_step = False
        self.last_order = self.order
        if self.pace:
            tr = self.sim_trace
            self.last_sim = {"clocks": [c for c, _, _ in tr],
                             "busy_time_s": sum(t for _, t, _ in tr),
                             "busy_energy_j": sum(e for _, _, e in tr)}

    def take_samples(self):
        """{"forward": [(time_s, energy_j), ...], "backward": [...]} since the last call."""
        s, self._samples = self._samples, {"forward": [], "backward": []}
        return s

    def _run(self, kind, fn, args, kwargs):
        if not self.pace:
            return fn(*args, **kwargs)
        t0 = time.monotonic()
        self.client.sync(10.0)          # the clock instruction_begin asked for is applied
        self.sync_wait_s += time.monotonic() - t0
        t_sim = self.gpu.sim_set_activity(self.device, True, kind)
        a, prev = self.gpu.sim_account(self.device), self._acct
        self._acct = a
        self.sim_trace.append((a["last_freq_mhz"], a["busy_time_s"] - prev["busy_time_s"],
                               a["busy_energy_j"] - prev["busy_energy_j"]))
        try:
            return fn(*args, **kwargs)
        finally:
            rest = t_sim - (time.monotonic() - t0)
            self.instructions += 1
            self.paced_s += t_sim
            if rest > 0:
                time.sleep(rest)
                self.late_s += max(0.0, time.monotonic() - t0 - t_sim)
            else:
                self.overruns += 1
            self.gpu.sim_set_activity(self.device, False)

    def instruction(self, kind, fn):
        """Wrap one of DeepSpeed's handlers (called as fn(engine, buffer_id=...))."""
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not self.in_step:        # eval_batch: not a training instruction of the plan
                return fn(*args, **kwargs)
            mb = self._next[kind]
            self._next[kind] += 1
            self.order.append((kind, mb))
            if self.sync:
                self.sync()
            self.client.instruction_begin(kind, mb)
            e0 = self.gpu.energy_mj(self.device) if self.gpu is not None else 0
            t0 = time.monotonic()
            try:
                return self._run(kind, fn, args, kwargs)
            finally:
                if self.sync:
                    self.sync()
                if self.gpu is not None:
                    self._samples[KIND_NAMES[kind]].append(
                        (time.monotonic() - t0, (self.gpu.energy_mj(self.device) - e0) / 1000.0))
                self.client.instruction_end(kind, mb)
        return wrapper

    def timed_recv(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not self.in_step:
                return fn(*args, **kwargs)
            with self.recv():
                return fn(*args, **kwargs)
        return wrapper


def instrument_deepspeed(engine, client, sync=None, gpu=None, device=0, pace=False):
    """Instrument a DeepSpeed PipelineEngine in place and return its DeepSpeedHooks.

    The engine gets its own copy of `_INSTRUCTION_MAP` in which ForwardPass and BackwardPass
    run at their planned clocks and RecvActivation/RecvGrad are timed as receive waits;
    `train_batch` becomes one client step. When the engine's DeepSpeed config has
    `"pipeline": {"ergon_schedule": ...}` the schedule is installed too
    (schedule_from_config). Call it once, after deepspeed.initialize()."""
    if getattr(engine, "_ergon_hooks", None) is not None:
        raise ValueError("this engine is already instrumented")
    hooks = DeepSpeedHooks(client, sync=sync, gpu=gpu, device=device, pace=pace)
    imap = dict(type(engine)._INSTRUCTION_MAP)
    for instr, method in list(imap.items()):
        if instr is ds_schedule.ForwardPass:
            imap[instr] = hooks.instruction(ergon.FORWARD, method)
        elif instr is ds_schedule.BackwardPass:
            imap[instr] = hooks.instruction(ergon.BACKWARD, method)
        elif instr in (ds_schedule.RecvActivation, ds_schedule.RecvGrad):
            imap[instr] = hooks.timed_recv(method)
    missing = [c.__name__ for c in (ds_schedule.ForwardPass, ds_schedule.BackwardPass,
                                    ds_schedule.RecvActivation, ds_schedule.RecvGrad)
               if c not in imap]
    if missing:
        raise RuntimeError("this DeepSpeed's PipelineEngine._INSTRUCTION_MAP has no %s "
                           "(ergon reads DeepSpeed 0.19's engine)" % ", ".join(missing))
    engine._INSTRUCTION_MAP = imap
    train_batch = engine.train_batch

    @functools.wraps(train_batch)
    def wrapped_train_batch(*args, **kwargs):
        with hooks.step():
            return train_batch(*args, **kwargs)

    engine.train_batch = wrapped_train_batch
    engine._ergon_hooks = hooks
    schedule_from_config(engine)
    return hooks


class ErgonSchedule(ds_schedule.PipeSchedule):
    """DeepSpeed's training schedule in ergon's order for one stage: `schedule` is an
    ergon.Schedule ("1f1b", or "ours" with r_s, e.g. ergon.plan_schedule(plan)[0]); the
    compute order of every stage is libergon's (erg_schedule_stage_order).

    P2P order. DeepSpeed's p2p.send/recv are blocking (gloo's send waits for the receive),
    so two neighbours that both send first deadlock. Here every transfer is placed in ONE
    global sequence that every rank follows: the compute units of all stages and the
    transfers that feed them (a unit's activation from the previous stage, its gradient
    from the next) are sorted by time in a unit-time emulation of the orders (F = 1, B = 2;
    a topological order of the dependency graph). Each rank runs its
    own sends and receives in that global order, interleaved with its computes; computes
    never block, so the first unfinished transfer of the sequence always has both ends at
    it: no deadlock, whatever the transport buffers. A transfer happens at the emulated
    start of the unit it feeds, before every compute that starts at the same time (so a
    producer sends before it starts its next unit); on the receiving stage no other
    receive comes between it and its unit (RecvGrad fills the engine's single grad_layer
    buffer, so that matters), and the sender still holds the data (buffer = microbatch, M
    buffers: nothing is overwritten within a batch). The steps yielded are one compute
    unit each with the transfers before it; unlike TrainSchedule's steps they are not
    barrier-safe one by one."""

    def __init__(self, micro_batches, stages, stage_id, schedule="1f1b"):
        super().__init__(micro_batches, stages, stage_id)
        if not isinstance(schedule, ergon.Schedule):
            schedule = ergon.Schedule(schedule)
        if schedule.kind not in (ergon.SCHED_1F1B, ergon.SCHED_ENVPIPE):
            raise ValueError("ErgonSchedule runs 1f1b or ours (EnvPipe), not %s: DeepSpeed's "
                             "engine runs one stage per rank and full backwards" % schedule.name)
        self.schedule = schedule
        self.orders = [ergon.schedule_order(schedule, stages, micro_batches, s)
                       for s in range(stages)]
        self._cmds = _stage_commands(self.orders, stages, micro_batches)[stage_id]

    def steps(self):
        n = len(self._cmds)
        for i, cmds in enumerate(self._cmds):
            cmds = list(cmds)
            if i == n - 1:
                cmds += [ds_schedule.ReduceTiedGrads(), ds_schedule.ReduceGrads(),
                         ds_schedule.OptimizerStep()]
            yield cmds

    def num_pipe_buffers(self):
        return max(2, self.micro_batches)


def _global_units(orders, S):
    """Every unit (start, stage, kind, microbatch) of a unit-time emulation of the stage
    orders (F 1, B 2): each starts when its stage is free and its input is there."""
    pos, free, end, units = [0] * S, [0] * S, {}, []
    total = sum(len(o) for o in orders)
    while len(units) < total:
        progressed = False
        for s in range(S):
            while pos[s] < len(orders[s]):
                kind, mb = orders[s][pos[s]]
                if kind == ergon.FORWARD:
                    dep = (s - 1, kind, mb) if s > 0 else None
                else:
                    dep = (s + 1, kind, mb) if s < S - 1 else None
                if dep is not None and dep not in end:
                    break
                start = max(free[s], end[dep] if dep else 0)
                free[s] = end[(s, kind, mb)] = start + (1 if kind == ergon.FORWARD else 2)
                units.append((start, s, kind, mb))
                pos[s] += 1
                progressed = True
        if not progressed:
            raise ValueError("the stage orders form a dependency cycle (they would deadlock)")
    return units


def _stage_commands(orders, S, M):
    """Per stage, a list of steps (lists of DeepSpeed instructions; buffer = microbatch).
    Global sequence: events sorted by (time, transfers before computes, stage), where a
    unit's input transfer happens at the unit's start; every rank runs its part of it."""
    events = []
    for start, s, kind, mb in _global_units(orders, S):
        if kind == ergon.FORWARD and s > 0:
            events.append((start, 0, s, "act", s, mb))
        elif kind == ergon.BACKWARD and s < S - 1:
            events.append((start, 0, s, "grad", s, mb))
        events.append((start, 1, s, "compute", kind, mb))
    events.sort()
    out = [[[]] for _ in range(S)]      # per stage: steps; the last one is being filled
    for _, _, s, what, a, mb in events:
        if what == "act":               # F(s, mb) needs stage s-1's output
            out[s - 1][-1].append(ds_schedule.SendActivation(buffer_id=mb))
            out[s][-1].append(ds_schedule.RecvActivation(buffer_id=mb))
        elif what == "grad":            # B(s, mb) needs stage s+1's input gradient
            out[s + 1][-1].append(ds_schedule.SendGrad(buffer_id=mb))
            out[s][-1].append(ds_schedule.RecvGrad(buffer_id=mb))
        else:
            step = out[s][-1]
            if a == ergon.FORWARD:
                if s == 0 or s == S - 1:
                    step.append(ds_schedule.LoadMicroBatch(buffer_id=mb))
                step.append(ds_schedule.ForwardPass(buffer_id=mb))
            else:
                step.append(ds_schedule.BackwardPass(buffer_id=mb))
            out[s].append([])
    return [[st for st in steps if st] for steps in out]


def use_ergon_schedule(engine, schedule):
    """Make `engine.train_batch` run `schedule` (an ergon.Schedule, a kind name, or None for
    DeepSpeed's own TrainSchedule) from the next batch on. One call; returns the engine."""
    if schedule is None:
        engine.__dict__.pop("_train_schedule", None)
        return engine
    if not isinstance(schedule, ergon.Schedule):
        schedule = ergon.Schedule(schedule)
    # Build one for this configuration now so that a bad order fails here, not mid-batch.
    ErgonSchedule(engine.micro_batches, engine.num_stages, engine.stage_id, schedule)

    def _train_schedule():
        return ErgonSchedule(engine.micro_batches, engine.num_stages, engine.stage_id, schedule)

    engine._train_schedule = _train_schedule
    engine._ergon_schedule = schedule
    return engine


def schedule_from_config(engine):
    """The DeepSpeed config's `"pipeline"` keys, if any: "ergon_schedule" ("deepspeed" = the
    engine's TrainSchedule, "1f1b", "ours"), "ergon_plan" (a JSON plan: for "ours" its r_s,
    planned by libergon) and "ergon_extra_warmup" (r_s given explicitly). Installs the
    schedule (use_ergon_schedule) and returns it (None when the config names none)."""
    cfg = getattr(engine._config, "pipeline", {}) or {}
    name = cfg.get("ergon_schedule")
    if name is None or name == "deepspeed":
        if cfg.get("ergon_plan") or cfg.get("ergon_extra_warmup"):
            raise ValueError("DeepSpeed config: pipeline.ergon_plan/ergon_extra_warmup "
                             "without pipeline.ergon_schedule")
        return None
    sched = ergon.Schedule(name)
    S, M = engine.num_stages, engine.micro_batches
    if cfg.get("ergon_plan"):
        planned, pS, pM = ergon.plan_schedule(cfg["ergon_plan"])
        if (pS, pM) != (S, M):
            raise ValueError("DeepSpeed config: pipeline.ergon_plan %s is for S=%d M=%d, the "
                             "engine runs S=%d M=%d" % (cfg["ergon_plan"], pS, pM, S, M))
        if planned.kind != sched.kind:
            raise ValueError("DeepSpeed config: pipeline.ergon_plan %s is for %s, "
                             "pipeline.ergon_schedule is %s" % (cfg["ergon_plan"], planned.name,
                                                                sched.name))
        sched = planned
    if cfg.get("ergon_extra_warmup") is not None:
        sched = ergon.Schedule(sched.kind, list(cfg["ergon_extra_warmup"]))
    use_ergon_schedule(engine, sched)
    return sched


def current_schedule(engine):
    """The ergon.Schedule the engine runs: its ergon schedule, else 1F1B (TrainSchedule's
    order is ergon's 1F1B, as the tests check)."""
    return getattr(engine, "_ergon_schedule", None) if "_train_schedule" in engine.__dict__ \
        else ergon.Schedule("1f1b")


def write_stage_plan(path, sched, S, M, stage, clocks):
    """A JSON plan (docs/formats.md) in which `stage` runs `clocks` (one per instruction of
    its order) and the other stages their top clock (a client reads only its own stage)."""
    top = max(clocks)
    stages = [{"stage": s, "freq_mhz": list(clocks) if s == stage else [top] * (2 * M)}
              for s in range(S)]
    plan = {"format": "ergon-plan", "version": 1, "schedule": sched.name, "num_stages": S,
            "num_microbatches": M, "method": "server", "stages": stages}
    if sched.kind == ergon.SCHED_ENVPIPE:
        plan["extra_warmup"] = sched.extra_warmup[:S]
    with open(path, "w") as f:
        json.dump(plan, f)


def serve_windows(engine, hooks, server, data_iter, window_steps=1, power_states=None,
                  scheduler=None, scheduler_args=None, model_name="model", max_windows=0,
                  on_step=None, work_dir="."):
    """Train window after window with the clocks `ergon serve` sends (the /v1 API through
    ergon.server_client): rank 0 registers the job, every rank registers its instruction
    order and the clocks it offers (power_states, default every clock of the GPU), then
    fetch a window, run `window_steps` batches, report (time, energy, per-instruction
    samples, receive waits), until the server ends the job (or after max_windows).
    on_step(step, window, loss, hooks) is called after each batch. Returns the number of
    windows. A failure aborts the job."""
    from ergon.server_client import ServerClient
    rank, S, M = engine.global_rank, engine.num_stages, engine.micro_batches
    if engine.grid.data_parallel_size != 1:
        raise ValueError("serve_windows: one data-parallel replica only (this job has %d)"
                         % engine.grid.data_parallel_size)
    if hooks.gpu is None:
        raise ValueError("serve_windows needs hooks with a GPU (instrument_deepspeed(..., "
                         "gpu=gpu, device=dev)): the server needs per-instruction time and energy")
    sched = current_schedule(engine)
    order = ergon.schedule_order(sched, S, M, engine.stage_id)
    sc = ServerClient(server, schedule_wait_s=5)
    box = [None]
    if rank == 0:
        box[0] = sc.register_job(pp_degree=S, framework="deepspeed", model_name=model_name,
                                 partition_method="uniform",
                                 microbatch_size=engine.micro_batch_size, num_microbatches=M,
                                 scheduler=scheduler, scheduler_args=scheduler_args,
                                 mode="frequency")
    ds_dist.broadcast_object_list(box, src=0)
    job = box[0]
    states = list(power_states) if power_states else hooks.gpu.sm_clocks(hooks.device)
    sc.register_rank(job, rank=rank, dp_rank=0, pp_rank=engine.stage_id, tp_rank=0,
                     pipe_schedule=[KIND_NAMES[k] for k, _ in order], power_states=states)
    plan_path = os.path.join(work_dir, ".ergon-window-plan-%d.json" % rank)
    step = windows = 0
    try:
        while True:
            got = sc.fetch_schedule(job, rank)
            if got is None:
                break
            window, ps = got
            if len(ps) != len(order):
                raise RuntimeError("server sent %d power states for %d instructions"
                                   % (len(ps), len(order)))
            if all(v == ps[0] for v in ps):
                hooks.client.set_uniform_clock(ps[0])
            else:
                clocks, cur = [], next((v for v in ps if v > 0), 0)
                for v in ps:          # 0 = keep the previous instruction's clock
                    cur = v if v > 0 else cur
                    clocks.append(cur)
                write_stage_plan(plan_path, sched, S, M, engine.stage_id, clocks)
                hooks.client.load_plan(plan_path, engine.stage_id)
            hooks.client.sync(10.0)
            hooks.client.energy_source(reset=True)  # the window's steps only
            its = []
            for _ in range(window_steps):
                sc.heartbeat(job, rank)
                hooks.take_samples()
                loss = engine.train_batch(data_iter)
                t, e = hooks.last_step
                its.append((t, e, hooks.take_samples(), hooks.last_waits))
                if on_step is not None:
                    on_step(step, window, loss, hooks)
                step += 1
            sc.report(job, window, rank, its,
                      energy_source=hooks.client.energy_source(reset=True))
            windows += 1
            if max_windows and windows >= max_windows:
                ds_dist.barrier()
                if rank == 0:
                    sc.end_job(job, "deepspeed trainer: %d windows done" % windows)
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
    return windows
