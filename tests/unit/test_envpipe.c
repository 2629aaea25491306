/* test_envpipe.c: the EnvPipe planner: Perseus-emulation rows, the spec's worked examples, bad
 * input. */
#include "core/internal.h"
#include "ergon/emulate.h"
#include "ergon/envpipe.h"
#include "tap.h"

static const char *shared(void)
{
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/published/perseus-sosp24", ERG_TEST_DATA_DIR);
    tap_need_data(dir);
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
                   "%s %s M=%d: got time %s energy %s, published %s %s (%d iterations)", model, dev,
                   M, t, en, c.fields[5], c.fields[6], info.iterations);
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

/* The README plan of EnvPipe (RTX3090, S = M = 4, r = [0,1,2,0]): clocks and
 * measured receive waits (ms) per stage in execution order. */
static const int readme_mhz[4][8] = {
    {1980, 1260, 1260, 1260, 1260, 1260, 1260, 1980},
    {1980, 1260, 1260, 1260, 1260, 1260, 1260, 1980},
    {1980, 1260, 1260, 1260, 1260, 1260, 1260, 1980},
    {1980, 1980, 1980, 1980, 1980, 1980, 1980, 1980},
};
static const double readme_wait_ms[4][8] = {
    {0.0, 0.0, 0.0, 0.0, 185.8, 62.7, 61.8, 40.3},
    {23.4, 8.4, 2.1, 1.3, 109.1, 63.0, 62.2, 50.9},
    {41.4, 12.8, 2.1, 1.4, 32.8, 62.7, 62.3, 61.1},
    {59.5, 0.0, 0.6, 0.0, 0.6, 0.0, 0.6, 0.0},
};

static erg_plan *readme_plan(double *wait_s)
{
    erg_schedule sc = {.kind = ERG_SCHED_ENVPIPE, .extra_warmup = {0, 1, 2, 0}};
    erg_plan *p;
    erg_error e;
    ASSERT_MSG(erg_plan_new(&sc, 4, 4, &p, &e) == ERG_OK, "%s", e.msg);
    for (int s = 0; s < 4; s++) {
        int *f = erg_plan_stage_freqs(p, s);
        for (int k = 0; k < 8; k++) {
            f[k] = readme_mhz[s][k];
            wait_s[s * 8 + k] = readme_wait_ms[s][k] / 1e3;
        }
    }
    return p;
}

static void path_str(const erg_plan *p, const int *path, int len, char *buf, size_t size)
{
    size_t l = 0;
    buf[0] = '\0';
    erg_schedule sc = erg_plan_schedule(p);
    for (int i = 0; i < len && l + 16 < size; i++) {
        int s = path[i] / 8, k = path[i] % 8;
        erg_instr o[8];
        erg_schedule_stage_order(&sc, 4, 4, s, o, NULL);
        l += (size_t)snprintf(buf + l, size - l, "%sS%d%c%d", i ? " " : "", s,
                              o[k].kind == ERG_FORWARD ? 'F' : 'B', o[k].microbatch);
    }
}

static int max_rtx[4] = {1980, 1980, 1980, 1980};

TEST(readme_plan_path_is_the_envelope)
{
    double w[32];
    erg_plan *p = readme_plan(w);
    int path[32], len;
    bool changed;
    erg_error e;
    ASSERT_MSG(erg_envpipe_reconfigure_step(p, w, 0, 4, ERG_RECONFIG_BALANCED, 30, max_rtx, path,
                                            &len, &changed, &e) == ERG_OK,
               "%s", e.msg);
    char b[512];
    path_str(p, path, len, b, sizeof b);
    ASSERT_STR_EQ(b, "S0B3 S1B3 S2B3 S3B3 S3F3 S3B2 S3F2 S3B1 S3F1 S3B0 S3F0 S2F0 S1F0 S0F0");
    ASSERT(!changed);
    /* the printed plan matches the README's brackets */
    char *grid;
    ASSERT_EQ_INT(erg_envpipe_format_grid(p, w, path, len, &grid, &e), ERG_OK);
    ASSERT(strstr(grid, "Stage 0 | [F0 1980 0.0]  F1 1260 0.0   F2 1260 0.0 "));
    ASSERT(strstr(grid, "B2 1260 61.8  [B3 1980 40.3]\n"));
    ASSERT(strstr(grid, "Stage 3 | [F0 1980 59.5] [B0 1980 0.0] [F1 1980 0.6]"));
    erg_free(grid);
    erg_plan_free(p);
}

