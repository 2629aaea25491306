/* emulate.h: iteration time and energy of a plan on a schedule, without GPUs. */
#ifndef ERGON_EMULATE_H
#define ERGON_EMULATE_H

#include "ergon/ergon.h"
#include "ergon/pipeline.h"
#include "ergon/plan.h"
#include "ergon/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Result of evaluating a plan with profiled values (lowtime-spec §6.2). */
typedef struct erg_emulation {
    double time_s;            /* Iteration time: longest path with profiled times. */
    double energy_j;          /* compute_energy_j + blocking_energy_j. */
    double compute_energy_j;  /* Sum of the profiled energy of every instruction. */
    double blocking_energy_j; /* p * sum over stages of (time_s - busy time). */
} erg_emulation;

/* Evaluate `plan` on `dag` (same S, M and schedule): each instruction takes
 * the profiled (time, energy) of its stage and kind at its clock; idle and
 * communication time of every stage draws blocking_power_w. Optional arrays
 * (num_instrs long, may be NULL) receive each instruction's start and
 * duration in seconds. ERG_ENOTFOUND names a clock missing from the profile. */
ERG_API erg_status erg_emulate(const erg_profile *profile, const erg_dag *dag,
                               const erg_plan *plan, double blocking_power_w,
                               erg_emulation *out, double *start_s, double *dur_s,
                               erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
