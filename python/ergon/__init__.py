"""ergon: Python binding (ctypes over libergon, no compiled extension).

Hooks for a training loop, plan loading and GPU back-ends:

    import ergon
    gpu = ergon.Gpu("nvml")                 # or "sim:a100:gpt3-xl:4", "daemon:/run/ergond/ergond.sock"
    with ergon.Client(gpu, device=0, rank=stage, log_dir="logs") as c:
        c.load_plan("freqs_pipeline_00042.py", stage)
        for batch in data:
            c.step_begin()
            c.instruction_begin(ergon.FORWARD, 0); ...; c.instruction_end(ergon.FORWARD, 0)
            ...
            t, e = c.step_end()

See ergon.integration for wrapping a pipeline engine's forward/backward calls.
"""
import ctypes
import ctypes.util
import operator
import os

from . import _libfind

__all__ = ["ErgonError", "LibraryMissing", "Gpu", "Client", "FORWARD", "BACKWARD", "BACKWARD_INPUT",
           "BACKWARD_WEIGHT", "load_library",
           "version", "profile_from_logs", "sim_profile", "Schedule", "schedule_order",
           "plan_schedule", "SCHED_1F1B", "SCHED_GPIPE", "SCHED_ENVPIPE",
           "SCHED_INTERLEAVED_1F1B", "SCHED_LOOPED_BFS", "SCHED_INTERLEAVED_ZB", "SCHED_ZBV",
           "SCHED_DUALPIPEV", "OVERLAP_F_B", "rank_order"]

FORWARD = 0
BACKWARD = 1
#: zero-bubble halves of the backward (erg_instr_kind)
BACKWARD_INPUT = 2
BACKWARD_WEIGHT = 3
#: DualPipeV's forward + backward step (erg_instr_kind ERG_OVERLAP_F_B)
OVERLAP_F_B = 4
#: pipe_schedule names of the kinds (erg_instr_kind_name; the server's instruction names)
_KIND_NAMES = {FORWARD: "forward", BACKWARD: "backward", BACKWARD_INPUT: "backward_input",
               BACKWARD_WEIGHT: "backward_weight", OVERLAP_F_B: "overlap_f_b"}

#: libergon version this binding was written for (major, minor).
API_VERSION = (0, 1)

_STATUS_NAMES = {0: "OK", 1: "EINVAL", 2: "EPARSE", 3: "EIO", 4: "ENOMEM", 5: "ENOTSUP",
                 6: "ENOTFOUND", 7: "EPERM", 8: "ESTATE", 9: "ENUMERIC", 10: "ENOGPU",
                 11: "ENET", 12: "EDB", 13: "ETIMEOUT", 14: "ECANCELED", 15: "EEXIST",
                 16: "EINTERNAL"}

#: Schedule kinds (erg_schedule_kind in pipeline.h).
SCHED_1F1B = 0
SCHED_GPIPE = 1
SCHED_ENVPIPE = 2
SCHED_INTERLEAVED_1F1B = 3
SCHED_LOOPED_BFS = 4
SCHED_INTERLEAVED_ZB = 5
SCHED_ZBV = 6
SCHED_DUALPIPEV = 7
SCHED_FILE = 8
#: ERG_SCHED_MAX_STAGES: stages whose extra warm-up an EnvPipe schedule carries.
SCHED_MAX_STAGES = 64

CLIENT_NO_SIGNALS = 1
CLIENT_NO_WATCHDOG = 2
CLIENT_NO_ENERGY = 4
CLIENT_LOCK_MEMORY = 8
CLIENT_WAIT_CLOCK = 16


class ErgonError(Exception):
    """A libergon call failed: .status (int), .name ("EPERM"), message."""

    def __init__(self, status, message):
        self.status = status
        self.name = _STATUS_NAMES.get(status, str(status))
        super().__init__("%s: %s" % (self.name, message))


class LibraryMissing(ErgonError):
    """libergon (the C library this binding wraps) could not be loaded: the message says
    what was tried and what to install. .status stays ENOGPU (10) for older callers;
    .name is "ELIBRARY"."""

    def __init__(self, message):
        Exception.__init__(self, "libergon missing: %s" % message)
        self.status = 10
        self.name = "ELIBRARY"


