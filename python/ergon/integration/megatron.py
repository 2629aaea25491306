"""Megatron-core's pipeline schedules (megatron.core.pipeline_parallel.schedules, checked
against megatron-core 0.16.1).

What Megatron really calls: `get_forward_backward_func()` returns
`forward_backward_pipelining_without_interleaving` (1F1B) or
`forward_backward_pipelining_with_interleaving` (virtual pipeline, V model chunks per rank).
Both run every microbatch's forward through the module-level function
`schedules.forward_step(..., current_microbatch=MB, vp_stage=CHUNK, ...)` and its backward
through `schedules.backward_step(input_tensor, output_tensor, output_tensor_grad, model_type,
config)`, looked up by name at each call. `MegatronHooks.wrap(forward_backward_func)` returns a
function with the same signature that, for the duration of one call (one iteration), replaces
those two names with wrappers that run each instruction between the client's
`instruction_begin_chunk/_end_chunk(kind, chunk, microbatch)` (the planned clock); the chunk is
Megatron's vp_stage (= ergon's chunk: the position of the model chunk among the rank's stages,
stage = chunk * P + rank), the microbatch is forward_step's current_microbatch, and a backward
is matched to its forward by its output tensor (backward_step carries neither). The
`P2PCommunicator` methods that receive (recv_forward, send_forward_recv_backward, ...) are timed
as receive waits for the duration of the call (client.recv_begin/_end: charged to the next
instruction begun; with a send in the same call the wait includes it). After each call
`hooks.last_order` is the order this rank ran, [(kind, chunk, microbatch), ...],
`hooks.last_step` its (time_s, energy_j) and `hooks.last_waits` the receive waits per
instruction (the server report's wait_breakdown).

    hooks = MegatronHooks(client)
    forward_backward = hooks.wrap(get_forward_backward_func())
    losses = forward_backward(forward_step_func=..., data_iterator=..., model=..., ...)

No GPU: `cpu_shim()` (a context manager; `MegatronHooks(..., cpu=True)` enters it around each
call) lets the real schedule code run on the CPU with gloo. Megatron-core 0.16.1 insists on
CUDA in exactly two places on this path: each schedule allocates
`total_num_tokens = torch.zeros([], dtype=torch.int, device="cuda")`, and
`P2PCommunicator._communicate` allocates its receive buffers with
`device=torch.cuda.current_device()` (which initialises CUDA and fails without a driver).
The shim, only while the schedule runs, answers `torch.cuda.current_device()` with 0 and maps a
"cuda"/integer device argument of any torch call to "cpu" (a torch.overrides.TorchFunctionMode,
PyTorch's documented way to intercept factory functions, as torch.set_default_device does).
Nothing else is changed. Keep `batch_p2p_comm=False` in the config (its batch_p2p_sync path calls
torch.cuda.synchronize()), and `enable_autocast=False`.
"""
import contextlib
import functools
import time

import torch
from torch.overrides import TorchFunctionMode

import ergon

__all__ = ["MegatronHooks", "cpu_shim"]

# The P2PCommunicator methods the schedules call that receive (and wait): timed as receive waits.
_RECEIVING = ("recv_forward", "recv_backward", "send_forward_recv_backward",
              "send_backward_recv_forward", "send_forward_recv_forward",
              "send_backward_recv_backward", "send_forward_backward_recv_forward_backward")


def _is_cuda_device(dev):
    if isinstance(dev, int) and not isinstance(dev, bool):
        return True
    if isinstance(dev, str):
        return dev.startswith("cuda")
    if isinstance(dev, torch.device):
        return dev.type == "cuda"
    return False


