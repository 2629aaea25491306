/* planner.h: the Perseus time-energy frontier (Phillips-Dessouky crashing)
 * and plan choice for a deadline or a straggler's slowdown. */
#ifndef ERGON_PLANNER_H
#define ERGON_PLANNER_H

#include "ergon/ergon.h"
#include "ergon/pipeline.h"
#include "ergon/plan.h"
#include "ergon/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options of the frontier planner (docs/planner.md). Initialise with
 * erg_perseus_opts_init, then set blocking_power_w. */
typedef struct erg_perseus_opts {
    double unit_s;                /* Quantisation unit (default 0.001 s). */
    double blocking_power_w;      /* Power drawn while blocked on P2P (required, > 0). */
    double noise_factor;          /* Soft Pareto filter factor (default 0.95). */
    bool always_use_noise_factor; /* Use the soft filter straight away. */
    erg_schedule schedule;        /* Default 1F1B. */
    /* Optional fixed cost-model coefficients instead of fitting: 6*S doubles,
     * for stage s and kind k (0 forward, 1 backward) fits[(2*s+k)*3 + 0..2] =
     * (a, b, c) of a*exp(b*d)+c. Used to replay a reference run's fits. */
    const double *fits;
    erg_progress_fn progress; /* Optional progress callback (plans done / expected). */
    void *progress_user;
    /* P2P transfer on every cross-stage edge, a fixed-duration dependency
     * (rounded to whole units; default 0 = the reference's zero-time edges). */
    double transfer_time_s;
    /* Refuse (ERG_EINVAL, before planning, with the estimate) when the
     * frontier would hold more than this many plans; 0 (default): no limit.
     * The estimate is the slowest minus the fastest iteration in units. */
    uint64_t max_plans;
} erg_perseus_opts;

ERG_API void erg_perseus_opts_init(erg_perseus_opts *opts);

/* One point of a frontier. */
typedef struct erg_frontier_point {
    double time_s;        /* Iteration time: quantised makespan x unit. */
    double energy_j;      /* cost_j + S * time_s * blocking power ("refined cost"). */
    double cost_j;        /* Sum of the fitted effective energy of every instruction. */
    double cost_change_j; /* Change of cost_j from the previous plan. */
    long quant_time;      /* Makespan in units. */
} erg_frontier_point;

/* A frontier: plans from the slowest (index 0) to the fastest, each one time
 * unit shorter than the previous one. Computed by erg_plan_perseus or read
 * from a directory written by erg_frontier_write_dir. */
typedef struct erg_frontier erg_frontier;

/* Compute the whole frontier of per-instruction clock plans of an S-stage,
 * M-microbatch pipeline from a profile. Memory is O(plans + changes), not
 * O(plans x instructions). */
ERG_API erg_status erg_plan_perseus(const erg_profile *profile, int num_stages,
                                    int num_microbatches, const erg_perseus_opts *opts,
                                    erg_frontier **out, erg_error *err);
ERG_API void erg_frontier_free(erg_frontier *f);
ERG_API size_t erg_frontier_size(const erg_frontier *f);
ERG_API int erg_frontier_num_stages(const erg_frontier *f);
ERG_API int erg_frontier_num_microbatches(const erg_frontier *f);
ERG_API erg_status erg_frontier_get(const erg_frontier *f, size_t index, erg_frontier_point *out,
                                    erg_error *err);
/* The quantisation unit the frontier was planned with (0 for one read from a directory). */
ERG_API double erg_frontier_unit_s(const erg_frontier *f);
/* Whether the last plan is the all-max fallback (erg_frontier_append_plan) rather than a point
 * of the planner's frontier, and the planner's plans: erg_frontier_size less the fallback.
 * frontier.csv lists the planner's plans only, as Perseus writes it; plans.ergon carries the
 * fallback as its last plan (docs/formats.md). */
ERG_API bool erg_frontier_has_fallback(const erg_frontier *f);
ERG_API size_t erg_frontier_num_planned(const erg_frontier *f);
/* The plan at `index` (caller frees with erg_plan_free). */
ERG_API erg_status erg_frontier_plan(const erg_frontier *f, size_t index, erg_plan **out,
                                     erg_error *err);

/* Which files erg_frontier_write_dir writes. */
enum {
    ERG_FRONTIER_CSV = 1,  /* frontier.csv: time,energy (the published format) */
    ERG_FRONTIER_PY = 2,   /* freqs_pipeline_%05d.py: Perseus/Merak plan files (lists of ints) */
    ERG_FRONTIER_JSON = 4, /* plan_%05d.json: our plan format */
    ERG_FRONTIER_ALL = 7,
    /* freqs_pipeline_%05d.py in Zeus PFO's format: per stage a list of
     * ("forward"|"backward", clock) tuples (exclusive with ERG_FRONTIER_PY:
     * same file names). */
    ERG_FRONTIER_ZEUS_PY = 8,
    /* plans.ergon: every plan in one compact file (docs/formats.md), read
     * back by erg_frontier_read_dir in preference to plan files. */
    ERG_FRONTIER_PACKED = 16,
};
/* The ERG_FRONTIER_* bits of a comma list of format names, in any case: csv, packed,
 * perseus-py (alias py), zeus-py, json (empty entries are skipped). ERG_EINVAL names an unknown
 * format, or perseus-py with zeus-py (both write freqs_pipeline_%05d.py). */
ERG_API erg_status erg_frontier_formats_parse(const char *list, int *what, erg_error *err);
/* Write the frontier's plan files into `dir` (created; existing files are replaced); a
 * frontier directory with its baseline is erg_frontier_save_dir's (emulate.h). */
