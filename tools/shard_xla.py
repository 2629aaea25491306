#!/usr/bin/env python3
"""shard_xla.py: run ergon's sharding plans through XLA's SPMD partitioner on CPU devices.

For each model of tools/shard_models.py and each mesh:
  1. the unpartitioned HLO of one training step goes to `ergon shard search --out-hlo
     --out-json` (ergon's plan, its shardings written into the HLO text);
  2. that annotated HLO text is compiled by XLA (jaxlib's HLO parser -> HloModuleProto ->
     StableHLO -> PJRT CPU client, num_partitions = devices, GSPMD partitioner) and run on
     the host's CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=8);
  3. the loss and every updated parameter and Adam moment are compared with the
     single-device run of the same step (fp32 tolerance);
  4. the collectives in XLA's partitioned, optimised module are counted and sized and set
     next to the communication ergon's cost model charged for the plan.
Any failure (XLA rejects an annotation, a partitioned result differs) exits 1.

  python tools/shard_xla.py --ergon build/ergon [--models gpt,...] [--meshes 1x4,...]
                            [--fast] [--shardy] [--table] [--json FILE] [--keep DIR] [--corrupt]
--table prints the collectives comparison as a Markdown table (docs/shard.md). With --keep,
DIR/MODEL.MESH.shardings.json holds ergon's sharding of every step argument by name (the plan
JSON's `parameters` mapped through shard_models.py's argument names).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # XLA's info lines and GSPMD's notice

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shard_models  # noqa: E402

MESHES = ["1x4", "2x2", "1x8", "2x4"]
RTOL, ATOL = 1e-4, 1e-5  # fp32: partitioned reductions sum in another order


class XlaRejected(Exception):
    def __init__(self, msg):
        # XLA's parser errors echo whole lines of HLO (a ROOT tuple is kilobytes)
        super().__init__(msg if len(msg) < 1500 else msg[:700] + " ... " + msg[-700:])


def compile_partitioned(text, ndev, fast=False, shardy=False):
    """Compile HLO text with shardings for `ndev` partitions under XLA's GSPMD partitioner.

    jaxlib 0.10.2 has no entry point that compiles HLO text directly; its HLO parser
    (jaxlib._hlo.hlo_module_from_text) gives an HloModule whose proto converts to StableHLO
    (jaxlib._jax.mlir.hlo_to_stablehlo; the `sharding=` attributes become mhlo.sharding),
    which the PJRT client compiles as jax itself does (jax._src.compiler)."""
    from jax._src import xla_bridge
    from jaxlib import _hlo, _jax
    try:
        module = _hlo.hlo_module_from_text(text)
    except Exception as e:  # XLA's own HLO parser refused the text
        raise XlaRejected(f"XLA's HLO parser: {e}") from e
    stablehlo = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    backend = xla_bridge.get_backend("cpu")
    devices = backend.devices()[:ndev]
    if len(devices) < ndev:
        raise RuntimeError(f"need {ndev} CPU devices, have {len(devices)} (XLA_FLAGS)")
    opts = _jax.CompileOptions()
    opts.num_replicas = 1
    opts.num_partitions = ndev
    bo = opts.executable_build_options
    bo.use_spmd_partitioning = True
    # The annotations are GSPMD HloShardings; with shardy, XLA imports them into Shardy
    # (JAX's default partitioner for its own programs) and partitions with it.
    bo.use_shardy_partitioner = shardy
    opts.device_assignment = _jax.DeviceAssignment.create(np.arange(ndev).reshape(1, ndev))
    if fast:  # the partitioner runs in full; only the CPU backend's optimisations are cut
        bo.debug_options.xla_backend_optimization_level = 0
        bo.debug_options.xla_llvm_disable_expensive_passes = True
    try:
        return backend.compile_and_load(stablehlo, executable_devices=_jax.DeviceList(
            tuple(devices)), compile_options=opts), devices
    except Exception as e:
        raise XlaRejected(f"XLA compile: {e}") from e


def parameter_shardings_kept(annotated, ex):
    """ergon's sharding of every ENTRY parameter equals the one the executable takes its
    input in (XLA's partitioner keeps explicit annotations: a difference means it did not
    read what ergon wrote). Returns the first difference, or None."""
    from jaxlib import _hlo
    entry = annotated[annotated.index("\nENTRY"):]
    entry = entry[:entry.index("\n}")]
    ergon = {int(i): t for i, t in
             re.findall(r"parameter\((\d+)\)[^\n]*?sharding=(\{[^{}]*\})", entry)}
    xla = ex.get_parameter_shardings() or []
    if len(ergon) != len(xla):
        return f"ergon annotated {len(ergon)} of the {len(xla)} parameters"
    for i, proto in enumerate(xla):
        got = _hlo.HloSharding.from_proto(proto)
        if got != _hlo.HloSharding.from_string(ergon[i]):
            return f"parameter {i}: ergon wrote {ergon[i]}, XLA compiled {got}"
    return None


def named_shardings(plan, annotated, arg_names):
    """ergon's sharding of every step argument, by name: the plan JSON's `parameters`
    (number, HLO name, sharding) mapped through the argument names shard_models.py records
    (HLO parameter i is argument i; JAX names the parameters args_i_, not by the Python
    names). Also checks that the JSON says what the annotated text says."""
    entry = annotated[annotated.index("\nENTRY"):]
    written = dict(re.findall(r"\n\s*([\w.\-]+) = [^\n]*?parameter\(\d+\)[^\n]*?"
                              r"sharding=(\{[^{}]*\})", entry))
    out = {}
    for q in plan["parameters"]:
        if written.get(q["name"]) != q["sharding"]:
            raise AssertionError(f"plan JSON parameter {q['number']} ({q['name']}): "
                                 f"{q['sharding']}, the module says {written.get(q['name'])}")
        out[arg_names[q["number"]]] = q["sharding"]
    if len(out) != len(arg_names):
        raise AssertionError(f"plan JSON names {len(out)} parameters, the step has "
                             f"{len(arg_names)} arguments")
    return out


def run_partitioned(ex, devices, args, out_shapes):
    """Run a compiled SPMD executable on numpy args; returns the outputs (global shapes
    out_shapes) as numpy arrays."""
    import jax
    from jax._src.sharding_impls import GSPMDSharding
    devs = tuple(devices)
    ins = ex.get_parameter_shardings()
    if ins is None:  # one partition: no shardings
        from jax.sharding import SingleDeviceSharding
        arrays = [jax.device_put(a, SingleDeviceSharding(devs[0])) for a in args]
        return [np.asarray(x[0]) for x in ex.execute_sharded(arrays)
                .disassemble_into_single_device_arrays()]
    if len(ins) != len(args):
        raise RuntimeError(f"executable takes {len(ins)} parameters, given {len(args)}")
    arrays = [jax.device_put(a, GSPMDSharding(devs, s)) for a, s in zip(args, ins)]
    res = ex.execute_sharded(arrays)
    per_out = res.disassemble_into_single_device_arrays()
    outs = []
    if len(per_out) != len(out_shapes):
        raise RuntimeError(f"executable gives {len(per_out)} outputs, expected {len(out_shapes)}")
    for shards, s, shape in zip(per_out, ex.get_output_shardings(), out_shapes):
        outs.append(np.asarray(jax.make_array_from_single_device_arrays(
            shape, GSPMDSharding(devs, s), shards)))
    return outs


# ---------------------------------------------------------------- collectives
COLLECTIVES = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"]
_DT = {"f32": 4, "s32": 4, "u32": 4, "f16": 2, "bf16": 2, "pred": 1, "s8": 1, "u8": 1,
       "f64": 8, "s64": 8, "u64": 8}
_SHAPE = re.compile(r"\b(f32|s32|u32|f16|bf16|pred|s8|u8|f64|s64|u64)\[([0-9,]*)\]")


def _bytes(shape_text):
    total = 0
    for dt, dims in _SHAPE.findall(shape_text):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * _DT[dt]
    return total


def _group_size(line, ndev):
    m = re.search(r"replica_groups=\{\{([0-9,]*)\}", line)
    if m:
        return len(m.group(1).split(","))
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]", line)  # iota form [groups,size]
    if m:
        return int(m.group(2))
    return ndev


def count_collectives(hlo_text, ndev):
    """Per kind: number of ops, tensors, result bytes per device and bytes moved per device
    (ring model: all-reduce 2(n-1)/n S, all-gather (n-1)/n S_out, reduce-scatter (n-1)/n S_in,
    all-to-all (n-1)/n S, collective-permute S). Async pairs count once (the -start)."""
    out = {k: dict(ops=0, tensors=0, bytes=0, moved=0.0) for k in COLLECTIVES}
    for line in hlo_text.splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.*?)\s+([a-z\-]+)\(", line)
        if not m:
            continue
        op = m.group(2)
        kind = op[:-len("-start")] if op.endswith("-start") else op
        if kind not in out:
            continue
        shape = m.group(1)
        if op.endswith("-start") and kind in ("all-gather", "collective-permute"):
            # (operands, results[, contexts]): the result half of the tuple
            parts = _SHAPE.findall(shape)
            shape = " ".join(f"{dt}[{d}]" for dt, d in parts[len(parts) // 2:])
        size = _bytes(shape)
        n = _group_size(line, ndev)
        tensors = max(1, len(_SHAPE.findall(shape)))
        if kind == "all-reduce":
            moved = 2.0 * (n - 1) / n * size
        elif kind == "reduce-scatter":
            moved = (n - 1) * size  # input is n x the result
        elif kind == "collective-permute":
            moved = float(size)
        else:
            moved = (n - 1) / n * size
        c = out[kind]
        c["ops"] += 1
        c["tensors"] += tensors
        c["bytes"] += size
        c["moved"] += moved
    return out


# ---------------------------------------------------------------- the check
def ergon_plan(ergon, hlo_path, mesh, workdir, method="dp", extra=(), tag=""):
    """`ergon shard search` (extra: more options, e.g. --devices); the annotated text and
    the plan JSON (with wall_s, the command's wall time)."""
    stem = os.path.join(workdir, os.path.basename(hlo_path)[:-4] + f".{mesh}.{method}{tag}")
    cmd = [ergon, "shard", "search", "--hlo", hlo_path, "--mesh", mesh, "--method", method,
           "--out-hlo", stem + ".hlo", "--out-json", stem + ".json", *extra]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    with open(stem + ".hlo") as f:
        text = f.read()
    with open(stem + ".json") as f:
        plan = json.load(f)
    plan["wall_s"] = wall
    return text, plan


def compare(outs, ref, names):
    """Largest absolute and relative differences; the first output outside tolerance."""
    worst = (0.0, 0.0)
    bad = None
    for i, (a, b) in enumerate(zip(outs, ref)):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if a.shape != b.shape:
            return worst, f"output {i} ({names[i]}): shape {a.shape} != {b.shape}"
        d = np.abs(a - b)
        worst = (max(worst[0], float(d.max(initial=0))),
                 max(worst[1], float((d / np.maximum(np.abs(b), ATOL)).max(initial=0))))
        if bad is None and not np.allclose(a, b, rtol=RTOL, atol=ATOL):
            k = int(np.argmax(d - RTOL * np.abs(b)))
            bad = (f"output {i} ({names[i]}): element {k} is {a.flat[k]!r}, single device "
                   f"{b.flat[k]!r} (rtol {RTOL}, atol {ATOL})")
    return worst, bad


def corrupt(annotated, ndev):
    """Self-test: give ENTRY parameter 0's sharding a device id outside the mesh (XLA's HLO
    verifier must refuse it, and the run must fail)."""
    new, n = re.subn(r"(parameter\(0\), sharding=\{devices=\[[0-9,]+\][0-9,]*?)\d+\}",
                     lambda m: m.group(1) + f"{ndev + 90}}}", annotated, count=1)
    if not n:
        raise RuntimeError("--corrupt: parameter 0 has no tiled sharding to break")
    return new


def check(ergon, models, meshes, keep=None, log=print, fast=False, break_one=False,
          shardy=False):
    import jax
    rows, failures = [], []
    workdir = keep or tempfile.mkdtemp(prefix="ergon-shard-xla-")
    os.makedirs(workdir, exist_ok=True)
    for model in models:
        text, args, arg_names, step = shard_models.build(model)
        ref = [np.asarray(x) for x in jax.block_until_ready(step(*args))]
        n = len(arg_names[:-2]) // 3
        out_names = ["loss"] + arg_names[:3 * n]
        hlo_path = os.path.join(workdir, model + ".hlo")
        with open(hlo_path, "w") as f:
            f.write(text)
        for mesh in meshes:
            a, b = (int(x) for x in mesh.split("x"))
            tag = f"{model} {mesh}"
            row = dict(model=model, mesh=mesh)
            try:
                annotated, plan = ergon_plan(ergon, hlo_path, mesh, workdir)
                row["plan"] = plan
                row["shardings"] = named_shardings(plan, annotated, arg_names)
                with open(os.path.join(workdir, f"{model}.{mesh}.shardings.json"), "w") as f:
                    json.dump(row["shardings"], f, indent=1)
                if break_one:
                    annotated = corrupt(annotated, a * b)
                t0 = time.perf_counter()
                ex, devices = compile_partitioned(annotated, a * b, fast, shardy)
                row["compile_s"] = time.perf_counter() - t0
                lost = parameter_shardings_kept(annotated, ex)
                if lost:
                    raise AssertionError(lost)
                outs = run_partitioned(ex, devices, args, [r.shape for r in ref])
                (row["max_abs"], row["max_rel"]), bad = compare(outs, ref, out_names)
                row["xla"] = count_collectives(ex.hlo_modules()[0].to_string(), a * b)
                if bad:
                    raise AssertionError(bad)
                log(f"ok   {tag}: plan {plan['time_s'] * 1e3:.4f} ms modelled, compiled in "
                    f"{row['compile_s']:.1f} s, max |diff| {row['max_abs']:.2e} "
                    f"(rel {row['max_rel']:.2e})")
            except (XlaRejected, AssertionError, RuntimeError) as e:
                failures.append(f"{tag}: {e}")
                log(f"FAIL {tag}: {e}")
            rows.append(row)
    return rows, failures


def table(rows):
    """Markdown: per model x mesh, what ergon's cost model charged for its plan (collectives
    by kind, bytes moved per device) next to the collectives in XLA's partitioned module."""
    lines = ["| model | mesh | ergon: AR / AG / A2A (count) | ergon: kB moved per device | "
             "XLA: AR / AG / RS / A2A / CP (ops) | XLA: AR tensors | XLA: kB moved per device | "
             "XLA / ergon bytes |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "xla" not in r:
            continue
        p, x = r["plan"], r["xla"]
        c = p["communication"]
        eb = c["bytes_per_device"]
        xb = sum(v["moved"] for v in x.values())
        ecount = " / ".join(f"{c[k]['count']:.0f}" for k in ("all-reduce", "all-gather",
                                                             "all-to-all"))
        xops = " / ".join(str(x[k]["ops"]) for k in COLLECTIVES)
        lines.append(f"| {r['model']} | {r['mesh']} | {ecount} | {eb / 1e3:.1f} | {xops} | "
                     f"{x['all-reduce']['tensors']} | {xb / 1e3:.1f} | "
                     + (f"{xb / eb:.2f}" if eb else "n/a") + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ergon", required=True, help="the ergon executable")
    ap.add_argument("--models", default=",".join(shard_models.MODELS))
    ap.add_argument("--meshes", default=",".join(MESHES))
    ap.add_argument("--keep", help="keep the HLO, plans and annotated modules in this directory")
    ap.add_argument("--table", action="store_true", help="print the collectives table")
    ap.add_argument("--json", help="write every row (plans, XLA collectives) to this file")
    ap.add_argument("--fast", action="store_true",
                    help="cut the CPU backend's optimisations (the SPMD partitioner and its "
                         "collectives are the same; compiles about 2x faster)")
    ap.add_argument("--shardy", action="store_true",
                    help="partition with Shardy (XLA imports the GSPMD annotations) instead of "
                         "GSPMD")
    ap.add_argument("--corrupt", action="store_true",
                    help="self-test: break parameter 0's annotation; every run must then fail")
    a = ap.parse_args(argv)
    rows, failures = check(a.ergon, a.models.split(","), a.meshes.split(","), a.keep,
                           fast=a.fast, break_one=a.corrupt, shardy=a.shardy)
    if a.table:
        print(table(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if failures:
        print(f"{len(failures)} of {len(rows)} model x mesh runs failed:", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    print(f"all {len(rows)} model x mesh plans compiled under XLA's SPMD partitioner and "
          f"matched the single-device step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
