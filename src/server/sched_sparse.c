/* sched_sparse.c: the InstructionProfiler's sparse mode: per window, every
 * (stage, instruction) runs the clock the sparse profiler (sparse.h) wants
 * measured next; a clock is measured until its samples meet a
 * confidence-interval rule, then reported; at the end the full profile is
 * predicted (docs/sparse-profiling.md, "In the server"). */
#include "server/sched_ops.h"

#include "ergon/sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct srv_sparse_prof {
    const srv_sched_ctx *ctx;
    erg_sparse *sp;
    int warmup_windows; /* Windows at the maximum clock first. */
    long step;          /* Windows handed out. */
    double ratio;       /* Warm-up share of each window's iterations. */
    bool energy_from_iters;
    double rel_ci;   /* Stop a clock when both CIs are within this share. */
    int min_samples; /* Samples a clock needs before the CI rule applies. */
    int max_windows; /* Windows one clock may take at most. */
    int top;         /* Highest clock of the sweep. */
    int *cur;        /* Per curve (2*stage + kind): clock of the last window, 0 none. */
    int *tries;      /* Windows spent on cur. */
    double **acc_t, **acc_e;
    int *acc_n, *acc_cap;
    /* The noise level given to the sparse profiler: scheduler_args' time_noise, or estimated
     * from the samples of the maximum clock (noise_est, over noise_curves curves) before any
     * (stage, instruction) is handed a lower clock; until then a curve whose maximum is
     * reported runs at it without measuring. */
    bool noise_set;
    bool noise_declared;
    double noise_est;
    int noise_curves;
    double *se_top;      /* per curve: relative standard error of its maximum clock's mean */
    int measure_windows; /* Windows after the warm-up. */
    int repeats;         /* (stage, instruction) clocks measured again for the CI rule. */
    int unconverged;     /* Clocks reported at max_windows without meeting the rule. */
};

static int n_curves(const srv_sparse_prof *p)
{
    return 2 * p->ctx->num_stages;
}

void erg__srv_sparse_prof_free(srv_sparse_prof *p)
{
    if (!p)
        return;
    if (p->acc_t)
        for (int i = 0; i < n_curves(p); i++) {
            erg__free(p->acc_t[i]);
            erg__free(p->acc_e[i]);
        }
    erg__free(p->acc_t);
    erg__free(p->acc_e);
    erg__free(p->acc_n);
    erg__free(p->acc_cap);
    erg__free(p->cur);
    erg__free(p->tries);
    erg__free(p->se_top);
    erg_sparse_free(p->sp);
    erg__free(p);
}

erg_status erg__srv_sparse_prof_check_args(const json_t *args, erg_error *err)
{
    const json_t *v;
    if ((v = json_object_get(args, "budget")) &&
        (json_integer_value(v) < 0 || json_integer_value(v) > 10000000))
        return erg_error_set(err, ERG_EINVAL,
                             "scheduler_args: budget must be in [0, 10000000] "
                             "(0: a sixth of the full sweep), got %lld",
                             (long long)json_integer_value(v));
    if ((v = json_object_get(args, "patience")) &&
        (json_integer_value(v) < 1 || json_integer_value(v) > 1000))
        return erg_error_set(err, ERG_EINVAL,
                             "scheduler_args: patience must be in [1, 1000], "
                             "got %lld",
                             (long long)json_integer_value(v));
    if ((v = json_object_get(args, "rel_ci")) &&
        !(json_number_value(v) >= 0 && json_number_value(v) <= 1))
        return erg_error_set(err, ERG_EINVAL, "scheduler_args: rel_ci must be in [0, 1], got %g",
                             json_number_value(v));
    if ((v = json_object_get(args, "max_windows_per_clock")) &&
        (json_integer_value(v) < 1 || json_integer_value(v) > 100))
        return erg_error_set(err, ERG_EINVAL,
                             "scheduler_args: max_windows_per_clock must be in [1, 100], got %lld",
                             (long long)json_integer_value(v));
    if ((v = json_object_get(args, "time_noise")) &&
        !(json_number_value(v) >= 0 && json_number_value(v) <= 1))
        return erg_error_set(err, ERG_EINVAL,
                             "scheduler_args: time_noise must be in [0, 1] (the relative noise "
                             "of one measured point; leave it out to have it estimated from "
                             "the samples), got %g",
                             json_number_value(v));
    bool sparse = json_is_true(json_object_get(args, "sparse"));
    static const char *const only_sparse[] = {"budget", "patience", "rel_ci",
                                              "max_windows_per_clock", "time_noise"};
    for (size_t i = 0; !sparse && i < ERG__ARRAY_LEN(only_sparse); i++)
        if (json_object_get(args, only_sparse[i]))
            return erg_error_set(err, ERG_EINVAL,
                                 "scheduler_args: %s applies to sparse profiling only; add "
                                 "\"sparse\": true",
                                 only_sparse[i]);
    return ERG_OK;
}

