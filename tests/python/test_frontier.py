"""ergon.frontier: a frontier directory written and read from Python is `ergon plan perseus`'s
(the same files, byte for byte, from the same library call), and its all-max fallback is found."""
import os
import subprocess
import tempfile
import unittest

import ergon
import ergon.frontier

DATA = os.path.join(os.environ.get("ERGON_TEST_DATA", ""), "published")
PROFILE = os.path.join(DATA, "perseus-sosp24", "stage_profile", "gpt3-175b+a100_sxm_bf16.csv")


class Frontier(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def read(self, d, name):
        with open(os.path.join(d, name), "rb") as f:
            return f.read()

    def test_same_directory_as_the_cli(self):
        prof = os.path.join(self.dir, "p.csv")
        ergon.sim_profile("a100", "gpt3-xl", 4, prof)
        py, cli = os.path.join(self.dir, "py"), os.path.join(self.dir, "cli")
        n, fallback = ergon.frontier.plan_dir(prof, 4, 8, 83.64, py, unit_time_s=0.002)
        subprocess.run([os.environ["ERGON"], "plan", "perseus", "--profile", prof, "--stages", "4",
                        "--microbatches", "8", "--blocking-power", "83.64", "--unit-time",
                        "0.002", "--out", cli, "--quiet"], check=True)
        for name in ("frontier.csv", "plans.ergon", "profile.csv"):
            self.assertEqual(self.read(py, name), self.read(cli, name), name)
        # frontier-info.csv differs only in the CLI's source_profile row (the file's name)
        info = [ln for ln in self.read(cli, "frontier-info.csv").split(b"\n")
                if not ln.startswith(b"source_profile,")]
        self.assertEqual(self.read(py, "frontier-info.csv").split(b"\n"), info)
        rows = self.read(py, "frontier.csv").count(b"\n") - 1
        self.assertEqual(n, rows)
        self.assertEqual(fallback, b"fallback all_max" in self.read(py, "plans.ergon"))
        k, t, e = ergon.frontier.choose(py, 1e9)  # no deadline: the minimum-energy plan
        self.assertEqual(k, 0)
        self.assertGreater(t, 0)
        with self.assertRaises(ergon.ErgonError) as cm:
            ergon.frontier.choose(py, 1e-3)
        self.assertEqual(cm.exception.name, "ENOTFOUND")

    def test_fallback_is_beside_the_frontier(self):
        # gpt3-175b A100 M=12: the fastest planned plan runs slower than all-max clocks
        d = os.path.join(self.dir, "f")
        n, fallback = ergon.frontier.plan_dir(PROFILE, 8, 12, 83.64, d)
        self.assertEqual((n, fallback), (639, True))
        self.assertEqual(self.read(d, "frontier.csv").count(b"\n"), 640)  # header + 639
        info = dict(ln.split(",", 1) for ln in
                    self.read(d, "frontier-info.csv").decode().splitlines()[1:])
        k, t, e = ergon.frontier.choose(d, float(info["all_max_time_s"]))
        self.assertEqual(k, 639)  # the fallback, one past the planner's frontier
        self.assertLessEqual(t, float(info["all_max_time_s"]))
        self.assertAlmostEqual(e, float(info["all_max_energy_j"]), places=6)

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            ergon.frontier.plan_dir("p.csv", 4, 8, 83.64, self.dir, formats="csv,nope")
        with self.assertRaises(ValueError):
            ergon.frontier.plan_dir("p.csv", 4, 8, 83.64, self.dir, schedule=ergon.SCHED_FILE)
        with self.assertRaises(ergon.ErgonError) as cm:
            ergon.frontier.plan_dir(os.path.join(self.dir, "none.csv"), 4, 8, 83.64, self.dir)
        self.assertIn("none.csv", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
