/* test_server_sparse.c: the InstructionProfiler's sparse mode on a fake job: a sixth of the
 * sweep measured and the rest predicted, and the noise it estimates. */
#include "server_test_util.h"

/* InstructionProfiler {"sparse": true} (issue 12): every window runs, per
 * (stage, instruction), the clock the sparse profiler wants next; the job
 * ends after far fewer windows than the full sweep's 2 + clocks, measures at
 * most a sixth of the sweep's points, and its CSV has every clock of every
 * (stage, instruction) with a source column, predictions within 1 % in time
 * and 2 % in energy of the simulated GPU's truth. Samples that disagree
 * repeat a clock (confidence-interval rule). */
typedef struct sparse_job {
    srv_sched_ctx c;
    int n[4];
    int *ins[4];
    int ins0[6];
    int st[128];
} sparse_job;

static void sparse_job_init(sparse_job *f, const erg_profile *truth)
{
    memset(f, 0, sizeof *f);
    /* M = 2: F F p2p B B step */
    int ins[6] = {SRV_I_FORWARD,  SRV_I_FORWARD,  SRV_I_P2P,
                  SRV_I_BACKWARD, SRV_I_BACKWARD, SRV_I_STEP};
    memcpy(f->ins0, ins, sizeof ins);
    for (int s = 0; s < 4; s++) {
        f->n[s] = 6;
        f->ins[s] = f->ins0;
    }
    size_t np = erg_profile_num_points(truth, 0, ERG_FORWARD);
    const erg_profile_point *pts = erg_profile_points(truth, 0, ERG_FORWARD);
    for (size_t i = 0; i < np && i < 128; i++)
        f->st[f->c.n_states++] = pts[i].freq_mhz;
    /* descending, as the server keeps them */
    for (int i = 0; i < f->c.n_states; i++)
        for (int j = i + 1; j < f->c.n_states; j++)
            if (f->st[j] > f->st[i]) {
                int t = f->st[i];
                f->st[i] = f->st[j];
                f->st[j] = t;
            }
    f->c.num_stages = 4;
    f->c.n_instrs = f->n;
    f->c.instrs = f->ins;
    f->c.states = f->st;
    f->c.mode = SRV_MODE_FREQUENCY;
}

/* One window's results: 3 iterations; occurrence o of iteration i gets the
 * true value times (1 + noise * (+1/-1 alternating)). */
static void sparse_results(const erg_profile *truth, int **sched, double noise, bool energies,
                           srv_result *r)
{
    for (int s = 0; s < 4; s++) {
        json_t *it = json_array(), *ie = json_array(), *tb = json_object(), *eb = json_object();
        for (int k = 0; k < 2; k++) {
            json_t *ts = json_array(), *es = json_array();
            for (int i = 0; i < 3; i++) {
                json_t *ti = json_array(), *ei = json_array();
                int occ = 0;
                for (int x = 0; x < 6; x++) {
                    if (sched[s] == NULL ||
                        (k == 0 ? SRV_I_FORWARD : SRV_I_BACKWARD) !=
                            (int[]){SRV_I_FORWARD, SRV_I_FORWARD, SRV_I_P2P, SRV_I_BACKWARD,
                                    SRV_I_BACKWARD, SRV_I_STEP}[x])
                        continue;
                    erg_profile_point pt;
                    erg_error err;
                    ASSERT_OK(
                        erg_profile_lookup(truth, s, (erg_instr_kind)k, sched[s][x], &pt, &err));
                    double f = 1 + noise * ((occ++ + i) % 2 ? 1 : -1);
                    json_array_append_new(ti, json_real(pt.time_s * f));
                    json_array_append_new(ei, json_real(pt.energy_j * f));
                }
                json_array_append_new(ts, ti);
                json_array_append_new(es, ei);
            }
            json_object_set_new(tb, k ? "backward" : "forward", ts);
            json_object_set_new(eb, k ? "backward" : "forward", es);
        }
        for (int i = 0; i < 3; i++) {
            json_array_append_new(it, json_real(1.0));
            json_array_append_new(ie, json_real(300.0));
        }
        json_t *o =
            json_pack("{s:o,s:o,s:o}", "iter_time", it, "iter_energy", ie, "time_breakdown", tb);
        if (energies)
            json_object_set_new(o, "energy_breakdown", eb);
        else
            json_decref(eb);
        erg_error err;
        ASSERT_OK(erg__srv_result_from_json(o, &r[s], &err));
        json_decref(o);
    }
}