erg_status erg__srv_sparse_prof_new(const srv_sched_ctx *ctx, const json_t *args, int min_state,
                                    double ratio, bool energy_from_iters, srv_sparse_prof **out,
                                    erg_error *err)
{
    *out = NULL;
    if (ctx->mode != SRV_MODE_FREQUENCY)
        return erg_error_set(err, ERG_EINVAL,
                             "sparse profiling predicts clocks (frequency mode); this job's "
                             "mode is %s: profile it with \"sparse\": false",
                             erg__srv_mode_name(ctx->mode));
    for (int s = 0; s < ctx->num_stages; s++)
        for (int i = 0; i < ctx->n_instrs[s]; i++) {
            int in = ctx->instrs[s][i];
            if (erg__srv_instr_is_compute(in) && in != SRV_I_FORWARD && in != SRV_I_BACKWARD)
                return erg_error_set(err, ERG_EINVAL,
                                     "sparse profiling models forward and backward only; stage "
                                     "%d's pipe_schedule has %s: profile it with \"sparse\": "
                                     "false (a full sweep)",
                                     s, erg__srv_instr_names[in]);
        }
    int *freqs = erg__calloc((size_t)ctx->n_states, sizeof(int));
    if (!freqs)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    int nf = 0;
    for (int i = 0; i < ctx->n_states; i++)
        if (ctx->states[i] >= min_state)
            freqs[nf++] = ctx->states[i];
    if (nf < 2) {
        erg__free(freqs);
        return erg_error_set(err, ERG_EINVAL,
                             "sparse profiling needs at least 2 clocks at or above "
                             "minimum_power_state %d; the job offers %d",
                             min_state, nf);
    }
    srv_sparse_prof *p = erg__calloc(1, sizeof *p);
    erg_status st = ERG_ENOMEM;
    if (!p)
        goto fail;
    p->ctx = ctx;
    /* One warm-up window (the full sweep has two): the first measurement is
     * at the maximum clock anyway, every window drops its first iterations,
     * and a clock whose samples are not yet stable is measured again. */
    p->warmup_windows = 1;
    p->ratio = ratio;
    p->energy_from_iters = energy_from_iters;
    p->rel_ci = json_is_number(json_object_get(args, "rel_ci"))
                    ? json_number_value(json_object_get(args, "rel_ci"))
                    : 0.01;
    p->min_samples = 3;
    p->max_windows = json_is_integer(json_object_get(args, "max_windows_per_clock"))
                         ? (int)json_integer_value(json_object_get(args, "max_windows_per_clock"))
                         : 2;
    p->top = freqs[0];
    for (int i = 1; i < nf; i++)
        p->top = ERG__MAX(p->top, freqs[i]);
    erg_sparse_opts o;
    erg_sparse_opts_init(&o);
    if (json_is_integer(json_object_get(args, "budget")))
        o.budget = (int)json_integer_value(json_object_get(args, "budget"));
    if (json_is_integer(json_object_get(args, "patience")))
        o.patience = (int)json_integer_value(json_object_get(args, "patience"));
    p->noise_est = NAN;
    if (json_is_number(json_object_get(args, "time_noise"))) {
        o.time_noise = json_number_value(json_object_get(args, "time_noise"));
        p->noise_set = p->noise_declared = true;
    }
    if ((st = erg_sparse_new(ctx->num_stages, freqs, (size_t)nf, &o, &p->sp, err)))
        goto fail;
    int nc = n_curves(p);
    st = ERG_ENOMEM;
    p->cur = erg__calloc((size_t)nc, sizeof(int));
    p->tries = erg__calloc((size_t)nc, sizeof(int));
    p->acc_t = erg__calloc((size_t)nc, sizeof(double *));
    p->acc_e = erg__calloc((size_t)nc, sizeof(double *));
    p->acc_n = erg__calloc((size_t)nc, sizeof(int));
    p->acc_cap = erg__calloc((size_t)nc, sizeof(int));
    p->se_top = erg__calloc((size_t)nc, sizeof(double));
    if (!p->cur || !p->tries || !p->acc_t || !p->acc_e || !p->acc_n || !p->acc_cap || !p->se_top)
        goto fail;
    for (int i = 0; i < nc; i++)
        p->se_top[i] = NAN;
    erg__free(freqs);
    *out = p;
    return ERG_OK;
fail:
    erg__free(freqs);
    erg__srv_sparse_prof_free(p);
    if (st == ERG_ENOMEM)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    return st;
}

