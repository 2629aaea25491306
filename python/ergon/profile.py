"""Stage profiles to CSV (include/ergon/profile.h, client.h, gpu.h): `ergon profile logs`
and `ergon profile sim` as functions."""
import ctypes
import os

from . import _lib
from ._lib import c_int, check, new_error

__all__ = ["profile_from_logs", "sim_profile"]


def profile_from_logs(log_dir, out_csv, num_stages=0):
    """`ergon profile logs`: client logs -> stage profile CSV; returns the stages written."""
    lib = _lib.load_library()
    p = ctypes.c_void_p()
    err = new_error()
    check(lib.erg_profile_from_logs(os.fspath(log_dir).encode(), c_int("num_stages", num_stages),
                                    ctypes.byref(p), ctypes.byref(err)), err)
    try:
        check(lib.erg_profile_write_csv(p, os.fspath(out_csv).encode(), ctypes.byref(err)), err)
        return lib.erg_profile_num_stages(p)
    finally:
        lib.erg_profile_free(p)


def sim_profile(gpu, model, stages, out_csv, microbatch_size=0, min_freq_mhz=0):
    """`ergon profile sim`: the simulated GPU's profile to a CSV."""
    lib = _lib.load_library()
    p = ctypes.c_void_p()
    err = new_error()
    check(lib.erg_sim_profile(gpu.encode(), model.encode(), c_int("stages", stages),
                              c_int("microbatch_size", microbatch_size),
                              c_int("min_freq_mhz", min_freq_mhz), ctypes.byref(p),
                              ctypes.byref(err)), err)
    try:
        check(lib.erg_profile_write_csv(p, os.fspath(out_csv).encode(), ctypes.byref(err)), err)
    finally:
        lib.erg_profile_free(p)