# No C struct is mirrored here (tests/cli/no_mirrored_structs.sh): an erg_error is opaque
# storage of the size libergon reports, read with erg_error_message; schedules are heap
# values set and read with erg_schedule_* accessors; instructions are read as ints with
# erg_instr_get. A change of a C struct's layout cannot silently corrupt the binding.
def _Error():
    """Opaque, zeroed storage for one erg_error (a cleared error)."""
    return ctypes.create_string_buffer(load_library().erg_error_size())


class _Sched:
    """A heap erg_schedule built from a Schedule (freed with the object)."""

    def __init__(self, schedule):
        lib = self._lib = load_library()
        self.ptr = lib.erg_schedule_new(schedule.kind)
        if not self.ptr:
            raise MemoryError("erg_schedule_new")
        lib.erg_schedule_set_max_inflight(self.ptr, schedule.max_inflight)
        lib.erg_schedule_set_chunks(self.ptr, schedule.chunks)
        err = _Error()
        for i, r in enumerate(schedule.extra_warmup):
            _check(lib.erg_schedule_set_extra_warmup(self.ptr, i, r, ctypes.byref(err)), err)

    def __del__(self):
        if getattr(self, "ptr", None):
            self._lib.erg_schedule_free(self.ptr)
            self.ptr = None


_lib = None

_INT_MIN, _INT_MAX = -2 ** 31, 2 ** 31 - 1
_UINT_MAX = 2 ** 32 - 1


