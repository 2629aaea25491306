/* emulate.h: iteration time and energy of a plan on a schedule, without GPUs. */
#ifndef ERGON_EMULATE_H
#define ERGON_EMULATE_H

#include "ergon/ergon.h"
#include "ergon/pipeline.h"
#include "ergon/planner.h"
#include "ergon/plan.h"
#include "ergon/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Result of evaluating a plan with profiled values (docs/emulate.md). */
typedef struct erg_emulation {
    double time_s;            /* Iteration time: longest path with profiled times. */
    double energy_j;          /* compute_energy_j + blocking_energy_j. */
    double compute_energy_j;  /* Sum of the profiled energy of every instruction. */
    double blocking_energy_j; /* p * sum over stages of (time_s - busy time). */
    /* erg_emulate_ex only (0 from erg_emulate): */
    int num_switches;       /* Clock requests issued, over all ranks. */
    double switch_time_s;   /* Iteration time they cost: time_s minus the time with the
                               same options and no switch latency. */
    double transfer_time_s; /* Time each cross-stage edge carried. */
} erg_emulation;

/* The published default clock-switch latency (docs/emulate.md): 10 ms. */
#define ERG_SWITCH_LATENCY_DEFAULT_S 0.010

/* What erg_emulate_ex adds to the profile evaluation. Initialise with
 * erg_emulate_opts_init (everything 0 = erg_emulate). */
typedef struct erg_emulate_opts {
    double blocking_power_w;
    /* P2P transfer on every cross-stage edge (F(s,m) -> F(s+1,m), B(s+1,m) ->
     * B(s,m)): transfer_time_s if > 0, otherwise transfer_bytes /
     * link_bandwidth_bps + link_latency_s when transfer_bytes > 0. */
    double transfer_time_s;
    double transfer_bytes;     /* Bytes per microbatch per transfer. */
    double link_bandwidth_bps; /* Bytes per second (> 0 with transfer_bytes). */
    double link_latency_s;
    /* Clock-switch latency: a rank requests an instruction's clock when the
     * instruction starts (when it differs from the clock last requested; the
     * first instruction's previous one is the rank's last: iterations repeat);
     * the request takes effect switch_latency_s later, and until then the GPU
     * runs at its previous clock, with that clock's profiled time and energy
     * (emulate_ex.c, docs/emulate.md). Nothing stalls. */
    double switch_latency_s;
} erg_emulate_opts;

ERG_API void erg_emulate_opts_init(erg_emulate_opts *opts);
/* The transfer time the options give one cross-stage edge (0 when none). */
ERG_API double erg_emulate_opts_transfer_s(const erg_emulate_opts *opts);

/* Evaluate `plan` on `dag` (same S, M and schedule): each instruction takes
 * the profiled (time, energy) of its stage and kind at its clock; idle and
 * communication time of every stage draws blocking_power_w. Optional arrays
 * (num_instrs long, may be NULL) receive each instruction's start and
 * duration in seconds. ERG_ENOTFOUND names a clock missing from the profile. */
ERG_API erg_status erg_emulate(const erg_profile *profile, const erg_dag *dag, const erg_plan *plan,
                               double blocking_power_w, erg_emulation *out, double *start_s,
                               double *dur_s, erg_error *err);

/* erg_emulate with transfer time on cross-stage edges and clock-switch
 * latency (see erg_emulate_opts). Invalid (negative, non-finite) options are
 * ERG_EINVAL. start_s/dur_s as erg_emulate (dur_s excludes switch latency). */
ERG_API erg_status erg_emulate_ex(const erg_profile *profile, const erg_dag *dag,
                                  const erg_plan *plan, const erg_emulate_opts *opts,
                                  erg_emulation *out, double *start_s, double *dur_s,
                                  erg_error *err);

/* ---- a plan's power over one iteration (power.c, docs/fleet.md) ----
 * Every instruction placed by erg_emulate_ex draws its profiled energy over its profiled time at
 * its clock while it runs (with a switch latency, the planned clock's power: the share run at the
 * old clock is not split), and a waiting GPU draws opts->blocking_power_w. The job's power is the
 * sum over its GPUs, a step function over [0, iteration time), periodic (iterations repeat). */
