"""The binding's one loader of libergon, its ctypes declarations, errors and C constants.

Every module of the package reaches the library through here:

    from . import _lib
    lib = _lib.load_library()          # found by _libfind, declared, version checked, cached
    err = _lib.new_error()
    _lib.check(lib.erg_gpu_open(spec, ctypes.byref(h), ctypes.byref(err)), err)

A module that calls functions beyond SIGNATURES (another header: server_client.h, shard.h,
...) declares them itself, with the same table shape, {name: (restype, [argtypes])}:

    _SIGS = {"erg_srv_client_free": (None, [ctypes.c_void_p]), ...}
    lib = _lib.use(_SIGS)               # load_library() + declare(lib, _SIGS), once per table

`declare(lib, table)` sets restype/argtypes and refuses (ErgonError ENOTSUP, naming the
function) a library that lacks one; a function declared twice must be declared alike.

The constants below mirror include/ergon/*.h (erg_status, erg_instr_kind,
erg_schedule_kind, the ERG_CLIENT_* flags, ERG_SCHED_MAX_STAGES, ERG_INSTR_NUM_FIELDS):
the Python name is the C name without "ERG_". tests/python/test_constants.py
(ctest cli/python_constants) compares every one with the headers and fails on a value
that differs or an enumerator of those enums that has no Python name.

No C struct is mirrored (tests/lint/no_mirrored_structs.sh): an erg_error is opaque storage
of the size libergon reports, read with erg_error_message; schedules are heap values set
and read with erg_schedule_* accessors; instructions are read as ints with erg_instr_get.
"""
import ctypes
import operator

from . import _libfind

# --- constants (C name: "ERG_" + the Python name) ---------------------------------------

#: erg_instr_kind (profile.h)
FORWARD = 0
BACKWARD = 1
BACKWARD_INPUT = 2  # zero-bubble halves of the backward
BACKWARD_WEIGHT = 3
OVERLAP_F_B = 4  # DualPipeV's forward + backward step
#: erg_instr_kind_name of each kind (the server's instruction names)
KIND_NAMES = {FORWARD: "forward", BACKWARD: "backward", BACKWARD_INPUT: "backward_input",
              BACKWARD_WEIGHT: "backward_weight", OVERLAP_F_B: "overlap_f_b"}

#: erg_schedule_kind (pipeline.h)
SCHED_1F1B = 0
SCHED_GPIPE = 1
SCHED_ENVPIPE = 2
SCHED_INTERLEAVED_1F1B = 3
SCHED_LOOPED_BFS = 4
SCHED_INTERLEAVED_ZB = 5
SCHED_ZBV = 6
SCHED_DUALPIPEV = 7
SCHED_FILE = 8
#: stages whose extra warm-up an EnvPipe schedule carries (pipeline.h)
SCHED_MAX_STAGES = 64
#: ints erg_instr_get writes: kind, stage, microbatch, kind2, stage2, microbatch2
INSTR_NUM_FIELDS = 6

#: flags of erg_client_new (client.h)
CLIENT_NO_SIGNALS = 1
CLIENT_NO_WATCHDOG = 2
CLIENT_NO_ENERGY = 4
CLIENT_LOCK_MEMORY = 8
CLIENT_WAIT_CLOCK = 16

#: erg_status (ergon.h ERG_STATUS_MAP)
OK = 0
EINVAL = 1
EPARSE = 2
EIO = 3
ENOMEM = 4
ENOTSUP = 5
ENOTFOUND = 6
EPERM = 7
ESTATE = 8
ENUMERIC = 9
ENOGPU = 10
ENET = 11
EDB = 12
ETIMEOUT = 13
ECANCELED = 14
EEXIST = 15
EINTERNAL = 16
#: erg_status_name of each code
STATUS_NAMES = {globals()[n]: n for n in (
    "OK", "EINVAL", "EPARSE", "EIO", "ENOMEM", "ENOTSUP", "ENOTFOUND", "EPERM", "ESTATE",
    "ENUMERIC", "ENOGPU", "ENET", "EDB", "ETIMEOUT", "ECANCELED", "EEXIST", "EINTERNAL")}

#: libergon version this binding was written for (major, minor).
API_VERSION = (0, 1)


