#!/usr/bin/env python3
"""shard_measure.py: measured segment costs for `ergon shard search` (CFP's profiling pass).

For one HLO module and mesh:
  1. `ergon shard search --out-json` gives ergon's plan (blocks, their members, segments);
     `ergon shard profile --keep K --out-profiles` gives each unique segment's candidate
     combinations with their modelled times;
  2. for each unique segment, its K fastest modelled combinations (and the plan's): ergon
     writes the module with that combination on the segment's first occurrence
     (`search --strategies ... --out-hlo`); the segment's members are cut out into a module
     of their own (operands from outside become replicated parameters, values used outside
     become the outputs, in the shardings ergon wrote), compiled by XLA's SPMD partitioner
     for the mesh's CPU devices and run; the candidates of a segment are timed in interleaved
     rounds (minimum over the rounds);
  3. writes the cost file `segment,strategies,time_s,memory_bytes` (the CSV --profiles
     reads; memory: XLA's argument + output + temporary bytes per device), searches again
     with `--profiles FILE --profiles-only` and reports per unique segment the Spearman rank
     correlation of modelled and measured times and whether the chosen plan changed.

  python tools/shard_measure.py --ergon build/ergon (--hlo FILE | --model gpt) --mesh 1x8
         [--top 6] [--reps 10] [--out costs.csv] [--json rows.json] [--fast] [--keep DIR]
         [--devices FILE --device NAME] [--step] [--table]
  ergon shard search --hlo FILE --mesh 1x8 --profiles costs.csv --profiles-only

Cross-segment resharding stays modelled (as in CFP), with the device table given (default
a100-nvlink). See docs/shard.md, "Measured segment costs".
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shard_xla  # noqa: E402  (sets XLA_FLAGS before jax is imported)

import numpy as np  # noqa: E402

_DEF = re.compile(r"^\s*(ROOT\s+)?([\w.\-]+)\s*=\s*(.*)$")
_NP = {"f32": np.float32, "f16": np.float16, "bf16": np.float32, "f64": np.float64,
       "s32": np.int32, "s64": np.int64, "u32": np.uint32, "u8": np.uint8, "s8": np.int8,
       "pred": np.bool_}


def _match(text, i, open_ch, close_ch):
    """Index just past the bracket that closes text[i] (== open_ch)."""
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return j + 1
    raise ValueError(f"unbalanced {open_ch}{close_ch} in: {text[:120]}")


def parse_entry(text):
    """The ENTRY computation: (header, other computations' text, [instr]) where instr is a
    dict name, root, shape, op, operands (names), line (the text after '=')."""
    e = text.index("\nENTRY")
    end = text.index("\n}", e)
    head, rest = text.split("\n", 1)[0], text[len(text.split("\n", 1)[0]) + 1:e]
    instrs = []
    for line in text[text.index("{", e) + 1:end].splitlines():
        m = _DEF.match(line)
        if not m:
            continue
        body = m.group(3)
        if body.startswith("("):
            k = _match(body, 0, "(", ")")
            shape, tail = body[:k], body[k:].lstrip()
        else:
            shape, _, tail = body.partition(" ")
        om = re.match(r"([a-z][\w\-]*)\(", tail)
        if not om:
            raise ValueError(f"cannot read instruction {m.group(2)}: {body[:120]}")
        k = _match(tail, om.end() - 1, "(", ")")
        instrs.append(dict(name=m.group(2), root=bool(m.group(1)), shape=shape,
                           op=om.group(1), args=tail[om.end():k - 1], line=body))
    names = {x["name"] for x in instrs}
    for x in instrs:
        x["operands"] = [t for t in re.findall(r"[\w.\-]+", x["args"]) if t in names] \
            if x["op"] != "constant" else []
    return head, rest, instrs


def _sharding(line):
    i = line.find("sharding={")
    if i < 0:
        return None
    j = i + len("sharding=")
    return line[j:_match(line, j, "{", "}")]


def _replicated(shape):
    if shape.startswith("("):
        n = len(re.findall(r"\b[a-z0-9]+\[", shape))
        return "{" + ", ".join(["{replicated}"] * n) + "}"
    return "{replicated}"


def extract_segment(text, members, ndev, name="segment"):
    """A module of the ENTRY instructions in `members` (their sharding annotations kept):
    operands from outside become parameters (replicated), members used outside (or by the
    ROOT) become the ROOT tuple, sharded as ergon wrote them. Other computations (reducers)
    are copied. Returns (module text, [parameter shapes])."""
    _, comps, instrs = parse_entry(text)
    members = set(members)
    byname = {x["name"]: x for x in instrs}
    inside = [x for x in instrs if x["name"] in members]
    if not inside:
        raise ValueError("the segment has no instruction in the ENTRY computation")
    used_outside = set()
    for x in instrs:
        if x["name"] not in members:
            used_outside.update(o for o in x["operands"] if o in members)
        elif x["root"]:
            used_outside.add(x["name"])
    outs = [x for x in inside if x["name"] in used_outside] or [inside[-1]]
    params, lines, shapes = [], [], []
    seen = set()
    for x in inside:
        for o in x["operands"]:
            if o not in members and o not in seen:
                seen.add(o)
                src = byname[o]
                if src["op"] in ("constant", "iota"):
                    # copied, not a parameter: a reduction's init value must stay its
                    # identity (each partition applies it), a mask its values
                    params.append(f"  {o} = {src['line']}")
                    continue
                params.append(f"  {o} = {src['shape']} parameter({len(shapes)}), "
                              f"sharding={_replicated(src['shape'])}")
                shapes.append(src["shape"])
    for x in inside:
        line = x["line"]
        if x["op"] == "parameter":
            line = re.sub(r"parameter\(\d+\)", f"parameter({len(shapes)})", line, count=1)
            if _sharding(line) is None:
                line += f", sharding={_replicated(x['shape'])}"
            shapes.append(x["shape"])
        lines.append(f"  {x['name']} = {line}")
    out_sh = [_sharding(x["line"]) or _replicated(x["shape"]) for x in outs]
    tuple_shape = "(" + ", ".join(x["shape"] for x in outs) + ")"
    root = (f"  ROOT {name}.out = {tuple_shape} tuple({', '.join(x['name'] for x in outs)}), "
            f"sharding={{{', '.join(out_sh)}}}")
    mod = (f"HloModule {name}, num_partitions={ndev}\n{comps}\nENTRY {name}.main {{\n"
           + "\n".join(params + lines + [root]) + "\n}\n")
    return mod, shapes


def strip_shardings(text, ndev):
    """The module without sharding annotations, for one device (the reference)."""
    out, i = [], 0
    while True:
        j = text.find(", sharding={", i)
        if j < 0:
            break
        out.append(text[i:j])
        i = _match(text, j + len(", sharding="), "{", "}")
    out.append(text[i:])
    return "".join(out).replace(f"num_partitions={ndev}", "num_partitions=1", 1)


def wiring_differs(got, ref, tol=1e-2):
    """The first output of the partitioned segment that differs from the single-device one
    by more than tol x the output's largest magnitude (normwise), or None. Random inputs
    are not a trained model's values (a layer norm's backward on them loses digits to
    cancellation: up to 3e-3 normwise seen), so this checks that the segment was cut out and
    partitioned consistently; the step-level fp32 check is tools/shard_xla.py's."""
    for i, (a, b) in enumerate(zip(got, ref)):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if a.shape != b.shape:
            return f"output {i}: shape {a.shape}, single device {b.shape}"
        if not (np.isnan(a) == np.isnan(b)).all():
            return f"output {i}: NaN where the single-device output has none (or vice versa)"
        d = np.nan_to_num(np.abs(a - b), nan=0.0)
        scale = float(np.nan_to_num(np.abs(b), nan=0.0).max(initial=0))
        if d.max(initial=0) > tol * scale + 1e-6:
            k = int(np.argmax(d))
            return (f"output {i}: element {k} is {a.flat[k]!r}, single device {b.flat[k]!r} "
                    f"(largest magnitude {scale:.3g}, tolerance {tol} of it)")
    return None


