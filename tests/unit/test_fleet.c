/* test_fleet.c: the fleet's power-cap assignment (erg_fleet_assign) against brute force on
 * random fleets of up to 6 jobs, its bound and gap when the search is cut short, and its input
 * checks. */
#include "tap.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ergon/fleet.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) /* [0, 1), fixed sequence */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

#define MAXJ 6
#define MAXP 9
typedef struct fleet {
    int nj, np[MAXJ];
    double t[MAXJ][MAXP], p[MAXJ][MAXP], w[MAXJ];
    erg_fleet_job jobs[MAXJ];
} fleet;

/* A frontier-like job: slower points draw less power, with noise that leaves some points
 * dominated and the curve not convex; sometimes in random order, sometimes slowest first. */
static void random_fleet(fleet *f)
{
    f->nj = 1 + (int)(urand() * MAXJ);
    for (int j = 0; j < f->nj; j++) {
        int n = 1 + (int)(urand() * MAXP);
        double t0 = 0.5 + urand() * 3, p0 = 200 + urand() * 3000;
        for (int k = 0; k < n; k++) {
            double x = (double)k / MAXP;
            f->t[j][k] = t0 * (1 + 0.3 * x + 0.05 * urand());
            f->p[j][k] = p0 * (1 - 0.5 * x * x + 0.1 * urand());
        }
        if (urand() < 0.3) /* a duplicate point */
            f->t[j][n - 1] = f->t[j][0], f->p[j][n - 1] = f->p[j][0];
        for (int k = n - 1; k > 0 && urand() < 0.5; k--) { /* shuffle some */
            int r = (int)(urand() * (k + 1));
            double a = f->t[j][k], b = f->p[j][k];
            f->t[j][k] = f->t[j][r], f->p[j][k] = f->p[j][r];
            f->t[j][r] = a, f->p[j][r] = b;
        }
        f->np[j] = n;
        f->w[j] = urand() < 0.1 ? 0 : 0.2 + urand() * 3;
        f->jobs[j] = (erg_fleet_job){f->t[j], f->p[j], (size_t)n, f->w[j]};
    }
}

static double job_cost(const fleet *f, int j, int k)
{
    double tmin = INFINITY;
    for (int i = 0; i < f->np[j]; i++)
        tmin = fmin(tmin, f->t[j][i]);
    return f->w[j] * f->t[j][k] / tmin;
}

/* Every combination: the least cost under the cap (INFINITY: none fits). */
static double brute(const fleet *f, double cap)
{
    int k[MAXJ] = {0};
    double best = INFINITY;
    for (;;) {
        double p = 0, c = 0;
        for (int j = 0; j < f->nj; j++) {
            p += f->p[j][k[j]];
            c += job_cost(f, j, k[j]);
        }
        if (p <= cap && c < best)
            best = c;
        int j = 0;
        while (j < f->nj && ++k[j] == f->np[j])
            k[j++] = 0;
        if (j == f->nj)
            return best;
    }
}

TEST(assignment_equals_brute_force_on_random_fleets)
{
    int exact = 0, infeasible = 0;
    for (int trial = 0; trial < 2000; trial++) {
        fleet f;
        random_fleet(&f);
        double lo = 0, hi = 0;
        for (int j = 0; j < f.nj; j++) {
            double a = INFINITY, b = 0;
            for (int k = 0; k < f.np[j]; k++)
                a = fmin(a, f.p[j][k]), b = fmax(b, f.p[j][k]);
            lo += a, hi += b;
        }
        double cap = lo * 0.99 + (hi * 1.02 - lo * 0.99) * urand();
        size_t choice[MAXJ];
        erg_fleet_result r;
        erg_error err;
        ASSERT_OK(erg_fleet_assign(f.jobs, (size_t)f.nj, cap, NULL, choice, &r, &err));
        double want = brute(&f, cap);
        if (!isfinite(want)) {
            ASSERT_MSG(!r.feasible, "trial %d: nothing fits %g W but the result is feasible", trial,
                       cap);
            for (int j = 0; j < f.nj; j++) /* every job at its least power */
                for (int k = 0; k < f.np[j]; k++)
                    ASSERT(f.p[j][choice[j]] <= f.p[j][k]);
            infeasible++;
            continue;
        }
        ASSERT_MSG(r.feasible && r.exact, "trial %d: feasible %d exact %d", trial, r.feasible,
                   r.exact);
        double p = 0, c = 0;
        for (int j = 0; j < f.nj; j++) {
            ASSERT((int)choice[j] < f.np[j]);
            p += f.p[j][choice[j]];
            c += job_cost(&f, j, (int)choice[j]);
        }
        ASSERT_MSG(p <= cap, "trial %d: %g W over the cap %g W", trial, p, cap);
        ASSERT_NEAR(r.power_w, p, 1e-9 * cap);
        ASSERT_MSG(fabs(c - want) <= 1e-9 * (want + 1),
                   "trial %d (%d jobs, cap %g W): cost %.12g, brute force %.12g", trial, f.nj, cap,
                   c, want);
        ASSERT_NEAR(r.cost, c, 1e-9 * (c + 1));
        ASSERT(r.lower_bound <= want + 1e-9 * (want + 1));
        exact++;
    }
    printf("# 2000 random fleets: %d assignments equal brute force, %d with no assignment under "
           "the cap\n",
           exact, infeasible);
    ASSERT(exact > 1800 && infeasible > 0);
}

