/* test_planner.c: the Perseus frontier planner against the reference data,
 * brute force on tiny pipelines, and its building blocks. */
#include "core/internal.h"
#include "ergon/emulate.h"
#include "ergon/gpu.h"
#include "ergon/planner.h"
#include "planner/maxflow.h"
#include "planner/perseus_internal.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DATA ERG_TEST_DATA_DIR "/published/perseus-sosp24"

static void need_data(void)
{
    tap_need_data(DATA);
}

static erg_profile *load(const char *name)
{
    char path[512];
    erg_error err;
    snprintf(path, sizeof path, "%s/stage_profile/%s", DATA, name);
    erg_profile *p;
    ASSERT_OK(erg_profile_read_csv(path, &p, &err));
    return p;
}

/* Rows of a reference frontier.csv. */
static size_t read_ref(const char *path, double **t, double **e)
{
    char *text;
    size_t len;
    erg_error err;
    ASSERT_OK(erg__read_file(path, 1 << 28, &text, &len, &err));
    erg__csv c;
    erg__csv_init(&c, text, len);
    size_t n = 0, cap = 1024;
    *t = malloc(cap * sizeof(double));
    *e = malloc(cap * sizeof(double));
    ASSERT(erg__csv_next(&c) == 1);
    while (erg__csv_next(&c) == 1) {
        if (n == cap) {
            cap *= 2;
            *t = realloc(*t, cap * sizeof(double));
            *e = realloc(*e, cap * sizeof(double));
        }
        ASSERT(erg__parse_double(c.fields[0], &(*t)[n]));
        ASSERT(erg__parse_double(c.fields[1], &(*e)[n]));
        n++;
    }
    erg__csv_free(&c);
    erg__free(text);
    return n;
}

/* Coefficients of one case of lowtime_fits.csv as a 6*S array. */
static double *read_fits(const char *case_name, int S)
{
    char *text;
    size_t len;
    erg_error err;
    ASSERT_OK(erg__read_file(DATA "/lowtime_fits.csv", 1 << 20, &text, &len, &err));
    erg__csv c;
    erg__csv_init(&c, text, len);
    double *v = calloc((size_t)S * 6, sizeof(double));
    int found = 0;
    ASSERT(erg__csv_next(&c) == 1);
    while (erg__csv_next(&c) == 1) {
        if (strcmp(c.fields[0], case_name))
            continue;
        int k = !strcmp(c.fields[1], "backward");
        long s;
        ASSERT(erg__parse_long(c.fields[2], &s));
        for (int j = 0; j < 3; j++)
            ASSERT(erg__parse_double(c.fields[9 + j], &v[(2 * s + k) * 3 + j]));
        found++;
    }
    ASSERT_EQ_INT(found, 2 * S);
    erg__csv_free(&c);
    erg__free(text);
    return v;
}

/* Compare a computed frontier with a reference file; returns max |dE|. */
static double compare(const erg_frontier *f, const char *ref, double unit_s, double tol_j,
                      double tol_rel)
{
    double *t, *e;
    size_t n = read_ref(ref, &t, &e);
    ASSERT_EQ_INT(erg_frontier_size(f), n);
    double maxd = 0, maxr = 0;
    erg_error err;
    for (size_t k = 0; k < n; k++) {
        erg_frontier_point p;
        ASSERT_OK(erg_frontier_get(f, k, &p, &err));
        /* identical time column: same quantised makespan, printed the same */
        char a[40], b[40];
        erg__fmt_double_py(p.time_s, a, sizeof a);
        erg__fmt_double_py(t[k], b, sizeof b);
        ASSERT_MSG(!strcmp(a, b), "%s row %zu: time %s != reference %s", ref, k + 2, a, b);
        double d = fabs(p.energy_j - e[k]);
        if (d > maxd)
            maxd = d;
        if (d / e[k] > maxr)
            maxr = d / e[k];
    }
    (void)unit_s;
    printf("#   %s: %zu rows, times identical, max |dE| = %.3g J (%.2g relative)\n", ref, n, maxd,
           maxr);
    ASSERT_MSG(maxd <= tol_j || maxr <= tol_rel, "%s: energy differs by %.3g J (%.3g relative)",
               ref, maxd, maxr);
    free(t);
    free(e);
    return maxd;
}

static void run_a100(bool own_fit)
{
    need_data();
    static const char *models[] = {"gpt3-175b", "bloom"};
    static const char *cases[] = {"gpt3_a100sxm_mb12_u1ms", "bloom_a100sxm_mb12_u1ms"};
    static const int mbs[] = {12, 24, 48, 96};
    erg_error err;
    for (int mi = 0; mi < 2; mi++) {
        char name[128];
        snprintf(name, sizeof name, "%s+a100_sxm_bf16.csv", models[mi]);
        erg_profile *p = load(name);
        double *fits = own_fit ? NULL : read_fits(cases[mi], 8);
        for (int k = 0; k < 4; k++) {
            erg_perseus_opts o;
            erg_perseus_opts_init(&o);
            o.blocking_power_w = 83.64;
            o.fits = fits;
            erg_frontier *f;
            ASSERT_OK(erg_plan_perseus(p, 8, mbs[k], &o, &f, &err));
            char ref[256];
            snprintf(ref, sizeof ref, "%s/frontier_a100_sxm/%s_bf16_mb%d.csv", DATA, models[mi],
                     mbs[k]);
            /* With the reference's fitted curves: 1e-5 J per row. With our own
             * fit the coefficients differ from the reference's by ~1e-8
             * relative (scipy itself differs that much between machines), so
             * the bound is relative: 1e-8. */
            compare(f, ref, 0.001, own_fit ? 0 : 1e-5, own_fit ? 1e-8 : 0);
            erg_frontier_free(f);
        }
        free(fits);
        erg_profile_free(p);
    }
}

TEST(a100_frontiers_exact_with_reference_fits)
{
    run_a100(false);
}

TEST(a100_frontiers_with_own_fit)
{
    run_a100(true);
}