/* EnvPipe's README plan, stage 1's B1..B3 waits set to 1.0 ms (docs/envpipe.md, --from-plan). */
TEST(modified_readme_plan_balanced_and_greedy)
{
    for (int pol = 0; pol < 2; pol++) {
        double w[32];
        erg_plan *p = readme_plan(w);
        w[1 * 8 + 5] = w[1 * 8 + 6] = w[1 * 8 + 7] = 1.0e-3;
        int path[32], len;
        bool changed;
        erg_error e;
        erg_envpipe_reconfig r = pol ? ERG_RECONFIG_GREEDY : ERG_RECONFIG_BALANCED;
        ASSERT_MSG(erg_envpipe_reconfigure_step(p, w, 0, 4, r, pol ? 90 : 30, max_rtx, path, &len,
                                                &changed, &e) == ERG_OK,
                   "%s", e.msg);
        char b[512];
        path_str(p, path, len, b, sizeof b);
        ASSERT_STR_EQ(b, "S0B3 S1B3 S1B2 S1B1 S1B0 S2B0 S3B0 S3F0 S2F0 S1F0 S0F0");
        ASSERT(changed);
        for (int s = 0; s < 4; s++)
            for (int k = 0; k < 8; k++) {
                int want = readme_mhz[s][k];
                if (!pol && ((s == 1 && k >= 4 && k <= 6) || (s == 2 && k == 4)))
                    want = 1290; /* S1 B0, B1, B2 and S2 B0 */
                if (pol && s == 1 && k == 6)
                    want = 1350; /* S1 B2 */
                ASSERT_MSG(erg_plan_stage_freqs_const(p, s)[k] == want,
                           "%s: stage %d position %d: %d MHz, want %d", pol ? "greedy" : "balanced",
                           s, k, erg_plan_stage_freqs_const(p, s)[k], want);
            }
        erg_plan_free(p);
    }
}

static erg_profile *load_profile(const char *name)
{
    const char *dir = shared();
    char path[1200];
    snprintf(path, sizeof path, "%s/stage_profile/%s", dir, name);
    erg_profile *p;
    erg_error e;
    ASSERT_MSG(erg_profile_read_csv(path, &p, &e) == ERG_OK, "%s", e.msg);
    return p;
}

static erg_gpu_spec a100 = {"a100", 1410, 750, 90, 30, 400};

static int count_iters(void *user, int it, const erg_plan *plan, const char *grid)
{
    (void)plan;
    int *n = user;
    *n = it;
    ASSERT(strncmp(grid, "Stage 0 | [F0 ", 14) == 0);
    return 0;
}

/* Full EnvPipe on a real profile: never slower than all-max by more than a
 * clock step's worth, saves energy, terminates, ours has r_s >= 0. */