typedef struct erg_power_trace erg_power_trace;
typedef struct erg_power_segment {
    double start_s, end_s; /* within the iteration */
    double total_w;        /* the job: compute_w + blocking_w */
    double compute_w;      /* GPUs running an instruction */
    double blocking_w;     /* GPUs waiting */
} erg_power_segment;
typedef struct erg_power_stats {
    double avg_w;        /* the trace's energy over the iteration time */
    double peak_w;       /* highest job power */
    double trough_w;     /* lowest */
    double window_s;     /* the window of swing_w and ramp_w_per_s */
    double swing_w;      /* largest (max - min) of the job's power inside any window_s seconds
                            (peak - trough when window_s >= the iteration time) */
    double ramp_w_per_s; /* steepest slope of the power averaged over window_s:
                            max over t of |P(t + window_s) - P(t)| / window_s */
} erg_power_stats;
ERG_API erg_status erg_power_trace_new(const erg_profile *profile, const erg_dag *dag,
                                       const erg_plan *plan, const erg_emulate_opts *opts,
                                       erg_power_trace **out, erg_error *err);
ERG_API void erg_power_trace_free(erg_power_trace *trace);
ERG_API size_t erg_power_trace_len(const erg_power_trace *trace); /* segments */
ERG_API int erg_power_trace_num_gpus(const erg_power_trace *trace);
ERG_API double erg_power_trace_period(const erg_power_trace *trace); /* iteration time, s */
/* Segment i (false when out of range). */
ERG_API bool erg_power_trace_segment(const erg_power_trace *trace, size_t i,
                                     erg_power_segment *seg);
/* GPU (rank) gpu's power in segment i (NAN when out of range). */
ERG_API double erg_power_trace_gpu(const erg_power_trace *trace, size_t i, int gpu);
/* Average, peak, trough, and the swing and ramp over window_s (> 0) seconds. */
ERG_API erg_status erg_power_trace_stats(const erg_power_trace *trace, double window_s,
                                         erg_power_stats *out, erg_error *err);
/* The trace with a per-GPU power floor: every GPU draws at least floor_w (the power smoothing
 * of the power-stabilisation literature: a GPU that would draw less burns the difference); what
 * the floor adds counts in blocking_w. *out is a new trace. */
ERG_API erg_status erg_power_trace_floor(const erg_power_trace *trace, double floor_w,
                                         erg_power_trace **out, erg_error *err);
/* CSV, a row per segment: start_s,end_s,total_w,compute_w,blocking_w,gpu0_w,...; the caller
 * releases *out with erg_free. */
ERG_API erg_status erg_power_trace_format_csv(const erg_power_trace *trace, char **out,
                                              erg_error *err);
/* The same CSV written to path (atomically: a temp file renamed over it; a path that is no
 * regular file, such as /dev/stdout, is written in place). ERG_EIO names the path. */
ERG_API erg_status erg_power_trace_write_csv(const erg_power_trace *trace, const char *path,
                                             erg_error *err);
/* Read that CSV back: the header start_s,end_s,total_w,compute_w,blocking_w,gpu0_w,...,
 * gpu<N-1>_w (N >= 1, in that order), then a row per segment, the first starting at 0 and each
 * where the previous one ends, every value a number >= 0; the iteration time is the last end_s
 * (> 0). The values are the file's (the writer rounds powers to the microwatt and times to 9
 * digits); a trace read back formats to the same text. ERG_EPARSE names the file, line and
 * value. *out is released with erg_power_trace_free. name (may be NULL) is for messages. */
ERG_API erg_status erg_power_trace_parse_csv(const char *text, size_t len, const char *name,
                                             erg_power_trace **out, erg_error *err);
ERG_API erg_status erg_power_trace_read_csv(const char *path, erg_power_trace **out,
                                            erg_error *err);

