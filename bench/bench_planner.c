/* bench_planner.c: time the Perseus frontier planner on the published
 * emulation profiles (one case per child process, so peak RSS is per case). */
#include "ergon/pipeline.h"
#include "ergon/planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct bench_case {
    const char *profile; /* under stage_profile/ */
    const char *gpu;
    int M;
    double unit_s;
    double ref_wall_s, ref_cpu_s; /* reference Python figures (docs/benchmarks.md), 0 = none */
    const char *ref_note;
    const char *sched; /* NULL = 1f1b; else a schedule name, V = 2, split 0.5 */
} bench_case;

static const bench_case cases[] = {
    {"gpt3-175b+a40_bf16.csv", "A40", 12, 0.0001, 700, 401, "measured", NULL},
    {"gpt3-175b+a40_bf16.csv", "A40", 24, 0.0001, 1500, 1383, ">25 min; CPU extrapolated", NULL},
    {"gpt3-175b+a40_bf16.csv", "A40", 48, 0.0001, 0, 0, "", NULL},
    {"gpt3-175b+a40_bf16.csv", "A40", 96, 0.0001, 0, 0, "", NULL},
    {"bloom+a40_bf16.csv", "A40", 12, 0.0001, 364, 341, "measured", NULL},
    {"bloom+a40_bf16.csv", "A40", 96, 0.0001, 0, 0, "", NULL},
    {"gpt3-175b+a40_bf16.csv", "A40", 12, 0.001, 39, 38, "measured", NULL},
    {"gpt3-175b+a100_sxm_bf16.csv", "A100", 12, 0.001, 53, 26, "measured", NULL},
    {"gpt3-175b+a100_sxm_bf16.csv", "A100", 24, 0.001, 116, 114, "measured", NULL},
    {"gpt3-175b+a100_sxm_bf16.csv", "A100", 96, 0.001, 0, 0, "", NULL},
    {"gpt3-175b+a40_bf16.csv", "A40", 96, 0.0001, 0, 0, "", "interleaved-1f1b"},
    {"gpt3-175b+a40_bf16.csv", "A40", 96, 0.0001, 0, 0, "", "zbv"},
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run_case(const char *data, const bench_case *c, int reps)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/perseus-sosp24/stage_profile/%s", data, c->profile);
    erg_profile *p;
    erg_error err;
    if (erg_profile_read_csv(path, &p, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    o.unit_s = c->unit_s;
    if (c->sched && erg_schedule_parse(c->sched, &o.schedule.kind, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    o.schedule.chunks = c->sched ? 2 : 0;
    o.schedule.backward_split = 0.5;
    erg_blocking_power_w(c->gpu, &o.blocking_power_w, &err);
    double best_wall = 1e30, best_cpu = 1e30;
    size_t plans = 0;
    for (int r = 0; r < reps; r++) {
        erg_frontier *f;
        double w0 = now_s(), c0 = cpu_s();
        if (erg_plan_perseus(p, 8, c->M, &o, &f, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        double w = now_s() - w0, cp = cpu_s() - c0;
        if (w < best_wall)
            best_wall = w;
        if (cp < best_cpu)
            best_cpu = cp;
        plans = erg_frontier_size(f);
        erg_frontier_free(f);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    erg_dag *dag = NULL;
    if (erg_dag_new(&o.schedule, 8, c->M, &dag, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int n = erg_dag_num_instrs(dag);
    erg_dag_free(dag);
    char ratio[64] = "";
    if (c->ref_cpu_s > 0)
        snprintf(ratio, sizeof ratio, "%.0fx (CPU) / %.0fx (wall)", c->ref_cpu_s / best_cpu,
                 c->ref_wall_s / best_wall);
    printf("| %s | %s | %s | %d | %d | %g ms | %zu | %.3f | %.3f | %.0f | %.2f | %.1f | %s |\n",
           c->profile, c->gpu, c->sched ? c->sched : "1f1b", c->M, n, c->unit_s * 1e3, plans,
           best_wall, best_cpu, (double)plans / best_wall, 1e9 * best_cpu / ((double)plans * n),
           (double)ru.ru_maxrss / 1024.0, ratio[0] ? ratio : "-");
    fflush(stdout);
    erg_profile_free(p);
    return 0;
}

int main(int argc, char **argv)
{
    const char *data = argc > 1 ? argv[1] : "tests/data/published";
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    struct stat st;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/perseus-sosp24", data);
    if (stat(dir, &st) != 0) {
        fprintf(stderr,
                "%s is absent: the published data is part of the repository (run from its root, "
                "or give the data folder as the first argument)\n",
                dir);
        return 1;
    }
    printf("| profile | GPU | schedule | M | instructions | unit | plans | wall s (best of %d) | "
           "CPU s | plans/s | ns per plan x instruction | peak RSS MB | vs reference Python |\n",
           reps);
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    fflush(stdout);
    const char *only = getenv("BENCH_ONLY"); /* e.g. "zbv": run only cases of that schedule */
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (only && strcmp(only, cases[i].sched ? cases[i].sched : "1f1b") != 0)
            continue;
        pid_t pid = fork();
        if (pid == 0)
            _exit(run_case(data, &cases[i], reps));
        int status;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status))
            return 1;
    }
    return 0;
}