TEST(real_envpipe_on_a100_profile)
{
    erg_profile *p = load_profile("gpt3-175b+a100_sxm_bf16.csv");
    erg_plan *base, *uni, *full, *greedy;
    erg_error e;
    erg_envpipe_opts o;
    erg_envpipe_opts_init(&o);
    o.blocking_power_w = 83.64;
    o.gpu = &a100;
    o.type = ERG_ENVPIPE_BASELINE;
    o.reconfig = ERG_RECONFIG_DEFAULT;
    o.schedule = ERG_SCHED_1F1B;
    ASSERT_MSG(erg_plan_envpipe(p, 8, 24, &o, &base, NULL, &e) == ERG_OK, "%s", e.msg);
    ASSERT_EQ_INT(erg_plan_stage_freqs_const(base, 3)[5], 1350); /* A100's EnvPipe max */
    o.type = ERG_ENVPIPE_UNIFORM;
    erg_envpipe_info ui;
    ASSERT_MSG(erg_plan_envpipe(p, 8, 24, &o, &uni, &ui, &e) == ERG_OK, "%s", e.msg);
    o.type = ERG_ENVPIPE_ENVELOPE;
    o.schedule = ERG_SCHED_ENVPIPE;
    o.reconfig = ERG_RECONFIG_BALANCED;
    int iters = 0;
    o.on_iteration = count_iters;
    o.user = &iters;
    erg_envpipe_info info;
    ASSERT_MSG(erg_plan_envpipe(p, 8, 24, &o, &full, &info, &e) == ERG_OK, "%s", e.msg);
    ASSERT_EQ_INT(iters, info.iterations);
    ASSERT(info.iterations >= 11);
    o.reconfig = ERG_RECONFIG_GREEDY;
    o.on_iteration = NULL;
    ASSERT_MSG(erg_plan_envpipe(p, 8, 24, &o, &greedy, NULL, &e) == ERG_OK, "%s", e.msg);
    double tb, eb, tu, eu, tf, ef, tg, eg;
    erg_plan_estimate(base, &tb, &eb);
    erg_plan_estimate(uni, &tu, &eu);
    erg_plan_estimate(full, &tf, &ef);
    erg_plan_estimate(greedy, &tg, &eg);
    for (int s = 0; s < 7; s++) {
        ASSERT(info.extra_warmup[s] >= info.extra_warmup[s + 1] ||
               info.extra_warmup[s] + 8 - s == 24);
        ASSERT(info.optimal_mhz[s] < 1350 && info.optimal_mhz[s] % 90 == 0);
    }
    ASSERT_EQ_INT(info.extra_warmup[7], 0);
    ASSERT(info.extra_warmup[0] > 0);
    /* uniform slows the pipeline; EnvPipe keeps the all-max time (within the
     * last stage's share) and saves energy */
    ASSERT(tu > tb * 1.01);
    ASSERT_MSG(tf <= tb * 1.005, "envpipe %g s vs all-max %g s", tf, tb);
    ASSERT_MSG(ef < eb, "envpipe %g J vs all-max %g J", ef, eb);
    ASSERT_MSG(tg <= tb * 1.005 && eg < eb, "greedy %g s %g J vs %g s %g J", tg, eg, tb, eb);
    erg_plan_free(base);
    erg_plan_free(uni);
    erg_plan_free(full);
    erg_plan_free(greedy);
    erg_profile_free(p);
}

