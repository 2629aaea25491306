#!/usr/bin/env python3
"""deepspeed_cases.py: examples/deepspeed_pipeline/train.py as the e2e tests run it, several
cases in one launch (not a test itself).

The example trains one configuration per launch; a test compares many (schedules, M, clocks)
on the same initial weights without paying DeepSpeed's start-up for each. This wrapper imports
the example (its options, engine, clock set-up, process group, GPU and client) and runs, in
place of its training loop:

  --case SCHED,M[,PLAN[,CLOCK]] (repeatable): SCHED deepspeed (its TrainSchedule) | 1f1b |
      ours (r_s from PLAN), CLOCK max (default) | plan (PLAN's clocks);
  --case-steps N: batches per case (default 2); --model may be a comma list: every case for
      each model, then one eval_batch outside the hooks.

Each rank writes what its hooks saw (order per batch), the losses, the time and energy and the
simulated GPU's accounting to OUT/cases-RANK.json (tests/e2e/deepspeed_pipeline.sh,
tests/e2e/deepspeed_envpipe_online.sh).

    torchrun --nproc-per-node S tests/e2e/harness/deepspeed_cases.py --case ... [train.py OPTIONS]
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "examples", "deepspeed_pipeline"))
import train as T  # noqa: E402  the example

ergon, eds, dist, models = T.ergon, T.eds, T.dist, T.models


def parse_cases(argv):
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--case", action="append", required=True, help="SCHED,M[,PLAN[,CLOCK]]")
    p.add_argument("--case-steps", type=int, default=2)
    a, rest = p.parse_known_args(argv)
    cases = []
    for spec in a.case:
        f = spec.split(",")
        cases.append({"schedule": f[0], "M": int(f[1]), "plan": f[2] if len(f) > 2 else "",
                      "clock": f[3] if len(f) > 3 else "max"})
    return cases, a.case_steps, rest


def run_case(args, engine, hooks, data, client, gpu, rank, c, steps):
    engine.set_train_batch_size(args.microbatch_size * c["M"])
    sched = None
    if c["schedule"] != "deepspeed":
        sched = ergon.Schedule(c["schedule"])
        if sched.kind == ergon.SCHED_ENVPIPE:
            sched = ergon.plan_schedule(c["plan"])[0]
    eds.use_ergon_schedule(engine, sched)
    T.apply_clock(client, gpu, rank, c["plan"] if c["clock"] == "plan" else "",
                  c["clock"] if c["clock"] != "plan" else "max")
    data.reset()
    orders, losses, times, energies, sims = [], [], [], [], []
    sync0, paced0, late0 = hooks.sync_wait_s, hooks.paced_s, hooks.late_s
    for _ in range(steps):
        loss = engine.train_batch(data)
        orders.append(hooks.last_order)
        losses.append(float(loss))
        times.append(hooks.last_step[0])
        energies.append(hooks.last_step[1])
        sims.append(hooks.last_sim)   # the simulated GPU's accounting (paced)
    return dict(c, extra_warmup=sched.extra_warmup[:engine.num_stages]
                if sched is not None else [], orders=orders,
                loss_hex=[x.hex() for x in losses], losses=losses, time_s=times,
                energy_j=energies, sim=sims, waits=hooks.last_waits,
                sync_wait_s=hooks.sync_wait_s - sync0, paced_s=hooks.paced_s - paced0,
                late_s=hooks.late_s - late0)


def run_cases(cases, steps, args, client, gpu, rank, out):
    """Every case for every model, each from the same initial weights."""
    results = []
    for name in args.model.split(","):
        engine = T.build_engine(args, name, cases[0]["M"])
        hooks = eds.instrument_deepspeed(engine, client, gpu=gpu, device=rank,
                                         pace=gpu.backend == "sim" and not args.no_pace)
        init = {k: v.clone() for k, v in engine.module.state_dict().items()}
        data = models.SyntheticData(args.microbatch_size, args.seed)
        for c in cases:
            engine.module.load_state_dict(init)
            r = run_case(args, engine, hooks, data, client, gpu, rank, c, steps)
            r["model"] = name
            results.append(r)
            if rank == 0:
                print("%-5s %-9s M=%d r=%-10s clock=%-4s losses %s  time %.3f s" % (
                    name, c["schedule"], c["M"], ",".join(map(str, r["extra_warmup"])),
                    c["clock"], " ".join("%.6f" % x for x in r["losses"]), sum(r["time_s"])),
                    flush=True)
        # eval_batch (DeepSpeed's InferenceSchedule) runs outside the hooks' steps: untouched.
        data.reset()
        before = hooks.last_order
        eval_loss = float(engine.eval_batch(data))
        if hooks.last_order is not before:
            raise SystemExit("eval_batch went through the training hooks")
        results.append({"model": name, "eval_loss": eval_loss})
    res = {"rank": rank, "stages": dist.get_world_size(), "overruns": hooks.overruns,
           "instructions": hooks.instructions, "cases": results}
    if out:
        with open(os.path.join(out, "cases-%d.json" % rank), "w") as f:
            json.dump(res, f, indent=1)
    return 0


def main(argv=None):
    cases, steps, rest = parse_cases(sys.argv[1:] if argv is None else argv)
    # The example's main() sets up the process group, GPU and client and closes them on
    # every path; its training loop is replaced by the cases.
    T.run_train = lambda args, client, gpu, rank, out: run_cases(cases, steps, args, client,
                                                                 gpu, rank, out)
    return T.main(rest)


if __name__ == "__main__":
    sys.exit(main())
