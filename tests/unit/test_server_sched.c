/* test_server_sched.c: the server's schedulers without a server: the pieces (spec expansion,
 * client plans, plan files, the Python JSON output), the Zeus and Perseus schedulers on a fake
 * job, ZeusLocalPowerState against the reference window by window, zero-bubble instruction
 * names through the /v1 schedulers, TwoFrequencies. */
#include "server_test_util.h"

TEST(expand_follows_spec)
{
    /* load F p2p F B p2p B step; plan F=1,2 B=3,4 in execution order. */
    int instrs[] = {SRV_I_LOAD,     SRV_I_FORWARD, SRV_I_P2P,      SRV_I_FORWARD,
                    SRV_I_BACKWARD, SRV_I_P2P,     SRV_I_BACKWARD, SRV_I_STEP};
    int plan[] = {1000, 1100, 1200, 1300}, out[8];
    erg_error err;
    ASSERT_OK(erg__srv_expand(plan, 4, instrs, 8, out, &err));
    int want[] = {1000, 1000, 1000, 1100, 1200, 1200, 1300, 1300};
    for (int i = 0; i < 8; i++)
        ASSERT_EQ_INT(out[i], want[i]);
    ASSERT_EQ_INT(erg__srv_expand(plan, 3, instrs, 8, out, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "3 clocks");
}

TEST(schedule_to_client_plan)
{
    const char *ps[64];
    int n = pipe_schedule(4, 3, 1, ps), states[64];
    for (int i = 0; i < n; i++)
        states[i] = 1000 + i; /* distinct, so the order shows */
    erg_plan *p = NULL;
    erg_error err;
    ASSERT_OK(erg_srv_schedule_to_plan(ps, states, (size_t)n, 4, 3, 1, NULL, &p, &err));
    const int *f = erg_plan_stage_freqs_const(p, 1);
    for (int i = 0, k = 0; i < n; i++)
        if (!strcmp(ps[i], "forward") || !strcmp(ps[i], "backward"))
            ASSERT_EQ_INT(f[k++], states[i]);
    ASSERT_EQ_INT(erg_plan_stage_freqs_const(p, 0)[0], 0);
    erg_plan_free(p);
    ASSERT_EQ_INT(erg_srv_schedule_to_plan(ps, states, (size_t)n, 4, 2, 1, NULL, &p, &err),
                  ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "6 forward/backward");
}

TEST(plan_files_both_literal_formats)
{
    const char *d = mktmp();
    char p1[512], p2[512], p3[512];
    snprintf(p1, sizeof p1, "%s/a.py", d);
    snprintf(p2, sizeof p2, "%s/b.py", d);
    snprintf(p3, sizeof p3, "%s/c.py", d);
    FILE *f = fopen(p1, "w");
    fprintf(f, "[[1410, 1200,],\n [1000, 800]]\n# (cost estimate) 1.0\n");
    fclose(f);
    f = fopen(p2, "w");
    fprintf(f, "[\n  [(\"forward\", 1410), ('backward', 1200)],  # stage 0\n"
               "  [[\"forward\", 1000], (\"load\", 5), (\"backward\", 800),],\n]\n");
    fclose(f);
    f = fopen(p3, "w");
    fprintf(f, "[[(\"forward\", 1410), (\"backward\" 1200)]]\n");
    fclose(f);
    int **st = NULL, *len = NULL, n = 0;
    erg_error err;
    for (int k = 0; k < 2; k++) {
        ASSERT_OK(erg__srv_plan_load(k ? p2 : p1, &st, &len, &n, &err));
        ASSERT_EQ_INT(n, 2);
        ASSERT_EQ_INT(len[0], 2);
        ASSERT_EQ_INT(len[1], 2);
        ASSERT_EQ_INT(st[0][0], 1410);
        ASSERT_EQ_INT(st[0][1], 1200);
        ASSERT_EQ_INT(st[1][0], 1000);
        ASSERT_EQ_INT(st[1][1], 800);
        erg__srv_plan_stages_free(st, len, n);
    }
    ASSERT_EQ_INT(erg__srv_plan_load(p3, &st, &len, &n, &err), ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "c.py:1");
}

TEST(python_json_output_matches_real_dump)
{
    /* Our dump writer must produce the same text as Perseus (Python's
     * json.dumps): re-serialising the real dump must give it back byte for
     * byte. */
    const char *names[] = {"perseus.json", "0.sched.json", "2.sched.json", "0.prof.json",
                           "2.prof.json"};
    char path[1024];
    snprintf(path, sizeof path, "%s/published/perseus-sosp24/dump-example", ERG_TEST_DATA_DIR);
    tap_need_data(path);
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/published/perseus-sosp24/dump-example/%s",
                 ERG_TEST_DATA_DIR, names[i]);
        char *text = NULL;
        size_t len = 0;
        erg_error err;
        ASSERT_OK(erg__read_file(path, 1u << 26, &text, &len, &err));
        while (len && (text[len - 1] == '\n'))
            text[--len] = 0;
        json_t *v = json_loadb(text, len, 0, NULL);
        ASSERT(v);
        erg__buf b = {0};
        ASSERT_EQ_INT(erg__srv_json_py(v, &b), ERG_OK);
        ASSERT_EQ_INT(b.len, len);
        ASSERT_MSG(!memcmp(b.data, text, len), "%s differs after re-serialisation", names[i]);
        /* And our result validator accepts every real ProfilingResult. */
        if (strstr(names[i], "prof")) {
            for (size_t r = 0; r < json_array_size(v); r++) {
                srv_result res;
                ASSERT_OK(erg__srv_result_from_json(json_array_get(v, r), &res, &err));
                ASSERT_EQ_INT(res.n_iters, 30);
                ASSERT(res.time_bd[SRV_I_FORWARD].n_iters == 30);
                erg__srv_result_free(&res);
            }
        }
        erg__buf_free(&b);
        json_decref(v);
        erg__free(text);
    }
}