TEST(bad_input_gets_a_clear_error)
{
    erg_profile *p;
    erg_error e;
    const char *csv = "stage,instruction,frequency,time,energy\n"
                      "0,forward,1410,0.1,30\n0,backward,1410,0.2,60\n"
                      "0,forward,1395,0.11,29\n0,backward,1395,0.21,58\n"
                      "0,forward,1365,0.12,28\n0,backward,1365,0.22,57\n"
                      "1,forward,1410,0.1,30\n1,backward,1410,0.2,60\n"
                      "1,forward,1395,0.11,29\n1,backward,1395,0.21,58\n"
                      "1,forward,1365,0.12,28\n1,backward,1365,0.22,57\n";
    ASSERT_EQ_INT(erg_profile_parse_csv(csv, strlen(csv), "t.csv", &p, &e), ERG_OK);
    erg_envpipe_opts o;
    erg_envpipe_opts_init(&o);
    o.blocking_power_w = 80;
    erg_plan *plan = NULL;
    /* M < S with ours */
    ASSERT_EQ_INT(erg_plan_envpipe(p, 2, 1, &o, &plan, NULL, &e), ERG_EINVAL);
    ASSERT(strstr(e.msg, "M=1 < S=2"));
    /* more stages than the profile has */
    ASSERT_EQ_INT(erg_plan_envpipe(p, 3, 4, &o, &plan, NULL, &e), ERG_EINVAL);
    /* the Perseus emulation's +15 MHz lands on 1380, which is missing */
    o.variant = ERG_ENVPIPE_PERSEUS_EMULATION;
    o.schedule = ERG_SCHED_1F1B;
    ASSERT_EQ_INT(erg_plan_envpipe(p, 2, 4, &o, &plan, NULL, &e), ERG_ENOTFOUND);
    ASSERT_MSG(strstr(e.msg, "1380 MHz"), "%s", e.msg);
    ASSERT(plan == NULL);
    /* a GPU filter no clock passes */
    o.variant = ERG_ENVPIPE_REAL;
    erg_gpu_spec g = {"x", 1000, 900, 90, 30, 300};
    o.gpu = &g;
    ASSERT_EQ_INT(erg_plan_envpipe(p, 2, 4, &o, &plan, NULL, &e), ERG_ENOTFOUND);
    ASSERT(strstr(e.msg, "no profiled clock"));
    o.gpu = NULL;
    o.blocking_power_w = -1;
    ASSERT_EQ_INT(erg_plan_envpipe(p, 2, 4, &o, &plan, NULL, &e), ERG_EINVAL);
    /* the real variant on this tiny profile works and terminates */
    o.blocking_power_w = 80;
    erg_envpipe_info info;
    ASSERT_MSG(erg_plan_envpipe(p, 2, 4, &o, &plan, &info, &e) == ERG_OK, "%s", e.msg);
    ASSERT(info.iterations <= 11 + 2 * 2 * 4 * 3);
    erg_plan_free(plan);
    erg_profile_free(p);
}

/* Issue 15 item 14: a huge time over a tiny unit overflowed the float->long
 * conversion of the quantised time (undefined behaviour); now an error
 * naming the point. */
TEST(perseus_emulation_refuses_times_past_the_unit_count)
{
    erg_profile *p;
    erg_error e;
    const char *csv = "stage,instruction,frequency,time,energy\n"
                      "0,forward,1410,80000,1\n0,backward,1410,0.2,60\n"
                      "0,forward,1395,0.11,29\n0,backward,1395,0.21,58\n"
                      "0,forward,1425,0.1,30\n0,backward,1425,0.2,60\n"
                      "1,forward,1410,0.1,30\n1,backward,1410,0.2,60\n"
                      "1,forward,1395,0.11,29\n1,backward,1395,0.21,58\n"
                      "1,forward,1425,0.1,30\n1,backward,1425,0.2,60\n";
    ASSERT_EQ_INT(erg_profile_parse_csv(csv, strlen(csv), "t.csv", &p, &e), ERG_OK);
    erg_envpipe_opts o;
    erg_envpipe_opts_init(&o);
    o.blocking_power_w = 80;
    o.variant = ERG_ENVPIPE_PERSEUS_EMULATION;
    o.schedule = ERG_SCHED_1F1B;
    o.unit_s = 1e-15;
    erg_plan *plan = NULL;
    ASSERT_EQ_INT(erg_plan_envpipe(p, 2, 4, &o, &plan, NULL, &e), ERG_EINVAL);
    ASSERT_MSG(strstr(e.msg, "stage 0 forward at 1410 MHz: time 80000 s is 8e+19 units of "
                             "1e-15 s, more than the planner can count"),
               "%s", e.msg);
    ASSERT(plan == NULL);
    erg_profile_free(p);
}

