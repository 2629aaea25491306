#!/usr/bin/env python3
"""check_clocks.py: did every instruction of every rank run at its planned clock? The evidence
is the client's own per-instruction record (instructions-<rank>.csv, column freq_run: the
clock in effect once the instruction's clock request was handled, docs/runtime.md "Logs"),
compared instruction by instruction with the plan; not what a server sent, not a count of
clock changes (which depends on how often the clock thread ran).

    check_clocks.py LOGDIR --ranks P --segment STEPS:SOURCE [--segment STEPS:SOURCE ...]

The segments follow one another in each rank's log, in run order: STEPS iterations each.
SOURCE is a JSON plan (every instruction at the plan's clock: the plan's schedule,
microbatches and chunks give each rank's instructions, ergon.rank_order) or CLOCK@PLAN (every
instruction of PLAN's schedule at CLOCK MHz: an all-max control run). An iteration of a rank
is as many records as its instructions in the plan; its records must be exactly those
(chunk, kind, microbatch) instructions, each with freq_run equal to its planned clock, and a
rank's log must hold exactly the segments' records. Exit 0 and one line per rank when all
hold; exit 1 naming rank, iteration, instruction and the two clocks at the first mismatch
(and how many there were).
"""
import argparse
import csv
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
import ergon  # noqa: E402

KINDS = {"forward": ergon.FORWARD, "backward": ergon.BACKWARD,
         "backward_input": ergon.BACKWARD_INPUT, "backward_weight": ergon.BACKWARD_WEIGHT}
LETTER = {ergon.FORWARD: "F", ergon.BACKWARD: "B", ergon.BACKWARD_INPUT: "I",
          ergon.BACKWARD_WEIGHT: "W"}


def planned(plan_path, ranks, clock=None):
    """Per rank: the list of ((chunk, kind, microbatch), clock) of one iteration, in the
    plan's order (an OVERLAP_F_B step gives its two parts the step's one clock)."""
    sched, S, M = ergon.plan_schedule(plan_path)
    if S != ranks:
        raise SystemExit("%s: a plan for %d ranks, --ranks %d" % (plan_path, S, ranks))
    stages = json.load(open(plan_path))["stages"]
    by_rank = {int(st.get("stage", i)): st["freq_mhz"] for i, st in enumerate(stages)}
    out = []
    for r in range(ranks):
        order, place = ergon.rank_order(sched, S, M, r)
        local = sorted(s for s in range(len(place)) if place[s] == r)
        freqs = by_rank[r]
        if len(freqs) != len(order):
            raise SystemExit("%s: rank %d has %d clocks for %d instructions"
                             % (plan_path, r, len(freqs), len(order)))
        row = []
        for (k, s, mb, k2, s2, mb2), f in zip(order, freqs):
            f = clock if clock is not None else f
            if k == ergon.OVERLAP_F_B:
                row.append(((local.index(s), ergon.FORWARD, mb), f))
                row.append(((local.index(s2), k2, mb2), f))
            else:
                row.append(((local.index(s), k, mb), f))
        out.append(row)
    return out


def name(key):
    chunk, kind, mb = key
    return "%s%d%s" % (LETTER.get(kind, "?"), mb, " chunk %d" % chunk if chunk else "")


def records(logdir, r):
    path = os.path.join(logdir, "instructions-%d.csv" % r)
    rows = list(csv.DictReader(open(path)))
    if rows and ("freq_run" not in rows[0] or "chunk" not in rows[0]):
        raise SystemExit("%s: no chunk/freq_run columns (a client log written before them)" % path)
    out = []
    for i, x in enumerate(rows):
        if x["instruction"] not in KINDS:
            raise SystemExit("%s:%d: instruction %r" % (path, i + 2, x["instruction"]))
        key = (int(x["chunk"]), KINDS[x["instruction"]], int(x["microbatch"]))
        out.append((key, int(x["freq_run"]) if x["freq_run"] else None))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("logdir")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--segment", action="append", required=True, help="STEPS:PLAN or "
                    "STEPS:CLOCK@PLAN")
    a = ap.parse_args()
    segs = []
    for spec in a.segment:
        steps, src = spec.split(":", 1)
        clock = None
        if "@" in src:
            clock, src = src.split("@", 1)
            clock = int(clock)
        segs.append((int(steps), src, clock, planned(src, a.ranks, clock)))
    first, bad = None, 0
    for r in range(a.ranks):
        recs = records(a.logdir, r)
        pos, lines = 0, []
        for si, (steps, src, clock, plan) in enumerate(segs):
            want = plan[r]
            for step in range(steps):
                got = recs[pos:pos + len(want)]
                where = "rank %d segment %d (%s%s) iteration %d" % (
                    r, si, "%d MHz @ " % clock if clock is not None else "",
                    os.path.basename(src), step)
                if len(got) < len(want):
                    raise SystemExit("FAIL: %s: the log ends after %d of its %d instructions"
                                     % (where, len(got), len(want)))
                if sorted(k for k, _ in got) != sorted(k for k, _ in want):
                    raise SystemExit("FAIL: %s: the log's instructions %s are not the plan's %s"
                                     % (where, " ".join(name(k) for k, _ in got),
                                        " ".join(name(k) for k, _ in want)))
                clocks = dict(want)
                for i, (key, ran) in enumerate(got):
                    if ran != clocks[key]:
                        bad += 1
                        if first is None:
                            first = ("%s, instruction %d (%s): ran at %s, planned %d MHz"
                                     % (where, i, name(key),
                                        "%d MHz" % ran if ran is not None else
                                        "an unknown clock (none seen in effect before it "
                                        "ended)", clocks[key]))
                pos += len(want)
            lines.append("%d x %d instructions at %s" % (
                steps, len(want), "%d MHz" % clock if clock is not None else
                "the plan's %d clocks (%s MHz)" % (len({f for _, f in want}), "/".join(
                    str(f) for f in sorted({f for _, f in want}, reverse=True)))))
        if pos != len(recs):
            raise SystemExit("FAIL: rank %d: the log has %d instructions, the segments %d"
                             % (r, len(recs), pos))
        print("rank %d: %s" % (r, "; ".join(lines)))
    if first:
        print("FAIL: %s (%d instructions off their planned clock)" % (first, bad))
        return 1
    print("every instruction of every rank ran at its planned clock (client logs, freq_run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
