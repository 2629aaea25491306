"""pacer.py: how the e2e tests pace the example trainer's instructions (not a test itself;
tests/e2e/harness/trainer.py uses it).

  * Pacer, on ergon's simulated GPU: each instruction is held for the time the GPU model gives
    at the applied clock, the device marked busy (drawing the model's power) meanwhile, and
    the simulated GPU's own accounting of it (Gpu.sim_account: the model's time and energy at
    the clock it had when the instruction began, however long the host took) is recorded:
    the load-independent numbers the tests decide on (the result's per-step `sim` row);
  * KernelPacer, on a fake vendor library (tests/fake_nvml, tests/fake_amdsmi): each
    instruction is a fake kernel (fake_gpu_kernel_begin/end, found with dlsym in the library
    ergon loaded) whose time at the device's clock the fake library gives, the work being the
    simulated model's time at its top clock.
"""
import ctypes
import os
import time

KIND_NAMES = {0: "forward", 1: "backward", 2: "backward_input", 3: "backward_weight"}


class Pacer:
    """Simulated GPU: hold each instruction for the time the model gives at the applied
    clock, with the device marked busy meanwhile. The wall-clock hold is for realism only;
    what the tests decide on is the simulated GPU's own accounting of each instruction
    (take())."""

    def __init__(self, ergon, gpu, client, dev):
        self.ergon, self.gpu, self.client, self.dev = ergon, gpu, client, dev
        self.overruns = 0      # instructions whose real compute took longer than simulated
        self.instructions = 0
        self.trace = []        # (clock, time_s, energy_j) of each instruction since take()
        self._acct = gpu.sim_account(dev) if gpu is not None else None

    def begin(self, kind, chunks=1):
        """Mark the device busy with an instruction of `kind`; its time at the clock, s.
        Records the simulated GPU's accounting of it (1/chunks of the stage's)."""
        t = self.gpu.sim_set_activity(self.dev, True, kind)
        a, prev = self.gpu.sim_account(self.dev), self._acct
        self._acct = a
        self.trace.append((a["last_freq_mhz"], (a["busy_time_s"] - prev["busy_time_s"]) / chunks,
                           (a["busy_energy_j"] - prev["busy_energy_j"]) / chunks))
        return t

    def take(self):
        """The simulated GPU's accounting of the instructions since the last take(): their
        clocks and simulated times in run order and the sums of their times and energies
        (energy None where the device does not account it: a fake library)."""
        tr, self.trace = self.trace, []
        if self._acct is None and not tr:
            return None
        return {"clocks": [c for c, _, _ in tr], "times_s": [t for _, t, _ in tr],
                "busy_time_s": sum(t for _, t, _ in tr),
                "busy_energy_j": None if any(e is None for _, _, e in tr) else
                sum(e for _, _, e in tr)}

    def end(self):
        self.gpu.sim_set_activity(self.dev, False)

    def wrap(self, kind, fn, chunks=1):
        """`chunks`: V, the rank's stages; each is an equal share (1/V) of the simulated
        device's stage, as the planner reads a per-rank profile ("stages split evenly")."""
        def run(*args, **kwargs):
            t0 = time.monotonic()
            try:
                self.client.sync(10.0)   # the clock requested by instruction_begin is applied
            except self.ergon.ErgonError:
                pass  # a clock change failed (no privilege): the trainer's check_clocks says
                # so after the first iteration, with what to do
            t_sim = self.begin(kind, chunks) / chunks
            try:
                r = fn(*args, **kwargs)
            finally:
                rest = t_sim - (time.monotonic() - t0)
                self.instructions += 1
                if rest > 0:
                    time.sleep(rest)
                else:
                    self.overruns += 1
                self.end()
            return r
        return run


class FakeKernels:
    """A fake vendor library's compute (tests/fake_common/fake_common.h): begin(kind) starts a
    kernel on the fake device and returns how long it lasts at the device's clock; end()
    ends it. The work of an instruction is the simulated model's time for it at its top
    clock (the stage's device of sim:GPU:MODEL:S)."""

    def __init__(self, ergon, lib, dev, sim_spec, stage):
        self.lib, self.dev = lib, dev
        lib.fake_gpu_kernel_begin.restype = ctypes.c_double
        lib.fake_gpu_kernel_begin.argtypes = [ctypes.c_uint, ctypes.c_double]
        lib.fake_gpu_kernel_end.restype = ctypes.c_int
        lib.fake_gpu_kernel_end.argtypes = [ctypes.c_uint]
        self.work = {}
        sim = ergon.Gpu(sim_spec)
        try:
            for kind in KIND_NAMES:
                try:
                    self.work[kind] = sim.sim_set_activity(stage, True, kind)
                except ergon.ErgonError:
                    pass  # a kind the model has no time for (zero-bubble parts)
            sim.sim_set_activity(stage, False)
        finally:
            sim.close()

    def begin(self, kind):
        t = self.lib.fake_gpu_kernel_begin(self.dev, self.work.get(kind, 0.0))
        if t < 0:
            raise RuntimeError("fake_gpu_kernel_begin: no device %d" % self.dev)
        return t

    def end(self):
        self.lib.fake_gpu_kernel_end(self.dev)


def fake_kernels(ergon, gpu, dev, sim_spec, stage):
    """FakeKernels when the vendor library ergon loaded is one of the fakes, else None."""
    if gpu is None or gpu.backend not in ("nvml", "amdsmi"):
        return None
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({ln.split()[-1] for ln in f if ln.rstrip().split()[-1:] and
                            ln.split()[-1].startswith("/")})
    except OSError:
        return None
    for path in paths:
        base = os.path.basename(path)
        if base.startswith("libnvidia-ml") or base.startswith("libamd_smi"):
            lib = ctypes.CDLL(path)
            if hasattr(lib, "fake_gpu_kernel_begin"):
                return FakeKernels(ergon, lib, dev, sim_spec, stage)
    return None


class KernelPacer(Pacer):
    """Pacer for a fake library: the instruction is a fake kernel; it lasts what the fake
    device says at its clock, the device busy meanwhile. Its trace has the clock the client
    had applied and the kernel's time (the fake's model, not the host's); no energy (the fake
    integrates its power over real time)."""

    def __init__(self, ergon, kernels, client):
        super().__init__(ergon, None, client, None)
        self.kernels = kernels

    def begin(self, kind, chunks=1):
        t = self.kernels.begin(kind)
        self.trace.append((self.client.active_clock, t / chunks, None))
        return t

    def end(self):
        self.kernels.end()


def make_pacer(ergon, pace, gpu, client, dev, sim, sim_spec, rank):
    """The pacer for `pace` (auto, on, off): on the simulated GPU the Pacer (auto, on); on a
    fake library with kernels its KernelPacer (auto, on); else None (a real GPU's kernels
    pace themselves)."""
    if pace == "off" or gpu is None:
        return None
    if sim:
        return Pacer(ergon, gpu, client, dev)
    kernels = fake_kernels(ergon, gpu, dev, sim_spec, rank)
    if kernels:
        return KernelPacer(ergon, kernels, client)
    if pace == "on":
        raise SystemExit("--pace on needs the simulated GPU or a fake library with kernels")
    return None