/* A scheduler context for 2 stages of [F p2p B]. */
typedef struct fake_job {
    srv_sched_ctx c;
    int n[2];
    int *ins[2];
    int st[4];
    int ins0[3];
} fake_job;

static void fake_init(fake_job *f, int nstates)
{
    memset(f, 0, sizeof *f);
    int ins[3] = {SRV_I_FORWARD, SRV_I_P2P, SRV_I_BACKWARD};
    memcpy(f->ins0, ins, sizeof ins);
    f->n[0] = f->n[1] = 3;
    f->ins[0] = f->ins[1] = f->ins0;
    for (int i = 0; i < nstates; i++)
        f->st[i] = STATES[i];
    f->c.num_stages = 2;
    f->c.n_instrs = f->n;
    f->c.instrs = f->ins;
    f->c.states = f->st;
    f->c.n_states = nstates;
    f->c.mode = SRV_MODE_POWER;
}

/* Per-stage results where stage s at state v has forward time and iteration
 * time from the sim model and energy P t. */
static void fake_results(srv_result *r, int **sched)
{
    for (int s = 0; s < 2; s++) {
        json_t *o = json_object();
        json_t *it = json_array(), *ie = json_array(), *fw = json_array();
        for (int i = 0; i < 4; i++) {
            double t = sim_time(2, s, 0, sched[s][0]) + sim_time(2, s, 1, sched[s][2]);
            json_array_append_new(it, json_real(t));
            json_array_append_new(ie, json_real(t * sim_power(2, s, 0, sched[s][0])));
            json_array_append_new(fw, json_pack("[f]", sim_time(2, s, 0, sched[s][0])));
        }
        json_object_set_new(o, "iter_time", it);
        json_object_set_new(o, "iter_energy", ie);
        json_object_set_new(o, "time_breakdown", json_pack("{s:o}", "forward", fw));
        erg_error err;
        ASSERT_OK(erg__srv_result_from_json(o, &r[s], &err));
        json_decref(o);
    }
}

static int run_sched(const char *name, const char *args, fake_job *f, int max_windows,
                     int seen[][2])
{
    srv_sched *s = NULL;
    erg_error err;
    json_t *a = json_loads(args, 0, NULL);
    ASSERT_OK(erg__srv_sched_new(name, a, &f->c, &s, &err));
    json_decref(a);
    int w = 0;
    for (; w < max_windows; w++) {
        int **per = NULL;
        bool done = false;
        ASSERT_OK(erg__srv_sched_next(s, &per, &done, &err));
        if (done)
            break;
        seen[w][0] = per[0][0];
        seen[w][1] = per[1][0];
        srv_result r[2];
        fake_results(r, per);
        ASSERT_OK(erg__srv_sched_observe(s, r, &err));
        erg__srv_result_free(&r[0]);
        erg__srv_result_free(&r[1]);
    }
    erg__srv_sched_free(s);
    return w;
}

