/* test_power.c: a plan's power over an iteration (erg_power_trace_*), checked against a
 * timeline computed by hand, and against the emulator's energy on the published profiles. */
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "ergon/emulate.h"
#include "ergon/baselines.h"
#include "ergon/envpipe.h"
#include "ergon/planner.h"

/* Two clocks: 1000 MHz (forward 1 s, 10 J; backward 2 s, 30 J) and 900 MHz (1.5 s, 9 J; 3 s,
 * 27 J). */
static erg_profile *two_clock_profile(int S)
{
    erg_error err;
    erg_profile *prof;
    ASSERT_OK(erg_profile_new(&prof, &err));
    for (int s = 0; s < S; s++) {
        erg_profile_point f1 = {1000, 1, 10}, b1 = {1000, 2, 30};
        erg_profile_point f2 = {900, 1.5, 9}, b2 = {900, 3, 27};
        ASSERT_OK(erg_profile_add(prof, s, ERG_FORWARD, &f1, &err));
        ASSERT_OK(erg_profile_add(prof, s, ERG_BACKWARD, &b1, &err));
        ASSERT_OK(erg_profile_add(prof, s, ERG_FORWARD, &f2, &err));
        ASSERT_OK(erg_profile_add(prof, s, ERG_BACKWARD, &b2, &err));
    }
    return prof;
}

/* S = 2, M = 2, 1F1B, all at 1000 MHz, blocking 5 W. By hand (test_emulate.c's timeline):
 *   rank 0: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9]; rank 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7]
 * forward 10 W, backward 15 W, waiting 5 W, so the job draws
 *   [0,1] 15  [1,2] 20  [2,4] 20  [4,5] 25  [5,6] 30  [6,7] 20  [7,9] 20  (then again). */
