/* test_baselines.c: all-max, Zeus global/per-stage and uniform baselines on small profiles. */
#include "core/internal.h"
#include "ergon/emulate.h"
#include "ergon/baselines.h"
#include "tap.h"

/* Two stages, stage 1 twice as heavy. Clocks 1000/900/800: time grows as the
 * clock drops, energy has a valley at 900 for stage 0. */
static erg_profile *toy(void)
{
    const char *csv = "stage,instruction,frequency,time,energy\n"
                      "0,forward,1000,1.0,100\n0,backward,1000,2.0,200\n"
                      "0,forward,900,1.1,80\n0,backward,900,2.2,160\n"
                      "0,forward,800,1.3,85\n0,backward,800,2.6,170\n"
                      "1,forward,1000,2.0,200\n1,backward,1000,4.0,400\n"
                      "1,forward,900,2.2,170\n1,backward,900,4.4,340\n"
                      "1,forward,800,2.6,160\n1,backward,800,5.2,320\n";
    erg_profile *p;
    erg_error e;
    ASSERT_MSG(erg_profile_parse_csv(csv, strlen(csv), "toy.csv", &p, &e) == ERG_OK, "%s", e.msg);
    return p;
}

TEST(zeus_global_follows_eta)
{
    erg_profile *p = toy();
    erg_baseline_opts o;
    erg_baseline_opts_init(&o);
    o.blocking_power_w = 10;
    o.max_power_w = 100;
    erg_plan *plan;
    erg_error e;
    o.eta = 0; /* time only: the max clock */
    ASSERT_MSG(erg_plan_zeus_global(p, 2, 4, &o, &plan, &e) == ERG_OK, "%s", e.msg);
    ASSERT_EQ_INT(erg_plan_freq(plan, 0, ERG_FORWARD, 0), 1000);
    ASSERT_EQ_INT(erg_plan_freq(plan, 1, ERG_BACKWARD, 3), 1000);
    ASSERT_STR_EQ(erg_plan_method(plan), "zeus-global");
    erg_plan_free(plan);
    o.eta = 1; /* energy only */
    ASSERT_MSG(erg_plan_zeus_global(p, 2, 4, &o, &plan, &e) == ERG_OK, "%s", e.msg);
    int f = erg_plan_freq(plan, 0, ERG_FORWARD, 0);
    double t, en;
    erg_plan_estimate(plan, &t, &en);
    /* no other global clock has lower energy */
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_dag *dag;
    ASSERT_EQ_INT(erg_dag_new(&sc, 2, 4, &dag, &e), ERG_OK);
    for (int g = 800; g <= 1000; g += 100) {
        erg_plan *q;
        ASSERT_EQ_INT(erg_plan_new(&sc, 2, 4, &q, &e), ERG_OK);
        erg_plan_fill(q, g);
        erg_emulation em;
        ASSERT_EQ_INT(erg_emulate(p, dag, q, 10, &em, NULL, NULL, &e), ERG_OK);
        ASSERT(em.energy_j >= en - 1e-9);
        if (g == f)
            ASSERT_NEAR(em.energy_j, en, 1e-9);
        erg_plan_free(q);
    }
    erg_dag_free(dag);
    erg_plan_free(plan);
    o.eta = 2;
    ASSERT_EQ_INT(erg_plan_zeus_global(p, 2, 4, &o, &plan, &e), ERG_EINVAL);
    erg_profile_free(p);
}

TEST(zeus_stage_keeps_pace_with_heaviest)
{
    erg_profile *p = toy();
    erg_baseline_opts o;
    erg_baseline_opts_init(&o);
    o.blocking_power_w = 10;
    o.max_power_w = 100;
    o.eta = 0;
    erg_plan *plan, *mx;
    erg_error e;
    ASSERT_MSG(erg_plan_zeus_stage(p, 2, 4, &o, &plan, &e) == ERG_OK, "%s", e.msg);
    ASSERT_MSG(erg_plan_all_max(p, 2, 4, NULL, 10, &mx, &e) == ERG_OK, "%s", e.msg);
    /* the heavy stage at max; the light one at its lowest clock (1.3+2.6 < 6) */
    ASSERT_EQ_INT(erg_plan_freq(plan, 1, ERG_FORWARD, 0), 1000);
    ASSERT_EQ_INT(erg_plan_freq(plan, 0, ERG_FORWARD, 0), 800);
    double t1, e1, t2, e2;
    erg_plan_estimate(plan, &t1, &e1);
    erg_plan_estimate(mx, &t2, &e2);
    ASSERT(e1 < e2);
    ASSERT(t1 <= t2 * 1.10);
    erg_plan_free(plan);
    erg_plan_free(mx);
    erg_profile_free(p);
}