TEST(gpu_table)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/data/gpus.csv", ERG_SOURCE_DIR);
    erg_gpu_spec *t;
    size_t n;
    erg_error e;
    ASSERT_MSG(erg_gpu_table_read(path, &t, &n, &e) == ERG_OK, "%s", e.msg);
    ASSERT_EQ_INT(n, 6);
    const erg_gpu_spec *g;
    ASSERT_EQ_INT(erg_gpu_table_find(t, n, "A100-SXM", &g, &e), ERG_OK);
    ASSERT_STR_EQ(g->name, "a100");
    ASSERT_EQ_INT(g->filter_max_mhz, 1410);
    ASSERT_EQ_INT(erg_gpu_table_find(t, n, "rtx3090", &g, &e), ERG_OK);
    ASSERT_EQ_INT(g->filter_min_mhz, 1100);
    ASSERT_EQ_INT(erg_gpu_table_find(t, n, "tpu", &g, &e), ERG_ENOTFOUND);
    ASSERT(strstr(e.msg, "v100"));
    erg_free(t);
    const char *bad = "gpu,filter_max_mhz,filter_min_mhz,profile_step_mhz,reconfig_step_mhz,"
                      "max_power_w\nx,900,1000,90,30,300\n";
    ASSERT_EQ_INT(erg_gpu_table_parse(bad, strlen(bad), "g.csv", &t, &n, &e), ERG_EPARSE);
    ASSERT(strstr(e.msg, "g.csv:2:"));
    const char *bad2 = "gpu,filter_max_mhz\nx,1\n";
    ASSERT_EQ_INT(erg_gpu_table_parse(bad2, strlen(bad2), "g.csv", &t, &n, &e), ERG_EPARSE);
}

/* The measured-wait rule offline: waits = emulated bubbles + a transfer
 * time; it terminates and ends no slower than the unreconfigured plan. */
TEST(measured_wait_rule_offline)
{
    erg_profile *p = load_profile("gpt3-175b+a40_bf16.csv");
    erg_gpu_spec a40 = {"a40", 1740, 855, 90, 30, 300};
    erg_envpipe_opts o;
    erg_envpipe_opts_init(&o);
    o.blocking_power_w = 70.38;
    o.gpu = &a40;
    o.reconfig = ERG_RECONFIG_DEFAULT;
    erg_plan *p0, *p1;
    erg_error e;
    ASSERT_MSG(erg_plan_envpipe(p, 8, 12, &o, &p0, NULL, &e) == ERG_OK, "%s", e.msg);
    o.reconfig = ERG_RECONFIG_BALANCED;
    o.threshold_scale = 4;
    o.transfer_s = 0.001;
    erg_envpipe_info info;
    ASSERT_MSG(erg_plan_envpipe(p, 8, 12, &o, &p1, &info, &e) == ERG_OK, "%s", e.msg);
    double t0, e0, t1, e1;
    erg_plan_estimate(p0, &t0, &e0);
    erg_plan_estimate(p1, &t1, &e1);
    ASSERT_MSG(t1 < t0, "reconfigured %g s, not reconfigured %g s", t1, t0);
    ASSERT(info.iterations >= 11 && info.iterations < 10000);
    o.transfer_s = -1;
    erg_plan *p2 = NULL;
    ASSERT_EQ_INT(erg_plan_envpipe(p, 8, 12, &o, &p2, NULL, &e), ERG_EINVAL);
    erg_plan_free(p0);
    erg_plan_free(p1);
    erg_profile_free(p);
}

typedef struct term_log {
    int n;
    int changed[4096];
    int prev[1024];
    int size;
} term_log;

static int log_changes(void *user, int it, const erg_plan *plan, const char *grid)
{
    (void)grid;
    term_log *l = user;
    int S = erg_plan_num_stages(plan), M = erg_plan_num_microbatches(plan), k = 0, ch = 0;
    for (int s = 0; s < S; s++)
        for (int i = 0; i < 2 * M; i++, k++) {
            int f = erg_plan_stage_freqs_const(plan, s)[i];
            if (l->size && l->prev[k] != f)
                ch = 1;
            l->prev[k] = f;
        }
    l->size = k;
    ASSERT_EQ_INT(it, l->n + 1);
    l->changed[l->n++] = ch;
    return 0;
}

/* Termination (docs/envpipe.md, step 5): reconfiguration ends after 11 consecutive iterations
 * without change, and a raise resets the count. */