def random_inputs(shapes, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for sh in shapes:
        m = re.match(r"([a-z0-9]+)\[([0-9,]*)\]", sh)
        if not m or m.group(1) not in _NP:
            raise ValueError(f"cannot make an input of shape {sh}")
        dims = [int(d) for d in m.group(2).split(",") if d]
        dt = _NP[m.group(1)]
        if np.issubdtype(dt, np.floating):
            out.append(rng.uniform(0.01, 0.1, dims).astype(dt))  # positive: sqrt, log, divide
        else:
            out.append(np.zeros(dims, dt))
    return out


def time_executables(cands, reps):
    """Minimum and median time of each compiled executable [(ex, devices, args)], in
    interleaved rounds (every candidate once per round: load drifting on a shared machine
    hits all alike), after one warm-up run each."""
    import jax
    from jax._src.sharding_impls import GSPMDSharding
    placed = []
    for ex, devices, args in cands:
        ins = ex.get_parameter_shardings()
        if ins is None:
            placed.append([jax.device_put(x, devices[0]) for x in args])
        else:
            placed.append([jax.device_put(x, GSPMDSharding(tuple(devices), s))
                           for x, s in zip(args, ins)])

    def run(i):
        jax.block_until_ready(cands[i][0].execute_sharded(placed[i])
                              .disassemble_into_single_device_arrays())
    for i in range(len(cands)):
        run(i)
    times = [[] for _ in cands]
    for _ in range(reps):
        for i in range(len(cands)):
            t0 = time.perf_counter()
            run(i)
            times[i].append(time.perf_counter() - t0)
    return [(float(np.min(t)), float(np.median(t))) for t in times]


def memory_per_device(ex):
    m = ex.get_compiled_memory_stats()
    return (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
            - m.alias_size_in_bytes)


def spearman(x, y):
    """Spearman's rank correlation (ties averaged); nan with fewer than 3 points or a
    constant side."""
    def ranks(v):
        v = np.asarray(v, float)
        r = np.empty(len(v))
        r[np.argsort(v, kind="mergesort")] = np.arange(len(v))
        for val in np.unique(v):
            r[v == val] = r[v == val].mean()
        return r
    if len(x) < 3:
        return float("nan")
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _ergon(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def read_profiles(path):
    with open(path) as f:
        return [dict(segment=int(r["segment"]), strategies=r["strategies"],
                     time_s=float(r["time_s"]), memory_bytes=float(r["memory_bytes"]))
                for r in csv.DictReader(f)]


def measure(ergon, hlo, mesh, top=6, reps=10, out=None, workdir=None, fast=False,
            cost=(), log=print, check=True):
    """Measure the candidates of every unique segment; write the cost file `out`; search
    with it. Returns a dict: rows (one per unique segment), plan (modelled search), measured
    plan, cost file path."""
    a, b = (int(x) for x in mesh.split("x"))
    ndev = a * b
    workdir = workdir or tempfile.mkdtemp(prefix="ergon-shard-measure-")
    os.makedirs(workdir, exist_ok=True)
    stem = os.path.join(workdir, os.path.basename(hlo).rsplit(".", 1)[0] + "." + mesh)
    base = [ergon, "shard"]
    t0 = time.perf_counter()
    _ergon(base + ["search", "--hlo", hlo, "--mesh", mesh, "--out-json", stem + ".plan.json",
                   *cost])
    with open(stem + ".plan.json") as f:
        plan = json.load(f)
    _ergon(base + ["profile", "--hlo", hlo, "--mesh", mesh, "--keep", str(max(top, 1)),
                   "--out-profiles", stem + ".modelled.csv", *cost])
    modelled = read_profiles(stem + ".modelled.csv")
    k0 = [blk["strategy"] for blk in plan["blocks"]]
    segs = plan["segments"]
    rows, cost_rows = [], []
    for u, g in enumerate(segs):
        if g["unique"] != u:
            continue
        first, n = g["first_block"], g["num_blocks"]
        mine = sorted((r for r in modelled if r["segment"] == u), key=lambda r: r["time_s"])
        plan_combo = "-".join(str(k) for k in k0[first:first + n])
        cands = [r["strategies"] for r in mine[:top]]
        if plan_combo not in cands:
            cands.insert(0, plan_combo)
        mt = {r["strategies"]: r["time_s"] for r in mine}
        members = [m for blk in plan["blocks"][first:first + n] for m in blk["member_names"]]
        compiled, labels, ref = [], [], None
        for combo in cands:
            v = list(k0)
            v[first:first + n] = [int(x) for x in combo.split("-")]
            cs = f"{stem}.u{u}.{combo}"
            _ergon(base + ["search", "--hlo", hlo, "--mesh", mesh, "--strategies",
                           ",".join(map(str, v)), "--out-hlo", cs + ".hlo", *cost])
            with open(cs + ".hlo") as f:
                seg_text, shapes = extract_segment(f.read(), members, ndev, f"segment{u}")
            with open(cs + ".segment.hlo", "w") as f:
                f.write(seg_text)
            ex, devs = shard_xla.compile_partitioned(seg_text, ndev, fast)
            args = random_inputs(shapes)
            if check:
                # the partitioned segment computes what the segment computes on one device
                if ref is None:
                    ex1, d1 = shard_xla.compile_partitioned(strip_shardings(seg_text, ndev), 1,
                                                            fast)
                    ref = shard_xla.run_partitioned(ex1, d1, args, None)
                got = shard_xla.run_partitioned(ex, devs, args, [r.shape for r in ref])
                bad = wiring_differs(got, ref)
                if bad:
                    raise AssertionError(f"segment {u} under {combo}: {bad}")
            compiled.append((ex, devs, args))
            labels.append(combo)
        timed = time_executables(compiled, reps)
        meas = [t for t, _ in timed]
        for combo, (tmin, tmed), (ex, _, _) in zip(labels, timed, compiled):
            mem = memory_per_device(ex)
            cost_rows.append((u, combo, tmin, mem))
            log(f"{os.path.basename(hlo)} {mesh} unique segment {u} {combo}: modelled "
                f"{mt.get(combo, float('nan')) * 1e3:.4f} ms, measured {tmin * 1e3:.3f} ms "
                f"(median {tmed * 1e3:.3f}), {mem / 1e6:.3f} MB per device")
        rows.append(dict(segment=u, blocks=[first, first + n], candidates=labels,
                         modelled_s=[mt.get(c) for c in labels], measured_s=meas,
                         measured_median_s=[m for _, m in timed],
                         rho=spearman([mt.get(c, np.nan) for c in labels], meas),
                         plan=plan_combo, plan_measured_rank=sorted(meas).index(
                             meas[labels.index(plan_combo)]) + 1,
                         fastest_measured=labels[int(np.argmin(meas))]))
    out = out or stem + ".measured.csv"
    with open(out, "w") as f:
        f.write("segment,strategies,time_s,memory_bytes\n")
        for u, combo, t, mem in cost_rows:
            f.write(f"{u},{combo},{t:.9g},{mem}\n")
    measure_s = time.perf_counter() - t0
    _ergon(base + ["search", "--hlo", hlo, "--mesh", mesh, "--profiles", out,
                   "--profiles-only", "--out-json", stem + ".measured.plan.json", *cost])
    with open(stem + ".measured.plan.json") as f:
        mplan = json.load(f)
    k1 = [blk["strategy"] for blk in mplan["blocks"]]
    for r in rows:
        u = r["segment"]
        chosen = set()
        for g in segs:
            if g["unique"] == u:
                f0, nn = g["first_block"], g["num_blocks"]
                chosen.add("-".join(str(k) for k in k1[f0:f0 + nn]))
        r["measured_plan"] = sorted(chosen)
        r["plan_changed"] = chosen != {r["plan"]}
    return dict(rows=rows, plan=k0, measured_plan=k1, costs=out, measure_s=measure_s,
                plan_changed=k0 != k1)


def step_check(ergon, hlo, mesh, model, plans, reps, workdir, fast=False, cost=()):
    """Whole training steps of shard_models.py's `model` under each strategy vector of
    `plans` (ergon's modelled plan, the plan with measured costs): compiled by XLA, checked
    against the single-device step, timed in interleaved rounds. Returns the minima (s)."""
    import jax
    import shard_models
    a, b = (int(x) for x in mesh.split("x"))
    _, args, _, step = shard_models.build(model)
    ref = [np.asarray(x) for x in jax.block_until_ready(step(*args))]
    cands = []
    for i, k in enumerate(plans):
        path = os.path.join(workdir, f"{model}.{mesh}.step{i}.hlo")
        _ergon([ergon, "shard", "search", "--hlo", hlo, "--mesh", mesh, "--strategies",
                ",".join(map(str, k)), "--out-hlo", path, *cost])
        with open(path) as f:
            ex, devs = shard_xla.compile_partitioned(f.read(), a * b, fast)
        outs = shard_xla.run_partitioned(ex, devs, args, [r.shape for r in ref])
        _, bad = shard_xla.compare(outs, ref, [f"out{j}" for j in range(len(ref))])
        if bad:
            raise AssertionError(f"{model} {mesh} plan {i}: {bad}")
        cands.append((ex, devs, args))
    return [t for t, _ in time_executables(cands, reps)]


def table(results):
    """Markdown: one row per model x mesh x unique segment."""
    lines = ["| model | mesh | unique segment (blocks) | candidates | Spearman ρ | ergon's "
             "choice: measured rank | measured fastest | plan with measured costs |",
             "|---|---|---|---|---|---|---|---|"]
    for model, mesh, res in results:
        for r in res["rows"]:
            mp = ", ".join(r["measured_plan"])
            lines.append(
                f"| {model} | {mesh} | {r['segment']} ({r['blocks'][0]}-{r['blocks'][1] - 1}) | "
                f"{len(r['candidates'])} | {r['rho']:.2f} | {r['plan_measured_rank']} of "
                f"{len(r['candidates'])} | {r['fastest_measured']} | "
                + (f"changed: {r['plan']} -> {mp}" if r["plan_changed"] else
                   f"same ({r['plan']})") + " |")
        if "step_s" in res:
            st = res["step_s"]
            lines.append(f"| {model} | {mesh} | whole step | | | | | modelled plan "
                         f"{st['modelled_plan'] * 1e3:.2f} ms, measured-cost plan "
                         f"{st['measured_plan'] * 1e3:.2f} ms |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ergon", required=True, help="the ergon executable")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--hlo", help="unpartitioned HLO text module")
    src.add_argument("--model", help="models of tools/shard_models.py, comma-separated "
                                     "(gpt, llama, moe, bert)")
    ap.add_argument("--mesh", default="1x8", help="meshes, comma-separated (default 1x8)")
    ap.add_argument("--top", type=int, default=6,
                    help="candidates per unique segment: the fastest modelled (default 6), "
                         "plus ergon's choice")
    ap.add_argument("--reps", type=int, default=10, help="interleaved timing rounds")
    ap.add_argument("--out", help="cost file to write (one model and mesh only)")
    ap.add_argument("--json", help="write every row here")
    ap.add_argument("--keep", help="keep the modules in this directory")
    ap.add_argument("--fast", action="store_true",
                    help="CPU backend optimisation level 0 (compiles faster; the partitioner "
                         "is the same)")
    ap.add_argument("--table", action="store_true", help="print the Markdown table")
    ap.add_argument("--step", action="store_true",
                    help="with --model, where the plan with measured costs differs: run both "
                         "whole steps (checked against one device) and time them")
    ap.add_argument("--devices", help="device table CSV for ergon's modelled costs")
    ap.add_argument("--device", help="row of the device table")
    a = ap.parse_args(argv)
    cost = (["--devices", a.devices] if a.devices else []) + \
        (["--device", a.device] if a.device else [])
    workdir = a.keep or tempfile.mkdtemp(prefix="ergon-shard-measure-")
    os.makedirs(workdir, exist_ok=True)
    inputs = []
    if a.hlo:
        inputs = [(os.path.basename(a.hlo).rsplit(".", 1)[0], a.hlo)]
    else:
        import shard_models
        for model in a.model.split(","):
            text = shard_models.build(model)[0]
            path = os.path.join(workdir, model + ".hlo")
            with open(path, "w") as f:
                f.write(text)
            inputs.append((model, path))
    meshes = a.mesh.split(",")
    if a.out and len(inputs) * len(meshes) > 1:
        ap.error("--out takes one model and one mesh")
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    results = []
    for name, path in inputs:
        for mesh in meshes:
            try:
                res = measure(a.ergon, path, mesh, a.top, a.reps, a.out, workdir, a.fast,
                              cost, log)
            except (RuntimeError, ValueError, AssertionError, shard_xla.XlaRejected) as e:
                print(f"FAIL {name} {mesh}: {e}", file=sys.stderr)
                return 1
            if a.step and a.model and res["plan_changed"]:
                try:
                    t0, t1 = step_check(a.ergon, path, mesh, name,
                                        [res["plan"], res["measured_plan"]], 2 * a.reps,
                                        workdir, a.fast, cost)
                except (RuntimeError, AssertionError, shard_xla.XlaRejected) as e:
                    print(f"FAIL {name} {mesh}: {e}", file=sys.stderr)
                    return 1
                res["step_s"] = dict(modelled_plan=t0, measured_plan=t1)
                print(f"{name} {mesh}: whole step, ergon's modelled plan {t0 * 1e3:.2f} ms, "
                      f"plan with measured costs {t1 * 1e3:.2f} ms (both equal one device)")
            results.append((name, mesh, res))
            for r in res["rows"]:
                print(f"{name} {mesh} unique segment {r['segment']}: {len(r['candidates'])} "
                      f"candidates, Spearman rho {r['rho']:.2f}, ergon's choice measured "
                      f"{r['plan_measured_rank']} of {len(r['candidates'])}, plan "
                      + ("changed" if r["plan_changed"] else "unchanged"))
            print(f"{name} {mesh}: cost file {res['costs']} ({res['measure_s']:.1f} s); "
                  f"plan with measured costs "
                  + ("differs" if res["plan_changed"] else "is ergon's modelled plan"))
    if a.table:
        print(table(results))
    if a.json:
        with open(a.json, "w") as f:
            json.dump([dict(model=n, mesh=m, **r) for n, m, r in results], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
