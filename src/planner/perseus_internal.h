/* perseus_internal.h: pieces of the frontier planner exposed to unit tests. */
#ifndef ERGON_PERSEUS_INTERNAL_H
#define ERGON_PERSEUS_INTERNAL_H

#include "ergon/planner.h"

/* One execution option of an operation spec after filtering. */
typedef struct erg__cand {
    int q; /* quantised time in units */
    int freq_mhz;
    double time_s, energy_j;
} erg__cand;

/* Candidate filtering (docs/planner.md, "Candidates") with noise factor nf:
 * writes the survivors sorted by q descending into out (room for n) and
 * returns their count. */
int erg__perseus_candidates(const erg_profile_point *pts, int n, double unit_s, double nf,
                            erg__cand *out);

/* Exponential fit cost(d) = a exp(b d) + c by Levenberg-Marquardt from the
 * reference's grid of 54 starts (docs/planner.md, "Cost model"), keeping the lowest-MSE fit.
 * Returns ERG_ENUMERIC when no start is accepted. */
erg_status erg__perseus_fit(const double *x, const double *y, int m, double unit_s, double abc[3],
                            erg_error *err);

/* Tests: 1 = every plan from the full pass (CPM, critical sub-DAG and flow network rebuilt),
 * 0 = the incremental step (the default), -1 = the environment decides
 * (ERGON_PERSEUS_FULL_PASS=1 selects the full pass). Both give the same frontier. */
void erg__perseus_set_full_pass(int on);
/* Tests: the incremental step takes its fallback (cold, then two-phase solve, then the
 * network rebuilt from that flow) at every k-th plan as if the warm start had failed;
 * 0 = only when it does. */
void erg__perseus_incr_force_fallback(int every);
/* Tests: how many incremental steps kept the last cut without a max flow, how many pushed a
 * path from the opened arcs before it, and, of the steps after one that found an augmenting
 * path, how many pushed flow along the last max flow's paths first (replayed), and of the
 * others how many let the max flow search first and found a path (probed_hit) or none,
 * keeping the cut (probed_kept) (totals since the process started). */
void erg__perseus_incr_cut_stats(long *kept, long *pushed, long *probed_hit, long *probed_kept,
                                 long *replayed);
/* Tests: the incremental step's CPM after a step recomputes the window of the moved
 * instructions with offsets for what follows and precedes it (2), the whole span from the
 * window to both ends (1), or chooses by the window's width (0, the default); and how many
 * steps took the window and the whole span (totals since the process started). */
void erg__perseus_incr_cpm_mode(int mode);
void erg__perseus_incr_cpm_stats(long *window, long *span);

#endif