TEST(fit_matches_reference_coefficients)
{
    need_data();
    static const struct {
        const char *case_name, *profile;
        double unit_s, power_w;
    } cases[] = {
        {"gpt3_a40_mb12_u01ms", "gpt3-175b+a40_bf16.csv", 0.0001, 70.38},
        {"gpt3_a40_mb12_u1ms", "gpt3-175b+a40_bf16.csv", 0.001, 70.38},
        {"bloom_a40_mb12_u01ms", "bloom+a40_bf16.csv", 0.0001, 70.38},
        {"gpt3_a100sxm_mb12_u1ms", "gpt3-175b+a100_sxm_bf16.csv", 0.001, 83.64},
        {"bloom_a100sxm_mb12_u1ms", "bloom+a100_sxm_bf16.csv", 0.001, 83.64},
    };
    char *text;
    size_t len;
    erg_error err;
    ASSERT_OK(erg__read_file(DATA "/lowtime_fits.csv", 1 << 20, &text, &len, &err));
    for (size_t ci = 0; ci < ERG__ARRAY_LEN(cases); ci++) {
        erg_profile *p = load(cases[ci].profile);
        erg__csv c;
        erg__csv_init(&c, text, len);
        erg__csv_next(&c);
        int rows = 0;
        double worst = 0;
        while (erg__csv_next(&c) == 1) {
            if (strcmp(c.fields[0], cases[ci].case_name))
                continue;
            int kind = !strcmp(c.fields[1], "backward");
            long s, ncand, minq, maxq, fslow, ffast;
            double ref[3];
            ASSERT(erg__parse_long(c.fields[2], &s) && erg__parse_long(c.fields[3], &ncand));
            ASSERT(erg__parse_long(c.fields[4], &minq) && erg__parse_long(c.fields[5], &maxq));
            ASSERT(erg__parse_long(c.fields[7], &fslow) && erg__parse_long(c.fields[8], &ffast));
            for (int j = 0; j < 3; j++)
                ASSERT(erg__parse_double(c.fields[9 + j], &ref[j]));
            int n = (int)erg_profile_num_points(p, (int)s, kind);
            erg__cand cand[128];
            int nc = erg__perseus_candidates(erg_profile_points(p, (int)s, kind), n,
                                             cases[ci].unit_s, 1.0, cand);
            ASSERT_EQ_INT(nc, ncand);
            ASSERT_EQ_INT(cand[nc - 1].q, minq);
            ASSERT_EQ_INT(cand[0].q, maxq);
            ASSERT_EQ_INT(cand[0].freq_mhz, fslow);
            ASSERT_EQ_INT(cand[nc - 1].freq_mhz, ffast);
            double x[128], y[128], abc[3];
            for (int i = 0; i < nc; i++) {
                x[i] = cand[i].q;
                y[i] = cand[i].energy_j - ((cases[ci].power_w * cand[i].q) * cases[ci].unit_s);
            }
            ASSERT_OK(erg__perseus_fit(x, y, nc, cases[ci].unit_s, abc, &err));
            /* Compare the curves where they are used: every duration. */
            double worst_here = 0;
            for (long d = minq; d <= maxq; d++) {
                double mine = abc[0] * exp(abc[1] * d) + abc[2];
                double theirs = ref[0] * exp(ref[1] * d) + ref[2];
                double rel = fabs(mine - theirs) / fabs(theirs);
                if (rel > worst_here)
                    worst_here = rel;
            }
            if (worst_here > 1e-7)
                printf("#   %s stage %ld %s: a=%.10g b=%.10g c=%.10g vs %.10g %.10g %.10g\n",
                       cases[ci].case_name, s, kind ? "backward" : "forward", abc[0], abc[1],
                       abc[2], ref[0], ref[1], ref[2]);
            if (worst_here > worst)
                worst = worst_here;
            rows++;
        }
        ASSERT_MSG(rows == 16, "%s: %d rows", cases[ci].case_name, rows);
        printf("#   %s: 16 fits, candidates identical, curve max relative diff %.2g\n",
               cases[ci].case_name, worst);
        /* Both are least-squares optima found by Levenberg-Marquardt from a
         * grid of starts; they agree to the optimiser's tolerance: ~1e-8
         * relative on well-conditioned fits, ~1e-5 where the curve is nearly
         * a straight line (bloom A40 forward at 0.1 ms: b ~ -2e-6, a and c
         * ~ +-25000), where the minimum is a long flat valley. */
        ASSERT_MSG(worst < 2e-5, "fit differs from the reference by %.3g relative", worst);
        erg__csv_free(&c);
        erg_profile_free(p);
    }
    erg__free(text);
}

TEST(candidate_example_from_spec)
{
    need_data();
    erg_profile *p = load("gpt3-175b+a40_bf16.csv");
    erg__cand c[128];
    int n = erg__perseus_candidates(erg_profile_points(p, 0, ERG_FORWARD), 60, 0.001, 1.0, c);
    ASSERT_EQ_INT(n, 20);
    ASSERT_EQ_INT(c[0].q, 139);
    ASSERT_EQ_INT(c[0].freq_mhz, 1050);
    ASSERT_EQ_INT(c[n - 1].q, 112);
    ASSERT_EQ_INT(c[n - 1].freq_mhz, 1740);
    erg_profile_free(p);
}

/* A40 at 0.1 ms: one plan per time unit between T_max and T_min, with the
 * published plan counts, and the spec's minimum-energy plan. */