TEST(trace_of_1f1b_is_the_hand_timeline)
{
    erg_error err;
    erg_profile *prof = two_clock_profile(2);
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    erg_plan *p;
    ASSERT_OK(erg_dag_new(&sc, 2, 2, &d, &err));
    ASSERT_OK(erg_plan_new(&sc, 2, 2, &p, &err));
    erg_plan_fill(p, 1000);
    erg_emulate_opts o;
    erg_emulate_opts_init(&o);
    o.blocking_power_w = 5;
    erg_power_trace *tr;
    ASSERT_OK(erg_power_trace_new(prof, d, p, &o, &tr, &err));
    ASSERT_NEAR(erg_power_trace_period(tr), 9, 1e-12);
    ASSERT_EQ_INT(erg_power_trace_num_gpus(tr), 2);
    const double bp[] = {0, 1, 2, 4, 5, 6, 7, 9}, w[] = {15, 20, 20, 25, 30, 20, 20};
    const double g0[] = {10, 10, 5, 15, 15, 5, 15};
    ASSERT_EQ_INT(erg_power_trace_len(tr), 7);
    for (size_t i = 0; i < 7; i++) {
        erg_power_segment sg;
        ASSERT(erg_power_trace_segment(tr, i, &sg));
        ASSERT_NEAR(sg.start_s, bp[i], 1e-12);
        ASSERT_NEAR(sg.end_s, bp[i + 1], 1e-12);
        ASSERT_NEAR(sg.total_w, w[i], 1e-12);
        ASSERT_NEAR(erg_power_trace_gpu(tr, i, 0), g0[i], 1e-12);
        ASSERT_NEAR(erg_power_trace_gpu(tr, i, 0) + erg_power_trace_gpu(tr, i, 1), sg.total_w,
                    1e-12);
        ASSERT_NEAR(sg.compute_w + sg.blocking_w, sg.total_w, 1e-12);
    }
    ASSERT(!erg_power_trace_segment(tr, 7, &(erg_power_segment){0}));
    ASSERT(isnan(erg_power_trace_gpu(tr, 0, 2)));
    erg_power_stats ps;
    /* 190 J (160 J of compute, 2 x 3 s x 5 W waiting) over 9 s */
    ASSERT_OK(erg_power_trace_stats(tr, 100, &ps, &err));
    ASSERT_NEAR(ps.avg_w, 190.0 / 9, 1e-12);
    ASSERT_NEAR(ps.peak_w, 30, 1e-12);
    ASSERT_NEAR(ps.trough_w, 15, 1e-12);
    ASSERT_NEAR(ps.swing_w, 15, 1e-12); /* a window longer than the iteration: peak - trough */
    /* 1.5 s windows see 20-25-30 at most (10 W); 0.5 s ones the 30 -> 20 step at 6 s */
    ASSERT_OK(erg_power_trace_stats(tr, 1.5, &ps, &err));
    ASSERT_NEAR(ps.swing_w, 10, 1e-12);
    ASSERT_OK(erg_power_trace_stats(tr, 0.5, &ps, &err));
    ASSERT_NEAR(ps.swing_w, 10, 1e-12);
    /* 30 W ends at 6 s and 15 W starts at 9 s (the next iteration): 3 s windows only touch
     * both ends, 3.2 s ones hold both */
    ASSERT_OK(erg_power_trace_stats(tr, 3, &ps, &err));
    ASSERT_NEAR(ps.swing_w, 10, 1e-12);
    ASSERT_OK(erg_power_trace_stats(tr, 3.2, &ps, &err));
    ASSERT_NEAR(ps.swing_w, 15, 1e-12);
    /* ramp over 1 s: P(t+1) - P(t) is at most 10 W (30 -> 20 across 6 s); over 2 s, 10 W / 2 s */
    ASSERT_OK(erg_power_trace_stats(tr, 1, &ps, &err));
    ASSERT_NEAR(ps.ramp_w_per_s, 10, 1e-12);
    ASSERT_OK(erg_power_trace_stats(tr, 2, &ps, &err));
    ASSERT_NEAR(ps.ramp_w_per_s, 5, 1e-12);
    ASSERT_EQ_INT(erg_power_trace_stats(tr, 0, &ps, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "window");
    ASSERT_EQ_INT(erg_power_trace_stats(tr, NAN, &ps, &err), ERG_EINVAL);
    char *csv;
    ASSERT_OK(erg_power_trace_format_csv(tr, &csv, &err));
    ASSERT_CONTAINS(csv, "start_s,end_s,total_w,compute_w,blocking_w,gpu0_w,gpu1_w\n");
    ASSERT_CONTAINS(csv, "\n5,6,30.000000,30.000000,0.000000,15.000000,15.000000\n");
    erg_free(csv);
    erg_power_trace_free(tr);
    erg_plan_free(p);
    erg_dag_free(d);
    erg_profile_free(prof);
}

/* A swing seen only in a brute-force scan: every window start on a fine grid, max - min of the
 * power sampled inside it. */
static double brute_swing(const erg_power_trace *tr, double w)
{
    double T = erg_power_trace_period(tr), best = 0;
    size_t n = erg_power_trace_len(tr);
    double *edge = malloc(sizeof(double) * (n + 1));
    double *val = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) {
        erg_power_segment sg;
        erg_power_trace_segment(tr, i, &sg);
        edge[i] = sg.start_s;
        val[i] = sg.total_w;
    }
    edge[n] = T;
    /* windows (a, a + w) with a just before each breakpoint and just after it */
    for (size_t i = 0; i <= n; i++)
        for (int side = -1; side <= 1; side += 2) {
            double a = edge[i] + side * 1e-9 * T, hi = -INFINITY, lo = INFINITY;
            for (int rep = -1; rep <= 2; rep++)
                for (size_t j = 0; j < n; j++) {
                    double s0 = edge[j] + rep * T, s1 = edge[j + 1] + rep * T;
                    if (s1 > a && s0 < a + w && s1 > s0) {
                        hi = val[j] > hi ? val[j] : hi;
                        lo = val[j] < lo ? val[j] : lo;
                    }
                }
            if (hi - lo > best)
                best = hi - lo;
        }
    free(edge);
    free(val);
    return best;
}

/* On the published GPT-3 profile, plans from its frontier: the trace's energy is the emulator's
 * energy, per-GPU power adds up to the job's, and the windowed swing agrees with a brute scan. */
