#!/usr/bin/env python3
"""shard_xla_bench.py: ergon's plans against baselines, and modelled against measured, on XLA.

Both parts compile with XLA's SPMD partitioner on the host's CPU devices (shard_xla.py) and
time the partitioned training step (median of --reps runs after one warm-up).

  baselines  per model on one mesh (default 1x8): ergon's CFP DP plan, ergon's block ILP
             (Alpa-style, GLPK), data parallel only and Megatron-style tensor parallelism
             (both written as shardings of the module's parameters and outputs only; XLA's
             sharding propagation decides the rest), and XLA's own automatic sharding
             (use_auto_spmd_partitioning). Step time, planning time, memory per device.
  rank       per model and unique segment: ergon's plan and its variants that change one
             block of the segment (in every repeat of it) to another strategy
             (`ergon shard search --strategies`); modelled time against measured step time
             (minimum of the interleaved rounds),
             Spearman rank correlation per segment, and whether the measured-fastest
             variant differs from ergon's choice.

  python bench/shard_xla_bench.py --ergon build/ergon baselines [--models gpt,moe] [--mesh 1x8]
  python bench/shard_xla_bench.py --ergon build/ergon rank [--models gpt,moe] [--mesh 1x8]
         [--max-variants 8]
  python bench/shard_xla_bench.py --ergon build/ergon baselines --from-json 1x4.json,2x2.json
         (rows written by --json: one summary row per model and mesh)
Measured costs per segment combination, fed back into the search: tools/shard_measure.py.
Prints Markdown tables (docs/shard.md). CPU timings: see docs/shard.md for what does not
carry over to GPUs.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import shard_xla  # noqa: E402  (sets XLA_FLAGS before jax is imported)
import shard_models  # noqa: E402
import shard_measure  # noqa: E402

import numpy as np  # noqa: E402


def time_steps(cands, args, reps):
    """Step times of several compiled executables [(ex, devices)] on the same arguments, in
    interleaved rounds (shard_measure.time_executables); per candidate (median, minimum)."""
    return [(med, mn) for mn, med in
            shard_measure.time_executables([(ex, d, args) for ex, d in cands], reps)]


memory_per_device = shard_measure.memory_per_device


# ---------------------------------------------------------------- baselines by hand
COLUMN = ("wq", "wk", "wv", "w1", "w_gate", "w_up", "bq", "b1", "lm_head")
ROW = ("wo", "w2", "w_down")


def _tiled(rank, dim, a, b, axis):
    """HloSharding text: dim split over mesh axis `axis` of an a x b mesh (ids i*b+j), or
    over all devices (axis None); other axes replicated."""
    n = a * b
    tiles = [1] * rank
    if axis is None:
        tiles[dim] = n
        return "{devices=[%s]%s}" % (",".join(map(str, tiles)), ",".join(map(str, range(n))))
    size, other = (a, b) if axis == 0 else (b, a)
    if size == 1:
        return "{replicated}"
    tiles[dim] = size
    if other == 1:
        return "{devices=[%s]%s}" % (",".join(map(str, tiles)), ",".join(map(str, range(n))))
    order = ([i * b + j for i in range(a) for j in range(b)] if axis == 0
             else [i * b + j for j in range(b) for i in range(a)])
    return "{devices=[%s,%d]%s last_tile_dim_replicate}" % (
        ",".join(map(str, tiles)), other, ",".join(map(str, order)))


def baseline_shardings(kind, model, names, args, a, b):
    """Per parameter: 'data' splits tokens and targets over every device and replicates the
    rest; 'megatron' splits column weights (Q, K, V, FFN in, their biases, the LM head) on
    their output dim and row weights (attention out, FFN out) on their input dim over the
    mesh's second axis, experts' FFNs likewise on their hidden dim, the embedding over the
    vocabulary, and on a 2-D mesh splits the batch over the first axis."""
    out = []
    for name, x in zip(names, args):
        base = name[2:] if name[:2] in ("m_", "v_") else name
        short = re.sub(r"^l\d+_", "", base)
        r = x.ndim
        s = "{replicated}"
        if name in ("tokens", "targets"):
            if kind == "data":
                s = _tiled(r, 0, a, b, None)
            elif a > 1:
                s = _tiled(r, 0, a, b, 0)
        elif kind == "megatron":
            if short in COLUMN:
                s = _tiled(r, r - 1, a, b, 1)
            elif short in ROW:
                s = _tiled(r, 0, a, b, 1)
            elif short == "e_w1":
                s = _tiled(r, 2, a, b, 1)
            elif short == "e_w2":
                s = _tiled(r, 1, a, b, 1)
            elif short == "wte":
                s = _tiled(r, 0, a, b, 1)
        out.append(s)
    return out


def annotate(text, shardings, ndev):
    """The module with `shardings[i]` on ENTRY parameter i, the ROOT tuple's outputs sharded
    like the parameters they update (loss replicated), and num_partitions."""
    head, rest = text.split("\n", 1)
    head = re.sub(r"^HloModule (\S+?),?( |$)", lambda m: f"HloModule {m.group(1)}, "
                  f"num_partitions={ndev}," + (m.group(2) if m.group(2) else ""), head, count=1)
    head = head.rstrip(",")
    e = rest.index("\nENTRY")
    entry, after = rest[e:], ""
    end = entry.index("\n}")
    entry, after = entry[:end], entry[end:]

    def param(m):
        return f"{m.group(0)}, sharding={shardings[int(m.group(1))]}"
    entry = re.sub(r"parameter\((\d+)\)", param, entry)
    nout = len(shardings) - 2  # params, m, v (tokens and targets are not returned)
    root = "{{replicated}, " + ", ".join(shardings[:nout]) + "}"
    entry = re.sub(r"(\n\s*ROOT [^\n]*)", lambda m: m.group(1) + f", sharding={root}", entry,
                   count=1)
    return head + "\n" + rest[:e] + entry + after


def compile_auto(text, a, b):
    """XLA's automatic sharding (use_auto_spmd_partitioning) on an unannotated module."""
    from jax._src import xla_bridge
    from jaxlib import _hlo, _jax
    n = a * b
    text = re.sub(r"^HloModule (\S+?),", lambda m: f"HloModule {m.group(1)}, num_partitions={n},",
                  text, count=1)
    module = _hlo.hlo_module_from_text(text)
    stablehlo = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    backend = xla_bridge.get_backend("cpu")
    devices = backend.devices()[:n]
    o = _jax.CompileOptions()
    o.num_replicas, o.num_partitions = 1, n
    bo = o.executable_build_options
    bo.use_spmd_partitioning = True
    bo.use_shardy_partitioner = False
    bo.use_auto_spmd_partitioning = True
    bo.auto_spmd_partitioning_mesh_shape = [a, b]
    bo.auto_spmd_partitioning_mesh_ids = list(range(n))
    o.device_assignment = _jax.DeviceAssignment.create(np.arange(n).reshape(1, n))
    return backend.compile_and_load(stablehlo, executable_devices=_jax.DeviceList(
        tuple(devices)), compile_options=o), devices