/* Swing-bounded choice (swing.c, docs/fleet.md): among the plans of frontier f, evaluated on
 * profile and dag with opts (erg_emulate_ex), those whose iteration time is at most deadline_s
 * (INFINITY: any) and whose power swing over window_s is at most max_swing_w; the one of least
 * energy. With allow_floor a plan may also take the least per-GPU power floor
 * (erg_power_trace_floor) that brings its swing within the bound, and its energy then counts
 * what the floor burns. ERG_ENOTFOUND when no plan within the deadline meets the bound (the
 * message gives the least swing there). */
typedef struct erg_swing_pick {
    size_t index;          /* the plan of f */
    erg_emulation em;      /* its emulation (without the floor) */
    erg_power_stats power; /* its power, with the floor */
    double floor_w;        /* 0: none */
    double floor_energy_j; /* per iteration */
    size_t plans_checked;  /* plans within the deadline whose swing was computed */
} erg_swing_pick;
ERG_API erg_status erg_frontier_pick_swing(const erg_profile *profile, const erg_dag *dag,
                                           const erg_frontier *f, const erg_emulate_opts *opts,
                                           double deadline_s, double window_s, double max_swing_w,
                                           bool allow_floor, erg_swing_pick *out, erg_error *err);

/* The baseline of every user-facing saving: all-max clocks evaluated with the
 * profile (as erg_emulate evaluates a plan), read from a frontier directory
 * written by `ergon plan perseus` (DIR/frontier-info.csv and DIR/profile.csv,
 * docs/formats.md). Shared by the CLI and the server's Frontier scheduler so
 * that both pick the same plan for the same target. */
typedef struct erg_frontier_baseline {
    bool have; /* false: the directory carries no baseline (older
                  ergon, Perseus's own output): use the estimates */
    bool own;  /* prof and dag are freed by _free */
    erg_profile *prof;
    erg_dag *dag;
    double power_w;        /* blocking power the frontier was planned with */
    erg_emulation all_max; /* all-max clocks, profiled values */
    /* A switch-aware frontier (`plan perseus --switch-latency L`, frontier-info.csv rows
     * switch_latency_s and transfer_time_s): every evaluation uses erg_emulate_ex with these;
     * 0 = erg_emulate, as for every other frontier. */
    double switch_latency_s;
    double transfer_time_s;
} erg_frontier_baseline;
ERG_API void erg_frontier_baseline_init(erg_frontier_baseline *b);
ERG_API void erg_frontier_baseline_free(erg_frontier_baseline *b);
/* The blocking power recorded in DIR/frontier-info.csv; false when absent. */
ERG_API bool erg_frontier_info_power(const char *dir, double *power_w);
/* Read DIR's baseline for frontier f (have = false when DIR has none). */
ERG_API erg_status erg_frontier_baseline_open(const char *dir, const erg_frontier *f,
                                              erg_frontier_baseline *b, erg_error *err);
/* The one selection of "the plan for a deadline" (choose, compare, plan perseus's summary, the
 * server's Frontier scheduler): the least estimated energy among plans whose estimated time
 * fits (erg_frontier_choose_deadline), then, since estimates are quantised down, faster plans
 * one by one until eval's profiled time fits (*em: its values). eval(user, k, em, err) gives
 * plan k's profiled values; NULL: the estimates alone. ERG_ENOTFOUND when none fits. */
typedef erg_status (*erg_frontier_eval_fn)(void *user, size_t k, erg_emulation *em, erg_error *err);
ERG_API erg_status erg_frontier_pick(const erg_frontier *f, double deadline_s,
                                     erg_frontier_eval_fn eval, void *user, size_t *k,
                                     erg_emulation *em, erg_error *err);
/* erg_frontier_pick with the baseline's profile: the least-energy plan whose profiled time is
 * within deadline_s (with no
 * baseline: the planner's estimate, as erg_frontier_choose_deadline); *em is
 * its emulation when b->have. ERG_ENOTFOUND when none fits. */
ERG_API erg_status erg_frontier_baseline_pick(const erg_frontier_baseline *b, const erg_frontier *f,
                                              double deadline_s, size_t *k, erg_emulation *em,
                                              erg_error *err);