TEST(zeus_global_sweeps_and_ends)
{
    fake_job f;
    fake_init(&f, 4);
    char *d = (char *)mktmp();
    f.c.job_dir = d;
    int seen[32][2];
    int w = run_sched("ZeusGlobalPowerLimit", "{\"eta_knob\": 0.5}", &f, 32, seen);
    /* one warm-up + every state but the lowest, then the end */
    ASSERT_EQ_INT(w, 4);
    ASSERT_EQ_INT(seen[0][0], 1410);
    ASSERT_EQ_INT(seen[1][0], 1410);
    ASSERT_EQ_INT(seen[2][1], 1320);
    ASSERT_EQ_INT(seen[3][0], 1230);
    char p[512];
    snprintf(p, sizeof p, "%s/ZeusGlobalPowerLimit.json", d);
    json_t *v = load_json(p);
    ASSERT_EQ_INT(json_object_size(v), 3);
    double t1410 = json_real_value(json_object_get(json_object_get(v, "1410"), "time"));
    /* time = 1 / throughput = slowest stage's iteration time */
    ASSERT_NEAR(t1410, sim_time(2, 1, 0, 1410) + sim_time(2, 1, 1, 1410), 1e-12);
    json_decref(v);
}

TEST(zeus_deploy_optimum_keeps_running)
{
    fake_job f;
    fake_init(&f, 4);
    f.c.job_dir = (char *)mktmp();
    int seen[64][2];
    /* warm-up + 3 candidates, then the optimum for ever */
    int w = run_sched("ZeusGlobalPowerLimit", "{\"deploy_optimum\": true}", &f, 10, seen);
    ASSERT_EQ_INT(w, 10);
    for (int k = 4; k < 10; k++) {
        ASSERT_EQ_INT(seen[k][0], seen[4][0]);
        ASSERT_EQ_INT(seen[k][1], seen[4][0]);
    }
    ASSERT(seen[4][0] == 1410 || seen[4][0] == 1320 || seen[4][0] == 1230);
    w = run_sched("ZeusLocalPowerState", "{\"deploy_optimum\": true}", &f, 40, seen);
    ASSERT_EQ_INT(w, 40);
    ASSERT_EQ_INT(seen[39][0], seen[38][0]);
    ASSERT_EQ_INT(seen[39][1], seen[38][1]);
}

TEST(profiler_writes_empty_not_nan_and_energy_from_iterations)
{
    /* Results without energy samples: an empty field by default (Perseus's
     * pandas to_csv writes the NaN mean so, not "nan"), or time x the mean
     * iteration power when asked. */
    fake_job f;
    fake_init(&f, 2);
    f.c.mode = SRV_MODE_FREQUENCY;
    char *d = (char *)mktmp();
    f.c.job_dir = d;
    f.c.profile_csv_name = (char *)"p.csv";
    int seen[8][2];
    for (int k = 0; k < 2; k++) {
        ASSERT_EQ_INT(
            run_sched("InstructionProfiler",
                      k ? "{\"energy_from_iterations\": true, \"minimum_power_state\": 1300}"
                        : "{\"minimum_power_state\": 1300}",
                      &f, 8, seen),
            4);
        char p[600], *text;
        size_t len;
        erg_error err;
        snprintf(p, sizeof p, "%s/p.csv", d);
        ASSERT_OK(erg__read_file(p, 1 << 20, &text, &len, &err));
        /* stage 1 forward at 1320: the fake iteration is F + B at the same
         * clock with energy t P(F) */
        double tf = sim_time(2, 1, 0, 1320), tb = sim_time(2, 1, 1, 1320);
        double pw = ((tf + tb) * sim_power(2, 1, 0, 1320)) / (tf + tb);
        char want[160], a[40], b[40];
        snprintf(want, sizeof want, "1,forward,1320,%s,%s\n", erg__fmt_double_py(tf, a, sizeof a),
                 k ? erg__fmt_double_py(tf * (pw * 3) / 3, b, sizeof b) : "");
        ASSERT_CONTAINS(text, want);
        ASSERT(!strstr(text, "nan"));
        erg__free(text);
    }
}

TEST(zeus_local_balances_stages)
{
    fake_job f;
    fake_init(&f, 4);
    char *d = (char *)mktmp();
    f.c.job_dir = d;
    int seen[64][2];
    int w = run_sched("ZeusLocalPowerState", "{}", &f, 64, seen);
    ASSERT(w > 2 && w < 64);
    char p[512];
    snprintf(p, sizeof p, "%s/ZeusLocalPowerState.json", d);
    json_t *v = load_json(p);
    /* stage 1 is slower in the model: it is the heaviest */
    ASSERT_EQ_INT(json_integer_value(json_object_get(v, "heaviest_stage")), 1);
    json_t *res = json_object_get(v, "profiling_results");
    ASSERT(json_object_size(res) >= 1);
    /* at the first heaviest-stage state (1410), the lighter stage 0 runs at
     * a lower or equal state */
    json_t *bal = json_object_get(json_object_get(res, "1410"), "balanced_power_states");
    ASSERT(bal);
    ASSERT_EQ_INT(json_integer_value(json_array_get(bal, 1)), 1410);
    ASSERT(json_integer_value(json_array_get(bal, 0)) <= 1410);
    ASSERT(json_object_get(v, "optimal_heaviest_stage_power_state"));
    json_decref(v);
}