TEST(trace_energy_is_the_emulators_on_published_frontier)
{
    const char *path =
        ERG_TEST_DATA_DIR "/published/perseus-sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv";
    tap_need_data(path);
    erg_error err;
    erg_profile *prof;
    ASSERT_OK(erg_profile_read_csv(path, &prof, &err));
    int S = erg_profile_num_stages(prof), M = 8;
    erg_perseus_opts po;
    erg_perseus_opts_init(&po);
    po.blocking_power_w = 60;
    po.unit_s = 1e-3;
    erg_frontier *f;
    ASSERT_OK(erg_plan_perseus(prof, S, M, &po, &f, &err));
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    ASSERT_OK(erg_dag_new(&sc, S, M, &d, &err));
    erg_emulate_opts o;
    erg_emulate_opts_init(&o);
    o.blocking_power_w = 60;
    size_t n = erg_frontier_size(f), checked = 0;
    for (size_t k = 0; k < n; k += n / 5 + 1) {
        erg_plan *p;
        ASSERT_OK(erg_frontier_plan(f, k, &p, &err));
        erg_emulation em;
        ASSERT_OK(erg_emulate_ex(prof, d, p, &o, &em, NULL, NULL, &err));
        erg_power_trace *tr;
        ASSERT_OK(erg_power_trace_new(prof, d, p, &o, &tr, &err));
        erg_power_stats ps;
        double w = em.time_s / 7;
        ASSERT_OK(erg_power_trace_stats(tr, w, &ps, &err));
        ASSERT_NEAR(ps.avg_w * em.time_s, em.energy_j, 1e-9 * em.energy_j);
        ASSERT(ps.peak_w <= S * 400 && ps.trough_w >= S * 60 - 1e-9);
        ASSERT(ps.swing_w <= ps.peak_w - ps.trough_w + 1e-9);
        ASSERT_NEAR(ps.swing_w, brute_swing(tr, w), 1e-9);
        for (size_t i = 0; i < erg_power_trace_len(tr); i++) {
            erg_power_segment sg;
            ASSERT(erg_power_trace_segment(tr, i, &sg));
            double sum = 0;
            for (int g = 0; g < S; g++)
                sum += erg_power_trace_gpu(tr, i, g);
            ASSERT_NEAR(sum, sg.total_w, 1e-9);
        }
        erg_power_trace_free(tr);
        erg_plan_free(p);
        checked++;
    }
    printf("# %zu plans of %zu checked\n", checked, n);
    ASSERT(checked >= 5);
    erg_dag_free(d);
    erg_frontier_free(f);
    erg_profile_free(prof);
}

/* Under a per-GPU limit every instruction runs at its highest clock whose power fits: forward
 * 10 W at 1000 MHz, 6 W at 900; backward 15 W and 9 W. */
