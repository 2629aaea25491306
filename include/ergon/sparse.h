/* sparse.h: sparse, adaptive profiling: measure a few clocks of every
 * (stage, instruction) and predict the others (docs/sparse-profiling.md).
 *
 * The procedure is a state machine so that the same code serves an offline
 * replay (`ergon profile sparse --replay`), a callback-driven loop
 * (erg_sparse_run) and a server that measures one window at a time: ask
 * erg_sparse_next() which clock each (stage, instruction) wants next, measure
 * it, give the result to erg_sparse_report(), repeat until erg_sparse_done().
 * Measurement stability (warm-up, a confidence-interval stopping rule,
 * outlier dropping) is the measurer's business: erg_stable_measure() below. */
#ifndef ERGON_SPARSE_H
#define ERGON_SPARSE_H

#include "ergon/ergon.h"
#include "ergon/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options; initialise with erg_sparse_opts_init. */
typedef struct erg_sparse_opts {
    /* Most (stage, instruction, clock) points measured in all, repeats
     * included; 0 = one sixth of the full sweep (num_stages * 2 * num_clocks
     * / 6, at least 4 per (stage, instruction)), a quarter under noise.
     * Split evenly over the (stage, instruction)s. */
    int budget;
    /* Zeus's rule: below the lowest-energy clock found so far, stop going down
     * once energy has risen this many measurements in a row (default 2). */
    int patience;
    /* A rise counts only when energy grows by more than this fraction of the
     * lowest energy (noise guard, default 0.005). */
    double rise_tolerance;
    /* Clocks right below the maximum always measured (default 2; fewer when
     * the budget is small). */
    int near_max;
    /* A predicted time is raised by this share of the disagreement between
     * the two predictors (shared shape, own points), so that plans chosen on
     * a prediction do not run late (default 1.0, 0..10). */
    double time_margin;
    /* A predicted energy is raised by this share of the same uncertainty
     * (default 1.0, 0..10): plans prefer measured clocks unless a predicted
     * one is better by more than its prediction can be trusted to be. */
    double energy_margin;
    /* Relative noise of one measurement (time and energy; one reported
     * value, e.g. the mean of a window's samples): the least uncertainty a
     * predicted time is given (default 0.002). 0..1, or negative
     * (ERG_SPARSE_NOISE_AUTO): estimated from the measurements as they
     * arrive (erg_sparse_noise). From ERG_SPARSE_NOISY (0.5 %) on, the
     * measurements are fitted rather than trusted point by point, the
     * default budget is a quarter of the sweep and the descent goes to the
     * bottom (docs/sparse-profiling.md, "Under measurement noise"). A
     * measurer that learns the noise only from its first samples sets it
     * with erg_sparse_set_noise. */
    double time_noise;
    /* Under noise (time_noise >= ERG_SPARSE_NOISY): measure a point again
     * when it departs from the fit by more than 2 standard deviations of its
     * mean (default true). False where a repeat would read the same number
     * (`--replay` of a file): erg_sparse_uncertain() then lists the points
     * it would have measured again. */
    bool remeasure;
} erg_sparse_opts;

ERG_API void erg_sparse_opts_init(erg_sparse_opts *opts);

/* A time_noise at least this large (0.5 %) switches the predictor to the
 * noise fit (docs/sparse-profiling.md: "Under measurement noise"). */
#define ERG_SPARSE_NOISY 0.005
/* time_noise: estimate the noise from the measurements (any negative value
 * means the same). The estimate: every measured point against the line
 * through its two measured neighbours on its curve (log value over log
 * clock), the median absolute residual scaled to a standard deviation, time
 * and energy; re-estimated after every report. The curve's own bends and
 * jags count as noise: an upper bound. It is used from 8 residuals on, at
 * least the default 0.002; once it reaches ERG_SPARSE_NOISY the noisy
 * procedure stays on (a quarter of the sweep from then). */
#define ERG_SPARSE_NOISE_AUTO (-1.0)

typedef struct erg_sparse erg_sparse;

/* A sparse profiler for num_stages stages whose GPUs support the clocks
 * freqs_mhz (any order, duplicates ignored; at least 2). */
ERG_API erg_status erg_sparse_new(int num_stages, const int *freqs_mhz, size_t num_freqs,
                                  const erg_sparse_opts *opts, erg_sparse **out, erg_error *err);
ERG_API void erg_sparse_free(erg_sparse *sp);
/* Set the noise level (as opts.time_noise: 0..1, or negative: estimated)
 * after erg_sparse_new -- for a measurer that estimates it from the samples
 * of its first measurements (the server: from the maximum clock's). Valid
 * only while no (stage, kind) has measured a clock below the maximum
 * (ERG_ESTATE after: the budget and the descent depend on it); a clock
 * erg_sparse_next named before is to be asked again. The default budget is
 * worked out again. ERG_EINVAL for a value outside the range. */
ERG_API erg_status erg_sparse_set_noise(erg_sparse *sp, double time_noise, erg_error *err);
/* The noise level in use (what opts.time_noise means now). With the noise
 * estimated, *estimate (may be NULL) receives the latest estimate (NAN
 * before there is one) and *points (may be NULL) the residuals it rests on
 * (it is used from 8 on); declared: NAN and 0. */
ERG_API double erg_sparse_noise(const erg_sparse *sp, double *estimate, int *points);

/* The clock (MHz) (stage, kind) wants measured next, or 0 when it needs no
 * more measurements. Pure: asking twice gives the same answer. (It caches
 * what every stage wants until the next report: do not call it on one
 * erg_sparse from two threads at once.) */
