"""Framework integration: wrap a pipeline engine's forward/backward calls with ergon's hooks.

Generic use (any schedule that calls one function per microbatch forward/backward):

    hooks = PipelineHooks(client, sync=torch.cuda.current_stream().synchronize)
    forward_step = hooks.forward(forward_step)
    backward_step = hooks.backward(backward_step)
    for batch in data:
        with hooks.step():
            run_schedule()           # calls forward_step / backward_step per microbatch

Microbatch indices are counted per step, separately for forward and backward, in call
order: the n-th forward of a step is microbatch n. That is what 1F1B, GPipe and EnvPipe
schedules do (each stage runs forwards and backwards in microbatch order), so the plan's
(kind, microbatch) clocks line up. `sync` (optional) runs before each instruction begins
and after it ends: pass the compute stream's synchronize, never a device-wide one (see
docs/runtime.md: a device-wide sync can deadlock with pending P2P sends).

Receive waits (EnvPipe's measurement, for the server's EnvPipe scheduler): wrap each blocking
receive that feeds an instruction in `with hooks.recv():` (right before the instruction that
consumes it); the wait is charged to that instruction, and after each step `hooks.last_waits`
holds {instruction name: [wait_s per occurrence]} for the server report's "wait_breakdown"
(ServerClient.report's fourth element). instrument_deepspeed (ergon.integration.deepspeed)
times DeepSpeed's RecvActivation and RecvGrad this way. torch.distributed.pipelining posts
its receives inside the schedule's step, out of reach of PipeliningStageHooks: there the waits are not measured
(the EnvPipe scheduler then refuses the job's results, naming wait_breakdown).
"""
import contextlib
import functools

from .. import BACKWARD, FORWARD
from .torch_pipelining import TorchPipeliningHooks

__all__ = ["PipelineHooks", "PipeliningStageHooks", "instrument_deepspeed"]


class _RecvWaits:
    """`with hooks.recv():` around a blocking receive: the host-clock wait is charged to
    the next instruction begun (client.h erg_client_recv_begin/end)."""

    last_waits = None  # {instruction name: [wait_s, ...]} of the last step

    @contextlib.contextmanager
    def recv(self):
        self.client.recv_begin()
        try:
            yield self
        finally:
            self.client.recv_end()

    def _end_step(self):
        self.last_step = self.client.step_end()
        self.last_waits = self.client.step_waits()


class PipelineHooks(_RecvWaits):
    def __init__(self, client, sync=None):
        self.client = client
        self.sync = sync
        self._next = [0, 0]
        self.last_step = None  # (time_s, energy_j) of the last step

    @contextlib.contextmanager
    def step(self):
        self._next = [0, 0]
        self.client.step_begin()
        try:
            yield self
        finally:
            self._end_step()

    def _wrap(self, kind, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            mb = self._next[kind]
            self._next[kind] += 1
            if self.sync:
                self.sync()
            self.client.instruction_begin(kind, mb)
            try:
                return fn(*args, **kwargs)
            finally:
                if self.sync:
                    self.sync()
                self.client.instruction_end(kind, mb)
        return wrapper

    def forward(self, fn):
        """Wrap a per-microbatch forward function."""
        return self._wrap(FORWARD, fn)

    def backward(self, fn):
        """Wrap a per-microbatch backward function."""
        return self._wrap(BACKWARD, fn)


def instrument_deepspeed(engine, client, sync=None, **kwargs):
    """Instrument a DeepSpeed PipelineEngine in place and return the hooks: see
    ergon.integration.deepspeed (imported here on first use, so that this package does not
    need DeepSpeed)."""
    from .deepspeed import instrument_deepspeed as impl
    return impl(engine, client, sync=sync, **kwargs)


class PipeliningStageHooks(TorchPipeliningHooks):
    """Wrap the stages of torch.distributed.pipelining (this rank's stage objects) so that
    every schedule PyTorch runs (GPipe, 1F1B, Interleaved1F1B, LoopedBFS,
    InterleavedZeroBubble, ZBVZeroBubble, DualPipeV) runs each instruction at its planned
    clock. Each stage's forward_one_chunk(mb, ...), backward_one_chunk(mb, ...,
    full_backward=...) and backward_weight_one_chunk(mb, ...) are replaced, in place, by
    wrappers that call the client's kind + chunk hooks: F, B (full_backward=True) or I
    (full_backward=False), and W. The chunk of a stage is its position among this rank's
    stage_index values in ascending order (ergon's chunk numbering, client.h). An
    OVERLAP_F_B step runs its forward and its backward one after the other, each through
    its hook, at the step's one planned clock. Load a JSON plan (it names the schedule).

        hooks = PipeliningStageHooks(client, stages, sync=torch.cuda.current_stream().synchronize)
        for batch in data:
            with hooks.step():
                schedule.step(batch, target=target)
    """

    def __init__(self, client, stages, sync=None):
        # The same wrappers as ergon.integration.torch_pipelining's (one implementation), without
        # receive-wait measurement: that needs torch's schedules module, and these hooks
        # also serve duck-typed stages in programs without torch.
        super().__init__(client, stages, sync=sync, measure_waits=False)