/* ---------------------------------------------------------------------
 * ZeusLocalPowerState against the reference, window by window. zl_ref_run
 * is Perseus's kronos algorithm (baselines.py, docs/zeus-protocol.md §9)
 * written in its own direct style: nested loops that "run a window" by
 * calling the model, exactly where the reference yields. ergon's state
 * machine is driven with the same model; both must run the same windows
 * (same per-stage states), record the same points and pick the same optimum.
 * --------------------------------------------------------------------- */
#define ZL_S 4
#define ZL_N 12
#define ZL_ITERS 5
static const int ZL_STATES[ZL_N] = {400, 375, 350, 325, 300, 275, 250, 225, 200, 175, 150, 125};
/* Forward time of stage s at power state v (a cap in W): lighter stages
 * are faster; stage 2 has a non-monotone dip at 275 W (exercises the
 * reference's "time dropped" rule). */
static double zl_fwd(int s, int v)
{
    static const double base[ZL_S] = {0.060, 0.100, 0.072, 0.085};
    double t = base[s] * pow(400.0 / v, 0.7);
    if (s == 2 && v == 275)
        t *= 0.97;
    return t;
}
static double zl_power(int s, int v)
{
    return 60.0 + 0.8 * v + 5.0 * s;
}

typedef struct zl_window {
    int st[ZL_S];
} zl_window;
typedef struct zl_win_res {
    double t_mean[ZL_S]; /* balanced-phase mean time (after warm-up drop) */
    double iter_t[ZL_S][ZL_ITERS], iter_e[ZL_S][ZL_ITERS];
} zl_win_res;

/* Iteration k of a window: 3 forwards + 3 backwards (2x), a per-iteration
 * wobble so that means are not trivial. */
static double zl_iter_scale(int k)
{
    return 1.0 + 0.01 * (k % 3) - 0.004 * (k == 0);
}
static void zl_measure(const int *st, zl_win_res *w)
{
    int drop = 1; /* max(int(5 * 0.1), 1) */
    for (int s = 0; s < ZL_S; s++) {
        double sum = 0;
        int cnt = 0;
        for (int k = 0; k < ZL_ITERS; k++) {
            double f = zl_fwd(s, st[s]) * zl_iter_scale(k);
            w->iter_t[s][k] = 9 * f;
            w->iter_e[s][k] = 9 * f * zl_power(s, st[s]);
            if (k >= drop) {
                sum += 3 * f; /* three samples of f */
                cnt += 3;
            }
        }
        w->t_mean[s] = sum / cnt;
    }
}

typedef struct zl_point_ref {
    int state, bal[ZL_S];
    double tput, power, energy;
} zl_point_ref;

typedef struct zl_trace {
    zl_window win[256];
    int n_win;
    zl_point_ref pts[ZL_N];
    int n_pts, heaviest, optimum;
} zl_trace;

static void zl_ref_window(zl_trace *tr, const int *st, zl_win_res *w)
{
    ASSERT(tr->n_win < 256);
    memcpy(tr->win[tr->n_win++].st, st, sizeof(int) * ZL_S);
    zl_measure(st, w);
}

