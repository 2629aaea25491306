#!/usr/bin/env bash
# The energy story of e2e_schedules_energy.sh on looped-bfs (P=4, V=2, M=4; PyTorch's
# ScheduleLoopedBFS): losses bitwise identical to all-max, planned energy below all-max within
# the 1% budget, measured time and energy within 5% of `ergon emulate`.
SCHED=looped-bfs exec bash "$(dirname "$0")/e2e_schedules_energy.sh"
