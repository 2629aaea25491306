"""ergon.jax: ergon's sharding plan (CFP) for a JAX function, as `jax.jit` shardings.

    import jax, ergon.jax
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    p = ergon.jax.plan(step, *example_args, mesh=mesh)
    step = jax.jit(step, in_shardings=p.in_shardings, out_shardings=p.out_shardings)
    print(p.explain())

The function is lowered by JAX itself (`jax.jit(fn, keep_unused=True).lower(*args)`, HLO
text as `compiler_ir("hlo")` gives it, so that HLO parameter i is flat argument i) and planned
in this process through libergon (include/ergon/shard.h: parse, analyze, profile, search, then
the sharding of every parameter and output read through accessors): no file, no subprocess.
`in_shardings` has the structure of the example arguments (a tuple, one entry per positional
argument), `out_shardings` that of the function's result; every leaf is a NamedSharding over
`mesh`. Any partitioner JAX compiles with takes them (Shardy, JAX's default, or GSPMD).

A value that cannot be split (a scalar, dims no mesh axis divides, nothing ergon plans reaches
it) is replicated, and explain() says why; a function ergon cannot plan at all (no dot, no
strategy divides its dims, a mesh of one device, more than two mesh axes of size > 1) gets an
all-replicated plan with `.message` saying why -- never an exception for a shape.
docs/integrations.md (JAX) and docs/shard.md (In process) describe it.
"""
import numpy as np

from . import ErgonError, _shard

__all__ = ["plan", "Plan"]


class Plan:
    """in_shardings, out_shardings: pytrees of NamedSharding for jax.jit. rows: one dict per
    parameter and output (path, spec, block, strategy, time_s, comm_s, memory_bytes, why).
    message: why the whole plan is replicated ("" when ergon planned it). mesh: the Mesh the
    shardings use. time_s, memory_bytes: the plan's modelled step time and memory per device
    (None when replicated). notes: what plan() changed about the mesh (Explicit axes made
    Auto; a 1-D mesh planned as its 2-D view)."""

    def __init__(self, in_shardings, out_shardings, rows, message, mesh, time_s=None,
                 memory_bytes=None):
        self.in_shardings, self.out_shardings = in_shardings, out_shardings
        self.rows, self.message, self.mesh = rows, message, mesh
        self.time_s, self.memory_bytes = time_s, memory_bytes
        self.notes = []

    def explain(self):
        """Readable plan: per parameter and output, its path -> PartitionSpec, the block that
        decides it (anchor, strategy) and that block's modelled cost, or why it stays
        replicated."""
        head = "ergon.jax plan on mesh %s" % dict(self.mesh.shape)
        if self.message:
            head += ": replicated: " + self.message
        else:
            head += ": modelled step %.4f ms, %.3f MB per device" % (self.time_s * 1e3,
                                                                     self.memory_bytes / 1e6)
        lines = [head] + ["  note: " + n for n in self.notes]
        ax = getattr(self, "ergon_axes", (None, None))
        if any(ax):
            lines.append("  strategy names: S0 = split over %s, S1 = over %s, S01 = over both, "
                         "R = whole" % tuple(repr(a) if a else "-" for a in ax))
        for r in self.rows:
            s = "  %-7s %-32s -> %s" % (r["kind"], r["path"], r["spec"])
            if r["block"] is not None and r["block"] >= 0:
                s += "  block %d (%s, %s): %.4f ms, %.4f ms comm, %.3f MB" % (
                    r["block"], r["anchor"], r["strategy"], r["time_s"] * 1e3,
                    r["comm_s"] * 1e3, r["memory_bytes"] / 1e6)
            if r["why"]:
                s += "  [replicated: %s]" % r["why"]
            lines.append(s)
        return "\n".join(lines)

    def __repr__(self):
        return "<ergon.jax.Plan %s, %d rows%s>" % (dict(self.mesh.shape), len(self.rows),
                                                    ", replicated" if self.message else "")


def _spec(P, axes, names):
    """PartitionSpec of one value from its per-dim ERG_SHARD_AXIS bits."""
    ent = []
    for a in axes:
        if a == _shard.AXIS0 | _shard.AXIS1:
            ent.append((names[0], names[1]))
        elif a == _shard.AXIS0:
            ent.append(names[0])
        elif a == _shard.AXIS1:
            ent.append(names[1])
        else:
            ent.append(None)
    return P(*ent)


def _mesh_view(mesh):
    """(m0, m1, axis names for ergon's axes 0 and 1, why not) of a JAX Mesh: its axes of size
    > 1 in order (one axis: ergon's 1 x n)."""
    big = [(n, s) for n, s in mesh.shape.items() if s > 1]
    if not big:
        return None, None, None, "the mesh has one device"
    if len(big) > 2:
        return None, None, None, ("ergon plans on 1-D and 2-D meshes; this mesh has %d axes of "
                                  "size > 1 (%s)" % (len(big), dict(mesh.shape)))
    if len(big) == 1:
        return 1, big[0][1], (None, big[0][0]), ""
    return big[0][1], big[1][1], (big[0][0], big[1][0]), ""


