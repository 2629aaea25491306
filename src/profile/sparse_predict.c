/* sparse_predict.c: the prediction half of sparse profiling (docs/sparse-profiling.md): every
 * clock a curve did not measure, from its measured neighbours (interpolation in 1/f and power),
 * the shape shared by the stages and pooled replica curves, and, under measurement noise, a
 * smoothed local-polynomial fit; then the predicted profile and its CSV. */
#include "profile/sparse_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Linear interpolation/extrapolation of y over x through (x0,y0), (x1,y1). */
static double lerp(double x0, double y0, double x1, double y1, double x)
{
    if (x1 == x0)
        return y0;
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
}

/* Predict (time, energy) at clock index x from the measured points of one
 * series (meas, t, e over the clock indices). Time is linear in 1/f between
 * measured neighbours (t = a/f + b piecewise), power E/t linear in f; beyond
 * the measured range the nearest segment is extended (one point: t ~ 1/f,
 * constant power). */
static void interp_point(const erg_sparse *sp, const bool *meas, const double *tv, const double *ev,
                         int x, double *t, double *e)
{
    int n = sp->n;
    int idx[2] = {x, x}, k = 0;
    int above = -1, below = -1;
    for (int i = x - 1; i >= 0; i--)
        if (meas[i]) {
            above = i;
            break;
        }
    for (int i = x + 1; i < n; i++)
        if (meas[i]) {
            below = i;
            break;
        }
    if (above >= 0 && below >= 0) {
        idx[0] = above;
        idx[1] = below;
        k = 2;
    } else {
        int dir = above >= 0 ? -1 : 1;
        for (int i = x + dir; i >= 0 && i < n && k < 2; i += dir)
            if (meas[i])
                idx[k++] = i;
    }
    double f = sp->freqs[x];
    if (k == 0) {
        *t = *e = 0;
        return;
    }
    if (k == 1) {
        double f0 = sp->freqs[idx[0]];
        *t = tv[idx[0]] * f0 / f;
        *e = ev[idx[0]] / tv[idx[0]] * *t;
        return;
    }
    double f0 = sp->freqs[idx[0]], f1 = sp->freqs[idx[1]];
    double t0 = tv[idx[0]], t1 = tv[idx[1]];
    double tp = lerp(1 / f0, t0, 1 / f1, t1, 1 / f);
    double tmin = ERG__MIN(t0, t1) * 0.5;
    if (!(tp > tmin))
        tp = tmin;
    double p0 = ev[idx[0]] / t0, p1 = ev[idx[1]] / t1;
    double pp = lerp(f0, p0, f1, p1, f);
    double pmin = ERG__MIN(p0, p1) * 0.5;
    if (!(pp > pmin))
        pp = pmin;
    *t = tp;
    *e = pp * tp;
}

/* The shared shape of instruction kind k: every stage's measurements divided
 * by its own value at the highest clock, averaged per clock over the stages
 * that measured it, interpolated where none did. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void shared_shape(const erg_sparse *sp, const curve *cv, int kind, bool *m, double *ts,
                         double *es, double *tmp)
{
    int n = sp->n;
    double *tt = tmp, *ee = tmp + sp->S;
    for (int x = 0; x < n; x++) {
        int k = 0;
        for (int s = 0; s < sp->S; s++) {
            const curve *c = &cv[2 * s + kind];
            if (!c->meas[0] || !c->meas[x])
                continue;
            tt[k] = c->t_s[x] / c->t_s[0];
            ee[k] = c->e_j[x] / (c->e_j[0] > 0 ? c->e_j[0] : 1);
            k++;
        }
        m[x] = k > 0;
        ts[x] = k ? median(tt, k) : 0;
        es[x] = k ? median(ee, k) : 0;
    }
    for (int x = 0; x < n; x++)
        if (!m[x])
            interp_point(sp, m, ts, es, x, &ts[x], &es[x]);
}

/* Predict curve c at clock index x: its value at the highest clock times the
 * shared shape, times a correction interpolated (linearly in f) between the
 * ratios measured/shape at c's own measured clocks. */
