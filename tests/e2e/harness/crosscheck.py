"""crosscheck.py: the server's InstructionProfiler profile against `ergon profile logs` on the
client logs of the same run (run_e2e.py, step 2), with checks whose verdict does not depend on
the machine's load.

The two sides measure the same instruction occurrences in different ways, so their rows differ
by an amount that grows with the load (28.8 % at load average 22) and no tolerance on that
difference is a check:
- the server (src/server/sched_sparse.c, sched_profiler.c) aggregates the samples the trainer's
  Recorder reports per window (`dump/<job>/<w>.prof.json`: the wall time around each
  instruction and the difference of the GPU energy counter read right before and after it);
  windows after the warm-up, each window's iterations after the first 10 % (at least one);
  sparse mode: per (stage, instruction) the windows at one clock until its samples are stable
  (at most max_windows_per_clock), the mean without outliers (EnvPipe's filter), a clock
  measured again averaged; full sweep: the plain mean of one window.
- `ergon profile logs` (src/client/logs.c) aggregates the client's records
  (instructions-<rank>.csv: the hooks' begin and end, outside the Recorder's) of every window:
  records whose clock did not change during the instruction (freq_start == freq_end), each
  (instruction, clock)'s first tenth dropped, the plain mean; an instruction's energy is the
  sampled counter (time-energy-<rank>.csv) interpolated linearly at its begin and end.

What is checked, each true whatever the load:
1. every instruction the server was reported is in the client logs (occurrence for occurrence,
   per rank and instruction, in run order), so every measured server row has its records;
2. `ergon profile logs`'s rows equal logs.c's statistic recomputed here from the raw logs
   (to rounding), and no other row;
3. each measured server row lies within [min, max] of the samples the server was reported for
   that (stage, instruction, clock) (any mean of a subset of them, filtered or not, does);
   under the sparse profiler's noisy procedure (a noise level estimated >= ERG_SPARSE_NOISY,
   e.g. on a loaded machine) the rows below the top clock are its fit shrunk toward the
   measured mean (src/profile/sparse_predict.c), so there the top clock's rows only;
4. each reported sample is within its client record: its time at most the record's end - begin
   (the Recorder runs inside the client's hooks), its energy at most the counter's increase
   from the last energy sample at or before the begin to the one after the first sample at or
   after the end (the counter is read before its sample's time stamp is taken).
The relative differences between the two profiles are printed for information only."""
import bisect
import csv
import glob
import json
import os

REL = 1e-9  # rounding of the CSVs' numbers
T_EPS = 2.5e-6  # the logs' begin and end are printed to the microsecond
E_EPS = 2e-3  # counters in mJ, printed to the mJ, on both sides


def _close(a, b):
    return abs(a - b) <= REL * max(abs(a), abs(b)) + 1e-12