ERG_API int erg_sparse_next(const erg_sparse *sp, int stage, erg_instr_kind kind);
/* Give the measurement of (stage, kind) at pt->freq_mhz (normally the clock
 * erg_sparse_next named; any supported clock not yet measured is accepted). */
ERG_API erg_status erg_sparse_report(erg_sparse *sp, int stage, erg_instr_kind kind,
                                     const erg_profile_point *pt, erg_error *err);
/* True when no (stage, kind) wants another measurement. */
ERG_API bool erg_sparse_done(const erg_sparse *sp);
/* Points measured so far, and the full sweep's count (stages x 2 x clocks). */
ERG_API int erg_sparse_num_measured(const erg_sparse *sp);
ERG_API int erg_sparse_num_full(const erg_sparse *sp);

/* Measure one point: fill out->time_s and out->energy_j of (stage, kind) at
 * freq_mhz. A non-zero status stops erg_sparse_run with it. */
typedef erg_status (*erg_measure_fn)(void *user, int stage, erg_instr_kind kind, int freq_mhz,
                                     erg_profile_point *out, erg_error *err);
/* Run to the end in rounds: each round measures every (stage, kind) that
 * still wants a clock once (the order a pipeline measures in lock-step
 * windows). *rounds (may be NULL) receives the number of rounds. */
ERG_API erg_status erg_sparse_run(erg_sparse *sp, erg_measure_fn measure, void *user, int *rounds,
                                  erg_error *err);

/* The full predicted profile: every supported clock of every (stage, kind),
 * measured points as measured, the others predicted (model in the docs;
 * stages whose measurements agree to rounding at every common clock are
 * replicas and share their measurements).
 * Needs at least one measurement of every (stage, kind). */
ERG_API erg_status erg_sparse_predict(const erg_sparse *sp, erg_profile **out, erg_error *err);
/* Under noise: the measured clocks of (stage, kind) that depart from the
 * fit by more than 2 standard deviations of their mean -- where a live
 * profiler measures again, and what `--replay` would have measured again.
 * Writes at most max clocks (MHz) to freqs_mhz (may be NULL with max 0) and
 * returns how many there are (0 without noise or before every (stage, kind)
 * has a measurement). */
ERG_API int erg_sparse_uncertain(const erg_sparse *sp, int stage, erg_instr_kind kind,
                                 int *freqs_mhz, int max);
/* Measurements of (stage, kind, freq_mhz) averaged into its point (0: not
 * measured; more than 1: measured again). */
ERG_API int erg_sparse_num_samples(const erg_sparse *sp, int stage, erg_instr_kind kind,
                                   int freq_mhz);
/* Whether (stage, kind, freq_mhz) was measured. */
ERG_API bool erg_sparse_is_measured(const erg_sparse *sp, int stage, erg_instr_kind kind,
                                    int freq_mhz);
/* Write the predicted profile as a stage-profile CSV with a sixth column
 * `source` = measured | predicted (docs/formats.md). */
ERG_API erg_status erg_sparse_write_csv(const erg_sparse *sp, const char *path, erg_error *err);
/* The same CSV text in memory: *out (NUL-terminated, *len bytes without the
 * NUL; len may be NULL) is released with erg_free. */
ERG_API erg_status erg_sparse_format_csv(const erg_sparse *sp, char **out, size_t *len,
                                         erg_error *err);

/* The acceptance check of a prediction -- plans chosen on it, evaluated on
 * the real profile -- needs the planner and the emulator, which sit above
 * this module: erg_sparse_check_plans in emulate.h. */

/* ---- measurement stability (the measurer's side) ---- */

/* Options of erg_stable_measure; initialise with erg_stable_opts_init. */
typedef struct erg_stable_opts {
    int warmup;      /* Samples taken and thrown away first (default 1). */
    int min_samples; /* Kept samples before the stopping rule applies (default 3). */
    int max_samples; /* Stop here even if not stable (default 20). */
    double rel_ci;   /* Stop when the 95 % confidence interval half-width of the
                        mean time and mean energy is at most this fraction of the
                        mean (default 0.01). */
} erg_stable_opts;

ERG_API void erg_stable_opts_init(erg_stable_opts *opts);

/* One sample: the time and energy of one instruction (or of one window divided
 * by its instruction count). */
typedef erg_status (*erg_sample_fn)(void *user, double *time_s, double *energy_j, erg_error *err);

/* Measurement outcome. */
typedef struct erg_stable_result {
    double time_s, energy_j; /* Outlier-filtered means. */
    int samples;             /* Samples kept (warm-up excluded). */
    int dropped;             /* Samples the outlier filter dropped (time or energy). */
    bool converged;          /* The confidence rule was met before max_samples. */
} erg_stable_result;

/* Take warm-up samples, then samples until the confidence rule holds (or
 * max_samples), and return EnvPipe's outlier-filtered means (mean of the values
 * strictly within one population standard deviation of the mean; the plain
 * mean with 3 values or fewer, or when that leaves none). */
ERG_API erg_status erg_stable_measure(erg_sample_fn sample, void *user, const erg_stable_opts *opts,
                                      erg_stable_result *out, erg_error *err);
/* Half-width of the 95 % confidence interval (Student's t) of the mean of n
 * values, relative to the mean: INFINITY with fewer than 2 values or a zero
 * mean of values that differ. The stopping rule of erg_stable_measure, for a
 * measurer that collects its samples itself (the server's sparse profiler). */
ERG_API double erg_rel_ci_halfwidth(const double *v, size_t n);
/* EnvPipe's "average without outliers" of n values (the rule above). */
ERG_API double erg_mean_without_outliers(const double *v, size_t n, int *dropped);

#ifdef __cplusplus
}
#endif
#endif
