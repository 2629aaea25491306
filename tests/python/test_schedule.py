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


if __name__ == "__main__":
    unittest.main()
