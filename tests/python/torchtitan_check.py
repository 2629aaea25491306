"""torchtitan_check.py: one rank of the torchtitan test (tests/e2e/torchtitan_pipeline.sh starts 4
of them with examples/pytorch_pipeline/launch.py).

For each case of the JSON file argv[1] ({"name", "args", "settings"}): torchtitan's own
ConfigManager parses the case's torchtitan arguments with ergon's override added
(ergon.integration.torchtitan.with_override: what `python -m ergon.integration.torchtitan`
does), torchtitan's own Trainer is built, trains and is closed -- torchtitan.train.main()'s
body, run for every case in one process so that the ranks pay Python's and torch's start-up
once. ergon's hooks record what they saw under the case's settings["out"]; the shell test
checks those files. Rank 0 prints one line per case.

A case's "straggler" (a list of {"window": W, "slowdown": X}) sets straggler targets on a
Frontier job while it runs, through the server's API (POST /v1/jobs/ID/straggler): rank 0,
after the last step of window W and before it reports that window, posts the target. Window W
cannot complete before rank 0 reports it, so the server schedules every window after W for
the new target (applies_from_window = W + 1, synchronised on windows, not on time). The
server's answers go to settings["out"]/straggler.json."""
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from ergon.integration import torchtitan as tt  # noqa: E402  (before torchtitan: CPU shim)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torchtitan.config import ConfigManager  # noqa: E402
from torchtitan.tools.logging import init_logger  # noqa: E402


def _post_targets(job, targets, out):
    """Wrap the server job's after_step on rank 0 (see the module docstring)."""
    orig, todo, answers = job.after_step, list(targets), []

    def after_step(*args, **kwargs):
        if todo and job.left == 1 and job.window == todo[0]["window"]:
            t = todo.pop(0)
            code, text = job.sc.request("POST", "/v1/jobs/%s/straggler" % job.job,
                                        json.dumps({"slowdown": t["slowdown"]}))
            if code != 200:
                raise RuntimeError("straggler target %s: HTTP %d %s" % (t, code, text))
            answers.append(dict(t, answer=json.loads(text)))
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "straggler.json"), "w") as f:
                json.dump(answers, f, indent=1)
        return orig(*args, **kwargs)
    job.after_step = after_step


def main():
    cases = json.load(open(sys.argv[1]))
    init_logger()
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    for c in cases:
        t0 = time.monotonic()
        config = ConfigManager().parse_args(
            tt.with_override(c["args"], c["settings"], cpu=tt._cpu_only()))
        trainer = config.build()
        if c.get("straggler") and rank == 0:
            _post_targets(trainer.ergon.server, c["straggler"], c["settings"]["out"])
        try:
            trainer.train()
        finally:
            trainer.close()
        dist.barrier()
        if rank == 0:
            print("case %s: %.1f s" % (c["name"], time.monotonic() - t0), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