static void predict_point(const erg_sparse *sp, const curve *c, const double *ts, const double *es,
                          int x, double *t, double *e, double *u)
{
    *u = 0;
    if (!c->meas[0] || !(ts[x] > 0)) {
        interp_point(sp, c->meas, c->t_s, c->e_j, x, t, e);
        return;
    }
    int above = -1, below = -1;
    for (int i = x - 1; i >= 0; i--)
        if (c->meas[i]) {
            above = i;
            break;
        }
    for (int i = x + 1; i < sp->n; i++)
        if (c->meas[i]) {
            below = i;
            break;
        }
    double T0 = c->t_s[0], E0 = c->e_j[0];
    double rt, re;
#define RT(i) (c->t_s[i] / (T0 * ts[i]))
#define RE(i) (es[i] > 0 && E0 > 0 ? c->e_j[i] / (E0 * es[i]) : 1)
    if (above >= 0 && below >= 0) {
        rt = lerp(sp->freqs[above], RT(above), sp->freqs[below], RT(below), sp->freqs[x]);
        re = lerp(sp->freqs[above], RE(above), sp->freqs[below], RE(below), sp->freqs[x]);
        *u = fabs(RT(above) - RT(below));
    } else {
        int i = above >= 0 ? above : below;
        rt = RT(i);
        re = RE(i);
        *u = fabs(rt - 1);
    }
    /* the curve's own departure from the shared shape (RMS over its points) */
    double ss = 0;
    int k = 0;
    for (int i = 1; i < sp->n; i++)
        if (c->meas[i] && ts[i] > 0) {
            ss += (RT(i) - 1) * (RT(i) - 1);
            k++;
        }
    if (k && sqrt(ss / k) > *u)
        *u = sqrt(ss / k);
#undef RT
#undef RE
    *t = T0 * ts[x] * rt;
    *e = E0 * es[x] * re;
}

static void free_curves(curve *cv, int ncurves)
{
    if (!cv)
        return;
    for (int i = 0; i < ncurves; i++) {
        erg__free(cv[i].meas);
        erg__free(cv[i].t_s);
        erg__free(cv[i].e_j);
        erg__free(cv[i].cnt);
    }
    erg__free(cv);
}

/* The curves with replica stages' measurements pooled: a clock measured on
 * one stage counts as measured on each of its replicas. group[s] receives the
 * lowest stage of s's replica group. */
static curve *pooled_curves(const erg_sparse *sp, int *group)
{
    int n = sp->n, S = sp->S;
    curve *cv = erg__calloc((size_t)(2 * S), sizeof(curve));
    if (!cv)
        return NULL;
    for (int i = 0; i < 2 * S; i++) {
        cv[i].meas = erg__calloc((size_t)n, sizeof(bool));
        cv[i].t_s = erg__calloc((size_t)n, sizeof(double));
        cv[i].e_j = erg__calloc((size_t)n, sizeof(double));
        cv[i].cnt = erg__calloc((size_t)n, sizeof(int));
        if (!cv[i].meas || !cv[i].t_s || !cv[i].e_j || !cv[i].cnt) {
            free_curves(cv, 2 * S);
            return NULL;
        }
    }
    erg__sparse_find_groups(sp, group);
    for (int s = 0; s < S; s++)
        for (int t = 0; t < S; t++) {
            if (group[t] != group[s])
                continue;
            for (int k = 0; k < 2; k++) {
                const curve *src = &sp->c[2 * t + k];
                curve *dst = &cv[2 * s + k];
                for (int x = 0; x < n; x++)
                    if (src->meas[x] && !dst->meas[x]) {
                        dst->meas[x] = true;
                        dst->t_s[x] = src->t_s[x];
                        dst->e_j[x] = src->e_j[x];
                        dst->cnt[x] = src->cnt[x];
                        dst->nmeas++;
                    }
            }
        }
    return cv;
}

/* ---- the fit under measurement noise (docs/sparse-profiling.md) ---- */

/* Half-width, in clocks, of the window the shared shape is smoothed over:
 * none below 1 % noise (each clock's own measurements, with the nearest
 * clocks' until there are 3), 2 from 1 % (docs/sparse-profiling.md: at 0.5 %
 * the +-2 window's bias cost more than the noise it removed, 46 of 192 cells
 * against 8). */
#define NOISE_WINDOW (sp->o.time_noise < 0.0075 ? 0 : 2)
/* Degree of the local polynomial (2 was tried: no better, more variance). */
#define NOISE_DEG 1

/* Solve the 3x3 (or 2x2 with deg 1) normal equations A c = b by Gaussian
 * elimination; false when singular. */