TEST(a40_plan_counts_at_0_1ms)
{
    need_data();
    static const struct {
        const char *profile;
        int M;
        size_t plans;
    } cases[] = {
        {"gpt3-175b+a40_bf16.csv", 12, 11832},
        {"bloom+a40_bf16.csv", 12, 10517},
        {"gpt3-175b+a40_bf16.csv", 24, 19548},
        {"bloom+a40_bf16.csv", 24, 17249},
    };
    erg_error err;
    for (size_t i = 0; i < ERG__ARRAY_LEN(cases); i++) {
        erg_profile *p = load(cases[i].profile);
        erg_perseus_opts o;
        erg_perseus_opts_init(&o);
        o.blocking_power_w = 70.38;
        o.unit_s = 0.0001;
        erg_frontier *f;
        ASSERT_OK(erg_plan_perseus(p, 8, cases[i].M, &o, &f, &err));
        ASSERT_EQ_INT(erg_frontier_size(f), cases[i].plans);
        erg_frontier_point a, b;
        for (size_t k = 1; k < erg_frontier_size(f); k++) {
            ASSERT_OK(erg_frontier_get(f, k - 1, &a, &err));
            ASSERT_OK(erg_frontier_get(f, k, &b, &err));
            ASSERT_EQ_INT(a.quant_time - b.quant_time, 1);
        }
        if (cases[i].M == 12 && strstr(cases[i].profile, "gpt3")) {
            ASSERT_OK(erg_frontier_get(f, 0, &a, &err));
            ASSERT_EQ_INT(a.quant_time, 87269);
            size_t best = 0;
            ASSERT_OK(erg_frontier_choose_deadline(f, 1e9, &best, &err));
            ASSERT_OK(erg_frontier_get(f, best, &b, &err));
            printf("#   gpt3 A40 mb12: min energy at plan %zu (%.4f s, %.2f J)\n", best, b.time_s,
                   b.energy_j);
            ASSERT_EQ_INT(best, 4901);
            ASSERT_NEAR(b.time_s, 8.2368, 1e-9);
            ASSERT_NEAR(b.energy_j, 10137.60, 0.005);
        }
        erg_frontier_free(f);
        erg_profile_free(p);
    }
}

/* ---- brute force on tiny pipelines ---- */

/* A synthetic profile whose points lie exactly on the planner's model:
 * times are exact multiples of the unit (0.25 s) and consecutive, effective
 * energies on a*exp(b*q)+c, so a plan's annotation must equal its
 * profile evaluation. */
static erg_profile *tiny_profile2(int S, int nclk_f, int nclk_b, double p_w, unsigned seed)
{
    erg_profile *p;
    erg_error err;
    ASSERT_OK(erg_profile_new(&p, &err));
    srand(seed);
    for (int s = 0; s < S; s++)
        for (int k = 0; k < 2; k++) {
            int qmin = 4 + rand() % 3 + k * 2 + (s == S - 1);
            double a = 2000 + rand() % 4000, b = -0.35 - (rand() % 30) / 100.0, c = 5 + rand() % 10;
            int nclk = k ? nclk_b : nclk_f;
            for (int i = 0; i < nclk; i++) {
                int q = qmin + i;
                double eff = a * exp(b * q) + c;
                erg_profile_point pt = {1500 - 100 * i, q * 0.25, eff + ((p_w * q) * 0.25)};
                ASSERT_OK(erg_profile_add(p, s, (erg_instr_kind)k, &pt, &err));
            }
        }
    return p;
}

static erg_profile *tiny_profile(int S, int nclk, double p_w, unsigned seed)
{
    return tiny_profile2(S, nclk, nclk, p_w, seed);
}

typedef struct bf_point {
    double t, e;
} bf_point;

static int cmp_bf(const void *a, const void *b)
{
    const bf_point *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t ? 1 : (x->e < y->e ? -1 : x->e > y->e);
}

static void brute_force_case(int S, int M, int nclk_f, int nclk_b, unsigned seed)
{
    erg_error err;
    double p_w = 5;
    erg_profile *prof = tiny_profile2(S, nclk_f, nclk_b, p_w, seed);
    erg_schedule sched = {.kind = ERG_SCHED_1F1B};
    erg_dag *dag;
    ASSERT_OK(erg_dag_new(&sched, S, M, &dag, &err));
    erg_plan *plan;
    ASSERT_OK(erg_plan_new(&sched, S, M, &plan, &err));
    int n = 2 * S * M;
    long total = 1;
    int *nclk = calloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        erg_instr in = erg_dag_instr(dag, i, NULL);
        nclk[i] = in.kind == ERG_FORWARD ? nclk_f : nclk_b;
        total *= nclk[i];
    }
    bf_point *all = malloc(sizeof(bf_point) * (size_t)total);
    int *digit = calloc((size_t)n, sizeof(int));
    for (long idx = 0; idx < total; idx++) {
        for (int s = 0; s < S; s++) {
            int *fq = erg_plan_stage_freqs(plan, s);
            for (int j = 0; j < 2 * M; j++)
                fq[j] = 1500 - 100 * digit[s * 2 * M + j];
        }
        erg_emulation em;
        ASSERT_OK(erg_emulate(prof, dag, plan, p_w, &em, NULL, NULL, &err));
        all[idx].t = em.time_s;
        all[idx].e = em.energy_j;
        for (int i = 0; i < n; i++) {
            if (++digit[i] < nclk[i])
                break;
            digit[i] = 0;
        }
    }
    qsort(all, (size_t)total, sizeof(bf_point), cmp_bf);
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    o.unit_s = 0.25;
    o.blocking_power_w = p_w;
    erg_frontier *f;
    ASSERT_OK(erg_plan_perseus(prof, S, M, &o, &f, &err));
    ASSERT(erg_frontier_size(f) > 0);
    double worst_gap = 0, sum_gap = 0;
    for (size_t k = 0; k < erg_frontier_size(f); k++) {
        erg_frontier_point pt;
        ASSERT_OK(erg_frontier_get(f, k, &pt, &err));
        erg_plan *pk;
        ASSERT_OK(erg_frontier_plan(f, k, &pk, &err));
        erg_emulation em;
        ASSERT_OK(erg_emulate(prof, dag, pk, p_w, &em, NULL, NULL, &err));
        /* achievable: the annotation is what the plan really does */
        ASSERT_NEAR(em.time_s, pt.time_s, 1e-9);
        ASSERT_NEAR(em.energy_j, pt.energy_j, 1e-6 * pt.energy_j);
        /* exact frontier: least energy of any assignment finishing by T */
        double best = INFINITY;
        for (long i = 0; i < total && all[i].t <= pt.time_s + 1e-9; i++)
            if (all[i].e < best)
                best = all[i].e;
        double gap = (pt.energy_j - best) / best;
        ASSERT_MSG(gap > -1e-9, "plan %zu below the exact frontier: %.17g < %.17g", k, pt.energy_j,
                   best);
        ASSERT_MSG(gap < 0.01, "plan %zu is %.2f%% above the exact frontier", k, 100 * gap);
        if (gap > worst_gap)
            worst_gap = gap;
        sum_gap += gap;
        erg_plan_free(pk);
    }
    printf("#   S=%d M=%d, %d/%d clocks (seed %u): %zu plans vs %ld assignments; gap to the "
           "exact Pareto frontier: max %.3f%%, mean %.3f%%\n",
           S, M, nclk_f, nclk_b, seed, erg_frontier_size(f), total, 100 * worst_gap,
           100 * sum_gap / (double)erg_frontier_size(f));
    free(all);
    free(digit);
    free(nclk);
    erg_frontier_free(f);
    erg_plan_free(plan);
    erg_dag_free(dag);
    erg_profile_free(prof);
}

