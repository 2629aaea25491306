"""ergon.Schedule and the orders it gives (include/ergon/pipeline.h, plan.h): schedule_order,
rank_order, plan_schedule."""
import ctypes
import os

from . import _lib
from ._lib import INSTR_NUM_FIELDS, OVERLAP_F_B, SCHED_MAX_STAGES, ErgonError, c_int, check, new_error

__all__ = ["Schedule", "schedule_order", "rank_order", "plan_schedule", "clock_list"]


class _Sched:
    """A heap erg_schedule built from a Schedule (freed with the object)."""

    def __init__(self, schedule):
        lib = self._lib = _lib.load_library()
        self.ptr = lib.erg_schedule_new(schedule.kind)
        if not self.ptr:
            raise MemoryError("erg_schedule_new")
        lib.erg_schedule_set_max_inflight(self.ptr, schedule.max_inflight)
        lib.erg_schedule_set_chunks(self.ptr, schedule.chunks)
        err = new_error()
        for i, r in enumerate(schedule.extra_warmup):
            check(lib.erg_schedule_set_extra_warmup(self.ptr, i, r, ctypes.byref(err)), err)

    def __del__(self):
        if getattr(self, "ptr", None):
            self._lib.erg_schedule_free(self.ptr)
            self.ptr = None


class Schedule:
    """A pipeline schedule (erg_schedule): kind "1f1b", "gpipe", "ours"/"envpipe",
    "interleaved-1f1b", "looped-bfs", "interleaved-zb", "zbv" or "dualpipev" (or PyTorch's
    class names), EnvPipe's extra warm-up forwards r_s per stage and its in-flight cap, and
    the chunks per rank V (0 = the kind's default: 1 for gpipe/1f1b/ours, else 2)."""

    def __init__(self, kind="1f1b", extra_warmup=(), max_inflight=0, chunks=0):
        lib = _lib.load_library()
        if isinstance(kind, str):
            k = ctypes.c_int()
            err = new_error()
            check(lib.erg_schedule_parse(kind.encode(), ctypes.byref(k), ctypes.byref(err)), err)
            kind = k.value
        if len(extra_warmup) > SCHED_MAX_STAGES:
            raise ErgonError(_lib.EINVAL, "at most %d extra warm-up values" % SCHED_MAX_STAGES)
        self.kind = c_int("kind", kind)
        self.extra_warmup = [c_int("extra_warmup[%d]" % i, r) for i, r in enumerate(extra_warmup)]
        self.max_inflight = c_int("max_inflight", max_inflight)
        self.chunks = c_int("chunks", chunks, 0, 1 << 16)

    @property
    def num_chunks(self):
        """V: the chunks per rank this schedule uses (its default when 0)."""
        return _lib.load_library().erg_schedule_chunks(_Sched(self).ptr)

    @property
    def name(self):
        return _lib.load_library().erg_schedule_name(self.kind).decode()

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


def clock_list(spec):
    """Clocks in MHz from 'HI:LO:STEP' (HI, HI-STEP, ... down to LO) or a comma list; '' gives
    []. The examples' --sweep and --power-states (an argparse type: ValueError is its usage
    error)."""
    if ":" in spec:
        hi, lo, step = (int(x) for x in spec.split(":"))
        if step <= 0 or lo > hi:
            raise ValueError("clocks %r: HI:LO:STEP needs HI >= LO and STEP > 0" % spec)
        return list(range(hi, lo - 1, -step))
    return [int(x) for x in spec.split(",") if x]


def rank_order(schedule, num_ranks, num_microbatches, rank):
    """erg_order_new for every schedule (multi-chunk and zero-bubble ones included): rank
    `rank`'s instructions in execution order, and the placement. Returns (instrs,
    stage_rank): instrs is a list of tuples (kind, stage, microbatch, kind2, stage2,
    microbatch2), kind FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT or OVERLAP_F_B
    (then (stage, microbatch) is its forward part and (kind2, stage2, microbatch2) its
    backward part; otherwise those three are -1); stage is the pipeline stage (0..P*V-1);
    stage_rank[s] is the rank that holds pipeline stage s. The same refusals as `ergon
    schedule` (ErgonError)."""
    lib = _lib.load_library()
    if not isinstance(schedule, Schedule):
        schedule = Schedule(schedule)
    num_ranks, rank = c_int("num_ranks", num_ranks), c_int("rank", rank)
    num_microbatches = c_int("num_microbatches", num_microbatches)
    st = _Sched(schedule)
    o = ctypes.c_void_p()
    err = new_error()
    check(lib.erg_order_new(st.ptr, num_ranks, num_microbatches, ctypes.byref(o),
                            ctypes.byref(err)), err)
    try:
        if rank < 0 or rank >= num_ranks:
            raise ErgonError(_lib.EINVAL, "rank %d is out of [0, %d]" % (rank, num_ranks - 1))
        p = ctypes.c_void_p()
        n = lib.erg_order_rank(o, rank, ctypes.byref(p))
        out = []
        f = (ctypes.c_int * INSTR_NUM_FIELDS)()
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
    lib = _lib.load_library()
    if not isinstance(schedule, Schedule):
        schedule = Schedule(schedule)
    num_stages, stage = c_int("num_stages", num_stages), c_int("stage", stage)
    num_microbatches = c_int("num_microbatches", num_microbatches)
    if num_microbatches < 1 or num_microbatches > (1 << 24):
        raise ErgonError(_lib.EINVAL, "number of microbatches out of range: %d" % num_microbatches)
    st = _Sched(schedule)
    n = 2 * num_microbatches
    out = lib.erg_instr_array_new(n)
    if not out:
        raise MemoryError("erg_instr_array_new(%d)" % n)
    try:
        err = new_error()
        check(lib.erg_schedule_stage_order(st.ptr, num_stages, num_microbatches, stage, out,
                                           ctypes.byref(err)), err)
        f = (ctypes.c_int * INSTR_NUM_FIELDS)()
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
    lib = _lib.load_library()
    p = ctypes.c_void_p()
    err = new_error()
    check(lib.erg_plan_read(os.fspath(path).encode(), None, ctypes.byref(p), ctypes.byref(err)),
          err)
    try:
        st = lib.erg_plan_schedule_ref(p)
        S = lib.erg_plan_num_stages(p)
        r = [lib.erg_schedule_get_extra_warmup(st, i)
             for i in range(min(max(S, 0), SCHED_MAX_STAGES))]
        sched = Schedule(lib.erg_schedule_get_kind(st), r, lib.erg_schedule_get_max_inflight(st),
                         lib.erg_schedule_get_chunks(st))
        return sched, S, lib.erg_plan_num_microbatches(p)
    finally:
        lib.erg_plan_free(p)
