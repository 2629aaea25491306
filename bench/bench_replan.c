/* bench_replan.c: answering a new straggler target from a stored frontier versus planning
 * again (issue 26 item 2), and re-planning for a changed profile of one stage.
 *
 * For gpt3-175b on A40 (8 stages, unit 0.1 ms; M = 12 and 96) it measures, in one process:
 *   plan        erg_plan_perseus from the profile (what a re-plan costs);
 *   pick (mem)  erg_frontier_baseline_pick on the frontier in memory, for 21 straggler
 *               targets (slowdown 1.00 .. 1.10): the plan by estimate, then its profiled time;
 *   pick (est)  erg_frontier_choose_deadline alone (estimates, no emulation);
 *   open+pick   a fresh reader: erg_frontier_read_dir + erg_frontier_baseline_open of a
 *               directory written by erg_frontier_write_dir (csv + packed), then one pick;
 *   re-plan one stage  stage 3's times x 1.1 (energies x 1.1: the same power), planned again.
 * Seconds per operation, best of REPS. */
#include "ergon/emulate.h"
#include "ergon/baselines.h"
#include "ergon/pipeline.h"
#include "ergon/planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

static erg_profile *scaled(const erg_profile *p, int stage, double k)
{
    erg_error err;
    erg_profile *q;
    CHECK(erg_profile_new(&q, &err));
    for (int s = 0; s < erg_profile_num_stages(p); s++)
        for (int kind = 0; kind < ERG_NUM_INSTR_KINDS; kind++) {
            size_t n = erg_profile_num_points(p, s, (erg_instr_kind)kind);
            const erg_profile_point *v = erg_profile_points(p, s, (erg_instr_kind)kind);
            for (size_t i = 0; i < n; i++) {
                erg_profile_point pt = v[i];
                if (s == stage) {
                    pt.time_s *= k;
                    pt.energy_j *= k;
                }
                CHECK(erg_profile_add(q, s, (erg_instr_kind)kind, &pt, &err));
            }
        }
    return q;
}