/* The clock (stage, kind) measures in the next window: the one whose samples
 * are still accumulating (not yet stable), else the one the sparse profiler
 * wants. (A replica stage's wish can change when its twin's measurement
 * lands, and under noise every report moves the fit and so what the others
 * want, a clock measured again included; samples must not be mixed with
 * another clock's.) */
static int next_clock(const srv_sparse_prof *p, int s, erg_instr_kind k)
{
    int ci = 2 * s + (int)k;
    if (p->acc_n[ci] > 0 && p->cur[ci])
        return p->cur[ci];
    /* the noise level is not known yet: no lower clock before it is */
    if (!p->noise_set && erg_sparse_is_measured(p->sp, s, k, p->top))
        return 0;
    return erg_sparse_next(p->sp, s, k);
}

/* Relative standard error of the mean of n samples (sample standard deviation / sqrt(n) /
 * |mean|); NAN with fewer than 2 or a zero mean. */
static double rel_se(const double *v, size_t n)
{
    if (n < 2)
        return NAN;
    double m = 0, ss = 0;
    for (size_t i = 0; i < n; i++)
        m += v[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++)
        ss += (v[i] - m) * (v[i] - m);
    if (!(fabs(m) > 0))
        return NAN;
    return sqrt(ss / (double)(n - 1) / (double)n) / fabs(m);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Once every curve has reported its maximum clock: the noise of one measured point is the
 * median over the curves of the relative standard error of the maximum clock's mean (the
 * larger of time's and energy's; each mean is what a point reports, from the same rule), at
 * least the sparse profiler's default 0.002; given to the sparse profiler before any lower
 * clock is handed out. */
static erg_status settle_noise(srv_sparse_prof *p, erg_error *err)
{
    int nc = n_curves(p), k = 0;
    for (int i = 0; i < nc; i++)
        if (!erg_sparse_is_measured(p->sp, i / 2, (erg_instr_kind)(i % 2), p->top))
            return ERG_OK;
    double *v = erg__calloc((size_t)nc, sizeof(double));
    if (!v)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (int i = 0; i < nc; i++)
        if (!isnan(p->se_top[i]))
            v[k++] = p->se_top[i];
    p->noise_set = true;
    p->noise_curves = k;
    if (k) {
        qsort(v, (size_t)k, sizeof(double), cmp_dbl);
        p->noise_est = k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
    }
    erg__free(v);
    if (!k)
        return ERG_OK; /* one sample per clock: no spread to estimate from; the default */
    double level = p->noise_est > 0.002 ? p->noise_est : 0.002;
    erg_error e2;
    erg_status st = erg_sparse_set_noise(p->sp, level > 1 ? 1 : level, &e2);
    return st ? erg_error_set(err, st, "sparse profiling: %s", e2.msg) : ERG_OK;
}