def _int(name, value, lo=_INT_MIN, hi=_INT_MAX):
    """Check an argument bound for a C int before ctypes truncates it (ctypes keeps
    the low 32 bits: 2**32 + 1200 would reach libergon as 1200). Returns the int;
    raises TypeError for a non-integer and ValueError outside [lo, hi] (the C
    type's range; what a valid value is, libergon checks: ErgonError)."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = operator.index(value)  # numpy integers and the like
        except TypeError:
            raise TypeError("%s must be an integer, got %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("%s = %d is out of range [%d, %d]" % (name, value, lo, hi))
    return value


# erg_iteration_fn: erg_status (*)(void *user, erg_client *c)
_ITER_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def load_library(path=None):
    """Load libergon: `path`, $ERGON_LIBRARY, the directory it was installed to (packages,
    `make install`), or libergon.so.0 on the loader path. Raises LibraryMissing (an
    ErgonError) naming what was tried and what to install when there is none."""
    global _lib
    if _lib is not None and path is None:
        return _lib
    try:
        lib = _libfind.load(path)
    except OSError as e:
        raise LibraryMissing(str(e)) from None
    ver = _declare(lib)
    major, minor = (int(x) for x in ver.split(".")[:2])
    if (major, minor) != API_VERSION:
        raise ErgonError(5, "libergon %s, this binding expects %d.%d" % ((ver,) + API_VERSION))
    _lib = lib
    return lib


def _declare(lib):
    """Declare every function the binding calls; returns libergon's version. A library
    without one of them (older than the binding) is refused, naming the function."""
    P, I, D, U, E = ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_uint, ctypes.c_void_p
    S = ctypes.c_char_p
    IP = ctypes.POINTER(I)
    sig = {
        "erg_version": (S, []),
        "erg_free": (None, [P]),
        "erg_error_size": (ctypes.c_size_t, []),
        "erg_error_message": (S, [E]),
        "erg_gpu_open": (I, [S, ctypes.POINTER(P), E]),
        "erg_gpu_close": (None, [P]),
        "erg_gpu_count": (I, [P]),
        "erg_gpu_backend_name": (S, [P]),
        "erg_gpu_name": (I, [P, I, ctypes.c_char_p, ctypes.c_size_t, E]),
        "erg_gpu_sm_clocks": (I, [P, I, ctypes.POINTER(ctypes.POINTER(I)), ctypes.POINTER(ctypes.c_size_t), E]),
        "erg_gpu_lock_sm_clocks": (I, [P, I, I, I, E]),
        "erg_gpu_reset_sm_clocks": (I, [P, I, E]),
        "erg_gpu_energy_mj": (I, [P, I, ctypes.POINTER(ctypes.c_uint64), E]),
        "erg_gpu_energy_source": (ctypes.c_char_p, [P, I]),
        "erg_gpu_sim_set_activity": (I, [P, I, ctypes.c_bool, I, ctypes.POINTER(D), E]),
        "erg_client_new": (I, [P, I, I, S, U, ctypes.POINTER(P), E]),
        "erg_client_load_plan": (I, [P, S, I, E]),
        "erg_client_set_uniform_clock": (I, [P, I, E]),
        "erg_client_step_begin": (I, [P]),
        "erg_client_step_end": (I, [P, ctypes.POINTER(D), ctypes.POINTER(D)]),
        "erg_client_instruction_begin": (I, [P, I, I]),
        "erg_client_instruction_end": (I, [P, I, I]),
        "erg_client_instruction_begin_chunk": (I, [P, I, I, I]),
        "erg_client_instruction_end_chunk": (I, [P, I, I, I]),
        "erg_client_sync": (I, [P, D, E]),
        "erg_client_recv_begin": (I, [P]),
        "erg_client_recv_end": (I, [P, ctypes.POINTER(D)]),
        "erg_client_add_wait": (I, [P, D]),
        "erg_client_step_waits": (I, [P, I, ctypes.POINTER(D), ctypes.c_size_t,
                                      ctypes.POINTER(ctypes.c_size_t)]),
        "erg_client_active_clock": (I, [P]),
        "erg_client_energy_source": (ctypes.c_char_p, [P, ctypes.c_bool]),
        "erg_client_clock_changes": (ctypes.c_uint64, [P]),
        "erg_client_clock_error": (I, [P, E]),
        "erg_client_flush_logs": (I, [P, E]),
        "erg_client_close": (I, [P, E]),
        "erg_client_profile": (I, [P, I, I, I, _ITER_FN, P, D, ctypes.POINTER(P),
                                   ctypes.POINTER(D), E]),
        "erg_profile_from_logs": (I, [S, I, ctypes.POINTER(P), E]),
        "erg_sim_profile": (I, [S, S, I, I, I, ctypes.POINTER(P), E]),
        "erg_profile_write_csv": (I, [P, S, E]),
        "erg_profile_free": (None, [P]),
        "erg_profile_num_stages": (I, [P]),
        "erg_schedule_parse": (I, [S, ctypes.POINTER(I), E]),
        "erg_schedule_name": (S, [I]),
        "erg_schedule_new": (P, [I]),
        "erg_schedule_free": (None, [P]),
        "erg_schedule_get_kind": (I, [P]),
        "erg_schedule_get_max_inflight": (I, [P]),
        "erg_schedule_set_max_inflight": (None, [P, I]),
        "erg_schedule_get_chunks": (I, [P]),
        "erg_schedule_set_chunks": (None, [P, I]),
        "erg_schedule_get_extra_warmup": (I, [P, I]),
        "erg_schedule_set_extra_warmup": (I, [P, I, I, E]),
        "erg_schedule_stage_order": (I, [P, I, I, I, P, E]),
        "erg_schedule_chunks": (I, [P]),
        "erg_instr_array_new": (P, [ctypes.c_size_t]),
        "erg_instr_get": (None, [P, ctypes.c_size_t, IP]),
        "erg_order_new": (I, [P, I, I, ctypes.POINTER(P), E]),
        "erg_order_free": (None, [P]),
        "erg_order_num_stages": (I, [P]),
        "erg_order_stage_rank": (I, [P, I]),
        "erg_order_rank": (I, [P, I, ctypes.POINTER(P)]),
        "erg_plan_read": (I, [S, P, ctypes.POINTER(P), E]),
        "erg_plan_free": (None, [P]),
        "erg_plan_schedule_ref": (P, [P]),
        "erg_plan_num_stages": (I, [P]),
        "erg_plan_num_microbatches": (I, [P]),
    }
    for name, (res, args) in sig.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            ver = lib.erg_version().decode() if hasattr(lib, "erg_version") else "unknown"
            raise ErgonError(5, "libergon %s lacks %s, which this binding (for %d.%d) calls: "
                                "install a matching libergon" % ((ver, name) + API_VERSION)) from None
        f.restype = res
        f.argtypes = args
    return lib.erg_version().decode()


def _check(status, err=None, what=""):
    if status != 0:
        msg = b""
        if err is not None:
            msg = load_library().erg_error_message(ctypes.byref(err)) or b""
        msg = msg.decode(errors="replace") or what
        raise ErgonError(status, msg or _STATUS_NAMES.get(status, "error"))


def version():
    return load_library().erg_version().decode()


class _Closes:
    """A handle closed by `with` or when collected (close() never raises from __del__)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Gpu(_Closes):
    """A GPU back-end: "nvml", "nvml:LIB", "sim:GPU[:MODEL[:N]]", "daemon:SOCKET"."""

    def __init__(self, spec="nvml"):
        lib = load_library()
        self._lib = lib
        self._h = ctypes.c_void_p()
        err = _Error()
        _check(lib.erg_gpu_open(spec.encode(), ctypes.byref(self._h), ctypes.byref(err)), err)
        self._clients = []

    @property
    def handle(self):
        if not self._h:
            raise ErgonError(8, "GPU back-end closed")
        return self._h

    def __len__(self):
        return self._lib.erg_gpu_count(self.handle)

    @property
    def backend(self):
        return self._lib.erg_gpu_backend_name(self.handle).decode()

    def name(self, dev=0):
        buf = ctypes.create_string_buffer(256)
        err = _Error()
        _check(self._lib.erg_gpu_name(self.handle, _int("dev", dev), buf, 256, ctypes.byref(err)),
               err)
        return buf.value.decode()

    def sm_clocks(self, dev=0):
        p = ctypes.POINTER(ctypes.c_int)()
        n = ctypes.c_size_t()
        err = _Error()
        _check(self._lib.erg_gpu_sm_clocks(self.handle, _int("dev", dev), ctypes.byref(p), ctypes.byref(n),
                                           ctypes.byref(err)), err)
        try:
            return [p[i] for i in range(n.value)]
        finally:
            self._lib.erg_free(p)

    def lock_sm_clock(self, dev, mhz):
        """Lock device `dev`'s SM clock to `mhz`. ValueError for an int beyond a C int
        (it would be truncated to 32 bits on its way to C), ErgonError for a clock the
        GPU does not support."""
        dev, mhz = _int("dev", dev), _int("mhz", mhz)
        err = _Error()
        _check(self._lib.erg_gpu_lock_sm_clocks(self.handle, dev, mhz, mhz, ctypes.byref(err)), err)

    def reset_sm_clocks(self, dev=0):
        err = _Error()
        _check(self._lib.erg_gpu_reset_sm_clocks(self.handle, _int("dev", dev), ctypes.byref(err)),
               err)

    def energy_source(self, dev=0):
        """Where device dev's energy comes from now: "counter", "integrated" (power
        integrated by ergon once the counter was not trusted), "model" or "none"."""
        return self._lib.erg_gpu_energy_source(self.handle, _int("dev", dev)).decode()

    def energy_mj(self, dev=0):
        v = ctypes.c_uint64()
        err = _Error()
        _check(self._lib.erg_gpu_energy_mj(self.handle, _int("dev", dev), ctypes.byref(v),
                                           ctypes.byref(err)), err)
        return v.value

    def sim_set_activity(self, dev, busy, kind=FORWARD):
        """Simulated GPU only: mark an instruction running (returns its time in s) or idle."""
        t = ctypes.c_double()
        err = _Error()
        _check(self._lib.erg_gpu_sim_set_activity(self.handle, _int("dev", dev), bool(busy),
                                                  _int("kind", kind), ctypes.byref(t),
                                                  ctypes.byref(err)), err)
        return t.value

    def close(self):
        # Clients borrow the back-end: close them first, in any order.
        for c in list(self._clients):
            c.close()
        if self._h:
            self._lib.erg_gpu_close(self._h)
            self._h = ctypes.c_void_p()

