/* test_emulate.c: the emulator's P2P transfer time and clock-switch latency
 * (erg_emulate_ex), checked against timelines computed by hand. */
#include "tap.h"

#include <math.h>
#include <stdio.h>

#include "ergon/emulate.h"
#include "ergon/baselines.h"
#include "ergon/planner.h"

/* Two clocks: 1000 MHz (forward 1 s, backward 2 s) and 900 MHz (1.5 s, 3 s). */
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

/* S = 2, M = 2, every instruction at 1000 MHz (F = 1 s, B = 2 s), transfer x
 * on the two cross-stage edges of each microbatch. By hand:
 *   s0: F0 [0,1]  F1 [1,2]
 *   s1: F0 [1+x, 2+x]  B0 [2+x, 4+x]  F1 [max(4+x, 2+x), ..] = [4+x, 5+x]  B1 [5+x, 7+x]
 *   s0: B0 [max(2, 4+x+x), ..] = [4+2x, 6+2x]  B1 [max(6+2x, 7+x+x), ..] = [7+2x, 9+2x]
 * so T = 9 + 2x: the bubble of each stage (T - 6 s of work) grows by 2x. */
TEST(transfer_time_grows_1f1b_bubble_as_by_hand)
{
    erg_error err;
    erg_profile *prof = two_clock_profile(2);
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    erg_plan *p;
    ASSERT_OK(erg_dag_new(&sc, 2, 2, &d, &err));
    ASSERT_OK(erg_plan_new(&sc, 2, 2, &p, &err));
    erg_plan_fill(p, 1000);
    const double xs[] = {0, 0.25, 1.5};
    for (size_t i = 0; i < 3; i++) {
        double x = xs[i];
        erg_emulate_opts o;
        erg_emulate_opts_init(&o);
        o.blocking_power_w = 5;
        o.transfer_time_s = x;
        erg_emulation em;
        double start[8], dur[8];
        ASSERT_OK(erg_emulate_ex(prof, d, p, &o, &em, start, dur, &err));
        ASSERT_NEAR(em.time_s, 9 + 2 * x, 1e-12);
        ASSERT_NEAR(em.blocking_energy_j, 5 * 2 * (9 + 2 * x - 6), 1e-12);
        ASSERT_NEAR(em.compute_energy_j, 160, 1e-12);
        ASSERT_NEAR(em.transfer_time_s, x, 0);
        /* stage 1's first forward starts after the transfer */
        int id = erg_dag_instr_id(d, 1, ERG_FORWARD, 0);
        ASSERT_NEAR(start[id], 1 + x, 1e-12);
        id = erg_dag_instr_id(d, 0, ERG_BACKWARD, 1);
        ASSERT_NEAR(start[id], 7 + 2 * x, 1e-12);
    }
    /* the bandwidth model: 2 GB at 4 GB/s + 0.25 s latency = 0.75 s */
    erg_emulate_opts o;
    erg_emulate_opts_init(&o);
    o.transfer_bytes = 2e9;
    o.link_bandwidth_bps = 4e9;
    o.link_latency_s = 0.25;
    erg_emulation em;
    ASSERT_OK(erg_emulate_ex(prof, d, p, &o, &em, NULL, NULL, &err));
    ASSERT_NEAR(em.time_s, 9 + 2 * 0.75, 1e-12);
    /* nothing added = erg_emulate */
    erg_emulate_opts_init(&o);
    erg_emulation a, b;
    ASSERT_OK(erg_emulate_ex(prof, d, p, &o, &a, NULL, NULL, &err));
    ASSERT_OK(erg_emulate(prof, d, p, 0, &b, NULL, NULL, &err));
    ASSERT_NEAR(a.time_s, b.time_s, 0);
    ASSERT_NEAR(a.energy_j, b.energy_j, 0);
    erg_plan_free(p);
    erg_dag_free(d);
    erg_profile_free(prof);
}

/* A larger pipeline against an independent computation: the stage orders
 * from erg_schedule_stage_order, start times relaxed until nothing changes
 * (start = max(end of the stage's previous instruction, end of the
 * cross-stage predecessor + x)), no DAG code involved. */
