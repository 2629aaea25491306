/* bench_fleet.c: re-solving a fleet's power-cap assignment (issue 40; docs/fleet.md).
 *
 * Frontiers: the four published Perseus profiles (GPT-3 175B and BLOOM on A100 and A40, 8
 * stages) planned with erg_plan_perseus at M = 8, 16, 24 (unit 1 ms): 12 frontiers of about
 * 1,000 points, each point (iteration time, average power = energy / time). A fleet of JOBS jobs
 * (default 1,000) draws a frontier each, a data-parallel width of 1-8 (power x width) and a
 * weight in [0.5, 2], from a fixed seed. It then solves erg_fleet_assign for caps at 60 %, 75 %
 * and 90 % of the way from the fleet's least to its greatest power, REPS times each (default 5),
 * and prints per cap: the best and median solve time, the points, exactness or the stated gap.
 *
 *   bench_fleet DATA_DIR [JOBS] [REPS]      DATA_DIR holds perseus-sosp24/stage_profile */
#include "ergon/fleet.h"
#include "ergon/planner.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* CPU time of this process: a loaded machine does not inflate it (the wall time is printed
 * too). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (x) {                                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, err.msg);                           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct front {
    size_t n;
    double *t, *p;
} front;

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_fleet DATA_DIR [JOBS] [REPS]\n");
        return 2;
    }
    size_t jobs_n = argc > 2 ? (size_t)atol(argv[2]) : 1000;
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    const char *names[4] = {"gpt3-175b+a100_sxm_bf16", "gpt3-175b+a40_bf16", "bloom+a100_sxm_bf16",
                            "bloom+a40_bf16"};
    const double block_w[4] = {83.64, 70.38, 83.64, 70.38}; /* erg_blocking_power_w */
    const int Ms[3] = {8, 16, 24};
    front fr[12];
    size_t nf = 0, total = 0;
    erg_error err;
    for (int i = 0; i < 4; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/perseus-sosp24/stage_profile/%s.csv", argv[1], names[i]);
        erg_profile *prof;
        CHECK(erg_profile_read_csv(path, &prof, &err));
        for (int m = 0; m < 3; m++) {
            erg_perseus_opts po;
            erg_perseus_opts_init(&po);
            po.blocking_power_w = block_w[i];
            po.unit_s = 1e-3;
            erg_frontier *f;
            CHECK(erg_plan_perseus(prof, 8, Ms[m], &po, &f, &err));
            front *x = &fr[nf++];
            x->n = erg_frontier_size(f);
            x->t = malloc(x->n * sizeof(double));
            x->p = malloc(x->n * sizeof(double));
            for (size_t k = 0; k < x->n; k++) {
                erg_frontier_point pt;
                CHECK(erg_frontier_get(f, k, &pt, &err));
                x->t[k] = pt.time_s;
                x->p[k] = pt.energy_j / pt.time_s;
            }
            total += x->n;
            erg_frontier_free(f);
        }
        erg_profile_free(prof);
    }
    printf("frontiers: %zu, %.0f points on average\n", nf, (double)total / (double)nf);
    uint64_t s = 12345;
    erg_fleet_job *jobs = calloc(jobs_n, sizeof *jobs);
    size_t *choice = calloc(jobs_n, sizeof *choice), points = 0;
    double lo = 0, hi = 0;
    for (size_t j = 0; j < jobs_n; j++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        front *x = &fr[(s >> 33) % nf];
        double width = 1 + (double)((s >> 20) % 8);
        double *p = malloc(x->n * sizeof(double)), a = 1e300, b = 0;
        for (size_t k = 0; k < x->n; k++) {
            p[k] = x->p[k] * width;
            a = p[k] < a ? p[k] : a;
            b = p[k] > b ? p[k] : b;
        }
        jobs[j] = (erg_fleet_job){x->t, p, x->n, 0.5 + 1.5 * (double)((s >> 8) % 1000) / 1000};
        lo += a;
        hi += b;
        points += x->n;
    }
    printf("fleet: %zu jobs, %zu points (%.0f per job), %.0f .. %.0f W\n", jobs_n, points,
           (double)points / (double)jobs_n, lo, hi);
    const double at[3] = {0.6, 0.75, 0.9};
    double worst = 0;
    for (int c = 0; c < 3; c++) {
        double cap = lo + at[c] * (hi - lo), *ts = malloc(2 * (size_t)reps * sizeof(double));
        double *ws = ts + reps;
        erg_fleet_result r;
        for (int k = 0; k < reps; k++) {
            double t0 = cpu_s(), w0 = now_s();
            CHECK(erg_fleet_assign(jobs, jobs_n, cap, NULL, choice, &r, &err));
            ts[k] = cpu_s() - t0;
            ws[k] = now_s() - w0;
        }
        qsort(ts, (size_t)reps, sizeof *ts, cmp_d);
        qsort(ws, (size_t)reps, sizeof *ws, cmp_d);
        worst = ts[reps / 2] > worst ? ts[reps / 2] : worst;
        printf("cap %.0f W (%.0f %%): CPU best %.1f ms, median %.1f ms (wall median %.1f ms); "
               "power %.0f W; cost %.6f, bound %.6f, %s (gap %.3g = %.2g of the cost), %zu "
               "nodes\n",
               cap, at[c] * 100, ts[0] * 1e3, ts[reps / 2] * 1e3, ws[reps / 2] * 1e3, r.power_w,
               r.cost, r.lower_bound, r.exact ? "exact" : "not proven", r.gap, r.gap / r.cost,
               r.nodes);
        free(ts);
    }
    printf("slowest median CPU time: %.1f ms (target <= 100 ms)\n", worst * 1e3);
    return 0;
}
