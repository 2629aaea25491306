"""Tests of the schedule binding (ergon.Schedule, schedule_order, plan_schedule) against libergon."""
import json
import os
import tempfile
import unittest

import ergon


def closed_form(S, M, s, r):
    """EnvPipe's ours order (docs/envpipe.md): k = min(M, S-s+r) forwards, B/F pairs, backwards."""
    k = min(M, S - s + r)
    out, f, b = [], 0, 0
    while f < k:
        out.append((ergon.FORWARD, f)); f += 1
    while f < M:
        out.append((ergon.BACKWARD, b)); b += 1
        out.append((ergon.FORWARD, f)); f += 1
    while b < M:
        out.append((ergon.BACKWARD, b)); b += 1
    return out


class ScheduleTest(unittest.TestCase):
    def test_1f1b_matches_closed_form(self):
        for S in range(1, 6):
            for M in range(1, 2 * S + 3):
                for s in range(S):
                    self.assertEqual(ergon.schedule_order("1f1b", S, M, s), closed_form(S, M, s, 0),
                                     (S, M, s))

    def test_ours_spec_examples(self):
        sch = ergon.Schedule("ours", [4, 3, 1, 0])
        self.assertEqual(sch.name, "ours")
        F, B = ergon.FORWARD, ergon.BACKWARD
        self.assertEqual(sch.stage_order(4, 8, 0), [(F, j) for j in range(8)] + [(B, j) for j in range(8)])
        self.assertEqual([("F" if k == F else "B") + str(j) for k, j in sch.stage_order(4, 8, 1)],
                         "F0 F1 F2 F3 F4 F5 B0 F6 B1 F7 B2 B3 B4 B5 B6 B7".split())
        readme = ergon.Schedule("ours", [0, 1, 2, 0])
        for s in range(3):
            self.assertEqual(readme.stage_order(4, 4, s), closed_form(4, 4, s, [0, 1, 2, 0][s]))
        self.assertEqual(readme.stage_order(4, 4, 3), closed_form(4, 4, 3, 0))

    def test_clock_list(self):
        """The examples' --sweep/--power-states: one parser (it was two copies that differed)."""
        self.assertEqual(ergon.clock_list("1410:1230:60"), [1410, 1350, 1290, 1230])
        self.assertEqual(ergon.clock_list("1410:1231:60"), [1410, 1350, 1290])
        self.assertEqual(ergon.clock_list("1410,1200,"), [1410, 1200])
        self.assertEqual(ergon.clock_list(""), [])
        for bad in ("1230:1410:60", "1410:1230:0", "1410:1230:-15", "a:b:c", "14x0"):
            with self.assertRaises(ValueError, msg=bad):
                ergon.clock_list(bad)

    def test_gpipe(self):
        F, B = ergon.FORWARD, ergon.BACKWARD
        self.assertEqual(ergon.schedule_order("gpipe", 3, 2, 1), [(F, 0), (F, 1), (B, 0), (B, 1)])

    def test_errors(self):
        with self.assertRaises(ergon.ErgonError) as e:
            ergon.Schedule("zigzag")
        self.assertEqual(e.exception.name, "EINVAL")
        with self.assertRaises(ergon.ErgonError) as e:  # k_1 < k_2: would deadlock
            ergon.schedule_order(ergon.Schedule("ours", [0, 0, 3, 0]), 4, 4, 1)
        self.assertIn("deadlock", str(e.exception))
        with self.assertRaises(ergon.ErgonError):
            ergon.schedule_order("ours", 4, 3, 0)       # M < S
        with self.assertRaises(ergon.ErgonError):
            ergon.schedule_order("1f1b", 2, 4, 2)       # stage out of range
        with self.assertRaises(ergon.ErgonError):
            ergon.schedule_order("1f1b", 2, 0, 0)
        with self.assertRaises(ergon.ErgonError):
            ergon.Schedule("ours", [0] * 65)

    def test_plan_schedule(self):
        d = tempfile.mkdtemp()
        plan = {"format": "ergon-plan", "version": 1, "schedule": "1f1b", "num_stages": 2,
                "num_microbatches": 2, "method": "test", "stages": [
                    {"stage": 0, "order": ["F0", "F1", "B0", "B1"], "freq_mhz": [1410] * 4},
                    {"stage": 1, "order": ["F0", "B0", "F1", "B1"], "freq_mhz": [1200] * 4}]}
        p = os.path.join(d, "p.json")
        with open(p, "w") as f:
            json.dump(plan, f)
        sch, S, M = ergon.plan_schedule(p)
        self.assertEqual((sch.name, S, M), ("1f1b", 2, 2))
        with self.assertRaises(ergon.ErgonError):
            ergon.plan_schedule(os.path.join(d, "missing.json"))

    def test_plan_schedule_carries_envpipe_options(self):
        """plan_schedule reads the kind, r_s, max_inflight and chunks of a plan through
        libergon's erg_schedule_get_* accessors (no mirrored struct), and the Schedule
        it returns reproduces the plan's orders."""
        S, M, r = 3, 4, [1, 0, 0]
        cell = {ergon.FORWARD: "F", ergon.BACKWARD: "B"}
        stages = [{"stage": s, "order": ["%s%d" % (cell[k], m) for k, m in closed_form(S, M, s, r[s])],
                   "freq_mhz": [1410] * (2 * M)} for s in range(S)]
        plan = {"format": "ergon-plan", "version": 1, "schedule": "ours", "num_stages": S,
                "num_microbatches": M, "method": "test", "extra_warmup": r, "max_inflight": 5,
                "stages": stages}
        p = os.path.join(tempfile.mkdtemp(), "ours.json")
        with open(p, "w") as f:
            json.dump(plan, f)
        sch, S2, M2 = ergon.plan_schedule(p)
        self.assertEqual((sch.name, S2, M2), ("ours", S, M))
        self.assertEqual((sch.extra_warmup, sch.max_inflight, sch.chunks), (r, 5, 1))
        self.assertEqual(sch.num_chunks, 1)
        for s in range(S):
            self.assertEqual(sch.stage_order(S, M, s), closed_form(S, M, s, r[s]), s)

    def test_error_message_comes_from_libergon(self):
        """Errors carry libergon's own message (read with erg_error_message)."""
        with self.assertRaises(ergon.ErgonError) as cm:
            ergon.Schedule("no-such-schedule")
        self.assertEqual(cm.exception.name, "EINVAL")
        self.assertIn("unknown schedule 'no-such-schedule'", str(cm.exception))
        with self.assertRaises(ergon.ErgonError) as cm:  # k_1 < k_2
            ergon.schedule_order(ergon.Schedule("ours", [0, 0, 3, 0]), 4, 4, 1)
        self.assertIn("deadlock", str(cm.exception))

    def test_rank_order_overlap_fields(self):
        """OVERLAP_F_B instructions come back with both parts (all six fields of
        erg_instr through erg_instr_get), the others with -1 for the second part; the
        same cells as `ergon schedule dualpipev`."""
        names = {ergon.FORWARD: "F", ergon.BACKWARD: "B", ergon.BACKWARD_INPUT: "I",
                 ergon.BACKWARD_WEIGHT: "W"}
        P, M = 2, 4
        want = ["0F0 0F1 0F2 3F0 3I0 3W0 3F1 (0F3;3B1)OVERLAP_F_B (3F2;0B0)OVERLAP_F_B 3B2 "
                "(3F3;0B1)OVERLAP_F_B 3B3 0I2 0W2 0I3 0W3",
                "1F0 2F0 1F1 2F1 1F2 2B0 (2F2;1B0)OVERLAP_F_B (1F3;2B1)OVERLAP_F_B "
                "(2F3;1B1)OVERLAP_F_B 2B2 1B2 2I3 1I3 2W3 1W3"]
        ergon_bin = os.environ.get("ERGON")
        if ergon_bin:
            import subprocess
            text = subprocess.run([ergon_bin, "schedule", "dualpipev", "--ranks", str(P),
                                   "--microbatches", str(M)], check=True, capture_output=True,
                                  text=True).stdout.splitlines()
            self.assertEqual(text[1:], ["rank %d: %s" % (r, w) for r, w in enumerate(want)])
        for rank in range(P):
            order, place = ergon.rank_order("dualpipev", P, M, rank)
            self.assertEqual(place, [0, 1, 1, 0])
            cells = []
            for k, s, m, k2, s2, m2 in order:
                if k == ergon.OVERLAP_F_B:
                    self.assertEqual(place[s2], rank)
                    cells.append("(%d%s%d;%d%s%d)OVERLAP_F_B" % (s, "F", m, s2, names[k2], m2))
                else:
                    self.assertEqual((k2, s2, m2), (-1, -1, -1))
                    cells.append("%d%s%d" % (s, names[k], m))
            self.assertEqual(" ".join(cells), want[rank])

    def test_rank_order_new_schedules_match_the_cli(self):
        """rank_order (erg_order_new) gives, rank by rank, the order `ergon schedule`
        prints, for the multi-chunk and zero-bubble schedules; and the placement."""
        names = {ergon.FORWARD: "F", ergon.BACKWARD: "B", ergon.BACKWARD_INPUT: "I",
                 ergon.BACKWARD_WEIGHT: "W"}
        ergon_bin = os.environ.get("ERGON")
        for name, V in (("interleaved-1f1b", 2), ("looped-bfs", 2), ("interleaved-zb", 2),
                        ("zbv", 2), ("interleaved-1f1b", 3)):
            for P in (2, 4):
                M = 2 * P
                sch = ergon.Schedule(name, chunks=V)
                self.assertEqual(sch.num_chunks, V)
                text = None
                if ergon_bin:
                    import subprocess
                    text = subprocess.run([ergon_bin, "schedule", name, "--ranks", str(P),
                                           "--chunks", str(V), "--microbatches", str(M)],
                                          check=True, capture_output=True,
                                          text=True).stdout.splitlines()
                for r in range(P):
                    order, place = sch.rank_order(P, M, r)
                    self.assertEqual(len(place), P * V)
                    if name == "zbv":
                        self.assertEqual([s for s in range(2 * P) if place[s] == r],
                                         [r, 2 * P - 1 - r])
                    else:
                        self.assertEqual(place, [s % P for s in range(P * V)])
                    cells = ["%d%s%d" % (s, names[k], m) for k, s, m, *_ in order]
                    self.assertEqual(len(cells), (3 if "zb" in name else 2) * V * M)
                    if text is not None:
                        self.assertEqual("rank %d: %s" % (r, " ".join(cells)), text[r + 1])
        with self.assertRaises(ergon.ErgonError):
            ergon.rank_order(ergon.Schedule("zbv", chunks=3), 2, 4, 0)
        with self.assertRaises(ergon.ErgonError):
            ergon.rank_order("interleaved-1f1b", 4, 9, 0)   # M not a multiple of rounds
        with self.assertRaises(ergon.ErgonError):
            ergon.rank_order("zbv", 2, 4, 2)                # no rank 2
        # the old schedules through the same path: stage = rank
        order, place = ergon.rank_order("1f1b", 3, 4, 1)
        self.assertEqual([(k, m) for k, _, m, *_ in order], ergon.schedule_order("1f1b", 3, 4, 1))
        self.assertEqual(place, [0, 1, 2])


if __name__ == "__main__":
    unittest.main()