TEST(brute_force_tiny_pipelines)
{
    /* Fewer than 4 Pareto clocks cannot be fitted (as in the reference), so
     * a spec has 4 or 5 clocks, or 1 (fixed) to keep the enumeration small. */
    brute_force_case(1, 2, 5, 5, 1);
    brute_force_case(2, 2, 4, 4, 2);
    brute_force_case(1, 4, 4, 4, 3);
    brute_force_case(3, 1, 4, 4, 4);
    brute_force_case(2, 3, 1, 4, 5);
    brute_force_case(3, 2, 1, 4, 6);
    brute_force_case(2, 4, 1, 4, 7);
    brute_force_case(3, 2, 4, 1, 8);
}

/* ---- brute force on the multi-chunk and zero-bubble schedules ---- */

/* Forward: 4 clocks with the same time and energy (so which one runs does
 * not matter); backward (and with iw, backward_input and backward_weight
 * rows): 4 clocks on the model's curve whose quantised times are qstep
 * apart, so that every instruction class of the schedule (a chunk's 1/V
 * share, I = W = B/2 from --backward-split 0.5, the two parts of an
 * OVERLAP_F_B) has consecutive whole unit times: then a plan's annotation
 * must equal its evaluation. (4 clocks, not 3: like the reference, the
 * planner fits its 3-parameter curve only to 4 or more Pareto-optimal
 * clocks.) */
#define NCLK 4
static void add_curve(erg_profile *p, int s, erg_instr_kind k, int qstep, double p_w)
{
    erg_error err;
    int qmin = 2 + rand() % 2;
    double a = 2000 + rand() % 4000, b = -0.35 - (rand() % 30) / 100.0, c = 5 + rand() % 10;
    for (int i = 0; i < NCLK; i++) {
        int q = qstep * (qmin + i);
        double eff = a * exp(b * (qmin + i)) + c;
        erg_profile_point pt = {1500 - 100 * i, q * 0.25, eff + ((p_w * q) * 0.25)};
        ASSERT_OK(erg_profile_add(p, s, k, &pt, &err));
    }
}

static erg_profile *tiny_profile_split(int S, double p_w, unsigned seed, int qstep, int iw)
{
    erg_profile *p;
    erg_error err;
    ASSERT_OK(erg_profile_new(&p, &err));
    srand(seed);
    for (int s = 0; s < S; s++) {
        int qf = 2 * (2 + rand() % 2);
        double ef = 30 + rand() % 20;
        for (int i = 0; i < NCLK; i++) {
            erg_profile_point pt = {1500 - 100 * i, qf * 0.25, ef + p_w * qf * 0.25};
            ASSERT_OK(erg_profile_add(p, s, ERG_FORWARD, &pt, &err));
        }
        add_curve(p, s, ERG_BACKWARD, qstep, p_w);
        if (iw) {
            add_curve(p, s, ERG_BACKWARD_INPUT, qstep, p_w);
            add_curve(p, s, ERG_BACKWARD_WEIGHT, qstep, p_w);
        }
    }
    ASSERT_OK(erg_profile_validate(p, &err));
    return p;
}