static void zl_ref_run(zl_trace *tr, double eta)
{
    memset(tr, 0, sizeof *tr);
    zl_win_res w;
    int st[ZL_S], idx[ZL_S] = {0};
    for (int s = 0; s < ZL_S; s++)
        st[s] = ZL_STATES[0];
    zl_ref_window(tr, st, &w); /* warm-up */
    int heaviest = -1;
    for (int i = 0; i < ZL_N; i++) {
        for (int s = 0; s < ZL_S; s++) {
            if (idx[s] < i)
                idx[s] = i;
            st[s] = ZL_STATES[idx[s]];
        }
        zl_ref_window(tr, st, &w);
        if (heaviest < 0) {
            heaviest = 0;
            for (int s = 1; s < ZL_S; s++)
                if (w.t_mean[s] > w.t_mean[heaviest])
                    heaviest = s;
        }
        double target = w.t_mean[heaviest], prev_t[ZL_S], prev_d[ZL_S];
        bool found[ZL_S];
        for (int s = 0; s < ZL_S; s++) {
            prev_t[s] = 0;
            prev_d[s] = INFINITY;
            found[s] = s == heaviest;
        }
        for (;;) {
            bool all = true;
            for (int s = 0; s < ZL_S; s++)
                all = all && found[s];
            if (all)
                break;
            double d[ZL_S];
            for (int s = 0; s < ZL_S; s++)
                d[s] = fabs(w.t_mean[s] - target);
            for (int s = 0; s < ZL_S; s++) {
                if (found[s])
                    continue;
                if (d[s] <= prev_d[s] || w.t_mean[s] < prev_t[s]) {
                    if (idx[s] + 1 < ZL_N)
                        idx[s]++;
                    else
                        found[s] = true;
                } else {
                    idx[s]--;
                    found[s] = true;
                }
            }
            for (int s = 0; s < ZL_S; s++) {
                prev_t[s] = w.t_mean[s];
                prev_d[s] = d[s];
                st[s] = ZL_STATES[idx[s]];
            }
            zl_ref_window(tr, st, &w); /* also after the pass that found the last stage */
        }
        zl_point_ref *p = &tr->pts[tr->n_pts++];
        p->state = ZL_STATES[i];
        double tmax = 0;
        for (int s = 0; s < ZL_S; s++) {
            p->bal[s] = ZL_STATES[idx[s]];
            double t = 0, pw = 0, e = 0;
            for (int k = 1; k < ZL_ITERS; k++) {
                t += w.iter_t[s][k];
                pw += w.iter_e[s][k] / w.iter_t[s][k];
                e += w.iter_e[s][k];
            }
            t /= ZL_ITERS - 1;
            tmax = t > tmax ? t : tmax;
            p->power += pw / (ZL_ITERS - 1);
            p->energy += e / (ZL_ITERS - 1);
        }
        p->tput = 1.0 / tmax;
        bool lowest = false;
        for (int s = 0; s < ZL_S; s++)
            lowest = lowest || p->bal[s] == ZL_STATES[ZL_N - 1];
        if (lowest)
            break;
    }
    tr->heaviest = heaviest;
    double best = INFINITY;
    for (int k = 0; k < tr->n_pts; k++) {
        /* max state x world size, once */
        double c = (eta * tr->pts[k].power + (1 - eta) * ZL_STATES[0] * ZL_S) / tr->pts[k].tput;
        if (c < best) {
            best = c;
            tr->optimum = tr->pts[k].bal[heaviest];
        }
    }
}

