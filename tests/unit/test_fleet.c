/* test_fleet.c: the fleet's power-cap assignment (erg_fleet_assign) against brute force on
 * random fleets of up to 6 jobs, its bound and gap when the search is cut short, and its input
 * checks; the writers of a simulated day's timeline and summary (erg_fleet_sim_*). */
#include "tap.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

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

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ASSERT_MSG(f, "cannot read %s", path);
    char *buf = calloc(1, 1 << 16);
    ASSERT(buf);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* The timeline: its header and a row per sample, each column rounded as docs/fleet.md shows it
 * (hours to 6 decimals, watts to 3, the per-GPU limit to the watt, slowdowns to 6), in the file
 * as formatted; a missing directory is an error naming the path. */
TEST(sim_timeline_csv_has_a_row_per_sample)
{
    erg_error err;
    erg_fleet_sim_sample s[2] = {
        {.time_h = 0,
         .cap_w = 1000,
         .jobs = 3,
         .gpus = 24,
         .fleet_w = 950.25,
         .power_limit_w = 900.5,
         .per_gpu_limit_w = 302,
         .no_cap_w = 1200,
         .fleet_mean_slowdown = 1.0123456,
         .power_limit_mean_slowdown = 1.05},
        {.time_h = 1.25, .cap_w = 0.0004, .fleet_mean_slowdown = 0, .power_limit_mean_slowdown = 0},
    };
    char *csv;
    ASSERT_OK(erg_fleet_sim_timeline_format_csv(s, 2, &csv, &err));
    ASSERT_STR_EQ(csv, "hour,cap_w,jobs,gpus,fleet_w,power_limit_w,per_gpu_limit_w,no_cap_w,"
                       "fleet_mean_slowdown,power_limit_mean_slowdown\n"
                       "0.000000,1000.000,3,24,950.250,900.500,302,1200.000,1.012346,1.050000\n"
                       "1.250000,0.000,0,0,0.000,0.000,0,0.000,0.000000,0.000000\n");
    char dir[] = "/tmp/ergon-test-fleet-XXXXXX", path[80];
    ASSERT(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/timeline.csv", dir);
    ASSERT_OK(erg_fleet_sim_timeline_write_csv(path, s, 2, &err));
    char *file = slurp(path);
    ASSERT_STR_EQ(file, csv);
    free(file);
    ASSERT_OK(erg_fleet_sim_timeline_write_csv(path, NULL, 0, &err)); /* a day without rows */
    file = slurp(path);
    ASSERT_STR_EQ(file, "hour,cap_w,jobs,gpus,fleet_w,power_limit_w,per_gpu_limit_w,no_cap_w,"
                        "fleet_mean_slowdown,power_limit_mean_slowdown\n");
    free(file);
    snprintf(path, sizeof path, "%s/missing/timeline.csv", dir);
    ASSERT_EQ_INT(erg_fleet_sim_timeline_write_csv(path, s, 2, &err), ERG_EIO);
    ASSERT_CONTAINS(err.msg, path);
    erg_free(csv);
    ASSERT(tap_rm_tree(dir));
}

/* The summary: one JSON object whose fields are the summary's, each policy's under its key. */
TEST(sim_summary_json_carries_every_field)
{
    erg_error err;
    erg_fleet_sim_summary sm = {.jobs = 40,
                                .peak_jobs = 31,
                                .peak_gpus = 812,
                                .job_h = 75.5,
                                .events = 97,
                                .cap_min_w = 51234.5,
                                .cap_max_w = 70111.25,
                                .violations = 2,
                                .fleet = {1.0125, 3.5e9, 0, 0.999},
                                .power_limit = {1.0625, 3.25e9, 0.5, 1.01},
                                .no_cap = {1.001, 4e9, 1.75, 1.2}};
    char dir[] = "/tmp/ergon-test-fleet-XXXXXX", path[80];
    ASSERT(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/summary.json", dir);
    ASSERT_OK(erg_fleet_sim_summary_write_json(path, &sm, &err));
    char *file = slurp(path), *text;
    ASSERT_OK(erg_fleet_sim_summary_format_json(&sm, &text, &err));
    ASSERT_STR_EQ(file, text);
    ASSERT(strlen(text) > 2 && text[strlen(text) - 1] == '\n' && !strchr(text, '\n')[1]);
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    ASSERT_MSG(j, "not JSON: %s: %s", je.text, text);
    ASSERT_EQ_INT(json_integer_value(json_object_get(j, "jobs")), 40);
    ASSERT_EQ_INT(json_integer_value(json_object_get(j, "peak_jobs")), 31);
    ASSERT_EQ_INT(json_integer_value(json_object_get(j, "peak_gpus")), 812);
    ASSERT_EQ_INT(json_integer_value(json_object_get(j, "events")), 97);
    ASSERT_EQ_INT(json_integer_value(json_object_get(j, "violations")), 2);
    ASSERT_NEAR(json_number_value(json_object_get(j, "job_hours")), 75.5, 1e-6);
    ASSERT_NEAR(json_number_value(json_object_get(j, "cap_min_w")), 51234.5, 1e-6);
    ASSERT_NEAR(json_number_value(json_object_get(j, "cap_max_w")), 70111.25, 1e-6);
    const char *keys[3] = {"fleet", "power_limit", "no_cap"};
    const erg_fleet_sim_policy *pol[3] = {&sm.fleet, &sm.power_limit, &sm.no_cap};
    for (int i = 0; i < 3; i++) {
        json_t *p = json_object_get(j, keys[i]);
        ASSERT_MSG(json_is_object(p), "no \"%s\" in %s", keys[i], text);
        ASSERT_NEAR(json_number_value(json_object_get(p, "mean_slowdown")), pol[i]->mean_slowdown,
                    1e-9);
        ASSERT_NEAR(json_number_value(json_object_get(p, "energy_j")), pol[i]->energy_j, 1e-6);
        ASSERT_NEAR(json_number_value(json_object_get(p, "over_h")), pol[i]->over_h, 1e-6);
        ASSERT_NEAR(json_number_value(json_object_get(p, "max_power_over_cap")),
                    pol[i]->max_power_over_cap, 1e-9);
    }
    ASSERT_EQ_INT(json_object_size(j), 11);
    json_decref(j);
    snprintf(path, sizeof path, "%s/missing/summary.json", dir);
    ASSERT_EQ_INT(erg_fleet_sim_summary_write_json(path, &sm, &err), ERG_EIO);
    ASSERT_CONTAINS(err.msg, path);
    free(file);
    erg_free(text);
    ASSERT(tap_rm_tree(dir));
}

TAP_MAIN(TEST_ENTRY(assignment_equals_brute_force_on_random_fleets),
         TEST_ENTRY(cut_search_states_its_gap), TEST_ENTRY(bad_input_is_named),
         TEST_ENTRY(sim_timeline_csv_has_a_row_per_sample),
         TEST_ENTRY(sim_summary_json_carries_every_field))