static void brute_force_schedule(erg_schedule_kind kind, int P, int V, int M, unsigned seed,
                                 int qstep, int iw)
{
    erg_error err;
    double p_w = 5;
    erg_profile *prof = tiny_profile_split(P, p_w, seed, qstep, iw);
    erg_schedule sched = {.kind = kind, .chunks = V};
    erg_dag *dag;
    ASSERT_OK(erg_dag_new(&sched, P, M, &dag, &err));
    erg_plan *plan;
    ASSERT_OK(erg_plan_new(&sched, P, M, &plan, &err));
    int n = erg_dag_num_instrs(dag), nvar = 0;
    int *var = calloc((size_t)n, sizeof(int));
    int *fq = calloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        fq[i] = 1500;
        if (erg_dag_instr(dag, i, NULL).kind != ERG_FORWARD)
            var[nvar++] = i; /* forwards cost the same at every clock */
    }
    long total = 1;
    for (int i = 0; i < nvar; i++)
        total *= NCLK;
    ASSERT(total <= 200000);
    bf_point *all = malloc(sizeof(bf_point) * (size_t)total);
    int *digit = calloc((size_t)nvar + 1, sizeof(int));
    for (long idx = 0; idx < total; idx++) {
        for (int i = 0; i < nvar; i++)
            fq[var[i]] = 1500 - 100 * digit[i];
        for (int r = 0; r < P; r++)
            memcpy(erg_plan_stage_freqs(plan, r), fq + erg_dag_rank_offset(dag, r),
                   sizeof(int) * (size_t)erg_dag_rank_len(dag, r));
        erg_emulation em;
        ASSERT_OK(erg_emulate(prof, dag, plan, p_w, &em, NULL, NULL, &err));
        all[idx].t = em.time_s;
        all[idx].e = em.energy_j;
        for (int i = 0; i < nvar; i++) {
            if (++digit[i] < NCLK)
                break;
            digit[i] = 0;
        }
    }
    qsort(all, (size_t)total, sizeof(bf_point), cmp_bf);
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    o.unit_s = 0.25;
    o.blocking_power_w = p_w;
    o.schedule = sched;
    erg_frontier *f;
    ASSERT_OK(erg_plan_perseus(prof, P, M, &o, &f, &err));
    ASSERT(erg_frontier_size(f) > 1);
    double worst_gap = 0;
    for (size_t k = 0; k < erg_frontier_size(f); k++) {
        erg_frontier_point pt;
        ASSERT_OK(erg_frontier_get(f, k, &pt, &err));
        erg_plan *pk;
        ASSERT_OK(erg_frontier_plan(f, k, &pk, &err));
        erg_emulation em;
        ASSERT_OK(erg_emulate(prof, dag, pk, p_w, &em, NULL, NULL, &err));
        /* achievable: the annotation is what the plan really does */
        ASSERT_NEAR(em.time_s, pt.time_s, 1e-9);
        ASSERT_NEAR(em.energy_j, pt.energy_j, 1e-6 * pt.energy_j);
        double best = INFINITY;
        for (long i = 0; i < total && all[i].t <= pt.time_s + 1e-9; i++)
            if (all[i].e < best)
                best = all[i].e;
        double gap = (pt.energy_j - best) / best;
        ASSERT_MSG(gap > -1e-9, "%s plan %zu below the exact frontier: %.17g < %.17g",
                   erg_schedule_name(kind), k, pt.energy_j, best);
        ASSERT_MSG(gap < 0.01, "%s plan %zu is %.2f%% above the exact frontier",
                   erg_schedule_name(kind), k, 100 * gap);
        if (gap > worst_gap)
            worst_gap = gap;
        erg_plan_free(pk);
    }
    /* the fastest plan reaches the fastest assignment's time */
    erg_frontier_point last;
    ASSERT_OK(erg_frontier_get(f, erg_frontier_size(f) - 1, &last, &err));
    ASSERT_NEAR(last.time_s, all[0].t, 1e-9);
    printf("#   %s P=%d V=%d M=%d, %d clocks, %s (seed %u): %zu plans vs %ld assignments; max "
           "gap to the exact Pareto frontier %.3f%%\n",
           erg_schedule_name(kind), P, V, M, NCLK,
           iw ? "I/W rows in the profile" : "I/W from --backward-split 0.5", seed,
           erg_frontier_size(f), total, 100 * worst_gap);
    free(all);
    free(digit);
    free(var);
    free(fq);
    erg_frontier_free(f);
    erg_plan_free(plan);
    erg_dag_free(dag);
    erg_profile_free(prof);
}

TEST(brute_force_interleaved_1f1b)
{
    brute_force_schedule(ERG_SCHED_INTERLEAVED_1F1B, 2, 2, 2, 11, 2, 0);
    brute_force_schedule(ERG_SCHED_INTERLEAVED_1F1B, 1, 2, 4, 12, 2, 0);
}

TEST(brute_force_looped_bfs)
{
    brute_force_schedule(ERG_SCHED_LOOPED_BFS, 2, 2, 2, 13, 2, 0);
}

TEST(brute_force_interleaved_zb)
{
    brute_force_schedule(ERG_SCHED_INTERLEAVED_ZB, 2, 1, 2, 14, 2, 0);
    brute_force_schedule(ERG_SCHED_INTERLEAVED_ZB, 1, 2, 2, 15, 2, 1);
}

TEST(brute_force_zbv)
{
    brute_force_schedule(ERG_SCHED_ZBV, 1, 2, 2, 16, 4, 0);
    brute_force_schedule(ERG_SCHED_ZBV, 1, 2, 2, 19, 2, 1);
}

TEST(brute_force_dualpipev)
{
    brute_force_schedule(ERG_SCHED_DUALPIPEV, 1, 2, 2, 17, 2, 1);
    brute_force_schedule(ERG_SCHED_DUALPIPEV, 1, 2, 3, 18, 2, 1);
}

TEST(frontier_plans_roundtrip_through_directory)
{
    erg_error err;
    erg_profile *prof = tiny_profile(3, 4, 5, 9);
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    o.unit_s = 0.25;
    o.blocking_power_w = 5;
    erg_frontier *f, *g;
    ASSERT_OK(erg_plan_perseus(prof, 3, 4, &o, &f, &err));
    char dir[] = "/tmp/ergon_frontier_XXXXXX";
    ASSERT(mkdtemp(dir));
    ASSERT_OK(erg_frontier_write_dir(f, dir, ERG_FRONTIER_ALL, NULL, NULL, &err));
    ASSERT_OK(erg_frontier_read_dir(dir, NULL, &g, &err));
    ASSERT_EQ_INT(erg_frontier_size(g), erg_frontier_size(f));
    for (size_t k = 0; k < erg_frontier_size(f); k++) {
        erg_plan *a, *b;
        ASSERT_OK(erg_frontier_plan(f, k, &a, &err));
        ASSERT_OK(erg_frontier_plan(g, k, &b, &err));
        for (int s = 0; s < 3; s++)
            ASSERT(
                !memcmp(erg_plan_stage_freqs(a, s), erg_plan_stage_freqs(b, s), sizeof(int) * 8));
        char path[300];
        snprintf(path, sizeof path, "%s/plan_%05zu.json", dir, k);
        erg_plan *c;
        ASSERT_OK(erg_plan_read(path, NULL, &c, &err));
        ASSERT(!memcmp(erg_plan_stage_freqs(a, 2), erg_plan_stage_freqs(c, 2), sizeof(int) * 8));
        erg_frontier_point pa, pb;
        ASSERT_OK(erg_frontier_get(f, k, &pa, &err));
        ASSERT_OK(erg_frontier_get(g, k, &pb, &err));
        ASSERT(pa.time_s == pb.time_s && pa.energy_j == pb.energy_j);
        erg_plan_free(a);
        erg_plan_free(b);
        erg_plan_free(c);
    }
    /* choice: deadline below the fastest plan is an error naming it */
    size_t idx;
    ASSERT_EQ_INT(erg_frontier_choose_deadline(g, 0.1, &idx, &err), ERG_ENOTFOUND);
    ASSERT_CONTAINS(err.msg, "fastest plan takes");
    ASSERT_OK(erg_frontier_choose_slowdown(g, 1.0, &idx, &err));
    ASSERT_EQ_INT(idx, erg_frontier_size(g) - 1);
    ASSERT_EQ_INT(erg_frontier_choose_slowdown(g, 0.5, &idx, &err), ERG_EINVAL);
    erg_frontier_free(f);
    erg_frontier_free(g);
    erg_profile_free(prof);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ASSERT(system(cmd) == 0);
}