static bool solve_small(double A[3][3], double b[3], int m, double c[3])
{
    for (int i = 0; i < m; i++) {
        int p = i;
        for (int j = i + 1; j < m; j++)
            if (fabs(A[j][i]) > fabs(A[p][i]))
                p = j;
        if (!(fabs(A[p][i]) > 1e-12))
            return false;
        for (int j = 0; j < m; j++) {
            double t = A[i][j];
            A[i][j] = A[p][j];
            A[p][j] = t;
        }
        double t = b[i];
        b[i] = b[p];
        b[p] = t;
        for (int j = i + 1; j < m; j++) {
            double f = A[j][i] / A[i][i];
            for (int k = i; k < m; k++)
                A[j][k] -= f * A[i][k];
            b[j] -= f * b[i];
        }
    }
    for (int i = m - 1; i >= 0; i--) {
        double v = b[i];
        for (int k = i + 1; k < m; k++)
            v -= A[i][k] * c[k];
        c[i] = v / A[i][i];
    }
    return true;
}

/* Weighted local polynomial fit (degree deg, lower where the clocks in the
 * window are too few) of r over the clocks lo..hi, evaluated at x. */
static bool local_poly(const double *r, const double *w, int lo, int hi, int x, int deg,
                       double *val)
{
    int clocks = 0;
    double sw = 0, sy = 0;
    for (int y = lo; y <= hi; y++)
        if (w[y] > 0) {
            clocks++;
            sw += w[y];
            sy += w[y] * r[y];
        }
    if (!(sw > 0))
        return false;
    for (int d = deg < clocks - 1 ? deg : clocks - 1; d >= 1; d--) {
        double A[3][3] = {{0}}, b[3] = {0}, c[3] = {0};
        int m = d + 1;
        for (int y = lo; y <= hi; y++) {
            if (!(w[y] > 0))
                continue;
            double u = (y - x) / (double)(hi - lo + 1), pw[3] = {1, u, u * u};
            for (int i = 0; i < m; i++) {
                b[i] += w[y] * pw[i] * r[y];
                for (int j = 0; j < m; j++)
                    A[i][j] += w[y] * pw[i] * pw[j];
            }
        }
        if (solve_small(A, b, m, c)) {
            *val = c[0];
            return true;
        }
    }
    *val = sy / sw;
    return true;
}

/* Smooth r (weights w, over the clock indices) into g: at each clock the
 * local linear fit over the clocks within NOISE_WINDOW of it (wider where
 * fewer than 3 measurements fall in it), centred, or one-sided where a
 * one-sided window fits clearly better (a step in the curve: A40 times jump
 * 3-6 % between two clocks, and a centred window would smear the step over
 * its width). */
static void smooth_shape(const erg_sparse *sp, const double *r, const double *w, double *g)
{
    int n = sp->n;
    for (int x = 0; x < n; x++) {
        int h = NOISE_WINDOW;
        double val = 0;
        for (;; h++) {
            double cnt = 0;
            for (int y = ERG__MAX(0, x - h); y <= ERG__MIN(n - 1, x + h); y++)
                cnt += w[y];
            if (cnt >= 3 || h >= n)
                break;
        }
        if (!local_poly(r, w, ERG__MAX(0, x - h), ERG__MIN(n - 1, x + h), x, NOISE_DEG, &val)) {
            g[x] = 0;
            continue;
        }
        g[x] = val;
    }
}

/* Fit one quantity (q 0: time, 1: energy) of instruction kind `kind` over all
 * stages: log v(s, x) = a_s + b_s z_x + g_x, z_x the clock's place in the
 * range (0 at the maximum, -1 at the minimum), g a shared shape smoothed
 * across neighbouring clocks, a_s + b_s z a stage's own level and tilt
 * (weighted least squares over its measurements, weights = repeats),
 * alternating a few times. fit[s * n + x] receives the fitted value. */
