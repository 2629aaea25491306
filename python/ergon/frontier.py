"""ergon.frontier: frontier directories from Python, written and read by libergon.

The directory `ergon plan perseus --out DIR` writes -- frontier.csv (the planner's frontier, as
Perseus writes it), plans.ergon (every plan, and the all-max fallback where the fastest planned
plan runs slower than all-max clocks), profile.csv and frontier-info.csv (the all-max baseline)
-- written by one library call (erg_frontier_save_dir), so that `ergon choose`, `ergon serve`'s
Frontier scheduler and this module read the same files:

    import ergon.frontier
    n, fallback = ergon.frontier.plan_dir("profile.csv", stages=4, microbatches=8,
                                          blocking_power_w=83.64, out="frontier")
    index, time_s, energy_j = ergon.frontier.choose("frontier", deadline_s=2.5)
"""
import ctypes
import os

from . import _lib
from ._lib import SCHED_1F1B, SCHED_FILE, c_int, check, new_error

__all__ = ["plan_dir", "choose", "FORMATS"]

#: ERG_FRONTIER_* bits (planner.h) by the names --formats takes
FORMATS = {"csv": 1, "perseus-py": 2, "py": 2, "json": 4, "zeus-py": 8, "packed": 16}

_P, _I, _D, _S, _E = (ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_char_p,
                      ctypes.c_void_p)
_Z = ctypes.c_size_t
#: the functions this module calls: {name: (restype, [argtypes])}, declared by _lib.use
SIGNATURES = {
    "erg_profile_read_csv": (_I, [_S, ctypes.POINTER(_P), _E]),
    "erg_profile_free": (None, [_P]),
    "erg_frontier_plan_dir": (_I, [_P, _I, _I, _I, _D, _D, _S, _I, ctypes.POINTER(_Z),
                                   ctypes.POINTER(ctypes.c_bool), _E]),
    "erg_frontier_dir_choose": (_I, [_S, _D, ctypes.POINTER(_Z), ctypes.POINTER(_D),
                                     ctypes.POINTER(_D), _E]),
}


def _load():
    """libergon with this module's functions declared (ergon._lib.use); a library without one
    of them is refused, naming it."""
    return _lib.use(SIGNATURES)


def _formats(formats):
    bits = 0
    for name in formats.split(","):
        name = name.strip().lower()
        if name and name not in FORMATS:
            raise ValueError("unknown frontier format %r (%s)" % (name, ", ".join(FORMATS)))
        bits |= FORMATS.get(name, 0)
    return bits


def plan_dir(profile_csv, stages, microbatches, blocking_power_w, out, unit_time_s=0.001,
             schedule=SCHED_1F1B, formats="csv,packed"):
    """`ergon plan perseus`'s frontier directory: plan the Perseus frontier of the profile CSV
    (a named schedule kind, ergon.SCHED_*), add the all-max fallback where it is needed and
    write the directory `out` (an earlier frontier's files in it are replaced). Returns (the
    planner's plans, whether the all-max fallback was added)."""
    if not (isinstance(schedule, int) and 0 <= schedule < SCHED_FILE):
        raise ValueError("schedule: a named schedule kind (ergon.SCHED_*), got %r" % (schedule,))
    bits = _formats(formats)
    lib = _load()
    err = new_error()
    prof = ctypes.c_void_p()
    check(lib.erg_profile_read_csv(os.fspath(profile_csv).encode(), ctypes.byref(prof),
                                   ctypes.byref(err)), err)
    n, fallback = ctypes.c_size_t(), ctypes.c_bool()
    try:
        check(lib.erg_frontier_plan_dir(prof, c_int("stages", stages),
                                        c_int("microbatches", microbatches), schedule,
                                        float(blocking_power_w), float(unit_time_s),
                                        os.fspath(out).encode(), bits,
                                        ctypes.byref(n), ctypes.byref(fallback),
                                        ctypes.byref(err)), err)
    finally:
        lib.erg_profile_free(prof)
    return n.value, fallback.value


def choose(frontier_dir, deadline_s):
    """`ergon choose --deadline`: the least-energy plan of a frontier directory whose time by
    the profiled values fits deadline_s (the all-max fallback included). Returns (index,
    time_s, energy_j); ErgonError ENOTFOUND when no plan fits."""
    lib = _load()
    err = new_error()
    k, t, e = ctypes.c_size_t(), ctypes.c_double(), ctypes.c_double()
    check(lib.erg_frontier_dir_choose(os.fspath(frontier_dir).encode(), float(deadline_s),
                                      ctypes.byref(k), ctypes.byref(t), ctypes.byref(e),
                                      ctypes.byref(err)), err)
    return k.value, t.value, e.value