/* plans.ergon carries every schedule as the JSON plans do (merge of the
 * instruction model into the packed format): for 1F1B, zbv, interleaved-1f1b,
 * DualPipeV and a schedule file, every plan read back through
 * erg_frontier_read_dir (which prefers plans.ergon, as choose, sample, show
 * and serve's Frontier scheduler do) formats to the same JSON as the
 * plan_%05d.json file of the same index. Before: plans were sized 2*S*M
 * clocks, whatever the schedule. */
/* seed odd: the profile has I/W rows, even: I/W from the backward split */
static void packed_equals_json(const erg_schedule *sched, int P, int M, unsigned seed)
{
    erg_error err;
    erg_profile *prof;
    ASSERT_OK(erg_sim_profile_kinds("a100", "gpt3-xl", P, 0, 0, (int)(seed & 1), &prof, &err));
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    o.unit_s = 0.005;
    o.blocking_power_w = 83.64;
    o.schedule = *sched;
    erg_frontier *f, *g;
    ASSERT_OK(erg_plan_perseus(prof, P, M, &o, &f, &err));
    char dir[] = "/tmp/ergon_packed_XXXXXX";
    ASSERT(mkdtemp(dir));
    ASSERT_OK(erg_frontier_write_dir(
        f, dir, ERG_FRONTIER_CSV | ERG_FRONTIER_JSON | ERG_FRONTIER_PACKED, NULL, NULL, &err));
    ASSERT_OK(erg_frontier_read_dir(dir, NULL, &g, &err));
    ASSERT_MSG(erg_frontier_plan_path(g, 0) == NULL, "%s: plans.ergon not read",
               erg_schedule_name(sched->kind));
    ASSERT_EQ_INT(erg_frontier_size(g), erg_frontier_size(f));
    /* plans.ergon carries the computed frontier's fingerprint (issue 38 item 8) */
    char fpf[ERG_FRONTIER_FINGERPRINT_LEN], fpg[ERG_FRONTIER_FINGERPRINT_LEN];
    ASSERT(erg_frontier_fingerprint(f, fpf) && erg_frontier_fingerprint(g, fpg));
    ASSERT_MSG(!strncmp(fpf, "fnv1a64:", 8) && !strcmp(fpf, fpg), "%s: fingerprint %s read as %s",
               erg_schedule_name(sched->kind), fpf, fpg);
    for (size_t k = 0; k < erg_frontier_size(f); k++) {
        char path[300];
        snprintf(path, sizeof path, "%s/plan_%05zu.json", dir, k);
        erg_plan *a, *b;
        ASSERT_OK(erg_frontier_plan(g, k, &a, &err));
        ASSERT_OK(erg_plan_read(path, NULL, &b, &err));
        char *ja, *jb;
        ASSERT_OK(erg_plan_format_json(a, &ja, &err));
        ASSERT_OK(erg_plan_format_json(b, &jb, &err));
        ASSERT_MSG(!strcmp(ja, jb), "%s plan %zu: plans.ergon gives\n%s\nthe JSON file\n%s",
                   erg_schedule_name(sched->kind), k, ja, jb);
        erg_free(ja);
        erg_free(jb);
        erg_plan_free(a);
        erg_plan_free(b);
    }
    printf("#   %s P=%d M=%d: %zu plans equal\n", erg_schedule_name(sched->kind), P, M,
           erg_frontier_size(f));
    erg_frontier_free(f);
    erg_frontier_free(g);
    erg_profile_free(prof);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ASSERT(system(cmd) == 0);
}

TEST(packed_frontier_equals_json_plans_for_every_schedule)
{
    erg_schedule s1 = {.kind = ERG_SCHED_1F1B};
    packed_equals_json(&s1, 3, 4, 21);
    erg_schedule zbv = {.kind = ERG_SCHED_ZBV, .backward_split = 0.3};
    packed_equals_json(&zbv, 2, 4, 22);
    erg_schedule il = {.kind = ERG_SCHED_INTERLEAVED_1F1B, .chunks = 2};
    packed_equals_json(&il, 2, 4, 23);
    erg_schedule dpv = {.kind = ERG_SCHED_DUALPIPEV};
    packed_equals_json(&dpv, 2, 4, 24);
    /* a schedule file: DualPipeV's order as PyTorch's compute_only CSV */
    erg_error err;
    erg_order *gen, *file;
    char *csv;
    ASSERT_OK(erg_order_new(&dpv, 2, 4, &gen, &err));
    ASSERT_OK(erg_order_format(gen, 1, &csv, &err));
    ASSERT_OK(erg_order_parse_csv(csv, strlen(csv), "dpv.csv", &file, &err));
    erg_schedule fs = {.kind = ERG_SCHED_FILE, .order = file};
    packed_equals_json(&fs, 2, 4, 25);
    erg_free(csv);
    erg_order_free(gen);
    erg_order_free(file);
}