/* A search cut short still returns an assignment under the cap, with a gap that covers the
 * distance to the optimum. */
TEST(cut_search_states_its_gap)
{
    int cut = 0;
    for (int trial = 0; trial < 300; trial++) {
        fleet f;
        random_fleet(&f);
        double lo = 0, hi = 0;
        for (int j = 0; j < f.nj; j++) {
            double a = INFINITY, b = 0;
            for (int k = 0; k < f.np[j]; k++)
                a = fmin(a, f.p[j][k]), b = fmax(b, f.p[j][k]);
            lo += a, hi += b;
        }
        double cap = lo + (hi - lo) * (0.2 + 0.6 * urand());
        erg_fleet_opts o;
        erg_fleet_opts_init(&o);
        o.max_nodes = 1;
        size_t choice[MAXJ];
        erg_fleet_result r;
        erg_error err;
        ASSERT_OK(erg_fleet_assign(f.jobs, (size_t)f.nj, cap, &o, choice, &r, &err));
        double want = brute(&f, cap);
        ASSERT(r.feasible && r.power_w <= cap);
        ASSERT(r.cost >= want - 1e-9 * (want + 1));
        ASSERT(r.lower_bound <= want + 1e-9 * (want + 1));
        if (!r.exact) {
            ASSERT_NEAR(r.gap, r.cost - r.lower_bound, 1e-9 * (r.cost + 1));
            ASSERT(r.cost - want <= r.gap + 1e-9 * (want + 1));
            cut++;
        }
    }
    printf("# %d of 300 searches cut at one node\n", cut);
    ASSERT(cut > 0);
}

TEST(bad_input_is_named)
{
    double t[2] = {1, 2}, p[2] = {100, 50}, bad_t[2] = {1, 0};
    erg_fleet_job j[2] = {{t, p, 2, 1}, {bad_t, p, 2, 1}};
    size_t choice[2];
    erg_fleet_result r;
    erg_error err;
    ASSERT_EQ_INT(erg_fleet_assign(j, 2, 1000, NULL, choice, &r, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "job 1 point 1");
    j[1] = (erg_fleet_job){t, p, 0, 1};
    ASSERT_EQ_INT(erg_fleet_assign(j, 2, 1000, NULL, choice, &r, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "job 1 has no frontier points");
    j[1] = (erg_fleet_job){t, p, 2, -1};
    ASSERT_EQ_INT(erg_fleet_assign(j, 2, 1000, NULL, choice, &r, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "weight");
    j[1] = (erg_fleet_job){t, p, 2, 1};
    ASSERT_EQ_INT(erg_fleet_assign(j, 2, NAN, NULL, choice, &r, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "cap");
    /* 150 W fits one job fast and one slow: the heavier weight gets the fast point */
    j[0].weight = 3;
    ASSERT_OK(erg_fleet_assign(j, 2, 150, NULL, choice, &r, &err));
    ASSERT_EQ_INT(choice[0], 0);
    ASSERT_EQ_INT(choice[1], 1);
    ASSERT_NEAR(r.cost, 3 * 1 + 1 * 2, 1e-12);
    ASSERT(r.exact && r.feasible);
}

TAP_MAIN(TEST_ENTRY(assignment_equals_brute_force_on_random_fleets),
         TEST_ENTRY(cut_search_states_its_gap), TEST_ENTRY(bad_input_is_named))