class Client(_Closes):
    """One training rank's client (see include/ergon/client.h)."""

    def __init__(self, gpu, device=0, rank=0, log_dir=None, flags=0):
        self._lib = load_library()
        self._gpu = gpu
        self._h = ctypes.c_void_p()
        err = _Error()
        _check(self._lib.erg_client_new(gpu.handle, _int("device", device), _int("rank", rank),
                                        os.fspath(log_dir).encode() if log_dir else None,
                                        _int("flags", flags, 0, _UINT_MAX),
                                        ctypes.byref(self._h), ctypes.byref(err)), err)
        gpu._clients.append(self)

    @property
    def handle(self):
        if not self._h:
            raise ErgonError(8, "client closed")
        return self._h

    def load_plan(self, path, stage):
        err = _Error()
        _check(self._lib.erg_client_load_plan(self.handle, os.fspath(path).encode(),
                                              _int("stage", stage),
                                              ctypes.byref(err)), err)

    def set_uniform_clock(self, mhz):
        err = _Error()
        _check(self._lib.erg_client_set_uniform_clock(self.handle, _int("mhz", mhz),
                                                      ctypes.byref(err)), err)

    def step_begin(self):
        _check(self._lib.erg_client_step_begin(self.handle), what="step_begin out of order")

    def step_end(self):
        t, e = ctypes.c_double(), ctypes.c_double()
        _check(self._lib.erg_client_step_end(self.handle, ctypes.byref(t), ctypes.byref(e)),
               what="step_end without step_begin (or inside an instruction)")
        return t.value, e.value

    def instruction_begin(self, kind, microbatch):
        kind, microbatch = _int("kind", kind), _int("microbatch", microbatch)
        _check(self._lib.erg_client_instruction_begin(self.handle, kind, microbatch),
               what="instruction_begin(%d, %d) refused" % (kind, microbatch))

    def instruction_end(self, kind, microbatch):
        kind, microbatch = _int("kind", kind), _int("microbatch", microbatch)
        _check(self._lib.erg_client_instruction_end(self.handle, kind, microbatch),
               what="instruction_end(%d, %d) does not match the open instruction" % (kind, microbatch))

    def instruction_begin_chunk(self, kind, chunk, microbatch):
        """Multi-chunk / zero-bubble schedules: kind FORWARD, BACKWARD, BACKWARD_INPUT or
        BACKWARD_WEIGHT of this rank's chunk `chunk` (its stages in ascending order)."""
        _check(self._lib.erg_client_instruction_begin_chunk(self.handle, kind, chunk, microbatch),
               what="instruction_begin_chunk(%d, %d, %d) refused" % (kind, chunk, microbatch))

    def instruction_end_chunk(self, kind, chunk, microbatch):
        _check(self._lib.erg_client_instruction_end_chunk(self.handle, kind, chunk, microbatch),
               what="instruction_end_chunk(%d, %d, %d) does not match the open instruction"
               % (kind, chunk, microbatch))

    def recv_begin(self):
        """Right before a blocking receive (EnvPipe's wait measurement, client.h)."""
        _check(self._lib.erg_client_recv_begin(self.handle), what="recv_begin twice")

    def recv_end(self):
        """Right after it: returns the wait (s), charged to the next instruction begun."""
        w = ctypes.c_double()
        _check(self._lib.erg_client_recv_end(self.handle, ctypes.byref(w)),
               what="recv_end without recv_begin")
        return w.value

    def add_wait(self, wait_s):
        """Charge a wait measured another way (e.g. CUDA events) to the next instruction."""
        _check(self._lib.erg_client_add_wait(self.handle, float(wait_s)),
               what="a wait must be finite and >= 0")

    def step_waits(self, kinds=(FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT)):
        """The last finished step's receive waits: {instruction name: [wait_s per occurrence
        in run order]} for the given kinds that ran (the server's "wait_breakdown")."""
        out = {}
        for kind in kinds:
            n = ctypes.c_size_t()
            _check(self._lib.erg_client_step_waits(self.handle, kind, None, 0, ctypes.byref(n)))
            buf = (ctypes.c_double * max(1, n.value))()
            _check(self._lib.erg_client_step_waits(self.handle, kind, buf, n.value,
                                                   ctypes.byref(n)))
            if n.value:
                out[_KIND_NAMES[kind]] = list(buf[:n.value])
        return out

    def sync(self, timeout_s=30.0):
        err = _Error()
        _check(self._lib.erg_client_sync(self.handle, timeout_s, ctypes.byref(err)), err)

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
        stage, min_freq_mhz = _int("stage", stage), _int("min_freq_mhz", min_freq_mhz)
        iters = _int("iters", iters)
        raised = []

        def cb(user, handle):
            try:
                run_iteration(self)
                return 0
            except ErgonError as e:
                raised.append(e)
                return e.status or 16
            except BaseException as e:  # noqa: B902 - re-raised below
                raised.append(e)
                return 14  # ERG_ECANCELED

        fn = _ITER_FN(cb)
        prof = ctypes.c_void_p()
        pb = ctypes.c_double()
        err = _Error()
        st = lib.erg_client_profile(self.handle, stage, min_freq_mhz, iters, fn, None,
                                    blocking_s, ctypes.byref(prof), ctypes.byref(pb),
                                    ctypes.byref(err))
        if raised:
            raise raised[0]
        _check(st, err)
        try:
            if out_csv:
                _check(lib.erg_profile_write_csv(prof, os.fspath(out_csv).encode(),
                                                 ctypes.byref(err)), err)
        finally:
            lib.erg_profile_free(prof)
        return pb.value

    def flush_logs(self):
        err = _Error()
        _check(self._lib.erg_client_flush_logs(self.handle, ctypes.byref(err)), err)

    def close(self):
        """Stop the clock thread, reset the clocks, write the logs. Idempotent."""
        if not self._h:
            return
        err = _Error()
        st = self._lib.erg_client_close(self._h, ctypes.byref(err))
        self._h = ctypes.c_void_p()
        if self in self._gpu._clients:
            self._gpu._clients.remove(self)
        _check(st, err)