# --- errors ------------------------------------------------------------------------------

class ErgonError(Exception):
    """A libergon call failed: .status (int), .name ("EPERM"), message."""

    def __init__(self, status, message):
        self.status = status
        self.name = STATUS_NAMES.get(status, str(status))
        self.message = message
        super().__init__("%s: %s" % (self.name, message))


class LibraryMissing(ErgonError):
    """libergon (the C library this binding wraps) could not be loaded: the message says
    what was tried and what to install. .status stays ENOGPU (10) for older callers;
    .name is "ELIBRARY"."""

    def __init__(self, message):
        Exception.__init__(self, "libergon missing: %s" % message)
        self.message = message
        self.status = ENOGPU
        self.name = "ELIBRARY"


# --- declarations ------------------------------------------------------------------------

# erg_iteration_fn: erg_status (*)(void *user, erg_client *c)
ITER_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def _signatures():
    P, I, D, U, E = ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_uint, ctypes.c_void_p
    S, Z, B, U64 = ctypes.c_char_p, ctypes.c_size_t, ctypes.c_bool, ctypes.c_uint64
    PP, PD, PI, PZ = (ctypes.POINTER(t) for t in (P, D, I, Z))
    return {
        # ergon.h
        "erg_version": (S, []),
        "erg_free": (None, [P]),
        "erg_error_size": (Z, []),
        "erg_error_message": (S, [E]),
        # gpu.h
        "erg_gpu_open": (I, [S, PP, E]),
        "erg_gpu_close": (None, [P]),
        "erg_gpu_count": (I, [P]),
        "erg_gpu_backend_name": (S, [P]),
        "erg_gpu_name": (I, [P, I, S, Z, E]),
        "erg_gpu_sm_clocks": (I, [P, I, ctypes.POINTER(PI), PZ, E]),
        "erg_gpu_lock_sm_clocks": (I, [P, I, I, I, E]),
        "erg_gpu_reset_sm_clocks": (I, [P, I, E]),
        "erg_gpu_energy_mj": (I, [P, I, ctypes.POINTER(U64), E]),
        "erg_gpu_energy_source": (S, [P, I]),
        "erg_gpu_sim_set_activity": (I, [P, I, B, I, PD, E]),
        "erg_gpu_sim_account": (I, [P, I, ctypes.POINTER(ctypes.c_uint64), PD, PD,
                                    ctypes.POINTER(I), E]),
        # client.h
        "erg_client_new": (I, [P, I, I, S, U, PP, E]),
        "erg_client_load_plan": (I, [P, S, I, E]),
        "erg_client_set_uniform_clock": (I, [P, I, E]),
        "erg_client_step_begin": (I, [P]),
        "erg_client_step_end": (I, [P, PD, PD]),
        "erg_client_instruction_begin": (I, [P, I, I]),
        "erg_client_instruction_end": (I, [P, I, I]),
        "erg_client_instruction_begin_chunk": (I, [P, I, I, I]),
        "erg_client_instruction_end_chunk": (I, [P, I, I, I]),
        "erg_client_sync": (I, [P, D, E]),
        "erg_client_recv_begin": (I, [P]),
        "erg_client_recv_end": (I, [P, PD]),
        "erg_client_add_wait": (I, [P, D]),
        "erg_client_step_waits": (I, [P, I, PD, Z, PZ]),
        "erg_client_active_clock": (I, [P]),
        "erg_client_energy_source": (S, [P, B]),
        "erg_client_clock_changes": (U64, [P]),
        "erg_client_clock_error": (I, [P, E]),
        "erg_client_flush_logs": (I, [P, E]),
        "erg_client_close": (I, [P, E]),
        "erg_client_profile": (I, [P, I, I, I, ITER_FN, P, D, PP, PD, E]),
        "erg_profile_from_logs": (I, [S, I, PP, E]),
        # profile.h, gpu.h (simulated GPU)
        "erg_sim_profile": (I, [S, S, I, I, I, PP, E]),
        "erg_profile_write_csv": (I, [P, S, E]),
        "erg_profile_free": (None, [P]),
        "erg_profile_num_stages": (I, [P]),
        # pipeline.h
        "erg_schedule_parse": (I, [S, PI, E]),
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
        "erg_instr_array_new": (P, [Z]),
        "erg_instr_get": (None, [P, Z, PI]),
        "erg_order_new": (I, [P, I, I, PP, E]),
        "erg_order_free": (None, [P]),
        "erg_order_num_stages": (I, [P]),
        "erg_order_stage_rank": (I, [P, I]),
        "erg_order_rank": (I, [P, I, PP]),
        # plan.h
        "erg_plan_read": (I, [S, P, PP, E]),
        "erg_plan_free": (None, [P]),
        "erg_plan_schedule_ref": (P, [P]),
        "erg_plan_num_stages": (I, [P]),
        "erg_plan_num_microbatches": (I, [P]),
    }