/* Run a sparse InstructionProfiler to the end; returns the windows run, or
 * -1 when a window's observe failed (err set). */
static int sparse_run(sparse_job *f, const erg_profile *truth, const char *args, double noise,
                      bool energies, erg_error *errp)
{
    srv_sched *s = NULL;
    erg_error err;
    json_t *a = json_loads(args, 0, NULL);
    ASSERT_OK(erg__srv_sched_new("InstructionProfiler", a, &f->c, &s, &err));
    json_decref(a);
    int w = 0;
    for (; w < 200; w++) {
        int **per = NULL;
        bool done = false;
        ASSERT_OK(erg__srv_sched_next(s, &per, &done, &err));
        if (done)
            break;
        srv_result r[4];
        sparse_results(truth, per, noise, energies, r);
        erg_status st = erg__srv_sched_observe(s, r, errp);
        for (int i = 0; i < 4; i++)
            erg__srv_result_free(&r[i]);
        if (st) {
            w = -1;
            break;
        }
    }
    erg__srv_sched_free(s);
    return w;
}

TEST(instruction_profiler_sparse_mode_measures_a_sixth_and_predicts_the_rest)
{
    erg_profile *truth = NULL;
    erg_error err;
    ASSERT_OK(erg_sim_profile("a100", "gpt3-2.7b", 4, 4, 0, &truth, &err));
    sparse_job f;
    sparse_job_init(&f, truth);
    ASSERT(f.c.n_states >= 24);
    char *d = (char *)mktmp();
    f.c.job_dir = d;
    f.c.profile_csv_name = (char *)"p.csv";
    int w = sparse_run(&f, truth, "{\"sparse\": true, \"minimum_power_state\": 0}", 0, true, &err);
    ASSERT(w > 0);
    /* the full sweep: 2 warm-up windows + one per clock */
    int full_windows = 2 + f.c.n_states;
    printf("# sparse: %d windows, full sweep %d (%d clocks)\n", w, full_windows, f.c.n_states);
    ASSERT(4 * w <= full_windows);
    char p[600], *text;
    size_t len;
    snprintf(p, sizeof p, "%s/InstructionProfiler-sparse.json", d);
    json_t *sum = load_json(p);
    ASSERT(json_is_true(json_object_get(sum, "done")));
    long measured = (long)json_integer_value(json_object_get(sum, "measured"));
    long fullpts = (long)json_integer_value(json_object_get(sum, "full_sweep"));
    ASSERT_EQ_INT(fullpts, 4 * 2 * f.c.n_states);
    ASSERT(6 * measured <= fullpts);
    ASSERT_EQ_INT(json_integer_value(json_object_get(sum, "repeated_measurements")), 0);
    json_decref(sum);
    snprintf(p, sizeof p, "%s/p.csv", d);
    ASSERT_OK(erg__read_file(p, 1 << 22, &text, &len, &err));
    ASSERT(!strncmp(text, "stage,instruction,frequency,time,energy,source\n", 47));
    erg_profile *pred = NULL;
    ASSERT_OK(erg_profile_parse_csv(text, len, p, &pred, &err));
    int n_meas = 0, rows = 0;
    for (const char *q = text; (q = strchr(q, '\n')); q++)
        rows += q[1] != '\0';
    for (const char *q = text; (q = strstr(q, ",measured\n")); q++)
        n_meas++;
    ASSERT_EQ_INT(rows, 4 * 2 * f.c.n_states); /* every clock (newlines after the header) */
    ASSERT_EQ_INT(n_meas, measured);
    double worst_t = 0, worst_e = 0;
    for (int s = 0; s < 4; s++)
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < f.c.n_states; i++) {
                erg_profile_point a, b;
                ASSERT_OK(erg_profile_lookup(truth, s, (erg_instr_kind)k, f.st[i], &a, &err));
                ASSERT_OK(erg_profile_lookup(pred, s, (erg_instr_kind)k, f.st[i], &b, &err));
                worst_t = fmax(worst_t, fabs(b.time_s / a.time_s - 1));
                worst_e = fmax(worst_e, fabs(b.energy_j / a.energy_j - 1));
            }
    printf("# worst prediction error: time %.3f %%, energy %.3f %%\n", 100 * worst_t,
           100 * worst_e);
    ASSERT(worst_t <= 0.01);
    ASSERT(worst_e <= 0.02);
    erg_profile_free(pred);
    erg__free(text);

    /* Noisy samples (+-3 %, 12 per window) miss the 1 % CI rule: clocks are
     * measured again, at most max_windows_per_clock windows each. */
    w = sparse_run(&f, truth,
                   "{\"sparse\": true, \"minimum_power_state\": 0, \"max_windows_per_clock\": 2}",
                   0.03, true, &err);
    ASSERT(w > 0);
    snprintf(p, sizeof p, "%s/InstructionProfiler-sparse.json", d);
    sum = load_json(p);
    ASSERT(json_integer_value(json_object_get(sum, "repeated_measurements")) > 0);
    ASSERT(json_integer_value(json_object_get(sum, "unconverged_clocks")) > 0);
    ASSERT_EQ_INT(json_integer_value(json_object_get(sum, "measure_windows")) + 1, w);
    json_decref(sum);

    /* No energies: a clear error, unless energy_from_iterations. */
    ASSERT_EQ_INT(sparse_run(&f, truth, "{\"sparse\": true}", 0, false, &err), -1);
    ASSERT_CONTAINS(err.msg, "energy_breakdown");
    ASSERT(sparse_run(&f, truth, "{\"sparse\": true, \"energy_from_iterations\": true}", 0, false,
                      &err) > 0);

    /* Refusals: sparse-only arguments without sparse, power mode, I/W. */
    srv_sched *s = NULL;
    json_t *a = json_pack("{s:i}", "budget", 10);
    ASSERT_EQ_INT(erg__srv_sched_new("InstructionProfiler", a, &f.c, &s, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "\"sparse\": true");
    json_decref(a);
    a = json_pack("{s:b}", "sparse", 1);
    f.c.mode = SRV_MODE_POWER;
    ASSERT_EQ_INT(erg__srv_sched_new("InstructionProfiler", a, &f.c, &s, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "frequency mode");
    f.c.mode = SRV_MODE_FREQUENCY;
    int zb[6] = {SRV_I_FORWARD,         SRV_I_FORWARD,  SRV_I_BACKWARD_INPUT,
                 SRV_I_BACKWARD_WEIGHT, SRV_I_BACKWARD, SRV_I_STEP};
    memcpy(f.ins0, zb, sizeof zb);
    ASSERT_EQ_INT(erg__srv_sched_new("InstructionProfiler", a, &f.c, &s, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "backward_input");
    json_decref(a);
    erg_profile_free(truth);
}

/* Issue 26: the sparse InstructionProfiler estimates the noise of one
 * measured point from the samples of the maximum clock (the relative
 * standard error of each curve's mean, median over the curves) and gives it
 * to the sparse profiler before any lower clock: samples alternating +-a
 * around the truth (a window keeps 4 per curve: +a -a -a +a) carry a
 * standard error of a * sqrt(4/3) / 2 per window, a * sqrt(8/7) / sqrt(8)
 * over the 2 windows a clock takes when the 1 % rule is missed. From 0.5 %
 * the noisy procedure (a quarter of the sweep); a time_noise argument
 * overrides the estimate. */
static json_t *sparse_noise_run(sparse_job *f, const erg_profile *truth, const char *d,
                                const char *args, double a)
{
    erg_error err;
    int w = sparse_run(f, truth, args, a, true, &err);
    ASSERT_MSG(w > 0, "%s: %s", args, err.msg);
    char p[600];
    snprintf(p, sizeof p, "%s/InstructionProfiler-sparse.json", d);
    json_t *sum = load_json(p);
    ASSERT(json_is_true(json_object_get(sum, "done")));
    json_t *est = json_object_get(sum, "time_noise_estimate");
    printf("# samples +-%.1f %%: %d windows, noise %.3f %% (%s; estimate %s%.3f %%), %lld of %lld "
           "points\n",
           100 * a, w, 100 * json_real_value(json_object_get(sum, "time_noise")),
           json_string_value(json_object_get(sum, "time_noise_source")),
           json_is_null(est) ? "none " : "", 100 * json_number_value(est),
           (long long)json_integer_value(json_object_get(sum, "measured")),
           (long long)json_integer_value(json_object_get(sum, "full_sweep")));
    return sum;
}

TEST(instruction_profiler_sparse_estimates_the_noise)
{
    erg_profile *truth = NULL;
    erg_error err;
    ASSERT_OK(erg_sim_profile("a100", "gpt3-2.7b", 4, 4, 0, &truth, &err));
    sparse_job f;
    sparse_job_init(&f, truth);
    char *d = (char *)mktmp();
    f.c.job_dir = d;
    f.c.profile_csv_name = (char *)"p.csv";
    const char *args = "{\"sparse\": true, \"minimum_power_state\": 0}";
    /* noise-free samples: estimate 0, the default level, the procedure for clean data */
    json_t *sum = sparse_noise_run(&f, truth, d, args, 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(sum, "time_noise_source")),
                  "estimated from the maximum clock's samples");
    ASSERT_EQ_INT(json_integer_value(json_object_get(sum, "time_noise_curves")), 8);
    ASSERT_NEAR(json_number_value(json_object_get(sum, "time_noise_estimate")), 0, 1e-12);
    ASSERT_NEAR(json_number_value(json_object_get(sum, "time_noise")), 0.002, 0);
    ASSERT(json_is_false(json_object_get(sum, "noisy_procedure")));
    ASSERT(6 * json_integer_value(json_object_get(sum, "measured")) <=
           json_integer_value(json_object_get(sum, "full_sweep")));
    json_decref(sum);
    /* +-1 %: met the rule in 2 windows; 0.38 %, below ERG_SPARSE_NOISY */
    sum = sparse_noise_run(&f, truth, d, args, 0.01);
    ASSERT_NEAR(json_number_value(json_object_get(sum, "time_noise_estimate")),
                0.01 * sqrt(8.0 / 7) / sqrt(8), 1e-9);
    ASSERT(json_is_false(json_object_get(sum, "noisy_procedure")));
    json_decref(sum);
    /* +-4 %: 1.5 % a point, the noisy procedure: a quarter of the sweep at most */
    sum = sparse_noise_run(&f, truth, d, args, 0.04);
    double est = json_number_value(json_object_get(sum, "time_noise_estimate"));
    ASSERT_NEAR(est, 0.04 * sqrt(8.0 / 7) / sqrt(8), 1e-9);
    ASSERT_NEAR(json_number_value(json_object_get(sum, "time_noise")), est, 1e-15);
    ASSERT(json_is_true(json_object_get(sum, "noisy_procedure")));
    long meas = (long)json_integer_value(json_object_get(sum, "measured"));
    long full = (long)json_integer_value(json_object_get(sum, "full_sweep"));
    ASSERT(4 * meas <= full && 6 * meas > full);
    json_decref(sum);
    /* declared: overrides the estimate */
    sum = sparse_noise_run(
        &f, truth, d, "{\"sparse\": true, \"minimum_power_state\": 0, \"time_noise\": 0.01}", 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(sum, "time_noise_source")), "scheduler_args");
    ASSERT_NEAR(json_number_value(json_object_get(sum, "time_noise")), 0.01, 0);
    ASSERT(json_is_null(json_object_get(sum, "time_noise_estimate")));
    ASSERT(json_is_true(json_object_get(sum, "noisy_procedure")));
    json_decref(sum);
    /* bad values are named */
    srv_sched *s = NULL;
    json_t *a = json_pack("{s:b,s:f}", "sparse", 1, "time_noise", 2.5);
    ASSERT_EQ_INT(erg__srv_sched_new("InstructionProfiler", a, &f.c, &s, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "time_noise must be in [0, 1]");
    ASSERT_CONTAINS(err.msg, "2.5");
    json_decref(a);
    a = json_pack("{s:b,s:s}", "sparse", 1, "time_noise", "auto");
    ASSERT_EQ_INT(erg__srv_sched_new("InstructionProfiler", a, &f.c, &s, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "time_noise");
    json_decref(a);
    a = json_pack("{s:f}", "time_noise", 0.01);
    ASSERT_EQ_INT(erg__srv_sched_new("InstructionProfiler", a, &f.c, &s, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "\"sparse\": true");
    json_decref(a);
    erg_profile_free(truth);
}

TAP_MAIN(TEST_ENTRY(instruction_profiler_sparse_mode_measures_a_sixth_and_predicts_the_rest),
         TEST_ENTRY(instruction_profiler_sparse_estimates_the_noise))