TEST(terminates_after_eleven_quiet_iterations)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/envpipe_toy.csv", ERG_TEST_DATA_DIR);
    erg_profile *p;
    erg_error e;
    ASSERT_MSG(erg_profile_read_csv(path, &p, &e) == ERG_OK, "%s", e.msg);
    for (int pol = 0; pol < 2; pol++) {
        erg_envpipe_opts o;
        erg_envpipe_opts_init(&o);
        o.blocking_power_w = 60;
        o.reconfig = pol ? ERG_RECONFIG_GREEDY : ERG_RECONFIG_BALANCED;
        term_log *l = calloc(1, sizeof *l);
        o.on_iteration = log_changes;
        o.user = l;
        erg_plan *plan;
        erg_envpipe_info info;
        ASSERT_MSG(erg_plan_envpipe(p, 4, 8, &o, &plan, &info, &e) == ERG_OK, "%s", e.msg);
        ASSERT_EQ_INT(info.iterations, l->n);
        ASSERT(l->n >= 11);
        /* the first iteration compares with the initial plan, which the log
         * does not see: count from the second */
        int quiet = 0;
        for (int i = 1; i < l->n; i++) {
            quiet = l->changed[i] ? 0 : quiet + 1;
            if (i < l->n - 1)
                ASSERT_MSG(quiet < 11, "still going after %d quiet iterations", quiet);
        }
        ASSERT_EQ_INT(quiet, l->n >= 12 ? 11 : l->n - 1);
        /* a smaller finish limit stops sooner */
        o.finish_limit = 2;
        o.on_iteration = NULL;
        erg_plan *p2;
        erg_envpipe_info i2;
        ASSERT_EQ_INT(erg_plan_envpipe(p, 4, 8, &o, &p2, &i2, &e), ERG_OK);
        ASSERT_EQ_INT(i2.iterations, info.iterations - 8);
        erg_plan_free(p2);
        erg_plan_free(plan);
        free(l);
    }
    erg_profile_free(p);
}

/* EnvPipe's toy timing model (docs/envpipe.md, "The ours schedule"): S = 4, M = 8, F = 10, B = 20
 * on every stage at max, 30 % slower at the low clock, no communication cost. */
static double toy_time(erg_schedule_kind kind, const int *r, int mode)
{
    const char *csv = "stage,instruction,frequency,time,energy\n"
                      "0,forward,2,10,1\n0,backward,2,20,1\n0,forward,1,13,1\n0,backward,1,26,1\n"
                      "1,forward,2,10,1\n1,backward,2,20,1\n1,forward,1,13,1\n1,backward,1,26,1\n"
                      "2,forward,2,10,1\n2,backward,2,20,1\n2,forward,1,13,1\n2,backward,1,26,1\n"
                      "3,forward,2,10,1\n3,backward,2,20,1\n3,forward,1,13,1\n3,backward,1,26,1\n";
    erg_profile *p;
    erg_error e;
    ASSERT_EQ_INT(erg_profile_parse_csv(csv, strlen(csv), "toy", &p, &e), ERG_OK);
    erg_schedule sc = {.kind = kind};
    for (int s = 0; s < 4; s++)
        sc.extra_warmup[s] = r[s];
    erg_dag *dag;
    erg_plan *plan;
    ASSERT_MSG(erg_dag_new(&sc, 4, 8, &dag, &e) == ERG_OK, "%s", e.msg);
    ASSERT_EQ_INT(erg_plan_new(&sc, 4, 8, &plan, &e), ERG_OK);
    for (int id = 0; id < 64; id++) {
        int s;
        erg_instr in = erg_dag_instr(dag, id, &s);
        bool env = s == 3 || (in.kind == ERG_FORWARD && in.microbatch == 0) ||
                   (in.kind == ERG_BACKWARD && in.microbatch == 7);
        /* mode 0: all max; 1: envelope clocks; 2: everything slow */
        erg_plan_stage_freqs(plan, s)[id % 16] = mode == 0 ? 2 : mode == 2 ? 1 : env ? 2 : 1;
    }
    erg_emulation em;
    ASSERT_EQ_INT(erg_emulate(p, dag, plan, 0, &em, NULL, NULL, &e), ERG_OK);
    erg_plan_free(plan);
    erg_dag_free(dag);
    erg_profile_free(p);
    return em.time_s;
}

