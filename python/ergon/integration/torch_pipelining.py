"""ergon inside PyTorch's own pipeline runtime (torch.distributed.pipelining, torch >= 2.4;
written and tested against the installed torch 2.15).

    from ergon.integration.torch_pipelining import TorchPipeliningHooks
    hooks = TorchPipeliningHooks(client, stages)          # this rank's PipelineStage objects
    schedule = ScheduleZBVZeroBubble(stages, n_microbatches=M, loss_fn=loss_fn)
    for batch, target in data:
        with hooks.step():
            schedule.step(batch, target=target, losses=losses)
    hooks.close()                                         # puts torch's methods back

WHAT IS HOOKED, AND WHY (read from torch/distributed/pipelining/{stage,schedules}.py):

* Every schedule class runs its compute through three methods of the stage object:
  `forward_one_chunk(fwd_chunk_id, args, kwargs, save_forward_output)`,
  `backward_one_chunk(bwd_chunk_id, loss, full_backward, last_backward)` and
  `backward_weight_one_chunk(bwd_chunk_id, last_backward)`. The single-stage classes
  (ScheduleGPipe, Schedule1F1B: `PipelineScheduleSingle._step_microbatches`) call them on
  `self._stage`; the multi-stage ones (ScheduleInterleaved1F1B, ScheduleLoopedBFS,
  ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble, ScheduleDualPipeV:
  `_PipelineScheduleRuntime._step_microbatches`) look the stage up per action and call them
  for FORWARD, FULL_BACKWARD (full_backward=True), BACKWARD_INPUT (full_backward=False) and
  BACKWARD_WEIGHT. An OVERLAP_F_B action (DualPipeV) runs its sub-actions one after the
  other through the same `_perform_action`, so its forward and its backward each pass
  through the hooks; the client gives both parts the step's one planned clock (client.h).
  The schedules call these methods as attributes of the stage instance, so an instance
  attribute (our wrapper) is what they call; metadata inference does not use them.
  Each wrapper calls `Client.instruction_begin_chunk(kind, chunk, microbatch)` before and
  `instruction_end_chunk` after: F, B, I (backward_one_chunk with full_backward=False) or
  W; chunk = the stage's position among this rank's stage_index values, ascending
  (ergon's chunk numbering: loop placement stage r + P*chunk, V shape r then 2P-1-r).
* Receive waits (EnvPipe online): torch posts receives in the schedule, not in the stage:
  `_batch_p2p(ops)` issues them (irecv, or batch_isend_irecv for a mixed batch) and
  `_wait_batch_p2p(works)` blocks on them right before the compute that consumes them
  (Schedule1F1B fuses a forward send with the backward receive in one batch,
  "fwd_send_bwd_recv"; the runtime schedules issue RECV_F/RECV_B actions early and wait
  inside the FORWARD/BACKWARD action). Both are module functions of schedules.py, looked
  up at call time, so we replace them in that module while hooks are installed: a batch
  that contains an irecv is marked, and waiting on a marked batch is timed with
  `Client.recv_begin/recv_end`, which charges the wait to the next instruction begun.
  Waits on send-only batches (WAIT_SEND_F/B, 1F1B's trailing sends) are not receive waits
  and are not counted. After each step, `last_waits` = {instruction name: [wait_s ...]}
  (ServerClient.report's wait_breakdown).

`seen` keeps the (kind letter, stage_index, microbatch) of every instruction of the last
step in the order the runtime ran them ("F", "B", "I", "W"): what the tests compare with
`ergon schedule NAME --format torch-csv`. `wrap(kind, fn)` (optional) wraps each compute
call inside the hooks (the example trainer's simulated-GPU pacer).
"""
import contextlib
import functools

from .. import BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, FORWARD

__all__ = ["TorchPipeliningHooks", "KIND_LETTERS"]

KIND_LETTERS = {FORWARD: "F", BACKWARD: "B", BACKWARD_INPUT: "I", BACKWARD_WEIGHT: "W"}


class _RecvWorks(list):
    """The works of a P2P batch that contains a receive (so waiting on it is a receive
    wait)."""


def _has_recv(ops):
    import torch.distributed as dist
    return any(getattr(op, "op", None) is dist.irecv for op in ops)


class _P2PPatch:
    """Replaces schedules._batch_p2p / _wait_batch_p2p while at least one hooks object
    measures receive waits; the wait is charged through the hooks object whose step is
    open (one per process in practice)."""

    installed = 0
    active = None         # the hooks whose step is running
    orig = None

    @classmethod
    def install(cls):
        from torch.distributed.pipelining import schedules
        if cls.installed == 0:
            cls.orig = (schedules._batch_p2p, schedules._wait_batch_p2p)
            batch_p2p, wait_batch_p2p = cls.orig

            @functools.wraps(batch_p2p)
            def _batch_p2p(p2p_ops, desc=None):
                works = batch_p2p(p2p_ops, desc=desc)
                if works is not None and _has_recv(p2p_ops):
                    return _RecvWorks(works)
                return works

            @functools.wraps(wait_batch_p2p)
            def _wait_batch_p2p(work):
                hooks = cls.active
                if hooks is None or not isinstance(work, _RecvWorks) or not work:
                    return wait_batch_p2p(work)
                with hooks.recv():
                    return wait_batch_p2p(work)

            schedules._batch_p2p = _batch_p2p
            schedules._wait_batch_p2p = _wait_batch_p2p
        cls.installed += 1

    @classmethod
    def uninstall(cls):
        from torch.distributed.pipelining import schedules
        cls.installed -= 1
        if cls.installed == 0:
            schedules._batch_p2p, schedules._wait_batch_p2p = cls.orig
            cls.orig = None