TEST(uniform_picks_the_valley)
{
    erg_profile *p = toy();
    erg_baseline_opts o;
    erg_baseline_opts_init(&o);
    o.blocking_power_w = 10;
    erg_plan *plan;
    erg_error e;
    ASSERT_MSG(erg_plan_uniform(p, 2, 4, &o, &plan, &e) == ERG_OK, "%s", e.msg);
    /* stage 0 at 900 (its compute energy is lowest there and it idles less
     * than at 800 relative to the pipeline), stage 1 at 800 or 900 */
    ASSERT_EQ_INT(erg_plan_freq(plan, 0, ERG_FORWARD, 1), 900);
    ASSERT_STR_EQ(erg_plan_method(plan), "uniform");
    erg_plan_free(plan);
    erg_profile_free(p);
}

TEST(no_common_clock_is_an_error)
{
    const char *csv = "stage,instruction,frequency,time,energy\n"
                      "0,forward,1000,1.0,100\n0,backward,1000,2.0,200\n"
                      "1,forward,900,2.0,200\n1,backward,900,4.0,400\n";
    erg_profile *p;
    erg_error e;
    ASSERT_EQ_INT(erg_profile_parse_csv(csv, strlen(csv), "t.csv", &p, &e), ERG_OK);
    erg_baseline_opts o;
    erg_baseline_opts_init(&o);
    o.blocking_power_w = 10;
    erg_plan *plan = NULL;
    ASSERT_EQ_INT(erg_plan_zeus_global(p, 2, 4, &o, &plan, &e), ERG_ENOTFOUND);
    ASSERT(strstr(e.msg, "every stage"));
    ASSERT_MSG(erg_plan_zeus_stage(p, 2, 4, &o, &plan, &e) == ERG_OK, "%s", e.msg);
    erg_plan_free(plan);
    ASSERT_EQ_INT(erg_plan_zeus_stage(p, 3, 4, &o, &plan, &e), ERG_EINVAL);
    erg_profile_free(p);
}

TEST(zeus_global_power_limit)
{
    erg_profile *p = toy();
    erg_baseline_opts o;
    erg_baseline_opts_init(&o);
    o.blocking_power_w = 10;
    o.max_power_w = 100;
    o.power_limit_step_w = 5;
    o.eta = 0; /* time only: the highest limit, i.e. max clocks */
    erg_plan *plan;
    erg_error e;
    ASSERT_MSG(erg_plan_zeus_global(p, 2, 4, &o, &plan, &e) == ERG_OK, "%s", e.msg);
    ASSERT_EQ_INT(erg_plan_freq(plan, 1, ERG_FORWARD, 0), 1000);
    ASSERT(strstr(erg_plan_method(plan), "power-limit"));
    erg_plan_free(plan);
    /* a limit of 75 W: stage 0 forward (100 W at 1000, 72.7 W at 900) runs at 900 */
    o.max_power_w = 75;
    o.power_limit_step_w = 75;
    ASSERT_MSG(erg_plan_zeus_global(p, 2, 4, &o, &plan, &e) == ERG_OK, "%s", e.msg);
    ASSERT_EQ_INT(erg_plan_freq(plan, 0, ERG_FORWARD, 0), 900);
    ASSERT_EQ_INT(erg_plan_freq(plan, 1, ERG_BACKWARD, 0), 800); /* 320/5.2 = 61.5 W */
    erg_plan_free(plan);
    o.power_limit_step_w = -1;
    ASSERT_EQ_INT(erg_plan_zeus_global(p, 2, 4, &o, &plan, &e), ERG_EINVAL);
    erg_profile_free(p);
}

TAP_MAIN(TEST_ENTRY(zeus_global_power_limit), TEST_ENTRY(zeus_global_follows_eta),
         TEST_ENTRY(zeus_stage_keeps_pace_with_heaviest), TEST_ENTRY(uniform_picks_the_valley),
         TEST_ENTRY(no_common_clock_is_an_error))