TEST(transfer_time_matches_independent_relaxation)
{
    erg_error err;
    enum { S = 4, M = 8 };
    erg_profile *prof = two_clock_profile(S);
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    erg_plan *p;
    ASSERT_OK(erg_dag_new(&sc, S, M, &d, &err));
    ASSERT_OK(erg_plan_new(&sc, S, M, &p, &err));
    erg_plan_fill(p, 1000);
    erg_instr ord[S][2 * M];
    for (int s = 0; s < S; s++)
        ASSERT_OK(erg_schedule_stage_order(&sc, S, M, s, ord[s], &err));
    for (double x = 0; x <= 1.0; x += 0.125) {
        double end[S][2][M], T = 0;
        memset(end, 0, sizeof end);
        for (int changed = 1; changed;) {
            changed = 0;
            for (int s = 0; s < S; s++) {
                double prev = 0;
                for (int k = 0; k < 2 * M; k++) {
                    erg_instr in = ord[s][k];
                    double st = prev, dep = 0;
                    if (in.kind == ERG_FORWARD && s > 0)
                        dep = end[s - 1][0][in.microbatch] + x;
                    if (in.kind == ERG_BACKWARD && s < S - 1)
                        dep = end[s + 1][1][in.microbatch] + x;
                    if (dep > st)
                        st = dep;
                    double e = st + (in.kind == ERG_FORWARD ? 1 : 2);
                    if (e != end[s][in.kind][in.microbatch]) {
                        end[s][in.kind][in.microbatch] = e;
                        changed = 1;
                    }
                    prev = e;
                    if (e > T)
                        T = e;
                }
            }
        }
        erg_emulate_opts o;
        erg_emulate_opts_init(&o);
        o.transfer_time_s = x;
        erg_emulation em;
        ASSERT_OK(erg_emulate_ex(prof, d, p, &o, &em, NULL, NULL, &err));
        ASSERT_NEAR(em.time_s, T, 1e-9);
        if (x == 0)
            ASSERT_NEAR(em.time_s, (M + S - 1) * 3.0, 1e-12);
        else
            ASSERT(em.time_s > (M + S - 1) * 3.0);
    }
    erg_plan_free(p);
    erg_dag_free(d);
    erg_profile_free(prof);
}

/* A plan that switches clocks at every instruction: S = 2, M = 2, orders
 * s0: F0 F1 B0 B1, s1: F0 B0 F1 B1, clocks 1000, 900, 1000, 900 on both
 * ranks (F: 1 s / 10 J at 1000 MHz, 1.5 s / 9 J at 900; B: 2 s / 30 J, 3 s / 27 J).
 * The switch model (emulate_ex.c): each instruction requests its clock when it
 * starts, the request lands L later, and until then the GPU runs at the old
 * clock; a rank starts at its last instruction's clock (900). By hand, L = 0.5:
 *   s0.F0 [0, 7/6]: 0.5 s at 900 does 1/3 of it, 2/3 x 1 s at 1000; 1/3 x 9 + 2/3 x 10 J
 *   s0.F1 [7/6, 29/12]: 0.5 s at 1000 does 1/2, 1/2 x 1.5 s; 5 + 4.5 J
 *   s1.F0 [7/6, 7/3] as s0.F0;  s1.B0 [7/3, 61/12]: 0.5 s at 1000 does 1/4, 3/4 x 3 s; 7.5 + 20.25
 * J s0.B0 [61/12, 87/12]: 0.5 s at 900 does 1/6, 5/6 x 2 s; 4.5 + 25 J s1.F1 [61/12, 75/12] as
 * s1.F0;  s1.B1 [75/12, 9] as s1.B0;  s0.B1 [9, 11.75] as s1.B0 T = 11.75 s (0.25 s less than
 * without latency: every down-switch keeps the fast clock 0.5 s longer), compute energy 151.25 J
 * (152 without), 8 requests. */