TEST(planner_rejects_bad_options)
{
    erg_error err;
    erg_profile *prof = tiny_profile(2, 3, 20, 1);
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    erg_frontier *f;
    o.blocking_power_w = -1;
    ASSERT_EQ_INT(erg_plan_perseus(prof, 2, 2, &o, &f, &err), ERG_EINVAL);
    o.blocking_power_w = 10;
    ASSERT_EQ_INT(erg_plan_perseus(prof, 3, 2, &o, &f, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "profile has 2 stages");
    o.unit_s = 0;
    ASSERT_EQ_INT(erg_plan_perseus(prof, 2, 2, &o, &f, &err), ERG_EINVAL);
    erg_profile_free(prof);
}

/* Issue 15 items 7/14: a unit so small that a quantised time passes 1e9 units
 * overflowed an int conversion; now an error naming the point and the fix. */
TEST(planner_refuses_times_past_the_unit_count)
{
    erg_error err;
    erg_profile *prof = tiny_profile(2, 3, 20, 1);
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    o.blocking_power_w = 10;
    o.unit_s = 1e-15;
    erg_frontier *f = NULL;
    ASSERT_EQ_INT(erg_plan_perseus(prof, 2, 2, &o, &f, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "units of 1e-15 s (more than 1e9); use a larger --unit-time");
    ASSERT(f == NULL);
    erg_profile_free(prof);
}

/* Issue 15 item 13: a flat profile (no clock is faster) gave an empty frontier;
 * the slowest, least-energy state is plan 0. A unit longer than every
 * instruction is an error naming it. */
TEST(flat_profile_frontier_holds_the_slowest_plan)
{
    erg_error err;
    erg_profile *prof;
    ASSERT_OK(erg_profile_new(&prof, &err));
    for (int s = 0; s < 2; s++)
        for (int f = 1410; f >= 1380; f -= 15) {
            erg_profile_point a = {f, 0.1, 30}, b = {f, 0.2, 60};
            ASSERT_OK(erg_profile_add(prof, s, ERG_FORWARD, &a, &err));
            ASSERT_OK(erg_profile_add(prof, s, ERG_BACKWARD, &b, &err));
        }
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    o.blocking_power_w = 10;
    erg_frontier *f = NULL;
    ASSERT_OK(erg_plan_perseus(prof, 2, 3, &o, &f, &err));
    ASSERT_EQ_INT(erg_frontier_size(f), 1);
    erg_frontier_point pt;
    ASSERT_OK(erg_frontier_get(f, 0, &pt, &err));
    ASSERT_NEAR(pt.time_s, 1.2, 1e-9); /* 1F1B, S=2, M=3: 0.1 + 3 x 0.3 + 0.2 */
    erg_plan *plan;
    ASSERT_OK(erg_frontier_plan(f, 0, &plan, &err));
    ASSERT(erg_plan_stage_freqs(plan, 0)[0] > 0);
    erg_plan_free(plan);
    erg_frontier_free(f);
    o.unit_s = 1;
    f = NULL;
    ASSERT_EQ_INT(erg_plan_perseus(prof, 2, 3, &o, &f, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "the time unit of 1 s is longer than every instruction");
    ASSERT(f == NULL);
    erg_profile_free(prof);
}

/* Issue 15 item 7: max_plans refuses before planning, with the estimate. */
TEST(planner_refuses_more_plans_than_max_plans)
{
    erg_error err;
    erg_profile *prof = tiny_profile(2, 4, 5, 9);
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    o.unit_s = 0.25;
    o.blocking_power_w = 5;
    erg_frontier *f = NULL;
    ASSERT_OK(erg_plan_perseus(prof, 2, 2, &o, &f, &err));
    size_t n = erg_frontier_size(f);
    erg_frontier_free(f);
    ASSERT(n >= 2);
    o.max_plans = 1;
    f = NULL;
    ASSERT_EQ_INT(erg_plan_perseus(prof, 2, 2, &o, &f, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "more than the limit of 1 plans");
    ASSERT_CONTAINS(err.msg, "plans at a time unit of 0.25 s");
    ASSERT(f == NULL);
    o.max_plans = n; /* the estimate is an upper bound of the real count */
    ASSERT_OK(erg_plan_perseus(prof, 2, 2, &o, &f, &err));
    erg_frontier_free(f);
    erg_profile_free(prof);
}

/* The planner reads the cut's source side off the max flow's last search
 * (erg__flow_source_side) instead of a second search: on random networks,
 * with flow already on the arcs as in the warm start, it must be the set
 * erg__flow_reachable finds with residuals >= 1. */
TEST(flow_source_side_equals_residual_reachable_set)
{
    enum { NODES = 12, ARCS = 40 };
    erg__flow f;
    ASSERT_EQ_INT(erg__flow_init(&f, NODES, 2 * (ARCS + 2)), 0);
    unsigned char a[NODES], b[NODES];
    unsigned seed = 12345;
    int nontrivial = 0;
    for (int trial = 0; trial < 2000; trial++) {
        erg__flow_reset(&f, NODES);
        for (int k = 0; k < ARCS; k++) {
            seed = seed * 1103515245u + 12345u;
            int u = (int)((seed >> 8) % NODES), v = (int)((seed >> 16) % NODES);
            if (u == v)
                v = (v + 1) % NODES;
            seed = seed * 1103515245u + 12345u;
            int64_t cap = (int64_t)((seed >> 10) % 7);
            int arc = erg__flow_add(&f, u, v, cap);
            /* some flow already there (reverse residual), as after a warm start */
            int64_t pre = cap ? (int64_t)((seed >> 20) % (unsigned)(cap + 1)) : 0;
            f.res[arc] -= pre;
            f.res[arc + 1] += pre;
        }
        int s = trial % NODES, t = (trial * 7 + 3) % NODES;
        if (s == t)
            t = (t + 1) % NODES;
        erg__flow_max(&f, s, t);
        erg__flow_source_side(&f, a);
        erg__flow_reachable(&f, s, 1, b);
        ASSERT_MSG(!memcmp(a, b, NODES), "trial %d: source side differs from the reachable set",
                   trial);
        ASSERT(a[s] && !a[t]);
        int reached = 0;
        for (int v = 0; v < NODES; v++)
            reached += a[v];
        nontrivial += reached > 1 && reached < NODES - 1;
    }
    ASSERT_MSG(nontrivial > 100, "only %d trials had a non-trivial cut", nontrivial);
    erg__flow_free(&f);
}

/* The public frontier builder (erg_frontier_new/_push/_plan_clocks) that modules above the
 * planner use (the switch-aware frontier): plans pushed come back, by index, sequentially,
 * as erg_plan, after a checkpoint boundary, and after a directory round trip. */
TEST(frontier_built_by_push_reads_back)
{
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_frontier *f;
    erg_error err;
    ASSERT_EQ_INT(erg_frontier_new(0, 2, &sc, 0.001, 80, &f, &err), ERG_EINVAL);
    ASSERT_OK(erg_frontier_new(2, 2, &sc, 0.001, 80, &f, &err));
    enum { N = 8, P = 600 }; /* 2 ranks x 2M instructions; past one checkpoint (512) */
    static int want[P][N];
    for (int k = 0; k < P; k++) {
        for (int i = 0; i < N; i++)
            want[k][i] = 1410 - 15 * ((k * (i + 1)) % 7);
        erg_frontier_point pt = {
            .time_s = 2.0 - k * 1e-3, .energy_j = 100 + k, .quant_time = 2000 - k};
        ASSERT_OK(erg_frontier_push(f, &pt, want[k], &err));
    }
    ASSERT_EQ_INT((int)erg_frontier_size(f), P);
    int got[N];
    for (int k = 0; k < P; k++) {
        ASSERT_OK(erg_frontier_plan_clocks(f, (size_t)k, k > 0, got, &err));
        ASSERT(!memcmp(got, want[k], sizeof got));
    }
    for (int k = P - 1; k >= 0; k -= 97) {
        memset(got, 0, sizeof got);
        ASSERT_OK(erg_frontier_plan_clocks(f, (size_t)k, false, got, &err));
        ASSERT(!memcmp(got, want[k], sizeof got));
        erg_plan *p;
        ASSERT_OK(erg_frontier_plan(f, (size_t)k, &p, &err));
        ASSERT(!memcmp(erg_plan_stage_freqs_const(p, 0), want[k], 4 * sizeof(int)));
        ASSERT(!memcmp(erg_plan_stage_freqs_const(p, 1), want[k] + 4, 4 * sizeof(int)));
        erg_plan_free(p);
    }
    ASSERT_EQ_INT(erg_frontier_plan_clocks(f, P, false, got, &err), ERG_EINVAL);
    char dir[] = "/tmp/erg_push_XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    ASSERT_OK(
        erg_frontier_write_dir(f, dir, ERG_FRONTIER_CSV | ERG_FRONTIER_JSON, NULL, NULL, &err));
    erg_frontier *r;
    ASSERT_OK(erg_frontier_read_dir(dir, &sc, &r, &err));
    ASSERT_EQ_INT((int)erg_frontier_size(r), P);
    ASSERT_OK(erg_frontier_plan_clocks(r, 123, false, got, &err));
    ASSERT(!memcmp(got, want[123], sizeof got));
    ASSERT_EQ_INT(erg_frontier_push(r, NULL, want[0], &err), ERG_EINVAL); /* read, not built */
    erg_frontier_free(r);
    erg_frontier_free(f);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ASSERT_EQ_INT(system(cmd), 0);
}

/* --formats names: any case, the py alias, empty entries skipped; an unknown name and the
 * perseus-py/zeus-py clash are refused with the name in the message, *what untouched. */
TEST(frontier_formats_parse_names)
{
    erg_error err = {0};
    int what = -1;
    ASSERT_EQ_INT(erg_frontier_formats_parse("CSV,,Packed,", &what, &err), ERG_OK);
    ASSERT_EQ_INT(what, ERG_FRONTIER_CSV | ERG_FRONTIER_PACKED);
    ASSERT_EQ_INT(erg_frontier_formats_parse("py,json", &what, &err), ERG_OK);
    ASSERT_EQ_INT(what, ERG_FRONTIER_PY | ERG_FRONTIER_JSON);
    ASSERT_EQ_INT(erg_frontier_formats_parse("perseus-py,zeus-py", &what, &err), ERG_EINVAL);
    ASSERT(strstr(err.msg, "pick one per directory"));
    ASSERT_EQ_INT(what, ERG_FRONTIER_PY | ERG_FRONTIER_JSON);
    ASSERT_EQ_INT(erg_frontier_formats_parse("csv,jsonx", &what, &err), ERG_EINVAL);
    ASSERT(strstr(err.msg, "unknown format 'jsonx'"));
    ASSERT_EQ_INT(
        erg_frontier_formats_parse("zeus-py,a-name-longer-than-thirty-two-bytes", &what, &err),
        ERG_EINVAL);
    ASSERT(strstr(err.msg, "'a-name-longer-than-thirty-two-bytes'"));
    ASSERT_EQ_INT(erg_frontier_formats_parse("", &what, &err), ERG_OK);
    ASSERT_EQ_INT(what, 0);
    ASSERT_EQ_INT(erg_frontier_formats_parse(NULL, &what, &err), ERG_EINVAL);
}

TAP_MAIN(TEST_ENTRY(frontier_built_by_push_reads_back), TEST_ENTRY(frontier_formats_parse_names),
         TEST_ENTRY(a100_frontiers_exact_with_reference_fits),
         TEST_ENTRY(a100_frontiers_with_own_fit), TEST_ENTRY(fit_matches_reference_coefficients),
         TEST_ENTRY(candidate_example_from_spec), TEST_ENTRY(a40_plan_counts_at_0_1ms),
         TEST_ENTRY(brute_force_tiny_pipelines), TEST_ENTRY(brute_force_interleaved_1f1b),
         TEST_ENTRY(brute_force_looped_bfs), TEST_ENTRY(brute_force_interleaved_zb),
         TEST_ENTRY(brute_force_zbv), TEST_ENTRY(brute_force_dualpipev),
         TEST_ENTRY(frontier_plans_roundtrip_through_directory),
         TEST_ENTRY(packed_frontier_equals_json_plans_for_every_schedule),
         TEST_ENTRY(planner_rejects_bad_options),
         TEST_ENTRY(planner_refuses_times_past_the_unit_count),
         TEST_ENTRY(flat_profile_frontier_holds_the_slowest_plan),
         TEST_ENTRY(planner_refuses_more_plans_than_max_plans),
         TEST_ENTRY(flow_source_side_equals_residual_reachable_set))