TEST(spec_toy_timing_model)
{
    int zero[4] = {0, 0, 0, 0}, r[4] = {4, 3, 1, 0};
    ASSERT_NEAR(toy_time(ERG_SCHED_1F1B, zero, 0), 330, 1e-9);
    ASSERT_NEAR(toy_time(ERG_SCHED_ENVPIPE, r, 0), 330, 1e-9);
    ASSERT_NEAR(toy_time(ERG_SCHED_1F1B, zero, 1), 392, 1e-9);
    ASSERT_NEAR(toy_time(ERG_SCHED_ENVPIPE, r, 1), 381, 1e-9);
    ASSERT_NEAR(toy_time(ERG_SCHED_1F1B, zero, 2), 429, 1e-9);
}

TEST(waits_parser)
{
    double w[32];
    erg_plan *p = readme_plan(w);
    char path[1200];
    snprintf(path, sizeof path, "%s/envpipe_readme_waits.csv", ERG_TEST_DATA_DIR);
    double got[32];
    erg_error e;
    ASSERT_MSG(erg_envpipe_waits_read(path, p, got, &e) == ERG_OK, "%s", e.msg);
    for (int i = 0; i < 32; i++)
        ASSERT_NEAR(got[i], w[i], 1e-12);
    const char *dup = "stage,instruction,microbatch,wait_ms\n0,F,0,1\n0,forward,0,2\n";
    ASSERT_EQ_INT(erg_envpipe_waits_parse(dup, strlen(dup), "w.csv", p, got, &e), ERG_EPARSE);
    ASSERT_MSG(strstr(e.msg, "w.csv:3:") && strstr(e.msg, "twice"), "%s", e.msg);
    const char *neg = "stage,instruction,microbatch,wait_ms\n0,F,0,-1\n";
    ASSERT_EQ_INT(erg_envpipe_waits_parse(neg, strlen(neg), "w.csv", p, got, &e), ERG_EPARSE);
    ASSERT(strstr(e.msg, "'-1'"));
    const char *range = "stage,instruction,microbatch,wait_ms\n4,F,0,1\n";
    ASSERT_EQ_INT(erg_envpipe_waits_parse(range, strlen(range), "w.csv", p, got, &e), ERG_EPARSE);
    const char *kind = "stage,instruction,microbatch,wait_ms\n0,X,0,1\n";
    ASSERT_EQ_INT(erg_envpipe_waits_parse(kind, strlen(kind), "w.csv", p, got, &e), ERG_EPARSE);
    const char *hdr = "stage,kind,microbatch,wait_ms\n";
    ASSERT_EQ_INT(erg_envpipe_waits_parse(hdr, strlen(hdr), "w.csv", p, got, &e), ERG_EPARSE);
    ASSERT(strstr(e.msg, "instruction"));
    erg_plan_free(p);
}

TAP_MAIN(TEST_ENTRY(perseus_emulation_refuses_times_past_the_unit_count), TEST_ENTRY(waits_parser),
         TEST_ENTRY(spec_toy_timing_model), TEST_ENTRY(terminates_after_eleven_quiet_iterations),
         TEST_ENTRY(measured_wait_rule_offline),
         TEST_ENTRY(perseus_emulation_reproduces_published_rows),
         TEST_ENTRY(readme_plan_path_is_the_envelope),
         TEST_ENTRY(modified_readme_plan_balanced_and_greedy),
         TEST_ENTRY(real_envpipe_on_a100_profile), TEST_ENTRY(bad_input_gets_a_clear_error),
         TEST_ENTRY(gpu_table))
