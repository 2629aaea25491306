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

The package is layered: _libfind finds the library file; _lib loads it (the one loader),
declares its functions, and holds the errors and the constants of the C headers; gpu,
client, schedule and profile hold one concept each; server_client and zeus the control-plane
client; integration/ the framework adapters. This file only re-exports the public names.
"""
from ._lib import (API_VERSION, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, CLIENT_LOCK_MEMORY,
                   CLIENT_NO_ENERGY, CLIENT_NO_SIGNALS, CLIENT_NO_WATCHDOG, CLIENT_WAIT_CLOCK,
                   FORWARD, OVERLAP_F_B, SCHED_1F1B, SCHED_DUALPIPEV, SCHED_ENVPIPE, SCHED_FILE,
                   SCHED_GPIPE, SCHED_INTERLEAVED_1F1B, SCHED_INTERLEAVED_ZB, SCHED_LOOPED_BFS,
                   SCHED_MAX_STAGES, SCHED_ZBV, ErgonError, LibraryMissing, load_library, version)
from .client import Client
from .gpu import Gpu
from .profile import profile_from_logs, sim_profile
from .schedule import Schedule, clock_list, plan_schedule, rank_order, schedule_order

__all__ = ["ErgonError", "LibraryMissing", "Gpu", "Client", "FORWARD", "BACKWARD", "BACKWARD_INPUT",
           "BACKWARD_WEIGHT", "load_library",
           "version", "profile_from_logs", "sim_profile", "Schedule", "schedule_order",
           "plan_schedule", "SCHED_1F1B", "SCHED_GPIPE", "SCHED_ENVPIPE",
           "SCHED_INTERLEAVED_1F1B", "SCHED_LOOPED_BFS", "SCHED_INTERLEAVED_ZB", "SCHED_ZBV",
           "SCHED_DUALPIPEV", "OVERLAP_F_B", "rank_order", "clock_list"]

# The public classes and functions keep the names they had before the split (ergon.Gpu,
# ergon.ErgonError in tracebacks and reprs), whichever module defines them.
for _name in ("ErgonError", "LibraryMissing", "Gpu", "Client", "Schedule", "load_library",
              "version", "profile_from_logs", "sim_profile", "schedule_order", "plan_schedule",
              "rank_order", "clock_list"):
    globals()[_name].__module__ = __name__
del _name