void erg__srv_sparse_prof_next(srv_sparse_prof *p, int **out, bool *done)
{
    const srv_sched_ctx *c = p->ctx;
    *done = false;
    if (p->step >= p->warmup_windows && erg_sparse_done(p->sp)) {
        *done = true;
        return;
    }
    for (int s = 0; s < c->num_stages; s++) {
        int f = 0, b = 0;
        if (p->step >= p->warmup_windows) {
            f = p->cur[2 * s] = next_clock(p, s, ERG_FORWARD);
            b = p->cur[2 * s + 1] = next_clock(p, s, ERG_BACKWARD);
        }
        /* A (stage, instruction) with nothing left to measure runs at the
         * maximum clock, the fastest: it never holds the others back. */
        for (int i = 0; i < c->n_instrs[s]; i++) {
            int in = c->instrs[s][i];
            out[s][i] = in == SRV_I_FORWARD && f ? f : in == SRV_I_BACKWARD && b ? b : c->states[0];
        }
    }
    if (p->step >= p->warmup_windows)
        p->measure_windows++;
    p->step++;
}

static erg_status push(srv_sparse_prof *p, int ci, double t, double e)
{
    if (p->acc_n[ci] == p->acc_cap[ci]) {
        int cap = p->acc_cap[ci] ? 2 * p->acc_cap[ci] : 64;
        if (cap > 1000000)
            return ERG_EINVAL;
        double *nt = erg__realloc(p->acc_t[ci], (size_t)cap * sizeof(double));
        if (!nt)
            return ERG_ENOMEM;
        p->acc_t[ci] = nt;
        double *ne = erg__realloc(p->acc_e[ci], (size_t)cap * sizeof(double));
        if (!ne)
            return ERG_ENOMEM;
        p->acc_e[ci] = ne;
        p->acc_cap[ci] = cap;
    }
    p->acc_t[ci][p->acc_n[ci]] = t;
    p->acc_e[ci][p->acc_n[ci]] = e;
    p->acc_n[ci]++;
    return ERG_OK;
}

erg_status erg__srv_sparse_prof_observe(srv_sparse_prof *p, const srv_result *r, erg_error *err)
{
    if (p->step <= p->warmup_windows)
        return ERG_OK; /* a warm-up window */
    static const int codes[2] = {SRV_I_FORWARD, SRV_I_BACKWARD};
    for (int s = 0; s < p->ctx->num_stages; s++) {
        const srv_result *rs = &r[s];
        int d = erg__srv_drop_of(rs->n_iters, p->ratio);
        double iter_p = erg__srv_iter_power(rs, d);
        for (int k = 0; k < 2; k++) {
            int ci = 2 * s + k, f = p->cur[ci];
            if (!f)
                continue;
            const srv_series *ts = &rs->time_bd[codes[k]], *es = &rs->energy_bd[codes[k]];
            int before = p->acc_n[ci];
            for (int i = d; i < ts->n_iters; i++)
                for (int o = 0; o < ts->n_occ[i]; o++) {
                    double t = ts->vals[i][o], e = NAN;
                    if (i < es->n_iters && o < es->n_occ[i])
                        e = es->vals[i][o];
                    else if (p->energy_from_iters && !isnan(iter_p))
                        e = t * iter_p; /* approximation, as the full sweep's */
                    if (isnan(e))
                        return erg_error_set(
                            err, ERG_EINVAL,
                            "sparse profiling needs the energy of every instruction: stage %d "
                            "sent %s times without energies at %d MHz (send energy_breakdown, "
                            "or set energy_from_iterations)",
                            s, erg__srv_instr_names[codes[k]], f);
                    erg_status st = push(p, ci, t, e);
                    if (st)
                        return erg_error_set(err, st, "stage %d, %s at %d MHz: %s", s,
                                             erg__srv_instr_names[codes[k]], f,
                                             st == ERG_ENOMEM ? "out of memory"
                                                              : "too many samples");
                }
            if (p->acc_n[ci] == before)
                return erg_error_set(err, ERG_EINVAL,
                                     "stage %d reported no %s samples at %d MHz after its "
                                     "warm-up iterations (send time_breakdown, and more "
                                     "iterations per window)",
                                     s, erg__srv_instr_names[codes[k]], f);
            p->tries[ci]++;
            size_t n = (size_t)p->acc_n[ci];
            bool stable = (int)n >= p->min_samples &&
                          erg_rel_ci_halfwidth(p->acc_t[ci], n) <= p->rel_ci &&
                          erg_rel_ci_halfwidth(p->acc_e[ci], n) <= p->rel_ci;
            if (!stable && p->tries[ci] < p->max_windows) {
                p->repeats++; /* the next window measures the same clock again */
                continue;
            }
            if (!stable)
                p->unconverged++;
            if (f == p->top && !p->noise_set) {
                double a = rel_se(p->acc_t[ci], n), b = rel_se(p->acc_e[ci], n);
                p->se_top[ci] = isnan(a) ? b : isnan(b) ? a : a > b ? a : b;
            }
            erg_profile_point pt = {.freq_mhz = f};
            pt.time_s = erg_mean_without_outliers(p->acc_t[ci], n, NULL);
            pt.energy_j = erg_mean_without_outliers(p->acc_e[ci], n, NULL);
            erg_error e2;
            erg_status st = erg_sparse_report(p->sp, s, (erg_instr_kind)k, &pt, &e2);
            if (st)
                return erg_error_set(err, st, "sparse profiling: %s", e2.msg);
            p->acc_n[ci] = 0;
            p->tries[ci] = 0;
        }
    }
    return p->noise_set ? ERG_OK : settle_noise(p, err);
}