/* Make sure frontier f (computed, not read from a directory) holds a plan no slower than
 * all-max clocks by the profiled values, so that a deadline of the all-max time (a slowdown
 * of 1.0) always has an answer: the planner's times are quantised to its unit, and its fastest
 * plan can run a little slower than all-max clocks once the profiled times are used. When it
 * does, all_max (erg_plan_all_max of the same profile, stages, microbatches and schedule) is
 * appended as the fastest point, with the fastest plan's estimated time and all-max's profiled
 * energy; *added (may be NULL) says whether it was. Needs b->have. */
ERG_API erg_status erg_frontier_baseline_complete(const erg_frontier_baseline *b, erg_frontier *f,
                                                  const erg_plan *all_max, bool *added,
                                                  erg_error *err);

/* ---- the frontier directory, written whole (frontier_save.c, docs/formats.md) ---- */
typedef struct erg_frontier_dir_opts {
    int formats; /* ERG_FRONTIER_* bits (planner.h); default CSV | PACKED */
    /* The profile's file name (its last path component is recorded as source_profile, for
     * titles); NULL: none. */
    const char *source_profile;
    /* A switch-aware frontier's latency and transfer (erg_frontier_switch_aware), recorded so
     * that its readers evaluate with them; 0: none. */
    double switch_latency_s;
    double transfer_time_s;
    double lock_wait_s; /* for another writer or reader of dir; ERG_FRONTIER_DIR_LOCK_WAIT_S */
    erg_progress_fn progress; /* plan files written / total; optional */
    void *progress_user;
} erg_frontier_dir_opts;
ERG_API void erg_frontier_dir_opts_init(erg_frontier_dir_opts *opts);
/* Write frontier f, planned from prof with blocking_power_w, as the frontier directory dir
 * (created): under dir's writer lock, the files of an earlier frontier in it removed (*removed,
 * may be NULL, counts them; other files are kept), its plans (erg_frontier_write_dir), the
 * profile's planned stages (profile.csv) and frontier-info.csv: the schedule, the blocking
 * power, the unit, all-max clocks by the profiled values, both fingerprints, and the all-max
 * fallback's row when f has one. What erg_frontier_read_dir and erg_frontier_baseline_open
 * read back. opts NULL: the defaults. */
ERG_API erg_status erg_frontier_save_dir(const erg_frontier *f, const erg_profile *prof,
                                         double blocking_power_w, const char *dir,
                                         const erg_frontier_dir_opts *opts, size_t *removed,
                                         erg_error *err);
/* erg_frontier_baseline_complete from the profile alone: the DAG of f's schedule, all-max
 * clocks and their profiled values (*all_max, may be NULL), then the fallback appended where
 * f's fastest plan is slower (*added, may be NULL). switch_latency_s and transfer_time_s: a
 * switch-aware frontier's (its plans are evaluated with them), 0 otherwise. */
ERG_API erg_status erg_frontier_complete_all_max(erg_frontier *f, const erg_profile *prof,
                                                 double blocking_power_w, double switch_latency_s,
                                                 double transfer_time_s, bool *added,
                                                 erg_emulation *all_max, erg_error *err);
/* For bindings (scalar arguments only): plan the Perseus frontier of prof (a named schedule
 * kind, erg_schedule_kind; unit_s <= 0: the default), complete it with the all-max fallback
 * and save it in dir (formats 0: the default). *num_planned: the planner's plans; *fallback:
 * whether the all-max fallback was added (both may be NULL). */
ERG_API erg_status erg_frontier_plan_dir(const erg_profile *prof, int num_stages,
                                         int num_microbatches, int schedule_kind,
                                         double blocking_power_w, double unit_s, const char *dir,
                                         int formats, size_t *num_planned, bool *fallback,
                                         erg_error *err);
/* For bindings: read frontier directory dir and pick the plan for deadline_s as `ergon
 * choose` does (erg_frontier_baseline_pick): *index, and its time and energy by the profiled
 * values (the planner's estimate for a directory without a baseline). ERG_ENOTFOUND when no
 * plan meets the deadline. */
ERG_API erg_status erg_frontier_dir_choose(const char *dir, double deadline_s, size_t *index,
                                           double *time_s, double *energy_j, erg_error *err);

