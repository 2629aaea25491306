/* envpipe.h: the EnvPipe planner (real and Perseus-emulation variants). The GPU clock table
 * it reads is gpu_table.h; the Zeus, uniform and all-max baselines are baselines.h. */
#ifndef ERGON_ENVPIPE_H
#define ERGON_ENVPIPE_H

#include "ergon/ergon.h"
#include "ergon/gpu_table.h"
#include "ergon/pipeline.h"
#include "ergon/plan.h"
#include "ergon/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- EnvPipe ---- */

typedef enum erg_envpipe_type {
    ERG_ENVPIPE_BASELINE = 0, /* Every unit at the max clock; no profiling, r = 0. */
    ERG_ENVPIPE_UNIFORM = 1,  /* Every unit of a stage at the stage's energy-optimal clock. */
    ERG_ENVPIPE_ENVELOPE = 2, /* Optimal clocks inside, the outer envelope at max. */
} erg_envpipe_type;

typedef enum erg_envpipe_reconfig {
    ERG_RECONFIG_DEFAULT = 0,  /* No reconfiguration. */
    ERG_RECONFIG_GREEDY = 1,   /* Raise the latest non-max unit of the critical path. */
    ERG_RECONFIG_BALANCED = 2, /* Raise every critical unit at the path's lowest clock. */
} erg_envpipe_reconfig;

typedef enum erg_envpipe_variant {
    ERG_ENVPIPE_REAL = 0,              /* EnvPipe as the ATC'23 artifact runs it. */
    ERG_ENVPIPE_PERSEUS_EMULATION = 1, /* Perseus's scripts/envpipe.py (docs/envpipe.md). */
} erg_envpipe_variant;

/* "baseline"/"uniform"/"envelope", "default"/"greedy"/"balanced",
 * "envpipe"/"perseus-emulation"; ERG_EINVAL otherwise. */
ERG_API erg_status erg_envpipe_type_parse(const char *s, erg_envpipe_type *out, erg_error *err);
ERG_API erg_status erg_envpipe_reconfig_parse(const char *s, erg_envpipe_reconfig *out,
                                              erg_error *err);
ERG_API erg_status erg_envpipe_variant_parse(const char *s, erg_envpipe_variant *out,
                                             erg_error *err);
ERG_API const char *erg_envpipe_type_name(erg_envpipe_type t);
ERG_API const char *erg_envpipe_reconfig_name(erg_envpipe_reconfig r);

/* Called after every reconfiguration iteration with the current plan and its
 * grid in EnvPipe's printed format (erg_envpipe_format_grid). Return non-zero
 * to cancel (the planner returns ERG_ECANCELED). */
typedef int (*erg_envpipe_iter_fn)(void *user, int iteration, const erg_plan *plan,
                                   const char *grid);

/* Options; initialise with erg_envpipe_opts_init (full EnvPipe:
 * envelope / ours / balanced) and set blocking_power_w. */
typedef struct erg_envpipe_opts {
    erg_envpipe_variant variant;
    erg_envpipe_type type;
    erg_schedule_kind schedule; /* ERG_SCHED_1F1B or ERG_SCHED_ENVPIPE ("ours"). */
    erg_envpipe_reconfig reconfig;
    double blocking_power_w; /* Power while idle/blocked (required, >= 0). */
    const erg_gpu_spec *gpu; /* Clock filter; NULL = every clock of the profile. */
    int reconfig_step_mhz;   /* 0 = the GPU's granularity (30 MHz) for balanced,
                                3x that for greedy. Perseus emulation: 0 = 15. */
    int max_inflight;        /* Memory cap on forwards in flight per stage; 0 = none. */
    int finish_limit;        /* Stop after finish_limit + 1 no-change iterations (10). */
    int max_iterations;      /* Hard cap on iterations (default 10000). */
    double unit_s;           /* Perseus emulation: quantisation unit (0.001 s). */
    /* Critical path rule of the real variant. 0 (default): CPM on the emulated
     * pipeline. > 0: EnvPipe's measured-wait rule (docs/envpipe.md) on emulated waits
     * plus transfer_s per receive; threshold = this scale x the smallest
     * non-zero last-stage wait (the scripts use 4, 8 or 10). */
    double threshold_scale;
    double transfer_s;                /* P2P transfer time added to every receive wait. */
    erg_envpipe_iter_fn on_iteration; /* Optional. */
    void *user;
} erg_envpipe_opts;

