/* sparse_internal.h: what the two halves of sparse profiling share: the measuring half
 * (sparse.c) and the prediction (sparse_predict.c). */
#ifndef ERGON_SPARSE_INTERNAL_H
#define ERGON_SPARSE_INTERNAL_H

#include "ergon/sparse.h"
#include "core/internal.h"

typedef struct curve {
    int budget;
    int nmeas;
    int nrep;    /* repeated measurements (a clock measured again) */
    bool *meas;  /* per clock index (descending clocks) */
    double *t_s; /* measured time at index (valid where meas) */
    double *e_j; /* measured energy */
    int *cnt;    /* measurements averaged into a point (NULL in pooled copies: 1) */
} curve;

struct erg_sparse {
    int S, n;
    int *freqs; /* descending */
    erg_sparse_opts o;
    curve *c; /* S * 2 */
    int measured;
    /* What every curve wants next, worked out again after a report (lazily:
     * erg_sparse_next is const to its callers, and asking is pure). */
    bool stale;
    int *want;                    /* per curve: clock index, -1 when done */
    int *group;                   /* per stage: the lowest stage of its replica group */
    int *grid;                    /* per stage: its grid index (see update_wants) */
    bool *pool_meas, *pool_taken; /* scratch over the clocks */
    double *pool_e;
    double *fit; /* under noise: the fit, [kind][quantity][stage][clock] */
    /* The noise level: declared (opts.time_noise >= 0, erg_sparse_set_noise) or, with
     * noise_auto, estimated from the measurements after every report (sparse.c:
     * estimate_noise); o.time_noise holds the level in use. */
    bool noise_auto;
    bool noise_latched; /* auto: the estimate reached ERG_SPARSE_NOISY (the noisy
                           procedure stays on from then) */
    double noise_est;   /* auto: the latest estimate (NAN before any) */
    int noise_pts;      /* auto: the measured points it rests on */
    double *resid;      /* auto: scratch, one residual per measured point and quantity */
};

/* A measured point departing from the fit by more than this many standard
 * deviations of its mean is measured again (a point of noise is averaged
 * down; a real jag or step of the curve is confirmed, and kept). */
#define NOISE_OUTLIER 2.0

/* Whether the measurements are noisy enough to be fitted rather than trusted point by point
 * (sparse.c). */
bool erg__sparse_noisy_mode(const erg_sparse *sp);
/* Bring the cached wishes (and, with the noise estimated, the noise level) up to date after
 * reports (sparse.c); const to callers: a cache. */
void erg__sparse_refresh(const erg_sparse *sp);
/* group[s] receives the lowest stage of stage s's replica group (sparse.c). */
void erg__sparse_find_groups(const erg_sparse *sp, int *group);
/* Under noise: the fit of quantity q (0 time, 1 energy) of instruction kind over every stage
 * and clock into fit[s * n + x] (sparse_predict.c). */
erg_status erg__sparse_noise_fit(const erg_sparse *sp, const curve *cv, int kind, int q,
                                 double *fit, erg_error *err);

#endif