#: Every function ergon's core modules (gpu, client, schedule, profile) call:
#: {name: (restype, [argtypes])}, declared by load_library.
SIGNATURES = _signatures()


def declare(lib, table):
    """Set restype and argtypes of every function of `table` ({name: (restype, [argtypes])})
    on `lib`. A library without one of them (older than the binding) is refused with
    ErgonError ENOTSUP naming the function."""
    for name, (res, args) in table.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            ver = lib.erg_version().decode() if hasattr(lib, "erg_version") else "unknown"
            raise ErgonError(ENOTSUP, "libergon %s lacks %s, which this binding (for %d.%d) "
                                      "calls: install a matching libergon"
                             % ((ver, name) + API_VERSION)) from None
        f.restype = res
        f.argtypes = args
    return lib


_lib = None
_declared = []  # the tables use() declared on _lib (kept: an id() could be reused)


def load_library(path=None):
    """Load libergon: `path`, $ERGON_LIBRARY, the directory it was installed to (packages,
    `make install`), or libergon.so.0 on the loader path (_libfind). Declares SIGNATURES and
    checks the version (ENOTSUP for another major.minor). Raises LibraryMissing (an
    ErgonError) naming what was tried and what to install when there is none. Cached: a
    later call without `path` returns the same library; one with `path` replaces it."""
    global _lib
    if _lib is not None and path is None:
        return _lib
    try:
        lib = _libfind.load(path)
    except OSError as e:
        raise LibraryMissing(str(e)) from None
    declare(lib, {"erg_version": SIGNATURES["erg_version"]})
    ver = lib.erg_version().decode()
    major, minor = (int(x) for x in ver.split(".")[:2])
    if (major, minor) != API_VERSION:
        raise ErgonError(ENOTSUP, "libergon %s, this binding expects %d.%d" % ((ver,) + API_VERSION))
    declare(lib, SIGNATURES)
    _lib = lib
    _declared.clear()
    return lib


def use(table):
    """load_library(), with `table`'s functions declared on it (once per table): what a
    module with its own declarations (server_client, ...) calls before each use."""
    lib = load_library()
    if not any(t is table for t in _declared):
        declare(lib, table)
        _declared.append(table)
    return lib


def version():
    """libergon's version, "MAJOR.MINOR.PATCH"."""
    return load_library().erg_version().decode()


# --- call helpers ------------------------------------------------------------------------

def new_error():
    """Opaque, zeroed storage for one erg_error (a cleared error)."""
    return ctypes.create_string_buffer(load_library().erg_error_size())


def error_message(err):
    """The message libergon wrote into `err` (new_error() storage), "" if none."""
    msg = load_library().erg_error_message(ctypes.byref(err)) or b""
    return msg.decode(errors="replace")


def check(status, err=None, what=""):
    """Raise ErgonError for a status other than OK: the message is err's, else `what`, else
    the status's name."""
    if status != OK:
        msg = error_message(err) if err is not None else ""
        raise ErgonError(status, msg or what or STATUS_NAMES.get(status, "error"))


# C int and unsigned ranges (private: the public upper-case ints are the C constants)
_INT_MIN, _INT_MAX = -2 ** 31, 2 ** 31 - 1
_UINT_MAX = 2 ** 32 - 1


def c_int(name, value, lo=_INT_MIN, hi=_INT_MAX):
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


def c_uint(name, value):
    """c_int for a C unsigned int (flags)."""
    return c_int(name, value, 0, _UINT_MAX)


class Closes:
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