class _CudaToCpu(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _is_cuda_device(kwargs.get("device")):
            kwargs = dict(kwargs, device="cpu")
        return func(*args, **kwargs)


@contextlib.contextmanager
def cpu_shim():
    """Run Megatron's schedule code on the CPU (see the module docstring). A no-op when CUDA
    is available."""
    if torch.cuda.is_available():
        yield
        return
    saved = torch.cuda.current_device
    torch.cuda.current_device = lambda: 0
    try:
        with _CudaToCpu():
            yield
    finally:
        torch.cuda.current_device = saved


class MegatronHooks:
    """ergon's hooks around Megatron-core's forward_step/backward_step (module docstring).

    pacer: optional callable(kind, fn) -> result, run around each instruction's compute
    (e.g. holding it for the simulated GPU's time)."""

    def __init__(self, client, sync=None, cpu=None, pacer=None):
        self.client, self.sync, self.pacer = client, sync, pacer
        self.cpu = (not torch.cuda.is_available()) if cpu is None else cpu
        self.order, self.last_order, self.last_step, self.last_waits = [], None, None, None
        self._by_output = {}

    def _run(self, kind, chunk, mb, fn, args, kwargs):
        self.order.append((kind, chunk, mb))
        if self.sync:
            self.sync()
        self.client.instruction_begin_chunk(kind, chunk, mb)
        try:
            if self.pacer is not None:
                return self.pacer(kind, lambda: fn(*args, **kwargs))
            return fn(*args, **kwargs)
        finally:
            if self.sync:
                self.sync()
            self.client.instruction_end_chunk(kind, chunk, mb)

    @staticmethod
    def _key(t):
        while isinstance(t, (list, tuple)) and t:
            t = t[0]
        return id(t)

    def _forward_step(self, orig):
        counters = {}

        @functools.wraps(orig)
        def forward_step(*args, **kwargs):
            chunk = kwargs.get("vp_stage") or 0
            mb = kwargs.get("current_microbatch")
            if mb is None:              # not given: the n-th forward of the chunk
                mb = counters.get(chunk, 0)
            counters[chunk] = mb + 1
            out = self._run(ergon.FORWARD, chunk, mb, orig, args, kwargs)
            # Keep the output alive with its (chunk, mb) until its backward: the id is unique.
            self._by_output[self._key(out[0])] = (chunk, mb, out[0])
            return out
        return forward_step

    def _backward_step(self, orig):
        @functools.wraps(orig)
        def backward_step(*args, **kwargs):
            out = args[1] if len(args) > 1 else kwargs["output_tensor"]
            got = self._by_output.pop(self._key(out), None)
            if got is None:
                raise RuntimeError("ergon: a Megatron backward_step whose output tensor no "
                                   "wrapped forward_step produced (cannot tell its microbatch)")
            chunk, mb, _ = got
            return self._run(ergon.BACKWARD, chunk, mb, orig, args, kwargs)
        return backward_step

    def _timed_recv(self, fn):
        @functools.wraps(fn)
        def recv(*args, **kwargs):
            self.client.recv_begin()
            try:
                return fn(*args, **kwargs)
            finally:
                self.client.recv_end()
        return recv

    def wrap(self, forward_backward_func):
        """The forward-backward function of get_forward_backward_func(), instrumented: each
        call is one client step."""
        from megatron.core.pipeline_parallel import schedules
        from megatron.core.pipeline_parallel.p2p_communication import P2PCommunicator

        @functools.wraps(forward_backward_func)
        def run(*args, **kwargs):
            fwd, bwd = schedules.forward_step, schedules.backward_step
            schedules.forward_step = self._forward_step(fwd)
            schedules.backward_step = self._backward_step(bwd)
            recvs = {name: getattr(P2PCommunicator, name) for name in _RECEIVING
                     if hasattr(P2PCommunicator, name)}
            for name, fn in recvs.items():
                setattr(P2PCommunicator, name, self._timed_recv(fn))
            self.order, self._by_output = [], {}
            self.client.step_begin()
            try:
                with (cpu_shim() if self.cpu else contextlib.nullcontext()):
                    return forward_backward_func(*args, **kwargs)
            finally:
                schedules.forward_step, schedules.backward_step = fwd, bwd
                for name, fn in recvs.items():
                    setattr(P2PCommunicator, name, fn)
                self.last_step = self.client.step_end()
                self.last_waits = self.client.step_waits()
                self.last_order = self.order
                if self._by_output and not kwargs.get("forward_only"):
                    raise RuntimeError("ergon: %d forwards had no backward in this iteration"
                                       % len(self._by_output))
        return run


def sim_pacer(gpu, client, device, chunks=1):
    """A pacer for MegatronHooks on ergon's simulated GPU: each instruction is held for the
    time the GPU model gives at the applied clock (1/chunks of the device's stage each)."""
    def pace(kind, fn):
        t0 = time.monotonic()
        client.sync(10.0)
        t_sim = gpu.sim_set_activity(device, True, kind) / chunks
        try:
            return fn()
        finally:
            rest = t_sim - (time.monotonic() - t0)
            if rest > 0:
                time.sleep(rest)
            gpu.sim_set_activity(device, False)
    return pace
