"""ergon.Client: one training rank's client (include/ergon/client.h)."""
import ctypes
import os

from . import _lib
from ._lib import (BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, FORWARD, ErgonError, c_int, c_uint,
                   check, new_error)

__all__ = ["Client"]


class Client(_lib.Closes):
    """One training rank's client (see include/ergon/client.h)."""

    def __init__(self, gpu, device=0, rank=0, log_dir=None, flags=0):
        self._lib = _lib.load_library()
        self._gpu = gpu
        self._h = ctypes.c_void_p()
        err = new_error()
        check(self._lib.erg_client_new(gpu.handle, c_int("device", device), c_int("rank", rank),
                                       os.fspath(log_dir).encode() if log_dir else None,
                                       c_uint("flags", flags),
                                       ctypes.byref(self._h), ctypes.byref(err)), err)
        gpu._clients.append(self)

    @property
    def handle(self):
        if not self._h:
            raise ErgonError(_lib.ESTATE, "client closed")
        return self._h

    def load_plan(self, path, stage):
        err = new_error()
        check(self._lib.erg_client_load_plan(self.handle, os.fspath(path).encode(),
                                             c_int("stage", stage), ctypes.byref(err)), err)

    def set_uniform_clock(self, mhz):
        err = new_error()
        check(self._lib.erg_client_set_uniform_clock(self.handle, c_int("mhz", mhz),
                                                     ctypes.byref(err)), err)

    def step_begin(self):
        check(self._lib.erg_client_step_begin(self.handle), what="step_begin out of order")

    def step_end(self):
        t, e = ctypes.c_double(), ctypes.c_double()
        check(self._lib.erg_client_step_end(self.handle, ctypes.byref(t), ctypes.byref(e)),
              what="step_end without step_begin (or inside an instruction)")
        return t.value, e.value

    def instruction_begin(self, kind, microbatch):
        kind, microbatch = c_int("kind", kind), c_int("microbatch", microbatch)
        check(self._lib.erg_client_instruction_begin(self.handle, kind, microbatch),
              what="instruction_begin(%d, %d) refused" % (kind, microbatch))

    def instruction_end(self, kind, microbatch):
        kind, microbatch = c_int("kind", kind), c_int("microbatch", microbatch)
        check(self._lib.erg_client_instruction_end(self.handle, kind, microbatch),
              what="instruction_end(%d, %d) does not match the open instruction" % (kind, microbatch))

    def instruction_begin_chunk(self, kind, chunk, microbatch):
        """Multi-chunk / zero-bubble schedules: kind FORWARD, BACKWARD, BACKWARD_INPUT or
        BACKWARD_WEIGHT of this rank's chunk `chunk` (its stages in ascending order)."""
        check(self._lib.erg_client_instruction_begin_chunk(self.handle, kind, chunk, microbatch),
              what="instruction_begin_chunk(%d, %d, %d) refused" % (kind, chunk, microbatch))

    def instruction_end_chunk(self, kind, chunk, microbatch):
        check(self._lib.erg_client_instruction_end_chunk(self.handle, kind, chunk, microbatch),
              what="instruction_end_chunk(%d, %d, %d) does not match the open instruction"
              % (kind, chunk, microbatch))

    def recv_begin(self):
        """Right before a blocking receive (EnvPipe's wait measurement, client.h)."""
        check(self._lib.erg_client_recv_begin(self.handle), what="recv_begin twice")

    def recv_end(self):
        """Right after it: returns the wait (s), charged to the next instruction begun."""
        w = ctypes.c_double()
        check(self._lib.erg_client_recv_end(self.handle, ctypes.byref(w)),
              what="recv_end without recv_begin")
        return w.value

    def add_wait(self, wait_s):
        """Charge a wait measured another way (e.g. CUDA events) to the next instruction."""
        check(self._lib.erg_client_add_wait(self.handle, float(wait_s)),
              what="a wait must be finite and >= 0")

    def step_waits(self, kinds=(FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT)):
        """The last finished step's receive waits: {instruction name: [wait_s per occurrence
        in run order]} for the given kinds that ran (the server's "wait_breakdown")."""
        out = {}
        for kind in kinds:
            n = ctypes.c_size_t()
            check(self._lib.erg_client_step_waits(self.handle, kind, None, 0, ctypes.byref(n)))
            buf = (ctypes.c_double * max(1, n.value))()
            check(self._lib.erg_client_step_waits(self.handle, kind, buf, n.value,
                                                  ctypes.byref(n)))
            if n.value:
                out[_lib.KIND_NAMES[kind]] = list(buf[:n.value])
        return out

    def sync(self, timeout_s=30.0):
        err = new_error()
        check(self._lib.erg_client_sync(self.handle, timeout_s, ctypes.byref(err)), err)

    def energy_source(self, reset=True):
        """Where the energies of the steps ended since the last reset came from: "counter",
        "integrated" (power integrated by ergon, the counter not trusted), "model", "mixed",
        or "" (no step energy); what a server result's energy_source says."""
        return self._lib.erg_client_energy_source(self.handle, bool(reset)).decode()

    @property
    def active_clock(self):
        return self._lib.erg_client_active_clock(self.handle)

    @property
    def clock_changes(self):
        return self._lib.erg_client_clock_changes(self.handle)

    def profile(self, stage, run_iteration, min_freq_mhz=0, iters=3, blocking_s=1.0,
                out_csv=None):
        """Profiling mode (client.h erg_client_profile): sweep the SM clock from the
        highest down to min_freq_mhz running `run_iteration(client)` (one training
        iteration using this client's instruction hooks) `iters` times per clock after
        a warm-up, with the early stop; then measure the blocking power. Writes the
        profile to out_csv if given; returns the blocking power in W (nan if
        blocking_s is 0). An exception raised by run_iteration stops the sweep and is
        re-raised."""
        lib = self._lib
        stage, min_freq_mhz = c_int("stage", stage), c_int("min_freq_mhz", min_freq_mhz)
        iters = c_int("iters", iters)
        raised = []

        def cb(user, handle):
            try:
                run_iteration(self)
                return _lib.OK
            except ErgonError as e:
                raised.append(e)
                return e.status or _lib.EINTERNAL
            except BaseException as e:  # noqa: B902 - re-raised below
                raised.append(e)
                return _lib.ECANCELED

        fn = _lib.ITER_FN(cb)
        prof = ctypes.c_void_p()
        pb = ctypes.c_double()
        err = new_error()
        st = lib.erg_client_profile(self.handle, stage, min_freq_mhz, iters, fn, None,
                                    blocking_s, ctypes.byref(prof), ctypes.byref(pb),
                                    ctypes.byref(err))
        if raised:
            raise raised[0]
        check(st, err)
        try:
            if out_csv:
                check(lib.erg_profile_write_csv(prof, os.fspath(out_csv).encode(),
                                                ctypes.byref(err)), err)
        finally:
            lib.erg_profile_free(prof)
        return pb.value

    def flush_logs(self):
        err = new_error()
        check(self._lib.erg_client_flush_logs(self.handle, ctypes.byref(err)), err)

    def close(self):
        """Stop the clock thread, reset the clocks, write the logs. Idempotent."""
        if not self._h:
            return
        err = new_error()
        st = self._lib.erg_client_close(self._h, ctypes.byref(err))
        self._h = ctypes.c_void_p()
        if self in self._gpu._clients:
            self._gpu._clients.remove(self)
        check(st, err)
