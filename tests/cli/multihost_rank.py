#!/usr/bin/env python3
"""multihost_rank.py: one training rank for tests/cli/multihost_faults.sh (not a test itself).

A rank as a training loop runs it against `ergon serve` (the /v1 API through
ergon.server_client) with its GPU behind the host's ergond (`daemon:SOCKET`): rank 0 registers
the job and hands its id to the others through a file (a trainer broadcasts it with
torch.distributed); every rank registers, then per window: fetch the schedule (barrier), apply
each instruction's clock through ergon.Client (as the hooks do) and wait until it is applied,
then "train" -- a heartbeat every 0.2 s, as a trainer sends one per iteration -- until the test
creates CTL/go.WINDOW.HOST, then report the window's result. Every line it prints is a fact the
test checks: "registered", "window W clock C" (clocks applied), "acked W" (the server
acknowledged the result), "job done", "server error: ..." / "gpu error: ...", "exit N at T"
(T: epoch seconds, after the clocks were reset).

On any error it closes its client (which resets its clocks through ergond) and exits 3 (server)
or 4 (GPU/ergond); on SIGKILL ergond's lease resets them.
"""

import argparse
import os
import sys
import time

import ergon
from ergon.server_client import ServerClient, ServerError

NO_ENERGY = 4  # ERG_CLIENT_NO_ENERGY: no 2 ms energy sampling through ergond (not needed here)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--job-file", required=True)
    p.add_argument("--ctl", required=True, help="directory of the test's go.WINDOW.HOST files")
    p.add_argument("--host", required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--pp-rank", type=int, required=True)
    p.add_argument("--dp-rank", type=int, required=True)
    p.add_argument("--pp", type=int, required=True)
    p.add_argument("--dp", type=int, required=True)
    p.add_argument("--gpu", required=True, help="back-end spec, e.g. daemon:/run/ergond.sock")
    p.add_argument("--device", type=int, required=True)
    p.add_argument("--request-timeout", type=float, required=True)
    p.add_argument("--max-retries", type=int, required=True)
    p.add_argument("--backoff-max", type=float, required=True)
    p.add_argument("--schedule-wait", type=float, required=True)
    p.add_argument("--schedule-timeout", type=float, required=True)
    a = p.parse_args()

    def say(msg):
        print("rank %d: %s" % (a.rank, msg), flush=True)

    gpu = ergon.Gpu(a.gpu)
    client = ergon.Client(gpu, device=a.device, rank=a.rank, flags=NO_ENERGY)
    sc = ServerClient(a.url, request_timeout_s=a.request_timeout, max_retries=a.max_retries,
                      backoff_initial_s=0.1, backoff_max_s=a.backoff_max,
                      schedule_wait_s=a.schedule_wait, schedule_timeout_s=a.schedule_timeout)
    rc = 0
    try:
        # Every rank is up before rank 0 registers the job, so that a slow start on a loaded
        # machine never counts against the server's --rank-timeout for registration.
        world = a.pp * a.dp
        if a.rank != 0:
            open(os.path.join(a.ctl, "ready.%d" % a.rank), "w").close()
        if a.rank == 0:
            deadline = time.monotonic() + 60
            while sum(os.path.exists(os.path.join(a.ctl, "ready.%d" % r))
                      for r in range(1, world)) < world - 1:
                if time.monotonic() > deadline:
                    raise SystemExit("rank 0: the other ranks did not start within 60 s")
                time.sleep(0.05)
            job = sc.register_job(pp_degree=a.pp, dp_degree=a.dp, framework="torch",
                                  model_name="multihost", partition_method="uniform",
                                  microbatch_size=1, num_microbatches=1)
            tmp = a.job_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(job)
            os.rename(tmp, a.job_file)
        else:
            deadline = time.monotonic() + 60
            while not os.path.exists(a.job_file):
                if time.monotonic() > deadline:
                    raise SystemExit("rank %d: no job id in %s after 60 s" % (a.rank, a.job_file))
                time.sleep(0.05)
            with open(a.job_file) as f:
                job = f.read().strip()
        sc.register_rank(job, rank=a.rank, dp_rank=a.dp_rank, pp_rank=a.pp_rank, tp_rank=0,
                         pipe_schedule=["forward", "backward"],
                         power_states=gpu.sm_clocks(a.device))
        say("registered")
        while True:
            got = sc.fetch_schedule(job, a.rank)
            if got is None:
                say("job done")
                break
            window, states = got
            for s in states:  # one clock per instruction, in order, as the hooks apply them
                client.set_uniform_clock(s)
                client.sync(10.0)
            say("window %d clock %d" % (window, client.active_clock))
            go = os.path.join(a.ctl, "go.%d.%s" % (window, a.host))
            while not os.path.exists(go):
                sc.heartbeat(job, a.rank)
                time.sleep(0.2)
            sc.report(job, window, a.rank,
                      [(0.5, 100.0, {"forward": [(0.2, 40.0)], "backward": [(0.3, 60.0)]})])
            say("acked %d" % window)
    except ServerError as e:
        say("server error: %s" % e)
        rc = 3
    except ergon.ErgonError as e:
        say("gpu error: %s" % e)
        rc = 4
    finally:
        sc.close()
        try:
            client.close()  # resets the clocks through ergond
        except ergon.ErgonError as e:
            say("close: %s" % e)
            rc = rc or 4
        say("exit %d at %.3f" % (rc, time.time()))
    return rc


if __name__ == "__main__":
    sys.exit(main())
