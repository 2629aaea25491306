"""Tests of the ctypes binding against the built libergon (simulated GPU and fake NVML)."""
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import ergon
from ergon.integration import PipelineHooks, PipeliningStageHooks


def needs(ok, why):
    """A test's missing prerequisite: it skips with `why`, and fails with it under CI=true
    (as tests/lib/skip_lib.bash's skip_or_fail; docs/testing.md, "Skips")."""
    if ok or os.environ.get("CI") != "true":
        return unittest.skipUnless(ok, why)

    def fail(f):
        def test(self):
            self.fail("CI=true: a missing prerequisite fails, it does not skip: " + why)
        test.__name__, test.__doc__ = f.__name__, f.__doc__
        return test
    return fail


class Binding(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_version_and_errors(self):
        self.assertTrue(ergon.version().startswith("0.1"))
        with self.assertRaises(ergon.ErgonError) as cm:
            ergon.Gpu("sim:rtx9090")
        self.assertEqual(cm.exception.name, "ENOTFOUND")
        self.assertIn("rtx9090", str(cm.exception))

    def test_one_loader_and_declare(self):
        # ergon.server_client gets the package's library (ergon._lib, the one loader), with
        # its own table declared on it; a table naming a function the library lacks is refused
        # naming the function.
        import ctypes
        from ergon import _lib, server_client
        lib = ergon.load_library()
        self.assertIs(server_client._load(), lib)
        self.assertIs(lib.erg_srv_client_free.argtypes[0], ctypes.c_void_p)
        with self.assertRaises(ergon.ErgonError) as cm:
            _lib.declare(lib, {"erg_no_such_function": (None, [])})
        self.assertEqual(cm.exception.name, "ENOTSUP")
        self.assertIn("lacks erg_no_such_function", str(cm.exception))

    def test_server_error_has_no_token(self):
        # The documented http://ergon:TOKEN@host form: a connect failure's ServerError (what a
        # Zeus traceback shows) says where it went without the credentials.
        import socket
        from ergon.server_client import ServerClient, ServerError
        s = socket.socket()  # bound, never listening: connections to it are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        try:
            c = ServerClient("http://ergon:SECRET@127.0.0.1:%d" % port, max_retries=0)
            with self.assertRaises(ServerError) as cm:
                c.heartbeat("job-1", 0)
            self.assertNotIn("SECRET", str(cm.exception))
            self.assertIn("127.0.0.1:%d" % port, str(cm.exception))
            c.close()
            with self.assertRaises(ServerError) as cm:
                ServerClient("ftp://ergon:SECRET@127.0.0.1:%d" % port)
            self.assertNotIn("SECRET", str(cm.exception))
        finally:
            s.close()

    def test_sim_gpu_reads(self):
        with ergon.Gpu("sim:a40:gpt3-xl:2") as g:
            self.assertEqual(len(g), 2)
            self.assertEqual(g.backend, "sim")
            clocks = g.sm_clocks(0)
            self.assertEqual(clocks[0], 1740)
            self.assertEqual(clocks[0] - clocks[1], 15)
            self.assertIn("A40", g.name(1))
            e0 = g.energy_mj(0)
            time.sleep(0.05)
            self.assertGreater(g.energy_mj(0), e0)
            # the simulated accounting: one instruction at the locked clock, however long held
            self.assertEqual(g.sim_account(1)["instructions"], 0)
            g.lock_sm_clock(1, 1200)
            t = g.sim_set_activity(1, True, ergon.BACKWARD)
            time.sleep(0.02)
            g.sim_set_activity(1, False)
            a = g.sim_account(1)
            self.assertEqual((a["instructions"], a["last_freq_mhz"]), (1, 1200))
            self.assertAlmostEqual(a["busy_time_s"], t, places=12)
            self.assertGreater(a["busy_energy_j"], 0)
            self.assertEqual(g.sim_account(0)["instructions"], 0)

    def test_plan_hooks_and_logs(self):
        plan = os.path.join(self.dir, "plan.py")
        # freqs_pipeline format: one list per stage, 2M clocks in 1F1B order (M = 2).
        with open(plan, "w") as f:
            f.write("[[1410, 1395, 1380, 1365], [1200, 1200, 1005, 1005]]\n")
        logs = os.path.join(self.dir, "logs")
        g = ergon.Gpu("sim:a100:bert-large:2")
        c = ergon.Client(g, device=1, rank=1, log_dir=logs, flags=ergon.CLIENT_NO_SIGNALS)
        c.load_plan(plan, 1)
        hooks = PipelineHooks(c)

        def work(kind):
            t = g.sim_set_activity(1, True, kind)
            time.sleep(t)
            g.sim_set_activity(1, False)

        fwd = hooks.forward(lambda: work(ergon.FORWARD))
        bwd = hooks.backward(lambda: work(ergon.BACKWARD))
        for _ in range(2):
            with hooks.step():
                fwd(); fwd(); bwd(); bwd()   # GPipe-like call order; microbatches counted
        t, e = hooks.last_step
        self.assertGreater(t, 0)
        self.assertGreater(e, 0)
        c.sync()
        self.assertEqual(c.active_clock, 1005)
        # stage 1 (1F1B order F0 B0 F1 B1): F0=B0=1200, F1=B1=1005; called F0 F1 B0 B1
        # twice: 1200 1005 1200 1005 per step, 8 requests. The clock thread applies only the
        # newest request it finds pending, so how many it applied depends on how often it ran
        # (docs/testing.md, "Counts that depend on scheduling"): at least one, at most 8.
        self.assertGreaterEqual(c.clock_changes, 1)
        self.assertLessEqual(c.clock_changes, 8)
        with self.assertRaises(ergon.ErgonError):
            c.instruction_end(ergon.FORWARD, 0)
        c.close()
        c.close()  # idempotent
        g.close()
        with open(os.path.join(logs, "instructions-1.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 8)
        self.assertEqual(rows[0]["instruction"], "forward")
        self.assertEqual([r["microbatch"] for r in rows[:4]], ["0", "1", "0", "1"])
        self.assertTrue({r["freq_end"] for r in rows} <= {"0", "1200", "1005"})

    def test_profile_from_logs_names_missing_rank(self):
        logs = os.path.join(self.dir, "logs")
        g = ergon.Gpu("sim:a100:bert-large:2")
        with ergon.Client(g, device=1, rank=1, log_dir=logs, flags=ergon.CLIENT_NO_SIGNALS):
            pass
        with self.assertRaises(ergon.ErgonError) as cm:
            ergon.profile_from_logs(logs, os.path.join(self.dir, "p.csv"))
        self.assertIn("ranks are not 0..1", str(cm.exception))

    def test_profiling_mode_from_python(self):
        with ergon.Gpu("sim:a100:bert-large:4") as g:
            c = ergon.Client(g, device=2, rank=2, flags=ergon.CLIENT_NO_SIGNALS)

            def iteration(client):
                for kind in (ergon.FORWARD, ergon.BACKWARD):
                    client.instruction_begin(kind, 0)
                    time.sleep(g.sim_set_activity(2, True, kind))
                    g.sim_set_activity(2, False)
                    client.instruction_end(kind, 0)

            out = os.path.join(self.dir, "p.csv")
            pb = c.profile(2, iteration, min_freq_mhz=1380, iters=1, blocking_s=0.2, out_csv=out)
            self.assertAlmostEqual(pb, 83.64, delta=2.0)
            with open(out) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual(sorted({r["frequency"] for r in rows}), ["1380", "1395", "1410"])
            self.assertEqual({r["stage"] for r in rows}, {"2"})

            def broken(client):
                raise ValueError("boom")
            with self.assertRaises(ValueError):
                c.profile(2, broken, min_freq_mhz=1380, iters=1, blocking_s=0)
            c.close()

    def test_sim_profile(self):
        out = os.path.join(self.dir, "sim.csv")
        ergon.sim_profile("a100", "gpt3-xl", 4, out)
        with open(out) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 4 * 2 * 38)

    def test_int_arguments_beyond_c_int_raise_value_error(self):
        # Issue 15 item 17: ctypes keeps the low 32 bits, so lock_sm_clock(0, 2**32 + 1200)
        # locked 1200 MHz. Every int argument is checked against its C type first.
        with ergon.Gpu("sim:a100:bert-large:2") as g:
            for bad in (2 ** 32 + 1200, 2 ** 31, -2 ** 31 - 1, 2 ** 64 + 1410):
                with self.assertRaises(ValueError) as cm:
                    g.lock_sm_clock(0, bad)
                self.assertIn("mhz = %d is out of range" % bad, str(cm.exception))
            with self.assertRaises(ValueError):
                g.lock_sm_clock(2 ** 32, 1410)      # device 0 after truncation
            with self.assertRaises(ValueError):
                g.energy_mj(2 ** 32 + 1)
            with self.assertRaises(ValueError):
                g.name(-2 ** 32)
            with self.assertRaises(TypeError):
                g.lock_sm_clock(0, "1200")
            # a valid clock still locks, an unsupported one is libergon's error
            g.lock_sm_clock(0, 1410)
            with self.assertRaises(ergon.ErgonError):
                g.lock_sm_clock(0, 1201)
            with self.assertRaises(ValueError):
                ergon.Client(g, device=0, rank=2 ** 32 + 1, flags=ergon.CLIENT_NO_SIGNALS)
            with self.assertRaises(ValueError):
                ergon.Client(g, device=0, rank=0, flags=2 ** 32 + ergon.CLIENT_NO_SIGNALS)
            with ergon.Client(g, device=1, rank=1, flags=ergon.CLIENT_NO_SIGNALS) as c:
                with self.assertRaises(ValueError):
                    c.set_uniform_clock(2 ** 32 + 1200)
                with self.assertRaises(ValueError):
                    c.instruction_begin(ergon.FORWARD, 2 ** 32)
                with self.assertRaises(ValueError):
                    c.load_plan(os.path.join(self.dir, "none.py"), 2 ** 32 + 1)
        with self.assertRaises(ValueError):
            ergon.Schedule("ours", [2 ** 32 + 1, 0])
        with self.assertRaises(ValueError):
            ergon.Schedule("1f1b", max_inflight=2 ** 32)
        with self.assertRaises(ValueError):
            ergon.schedule_order("1f1b", 2 ** 32 + 2, 4, 0)
        with self.assertRaises(ValueError):
            ergon.sim_profile("a100", "gpt3-xl", 2 ** 32 + 4, os.path.join(self.dir, "x.csv"))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x.csv")))

    def test_gpu_closed_before_client_is_safe(self):
        g = ergon.Gpu("sim:a100")
        c = ergon.Client(g, flags=ergon.CLIENT_NO_SIGNALS)
        g.close()  # closes the client first
        with self.assertRaises(ergon.ErgonError):
            c.step_begin()

    @needs(os.environ.get("ERGON_FAKE_NVML"), "fake NVML not built")
    def test_fake_nvml_permission_error(self):
        os.environ["ERGON_NVML_LIBRARY"] = os.environ["ERGON_FAKE_NVML"]
        os.environ["FAKE_NVML_DENY"] = "1"
        try:
            with ergon.Gpu("nvml") as g:
                with self.assertRaises(ergon.ErgonError) as cm:
                    g.lock_sm_clock(0, 1410)
                self.assertEqual(cm.exception.name, "EPERM")
                self.assertIn("Insufficient Permissions", str(cm.exception))
        finally:
            del os.environ["FAKE_NVML_DENY"]

    @needs(os.environ.get("ERGON_FAKE_NVML") and os.geteuid() == 0,
           "fake NVML not built, or not root (its setters need euid 0)")
    def test_keyboard_interrupt_survived_then_clients_work(self):
        """SIGINT in a Python program with two clients' worth of GPUs: the GPU is reset, then
        Python's own handler runs and interrupts the main thread's sleep (KeyboardInterrupt,
        caught); the same clock asked again is applied; a later client works; SIGTERM
        afterwards kills the process (default action) with every GPU reset."""
        state = os.path.join(self.dir, "gpu.state")
        script = r"""
import os, signal, sys, time
import ergon
state = sys.argv[1]
def clock(dev):
    try:
        for line in open(state):
            f = line.split()
            if int(f[0]) == dev:
                return int(f[2])
    except FileNotFoundError:
        pass
    return 0
g = ergon.Gpu("nvml")
a = ergon.Client(g, device=0, rank=0)
a.set_uniform_clock(1005); a.sync()
assert clock(0) == 1005, clock(0)
t0 = time.monotonic()
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(10)
    sys.exit("no KeyboardInterrupt")
except KeyboardInterrupt:
    pass
took = time.monotonic() - t0
assert took < 3, "the sleep was not interrupted: %.1f s" % took
assert clock(0) == 0, "GPU 0 not reset before KeyboardInterrupt: %d" % clock(0)
assert a.active_clock == 0
a.set_uniform_clock(1005); a.sync()
assert clock(0) == 1005 and a.active_clock == 1005, "repeated request dropped"
b = ergon.Client(g, device=1, rank=1)
b.set_uniform_clock(1200); b.sync(); time.sleep(0.2)
assert clock(1) == 1200 and clock(0) == 1005, (clock(0), clock(1))
print("ready", flush=True)
time.sleep(30)
"""
        env = dict(os.environ, ERGON_NVML_LIBRARY=os.environ["ERGON_FAKE_NVML"],
                   FAKE_NVML_STATE=state, FAKE_NVML_DEVICES="2")
        env.pop("FAKE_NVML_DENY", None)
        p = subprocess.Popen([sys.executable, "-c", script, state], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = p.stdout.readline()
            if line.strip() != "ready":
                p.kill()
                self.fail("the program failed: %s %s" % (line, p.communicate(timeout=30)))
            p.send_signal(15)
            p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        p.stdout.close()
        p.stderr.close()
        self.assertEqual(p.returncode, -15)
        with open(state) as f:
            self.assertEqual([l.split()[2] for l in f], ["0", "0"])

    def test_pipelining_stage_wrapper_zbv(self):
        """A stand-in for torch.distributed.pipelining stages (Debian's torch is 1.13):
        the wrapper makes each F, I, W of a ZBV rank run at its planned clock."""
        # ergon schedule zbv --ranks 2 --microbatches 2, rank 1:
        order1 = "1F0 2F0 1F1 2F1 2I0 2W0 1I0 1W0 2I1 2W1 1I1 1W1".split()
        order0 = "0F0 0F1 3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 0I1 0W1".split()
        clocks1 = [1410 - 15 * k for k in range(len(order1))]
        plan = {"format": "ergon-plan", "version": 1, "schedule": "zbv", "num_chunks": 2,
                "num_stages": 2, "num_microbatches": 2,
                "stages": [{"stage": 0, "order": order0, "freq_mhz": [1410] * 12},
                           {"stage": 1, "order": order1, "freq_mhz": clocks1}]}
        path = os.path.join(self.dir, "zbv.json")
        with open(path, "w") as f:
            json.dump(plan, f)
        seen = []

        class Stage:  # the method names and signatures of _PipelineStageBase
            def __init__(self, stage_index, client):
                self.stage_index = stage_index
                self.client = client

            def _record(self, kind, mb):
                self.client.sync()
                seen.append(("%d%s%d" % (self.stage_index, kind, mb), self.client.active_clock))

            def forward_one_chunk(self, fwd_chunk_id, args, kwargs=None, save_forward_output=True):
                self._record("F", fwd_chunk_id)

            def backward_one_chunk(self, bwd_chunk_id, loss=None, full_backward=True,
                                   last_backward=False):
                self._record("B" if full_backward else "I", bwd_chunk_id)

            def backward_weight_one_chunk(self, bwd_chunk_id, last_backward=False):
                self._record("W", bwd_chunk_id)

        with ergon.Gpu("sim:a100:gpt3-xl:2") as g, \
                ergon.Client(g, device=0, rank=1, flags=ergon.CLIENT_NO_SIGNALS) as c:
            c.load_plan(path, 1)
            stages = {2: Stage(2, c), 1: Stage(1, c)}
            hooks = PipeliningStageHooks(c, list(stages.values()))
            with hooks.step():
                for a in order1:  # what PyTorch's runtime calls for these actions
                    st, kind, mb = int(a[0]), a[1], int(a[2:])
                    if kind == "F":
                        stages[st].forward_one_chunk(mb, ())
                    elif kind == "I":
                        stages[st].backward_one_chunk(mb, loss=None, full_backward=False)
                    else:
                        stages[st].backward_weight_one_chunk(mb, last_backward=False)
        self.assertEqual([a for a, _ in seen], order1)
        self.assertEqual([f for _, f in seen], clocks1)
        self.assertIsNotNone(hooks.last_step)

    def test_receive_waits_through_hooks(self):
        """hooks.recv() times a receive; the wait goes to the next instruction begun; the
        step's lists are hooks.last_waits (EnvPipe's wait_breakdown)."""
        g = ergon.Gpu("sim:a100:bert-large:2")
        c = ergon.Client(g, device=1, rank=1, flags=ergon.CLIENT_NO_SIGNALS)
        hooks = PipelineHooks(c)
        fwd = hooks.forward(lambda: None)
        bwd = hooks.backward(lambda: None)
        with hooks.step():
            with hooks.recv():
                time.sleep(0.03)
            fwd()
            fwd()                      # no receive before it: 0
            with hooks.recv():
                time.sleep(0.01)
            bwd()
            bwd()
        w = hooks.last_waits
        self.assertEqual(sorted(w), ["backward", "forward"])
        self.assertEqual(len(w["forward"]), 2)
        self.assertGreaterEqual(w["forward"][0], 0.029)
        self.assertEqual(w["forward"][1], 0.0)
        self.assertGreaterEqual(w["backward"][0], 0.009)
        self.assertLess(w["backward"][0], w["forward"][0])
        self.assertEqual(w["backward"][1], 0.0)
        with self.assertRaises(ergon.ErgonError):
            c.recv_end()
        with self.assertRaises(ergon.ErgonError):
            c.add_wait(-1.0)
        c.close()
        g.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
