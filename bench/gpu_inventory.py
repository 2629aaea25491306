#!/usr/bin/env python3
"""gpu_inventory.py: a read-only inventory of the NVIDIA GPUs on this machine, for docs/runtime.md.

Lists each device's name, supported memory and SM clocks, current clocks, power, power limit and
energy counter; checks the energy counter against integrated power over a few seconds; and times
the NVML queries ergon's client and profiler make (a clock query, a supported-clock list, an
energy read, a power read). It only ever calls NVML *getters*: it changes no clock, no power limit
and no other setting, so it is safe on a shared machine (the test cli/gpu_inventory runs it on the
fake NVML and checks that no state-changing call was made).

    python3 bench/gpu_inventory.py [--library PATH] [--seconds S] [--json OUT]

The library is --library, else $ERGON_NVML_LIBRARY, else libnvidia-ml.so.1 (as ergon's own NVML
back-end). Calls a driver lacks are reported as "not provided", not as errors. Exit status: 0
inventory written, 1 no NVML or no device, 2 usage. Python 3 standard library only.
"""
import argparse
import ctypes
import json
import os
import sys
import time

NVML_SUCCESS = 0
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
UINT = ctypes.c_uint
ULL = ctypes.c_ulonglong


class Nvml:
    """The getters we use, each looked up once; a missing one raises Missing."""

    class Missing(Exception):
        pass

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.nvmlErrorString.restype = ctypes.c_char_p

    def call(self, name, *args):
        try:
            fn = getattr(self.lib, name)
        except AttributeError:
            raise Nvml.Missing(name) from None
        fn.restype = ctypes.c_int
        return fn(*args)

    def check(self, name, *args):
        r = self.call(name, *args)
        if r != NVML_SUCCESS:
            raise RuntimeError("%s: %s (NVML error %d)" % (name, self.lib.nvmlErrorString(r).decode(), r))

    def clock_list(self, name, *lead):
        count = UINT(0)
        r = self.call(name, *lead, ctypes.byref(count), None)
        if r not in (NVML_SUCCESS, NVML_ERROR_INSUFFICIENT_SIZE):
            self.check(name, *lead, ctypes.byref(count), None)
        buf = (UINT * max(count.value, 1))()
        self.check(name, *lead, ctypes.byref(count), buf)
        return sorted((buf[i] for i in range(count.value)), reverse=True)