TEST(switch_latency_runs_at_old_clock_until_the_request_lands)
{
    erg_error err;
    erg_profile *prof = two_clock_profile(2);
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    erg_plan *p, *slow;
    ASSERT_OK(erg_dag_new(&sc, 2, 2, &d, &err));
    ASSERT_OK(erg_plan_new(&sc, 2, 2, &p, &err));
    ASSERT_OK(erg_plan_new(&sc, 2, 2, &slow, &err));
    erg_plan_fill(slow, 900);
    for (int s = 0; s < 2; s++) {
        int *f = erg_plan_stage_freqs(p, s);
        for (int k = 0; k < 4; k++)
            f[k] = k % 2 ? 900 : 1000;
    }
    erg_emulate_opts o;
    erg_emulate_opts_init(&o);
    o.blocking_power_w = 2;
    erg_emulation em, e0;
    ASSERT_OK(erg_emulate_ex(prof, d, p, &o, &e0, NULL, NULL, &err));
    ASSERT_NEAR(e0.time_s, 12, 1e-12);
    ASSERT_EQ_INT(e0.num_switches, 0);
    o.switch_latency_s = 0.5;
    double dur[8];
    ASSERT_OK(erg_emulate_ex(prof, d, p, &o, &em, NULL, dur, &err));
    ASSERT_NEAR(em.time_s, 11.75, 1e-12);
    ASSERT_NEAR(em.switch_time_s, -0.25, 1e-12);
    ASSERT_EQ_INT(em.num_switches, 8);
    ASSERT_NEAR(em.compute_energy_j, 151.25, 1e-9);
    /* busy: s0 7/6 + 5/4 + 13/6 + 11/4, s1 7/6 + 11/4 + 7/6 + 11/4 */
    double busy = 7.0 / 6 + 1.25 + 13.0 / 6 + 2.75 + 7.0 / 6 + 2.75 + 7.0 / 6 + 2.75;
    ASSERT_NEAR(em.blocking_energy_j, 2 * (2 * 11.75 - busy), 1e-9);
    ASSERT_NEAR(dur[0], 7.0 / 6, 1e-12);
    /* A latency longer than the iteration: no request lands, every rank runs the whole
     * iteration at the clock it started with (900 MHz), as the all-900 plan does. */
    erg_emulation es;
    o.switch_latency_s = 100;
    ASSERT_OK(erg_emulate_ex(prof, d, p, &o, &em, NULL, NULL, &err));
    ASSERT_OK(erg_emulate(prof, d, slow, 2, &es, NULL, NULL, &err));
    ASSERT_NEAR(em.time_s, es.time_s, 1e-12);
    ASSERT_NEAR(em.energy_j, es.energy_j, 1e-9);
    ASSERT_EQ_INT(em.num_switches, 8);
    /* a plan at one clock issues no request */
    erg_plan_fill(p, 1000);
    o.switch_latency_s = 0.5;
    ASSERT_OK(erg_emulate_ex(prof, d, p, &o, &em, NULL, NULL, &err));
    ASSERT_NEAR(em.time_s, 9, 1e-12);
    ASSERT_EQ_INT(em.num_switches, 0);
    erg_plan_free(p);
    erg_plan_free(slow);
    erg_dag_free(d);
    erg_profile_free(prof);
}

TEST(emulate_ex_rejects_bad_options)
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
    erg_emulation em;
    erg_emulate_opts_init(&o);
    o.switch_latency_s = -1;
    ASSERT_EQ_INT(erg_emulate_ex(prof, d, p, &o, &em, NULL, NULL, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "switch latency -1");
    erg_emulate_opts_init(&o);
    o.transfer_time_s = NAN;
    ASSERT_EQ_INT(erg_emulate_ex(prof, d, p, &o, &em, NULL, NULL, &err), ERG_EINVAL);
    erg_emulate_opts_init(&o);
    o.transfer_bytes = 1e6;
    ASSERT_EQ_INT(erg_emulate_ex(prof, d, p, &o, &em, NULL, NULL, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "bandwidth");
    ASSERT_EQ_INT(erg_emulate_ex(prof, d, p, NULL, &em, NULL, NULL, &err), ERG_EINVAL);
    erg_plan_free(p);
    erg_dag_free(d);
    erg_profile_free(prof);
}

/* The planner with transfers as fixed-duration edges: on the S = 2, M = 2
 * profile with a unit that makes quantisation exact (0.25 s), no frontier
 * plan's time is below the emulator's with the same transfer, the fastest
 * is all-1000 MHz (9 + 2x by hand, above) and the slowest all-850 MHz (1.75 x
 * the durations: 15.75 + 2x; the first plan is one unit faster). */
TEST(planner_plans_transfer_as_fixed_edges)
{
    erg_error err;
    erg_profile *prof;
    ASSERT_OK(erg_profile_new(&prof, &err));
    /* four clocks (the planner's curve fit needs four): F 1..1.75 s, B 2..3.5 s */
    const double ef[] = {10, 9.4, 9.0, 8.8}, eb[] = {30, 28, 27, 26.5};
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 4; c++) {
            erg_profile_point f = {1000 - 50 * c, 1 + 0.25 * c, ef[c]};
            erg_profile_point b = {1000 - 50 * c, 2 + 0.5 * c, eb[c]};
            ASSERT_OK(erg_profile_add(prof, s, ERG_FORWARD, &f, &err));
            ASSERT_OK(erg_profile_add(prof, s, ERG_BACKWARD, &b, &err));
        }
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    ASSERT_OK(erg_dag_new(&sc, 2, 2, &d, &err));
    erg_perseus_opts po;
    erg_perseus_opts_init(&po);
    po.unit_s = 0.25;
    po.blocking_power_w = 1;
    po.transfer_time_s = 0.5;
    erg_frontier *f;
    ASSERT_OK(erg_plan_perseus(prof, 2, 2, &po, &f, &err));
    size_t n = erg_frontier_size(f);
    ASSERT(n >= 2);
    erg_emulate_opts o;
    erg_emulate_opts_init(&o);
    o.transfer_time_s = 0.5;
    o.blocking_power_w = 1;
    for (size_t i = 0; i < n; i++) {
        erg_frontier_point pt;
        erg_plan *p;
        ASSERT_OK(erg_frontier_get(f, i, &pt, &err));
        ASSERT_OK(erg_frontier_plan(f, i, &p, &err));
        erg_emulation em;
        ASSERT_OK(erg_emulate_ex(prof, d, p, &o, &em, NULL, NULL, &err));
        /* durations between two clocks' times run at the faster clock, so the
         * planner's time is an upper bound, exact at the ends */
        ASSERT(em.time_s <= pt.time_s + 1e-12);
        if (i == n - 1)
            ASSERT_NEAR(em.time_s, pt.time_s, 1e-12);
        erg_plan_free(p);
    }
    erg_frontier_point last;
    ASSERT_OK(erg_frontier_get(f, n - 1, &last, &err));
    ASSERT_NEAR(last.time_s, 9 + 2 * 0.5, 1e-12);
    /* the first plan is one crashing step from the all-900 state */
    erg_frontier_point first;
    ASSERT_OK(erg_frontier_get(f, 0, &first, &err));
    ASSERT_NEAR(first.time_s, 15.75 + 2 * 0.5 - 0.25, 1e-12);
    erg_frontier_free(f);
    po.transfer_time_s = 0; /* without: the fastest plan is 9 s */
    ASSERT_OK(erg_plan_perseus(prof, 2, 2, &po, &f, &err));
    ASSERT_OK(erg_frontier_get(f, erg_frontier_size(f) - 1, &last, &err));
    ASSERT_NEAR(last.time_s, 9, 1e-12);
    erg_frontier_free(f);
    po.transfer_time_s = -1;
    ASSERT_EQ_INT(erg_plan_perseus(prof, 2, 2, &po, &f, &err), ERG_EINVAL);
    erg_dag_free(d);
    erg_profile_free(prof);
}