class Schedule:
    """A pipeline schedule (erg_schedule): kind "1f1b", "gpipe", "ours"/"envpipe",
    "interleaved-1f1b", "looped-bfs", "interleaved-zb", "zbv" or "dualpipev" (or PyTorch's
    class names), EnvPipe's extra warm-up forwards r_s per stage and its in-flight cap, and
    the chunks per rank V (0 = the kind's default: 1 for gpipe/1f1b/ours, else 2)."""

    def __init__(self, kind="1f1b", extra_warmup=(), max_inflight=0, chunks=0):
        lib = load_library()
        if isinstance(kind, str):
            k = ctypes.c_int()
            err = _Error()
            _check(lib.erg_schedule_parse(kind.encode(), ctypes.byref(k), ctypes.byref(err)), err)
            kind = k.value
        if len(extra_warmup) > SCHED_MAX_STAGES:
            raise ErgonError(1, "at most %d extra warm-up values" % SCHED_MAX_STAGES)
        self.kind = _int("kind", kind)
        self.extra_warmup = [_int("extra_warmup[%d]" % i, r) for i, r in enumerate(extra_warmup)]
        self.max_inflight = _int("max_inflight", max_inflight)
        self.chunks = _int("chunks", chunks, 0, 1 << 16)

    @property
    def num_chunks(self):
        """V: the chunks per rank this schedule uses (its default when 0)."""
        return load_library().erg_schedule_chunks(_Sched(self).ptr)

    @property
    def name(self):
        return load_library().erg_schedule_name(self.kind).decode()

    def stage_order(self, num_stages, num_microbatches, stage):
        """This stage's instructions in execution order: a list of 2*M
        (kind, microbatch) pairs, kind FORWARD or BACKWARD."""
        return schedule_order(self, num_stages, num_microbatches, stage)

    def rank_order(self, num_ranks, num_microbatches, rank):
        """See rank_order()."""
        return rank_order(self, num_ranks, num_microbatches, rank)

    def __repr__(self):
        r = self.extra_warmup if any(self.extra_warmup) else []
        return "Schedule(%r, extra_warmup=%r, max_inflight=%d, chunks=%d)" % (
            self.name, r, self.max_inflight, self.chunks)


