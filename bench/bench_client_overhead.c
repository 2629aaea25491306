/* bench_client_overhead.c: training-thread cost of instruction_begin + instruction_end with a clock
 * change pending. */
/*
 * Every instruction asks for a different clock than the previous one (a plan
 * alternating 1410/1395 MHz), so every instruction_begin enqueues a change
 * while the clock thread is busy with an earlier one. With --nvml LIB the
 * back-end is NVML loaded from LIB (the fake libnvidia-ml of tests/, whose
 * setters are made to take 15 ms like real ones); otherwise the simulated
 * GPU. --work-us spins between instructions so that the clock thread
 * works concurrently. We time each begin+end pair with CLOCK_MONOTONIC (the two timer reads,
 * ~20-50 ns, are included) and report median, p99, p99.9 and max.
 */
#include "ergon/client.h"
#include "ergon/gpu.h"
#include "ergon/pipeline.h"
#include "ergon/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *label, double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp);
    printf("%-34s n=%-7zu median %7.0f ns  p99 %7.0f ns  p99.9 %8.0f ns  max %9.0f ns\n", label, n,
           v[n / 2], v[(size_t)(n * 0.99)], v[(size_t)(n * 0.999)], v[n - 1]);
}

int main(int argc, char **argv)
{
    const char *nvml = NULL;
    long iters = 200000, work_us = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nvml") && i + 1 < argc)
            nvml = argv[++i];
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atol(argv[++i]);
        else if (!strcmp(argv[i], "--work-us") && i + 1 < argc)
            work_us = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--nvml LIBRARY] [--iters N] [--work-us US]\n", argv[0]);
            return 2;
        }
    }
    if (iters < 1000)
        iters = 1000;
    erg_error err;
    erg_gpu *g = NULL;
    if (nvml) {
        setenv("FAKE_NVML_SET_DELAY_US", "15000", 0);
        if (erg_gpu_open_nvml(nvml, &g, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
    } else if (erg_gpu_open("sim:a100:gpt3-xl:1", &g, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const int M = 64;
    erg_schedule sched = {.kind = ERG_SCHED_1F1B};
    erg_plan *plan = NULL;
    if (erg_plan_new(&sched, 1, M, &plan, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int *f = erg_plan_stage_freqs(plan, 0);
    for (int i = 0; i < 2 * M; i++)
        f[i] = i % 2 ? 1395 : 1410;
    erg_client *c = NULL;
    if (erg_client_new(g, 0, 0, NULL, ERG_CLIENT_NO_SIGNALS | ERG_CLIENT_NO_WATCHDOG, &c, &err) ||
        erg_client_set_plan(c, plan, 0, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    erg_instr order[128];
    erg_schedule_stage_order(&sched, 1, M, 0, order, &err);
    double *v = malloc((size_t)iters * sizeof *v);
    /* warm-up: page in the record buffer */
    for (long i = 0; i < 2000; i++) {
        erg_instr in = order[i % (2 * M)];
        erg_client_instruction_begin(c, in.kind, in.microbatch);
        erg_client_instruction_end(c, in.kind, in.microbatch);
    }
    for (long i = 0; i < iters; i++) {
        erg_instr in = order[i % (2 * M)];
        double t0 = now_ns();
        erg_client_instruction_begin(c, in.kind, in.microbatch);
        erg_client_instruction_end(c, in.kind, in.microbatch);
        double t1 = now_ns();
        v[i] = t1 - t0;
        /* Between instructions, spin for the "instruction" (the clock thread
         * meanwhile applies changes on the other core). */
        while (work_us > 0 && now_ns() - t1 < work_us * 1000.0)
            ;
    }
    printf("back-end: %s%s\n", erg_gpu_backend_name(g),
           nvml ? " (fake libnvidia-ml, setters sleep 15 ms)" : " (simulated GPU)");
    printf("instructions: %ld, %ld us of work between them; clock changes requested: %ld, "
           "applied meanwhile: %llu\n",
           iters, work_us, iters + 2000, (unsigned long long)erg_client_clock_changes(c));
    report("instruction_begin+end (all)", v, (size_t)iters);
    erg_client_close(c, NULL);
    erg_plan_free(plan);
    erg_gpu_close(g);
    free(v);
    return 0;
}