/* Switch-aware planning (switch_aware.c): on a 2-stage, 8-microbatch profile whose forward pass
 * gains little from a fast clock and whose backward pass gains much, at L = 0.2 s every point
 * of the frontier is its plan's emulation at L (time and energy), the frontier is Pareto
 * (faster plans cost more), and the plan it picks for 1 % slowdown meets the deadline at L with
 * fewer switches than the latency-free frontier's pick, which runs late; for a deadline of the
 * all-max time itself it saves energy on time (the repair rounds) where the latency-free pick
 * runs late. */
TEST(switch_aware_frontier_is_honest_at_the_latency)
{
    erg_error err;
    erg_profile *prof;
    ASSERT_OK(erg_profile_new(&prof, &err));
    static const int F[] = {1400, 1300, 1200, 1100, 1000, 900, 800};
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 7; i++) {
                double base = k ? 2.0 : 1.0, cb = k ? 0.9 : 0.5, f = F[i];
                double t = base * (1 + 0.1 * s) * ((1 - cb) + cb * 1400 / f);
                double pw = 100 + 200 * pow(f / 1400, 2.5);
                erg_profile_point pt = {F[i], t, pw * t};
                ASSERT_OK(erg_profile_add(prof, s, k ? ERG_BACKWARD : ERG_FORWARD, &pt, &err));
            }
    erg_perseus_opts po;
    erg_perseus_opts_init(&po);
    po.unit_s = 0.01;
    po.blocking_power_w = 60;
    erg_frontier *f0, *fl;
    ASSERT_OK(erg_plan_perseus(prof, 2, 8, &po, &f0, &err));
    erg_emulate_opts eo;
    erg_emulate_opts_init(&eo);
    eo.blocking_power_w = 60;
    eo.switch_latency_s = 0.2;
    erg_switch_aware_stats st;
    ASSERT_OK(erg_frontier_switch_aware(prof, f0, &eo, po.unit_s, NULL, NULL, &fl, &st, &err));
    ASSERT(st.plans_out == erg_frontier_size(fl) && st.plans_out > 10);
    ASSERT(st.candidates > st.plans_evaluated && st.plans_evaluated == st.plans_in);
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    ASSERT_OK(erg_dag_new(&sc, 2, 8, &d, &err));
    erg_frontier_point prev = {0};
    for (size_t k = 0; k < erg_frontier_size(fl); k++) {
        erg_frontier_point pt;
        erg_plan *p;
        erg_emulation em;
        ASSERT_OK(erg_frontier_get(fl, k, &pt, &err));
        ASSERT_OK(erg_frontier_plan(fl, k, &p, &err));
        ASSERT_OK(erg_emulate_ex(prof, d, p, &eo, &em, NULL, NULL, &err));
        ASSERT_NEAR(pt.time_s, em.time_s, 1e-9 * em.time_s);
        ASSERT_NEAR(pt.energy_j, em.energy_j, 1e-9 * em.energy_j);
        if (k)
            ASSERT(pt.time_s < prev.time_s && pt.energy_j > prev.energy_j);
        prev = pt;
        erg_plan_free(p);
    }
    /* the 1 %-slowdown picks, both emulated at L */
    erg_plan *am;
    erg_emulation emax;
    ASSERT_OK(erg_plan_all_max(prof, 2, 8, &sc, 60, &am, &err));
    ASSERT_OK(erg_emulate_ex(prof, d, am, &eo, &emax, NULL, NULL, &err));
    double deadline = 1.01 * emax.time_s;
    erg_frontier_baseline b0, bl;
    erg_frontier_baseline_init(&b0);
    b0.have = true;
    b0.prof = prof;
    b0.dag = d;
    b0.power_w = 60;
    ASSERT_OK(erg_emulate(prof, d, am, 60, &b0.all_max, NULL, NULL, &err));
    bl = b0;
    bl.switch_latency_s = 0.2;
    bl.all_max = emax;
    size_t k0, kl;
    erg_emulation e0, el;
    ASSERT_OK(erg_frontier_baseline_pick(&b0, f0, deadline, &k0, &e0, &err));
    ASSERT_OK(erg_frontier_baseline_pick(&bl, fl, deadline, &kl, &el, &err));
    erg_plan *p0, *pl;
    ASSERT_OK(erg_frontier_plan(f0, k0, &p0, &err));
    ASSERT_OK(erg_frontier_plan(fl, kl, &pl, &err));
    ASSERT_OK(erg_emulate_ex(prof, d, p0, &eo, &e0, NULL, NULL, &err));
    ASSERT_OK(erg_emulate_ex(prof, d, pl, &eo, &el, NULL, NULL, &err));
    printf("# deadline %.4f s at L = 0.2 s: latency-free pick %.4f s, %d switches; "
           "switch-aware %.4f s, %d switches, %.1f J (all-max %.1f J)\n",
           deadline, e0.time_s, e0.num_switches, el.time_s, el.num_switches, el.energy_j,
           emax.energy_j);
    ASSERT(e0.time_s > deadline);
    ASSERT(el.time_s <= deadline * (1 + 1e-12));
    ASSERT(el.num_switches < e0.num_switches);
    ASSERT(el.energy_j < 0.97 * emax.energy_j);
    erg_plan_free(p0);
    erg_plan_free(pl);
    /* a deadline of the all-max time itself: the latency-free pick is late by up-switch
     * delays; the repair rounds give the switch-aware frontier a plan on time that saves */
    deadline = emax.time_s;
    ASSERT_OK(erg_frontier_baseline_pick(&b0, f0, deadline, &k0, &e0, &err));
    ASSERT_OK(erg_frontier_baseline_pick(&bl, fl, deadline, &kl, &el, &err));
    ASSERT_OK(erg_frontier_plan(f0, k0, &p0, &err));
    ASSERT_OK(erg_emulate_ex(prof, d, p0, &eo, &e0, NULL, NULL, &err));
    printf("# deadline %.4f s (all-max) at L = 0.2 s: latency-free pick %.4f s; switch-aware "
           "%.4f s, %.1f J\n",
           deadline, e0.time_s, el.time_s, el.energy_j);
    ASSERT(e0.time_s > deadline);
    ASSERT(el.time_s <= deadline * (1 + 1e-12));
    ASSERT(el.energy_j < 0.98 * emax.energy_j);
    erg_plan_free(p0);
    erg_plan_free(am);
    erg_dag_free(d);
    erg_frontier_free(fl);
    erg_frontier_free(f0);
    erg_profile_free(prof);
}

TAP_MAIN(TEST_ENTRY(planner_plans_transfer_as_fixed_edges),
         TEST_ENTRY(transfer_time_grows_1f1b_bubble_as_by_hand),
         TEST_ENTRY(transfer_time_matches_independent_relaxation),
         TEST_ENTRY(switch_latency_runs_at_old_clock_until_the_request_lands),
         TEST_ENTRY(emulate_ex_rejects_bad_options),
         TEST_ENTRY(switch_aware_frontier_is_honest_at_the_latency))
