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
"""
import contextlib
import functools

from . import BACKWARD, FORWARD

__all__ = ["PipelineHooks", "instrument_deepspeed"]


class PipelineHooks:
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
            self.last_step = self.client.step_end()

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


def instrument_deepspeed(engine, client, sync=None):
    """Instrument a DeepSpeed PipelineEngine in place and return the hooks.

    DeepSpeed runs each pipeline instruction through the class-level
    `_INSTRUCTION_MAP` (instruction type -> method); we give the engine its own
    copy in which ForwardPass and BackwardPass go through the hooks, and wrap
    `train_batch` as the step. Written against DeepSpeed's documented
    PipelineEngine structure; not exercised against a real DeepSpeed here (no GPU
    in CI): check `hooks.last_step` after the first batch.
    """
    hooks = PipelineHooks(client, sync=sync)
    imap = dict(type(engine)._INSTRUCTION_MAP)
    for instr, method in list(imap.items()):
        name = getattr(instr, "__name__", "")
        if name == "ForwardPass":
            imap[instr] = hooks.forward(method)
        elif name == "BackwardPass":
            imap[instr] = hooks.backward(method)
    engine._INSTRUCTION_MAP = imap
    train_batch = engine.train_batch

    @functools.wraps(train_batch)
    def wrapped_train_batch(*args, **kwargs):
        with hooks.step():
            return train_batch(*args, **kwargs)

    engine.train_batch = wrapped_train_batch
    return hooks