TEST(power_limit_picks_the_highest_clock_that_fits)
{
    erg_error err;
    erg_profile *prof = two_clock_profile(2);
    erg_baseline_opts o;
    erg_baseline_opts_init(&o);
    o.blocking_power_w = 5;
    const double lim[] = {20, 12, 9, 5};
    const int fwd[] = {1000, 1000, 900, 900}, bwd[] = {1000, 900, 900, 900};
    for (int i = 0; i < 4; i++) {
        o.power_limit_w = lim[i];
        erg_plan *p;
        ASSERT_OK(erg_plan_power_limit(prof, 2, 3, &o, &p, &err));
        for (int s = 0; s < 2; s++)
            for (int m = 0; m < 3; m++) {
                ASSERT_EQ_INT(erg_plan_freq(p, s, ERG_FORWARD, m), fwd[i]);
                ASSERT_EQ_INT(erg_plan_freq(p, s, ERG_BACKWARD, m), bwd[i]);
            }
        bool over = strstr(erg_plan_method(p), "over at the lowest clock") != NULL;
        ASSERT_MSG(over == (lim[i] < 6), "limit %g W: method '%s'", lim[i], erg_plan_method(p));
        erg_plan_free(p);
    }
    o.power_limit_w = 0;
    erg_plan *p;
    ASSERT_EQ_INT(erg_plan_power_limit(prof, 2, 3, &o, &p, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "limit");
    erg_profile_free(prof);
}

/* On the published profile, no GPU of a power-limited plan draws more than the limit (unless
 * the plan says it cannot), and a higher limit is never slower. */
TEST(power_limited_plans_keep_every_gpu_under_the_limit)
{
    const char *path =
        ERG_TEST_DATA_DIR "/published/perseus-sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv";
    tap_need_data(path);
    erg_error err;
    erg_profile *prof;
    ASSERT_OK(erg_profile_read_csv(path, &prof, &err));
    int S = 8, M = 16;
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    ASSERT_OK(erg_dag_new(&sc, S, M, &d, &err));
    erg_baseline_opts o;
    erg_baseline_opts_init(&o);
    o.blocking_power_w = 83.64;
    erg_emulate_opts eo;
    erg_emulate_opts_init(&eo);
    eo.blocking_power_w = 83.64;
    double last_t = INFINITY;
    int under = 0;
    for (double lim = 150; lim <= 450; lim += 25) {
        o.power_limit_w = lim;
        erg_plan *p;
        ASSERT_OK(erg_plan_power_limit(prof, S, M, &o, &p, &err));
        bool over = strstr(erg_plan_method(p), "over") != NULL;
        erg_power_trace *tr;
        ASSERT_OK(erg_power_trace_new(prof, d, p, &eo, &tr, &err));
        double hi = 0;
        for (size_t i = 0; i < erg_power_trace_len(tr); i++)
            for (int g = 0; g < S; g++)
                hi = fmax(hi, erg_power_trace_gpu(tr, i, g));
        ASSERT_MSG(over || hi <= lim + 1e-9, "limit %g W: a GPU draws %g W", lim, hi);
        under += !over;
        double t = erg_power_trace_period(tr);
        ASSERT_MSG(t <= last_t * (1 + 1e-12), "limit %g W: %g s, slower than %g s", lim, t, last_t);
        last_t = t;
        erg_power_trace_free(tr);
        erg_plan_free(p);
    }
    ASSERT(under >= 5);
    erg_dag_free(d);
    erg_profile_free(prof);
}

/* The swing-bounded choice on the published profile against every plan evaluated here: without a
 * bound it is the least energy within the deadline; with a bound, the least energy among the
 * plans that meet it; with a floor, a plan within the bound whose energy counts the floor. */
TEST(swing_bounded_choice_is_the_least_energy_plan_within_the_bound)
{
    const char *path =
        ERG_TEST_DATA_DIR "/published/perseus-sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv";
    tap_need_data(path);
    erg_error err;
    erg_profile *prof;
    ASSERT_OK(erg_profile_read_csv(path, &prof, &err));
    int S = 8, M = 8;
    erg_perseus_opts po;
    erg_perseus_opts_init(&po);
    po.blocking_power_w = 83.64;
    erg_frontier *f;
    ASSERT_OK(erg_plan_perseus(prof, S, M, &po, &f, &err));
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    ASSERT_OK(erg_dag_new(&sc, S, M, &d, &err));
    erg_emulate_opts o;
    erg_emulate_opts_init(&o);
    o.blocking_power_w = 83.64;
    size_t n = erg_frontier_size(f);
    double *t = calloc(n, sizeof(double)), *e = calloc(n, sizeof(double));
    double *sw = calloc(n, sizeof(double)), fastest = INFINITY, window = 1.0;
    for (size_t k = 0; k < n; k++) {
        erg_plan *p;
        ASSERT_OK(erg_frontier_plan(f, k, &p, &err));
        erg_power_trace *tr;
        ASSERT_OK(erg_power_trace_new(prof, d, p, &o, &tr, &err));
        erg_power_stats ps;
        ASSERT_OK(erg_power_trace_stats(tr, window, &ps, &err));
        t[k] = erg_power_trace_period(tr);
        e[k] = ps.avg_w * t[k];
        sw[k] = ps.swing_w;
        fastest = fmin(fastest, t[k]);
        erg_power_trace_free(tr);
        erg_plan_free(p);
    }
    double deadline = fastest * 1.01;
    /* the least energy within the deadline, with and without a bound, by scanning */
    size_t free_k = n;
    for (size_t k = 0; k < n; k++)
        if (t[k] <= deadline && (free_k == n || e[k] < e[free_k]))
            free_k = k;
    ASSERT(free_k < n);
    erg_swing_pick sp;
    ASSERT_OK(erg_frontier_pick_swing(prof, d, f, &o, deadline, window, 1e9, false, &sp, &err));
    ASSERT_NEAR(sp.em.energy_j, e[free_k], 1e-9 * e[free_k]);
    ASSERT_NEAR(sp.power.swing_w, sw[sp.index], 1e-9);
    /* a bound between the least and the most swing within 5 % slowdown */
    double lo = INFINITY, hi = 0;
    for (size_t k = 0; k < n; k++)
        if (t[k] <= fastest * 1.05)
            lo = fmin(lo, sw[k]), hi = fmax(hi, sw[k]);
    double bound = lo + 0.3 * (hi - lo);
    printf("# swing within 5 %%: %.1f .. %.1f W\n", lo, hi);
    ASSERT(hi > lo + 1);
    size_t want = n;
    for (size_t k = 0; k < n; k++)
        if (t[k] <= fastest * 1.05 && sw[k] <= bound && (want == n || e[k] < e[want]))
            want = k;
    ASSERT(want < n);
    ASSERT_OK(
        erg_frontier_pick_swing(prof, d, f, &o, fastest * 1.05, window, bound, false, &sp, &err));
    ASSERT_NEAR(sp.em.energy_j, e[want], 1e-9 * e[want]);
    ASSERT(sp.power.swing_w <= bound && sp.floor_w == 0);
    printf("# window %g s: least-energy plan within 1 %% swings %.1f W; within 5 %%, bound %.1f W "
           "gives %.4f s, %.1f J\n",
           window, sw[free_k], bound, sp.em.time_s, sp.em.energy_j);
    /* a bound below every plan's swing at 1 %: none without a floor, one with it */
    double tight = 0.8 * sw[free_k];
    int rc = erg_frontier_pick_swing(prof, d, f, &o, deadline, window, tight, false, &sp, &err);
    ASSERT_EQ_INT(rc, ERG_ENOTFOUND);
    ASSERT_CONTAINS(err.msg, "least swing");
    ASSERT_OK(erg_frontier_pick_swing(prof, d, f, &o, deadline, window, tight, true, &sp, &err));
    ASSERT(sp.floor_w > 0 && sp.power.swing_w <= tight && sp.em.time_s <= deadline);
    ASSERT_NEAR(sp.power.avg_w * sp.em.time_s, sp.em.energy_j + sp.floor_energy_j,
                1e-9 * sp.em.energy_j);
    ASSERT(sp.em.energy_j + sp.floor_energy_j > e[free_k]);
    printf("# bound %.1f W at 1 %%: floor %.1f W per GPU, +%.1f J per iteration (%.2f %%)\n", tight,
           sp.floor_w, sp.floor_energy_j, 100 * sp.floor_energy_j / e[free_k]);
    ASSERT_EQ_INT(erg_frontier_pick_swing(prof, d, f, &o, deadline, 0, tight, true, &sp, &err),
                  ERG_EINVAL);
    free(t);
    free(e);
    free(sw);
    erg_dag_free(d);
    erg_frontier_free(f);
    erg_profile_free(prof);
}

/* The trace of trace_of_1f1b_is_the_hand_timeline (S = 2, M = 2, 1F1B, blocking 5 W). */
static erg_power_trace *hand_trace(void)
{
    erg_error err;
    erg_profile *prof = two_clock_profile(2);
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    erg_plan *p;
    ASSERT_OK(erg_dag_new(&sc, 2, 2, &d, &err));
    ASSERT_OK(erg_plan_new(&sc, 2, 2, &p, &err));
    erg_plan_fill(p, 1000);
    erg_emulate_opts o;
    erg_emulate_opts_init(&o);
    o.blocking_power_w = 5;
    erg_power_trace *tr;
    ASSERT_OK(erg_power_trace_new(prof, d, p, &o, &tr, &err));
    erg_plan_free(p);
    erg_dag_free(d);
    erg_profile_free(prof);
    return tr;
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

/* erg_power_trace_write_csv writes erg_power_trace_format_csv's text; erg_power_trace_read_csv
 * reads it back to the same segments, GPUs, period and statistics, and formats to the same
 * text; a path in a missing directory is an error naming it. */
TEST(trace_csv_is_written_and_read_back)
{
    erg_error err;
    erg_power_trace *tr = hand_trace(), *back;
    char dir[] = "/tmp/ergon-test-power-XXXXXX", path[64], *csv, *again;
    ASSERT(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/trace.csv", dir);
    ASSERT_OK(erg_power_trace_write_csv(tr, path, &err));
    ASSERT_OK(erg_power_trace_format_csv(tr, &csv, &err));
    char *file = slurp(path);
    ASSERT_STR_EQ(file, csv);
    ASSERT_OK(erg_power_trace_read_csv(path, &back, &err));
    ASSERT_EQ_INT(erg_power_trace_len(back), 7);
    ASSERT_EQ_INT(erg_power_trace_num_gpus(back), 2);
    ASSERT_NEAR(erg_power_trace_period(back), 9, 0);
    for (size_t i = 0; i < 7; i++) {
        erg_power_segment a, b;
        ASSERT(erg_power_trace_segment(tr, i, &a) && erg_power_trace_segment(back, i, &b));
        ASSERT_NEAR(b.start_s, a.start_s, 1e-9);
        ASSERT_NEAR(b.end_s, a.end_s, 1e-9);
        ASSERT_NEAR(b.total_w, a.total_w, 1e-6);
        ASSERT_NEAR(b.compute_w, a.compute_w, 1e-6);
        ASSERT_NEAR(b.blocking_w, a.blocking_w, 1e-6);
        for (int g = 0; g < 2; g++)
            ASSERT_NEAR(erg_power_trace_gpu(back, i, g), erg_power_trace_gpu(tr, i, g), 1e-6);
    }
    erg_power_stats s1, s2;
    ASSERT_OK(erg_power_trace_stats(tr, 2, &s1, &err));
    ASSERT_OK(erg_power_trace_stats(back, 2, &s2, &err));
    ASSERT_NEAR(s2.avg_w, s1.avg_w, 1e-6);
    ASSERT_NEAR(s2.peak_w, s1.peak_w, 1e-6);
    ASSERT_NEAR(s2.trough_w, s1.trough_w, 1e-6);
    ASSERT_NEAR(s2.swing_w, s1.swing_w, 1e-6);
    ASSERT_NEAR(s2.ramp_w_per_s, s1.ramp_w_per_s, 1e-6);
    ASSERT_OK(erg_power_trace_format_csv(back, &again, &err));
    ASSERT_STR_EQ(again, csv);
    snprintf(path, sizeof path, "%s/missing/trace.csv", dir);
    ASSERT_EQ_INT(erg_power_trace_write_csv(tr, path, &err), ERG_EIO);
    ASSERT_CONTAINS(err.msg, path);
    erg_free(again);
    erg_free(csv);
    free(file);
    erg_power_trace_free(back);
    erg_power_trace_free(tr);
    ASSERT(tap_rm_tree(dir));
}

/* A name in /dev (here /dev/fd/N of a regular file, as /dev/stdout is when the shell redirects
 * it) is written in place: a temp file there cannot be made (/dev/fd), or its rename would
 * replace the system's name (/dev/stdout). */
TEST(trace_csv_to_dev_fd_is_written_in_place)
{
    erg_error err;
    erg_power_trace *tr = hand_trace();
    char dir[] = "/tmp/ergon-test-power-XXXXXX", path[64], dev[64], *csv;
    ASSERT(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/out.csv", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT(fd >= 0);
    snprintf(dev, sizeof dev, "/dev/fd/%d", fd);
    ASSERT_OK(erg_power_trace_write_csv(tr, dev, &err));
    close(fd);
    ASSERT_OK(erg_power_trace_format_csv(tr, &csv, &err));
    char *file = slurp(path);
    ASSERT_STR_EQ(file, csv);
    free(file);
    erg_free(csv);
    erg_power_trace_free(tr);
    ASSERT(tap_rm_tree(dir));
}

/* The reader refuses what the writer never writes, naming the line and the value. */
TEST(trace_csv_reader_names_bad_input)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"", "t.csv: empty file"},
        {"start_s,end_s,total_w,compute_w\n0,1,2,2\n", "t.csv:1: column 5 is '', expected "
                                                       "'blocking_w'"},
        {"start_s,end_s,total_w,compute_w,blocking_w\n0,1,2,2,0\n", "t.csv:1: 0 GPU columns"},
        {"start_s,end_s,total_w,compute_w,blocking_w,gpu1_w\n", "column 6 is 'gpu1_w', expected "
                                                                "'gpu0_w'"},
        {"start_s,end_s,total_w,compute_w,blocking_w,gpu0_w\n", "t.csv: no rows after the header"},
        {"start_s,end_s,total_w,compute_w,blocking_w,gpu0_w\n0,1,x,2,0,2\n",
         "t.csv:2: total_w 'x' is not a number >= 0"},
        {"start_s,end_s,total_w,compute_w,blocking_w,gpu0_w\n0,1,2,2,0,-2\n",
         "t.csv:2: GPU power '-2' is not a number >= 0"},
        {"start_s,end_s,total_w,compute_w,blocking_w,gpu0_w\n0,1,2,2,0,nan\n",
         "t.csv:2: GPU power 'nan'"},
        {"start_s,end_s,total_w,compute_w,blocking_w,gpu0_w\n0,1,2,2,0\n",
         "t.csv:2: expected 6 fields, found 5"},
        {"start_s,end_s,total_w,compute_w,blocking_w,gpu0_w\n0.5,1,2,2,0,2\n",
         "t.csv:2: start_s 0.5: the first row starts at 0"},
        {"start_s,end_s,total_w,compute_w,blocking_w,gpu0_w\n0,1,2,2,0,2\n1.5,2,2,2,0,2\n",
         "t.csv:3: start_s 1.5 is not the previous row's end_s 1"},
        {"start_s,end_s,total_w,compute_w,blocking_w,gpu0_w\n0,1,2,2,0,2\n1,0.5,2,2,0,2\n",
         "t.csv:3: end_s 0.5 is before start_s 1"},
        {"start_s,end_s,total_w,compute_w,blocking_w,gpu0_w\n0,0,2,2,0,2\n",
         "t.csv: the trace ends at 0 s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        erg_error err = {0};
        erg_power_trace *tr = (erg_power_trace *)1;
        erg_status st =
            erg_power_trace_parse_csv(cases[i].text, strlen(cases[i].text), "t.csv", &tr, &err);
        ASSERT_MSG(st == ERG_EPARSE, "case %zu: status %d (%s)", i, (int)st, err.msg);
        ASSERT(tr == NULL);
        ASSERT_CONTAINS(err.msg, cases[i].want);
    }
    erg_error err;
    erg_power_trace *none = NULL;
    ASSERT_EQ_INT(erg_power_trace_read_csv("/nonexistent/t.csv", &none, &err), ERG_ENOTFOUND);
    ASSERT_CONTAINS(err.msg, "/nonexistent/t.csv");
}

/* A plan's power goes into its JSON and comes back; a malformed "power" is refused. */
TEST(plan_json_carries_power)
{
    erg_error err;
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_plan *p, *q;
    ASSERT_OK(erg_plan_new(&sc, 2, 2, &p, &err));
    erg_plan_fill(p, 1000);
    char *text;
    ASSERT_OK(erg_plan_format_json(p, &text, &err));
    ASSERT(!strstr(text, "\"power\"")); /* unknown: not written */
    erg_free(text);
    erg_plan_set_power(p, 190.0 / 9, 30, 15);
    ASSERT_OK(erg_plan_format_json(p, &text, &err));
    ASSERT_OK(erg_plan_parse(text, strlen(text), "p.json", NULL, &q, &err));
    double a, k, t;
    erg_plan_power(q, &a, &k, &t);
    ASSERT_NEAR(a, 190.0 / 9, 1e-12);
    ASSERT_NEAR(k, 30, 0);
    ASSERT_NEAR(t, 15, 0);
    erg_plan_free(q);
    char *bad = strstr(text, "\"trough_w\"");
    ASSERT(bad);
    memcpy(bad, "\"trough_x\"", 10);
    ASSERT_EQ_INT(erg_plan_parse(text, strlen(text), "p.json", NULL, &q, &err), ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "p.json: \"power\"");
    erg_free(text);
    erg_plan_free(p);
}

TAP_MAIN(TEST_ENTRY(trace_of_1f1b_is_the_hand_timeline), TEST_ENTRY(plan_json_carries_power),
         TEST_ENTRY(trace_csv_is_written_and_read_back),
         TEST_ENTRY(trace_csv_to_dev_fd_is_written_in_place),
         TEST_ENTRY(trace_csv_reader_names_bad_input),
         TEST_ENTRY(swing_bounded_choice_is_the_least_energy_plan_within_the_bound),
         TEST_ENTRY(power_limit_picks_the_highest_clock_that_fits),
         TEST_ENTRY(power_limited_plans_keep_every_gpu_under_the_limit),
         TEST_ENTRY(trace_energy_is_the_emulators_on_published_frontier))
