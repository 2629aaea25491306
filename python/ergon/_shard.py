"""ctypes declarations of the sharding planner (include/ergon/shard.h) and one planning pass
in process: HLO text in memory -> analysis on a mesh -> costs -> search -> per parameter and
output the mesh axes of every dim, the owning block, its strategy and modelled cost, or why
the value stays replicated. No struct is mirrored: every field is read through an accessor.
Framework front ends (ergon.jax) build on `plan_hlo`."""
import ctypes

from . import _lib as _core
from ._lib import ENOTFOUND, EINVAL, ErgonError, check as _check, new_error as _Error

PARAMETER, OUTPUT = 0, 1  # erg_shard_value_kind
AXIS0, AXIS1 = 1, 2  # ERG_SHARD_AXIS0, ERG_SHARD_AXIS1
METHODS = {"dp": 0, "ilp": 1}  # erg_shard_method


def _table():
    """The shard functions this module calls: {name: (restype, [argtypes])}."""
    P, I, D, Z, E, S = (ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_size_t,
                        ctypes.c_void_p, ctypes.c_char_p)
    PP, DP = ctypes.POINTER(P), ctypes.POINTER(D)
    return {
        "erg_hlo_parse": (I, [S, Z, S, PP, E]),
        "erg_hlo_free": (None, [P]),
        "erg_shard_analyze": (I, [P, I, I, PP, E]),
        "erg_shard_free": (None, [P]),
        "erg_shard_profile_device": (I, [P, S, E]),
        "erg_shard_search": (I, [P, I, D, PP, E]),
        "erg_shard_plan_free": (None, [P]),
        "erg_shard_plan_time_s": (D, [P]),
        "erg_shard_plan_memory_bytes": (D, [P]),
        "erg_shard_plan_strategy": (Z, [P, Z]),
        "erg_shard_num_blocks": (Z, [P]),
        "erg_shard_block_anchor": (S, [P, Z]),
        "erg_shard_strategy_name": (S, [P, Z, Z]),
        "erg_shard_block_cost": (I, [P, Z, Z, DP, DP, DP, E]),
        "erg_shard_mesh": (None, [P, ctypes.POINTER(I), ctypes.POINTER(I)]),
        "erg_shard_num_values": (Z, [P, I]),
        "erg_shard_value_name": (S, [P, I, Z]),
        "erg_shard_value_rank": (I, [P, I, Z]),
        "erg_shard_value_block": (ctypes.c_long, [P, I, Z]),
        "erg_shard_value_axes": (I, [P, P, I, Z, ctypes.POINTER(ctypes.c_uint), Z, S, Z, E]),
    }


_TABLE = _table()


def _lib():
    """libergon with the shard functions declared (once; ergon._lib.use)."""
    return _core.use(_TABLE)


class Value:
    """One parameter or output: .name (HLO), .rank, .axes (per dim: 0, AXIS0, AXIS1 or both
    bits), .block (position or -1), .strategy (the block's strategy name or None),
    .time_s / .comm_s / .memory_bytes (the block's modelled cost under that strategy, or None),
    .why ("" when split, else why it stays replicated)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        return "Value(%s)" % ", ".join("%s=%r" % kv for kv in sorted(self.__dict__.items()))


class Planned:
    """The outcome of plan_hlo: .mesh (the mesh planned for, (m0, m1)), .parameters and
    .outputs (lists of Value), .time_s and .memory_bytes of the plan."""

    def __init__(self, mesh, parameters, outputs, time_s, memory_bytes):
        self.mesh, self.parameters, self.outputs = mesh, parameters, outputs
        self.time_s, self.memory_bytes = time_s, memory_bytes


def _values(lib, s, p, kind, blocks):
    out = []
    for i in range(lib.erg_shard_num_values(s, kind)):
        rank = lib.erg_shard_value_rank(s, kind, i)
        n = max(rank, 0)
        axes = (ctypes.c_uint * max(n, 1))()
        why = ctypes.create_string_buffer(512)
        err = _Error()
        _check(lib.erg_shard_value_axes(s, p, kind, i, axes, n, why, len(why),
                                        ctypes.byref(err)), err)
        b = lib.erg_shard_value_block(s, kind, i)
        name = lib.erg_shard_value_name(s, kind, i)
        info = blocks[b] if b >= 0 else {}
        out.append(Value(name=name.decode() if name else None, rank=rank,
                         axes=[axes[d] for d in range(n)], block=b,
                         anchor=info.get("anchor"), strategy=info.get("strategy"),
                         time_s=info.get("time_s"), comm_s=info.get("comm_s"),
                         memory_bytes=info.get("memory_bytes"),
                         why=why.value.decode(errors="replace")))
    return out


def plan_hlo(text, mesh0, mesh1, method="dp", device=None, time_limit_s=0.0, name="module.hlo"):
    """Plan HLO text (str) for a mesh0 x mesh1 mesh, all in process. Returns a Planned.
    Raises ErgonError as libergon reports it (ENOTFOUND: nothing can be sharded or nothing
    fits the memory; EINVAL: an already partitioned module, a bad mesh; EPARSE)."""
    if method not in METHODS:
        raise ValueError("method must be one of %s, got %r" % (", ".join(METHODS), method))
    lib = _lib()
    data = text.encode() if isinstance(text, str) else bytes(text)
    m, s, p = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    err = _Error()
    try:
        _check(lib.erg_hlo_parse(data, len(data), name.encode(), ctypes.byref(m),
                                 ctypes.byref(err)), err)
        _check(lib.erg_shard_analyze(m, int(mesh0), int(mesh1), ctypes.byref(s),
                                     ctypes.byref(err)), err)
        _check(lib.erg_shard_profile_device(s, device.encode() if device else None,
                                            ctypes.byref(err)), err)
        _check(lib.erg_shard_search(s, METHODS[method], float(time_limit_s), ctypes.byref(p),
                                    ctypes.byref(err)), err)
        blocks = []
        for b in range(lib.erg_shard_num_blocks(s)):
            k = lib.erg_shard_plan_strategy(p, b)
            t, c, mem = ctypes.c_double(), ctypes.c_double(), ctypes.c_double()
            _check(lib.erg_shard_block_cost(s, b, k, ctypes.byref(t), ctypes.byref(c),
                                            ctypes.byref(mem), ctypes.byref(err)), err)
            blocks.append(dict(anchor=lib.erg_shard_block_anchor(s, b).decode(),
                               strategy=lib.erg_shard_strategy_name(s, b, k).decode(),
                               time_s=t.value, comm_s=c.value, memory_bytes=mem.value))
        a, b = ctypes.c_int(), ctypes.c_int()
        lib.erg_shard_mesh(s, ctypes.byref(a), ctypes.byref(b))
        return Planned((a.value, b.value), _values(lib, s, p, PARAMETER, blocks),
                       _values(lib, s, p, OUTPUT, blocks), lib.erg_shard_plan_time_s(p),
                       lib.erg_shard_plan_memory_bytes(p))
    finally:
        lib.erg_shard_plan_free(p)
        lib.erg_shard_free(s)
        lib.erg_hlo_free(m)