ERG_API void erg_envpipe_opts_init(erg_envpipe_opts *opts);

/* What the planner found besides the plan. */
typedef struct erg_envpipe_info {
    int iterations;                         /* Reconfiguration iterations run. */
    bool stuck;                             /* Stopped although the path left the envelope. */
    int max_mhz[ERG_SCHED_MAX_STAGES];      /* Per-stage max clock used. */
    int optimal_mhz[ERG_SCHED_MAX_STAGES];  /* Per-stage energy-valley clock (0 if none). */
    int extra_warmup[ERG_SCHED_MAX_STAGES]; /* r_s of the "ours" schedule. */
} erg_envpipe_info;

/* Plan an S-stage, M-microbatch pipeline with EnvPipe on the emulated
 * pipeline (profiled durations, CPM critical path). The plan's schedule
 * carries r_s; its estimate is the profile evaluation (erg_emulate's).
 * Errors: ERG_EINVAL (bad options, M < S with "ours", S > ERG_SCHED_MAX_STAGES),
 * ERG_ENOTFOUND (a clock the method needs is missing from the profile).
 * info may be NULL. Always terminates. */
ERG_API erg_status erg_plan_envpipe(const erg_profile *profile, int num_stages,
                                    int num_microbatches, const erg_envpipe_opts *opts,
                                    erg_plan **out, erg_envpipe_info *info, erg_error *err);

/* One measured reconfiguration step (docs/envpipe.md, --from-plan), what EnvPipe's
 * stage 0 does after each real iteration. wait_s[id] is the time the
 * instruction's stage waited in the receive before it (id = stage*2M + position
 * in the stage order); threshold_s = scale x the smallest non-zero last-stage
 * wait (computed here when threshold_s <= 0, with threshold_scale). Writes the
 * critical path (end -> start) into path (2SM ints) and its length, raises
 * clocks of `plan` by step_mhz capped at max_mhz[stage] and sets *changed. A
 * path entirely inside the outer envelope changes nothing. */
ERG_API erg_status erg_envpipe_reconfigure_step(erg_plan *plan, const double *wait_s,
                                                double threshold_s, double threshold_scale,
                                                erg_envpipe_reconfig policy, int step_mhz,
                                                const int *max_mhz, int *path, int *path_len,
                                                bool *changed, erg_error *err);

/* Measured receive waits for erg_envpipe_reconfigure_step from a CSV with the
 * header stage,instruction,microbatch,wait_ms (instruction forward/backward
 * or F/B): exactly one row per instruction of `plan`. wait_s gets 2SM values
 * in the plan's id order. ERG_EPARSE names the file, line and value. */
ERG_API erg_status erg_envpipe_waits_parse(const char *text, size_t len, const char *name,
                                           const erg_plan *plan, double *wait_s, erg_error *err);
ERG_API erg_status erg_envpipe_waits_read(const char *path, const erg_plan *plan, double *wait_s,
                                          erg_error *err);

/* EnvPipe's per-stage max clock (index 0 of its clock list): the highest
 * profiled clock with forward and backward points that passes the GPU's
 * filter (gpu may be NULL). max_mhz has num_stages entries. */
ERG_API erg_status erg_envpipe_max_clocks(const erg_profile *profile, int num_stages,
                                          const erg_gpu_spec *gpu, int *max_mhz, erg_error *err);

/* EnvPipe's printed plan: one line per stage, "Stage s | " then each unit as
 * "[F0 1980 0.0]" (on the path) or " F1 1260 0.0 " (wait in ms, 1 decimal).
 * wait_s and path may be NULL. *out is released with erg_free. */
ERG_API erg_status erg_envpipe_format_grid(const erg_plan *plan, const double *wait_s,
                                           const int *path, int path_len, char **out,
                                           erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