ERG_API erg_status erg_frontier_write_dir(const erg_frontier *f, const char *dir, int what,
                                          erg_progress_fn progress, void *progress_user,
                                          erg_error *err);
/* Read a frontier directory: plans.ergon when there is one, else frontier.csv
 * plus plan files (freqs_pipeline_%05d.py or plan_%05d.json) in the same order;
 * plans are read when asked for. ERG_ENOTFOUND when the directory holds no plans at
 * all (a bare frontier.csv). */
ERG_API erg_status erg_frontier_read_dir(const char *dir, const erg_schedule *sched_hint,
                                         erg_frontier **out, erg_error *err);

/* Keep every n-th plan (and the planner's last, and the all-max fallback) of a frontier
 * directory `in` in a new directory `out` (which must not exist): its plan files under the
 * same names, a frontier.csv of the kept rows, and its frontier-info.csv and profile.csv when
 * it has them. *kept and *total (may be NULL) receive the counts of the planner's plans. */
ERG_API erg_status erg_frontier_sample_dir(const char *in, const char *out, size_t every,
                                           size_t *kept, size_t *total, erg_error *err);
/* Path of the plan file behind `index` of a frontier read from a directory
 * (NULL for a computed frontier). */
ERG_API const char *erg_frontier_plan_path(const erg_frontier *f, size_t index);

/* ---- the frontier directory's provenance and lock (frontier_dir.c, docs/formats.md) ---- */
/* The frontier's fingerprint, "fnv1a64:" and 16 hex digits: of a computed frontier, its
 * schedule (kind, ranks, microbatches, chunks, backward split, each rank's instructions) and
 * every plan's estimate and clocks hashed; of one read from plans.ergon, the fingerprint its
 * header names (that of the frontier it was planned or sampled from; "" when it names none,
 * as older ergon wrote it). False (and "") for a frontier read from plan files, which carry
 * none. plans.ergon and frontier-info.csv carry it, so that a reader can tell the files of
 * two runs apart. */
#define ERG_FRONTIER_FINGERPRINT_LEN 25
ERG_API bool erg_frontier_fingerprint(const erg_frontier *f,
                                      char out[ERG_FRONTIER_FINGERPRINT_LEN]);
/* The lock of a frontier directory: its writers take it exclusively (`plan perseus --out`,
 * from removing an earlier frontier's files to its last row of frontier-info.csv), readers
 * (erg_frontier_read_dir, erg_frontier_baseline_open) shared, so that a reader sees one
 * writer's whole set and two writers never interleave. An flock(2) on the directory itself:
 * no file is left behind, and a writer that dies releases it. exclusive creates dir (and its
 * parents). Waits up to wait_s seconds, then ERG_ETIMEOUT naming dir. A file system without
 * flock: no lock (*out is still set). */
typedef struct erg_frontier_dir_lock erg_frontier_dir_lock;
ERG_API erg_status erg_frontier_dir_lock_take(const char *dir, bool exclusive, double wait_s,
                                              erg_frontier_dir_lock **out, erg_error *err);
ERG_API void erg_frontier_dir_lock_release(erg_frontier_dir_lock *lock);
/* How long the readers of this library wait for a writer's lock (seconds). */
#define ERG_FRONTIER_DIR_LOCK_WAIT_S 60.0

/* Plan choice: the minimum-energy plan whose iteration time is at most
 * deadline_s. ERG_ENOTFOUND (with the fastest time in the message) when the
 * deadline is below the fastest plan. */
ERG_API erg_status erg_frontier_choose_deadline(const erg_frontier *f, double deadline_s,
                                                size_t *index, erg_error *err);
/* The same with deadline = slowdown x the fastest plan's time (slowdown >= 1;
 * a straggler pipeline running slowdown x slower sets the pace). */
ERG_API erg_status erg_frontier_choose_slowdown(const erg_frontier *f, double slowdown,
                                                size_t *index, erg_error *err);
/* Append plan p at the fast end of a computed frontier (not one read from a directory), with
 * the point pt (pt->time_s no larger than the fastest point's), as its all-max fallback
 * (erg_frontier_has_fallback; once). The plan must have the frontier's stages, microbatches
 * and schedule. Used to add the all-max plan where the fastest planned plan is slower by the
 * profiled values (erg_frontier_baseline_complete). */
ERG_API erg_status erg_frontier_append_plan(erg_frontier *f, const erg_plan *p,
                                            const erg_frontier_point *pt, erg_error *err);

/* ---- frontiers built outside the Perseus planner (the switch-aware one, emulate.h) ---- */
/* An empty computed frontier of S ranks, M microbatches and `sched` (its order gives each
 * rank's instructions), unit_s and the blocking power it was planned with. S, M >= 1. */
ERG_API erg_status erg_frontier_new(int num_stages, int num_microbatches, const erg_schedule *sched,
                                    double unit_s, double blocking_power_w, erg_frontier **out,
                                    erg_error *err);
/* Append a plan at the fast end of a computed frontier: its point and its clocks, one per
 * instruction in id order (rank 0's in run order, then rank 1's, ...; as the DAG numbers
 * them). Stored as the changes from the previous plan. */
ERG_API erg_status erg_frontier_push(erg_frontier *f, const erg_frontier_point *pt,
                                     const int *freq_mhz, erg_error *err);
/* Plan k's clocks in that order into freq_mhz. With sequential true, freq_mhz holds plan
 * k-1's (a walk from plan 0 up: cheaper on computed frontiers). ERG_EINVAL for k out of
 * range. */
ERG_API erg_status erg_frontier_plan_clocks(const erg_frontier *f, size_t k, bool sequential,
                                            int *freq_mhz, erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