bool erg__srv_sparse_prof_ready(const srv_sparse_prof *p)
{
    for (int s = 0; s < p->ctx->num_stages; s++)
        if (!erg_sparse_is_measured(p->sp, s, ERG_FORWARD, p->top) ||
            !erg_sparse_is_measured(p->sp, s, ERG_BACKWARD, p->top))
            return false;
    return true;
}

erg_status erg__srv_sparse_prof_csv(const srv_sparse_prof *p, char **text, size_t *len,
                                    erg_error *err)
{
    return erg_sparse_format_csv(p->sp, text, len, err);
}

erg_status erg__srv_sparse_prof_profile(const srv_sparse_prof *p, erg_profile **out, erg_error *err)
{
    return erg_sparse_predict(p->sp, out, err);
}

erg_status erg__srv_sparse_prof_summary(const srv_sparse_prof *p, erg__buf *out)
{
    json_t *o = json_pack("{s:b,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:i}", "done", erg_sparse_done(p->sp),
                          "measured", erg_sparse_num_measured(p->sp), "full_sweep",
                          erg_sparse_num_full(p->sp), "warmup_windows", p->warmup_windows,
                          "measure_windows", p->measure_windows, "repeated_measurements",
                          p->repeats, "unconverged_clocks", p->unconverged, "rel_ci", p->rel_ci,
                          "max_windows_per_clock", p->max_windows);
    if (!o)
        return ERG_ENOMEM;
    /* the noise level: what it is, where it came from, and whether the noisy procedure
     * (docs/sparse-profiling.md, "Under measurement noise") is on */
    double level = erg_sparse_noise(p->sp, NULL, NULL);
    const char *src = p->noise_declared ? "scheduler_args"
                      : !p->noise_set   ? "default (not yet estimated)"
                      : p->noise_curves ? "estimated from the maximum clock's samples"
                                        : "default (no spread to estimate from)";
    if (json_object_set_new(o, "time_noise", json_real(level)) ||
        json_object_set_new(o, "time_noise_source", json_string(src)) ||
        json_object_set_new(o, "time_noise_estimate",
                            isnan(p->noise_est) ? json_null() : json_real(p->noise_est)) ||
        json_object_set_new(o, "time_noise_curves", json_integer(p->noise_curves)) ||
        json_object_set_new(o, "noisy_procedure", json_boolean(level >= ERG_SPARSE_NOISY))) {
        json_decref(o);
        return ERG_ENOMEM;
    }
    erg_status st = erg__srv_json_py(o, out);
    json_decref(o);
    return st;
}
