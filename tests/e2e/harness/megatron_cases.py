#!/usr/bin/env python3
"""megatron_cases.py: examples/megatron_pipeline/train.py as the e2e tests run it, several
cases in one launch (not a test itself).

The example trains one schedule per launch; tests/e2e/megatron_pipeline.sh compares 1F1B and
interleaved 1F1B, several M, all-max and planned clocks, from the same weights, with one
client log across all of them. This wrapper imports the example (its options, model,
build_pipeline, train, process group, GPU and client) and runs, in place of its run_train:

  --case SCHED,M[,PLAN] (repeatable): SCHED 1f1b or interleaved (V = --chunks), M
      microbatches, PLAN an ergon JSON plan whose clocks the client applies (default: all-max).

Cases with the same V share one model-parallel set-up and start from the same weights. Each
rank writes {"rank", "P", "cases": [...]} to OUT/result-RANK.json (the example's file).

    torchrun --nproc-per-node P tests/e2e/harness/megatron_cases.py --case ... [train.py OPTIONS]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "examples", "megatron_pipeline"))
import train as T  # noqa: E402  the example


def parse_cases(argv):
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--case", action="append", required=True, help="SCHED,M[,PLAN]")
    a, rest = p.parse_known_args(argv)
    cases = []
    for spec in a.case:
        f = spec.split(",")
        if f[0] not in ("1f1b", "interleaved"):
            raise SystemExit("--case: schedule %r is not 1f1b or interleaved" % f[0])
        cases.append({"schedule": f[0], "M": int(f[1]), "plan": f[2] if len(f) > 2 else ""})
    return cases, rest


def run_cases(cases, args, client, gpu, rank, P):
    top = max(gpu.sm_clocks(rank))
    chunks = {c["schedule"]: 1 if c["schedule"] == "1f1b" else args.chunks for c in cases}
    results = []
    for V in sorted(set(chunks.values())):
        model, fb = T.build_pipeline(args, P, rank, V)
        init = [{k: v.clone() for k, v in m.state_dict().items()} for m in model]
        hooks = T.MegatronHooks(client)
        fb = hooks.wrap(fb)
        for c in [c for c in cases if chunks[c["schedule"]] == V]:
            for m, st in zip(model, init):
                m.load_state_dict(st)
            results.append(dict(T.train(args, client, hooks, fb, model, c["M"], c["plan"], top),
                                schedule=c["schedule"]))
        T.parallel_state.destroy_model_parallel()
    return {"rank": rank, "P": P, "cases": results}


def main(argv=None):
    cases, rest = parse_cases(sys.argv[1:] if argv is None else argv)
    # The example's main() sets up the process group, GPU and client, closes them on every
    # path and writes OUT/result-RANK.json; its run_train is replaced by the cases.
    T.run_train = lambda args, client, gpu, rank, P: run_cases(cases, args, client, gpu,
                                                               rank, P)
    return T.main(rest)


if __name__ == "__main__":
    sys.exit(main())