erg_status erg__sparse_noise_fit(const erg_sparse *sp, const curve *cv, int kind, int q,
                                 double *fit, erg_error *err)
{
    int n = sp->n, S = sp->S;
    double *buf = erg__calloc((size_t)(4 * n + 2 * S), sizeof(double));
    if (!buf)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    double *g = buf, *r = buf + n, *w = buf + 2 * n, *z = buf + 3 * n, *a = buf + 4 * n, *b = a + S;
    double span = sp->freqs[0] - sp->freqs[n - 1];
    for (int x = 0; x < n; x++)
        z[x] = (sp->freqs[x] - sp->freqs[0]) / span;
#define V(c, x) log((q ? (c)->e_j[x] : (c)->t_s[x]) > 0 ? (q ? (c)->e_j[x] : (c)->t_s[x]) : 1e-300)
#define W(c, x) ((c)->cnt ? (double)(c)->cnt[x] : 1.0)
    for (int s = 0; s < S; s++) {
        const curve *c = &cv[2 * s + kind];
        double sw = 0, sy = 0;
        for (int x = 0; x < n; x++)
            if (c->meas[x]) {
                sw += W(c, x);
                sy += W(c, x) * V(c, x);
            }
        a[s] = sw > 0 ? sy / sw : 0;
        b[s] = 0;
    }
    for (int it = 0; it < 8; it++) {
        for (int x = 0; x < n; x++)
            r[x] = w[x] = 0;
        for (int s = 0; s < S; s++) {
            const curve *c = &cv[2 * s + kind];
            for (int x = 0; x < n; x++)
                if (c->meas[x]) {
                    r[x] += W(c, x) * (V(c, x) - a[s] - b[s] * z[x]);
                    w[x] += W(c, x);
                }
        }
        for (int x = 0; x < n; x++)
            if (w[x] > 0)
                r[x] /= w[x];
        smooth_shape(sp, r, w, g);
        for (int s = 0; s < S; s++) {
            const curve *c = &cv[2 * s + kind];
            double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
            int k = 0;
            for (int x = 0; x < n; x++)
                if (c->meas[x]) {
                    double y = V(c, x) - g[x], ww = W(c, x);
                    sw += ww;
                    sx += ww * z[x];
                    sy += ww * y;
                    sxx += ww * z[x] * z[x];
                    sxy += ww * z[x] * y;
                    k++;
                }
            /* the tilt is shrunk toward the shared shape (ridge): a stage
             * departs from the others by a tilt of about 1 % over the range
             * (stage 7 of the published profiles: 0.1-2.6 %), and a slope
             * fitted to ten points with 1-2 % noise is off by as much */
            double sig = sp->o.time_noise, lam = (sig / 0.01) * (sig / 0.01);
            double szz = sxx - sx * sx / (sw > 0 ? sw : 1);
            if (k >= 3 && szz + lam > 1e-12) {
                b[s] = (sxy - sx * sy / sw) / (szz + lam);
                a[s] = (sy - b[s] * sx) / sw;
            } else {
                b[s] = 0;
                a[s] = sw > 0 ? sy / sw : 0;
            }
        }
    }
#undef V
#undef W
    for (int s = 0; s < S; s++)
        for (int x = 0; x < n; x++)
            fit[s * n + x] = exp(a[s] + b[s] * z[x] + g[x]);
    erg__free(buf);
    return ERG_OK;
}

