"""ErgonSchedule (ergon.integration.deepspeed) against DeepSpeed's real instruction classes,
without launching ranks: for every EnvPipe order ergon accepts (S 2..6, M S..2S+1, every r_s
combination up to a bound), the per-stage instruction lists are run through a simulator of
blocking rendezvous P2P (a send completes only together with the matching receive, as gloo's
does) and must finish; each stage computes exactly its libergon order; every receive matches
the send of the same buffer; a RecvGrad is followed by its BackwardPass with no other receive
between (DeepSpeed's single grad_layer); the last stage's BackwardPass follows its own
ForwardPass (DeepSpeed's self.loss). The simulator is shown to catch a deadlock: the naive
order (send right after producing, receive right before consuming) deadlocks on `ours`."""
import itertools
import os
import sys
import unittest

os.environ.setdefault("DS_ACCELERATOR", "cpu")
from deepspeed.runtime.pipe import schedule as ds  # noqa: E402

import ergon  # noqa: E402
from ergon.integration.deepspeed import ErgonSchedule  # noqa: E402

SEND = {ds.SendActivation: (+1, "act"), ds.SendGrad: (-1, "grad")}
RECV = {ds.RecvActivation: (-1, "act"), ds.RecvGrad: (+1, "grad")}


def flatten(sched):
    return [c for step in sched.steps() for c in step]


def run_rendezvous(progs):
    """Run per-stage instruction lists with blocking rendezvous P2P; None if all finish,
    else the stuck heads."""
    S = len(progs)
    pos = [0] * S
    while True:
        moved = False
        for s in range(S):
            while pos[s] < len(progs[s]) and type(progs[s][pos[s]]) not in SEND \
                    and type(progs[s][pos[s]]) not in RECV:
                pos[s] += 1
                moved = True
        for s in range(S):
            if pos[s] >= len(progs[s]) or type(progs[s][pos[s]]) not in SEND:
                continue
            d, what = SEND[type(progs[s][pos[s]])]
            p = s + d
            if pos[p] < len(progs[p]):
                c = progs[p][pos[p]]
                if type(c) in RECV and RECV[type(c)] == (-d, what) and \
                        c.kwargs["buffer_id"] == progs[s][pos[s]].kwargs["buffer_id"]:
                    pos[s] += 1
                    pos[p] += 1
                    moved = True
        if all(pos[s] >= len(progs[s]) for s in range(S)):
            return None
        if not moved:
            return [progs[s][pos[s]] if pos[s] < len(progs[s]) else None for s in range(S)]


def naive(orders, S):
    """Send right after producing, receive right before consuming (deadlocks on ours)."""
    progs = []
    for s, order in enumerate(orders):
        p = []
        for kind, mb in order:
            if kind == ergon.FORWARD:
                if s > 0:
                    p.append(ds.RecvActivation(buffer_id=mb))
                p.append(ds.ForwardPass(buffer_id=mb))
                if s < S - 1:
                    p.append(ds.SendActivation(buffer_id=mb))
            else:
                if s < S - 1:
                    p.append(ds.RecvGrad(buffer_id=mb))
                p.append(ds.BackwardPass(buffer_id=mb))
                if s > 0:
                    p.append(ds.SendGrad(buffer_id=mb))
        progs.append(p)
    return progs


def ours_cases(max_cases_per=40):
    for S in range(2, 7):
        for M in range(S, 2 * S + 2):
            n = 0
            for r in itertools.product(range(0, M), repeat=S - 1):
                sched = ergon.Schedule("ours", list(r) + [0])
                try:
                    ergon.schedule_order(sched, S, M, 0)
                except ergon.ErgonError:
                    continue            # an order ergon refuses (it would deadlock anywhere)
                yield S, M, sched
                n += 1
                if n >= max_cases_per:
                    break


class ErgonScheduleTest(unittest.TestCase):
    def check(self, S, M, sched):
        progs = [flatten(ErgonSchedule(M, S, s, sched)) for s in range(S)]
        stuck = run_rendezvous(progs)
        self.assertIsNone(stuck, "S=%d M=%d %r deadlocks at %s" % (S, M, sched, stuck))
        for s, prog in enumerate(progs):
            comp = [(ergon.FORWARD if type(c) is ds.ForwardPass else ergon.BACKWARD,
                     c.kwargs["buffer_id"]) for c in prog
                    if type(c) in (ds.ForwardPass, ds.BackwardPass)]
            self.assertEqual(comp, ergon.schedule_order(sched, S, M, s))
            for i, c in enumerate(prog):
                if type(c) is ds.RecvGrad:
                    nxt = [x for x in prog[i + 1:] if type(x) in (ds.BackwardPass,
                                                                 ds.RecvGrad, ds.RecvActivation)]
                    self.assertIs(type(nxt[0]), ds.BackwardPass)
                    self.assertEqual(nxt[0].kwargs["buffer_id"], c.kwargs["buffer_id"])
            self.assertIs(type(prog[-1]), ds.OptimizerStep)
            if s == S - 1:
                last_f = None
                for c in prog:
                    if type(c) is ds.ForwardPass:
                        last_f = c.kwargs["buffer_id"]
                    elif type(c) is ds.BackwardPass:
                        self.assertEqual(c.kwargs["buffer_id"], last_f)

    def test_1f1b(self):
        for S in range(2, 7):
            for M in (1, S - 1, S, 2 * S + 1):
                if M >= 1:
                    self.check(S, M, ergon.Schedule("1f1b"))

    def test_ours_every_accepted_r(self):
        n = 0
        for S, M, sched in ours_cases():
            self.check(S, M, sched)
            n += 1
        self.assertGreater(n, 300)

    def test_simulator_catches_the_naive_deadlock(self):
        S, M = 4, 8
        sched = ergon.Schedule("ours", [4, 3, 1, 0])
        orders = [ergon.schedule_order(sched, S, M, s) for s in range(S)]
        self.assertIsNotNone(run_rendezvous(naive(orders, S)))

    def test_refusals(self):
        with self.assertRaises(ValueError):
            ErgonSchedule(4, 4, 0, ergon.Schedule("zbv"))
        with self.assertRaises(ergon.ErgonError):
            ErgonSchedule(2, 4, 0, ergon.Schedule("ours", [1, 1, 1, 0]))   # M < S


if __name__ == "__main__":
    unittest.main(verbosity=1)
