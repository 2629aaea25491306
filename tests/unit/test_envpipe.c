/* test_envpipe.c: the EnvPipe planner: Perseus-emulation rows, the spec's worked examples, bad input. */
#include "core/internal.h"
#include "ergon/emulate.h"
#include "ergon/envpipe.h"
#include "tap.h"

#include <sys/stat.h>

static const char *shared(void)
{
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/perseus-sosp24", ERG_SHARED_DATA_DIR);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        SKIP("reference data not found at %s", dir);
    return dir;
}

/* All 16 rows of envpipe_result.csv: Perseus's emulation of EnvPipe at unit
 * 0.1 ms, evaluated with profiled values, time x10 and energy x80. */
TEST(perseus_emulation_reproduces_published_rows)
{
    const char *dir = shared();
    char path[1200];
    snprintf(path, sizeof path, "%s/envpipe_result.csv", dir);
    char *text;
    size_t len;
    erg_error e;
    ASSERT_MSG(erg__read_file(path, 1 << 20, &text, &len, &e) == ERG_OK, "%s", e.msg);
    erg__csv c;
    erg__csv_init(&c, text, len);
    ASSERT_EQ_INT(erg__csv_next(&c), 1);
    int rows = 0;
    while (erg__csv_next(&c) > 0) {
        ASSERT_EQ_INT(c.nfields, 7);
        const char *model = c.fields[0], *dev = c.fields[2];
        int M = atoi(c.fields[3]);
        char ppath[1200];
        snprintf(ppath, sizeof ppath, "%s/stage_profile/%s+%s_%s.csv", dir, model, dev,
                 c.fields[1]);
        erg_profile *p;
        ASSERT_MSG(erg_profile_read_csv(ppath, &p, &e) == ERG_OK, "%s", e.msg);
        double pw;
        ASSERT_MSG(erg_blocking_power_w(dev, &pw, &e) == ERG_OK, "%s", e.msg);
        erg_envpipe_opts o;
        erg_envpipe_opts_init(&o);
        o.variant = ERG_ENVPIPE_PERSEUS_EMULATION;
        o.schedule = ERG_SCHED_1F1B;
        o.unit_s = 0.0001;
        o.blocking_power_w = pw;
        erg_plan *plan;
        erg_envpipe_info info;
        ASSERT_MSG(erg_plan_envpipe(p, 8, M, &o, &plan, &info, &e) == ERG_OK, "%s", e.msg);
        /* cross-check with the library's emulator */
        erg_dag *dag;
        erg_schedule sc = erg_plan_schedule(plan);
        ASSERT_EQ_INT(erg_dag_new(&sc, 8, M, &dag, &e), ERG_OK);
        erg_emulation em;
        ASSERT_MSG(erg_emulate(p, dag, plan, pw, &em, NULL, NULL, &e) == ERG_OK, "%s", e.msg);
        char t[64], en[64];
        snprintf(t, sizeof t, "%.3f", em.time_s * 10);
        snprintf(en, sizeof en, "%.3f", em.energy_j * 80);
        ASSERT_MSG(!strcmp(t, c.fields[5]) && !strcmp(en, c.fields[6]),
                   "%s %s M=%d: got time %s energy %s, published %s %s (%d iterations)", model,
                   dev, M, t, en, c.fields[5], c.fields[6], info.iterations);
        double pt, pe;
        erg_plan_estimate(plan, &pt, &pe);
        ASSERT_NEAR(pt, em.time_s, 1e-12);
        ASSERT_NEAR(pe, em.energy_j, 1e-6);
        erg_dag_free(dag);
        erg_plan_free(plan);
        erg_profile_free(p);
        rows++;
    }
    ASSERT_EQ_INT(rows, 16);
    erg__csv_free(&c);
    erg__free(text);
}

TAP_MAIN(TEST_ENTRY(perseus_emulation_reproduces_published_rows))
