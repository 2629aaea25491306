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

#ifdef __cplusplus
}
#endif
#endif
