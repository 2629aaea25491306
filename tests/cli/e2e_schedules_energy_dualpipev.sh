#!/usr/bin/env bash
# The energy story of e2e_schedules_energy.sh on dualpipev (P=4, V=2, M=8: DualPipeV needs
# M >= 2P; PyTorch's ScheduleDualPipeV, its OVERLAP_F_B steps as PyTorch runs them): losses
# bitwise identical to all-max, planned energy below all-max within the 1% budget, measured
# time and energy within 5% of `ergon emulate`.
M=8 SCHED=dualpipev exec bash "$(dirname "$0")/e2e_schedules_energy.sh"