def _logs_profile(recs, samples):
    """logs.c erg__aggregate_stage: {(kind, freq): (time, energy)}."""
    groups, order = {}, []
    for r in recs:
        if r["kind"] is None or r["f0"] <= 0 or r["f0"] != r["f1"]:
            continue
        k = (r["kind"], r["f0"])
        if k not in groups:
            groups[k] = []
            order.append(k)
        groups[k].append(r)
    ts = [s[0] for s in samples]
    out = {}
    for k in order:
        g = groups[k]
        used = g[len(g) // 10:]
        tsum = esum = 0.0
        for r in used:
            tsum += r["end"] - r["start"]
            esum += _energy_between(ts, samples, r["start"], r["end"])
        out[k] = (tsum / len(used), max(0.0, esum / len(used)))
    return out


def _energy_at(ts, samples, t):
    lo = min(max(bisect.bisect_right(ts, t) - 1, 0), len(ts) - 2)
    hi = lo + 1
    dt = ts[hi] - ts[lo]
    w = (t - ts[lo]) / dt if dt > 0 else 0.0
    w = min(max(w, 0.0), 1.0)
    return samples[lo][1] + w * (samples[hi][1] - samples[lo][1])


def _energy_between(ts, samples, t0, t1):
    return _energy_at(ts, samples, t1) - _energy_at(ts, samples, t0)


def _energy_bound(ts, samples, t0, t1):
    """The counter's increase from the last sample at or before t0 to the sample after the
    first one at or after t1; None when the samples do not reach that far."""
    j = bisect.bisect_right(ts, t0) - 1
    k = bisect.bisect_left(ts, t1) + 1
    if j < 0 or k >= len(ts):
        return None
    return samples[k][1] - samples[j][1]


def _read_logs(logs, rank):
    recs = []
    with open(os.path.join(logs, "instructions-%d.csv" % rank)) as f:
        for x in csv.DictReader(f):
            name = x["instruction"]
            kind = ("forward" if name in ("forward", "forward_microstep") else
                    "backward" if name in ("backward", "backward_microstep") else None)
            recs.append({"kind": kind, "name": name, "start": float(x["start"]),
                         "end": float(x["end"]), "f0": int(x["freq_start"]),
                         "f1": int(x["freq_end"])})
    with open(os.path.join(logs, "time-energy-%d.csv" % rank)) as f:
        samples = [(float(x["time"]), float(x["energy"])) for x in csv.DictReader(f)]
    return recs, samples


def _read_profile(path, measured_only):
    out = {}
    with open(path) as f:
        for x in csv.DictReader(f):
            if measured_only and x.get("source", "measured") != "measured":
                continue
            out[(int(x["stage"]), x["instruction"], int(x["frequency"]))] = (
                float(x["time"]), float(x["energy"]))
    return out


def _reported(dump):
    """The server's inputs: {rank: [(window, clock, kind, iteration, time_s, energy_j), ...]}
    in run order per kind, and {rank: stage}."""
    ranks = json.load(open(os.path.join(dump, "ranks.json")))
    pipe = {x["rank"]: x["pipe_schedule"] for x in ranks}
    stage = {x["rank"]: x["pp_rank"] for x in ranks}
    wins = sorted(int(os.path.basename(p).split(".")[0])
                  for p in glob.glob(os.path.join(dump, "*.prof.json")))
    out = {r: [] for r in pipe}
    for w in wins:
        sched = {x["rank"]: x["power_states"]
                 for x in json.load(open(os.path.join(dump, "%d.sched.json" % w)))}
        for res in json.load(open(os.path.join(dump, "%d.prof.json" % w))):
            r = res["rank"]
            for kind, tb in res.get("time_breakdown", {}).items():
                clocks = [sched[r][i] for i, n in enumerate(pipe[r]) if n == kind]
                eb = res.get("energy_breakdown", {}).get(kind, [])
                for it, occ in enumerate(tb):
                    for j, t in enumerate(occ):
                        e = eb[it][j] if it < len(eb) and j < len(eb[it]) else None
                        out[r].append((w, clocks[j % len(clocks)], kind, it, t, e))
    return out, stage


def crosscheck(dump, logs, server_csv, logs_csv, warmup_windows, noisy=False):
    """Returns (problems: list of str, info: str). noisy: the sparse profiler's noisy procedure
    was on (InstructionProfiler-sparse.json "noisy_procedure"): its measured rows below the
    top clock are the fit shrunk toward the measured mean, so check 3 takes the top clock's
    rows only (kept as measured)."""
    problems = []
    srv = _read_profile(server_csv, True)
    plog = _read_profile(logs_csv, False)
    reported, stage_of = _reported(dump)
    samples_at = {}  # (stage, kind, clock) -> [(t, e)] after the warm-up windows
    n_occ = 0
    for r, rep in sorted(reported.items()):
        s = stage_of[r]
        recs, esamp = _read_logs(logs, r)
        ets = [x[0] for x in esamp]
        # 2. profile logs recomputed from the raw logs
        mine = {(s, k, f): v for (k, f), v in _logs_profile(recs, esamp).items()}
        got = {k: v for k, v in plog.items() if k[0] == s}
        for k in sorted(set(mine) | set(got)):
            if k not in got or k not in mine:
                problems.append("stage %d %s %d MHz: `ergon profile logs` %s this row, the raw "
                                "logs %s" % (k + ("has" if k in got else "lacks",
                                                  "do not" if k in got else "do")))
            elif not (_close(got[k][0], mine[k][0]) and _close(got[k][1], mine[k][1])):
                problems.append("stage %d %s %d MHz: `ergon profile logs` says %.9g s %.9g J, "
                                "its statistic over the raw logs %.9g s %.9g J"
                                % (k + got[k] + mine[k]))
        # 1. + 4. the reported samples, occurrence for occurrence
        for kind in ("forward", "backward"):
            rk = [x for x in rep if x[2] == kind]
            lk = [x for x in recs if x["kind"] == kind]
            if len(rk) != len(lk):
                problems.append("rank %d: the server was reported %d %s samples, the client "
                                "logged %d" % (r, len(rk), kind, len(lk)))
                continue
            for (w, f, _, it, t, e), rec in zip(rk, lk):
                n_occ += 1
                where = "rank %d window %d %s (%d MHz)" % (r, w, kind, f)
                if t > rec["end"] - rec["start"] + T_EPS:
                    problems.append("%s: reported %.6f s, longer than its client record's "
                                    "%.6f s" % (where, t, rec["end"] - rec["start"]))
                bound = _energy_bound(ets, esamp, rec["start"], rec["end"])
                if e is not None and bound is not None and e > bound + E_EPS:
                    problems.append("%s: reported %.3f J, more than the counter rose around "
                                    "its client record (%.3f J)" % (where, e, bound))
                if w >= warmup_windows:
                    samples_at.setdefault((s, kind, f), []).append((t, e))
    # 3. each measured server row within its samples' range
    top = max((k[2] for k in srv), default=0)
    n_range = 0
    for k, (t, e) in sorted(srv.items()):
        if noisy and k[2] != top:
            continue
        n_range += 1
        xs = samples_at.get(k)
        if not xs:
            problems.append("stage %d %s %d MHz: measured on the server, but no sample was "
                            "reported for it" % k)
            continue
        for what, v, vals in (("time", t, [x[0] for x in xs]),
                              ("energy", e, [x[1] for x in xs if x[1] is not None])):
            if vals and not (min(vals) * (1 - REL) - 1e-12 <= v <= max(vals) * (1 + REL) + 1e-12):
                problems.append("stage %d %s %d MHz: the server's %s %.9g is outside its %d "
                                "samples' range [%.9g, %.9g]"
                                % (k + (what, v, len(vals), min(vals), max(vals))))
    # information: the old comparison
    common = sorted(set(srv) & set(plog))
    dt = max(((abs(srv[k][0] / plog[k][0] - 1), k) for k in common), default=(0.0, None))
    de = max(((abs(srv[k][1] / plog[k][1] - 1), k) for k in common if plog[k][1] > 0),
             default=(0.0, None))
    row = lambda k: "stage %d %s %d MHz" % k if k else "no row"  # noqa: E731
    lacking = [row(k) for k in sorted(set(srv) - set(plog))]
    info = ("%d of the server's %d measured rows are in `ergon profile logs` too%s; largest "
            "difference %.1f%% in time (%s), %.1f%% in energy (%s) (information: the two "
            "measure different spans and samples, the difference grows with the load); "
            "checked: %d reported samples within their client records, %d measured rows within "
            "their samples' range%s, the logs' rows against the raw logs"
            % (len(common), len(srv), (" (not: %s: no record of it kept its clock from begin "
                                       "to end)" % ", ".join(lacking)) if lacking else "",
               100 * dt[0], row(dt[1]), 100 * de[0], row(de[1]), n_occ, n_range,
               " (the noisy procedure: the top clock's)" if noisy else ""))
    return problems, info