erg_status erg_sparse_predict(const erg_sparse *sp, erg_profile **out, erg_error *err)
{
    if (!sp || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_sparse_predict: NULL argument");
    *out = NULL;
    for (int i = 0; i < 2 * sp->S; i++)
        if (!sp->c[i].nmeas)
            return erg_error_set(err, ERG_ESTATE,
                                 "sparse profiling: stage %d %s has no measurement yet", i / 2,
                                 erg_instr_kind_name((erg_instr_kind)(i % 2)));
    erg__sparse_refresh(sp); /* the noise level in use, when it is estimated */
    int n = sp->n, S = sp->S;
    bool *m = erg__calloc((size_t)n, sizeof(bool));
    double *ts = erg__calloc((size_t)n * 2, sizeof(double));
    double *tmp = erg__calloc((size_t)S * 2, sizeof(double));
    int *group = erg__calloc((size_t)S, sizeof(int));
    curve *cv = group ? pooled_curves(sp, group) : NULL;
    erg_profile *p = NULL;
    erg_status st = (!m || !ts || !tmp || !group || !cv)
                        ? erg_error_set(err, ERG_ENOMEM, "out of memory")
                        : erg_profile_new(&p, err);
    bool noisy = erg__sparse_noisy_mode(sp);
    double *fit = st || !noisy ? NULL : erg__calloc((size_t)(2 * S * n), sizeof(double));
    if (noisy && !st && !fit)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (int k = 0; k < 2 && !st; k++) {
        if (noisy) {
            if ((st = erg__sparse_noise_fit(sp, cv, k, 0, fit, err)) ||
                (st = erg__sparse_noise_fit(sp, cv, k, 1, fit + S * n, err)))
                break;
            /* every clock from the fit; at a measured clock the measured
             * mean's departure from the fit is kept in the part that exceeds
             * its noise (positive-part shrinkage: a departure of d standard
             * deviations keeps 1 - (2/d)^2 of itself, nothing below 2) */
            for (int s = 0; s < S && !st; s++) {
                const curve *c = &cv[2 * s + k];
                for (int x = 0; x < n && !st; x++) {
                    erg_profile_point pt = {sp->freqs[x], fit[s * n + x], fit[S * n + s * n + x]};
                    if (c->meas[x] && x == 0) {
                        /* the maximum as measured: the all-max plan, whose
                         * time the targets are taken from, as measured */
                        pt.time_s = c->t_s[0];
                        pt.energy_j = c->e_j[0];
                    } else if (c->meas[x]) {
                        double se = sp->o.time_noise / sqrt(c->cnt[x] > 0 ? c->cnt[x] : 1);
                        double dt = log(c->t_s[x] / pt.time_s);
                        double de =
                            c->e_j[x] > 0 && pt.energy_j > 0 ? log(c->e_j[x] / pt.energy_j) : 0;
                        double kt =
                            1 - NOISE_OUTLIER * NOISE_OUTLIER * se * se / (dt * dt + 1e-300);
                        double ke =
                            1 - NOISE_OUTLIER * NOISE_OUTLIER * se * se / (de * de + 1e-300);
                        pt.time_s *= exp(dt * (kt > 0 ? kt : 0));
                        pt.energy_j *= exp(de * (ke > 0 ? ke : 0));
                    }
                    st = erg_profile_add(p, s, (erg_instr_kind)k, &pt, err);
                }
            }
            continue;
        }
        shared_shape(sp, cv, k, m, ts, ts + n, tmp);
        for (int s = 0; s < S && !st; s++) {
            const curve *c = &cv[2 * s + k];
            for (int x = 0; x < n && !st; x++) {
                erg_profile_point pt = {sp->freqs[x], 0, 0};
                if (c->meas[x]) {
                    pt.time_s = c->t_s[x];
                    pt.energy_j = c->e_j[x];
                } else {
                    double u;
                    predict_point(sp, c, ts, ts + n, x, &pt.time_s, &pt.energy_j, &u);
                    /* uncertainty margin: how much this curve departs from
                     * the shared shape between its measured neighbours, at
                     * least the noise of a measurement */
                    if (u < sp->o.time_noise)
                        u = sp->o.time_noise;
                    pt.time_s *= 1 + sp->o.time_margin * u;
                    pt.energy_j *= 1 + sp->o.energy_margin * u;
                }
                st = erg_profile_add(p, s, (erg_instr_kind)k, &pt, err);
            }
        }
    }
    erg__free(fit);
    erg__free(m);
    erg__free(ts);
    erg__free(tmp);
    erg__free(group);
    free_curves(cv, 2 * S);
    if (st) {
        erg_profile_free(p);
        return st;
    }
    *out = p;
    return ERG_OK;
}

erg_status erg_sparse_format_csv(const erg_sparse *sp, char **out, size_t *len, erg_error *err)
{
    if (!sp || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_sparse_format_csv: NULL argument");
    *out = NULL;
    if (len)
        *len = 0;
    erg_profile *p = NULL;
    erg_status st = erg_sparse_predict(sp, &p, err);
    if (st)
        return st;
    erg__buf b = {0};
    st = erg__buf_printf(&b, "stage,instruction,frequency,time,energy,source\n");
    char t[40], e[40];
    for (int s = 0; s < sp->S && !st; s++)
        for (int x = 0; x < sp->n && !st; x++)
            for (int k = 0; k < 2 && !st; k++) {
                erg_profile_point pt;
                if (erg_profile_lookup(p, s, (erg_instr_kind)k, sp->freqs[x], &pt, NULL))
                    continue;
                st = erg__buf_printf(&b, "%d,%s,%d,%s,%s,%s\n", s,
                                     erg_instr_kind_name((erg_instr_kind)k), pt.freq_mhz,
                                     erg__fmt_double_py(pt.time_s, t, sizeof t),
                                     erg__fmt_double_py(pt.energy_j, e, sizeof e),
                                     sp->c[2 * s + k].meas[x] ? "measured" : "predicted");
            }
    erg_profile_free(p);
    if (st) {
        erg__buf_free(&b);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    if (len)
        *len = b.len;
    *out = b.data;
    return ERG_OK;
}

erg_status erg_sparse_write_csv(const erg_sparse *sp, const char *path, erg_error *err)
{
    char *text = NULL;
    size_t n = 0;
    erg_status st = erg_sparse_format_csv(sp, &text, &n, err);
    if (st)
        return st;
    st = erg__write_file(path, text, n, err);
    erg_free(text);
    return st;
}
