/* stable.c: thermally stable measurements: warm-up, a confidence-interval
 * stopping rule and EnvPipe's outlier filter (docs/sparse-profiling.md). */
#include "core/internal.h"
#include "ergon/sparse.h"

#include <math.h>
#include <string.h>

void erg_stable_opts_init(erg_stable_opts *o)
{
    memset(o, 0, sizeof *o);
    o->warmup = 1;
    o->min_samples = 3;
    o->max_samples = 20;
    o->rel_ci = 0.01;
}

double erg_mean_without_outliers(const double *v, size_t n, int *dropped)
{
    if (dropped)
        *dropped = 0;
    if (!n)
        return NAN;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    double mean = sum / (double)n;
    if (n <= 3)
        return mean;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (v[i] - mean) * (v[i] - mean);
    double sd = sqrt(ss / (double)n); /* population standard deviation */
    double keep = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] > mean - sd && v[i] < mean + sd) {
            keep += v[i];
            k++;
        }
    if (!k) /* all equal (sd = 0): EnvPipe would give NaN here */
        return mean;
    if (dropped)
        *dropped = (int)(n - k);
    return keep / (double)k;
}

/* Two-sided 97.5 % quantile of Student's t with df degrees of freedom. */
static double t975(int df)
{
    static const double tab[] = {0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                                 2.306, 2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                                 2.120, 2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
                                 2.064, 2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
    if (df < 1)
        return INFINITY;
    if (df < (int)ERG__ARRAY_LEN(tab))
        return tab[df];
    return 1.96 + 2.4 / df; /* within 0.3 % of the exact value for df > 30 */
}

/* Half-width of the 95 % confidence interval of the mean, relative to it. */
double erg_rel_ci_halfwidth(const double *v, size_t nv)
{
    int n = nv > 100000 ? 100000 : (int)nv;
    if (n < 2)
        return INFINITY;
    double mean = 0;
    for (int i = 0; i < n; i++)
        mean += v[i];
    mean /= n;
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (v[i] - mean) * (v[i] - mean);
    double sd = sqrt(ss / (n - 1));
    if (mean == 0)
        return sd == 0 ? 0 : INFINITY;
    return t975(n - 1) * sd / sqrt((double)n) / fabs(mean);
}

erg_status erg_stable_measure(erg_sample_fn sample, void *user, const erg_stable_opts *opts,
                              erg_stable_result *out, erg_error *err)
{
    if (!sample || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_stable_measure: NULL argument");
    erg_stable_opts o;
    if (opts)
        o = *opts;
    else
        erg_stable_opts_init(&o);
    if (o.warmup < 0 || o.min_samples < 1 || o.max_samples < o.min_samples ||
        o.max_samples > 100000 || !(o.rel_ci >= 0) || !isfinite(o.rel_ci))
        return erg_error_set(err, ERG_EINVAL,
                             "measurement options: warm-up %d, min %d, max %d samples, relative "
                             "CI %g (need warm-up >= 0, 1 <= min <= max <= 100000, CI >= 0)",
                             o.warmup, o.min_samples, o.max_samples, o.rel_ci);
    memset(out, 0, sizeof *out);
    double *t = erg__calloc((size_t)o.max_samples * 2, sizeof(double));
    if (!t)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    double *e = t + o.max_samples;
    erg_status st = ERG_OK;
    for (int i = 0; i < o.warmup && !st; i++) {
        double a, b;
        st = sample(user, &a, &b, err);
    }
    int n = 0;
    while (!st && n < o.max_samples) {
        st = sample(user, &t[n], &e[n], err);
        if (st)
            break;
        if (!(t[n] >= 0) || !isfinite(t[n]) || !(e[n] >= 0) || !isfinite(e[n])) {
            st = erg_error_set(err, ERG_EINVAL,
                               "measurement %d: invalid sample (time %g s, "
                               "energy %g J)",
                               n + 1, t[n], e[n]);
            break;
        }
        n++;
        if (n >= o.min_samples && erg_rel_ci_halfwidth(t, (size_t)n) <= o.rel_ci &&
            erg_rel_ci_halfwidth(e, (size_t)n) <= o.rel_ci) {
            out->converged = true;
            break;
        }
    }
    if (!st) {
        int dt, de;
        out->time_s = erg_mean_without_outliers(t, (size_t)n, &dt);
        out->energy_j = erg_mean_without_outliers(e, (size_t)n, &de);
        out->samples = n;
        out->dropped = ERG__MAX(dt, de);
    }
    erg__free(t);
    return st;
}
