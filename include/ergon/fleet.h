/* fleet.h: many jobs under one power budget (docs/fleet.md).
 *
 * Every job of a fleet has a frontier: points of (iteration time, average power) it can run at.
 * Under a fleet power cap the assignment picks one point per job so that the sum of average
 * powers is at most the cap and the weighted slowdown, sum over jobs of weight x (time / the
 * job's fastest time), is least: a multiple-choice knapsack. */
#ifndef ERGON_FLEET_H
#define ERGON_FLEET_H

#include "ergon/ergon.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One job: num_points points, each an iteration time (> 0) and an average power (>= 0); any
 * order. weight >= 0 (0: the job's slowdown does not count). */
typedef struct erg_fleet_job {
    const double *time_s;
    const double *power_w;
    size_t num_points;
    double weight;
} erg_fleet_job;

typedef struct erg_fleet_opts {
    /* Branch-and-bound nodes before the search stops with the best assignment found and its
     * gap stated (0: the default, 1,000,000). */
    size_t max_nodes;
    /* Relative tolerance: an assignment within rel_tol x its cost of the least is taken as the
     * least (0: the default, 1e-9). */
    double rel_tol;
} erg_fleet_opts;
ERG_API void erg_fleet_opts_init(erg_fleet_opts *opts);

typedef struct erg_fleet_result {
    bool feasible;      /* false: even every job's lowest-power point exceeds the cap; each job
                           then gets its lowest-power point */
    bool exact;         /* the search finished: cost is the least there is */
    double power_w;     /* sum of the chosen points' average powers */
    double cost;        /* sum over jobs of weight x time / fastest time */
    double lower_bound; /* no assignment under the cap costs less (Lagrangian bound) */
    double gap;         /* cost - lower_bound when !exact (0 when exact) */
    size_t nodes;       /* branch-and-bound nodes visited */
} erg_fleet_result;

/* Choose a point per job: choice[j] indexes jobs[j]'s points. ERG_EINVAL names a job without
 * points, a non-positive or non-finite time, a negative power or weight, or a bad cap. */
ERG_API erg_status erg_fleet_assign(const erg_fleet_job *jobs, size_t num_jobs, double cap_w,
                                    const erg_fleet_opts *opts, size_t *choice,
                                    erg_fleet_result *result, erg_error *err);

/* ---- a simulated fleet day's results (fleet_sim.c; `ergon fleet simulate`, docs/fleet.md, "A
 * simulated day") ----
 * The simulation drives an in-process server; what it measures is written here: a timeline,
 * a row each time the fleet is read back, and a summary of the day for each policy. */
typedef struct erg_fleet_sim_sample {
    double time_h;                    /* hours since the start of the day */
    double cap_w;                     /* the operator's cap */
    long jobs, gpus;                  /* running */
    double fleet_w;                   /* the fleet's power, as the server answers */
    double power_limit_w;             /* the power with one per-GPU limit for every GPU */
    double per_gpu_limit_w;           /* that limit */
    double no_cap_w;                  /* every job at its own target */
    double fleet_mean_slowdown;       /* over the running jobs */
    double power_limit_mean_slowdown; /* the same with the per-GPU limit */
} erg_fleet_sim_sample;
/* CSV, a header and a row per sample: hour,cap_w,jobs,gpus,fleet_w,power_limit_w,
 * per_gpu_limit_w,no_cap_w,fleet_mean_slowdown,power_limit_mean_slowdown. The caller releases
 * *out with erg_free. */
ERG_API erg_status erg_fleet_sim_timeline_format_csv(const erg_fleet_sim_sample *samples,
                                                     size_t num_samples, char **out,
                                                     erg_error *err);
/* The same written to path (atomically: a temp file renamed over it). ERG_EIO names the path. */
ERG_API erg_status erg_fleet_sim_timeline_write_csv(const char *path,
                                                    const erg_fleet_sim_sample *samples,
                                                    size_t num_samples, erg_error *err);

/* One policy over the day. */
typedef struct erg_fleet_sim_policy {
    double mean_slowdown;      /* slowdown integrated over job-hours / job-hours */
    double energy_j;           /* the day's energy */
    double over_h;             /* hours with the power above the cap */
    double max_power_over_cap; /* highest power / cap while jobs ran */
} erg_fleet_sim_policy;
typedef struct erg_fleet_sim_summary {
    long jobs, peak_jobs, peak_gpus;
    double job_h;               /* job-hours */
    size_t events;              /* through the server */
    double cap_min_w;           /* the least cap of the day */
    double cap_max_w;           /* the greatest */
    long violations;            /* the server's answers with the fleet's power above the cap */
    erg_fleet_sim_policy fleet; /* the fleet's assignment (frontier points) */
    erg_fleet_sim_policy power_limit; /* one per-GPU power limit */
    erg_fleet_sim_policy no_cap;      /* each job's own target */
} erg_fleet_sim_summary;
/* One JSON object, a line: {"jobs", "peak_jobs", "peak_gpus", "job_hours", "events",
 * "cap_min_w", "cap_max_w", "violations", "fleet", "power_limit", "no_cap"}, each policy an
 * object {"mean_slowdown", "energy_j", "over_h", "max_power_over_cap"}. The caller releases
 * *out with erg_free. */
ERG_API erg_status erg_fleet_sim_summary_format_json(const erg_fleet_sim_summary *summary,
                                                     char **out, erg_error *err);
/* The same written to path (atomically). ERG_EIO names the path. */
ERG_API erg_status erg_fleet_sim_summary_write_json(const char *path,
                                                    const erg_fleet_sim_summary *summary,
                                                    erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