def rank_order(schedule, num_ranks, num_microbatches, rank):
    """erg_order_new for every schedule (multi-chunk and zero-bubble ones included): rank
    `rank`'s instructions in execution order, and the placement. Returns (instrs,
    stage_rank): instrs is a list of tuples (kind, stage, microbatch, kind2, stage2,
    microbatch2), kind FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT or OVERLAP_F_B
    (then (stage, microbatch) is its forward part and (kind2, stage2, microbatch2) its
    backward part; otherwise those three are -1); stage is the pipeline stage (0..P*V-1);
    stage_rank[s] is the rank that holds pipeline stage s. The same refusals as `ergon
    schedule` (ErgonError)."""
    lib = load_library()
    if not isinstance(schedule, Schedule):
        schedule = Schedule(schedule)
    num_ranks, rank = _int("num_ranks", num_ranks), _int("rank", rank)
    num_microbatches = _int("num_microbatches", num_microbatches)
    st = _Sched(schedule)
    o = ctypes.c_void_p()
    err = _Error()
    _check(lib.erg_order_new(st.ptr, num_ranks, num_microbatches, ctypes.byref(o),
                             ctypes.byref(err)), err)
    try:
        if rank < 0 or rank >= num_ranks:
            raise ErgonError(1, "rank %d is out of [0, %d]" % (rank, num_ranks - 1))
        p = ctypes.c_void_p()
        n = lib.erg_order_rank(o, rank, ctypes.byref(p))
        out = []
        f = (ctypes.c_int * 6)()  # ERG_INSTR_NUM_FIELDS: kind, stage, microbatch, kind2, ...
        for i in range(n):
            lib.erg_instr_get(p, i, f)
            if f[0] == OVERLAP_F_B:
                out.append(tuple(f))
            else:
                out.append((f[0], f[1], f[2], -1, -1, -1))
        placement = [lib.erg_order_stage_rank(o, s) for s in range(lib.erg_order_num_stages(o))]
        return out, placement
    finally:
        lib.erg_order_free(o)