class TorchPipeliningHooks:
    """ergon's per-instruction clocks and measurement around the real
    torch.distributed.pipelining stages of this rank (see the module's docstring)."""

    def __init__(self, client, stages, sync=None, measure_waits=True, wrap=None):
        if hasattr(stages, "forward_one_chunk"):
            stages = [stages]
        stages = list(stages)
        if not stages:
            raise ValueError("no pipeline stage to hook")
        for st in stages:
            for name in ("stage_index", "forward_one_chunk", "backward_one_chunk"):
                if not hasattr(st, name):
                    raise TypeError("%r is not a torch.distributed.pipelining stage (no %s)"
                                    % (st, name))
        order = sorted(int(s.stage_index) for s in stages)
        if len(set(order)) != len(order):
            raise ValueError("two stages with the same stage_index: %r" % order)
        self.client = client
        self.sync = sync
        self.wrap = wrap
        self.seen = []
        self.last_step = None    # (time_s, energy_j) of the last step
        self.last_waits = None   # {instruction name: [wait_s, ...]} of the last step
        self._stages = stages
        self._saved = []
        for st in stages:
            self._wrap_stage(st, order.index(int(st.stage_index)))
        self._waits = bool(measure_waits)
        if self._waits:
            _P2PPatch.install()

    # -- steps and receive waits -------------------------------------------------------

    @contextlib.contextmanager
    def step(self):
        """One iteration (schedule.step): step time and energy in `last_step`."""
        self.seen = []
        if self._waits:
            _P2PPatch.active = self
        self.client.step_begin()
        try:
            yield self
        finally:
            if self._waits:
                _P2PPatch.active = None
            self.last_step = self.client.step_end()
            self.last_waits = self.client.step_waits()

    @contextlib.contextmanager
    def recv(self):
        self.client.recv_begin()
        try:
            yield self
        finally:
            self.client.recv_end()

    def close(self):
        """Put torch's methods back (stages and schedules module)."""
        for st, saved in self._saved:
            for name, had in saved.items():
                if had:
                    st.__dict__[name] = had[0]
                else:
                    st.__dict__.pop(name, None)
        self._saved = []
        if self._waits:
            self._waits = False
            if _P2PPatch.active is self:
                _P2PPatch.active = None
            _P2PPatch.uninstall()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the stage methods --------------------------------------------------------------

    def _run(self, kind, stage_index, chunk, mb, fn, args, kwargs):
        self.seen.append((KIND_LETTERS[kind], stage_index, mb))
        if self.wrap is not None:
            fn = self.wrap(kind, fn)
        if self.sync:
            self.sync()
        self.client.instruction_begin_chunk(kind, chunk, mb)
        try:
            return fn(*args, **kwargs)
        finally:
            if self.sync:
                self.sync()
            self.client.instruction_end_chunk(kind, chunk, mb)

    def _wrap_stage(self, stage, chunk):
        names = ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk")
        self._saved.append((stage, {n: ((stage.__dict__[n],) if n in stage.__dict__ else ())
                                    for n in names}))
        sidx = int(stage.stage_index)
        fwd = stage.forward_one_chunk
        bwd = stage.backward_one_chunk
        wgt = getattr(stage, "backward_weight_one_chunk", None)

        @functools.wraps(fwd)
        def forward_one_chunk(fwd_chunk_id, *args, **kwargs):
            return self._run(FORWARD, sidx, chunk, int(fwd_chunk_id), fwd,
                             (fwd_chunk_id,) + args, kwargs)

        @functools.wraps(bwd)
        def backward_one_chunk(bwd_chunk_id, *args, **kwargs):
            # backward_one_chunk(bwd_chunk_id, loss=None, full_backward=True, ...): the
            # runtime passes full_backward by keyword; accept it positionally too.
            full = kwargs["full_backward"] if "full_backward" in kwargs else (
                args[1] if len(args) > 1 else True)
            # torch skips the call when the stage has no backward (eval): no instruction.
            if not getattr(stage, "has_backward", True):
                return bwd(bwd_chunk_id, *args, **kwargs)
            kind = BACKWARD if full else BACKWARD_INPUT
            return self._run(kind, sidx, chunk, int(bwd_chunk_id), bwd,
                             (bwd_chunk_id,) + args, kwargs)

        stage.forward_one_chunk = forward_one_chunk
        stage.backward_one_chunk = backward_one_chunk
        if wgt is not None:
            @functools.wraps(wgt)
            def backward_weight_one_chunk(bwd_chunk_id, *args, **kwargs):
                if not getattr(stage, "has_backward", True):
                    return wgt(bwd_chunk_id, *args, **kwargs)
                return self._run(BACKWARD_WEIGHT, sidx, chunk, int(bwd_chunk_id), wgt,
                                 (bwd_chunk_id,) + args, kwargs)

            stage.backward_weight_one_chunk = backward_weight_one_chunk


# ergon's schedule names -> the class torch.distributed.pipelining ships (docs/schedules.md)
SCHEDULE_CLASSES = {
    "gpipe": "ScheduleGPipe",
    "1f1b": "Schedule1F1B",
    "interleaved-1f1b": "ScheduleInterleaved1F1B",
    "looped-bfs": "ScheduleLoopedBFS",
    "interleaved-zb": "ScheduleInterleavedZeroBubble",
    "zbv": "ScheduleZBVZeroBubble",
    "dualpipev": "ScheduleDualPipeV",
}


def schedule_class(name):
    """The torch.distributed.pipelining class for an ergon schedule name (KeyError for
    `ours`, which PyTorch does not ship)."""
    from torch.distributed.pipelining import schedules
    return getattr(schedules, SCHEDULE_CLASSES[name])