def _auto_mesh(mesh):
    """The mesh with every axis Auto, and a note when it was not: ergon's plan gives the
    arguments' and results' shardings and leaves the rest to the partitioner's propagation,
    which an Explicit axis (jax.make_mesh's default) would turn into sharding-in-types
    tracing of the whole function."""
    from jax.sharding import AxisType, Mesh
    types = tuple(getattr(mesh, "axis_types", ()) or ())
    if all(a == AxisType.Auto for a in types):
        return mesh, ""
    auto = Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,) * len(types))
    return auto, ("the shardings use the mesh with Auto axes (it had %s): the partitioner "
                  "propagates ergon's argument shardings" % ", ".join(str(a) for a in types))


def plan(fn, *example_args, mesh, method="dp", device=None, time_limit_s=0.0):
    """ergon's sharding plan of `fn` on `mesh` (a jax.sharding.Mesh) for these example
    arguments (pytrees of arrays or ShapeDtypeStructs; positional only). method: "dp" (CFP,
    default) or "ilp" (Alpa's ILP); device: a row of ergon's device table (default
    "a100-nvlink") for the cost model; time_limit_s: the ILP's limit. Returns a Plan."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    flat, in_tree = jax.tree_util.tree_flatten_with_path(example_args)
    lowered = jax.jit(fn, keep_unused=True).lower(*example_args)
    out_flat, out_tree = jax.tree_util.tree_flatten_with_path(lowered.out_info)
    in_paths = [jax.tree_util.keystr(k) for k, _ in flat]
    out_paths = ["out" + jax.tree_util.keystr(k) for k, _ in out_flat]
    in_ranks = [np.ndim(v) if not hasattr(v, "shape") else len(v.shape) for _, v in flat]
    out_ranks = [len(v.shape) for _, v in out_flat]

    def build(p_axes, o_axes, names, use_mesh, rows, message, planned=None):
        ins = [NamedSharding(use_mesh, _spec(P, a, names)) for a in p_axes]
        outs = [NamedSharding(use_mesh, _spec(P, a, names)) for a in o_axes]
        in_sh = jax.tree_util.tree_unflatten(in_tree, ins)
        out_sh = jax.tree_util.tree_unflatten(out_tree, outs)
        r = Plan(in_sh, out_sh, rows, message, use_mesh, planned.time_s if planned else None,
                 planned.memory_bytes if planned else None)
        r.notes = [n for n in (note, view_note[0]) if n]
        r.ergon_axes = names
        return r

    def replicated(message):
        rows = [dict(kind=k, path=p, spec=P(), block=None, anchor=None, strategy=None,
                     time_s=None, comm_s=None, memory_bytes=None, why=message)
                for k, paths in (("input", in_paths), ("output", out_paths)) for p in paths]
        return build([[]] * len(in_paths), [[]] * len(out_paths), (None, None), mesh, rows,
                     message)

    mesh, note = _auto_mesh(mesh)
    view_note = [""]
    m0, m1, names, why = _mesh_view(mesh)
    if why:
        return replicated(why)
    text = lowered.compiler_ir("hlo").as_hlo_text(print_large_constants=True)
    try:
        planned = _shard.plan_hlo(text, m0, m1, method=method, device=device,
                                  time_limit_s=time_limit_s,
                                  name=getattr(fn, "__name__", "fn") + ".hlo")
    except ErgonError as e:
        if e.name in ("ENOTFOUND", "EINVAL"):  # nothing to shard, nothing fits, partitioned
            return replicated("ergon found no plan: %s" % e)
        raise
    if len(planned.parameters) != len(in_paths) or len(planned.outputs) != len(out_paths):
        return replicated("the lowered module has %d parameters and %d outputs, the function "
                          "%d arguments and %d results" % (len(planned.parameters),
                                                           len(planned.outputs), len(in_paths),
                                                           len(out_paths)))
    use_mesh = mesh
    if planned.mesh != (m0, m1):
        # a 1-D mesh whose size divides no dim, planned as its 2-D view (docs/shard.md)
        a, b = planned.mesh
        base = names[1]
        names = (base + "_0", base + "_1")
        use_mesh = jax.sharding.Mesh(np.asarray(mesh.devices).reshape(a, b), names)
        view_note[0] = ("no dim divides by %d: planned on the %dx%d view of the mesh, axes %s"
                        % (m1, a, b, names))
    rows = []
    for kind, paths, ranks, values in (("input", in_paths, in_ranks, planned.parameters),
                                       ("output", out_paths, out_ranks, planned.outputs)):
        for path, rank, v in zip(paths, ranks, values):
            axes = v.axes if v.rank == rank else []
            why = v.why if v.rank == rank else ("HLO rank %d, the value's %d" % (v.rank, rank))
            rows.append(dict(kind=kind, path=path, spec=_spec(P, axes, names), block=v.block,
                             anchor=v.anchor, strategy=v.strategy, time_s=v.time_s,
                             comm_s=v.comm_s, memory_bytes=v.memory_bytes, why=why, axes=axes))
    p_axes = [r["axes"] for r in rows if r["kind"] == "input"]
    o_axes = [r["axes"] for r in rows if r["kind"] == "output"]
    return build(p_axes, o_axes, names, use_mesh, rows, "", planned)
