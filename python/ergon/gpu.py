"""ergon.Gpu: a GPU back-end of libergon (include/ergon/gpu.h)."""
import ctypes

from . import _lib
from ._lib import ErgonError, c_int, check, new_error

__all__ = ["Gpu"]


class Gpu(_lib.Closes):
    """A GPU back-end: "nvml", "nvml:LIB", "sim:GPU[:MODEL[:N]]", "daemon:SOCKET"."""

    def __init__(self, spec="nvml"):
        lib = _lib.load_library()
        self._lib = lib
        self._h = ctypes.c_void_p()
        err = new_error()
        check(lib.erg_gpu_open(spec.encode(), ctypes.byref(self._h), ctypes.byref(err)), err)
        self._clients = []

    @property
    def handle(self):
        if not self._h:
            raise ErgonError(_lib.ESTATE, "GPU back-end closed")
        return self._h

    def __len__(self):
        return self._lib.erg_gpu_count(self.handle)

    @property
    def backend(self):
        return self._lib.erg_gpu_backend_name(self.handle).decode()

    def name(self, dev=0):
        buf = ctypes.create_string_buffer(256)
        err = new_error()
        check(self._lib.erg_gpu_name(self.handle, c_int("dev", dev), buf, 256, ctypes.byref(err)),
              err)
        return buf.value.decode()

    def sm_clocks(self, dev=0):
        p = ctypes.POINTER(ctypes.c_int)()
        n = ctypes.c_size_t()
        err = new_error()
        check(self._lib.erg_gpu_sm_clocks(self.handle, c_int("dev", dev), ctypes.byref(p),
                                          ctypes.byref(n), ctypes.byref(err)), err)
        try:
            return [p[i] for i in range(n.value)]
        finally:
            self._lib.erg_free(p)

    def lock_sm_clock(self, dev, mhz):
        """Lock device `dev`'s SM clock to `mhz`. ValueError for an int beyond a C int
        (it would be truncated to 32 bits on its way to C), ErgonError for a clock the
        GPU does not support."""
        dev, mhz = c_int("dev", dev), c_int("mhz", mhz)
        err = new_error()
        check(self._lib.erg_gpu_lock_sm_clocks(self.handle, dev, mhz, mhz, ctypes.byref(err)), err)

    def reset_sm_clocks(self, dev=0):
        err = new_error()
        check(self._lib.erg_gpu_reset_sm_clocks(self.handle, c_int("dev", dev), ctypes.byref(err)),
              err)

    def energy_source(self, dev=0):
        """Where device dev's energy comes from now: "counter", "integrated" (power
        integrated by ergon once the counter was not trusted), "model" or "none"."""
        return self._lib.erg_gpu_energy_source(self.handle, c_int("dev", dev)).decode()

    def energy_mj(self, dev=0):
        v = ctypes.c_uint64()
        err = new_error()
        check(self._lib.erg_gpu_energy_mj(self.handle, c_int("dev", dev), ctypes.byref(v),
                                          ctypes.byref(err)), err)
        return v.value

    def sim_set_activity(self, dev, busy, kind=_lib.FORWARD):
        """Simulated GPU only: mark an instruction running (returns its time in s) or idle."""
        t = ctypes.c_double()
        err = new_error()
        check(self._lib.erg_gpu_sim_set_activity(self.handle, c_int("dev", dev), bool(busy),
                                                 c_int("kind", kind), ctypes.byref(t),
                                                 ctypes.byref(err)), err)
        return t.value

    def sim_account(self, dev):
        """Simulated GPU only: the device's own accounting of the instructions begun, in
        simulated time (the model's time and energy at the clock it had when each began,
        independent of how long the host took): a dict with instructions, busy_time_s,
        busy_energy_j and last_freq_mhz (the clock the last one began at; 0: none yet)."""
        n, t, e, f = ctypes.c_uint64(), ctypes.c_double(), ctypes.c_double(), ctypes.c_int()
        err = new_error()
        check(self._lib.erg_gpu_sim_account(self.handle, c_int("dev", dev), ctypes.byref(n),
                                            ctypes.byref(t), ctypes.byref(e), ctypes.byref(f),
                                            ctypes.byref(err)), err)
        return {"instructions": n.value, "busy_time_s": t.value, "busy_energy_j": e.value,
                "last_freq_mhz": f.value}

    def close(self):
        # Clients borrow the back-end: close them first, in any order.
        for c in list(self._clients):
            c.close()
        if self._h:
            self._lib.erg_gpu_close(self._h)
            self._h = ctypes.c_void_p()