/* Switch-aware planning (docs/emulate.md): from frontier `in` (a Perseus frontier planned without
 * switch latency, from the same profile), a frontier whose every point's time and energy are the
 * emulation of its plan with opts (switch_latency_s, transfer, blocking_power_w) by
 * erg_emulate_ex's switch model, so a deadline chosen on it is met at that latency. For every
 * plan of `in` it evaluates the plan and variants that keep a rank's clock where the planned
 * change buys little or where an up-switch delays a critical instruction (switch_aware.c), and
 * keeps the Pareto-optimal ones, slowest first.
 * Frontiers of more than 4,096 plans: every k-th plan (and the last) keeps the work bounded;
 * plans one time unit apart differ in a few clocks.
 * unit_s is recorded as the new frontier's unit (its times are not quantised). progress as
 * erg_perseus_opts's (plans of `in` done / total). */
typedef struct erg_switch_aware_stats {
    size_t plans_in;        /* plans of `in` */
    size_t plans_evaluated; /* of which evaluated: all up to 4,096, else every k-th and the last */
    size_t candidates;      /* plans and distinct variants evaluated */
    size_t plans_out;       /* Pareto-optimal ones kept */
    size_t plans_merged;    /* of which variants with merged clocks (not a planned plan) */
} erg_switch_aware_stats;
ERG_API erg_status erg_frontier_switch_aware(const erg_profile *profile, const erg_frontier *in,
                                             const erg_emulate_opts *opts, double unit_s,
                                             erg_progress_fn progress, void *progress_user,
                                             erg_frontier **out, erg_switch_aware_stats *stats,
                                             erg_error *err);

/* ---- sparse profiling (sparse.h): plans chosen on a predicted profile, run on the real one ----
 */

/* One target of erg_sparse_check_plans. */
typedef struct erg_sparse_check {
    double deadline_s; /* Iteration-time target (INFINITY: minimum energy). */
    double ref_time_s; /* Plan chosen on the real profile, evaluated on it. */
    double ref_energy_j;
    double pred_time_s;     /* Plan chosen on the predicted profile, evaluated on */
    double pred_energy_j;   /* the real one. */
    double pred_est_time_s; /* The same plan evaluated on the predicted profile. */
    double pred_est_energy_j;
    /* The least energy on the real (truth) profile of a plan chosen on it
     * that is no slower than the predicted-profile plan there: what the
     * prediction's plan could have cost at its own time. */
    double best_energy_at_pred_time_j;
    /* The same for the reference plan (ref_time_s). */
    double best_energy_at_ref_time_j;
} erg_sparse_check;

/* Plan an S-stage, M-microbatch 1F1B pipeline with the Perseus frontier
 * (unit_s) on `real` and on `pred`, and at three targets -- the all-max
 * iteration time of `real`, 1 % slower, and no deadline (minimum energy) --
 * choose on each profile the plan of least energy whose time, both evaluated
 * with that profile (erg_emulate), meets the target (the all-max plan is
 * always a candidate); evaluate both choices on `real`. pred must have every
 * clock of real. out[0..2] in that order. */
ERG_API erg_status erg_sparse_check_plans(const erg_profile *real, const erg_profile *pred,
                                          int num_stages, int num_microbatches,
                                          double blocking_power_w, double unit_s,
                                          erg_sparse_check out[3], erg_error *err);
/* The same check under measurement noise: plans chosen on `ref` (e.g. a full
 * sweep whose every point carries noise) and on `pred` (a sparse profile of
 * the same noisy measurements), each against its own all-max time (x 1,
 * x 1.01, no deadline), both evaluated on `truth` (the noise-free profile);
 * deadline_s is the truth's target. erg_sparse_check_plans(real, pred) is
 * erg_sparse_check_plans_noisy(real, real, pred). */
ERG_API erg_status erg_sparse_check_plans_noisy(const erg_profile *truth, const erg_profile *ref,
                                                const erg_profile *pred, int num_stages,
                                                int num_microbatches, double blocking_power_w,
                                                double unit_s, erg_sparse_check out[3],
                                                erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
