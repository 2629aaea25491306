/* baselines.h: the baselines a plan is compared with: Zeus global and per-stage, uniform and
 * all-max, emulated with profiled values (planner/baselines.c). */
#ifndef ERGON_BASELINES_H
#define ERGON_BASELINES_H

#include "ergon/ergon.h"
#include "ergon/gpu_table.h"
#include "ergon/pipeline.h"
#include "ergon/plan.h"
#include "ergon/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct erg_baseline_opts {
    double blocking_power_w;   /* Required, >= 0. */
    double eta;                /* Zeus's knob in eta*E + (1-eta)*P_max*T (default 0.5). */
    double max_power_w;        /* P_max; 0 = the GPU's, else the highest average power of
                                  any profiled instruction. */
    const erg_gpu_spec *gpu;   /* Optional (P_max). */
    erg_schedule schedule;     /* Default 1F1B. */
    double power_limit_step_w; /* zeus-global: > 0 = choose one power limit instead of one
                                  clock, trying limits step, 2 step, ... up to P_max; under a
                                  limit each instruction runs at its highest clock whose
                                  average power (energy / time) fits. */
    double power_limit_w;      /* power-limit: the per-GPU limit (> 0). */
} erg_baseline_opts;

ERG_API void erg_baseline_opts_init(erg_baseline_opts *opts);

/* zeus-global: one clock for every GPU (the clocks every stage has), or one
 * power limit (power_limit_step_w > 0), the one with the lowest Zeus cost. */
ERG_API erg_status erg_plan_zeus_global(const erg_profile *profile, int num_stages,
                                        int num_microbatches, const erg_baseline_opts *opts,
                                        erg_plan **out, erg_error *err);
/* zeus-stage: one clock per stage. For each clock of the heaviest stage, every
 * other stage takes its lowest clock that keeps pace with it (forward +
 * backward no longer than the heaviest stage's); the lowest Zeus cost wins. */
ERG_API erg_status erg_plan_zeus_stage(const erg_profile *profile, int num_stages,
                                       int num_microbatches, const erg_baseline_opts *opts,
                                       erg_plan **out, erg_error *err);
/* uniform: every stage at its energy-minimal clock (the bottom of the stage's
 * energy valley with the whole pipeline at that clock level). */
ERG_API erg_status erg_plan_uniform(const erg_profile *profile, int num_stages,
                                    int num_microbatches, const erg_baseline_opts *opts,
                                    erg_plan **out, erg_error *err);
/* power-limit: every GPU capped at opts->power_limit_w (`nvidia-smi -pl`, Zeus's
 * GlobalPowerLimitOptimizer): each instruction runs at its highest clock whose profiled average
 * power (energy / time) is within the limit, the lowest clock when none is (docs/fleet.md).
 * The plan's method names the limit and, when some instruction's lowest clock still draws more,
 * says "(over at the lowest clock)". */
ERG_API erg_status erg_plan_power_limit(const erg_profile *profile, int num_stages,
                                        int num_microbatches, const erg_baseline_opts *opts,
                                        erg_plan **out, erg_error *err);
/* all-max: every instruction at its stage's highest profiled clock. */
ERG_API erg_status erg_plan_all_max(const erg_profile *profile, int num_stages,
                                    int num_microbatches, const erg_schedule *sched,
                                    double blocking_power_w, erg_plan **out, erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