def calibrate(a, b, path, log):
    """Measure the CPU devices as ergon's device table describes a GPU: sustained matmul
    FLOP/s and copy bandwidth per device while all of them run, and an all-reduce's latency
    and bandwidth over the mesh's devices. Writes one row, `cpu-xla`, to path (CSV)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as Ps
    n = a * b
    mesh = Mesh(np.array(jax.devices()[:n]), ("d",))
    shard = NamedSharding(mesh, Ps("d"))

    def best(f, *xs, reps=7):
        jax.block_until_ready(f(*xs))
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            jax.block_until_ready(f(*xs))
            ts.append(time.perf_counter() - t0)
        return min(ts)
    m = 256
    x = jax.device_put(np.ones((n, m, m), np.float32), shard)
    mm = jax.jit(lambda x: jnp.einsum("bij,bjk->bik", x, x), out_shardings=shard)
    flops = best(mm, x)
    flops = 2 * m ** 3 / flops  # per device, all devices busy
    y = jax.device_put(np.ones((n, 1 << 20), np.float32), shard)
    cp = jax.jit(lambda y: y * 2.0, out_shardings=shard)
    bw = 2 * 4 * (1 << 20) / best(cp, y)
    ar = {}
    for size in (256, 1 << 20):
        z = jax.device_put(np.ones((n, size), np.float32), shard)
        f = jax.jit(lambda z: jnp.broadcast_to(jnp.sum(z, 0), z.shape),
                    out_shardings=shard)  # an all-reduce of `size` floats per device
        ar[size] = best(f, z)
    alpha = ar[256]
    moved = 2 * (n - 1) / n * 4 * (1 << 20)
    link = moved / max(ar[1 << 20] - alpha, 1e-9)
    row = (f"cpu-xla,{flops / 1e12:.6f},1.0,{bw / 1e9:.3f},1,{alpha * 1e6:.1f},"
           f"{link / 1e9:.3f},{alpha * 1e6:.1f},{link / 1e9:.3f}")
    with open(path, "w") as fh:
        fh.write("name,peak_tflops,efficiency,mem_bw_gbs,mem_gb,alpha0_us,bw0_gbs,alpha1_us,"
                 "bw1_gbs\n" + row + "\n")
    log(f"calibrated {n} CPU devices: {row}")
    return path


def baselines(ergon, models, mesh, reps, workdir, log):
    import jax
    a, b = (int(x) for x in mesh.split("x"))
    cpu_table = calibrate(a, b, os.path.join(workdir, "cpu_devices.csv"), log)
    rows = []
    for model in models:
        text, args, names, step = shard_models.build(model)
        ref = [np.asarray(x) for x in jax.block_until_ready(step(*args))]
        shapes = [r.shape for r in ref]
        hlo = os.path.join(workdir, model + ".hlo")
        with open(hlo, "w") as f:
            f.write(text)
        cands = []
        ann, plan = shard_xla.ergon_plan(ergon, hlo, mesh, workdir, "dp",
                                         ["--devices", cpu_table, "--device", "cpu-xla"], ".cpu")
        cands.append(("ergon CFP DP, CPU-calibrated costs", ann, plan["wall_s"], plan))
        for method in ("dp", "ilp"):
            ann, plan = shard_xla.ergon_plan(ergon, hlo, mesh, workdir, method)
            cands.append((f"ergon {'CFP DP' if method == 'dp' else 'block ILP (Alpa-style)'}",
                          ann, plan["wall_s"], plan))
        for kind in ("data", "megatron"):
            cands.append(({"data": "data parallel", "megatron": "Megatron-style"}[kind],
                          annotate(text, baseline_shardings(kind, model, names, args, a, b),
                                   a * b), 0.0, None))
        cands.append(("XLA auto-sharding", None, None, None))
        for label, ann, plan_s, plan in cands:
            row = dict(model=model, mesh=mesh, plan=label)
            try:
                t0 = time.perf_counter()
                if ann is None:
                    ex, devs = compile_auto(text, a, b)
                else:
                    ex, devs = shard_xla.compile_partitioned(ann, a * b)
                row["compile_s"] = time.perf_counter() - t0
                outs = shard_xla.run_partitioned(ex, devs, args, shapes)
                (row["max_abs"], _), bad = shard_xla.compare(outs, ref, ["out"] * len(ref))
                row["matches"] = bad is None
                row["_ex"] = (ex, devs)
                row["mem_bytes"] = memory_per_device(ex)
                row["plan_s"] = plan_s if ann is not None else row["compile_s"]
                row["collectives"] = shard_xla.count_collectives(
                    ex.hlo_modules()[0].to_string(), a * b)
                row["modelled_s"] = plan["time_s"] if plan else None
                sh = ex.get_parameter_shardings()
                row["all_replicated"] = all("devices" not in str(x) for x in (sh or []))
            except Exception as e:  # report, keep going: a baseline XLA refuses is a finding
                row["error"] = str(e)[:300]
            rows.append(row)
        timed = [r for r in rows if r["model"] == model and "_ex" in r]
        for r, (med, mn) in zip(timed, time_steps([r.pop("_ex") for r in timed], args, reps)):
            r["step_s"], r["step_min_s"] = med, mn
        for r in rows:
            if r["model"] == model:
                log(json.dumps({k: v for k, v in r.items() if k != "collectives"}))
    return rows


def baselines_table(rows):
    out = ["| model | plan | step time (ms): min (median) | min vs ergon DP | planning (s) | memory/device (MB) "
           "| collectives AR/AG/RS/A2A/CP | equals 1 device |", "|---|---|---|---|---|---|---|---|"]
    ref = {r["model"]: r.get("step_min_s") for r in rows if r["plan"] == "ergon CFP DP"}
    for r in rows:
        if "error" in r:
            out.append(f"| {r['model']} | {r['plan']} | error: {r['error'][:80]} | | | | | |")
            continue
        c = r["collectives"]
        ops = "/".join(str(c[k]["ops"]) for k in shard_xla.COLLECTIVES)
        plan = "n/a (by hand)" if r["plan"] in ("data parallel", "Megatron-style") else \
            f"{r['plan_s']:.3f}"
        if r["plan"] == "XLA auto-sharding":
            plan = f"{r['plan_s']:.1f} (compile)"
        note = " (all replicated)" if r.get("all_replicated") else ""
        rel = r["step_min_s"] / ref[r["model"]] if ref.get(r["model"]) else float("nan")
        out.append(f"| {r['model']} | {r['plan']}{note} | {r['step_min_s'] * 1e3:.2f} "
                   f"({r['step_s'] * 1e3:.2f}) | {rel:.2f} | "
                   f"{plan} | {r['mem_bytes'] / 1e6:.2f} | {ops} | "
                   f"{'yes' if r['matches'] else 'NO'} |")
    return "\n".join(out)


PLANS = ["ergon CFP DP", "ergon CFP DP, CPU-calibrated costs", "ergon block ILP (Alpa-style)",
         "data parallel", "Megatron-style", "XLA auto-sharding"]


def baselines_summary(rows):
    """Markdown, one row per model x mesh: each plan's minimum step time (ms), its ratio to
    ergon's DP plan, and memory per device (MB); rows from several --json files."""
    short = ["ergon DP", "ergon DP, CPU table", "ergon ILP", "data parallel", "Megatron",
             "XLA auto"]
    out = ["| model | mesh | " + " | ".join(f"{x}: ms (x DP)" for x in short) +
           " | memory MB/device: " + " / ".join(short) + " | all equal 1 device |",
           "|---|---|" + "---|" * len(short) + "---|---|"]
    keys = []
    for r in rows:
        if (r["model"], r["mesh"]) not in keys:
            keys.append((r["model"], r["mesh"]))
    for model, mesh in keys:
        by = {r["plan"]: r for r in rows if r["model"] == model and r["mesh"] == mesh}
        ref = by.get("ergon CFP DP", {}).get("step_min_s")
        cells, mem, ok = [], [], True
        for p in PLANS:
            r = by.get(p)
            if not r or "error" in r:
                cells.append("error" if r else "n/a")
                mem.append("-")
                continue
            ok = ok and r["matches"]
            cells.append(f"{r['step_min_s'] * 1e3:.2f} ({r['step_min_s'] / ref:.2f})"
                         if ref else f"{r['step_min_s'] * 1e3:.2f}")
            mem.append(f"{r['mem_bytes'] / 1e6:.2f}")
        out.append(f"| {model} | {mesh} | " + " | ".join(cells) + " | " + " / ".join(mem) +
                   f" | {'yes' if ok else 'NO'} |")
    return "\n".join(out)