static void zl_compare(double eta)
{
    zl_trace ref;
    zl_ref_run(&ref, eta);
    ASSERT(ref.n_pts >= 3); /* the model makes the search non-trivial */
    ASSERT(ref.n_win >= 12);

    int n[ZL_S], ins0[3] = {SRV_I_FORWARD, SRV_I_P2P, SRV_I_BACKWARD}, *ins[ZL_S];
    for (int s = 0; s < ZL_S; s++) {
        n[s] = 3;
        ins[s] = ins0;
    }
    srv_sched_ctx c = {0};
    c.num_stages = ZL_S;
    c.n_instrs = n;
    c.instrs = ins;
    c.states = (int *)ZL_STATES;
    c.n_states = ZL_N;
    c.mode = SRV_MODE_POWER;
    char *d = (char *)mktmp();
    c.job_dir = d;
    srv_sched *s = NULL;
    erg_error err;
    json_t *a = json_pack("{s:f}", "eta_knob", eta);
    ASSERT_OK(erg__srv_sched_new("ZeusLocalPowerState", a, &c, &s, &err));
    json_decref(a);
    int w = 0;
    for (;; w++) {
        int **per = NULL;
        bool done = false;
        ASSERT_OK(erg__srv_sched_next(s, &per, &done, &err));
        if (done)
            break;
        ASSERT_MSG(w < ref.n_win, "ergon ran more windows than the reference (%d)", ref.n_win);
        int st[ZL_S];
        for (int g = 0; g < ZL_S; g++) {
            st[g] = per[g][0];
            ASSERT_EQ_INT(per[g][2], st[g]);
            ASSERT_MSG(st[g] == ref.win[w].st[g], "window %d stage %d: ergon %d, reference %d", w,
                       g, st[g], ref.win[w].st[g]);
        }
        zl_win_res m;
        zl_measure(st, &m);
        srv_result r[ZL_S];
        for (int g = 0; g < ZL_S; g++) {
            json_t *o = json_object(), *it = json_array(), *ie = json_array(), *fw = json_array();
            for (int k = 0; k < ZL_ITERS; k++) {
                double f = zl_fwd(g, st[g]) * zl_iter_scale(k);
                json_array_append_new(it, json_real(m.iter_t[g][k]));
                json_array_append_new(ie, json_real(m.iter_e[g][k]));
                json_array_append_new(fw, json_pack("[f,f,f]", f, f, f));
            }
            json_object_set_new(o, "iter_time", it);
            json_object_set_new(o, "iter_energy", ie);
            json_object_set_new(o, "time_breakdown", json_pack("{s:o}", "forward", fw));
            ASSERT_OK(erg__srv_result_from_json(o, &r[g], &err));
            json_decref(o);
        }
        ASSERT_OK(erg__srv_sched_observe(s, r, &err));
        for (int g = 0; g < ZL_S; g++)
            erg__srv_result_free(&r[g]);
    }
    erg__srv_sched_free(s);
    ASSERT_MSG(w == ref.n_win, "ergon ran %d windows, the reference %d", w, ref.n_win);

    char p[512];
    snprintf(p, sizeof p, "%s/ZeusLocalPowerState.json", d);
    json_t *v = load_json(p);
    ASSERT_EQ_INT(json_integer_value(json_object_get(v, "heaviest_stage")), ref.heaviest);
    ASSERT_EQ_INT(json_integer_value(json_object_get(v, "optimal_heaviest_stage_power_state")),
                  ref.optimum);
    json_t *res = json_object_get(v, "profiling_results");
    ASSERT_EQ_INT(json_object_size(res), ref.n_pts);
    for (int k = 0; k < ref.n_pts; k++) {
        char key[16];
        snprintf(key, sizeof key, "%d", ref.pts[k].state);
        json_t *pt = json_object_get(res, key);
        ASSERT_MSG(pt, "point %s missing", key);
        json_t *bal = json_object_get(pt, "balanced_power_states");
        for (int g = 0; g < ZL_S; g++)
            ASSERT_EQ_INT(json_integer_value(json_array_get(bal, g)), ref.pts[k].bal[g]);
        ASSERT_NEAR(json_real_value(json_object_get(pt, "throughput")), ref.pts[k].tput,
                    1e-12 * ref.pts[k].tput);
        ASSERT_NEAR(json_real_value(json_object_get(pt, "power")), ref.pts[k].power,
                    1e-12 * ref.pts[k].power);
        ASSERT_NEAR(json_real_value(json_object_get(pt, "energy")), ref.pts[k].energy,
                    1e-12 * ref.pts[k].energy);
        ASSERT_NEAR(json_real_value(json_object_get(pt, "time")), 1.0 / ref.pts[k].tput,
                    1e-12 / ref.pts[k].tput);
    }
    json_decref(v);
}

TEST(zeus_local_matches_reference_window_by_window)
{
    /* Several eta: the optimum depends on the cost's constant term. */
    static const double etas[] = {0.5, 0.8, 0.9, 0.95, 0.99};
    for (size_t k = 0; k < sizeof etas / sizeof etas[0]; k++)
        zl_compare(etas[k]);
}

/* /v1 jobs of zero-bubble schedules: pipe_schedule names backward_input,
 * backward_weight (erg_instr_kind_name) and overlap_f_b; PointSolution plans
 * give each of them its own clock, TwoFrequencies runs I and W at the
 * backward clock, InstructionProfiler writes backward_input/backward_weight
 * rows, and a served schedule becomes a client plan for a zbv order. Before,
 * I/W were not pipe instructions ("'backward_input' is not a pipe
 * instruction") and plans skipped them. */
