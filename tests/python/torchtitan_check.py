"""torchtitan_check.py: one rank of the torchtitan test (tests/e2e/torchtitan_pipeline.sh starts 4
of them with examples/pytorch_pipeline/launch.py).

For each case of the JSON file argv[1] ({"name", "args", "settings"}): torchtitan's own
ConfigManager parses the case's torchtitan arguments with ergon's override added
(ergon.integration.torchtitan.with_override: what `python -m ergon.integration.torchtitan`
does), torchtitan's own Trainer is built, trains and is closed -- torchtitan.train.main()'s
body, run for every case in one process so that the ranks pay Python's and torch's start-up
once. ergon's hooks record what they saw under the case's settings["out"]; the shell test
checks those files. Rank 0 prints one line per case."""
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
