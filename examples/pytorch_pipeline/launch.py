#!/usr/bin/python3
"""launch.py: start N local ranks of a torch.distributed script with torchrun's environment
variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), under
a wall-clock timeout.

    python3 launch.py --nproc 4 [--timeout 120] [--kill-rank R --kill-after S] -- train.py ARGS

Like torchrun, when one rank fails the others are stopped (SIGTERM, then SIGKILL after a
grace period), so a dead rank never leaves the rest blocked. Exit status: 0 when every rank
exited 0; 124 on timeout (printed as a possible deadlock); otherwise the first failing
rank's status (128+signal for a signal). --kill-rank sends SIGKILL to one rank after
--kill-after seconds, or once --kill-when-file exists (for testing the clock-restore path).
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(procs, grace_s):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    end = time.monotonic() + grace_s
    for p in procs:
        while p.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        if p.poll() is None:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nproc", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL")
    ap.add_argument("--kill-rank", type=int, default=-1)
    ap.add_argument("--kill-after", type=float, default=0.0)
    ap.add_argument("--kill-when-file", default="",
                    help="with --kill-rank: kill once this file exists (instead of a delay)")
    ap.add_argument("script", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.script[1:] if a.script and a.script[0] == "--" else a.script
    if not cmd or a.nproc < 1:
        ap.error("usage: launch.py --nproc N [options] -- SCRIPT [ARGS]")
    env0 = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                WORLD_SIZE=str(a.nproc), LOCAL_WORLD_SIZE=str(a.nproc))
    procs = []
    for r in range(a.nproc):
        env = dict(env0, RANK=str(r), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen([sys.executable] + cmd, env=env))
    # SIGTERM/SIGHUP to the launcher stop the ranks too (never leave them orphaned).
    def on_signal(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    start = time.monotonic()
    killed = False
    rc = 0
    try:
        while True:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                bad = [c for c in codes if c != 0]
                rc = (128 - bad[0] if bad[0] < 0 else bad[0]) if bad else 0
                break
            bad = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if bad:
                r, c = bad[0]
                print("launch: rank %d exited with %s; stopping the others" % (r, c),
                      file=sys.stderr, flush=True)
                stop(procs, a.grace)
                rc = 128 - c if c < 0 else c
                break
            now = time.monotonic() - start
            if (a.kill_rank >= 0 and not killed and now >= a.kill_after
                    and (not a.kill_when_file or os.path.exists(a.kill_when_file))):
                print("launch: SIGKILL to rank %d" % a.kill_rank, file=sys.stderr, flush=True)
                procs[a.kill_rank].kill()
                killed = True
            if now > a.timeout:
                print("launch: TIMEOUT after %.0f s (deadlock?); stopping every rank" % a.timeout,
                      file=sys.stderr, flush=True)
                stop(procs, a.grace)
                rc = 124
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        print("launch: interrupted; stopping every rank", file=sys.stderr, flush=True)
        stop(procs, a.grace)
        rc = 130
    return rc


if __name__ == "__main__":
    sys.exit(main())
