#!/usr/bin/env bash
# deepspeed_schedule.sh: ErgonSchedule's instruction lists against DeepSpeed's real instruction
# classes, no ranks launched (tests/e2e/test_deepspeed_schedule.py): every accepted EnvPipe
# order and 1F1B finishes under blocking rendezvous P2P, computes libergon's order, keeps
# DeepSpeed's buffer rules; the simulator catches the naive order's deadlock.
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv deepspeed
cd "$ERGON_SRC/tests/e2e" || exit 1
"$VPY" -m unittest -v test_deepspeed_schedule 2>&1 | grep -v "real_accelerator"
exit "${PIPESTATUS[0]}"