# ---------------------------------------------------------------- modelled vs measured
spearman = shard_measure.spearman


def ergon_given(ergon, hlo, mesh, strategies, stem, extra=()):
    cmd = [ergon, "shard", "search", "--hlo", hlo, "--mesh", mesh, "--strategies",
           ",".join(map(str, strategies)), "--out-hlo", stem + ".hlo", "--out-json",
           stem + ".json", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    with open(stem + ".hlo") as f, open(stem + ".json") as g:
        return f.read(), json.load(g)


def rank(ergon, models, mesh, reps, max_variants, workdir, log):
    import jax
    a, b = (int(x) for x in mesh.split("x"))
    cpu = ["--devices", calibrate(a, b, os.path.join(workdir, "cpu_devices.csv"), log),
           "--device", "cpu-xla"]
    rows = []
    for model in models:
        text, args, names, step = shard_models.build(model)
        ref = [np.asarray(x) for x in jax.block_until_ready(step(*args))]
        shapes = [r.shape for r in ref]
        hlo = os.path.join(workdir, model + ".hlo")
        with open(hlo, "w") as f:
            f.write(text)
        _, plan = shard_xla.ergon_plan(ergon, hlo, mesh, workdir)
        k0 = [blk["strategy"] for blk in plan["blocks"]]
        K = [blk["num_strategies"] for blk in plan["blocks"]]
        segs = plan["segments"]
        uniques = sorted({s["unique"] for s in segs})
        for u in uniques:
            first = next(s for s in segs if s["unique"] == u)
            occ = [s for s in segs if s["unique"] == u]
            variants = [("plan", list(k0))]
            for p in range(first["num_blocks"]):
                for k in range(K[first["first_block"] + p]):
                    if k == k0[first["first_block"] + p] or len(variants) > max_variants:
                        continue
                    v = list(k0)
                    for s in occ:
                        v[s["first_block"] + p] = k
                    variants.append((f"PB{first['first_block'] + p}={k}", v))
            model_t, cpu_t, labels, exs = [], [], [], []
            for label, v in variants:
                stem = os.path.join(workdir, f"{model}.{mesh}.u{u}.{label.replace('=', '_')}")
                ann, pj = ergon_given(ergon, hlo, mesh, v, stem)
                _, pc = ergon_given(ergon, hlo, mesh, v, stem + ".cpu", cpu)
                try:
                    ex, devs = shard_xla.compile_partitioned(ann, a * b)
                    outs = shard_xla.run_partitioned(ex, devs, args, shapes)
                    _, bad = shard_xla.compare(outs, ref, ["out"] * len(ref))
                    if bad:
                        raise AssertionError(bad)
                except Exception as e:
                    log(f"{model} u{u} {label}: {str(e)[:200]}")
                    continue
                model_t.append(pj["time_s"])
                cpu_t.append(pc["time_s"])
                labels.append(label)
                exs.append((ex, devs))
            timed = time_steps(exs, args, reps)
            meas_t = [mn for _, mn in timed]  # minimum of the rounds: the least disturbed run
            meas_med = [med for med, _ in timed]
            for label, mt, ct, t in zip(labels, model_t, cpu_t, meas_t):
                log(f"{model} {mesh} unique {u} {label}: modelled {mt * 1e3:.4f} ms (A100 "
                    f"table), {ct * 1e3:.3f} ms (CPU-calibrated), measured {t * 1e3:.3f} ms")
            best = labels[int(np.argmin(meas_t))] if meas_t else None
            rows.append(dict(model=model, mesh=mesh, unique=u, variants=len(labels),
                             rho=spearman(model_t, meas_t), rho_cpu=spearman(cpu_t, meas_t),
                             best_measured=best, cpu_modelled=cpu_t, measured_median=meas_med,
                             plan_rank=(sorted(meas_t).index(meas_t[0]) + 1) if meas_t else None,
                             labels=labels, modelled=model_t, measured=meas_t))
    return rows


def rank_table(rows):
    out = ["| model | mesh | unique segment | variants | Spearman ρ, A100 table | "
           "Spearman ρ, CPU-calibrated table | ergon's plan: measured rank | measured fastest |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['model']} | {r['mesh']} | {r['unique']} | {r['variants']} | "
                   f"{r['rho']:.2f} | {r['rho_cpu']:.2f} | {r['plan_rank']} of {r['variants']} | "
                   f"{r['best_measured']} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ergon", required=True)
    ap.add_argument("what", choices=["baselines", "rank"])
    ap.add_argument("--models", default="gpt,moe")
    ap.add_argument("--mesh", default="1x8")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--max-variants", type=int, default=8)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--keep", help="keep the modules in this directory")
    ap.add_argument("--from-json", help="print the table of rows written earlier by --json "
                                        "(baselines: several files, comma-separated, give the "
                                        "one-row-per-model-and-mesh summary)")
    a = ap.parse_args(argv)
    if a.from_json:
        rows = []
        for path in a.from_json.split(","):
            with open(path) as f:
                rows += json.load(f)
        if a.what == "baselines" and "," in a.from_json:
            print(baselines_summary(rows))
        else:
            print(baselines_table(rows) if a.what == "baselines" else rank_table(rows))
        return 0
    workdir = a.keep or tempfile.mkdtemp(prefix="ergon-shard-bench-")
    os.makedirs(workdir, exist_ok=True)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    models = a.models.split(",")
    if a.what == "baselines":
        rows = baselines(a.ergon, models, a.mesh, a.reps, workdir, log)
        print(baselines_table(rows))
    else:
        rows = rank(a.ergon, models, a.mesh, a.reps, a.max_variants, workdir, log)
        print(rank_table(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