TEST(zero_bubble_instruction_names_through_v1_schedulers)
{
    ASSERT_EQ_INT(erg__srv_instr_code("backward_input"), SRV_I_BACKWARD_INPUT);
    ASSERT_EQ_INT(erg__srv_instr_code("backward_weight"), SRV_I_BACKWARD_WEIGHT);
    ASSERT_EQ_INT(erg__srv_instr_code("overlap_f_b"), SRV_I_OVERLAP_F_B);
    ASSERT_EQ_INT(erg__srv_instr_code("forward"), SRV_I_FORWARD); /* Perseus codes unchanged */
    ASSERT_EQ_INT(erg__srv_instr_code("pure_backward"), SRV_I_PURE_BACKWARD);
    /* PointSolution expansion: F p2p I W p2p F I W step; plan 6 clocks. */
    int instrs[] = {SRV_I_FORWARD, SRV_I_P2P,     SRV_I_BACKWARD_INPUT, SRV_I_BACKWARD_WEIGHT,
                    SRV_I_P2P,     SRV_I_FORWARD, SRV_I_BACKWARD_INPUT, SRV_I_BACKWARD_WEIGHT,
                    SRV_I_STEP};
    int plan[] = {1000, 1100, 1200, 1300, 1400, 1500}, out[9];
    erg_error err;
    ASSERT_OK(erg__srv_expand(plan, 6, instrs, 9, out, &err));
    int want[] = {1000, 1000, 1100, 1200, 1200, 1300, 1400, 1500, 1500};
    for (int i = 0; i < 9; i++)
        ASSERT_EQ_INT(out[i], want[i]);
    ASSERT_EQ_INT(erg__srv_expand(plan, 4, instrs, 9, out, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "backward_input");

    /* A 2-stage job whose ranks run [F I W]. */
    fake_job f;
    fake_init(&f, 4);
    f.c.mode = SRV_MODE_FREQUENCY;
    int zb[3] = {SRV_I_FORWARD, SRV_I_BACKWARD_INPUT, SRV_I_BACKWARD_WEIGHT};
    memcpy(f.ins0, zb, sizeof zb);
    srv_sched *s = NULL;
    json_t *a = json_pack("{s:i,s:i}", "forward_freq", 1320, "backward_freq", 1140);
    ASSERT_OK(erg__srv_sched_new("TwoFrequencies", a, &f.c, &s, &err));
    json_decref(a);
    int **per;
    bool done;
    ASSERT_OK(erg__srv_sched_next(s, &per, &done, &err));
    ASSERT_EQ_INT(per[1][0], 1320);
    ASSERT_EQ_INT(per[1][1], 1140);
    ASSERT_EQ_INT(per[1][2], 1140);
    erg__srv_sched_free(s);

    /* InstructionProfiler: results with backward_input/backward_weight
     * breakdowns give those rows in the profile CSV. */
    char *d = (char *)mktmp();
    f.c.job_dir = d;
    f.c.profile_csv_name = (char *)"p.csv";
    a = json_pack("{s:i}", "minimum_power_state", 1320);
    ASSERT_OK(erg__srv_sched_new("InstructionProfiler", a, &f.c, &s, &err));
    json_decref(a);
    for (int w = 0; w < 8; w++) {
        ASSERT_OK(erg__srv_sched_next(s, &per, &done, &err));
        if (done)
            break;
        srv_result r[2];
        for (int st = 0; st < 2; st++) {
            json_t *o =
                json_pack("{s:[f,f],s:[f,f],s:{s:[[f],[f]],s:[[f],[f]],s:[[f],[f]]},"
                          "s:{s:[[f],[f]],s:[[f],[f]],s:[[f],[f]]}}",
                          "iter_time", 0.3, 0.3, "iter_energy", 60.0, 60.0, "time_breakdown",
                          "forward", 0.1, 0.1, "backward_input", 0.12, 0.12, "backward_weight",
                          0.08, 0.08, "energy_breakdown", "forward", 20.0, 20.0, "backward_input",
                          25.0, 25.0, "backward_weight", 15.0, 15.0);
            ASSERT(o != NULL);
            ASSERT_OK(erg__srv_result_from_json(o, &r[st], &err));
            json_decref(o);
        }
        ASSERT_OK(erg__srv_sched_observe(s, r, &err));
        erg__srv_result_free(&r[0]);
        erg__srv_result_free(&r[1]);
    }
    erg__srv_sched_free(s);
    char p[600], *text;
    size_t len;
    snprintf(p, sizeof p, "%s/p.csv", d);
    ASSERT_OK(erg__read_file(p, 1 << 20, &text, &len, &err));
    ASSERT_CONTAINS(text, "1,backward_input,1320,0.12,25.0\n");
    ASSERT_CONTAINS(text, "0,backward_weight,1410,0.08,15.0\n");
    ASSERT_CONTAINS(text, "1,forward,1320,0.1,20.0\n");
    erg__free(text);

    /* A served zbv schedule (the names a rank registers, in its order) becomes
     * the rank's client plan. */
    erg_schedule zbv = {.kind = ERG_SCHED_ZBV};
    erg_order *o = NULL;
    ASSERT_OK(erg_order_new(&zbv, 2, 4, &o, &err));
    const erg_instr *in = NULL;
    int n = erg_order_rank(o, 1, &in);
    const char *names[64];
    int states[64];
    for (int i = 0; i < n; i++) {
        names[i] = erg_instr_kind_name(in[i].kind);
        states[i] = 1000 + i;
    }
    erg_plan *pl = NULL;
    ASSERT_OK(erg_srv_schedule_to_plan(names, states, (size_t)n, 2, 4, 1, &zbv, &pl, &err));
    ASSERT_EQ_INT(erg_plan_stage_len(pl, 1), n);
    for (int i = 0; i < n; i++)
        ASSERT_EQ_INT(erg_plan_stage_freqs_const(pl, 1)[i], 1000 + i);
    erg_plan_free(pl);
    ASSERT_EQ_INT(erg_srv_schedule_to_plan(names, states, (size_t)n - 1, 2, 4, 1, &zbv, &pl, &err),
                  ERG_EINVAL);

    /* A zbv JSON plan as PointSolution reads it (the pairs a Zeus-style
     * schedule is sent as): each rank's order with its kind names. */
    ASSERT_OK(erg_plan_new(&zbv, 2, 4, &pl, &err));
    for (int st2 = 0; st2 < 2; st2++) {
        int *fr = erg_plan_stage_freqs(pl, st2);
        for (int i = 0; i < erg_plan_stage_len(pl, st2); i++)
            fr[i] = 1000 + i;
    }
    snprintf(p, sizeof p, "%s/zbv.json", d);
    ASSERT_OK(erg_plan_write_json(pl, p, &err));
    erg_plan_free(pl);
    srv_plan_pairs pp;
    memset(&pp, 0, sizeof pp);
    ASSERT_OK(erg__srv_plan_load_pairs(p, 2, &pp, &err));
    ASSERT_EQ_INT(pp.n_stages, 2);
    ASSERT_EQ_INT(pp.lens[1], n);
    for (int i = 0; i < n; i++) {
        ASSERT_STR_EQ(pp.names[1][i], names[i]);
        ASSERT_EQ_INT(pp.freqs[1][i], 1000 + i);
    }
    erg__srv_plan_pairs_free(&pp);
    /* and as plain per-stage clocks (PointSolution's erg__srv_plan_load) */
    int **stg = NULL, *lens = NULL, ns = 0;
    ASSERT_OK(erg__srv_plan_load(p, &stg, &lens, &ns, &err));
    ASSERT_EQ_INT(ns, 2);
    ASSERT_EQ_INT(lens[1], n);
    erg__srv_plan_stages_free(stg, lens, ns);
    erg_order_free(o);
}

TEST(two_frequencies_and_allmax)
{
    fake_job f;
    fake_init(&f, 4);
    f.c.mode = SRV_MODE_FREQUENCY;
    int seen[8][2];
    ASSERT_EQ_INT(run_sched("AllMaxFrequency3D", "{\"num_iters\": 3}", &f, 8, seen), 3);
    srv_sched *s = NULL;
    erg_error err;
    json_t *a = json_pack("{s:i,s:i}", "forward_freq", 1320, "backward_freq", 1140);
    ASSERT_OK(erg__srv_sched_new("TwoFrequencies", a, &f.c, &s, &err));
    int **per;
    bool done;
    ASSERT_OK(erg__srv_sched_next(s, &per, &done, &err));
    ASSERT(!done);
    ASSERT_EQ_INT(per[0][0], 1320);
    ASSERT_EQ_INT(per[0][1], 1320); /* p2p inherits the forward clock */
    ASSERT_EQ_INT(per[0][2], 1140);
    erg__srv_sched_free(s);
    json_decref(a);
    a = json_pack("{s:i,s:i}", "forward_freq", 1234, "backward_freq", 1140);
    ASSERT_EQ_INT(erg__srv_sched_new("TwoFrequencies", a, &f.c, &s, &err), ERG_EINVAL);
    json_decref(a);
    a = json_pack("{s:i}", "bogus", 1);
    ASSERT_EQ_INT(erg__srv_sched_check_args("AllMax", a, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "bogus");
    json_decref(a);
    a = json_object();
    ASSERT_EQ_INT(erg__srv_sched_check_args("NoSuchScheduler", a, &err), ERG_EINVAL);
    json_decref(a);
}

TAP_MAIN(TEST_ENTRY(expand_follows_spec), TEST_ENTRY(schedule_to_client_plan),
         TEST_ENTRY(plan_files_both_literal_formats),
         TEST_ENTRY(python_json_output_matches_real_dump), TEST_ENTRY(zeus_global_sweeps_and_ends),
         TEST_ENTRY(zeus_local_balances_stages),
         TEST_ENTRY(zeus_local_matches_reference_window_by_window),
         TEST_ENTRY(zeus_deploy_optimum_keeps_running),
         TEST_ENTRY(profiler_writes_empty_not_nan_and_energy_from_iterations),
         TEST_ENTRY(two_frequencies_and_allmax),
         TEST_ENTRY(zero_bubble_instruction_names_through_v1_schedulers))