static void run(const char *data, int M, int reps, const char *tmpdir)
{
    erg_error err;
    char path[1024];
    snprintf(path, sizeof path, "%s/perseus-sosp24/stage_profile/gpt3-175b+a40_bf16.csv", data);
    erg_profile *prof;
    CHECK(erg_profile_read_csv(path, &prof, &err));
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    o.unit_s = 0.0001;
    CHECK(erg_blocking_power_w("A40", &o.blocking_power_w, &err));
    const int S = 8;
    double t_plan = 1e30, t_pick = 1e30, t_est = 1e30, t_open = 1e30, t_re = 1e30;
    size_t np = 0, np2 = 0;
    erg_frontier *f = NULL;
    for (int r = 0; r < reps; r++) {
        erg_frontier_free(f);
        double t0 = now_s();
        CHECK(erg_plan_perseus(prof, S, M, &o, &f, &err));
        double t = now_s() - t0;
        t_plan = t < t_plan ? t : t_plan;
    }
    np = erg_frontier_size(f);
    /* the baseline in memory, as `plan perseus` builds it */
    erg_dag *dag;
    erg_plan *allmax;
    erg_frontier_baseline b;
    erg_frontier_baseline_init(&b);
    CHECK(erg_dag_new(&o.schedule, S, M, &dag, &err));
    CHECK(erg_plan_all_max(prof, S, M, &o.schedule, o.blocking_power_w, &allmax, &err));
    CHECK(erg_emulate(prof, dag, allmax, o.blocking_power_w, &b.all_max, NULL, NULL, &err));
    b.have = true;
    b.prof = prof;
    b.dag = dag;
    b.power_w = o.blocking_power_w;
    CHECK(erg_frontier_baseline_complete(&b, f, allmax, NULL, &err));
    const int NT = 21;
    size_t picks[21];
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        for (int i = 0; i < NT; i++) {
            erg_emulation em;
            CHECK(erg_frontier_baseline_pick(&b, f, b.all_max.time_s * (1 + 0.005 * i), &picks[i],
                                             &em, &err));
        }
        double t = (now_s() - t0) / NT;
        t_pick = t < t_pick ? t : t_pick;
        t0 = now_s();
        for (int i = 0; i < NT; i++) {
            size_t k;
            CHECK(erg_frontier_choose_deadline(f, b.all_max.time_s * (1 + 0.005 * i), &k, &err));
        }
        t = (now_s() - t0) / NT;
        t_est = t < t_est ? t : t_est;
    }
    /* a fresh reader of the stored directory */
    char dir[1200], p2[1300];
    snprintf(dir, sizeof dir, "%s/m%d", tmpdir, M);
    mkdir(dir, 0755);
    CHECK(erg_frontier_write_dir(f, dir, ERG_FRONTIER_CSV | ERG_FRONTIER_PACKED, NULL, NULL, &err));
    snprintf(p2, sizeof p2, "%s/profile.csv", dir);
    CHECK(erg_profile_write_csv(prof, p2, &err));
    snprintf(p2, sizeof p2, "%s/frontier-info.csv", dir);
    FILE *fp = fopen(p2, "w");
    if (!fp)
        exit(1);
    fprintf(fp, "key,value\nformat,ergon-frontier-info\nversion,1\nblocking_power_w,%.17g\n",
            o.blocking_power_w);
    fclose(fp);
    size_t same = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        erg_frontier *g;
        erg_frontier_baseline gb;
        CHECK(erg_frontier_read_dir(dir, NULL, &g, &err));
        CHECK(erg_frontier_baseline_open(dir, g, &gb, &err));
        size_t k;
        erg_emulation em;
        CHECK(erg_frontier_baseline_pick(&gb, g, gb.all_max.time_s * 1.05, &k, &em, &err));
        double t = now_s() - t0;
        t_open = t < t_open ? t : t_open;
        same = k == picks[10];
        erg_frontier_baseline_free(&gb);
        erg_frontier_free(g);
    }
    /* one stage changed: plan again */
    erg_profile *q = scaled(prof, 3, 1.1);
    for (int r = 0; r < reps; r++) {
        erg_frontier *g;
        double t0 = now_s();
        CHECK(erg_plan_perseus(q, S, M, &o, &g, &err));
        double t = now_s() - t0;
        t_re = t < t_re ? t : t_re;
        np2 = erg_frontier_size(g);
        erg_frontier_free(g);
    }
    printf("| %d | %zu | %.3f | %.1f | %.1f | %.1f | %.0fx | %.0fx | %.3f (%zu plans) |%s\n", M, np,
           t_plan, t_pick * 1e6, t_est * 1e6, t_open * 1e3, t_plan / t_pick, t_plan / t_open, t_re,
           np2, same ? "" : " (directory pick differs!)");
    fflush(stdout);
    erg_profile_free(q);
    erg_plan_free(allmax);
    erg_dag_free(dag);
    erg_frontier_free(f);
    erg_profile_free(prof);
}

int main(int argc, char **argv)
{
    const char *data = argc > 1 ? argv[1] : "tests/data/published";
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/perseus-sosp24", data);
    struct stat st;
    if (stat(dir, &st) != 0) {
        fprintf(stderr,
                "%s is absent: the published data is part of the repository (run from its root, "
                "or give the data folder as the first argument)\n",
                dir);
        return 1;
    }
    char tmpl[] = "/tmp/bench_replan.XXXXXX";
    if (!mkdtemp(tmpl))
        return 1;
    printf("| M | plans | plan s | pick µs (profiled) | pick µs (estimate) | open dir + pick ms "
           "| plan / pick | plan / (open + pick) | re-plan, stage 3 x 1.1: s |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    const char *ms = getenv("BENCH_REPLAN_M"); /* e.g. "12" */
    int Ms[2] = {12, 96};
    for (int i = 0; i < 2; i++)
        if (!ms || atoi(ms) == Ms[i])
            run(data, Ms[i], reps, tmpl);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    return system(cmd) != 0;
}