def timed(fn, n):
    """Median wall time of n calls of fn, in microseconds."""
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
    ts.sort()
    return ts[len(ts) // 2]


def opt(fn):
    """fn() or the string 'not provided' / the error's text."""
    try:
        return fn()
    except Nvml.Missing as e:
        return "not provided (%s)" % e
    except RuntimeError as e:
        return str(e)


def inventory(nv, dev_index, seconds):
    h = ctypes.c_void_p()
    try:
        nv.check("nvmlDeviceGetHandleByIndex_v2", UINT(dev_index), ctypes.byref(h))
    except Nvml.Missing:
        nv.check("nvmlDeviceGetHandleByIndex", UINT(dev_index), ctypes.byref(h))
    d = {"index": dev_index}
    name = ctypes.create_string_buffer(96)
    nv.check("nvmlDeviceGetName", h, name, UINT(96))
    d["name"] = name.value.decode(errors="replace")

    def u(fn_name, *args):
        v = UINT(0)
        nv.check(fn_name, h, *args, ctypes.byref(v))
        return v.value

    mem = nv.clock_list("nvmlDeviceGetSupportedMemoryClocks", h)
    d["memory_clocks_mhz"] = mem
    sm = nv.clock_list("nvmlDeviceGetSupportedGraphicsClocks", h, UINT(mem[0]))
    d["sm_clocks_mhz"] = {"max": sm[0], "min": sm[-1], "count": len(sm),
                          "steps_mhz": sorted({a - b for a, b in zip(sm, sm[1:])})}
    d["current_sm_clock_mhz"] = opt(lambda: u("nvmlDeviceGetClockInfo", UINT(NVML_CLOCK_SM)))
    d["current_mem_clock_mhz"] = opt(lambda: u("nvmlDeviceGetClockInfo", UINT(NVML_CLOCK_MEM)))
    d["power_w"] = opt(lambda: u("nvmlDeviceGetPowerUsage") / 1000.0)
    d["power_limit_w"] = opt(lambda: u("nvmlDeviceGetPowerManagementLimit") / 1000.0)
    d["default_power_limit_w"] = opt(lambda: u("nvmlDeviceGetPowerManagementDefaultLimit") / 1000.0)

    def energy_mj():
        v = ULL(0)
        nv.check("nvmlDeviceGetTotalEnergyConsumption", h, ctypes.byref(v))
        return v.value

    # The energy counter against power integrated at 10 Hz over `seconds`.
    try:
        e0, t0 = energy_mj(), time.monotonic()
        integ_j, last_t, last_p = 0.0, t0, u("nvmlDeviceGetPowerUsage") / 1000.0
        while time.monotonic() - t0 < seconds:
            time.sleep(0.1)
            now, p = time.monotonic(), u("nvmlDeviceGetPowerUsage") / 1000.0
            integ_j += (now - last_t) * (p + last_p) / 2
            last_t, last_p = now, p
        counter_j = (energy_mj() - e0) / 1000.0
        d["energy_check"] = {"seconds": round(last_t - t0, 3), "counter_j": round(counter_j, 3),
                             "integrated_power_j": round(integ_j, 3),
                             "relative_difference": round((counter_j - integ_j) / integ_j, 4)
                             if integ_j > 0 else None}
    except (Nvml.Missing, RuntimeError) as e:
        d["energy_check"] = str(e)

    n = 200
    lat = {}
    for label, fn in (("clock query (nvmlDeviceGetClockInfo SM)", lambda: u("nvmlDeviceGetClockInfo", UINT(NVML_CLOCK_SM))),
                      ("supported SM clocks list", lambda: nv.clock_list("nvmlDeviceGetSupportedGraphicsClocks", h, UINT(mem[0]))),
                      ("energy counter read", energy_mj),
                      ("power read", lambda: u("nvmlDeviceGetPowerUsage"))):
        lat[label] = opt(lambda: round(timed(fn, n), 2))
    d["median_latency_us_of_%d_calls" % n] = lat
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Read-only: calls NVML getters only.")
    ap.add_argument("--library", default=os.environ.get("ERGON_NVML_LIBRARY", "libnvidia-ml.so.1"),
                    help="NVML library (default: $ERGON_NVML_LIBRARY or libnvidia-ml.so.1)")
    ap.add_argument("--seconds", type=float, default=3.0,
                    help="how long to compare the energy counter with integrated power (default 3)")
    ap.add_argument("--json", metavar="OUT", help="also write the inventory as JSON to OUT")
    a = ap.parse_args()
    if a.seconds <= 0 or a.seconds > 600:
        ap.error("--seconds must be in (0, 600], got %g" % a.seconds)
    try:
        nv = Nvml(a.library)
    except OSError as e:
        print("gpu_inventory: cannot load NVML %s: %s" % (a.library, e), file=sys.stderr)
        return 1
    try:
        try:
            nv.check("nvmlInit_v2")
        except Nvml.Missing:
            nv.check("nvmlInit")
        count = UINT(0)
        try:
            nv.check("nvmlDeviceGetCount_v2", ctypes.byref(count))
        except Nvml.Missing:
            nv.check("nvmlDeviceGetCount", ctypes.byref(count))
        if count.value == 0:
            print("gpu_inventory: NVML reports no device", file=sys.stderr)
            return 1
        out = {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
               "library": a.library}
        drv = ctypes.create_string_buffer(96)
        out["driver_version"] = opt(lambda: (nv.check("nvmlSystemGetDriverVersion", drv, UINT(96)),
                                             drv.value.decode())[1])
        out["devices"] = [inventory(nv, i, a.seconds) for i in range(count.value)]
    except (RuntimeError, Nvml.Missing) as e:
        print("gpu_inventory: %s" % e, file=sys.stderr)
        return 1
    finally:
        try:
            nv.call("nvmlShutdown")
        except Nvml.Missing:
            pass
    text = json.dumps(out, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