def schedule_order(schedule, num_stages, num_microbatches, stage):
    """erg_schedule_stage_order: the execution order of `stage` (0-based) as a list
    of (kind, microbatch) pairs. `schedule` is a Schedule or a kind name."""
    lib = load_library()
    if not isinstance(schedule, Schedule):
        schedule = Schedule(schedule)
    num_stages, stage = _int("num_stages", num_stages), _int("stage", stage)
    num_microbatches = _int("num_microbatches", num_microbatches)
    if num_microbatches < 1 or num_microbatches > (1 << 24):
        raise ErgonError(1, "number of microbatches out of range: %d" % num_microbatches)
    st = _Sched(schedule)
    n = 2 * num_microbatches
    out = lib.erg_instr_array_new(n)
    if not out:
        raise MemoryError("erg_instr_array_new(%d)" % n)
    try:
        err = _Error()
        _check(lib.erg_schedule_stage_order(st.ptr, num_stages, num_microbatches, stage, out,
                                            ctypes.byref(err)), err)
        f = (ctypes.c_int * 6)()
        order = []
        for i in range(n):
            lib.erg_instr_get(out, i, f)
            order.append((f[0], f[2]))
        return order
    finally:
        lib.erg_free(out)


def plan_schedule(path):
    """Read a plan file and return (Schedule, num_stages, num_microbatches): the
    order the plan was made for (a .py plan names none: 1F1B)."""
    lib = load_library()
    p = ctypes.c_void_p()
    err = _Error()
    _check(lib.erg_plan_read(os.fspath(path).encode(), None, ctypes.byref(p), ctypes.byref(err)),
           err)
    try:
        st = lib.erg_plan_schedule_ref(p)
        S = lib.erg_plan_num_stages(p)
        r = [lib.erg_schedule_get_extra_warmup(st, i) for i in range(min(max(S, 0), SCHED_MAX_STAGES))]
        sched = Schedule(lib.erg_schedule_get_kind(st), r, lib.erg_schedule_get_max_inflight(st),
                         lib.erg_schedule_get_chunks(st))
        return sched, S, lib.erg_plan_num_microbatches(p)
    finally:
        lib.erg_plan_free(p)


def profile_from_logs(log_dir, out_csv, num_stages=0):
    """`ergon profile logs`: client logs -> stage profile CSV."""
    lib = load_library()
    p = ctypes.c_void_p()
    err = _Error()
    _check(lib.erg_profile_from_logs(os.fspath(log_dir).encode(), _int("num_stages", num_stages),
                                     ctypes.byref(p),
                                     ctypes.byref(err)), err)
    try:
        _check(lib.erg_profile_write_csv(p, os.fspath(out_csv).encode(), ctypes.byref(err)), err)
        return lib.erg_profile_num_stages(p)
    finally:
        lib.erg_profile_free(p)


def sim_profile(gpu, model, stages, out_csv, microbatch_size=0, min_freq_mhz=0):
    """`ergon profile sim`: the simulated GPU's profile to a CSV."""
    lib = load_library()
    p = ctypes.c_void_p()
    err = _Error()
    _check(lib.erg_sim_profile(gpu.encode(), model.encode(), _int("stages", stages),
                               _int("microbatch_size", microbatch_size),
                               _int("min_freq_mhz", min_freq_mhz), ctypes.byref(p),
                               ctypes.byref(err)), err)
    try:
        _check(lib.erg_profile_write_csv(p, os.fspath(out_csv).encode(), ctypes.byref(err)), err)
    finally:
        lib.erg_profile_free(p)
