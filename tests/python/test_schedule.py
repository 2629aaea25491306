"""Tests of the schedule binding (ergon.Schedule, schedule_order, plan_schedule) against libergon."""
import json
import os
import tempfile
import unittest

import ergon


def closed_form(S, M, s, r):
    """envpipe-spec 5.2: k = min(M, S-s+r) forwards, then B/F alternating, then backwards."""
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
