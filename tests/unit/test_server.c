/* test_server.c: the control-plane server: schedulers, wire parsing, bad input, and multi-process
 * runs (profiling then plans, crash and restart, stragglers) on loopback. */
#include "tap.h"

#include "ergon/gpu.h"
#include "ergon/pipeline.h"
#include "ergon/plan.h"
#include "ergon/planner.h"
#include "ergon/profile.h"
#include "ergon/server.h"
#include "ergon/server_client.h"
#include "server/server_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <curl/curl.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* Leaks so far in this (forked) test process; tests end with _exit, which
 * skips LeakSanitizer's exit-time check. */
#define CHECK_NO_LEAKS() ASSERT_MSG(__lsan_do_recoverable_leak_check() == 0, "memory leaked")
#else
#define CHECK_NO_LEAKS() ((void)0)
#endif

/* ---------------------------------------------------------------------
 * A simulated training rank on the simulated GPU's DVFS model (gpu.h:
 * erg_sim_eval, an A100 running GPT-3 XL split into S stages): compute
 * instruction (stage, kind) at clock f takes t and draws P; its energy is
 * P t. Loads, P2P and the optimizer step take fixed times at 80 W. Time is
 * simulated: nothing sleeps.
 * --------------------------------------------------------------------- */
static void sim_eval(int S, int stage, int kind, int f, double *t, double *p)
{
    const erg_sim_gpu_info *g = NULL;
    erg_sim_work w;
    erg_error err;
    ASSERT_OK(erg_sim_gpu_find("a100", &g, &err));
    ASSERT_OK(
        erg_sim_model_work("gpt3-xl", S, 0, stage, kind ? ERG_BACKWARD : ERG_FORWARD, &w, &err));
    ASSERT_OK(erg_sim_eval(g, &w, f, t, p, &err));
}
static double sim_time(int S, int stage, int kind, int f)
{
    double t, p;
    sim_eval(S, stage, kind, f, &t, &p);
    return t;
}
static double sim_power(int S, int stage, int kind, int f)
{
    double t, p;
    sim_eval(S, stage, kind, f, &t, &p);
    return p;
}

static char tmpdir_[256];
static const char *mktmp(void)
{
    snprintf(tmpdir_, sizeof tmpdir_, "/tmp/ergon-test-server-XXXXXX");
    ASSERT(mkdtemp(tmpdir_));
    return tmpdir_;
}

/* Pipe schedule of a stage: Merak-like: load+forward+p2p, backward+p2p, step. */
static int pipe_schedule(int S, int M, int s, const char **out)
{
    erg_instr order[256];
    erg_error err;
    erg_schedule sch = {0};
    ASSERT_OK(erg_schedule_stage_order(&sch, S, M, s, order, &err));
    int n = 0;
    for (int i = 0; i < 2 * M; i++) {
        if (order[i].kind == ERG_FORWARD) {
            if (s == 0)
                out[n++] = "load";
            out[n++] = "forward";
        } else {
            out[n++] = "backward";
        }
        out[n++] = "p2p";
    }
    out[n++] = "step";
    return n;
}

static const int STATES[] = {1410, 1320, 1230, 1140, 1050, 960, 870};
#define NSTATES 7

typedef struct rank_cfg {
    const char *url, *job;
    int rank, S, M, pp, dp, tp;
    int iters;           /* iterations per window */
    int report_delay_ms; /* sleep before each report */
    const char *ack_log; /* append "window\n" per acknowledged report */
    double slow;         /* this GPU's compute is slower by this factor (0 = 1) */
} rank_cfg;

/* Run one simulated rank to the end of its job; returns 0 on success. */
static int run_rank(const rank_cfg *c)
{
    erg_error err;
    erg_srv_client *cl = NULL;
    erg_srv_client_opts o;
    erg_srv_client_opts_init(&o);
    o.schedule_wait_s = 5;
    o.max_retries = 40;
    o.backoff_max_s = 0.5;
    if (erg_srv_client_new(c->url, &o, &cl, &err))
        return 10;
    const char *ps[512];
    int n = pipe_schedule(c->S, c->M, c->pp, ps);
    if (erg_srv_client_register_rank(cl, c->job, c->rank, c->dp, c->pp, c->tp, ps, (size_t)n,
                                     STATES, NSTATES, &err)) {
        fprintf(stderr, "# rank %d: %s\n", c->rank, err.msg);
        return 11;
    }
    for (int guard = 0; guard < 1000; guard++) {
        int *states = NULL;
        size_t ns = 0;
        long window = -1;
        bool done = false;
        if (erg_srv_client_fetch_schedule(cl, c->job, c->rank, &states, &ns, &window, &done,
                                          &err)) {
            fprintf(stderr, "# rank %d: fetch: %s\n", c->rank, err.msg);
            return 12;
        }
        if (done)
            break;
        if ((int)ns != n) {
            fprintf(stderr, "# rank %d: schedule of %zu entries for %d instructions\n", c->rank, ns,
                    n);
            erg_free(states);
            return 13;
        }
        erg_srv_result *res = NULL;
        erg_srv_result_new(c->rank, &res, &err);
        for (int it = 0; it < c->iters; it++) {
            double T = 0, E = 0;
            for (int i = 0; i < n; i++) {
                int f = states[i];
                bool fw = !strcmp(ps[i], "forward"), bw = !strcmp(ps[i], "backward");
                double slow = c->slow > 0 ? c->slow : 1;
                double t = fw || bw                 ? sim_time(c->S, c->pp, bw, f) * slow
                           : !strcmp(ps[i], "step") ? 0.002
                                                    : 0.0005;
                double e = (fw || bw ? sim_power(c->S, c->pp, bw, f) : 80.0) * t;
                T += t;
                E += e;
            }
            erg_srv_result_add_iteration(res, T, E, &err);
            for (int i = 0; i < n; i++) {
                bool fw = !strcmp(ps[i], "forward"), bw = !strcmp(ps[i], "backward");
                if (fw || bw) {
                    double t = sim_time(c->S, c->pp, bw, states[i]) * (c->slow > 0 ? c->slow : 1);
                    erg_srv_result_add_sample(res, ps[i], t,
                                              t * sim_power(c->S, c->pp, bw, states[i]), &err);
                } else if (!strcmp(ps[i], "load")) {
                    erg_srv_result_add_sample(res, "load", 0.0005, NAN, &err);
                }
            }
        }
        erg_free(states);
        if (c->report_delay_ms)
            usleep((useconds_t)c->report_delay_ms * 1000);
        erg_status st = erg_srv_client_report(cl, c->job, window, res, &err);
        erg_srv_result_free(res);
        if (st == ERG_ESTATE && strstr(err.msg, "is done"))
            continue; /* the job was ended meanwhile: the next fetch says so */
        if (st) {
            fprintf(stderr, "# rank %d: report: %s\n", c->rank, err.msg);
            return 14;
        }
        if (c->ack_log) {
            FILE *f = fopen(c->ack_log, "a");
            if (f) {
                fprintf(f, "%d %ld\n", c->rank, window);
                fclose(f);
            }
        }
    }
    erg_srv_client_free(cl);
    return 0;
}

static pid_t fork_rank(const rank_cfg *c)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        _exit(run_rank(c));
    }
    return pid;
}

static int wait_all(pid_t *pids, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "# child %d exited with %d\n", i, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
            bad++;
        }
    }
    return bad;
}

/* The server in a child process (so the test can kill -9 it). */
typedef struct srv_cfg {
    const char *db, *dump, *scheduler, *args, *mode;
    int port;
    double rank_timeout_s, idle_s, conn_timeout_s;
    const char *plans_dir; /* --plans-dir: where per-job scheduler_args may name files */
    const char *zeus_sched, *zeus_args; /* Zeus PFO jobs' configuration */
} srv_cfg;

static pid_t start_server(const srv_cfg *c, int *port)
{
    int p[2];
    ASSERT(pipe(p) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        erg_server_opts o;
        erg_server_opts_init(&o);
        o.port = c->port;
        o.db_path = c->db;
        o.dump_dir = c->dump;
        /* NULL: the default (the Zeus configuration's counterpart, else AllMaxFrequency) */
        o.scheduler = c->scheduler;
        o.scheduler_args = c->args;
        o.mode = c->mode;
        if (c->rank_timeout_s > 0)
            o.rank_timeout_s = c->rank_timeout_s;
        if (c->idle_s > 0)
            o.job_idle_timeout_s = c->idle_s;
        if (c->conn_timeout_s > 0)
            o.connection_timeout_s = c->conn_timeout_s;
        const char *dirs[1] = {c->plans_dir};
        if (c->plans_dir) {
            o.plans_dirs = dirs;
            o.n_plans_dirs = 1;
        }
        o.zeus_scheduler = c->zeus_sched;
        o.zeus_scheduler_args = c->zeus_args;
        erg_server *srv = NULL;
        erg_error err;
        int port_out = -1;
        if (erg_server_new(&o, &srv, &err) || erg_server_start(srv, &err)) {
            fprintf(stderr, "# server: %s\n", err.msg);
        } else {
            port_out = erg_server_port(srv);
        }
        if (write(p[1], &port_out, sizeof port_out) != sizeof port_out)
            _exit(1);
        if (port_out < 0)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    int got = -1;
    ssize_t r = read(p[0], &got, sizeof got);
    close(p[0]);
    ASSERT_MSG(r == sizeof got && got > 0, "the server did not start");
    *port = got;
    return pid;
}

static void stop_server(pid_t pid)
{
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

static char *http(const char *url, const char *method, const char *path, const char *body,
                  int *status)
{
    erg_srv_client *c = NULL;
    erg_error err;
    ASSERT_OK(erg_srv_client_new(url, NULL, &c, &err));
    char *resp = NULL;
    ASSERT_OK(erg_srv_client_request(c, method, path, body, status, &resp, &err));
    erg_srv_client_free(c);
    return resp;
}

static char *register_job(const char *url, int S, int dp, int M, const char *sched,
                          const char *args, const char *model)
{
    erg_srv_client *c = NULL;
    erg_error err;
    ASSERT_OK(erg_srv_client_new(url, NULL, &c, &err));
    erg_srv_job_desc d = {S,         dp, 1, S * dp, "sim", model,
                          "uniform", 1,  M, sched,  args,  "frequency"};
    char *id = NULL;
    ASSERT_OK(erg_srv_client_register_job(c, &d, &id, &err));
    erg_srv_client_free(c);
    return id;
}

static json_t *load_json(const char *path)
{
    json_error_t je;
    json_t *v = json_load_file(path, 0, &je);
    ASSERT_MSG(v, "%s: %s", path, je.text);
    return v;
}

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* ---------------------------------------------------------------------
 * Unit tests of the pieces.
 * --------------------------------------------------------------------- */

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
    snprintf(path, sizeof path, "%s/perseus-sosp24/dump-example", ERG_SHARED_DATA_DIR);
    if (!exists(path))
        SKIP("reference data absent: %s", path);
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/perseus-sosp24/dump-example/%s", ERG_SHARED_DATA_DIR,
                 names[i]);
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

/* ---------------------------------------------------------------------
 * Bad input through the request handlers (no sockets).
 * --------------------------------------------------------------------- */

static erg_server *db_server(const char *sched, const char *args, const char *db)
{
    erg_server_opts o;
    erg_server_opts_init(&o);
    o.db_path = db;
    o.dump_data = false;
    o.scheduler = sched;
    o.scheduler_args = args;
    o.mode = "frequency";
    erg_server *srv = NULL;
    erg_error err;
    ASSERT_OK(erg_server_new(&o, &srv, &err));
    return srv;
}

static erg_server *mem_server(const char *sched, const char *args)
{
    return db_server(sched, args, ":memory:");
}

static int call(erg_server *srv, const char *method, const char *path, const char *query,
                const char *body, char **out)
{
    int status = 0;
    char *resp = NULL;
    const char *ct;
    ASSERT_EQ_INT(erg_server_handle(srv, method, path, query, body, body ? strlen(body) : 0, 0,
                                    &status, &resp, &ct),
                  ERG_OK);
    ASSERT(resp && ct);
    if (out)
        *out = resp;
    else
        erg_free(resp);
    return status;
}

static const char *JOB2 = "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,"
                          "\"world_size\":2,\"framework\":\"f\",\"model_name\":\"m\","
                          "\"partition_method\":\"p\",\"microbatch_size\":1,"
                          "\"num_microbatches\":1}";

static char *reg_job(erg_server *srv)
{
    char *resp;
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, JOB2, &resp), 200);
    json_t *v = json_loads(resp, JSON_DECODE_ANY, NULL);
    ASSERT(json_is_string(v));
    char *id = strdup(json_string_value(v));
    json_decref(v);
    erg_free(resp);
    return id;
}

static int reg_rank(erg_server *srv, const char *id, int r, const char *sched_list)
{
    char body[1024];
    snprintf(body, sizeof body,
             "{\"job_id\":\"%s\",\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,\"tp_rank\":0,"
             "\"pipe_schedule\":%s,\"power_state_range\":[1000,1410,1200]}",
             id, r, r, sched_list);
    return call(srv, "POST", "/register_rank", NULL, body, NULL);
}

TEST(bad_input_gets_4xx_with_message)
{
    erg_server *srv = mem_server("AllMaxFrequency", "{\"num_iters\":1}");
    char *resp;
    /* malformed JSON, wrong types, missing fields, bad world size */
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, "{\"job_id\": ", &resp), 422);
    ASSERT_CONTAINS(resp, "malformed JSON");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, "[1,2]", &resp), 422);
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", "/v1/jobs", NULL, "{\"pp_degree\":\"2\"}", &resp), 400);
    ASSERT_CONTAINS(resp, "pp_degree must be an integer");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", "/v1/jobs", NULL,
                       "{\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":3,"
                       "\"framework\":\"f\",\"model_name\":\"m\",\"partition_method\":\"p\","
                       "\"microbatch_size\":1,\"num_microbatches\":1}",
                       &resp),
                  400);
    ASSERT_CONTAINS(resp, "world_size 3");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", "/v1/jobs", NULL,
                       "{\"pp_degree\":1,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":1,"
                       "\"framework\":\"../etc\",\"model_name\":\"m/x\",\"partition_method\":\"p\","
                       "\"microbatch_size\":1,\"num_microbatches\":1}",
                       &resp),
                  400);
    ASSERT_CONTAINS(resp, "without '/'");
    erg_free(resp);
    /* deep nesting */
    char deep[400];
    memset(deep, '[', 300);
    deep[300] = 0;
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, deep, &resp), 422);
    ASSERT_CONTAINS(resp, "nested");
    erg_free(resp);
    /* unknown job, unknown endpoint, wrong method */
    ASSERT_EQ_INT(call(srv, "GET", "/schedule/nope", "rank=0", NULL, &resp), 404);
    ASSERT_CONTAINS(resp, "unknown job");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "GET", "/nothing", NULL, NULL, NULL), 404);
    ASSERT_EQ_INT(call(srv, "GET", "/register_job", NULL, NULL, NULL), 405);
    ASSERT_EQ_INT(call(srv, "GET", "/v1/jobs/x/results", NULL, NULL, NULL), 405);

    char *id = reg_job(srv);
    const char *ps = "[\"forward\",\"backward\"]";
    /* rank out of range, bad instruction, duplicate power state */
    char body[1024];
    snprintf(body, sizeof body,
             "{\"job_id\":\"%s\",\"rank\":5,\"dp_rank\":0,\"pp_rank\":0,\"tp_rank\":0,"
             "\"pipe_schedule\":[\"forward\"],\"power_state_range\":[1410]}",
             id);
    ASSERT_EQ_INT(call(srv, "POST", "/register_rank", NULL, body, &resp), 422);
    ASSERT_CONTAINS(resp, "rank = 5");
    erg_free(resp);
    ASSERT_EQ_INT(reg_rank(srv, id, 0, "[\"forward\",\"jump\"]"), 422);
    snprintf(body, sizeof body,
             "{\"job_id\":\"%s\",\"rank\":0,\"dp_rank\":0,\"pp_rank\":0,\"tp_rank\":0,"
             "\"pipe_schedule\":[\"forward\"],\"power_state_range\":[1410,1410]}",
             id);
    ASSERT_EQ_INT(call(srv, "POST", "/register_rank", NULL, body, &resp), 422);
    ASSERT_CONTAINS(resp, "twice");
    erg_free(resp);
    ASSERT_EQ_INT(reg_rank(srv, id, 0, ps), 200);
    ASSERT_EQ_INT(reg_rank(srv, id, 0, ps), 200); /* idempotent retry */
    ASSERT_EQ_INT(reg_rank(srv, id, 0, "[\"forward\"]"), 409);
    /* schedule for an unregistered rank; results before the window started */
    ASSERT_EQ_INT(call(srv, "GET", "/schedule/x", "rank=abc", NULL, NULL), 422);
    char path[512];
    snprintf(path, sizeof path, "/schedule/%s", id);
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=1", NULL, &resp), 404);
    ASSERT_CONTAINS(resp, "has not registered");
    erg_free(resp);
    ASSERT_EQ_INT(reg_rank(srv, id, 1, ps), 200);
    /* barrier pending (no wait) */
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=0", NULL, NULL), 503);
    char rpath[512];
    snprintf(rpath, sizeof rpath, "/result/%s", id);
    const char *good = "{\"rank\":0,\"iter_time\":[1.0],\"iter_energy\":[2.0],"
                       "\"time_breakdown\":{},\"energy_breakdown\":{}}";
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL, good, &resp), 409);
    ASSERT_CONTAINS(resp, "has not started");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=1", NULL, &resp), 200);
    ASSERT_CONTAINS(resp, "[1410, 1410]");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=0", NULL, NULL), 200);
    /* results of the wrong shape or types */
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL,
                       "{\"rank\":0,\"iter_time\":[1.0,2.0],\"iter_energy\":[2.0]}", &resp),
                  422);
    ASSERT_CONTAINS(resp, "iter_energy has 1");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL,
                       "{\"rank\":0,\"iter_time\":[\"x\"],\"iter_energy\":[2.0]}", NULL),
                  422);
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL,
                       "{\"rank\":0,\"iter_time\":[1],\"iter_energy\":[2],"
                       "\"time_breakdown\":{\"fly\":[[1]]}}",
                       &resp),
                  422);
    ASSERT_CONTAINS(resp, "not a pipe instruction");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL, good, NULL), 200);
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL, good, &resp), 409); /* twice */
    ASSERT_CONTAINS(resp, "already reported");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL,
                       "{\"rank\":1,\"iter_time\":[1.0],\"iter_energy\":[2.0]}", NULL),
                  200);
    /* AllMax with num_iters 1: the job is over */
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=0", NULL, &resp), 500);
    ASSERT_CONTAINS(resp, "[profiling-done]");
    erg_free(resp);
    char vpath[600];
    snprintf(vpath, sizeof vpath, "/v1/jobs/%s/schedule", id);
    ASSERT_EQ_INT(call(srv, "GET", vpath, "rank=1", NULL, &resp), 200);
    ASSERT_CONTAINS(resp, "\"done\":true");
    erg_free(resp);
    /* the server still serves after all of that */
    ASSERT_EQ_INT(call(srv, "GET", "/info", NULL, NULL, NULL), 200);
    ASSERT_EQ_INT(call(srv, "GET", "/metrics", NULL, NULL, &resp), 200);
    ASSERT_CONTAINS(resp, "ergon_jobs{state=\"done\"} 1");
    erg_free(resp);
    free(id);
    erg_server_free(srv);
    CHECK_NO_LEAKS();
}

/* Every allocation of a whole job's life (register, ranks, windows,
 * results, the end) failing in turn: each request still gets an answer
 * (an error or the normal one) and nothing crashes. */
TEST(allocation_failures_are_answered)
{
    /* n = 1, 2, ...: the n-th allocation of the library (erg__malloc) fails.
     * A run is clean when every answer is the normal one and the job ends;
     * a failure may also be absorbed (a cache that is simply not filled), so
     * stop after 30 clean runs in a row: past the sequence's last
     * allocation, every run is clean. jansson's own allocations are not
     * failed: routed through the same hook, jansson 2.14's json_loadb
     * crashes on a failed allocation (seen under ASan). */
    const char *ps = "[\"forward\",\"backward\"]";
    bool clean = false;
    int clean_streak = 0;
    long n = 1;
    for (; n < 20000 && clean_streak < 30; n++) {
        erg_server *srv = mem_server("AllMaxFrequency", "{\"num_iters\":2}");
        erg__alloc_fail_after(n);
        int st, bad = 0;
        char *resp = NULL;
        const char *ct;
        erg_server_handle(srv, "POST", "/register_job", NULL, JOB2, strlen(JOB2), 0, &st, &resp,
                          &ct);
        ASSERT(resp && st >= 200 && st < 600);
        char id[512] = "";
        if (st == 200) {
            json_t *v = json_loads(resp, JSON_DECODE_ANY, NULL);
            if (json_is_string(v))
                snprintf(id, sizeof id, "%s", json_string_value(v));
            json_decref(v);
        } else {
            bad++;
        }
        erg_free(resp);
        for (int w = 0; w < 2 && id[0]; w++) {
            for (int r = 0; r < 2; r++) {
                char body[1024];
                snprintf(body, sizeof body,
                         "{\"job_id\":\"%s\",\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,"
                         "\"tp_rank\":0,\"pipe_schedule\":%s,\"power_state_range\":[1410]}",
                         id, r, r, ps);
                resp = NULL;
                erg_server_handle(srv, "POST", "/register_rank", NULL, body, strlen(body), 0, &st,
                                  &resp, &ct);
                ASSERT(resp && st >= 200 && st < 600);
                bad += st != 200;
                erg_free(resp);
            }
            for (int r = 0; r < 2; r++) {
                char path[700];
                snprintf(path, sizeof path, "/schedule/%s", id);
                resp = NULL;
                erg_server_handle(srv, "GET", path, r ? "rank=1" : "rank=0", NULL, 0, 0, &st, &resp,
                                  &ct);
                ASSERT(resp && st >= 200 && st < 600);
                bad += st != 200 && !(r == 0 && st == 503); /* rank 0 waits for rank 1 */
                erg_free(resp);
            }
            for (int r = 0; r < 2; r++) {
                char body[1024], path[700];
                snprintf(path, sizeof path, "/result/%s", id);
                snprintf(body, sizeof body,
                         "{\"rank\":%d,\"iter_time\":[1.0,2.0],\"iter_energy\":[3,4],"
                         "\"time_breakdown\":{\"forward\":[[0.1],[0.2]]}}",
                         r);
                resp = NULL;
                erg_server_handle(srv, "POST", path, NULL, body, strlen(body), 0, &st, &resp, &ct);
                ASSERT(resp && st >= 200 && st < 600);
                bad += st != 200;
                erg_free(resp);
            }
        }
        char path[700];
        snprintf(path, sizeof path, "/schedule/%s", id);
        resp = NULL;
        erg_server_handle(srv, "GET", path, "rank=0", NULL, 0, 0, &st, &resp, &ct);
        clean = !bad && id[0] && st == 500 && resp && strstr(resp, "[profiling-done]");
        clean_streak = clean ? clean_streak + 1 : 0;
        erg_free(resp);
        erg__alloc_fail_after(0);
        erg_server_free(srv);
    }
    ASSERT_MSG(clean_streak >= 30, "no clean run up to n = %ld", n);
    CHECK_NO_LEAKS();
    printf("# %ld allocation failure points exercised\n", n - 31);
}

TEST(job_limit)
{
    erg_server_opts o;
    erg_server_opts_init(&o);
    o.db_path = ":memory:";
    o.dump_data = false;
    o.max_jobs = 2;
    erg_server *srv = NULL;
    erg_error err;
    ASSERT_OK(erg_server_new(&o, &srv, &err));
    char *resp;
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, JOB2, NULL), 200);
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, JOB2, NULL), 200);
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, JOB2, &resp), 503);
    ASSERT_CONTAINS(resp, "--max-jobs");
    erg_free(resp);
    /* the two ids differ although registered in the same second */
    ASSERT_EQ_INT(call(srv, "GET", "/v1/jobs", NULL, NULL, &resp), 200);
    json_t *v = json_loads(resp, 0, NULL);
    json_t *jobs = json_object_get(v, "jobs");
    ASSERT_EQ_INT(json_array_size(jobs), 2);
    ASSERT(strcmp(json_string_value(json_object_get(json_array_get(jobs, 0), "job_id")),
                  json_string_value(json_object_get(json_array_get(jobs, 1), "job_id"))));
    json_decref(v);
    erg_free(resp);
    erg_server_free(srv);
}

TEST(scheduler_errors_reach_ranks)
{
    /* A plan whose length does not match the ranks' pipe schedules: the
     * ranks get 400 with the reason at their first schedule request. */
    const char *d = mktmp();
    char plan[512], args[700];
    snprintf(plan, sizeof plan, "%s/p.py", d);
    FILE *f = fopen(plan, "w");
    fprintf(f, "[[1410, 1410, 1200, 1200], [1410, 1410, 1200, 1200]]\n");
    fclose(f);
    snprintf(args, sizeof args, "{\"solution_path\":\"%s\",\"warmup_iters\":0}", plan);
    erg_server *srv = mem_server("PointSolution", args);
    char *id = reg_job(srv);
    ASSERT_EQ_INT(reg_rank(srv, id, 0, "[\"forward\",\"backward\"]"), 200);
    ASSERT_EQ_INT(reg_rank(srv, id, 1, "[\"forward\",\"backward\"]"), 200);
    char path[512], *resp;
    snprintf(path, sizeof path, "/schedule/%s", id);
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=0", NULL, &resp), 400);
    ASSERT_CONTAINS(resp, "4 clocks");
    erg_free(resp);
    free(id);
    erg_server_free(srv);
    /* A bad solution_path is refused when the server starts. */
    erg_server_opts o;
    erg_server_opts_init(&o);
    o.db_path = ":memory:";
    o.dump_data = false;
    o.scheduler = "PointSolution";
    o.scheduler_args = "{\"solution_path\":\"/nonexistent/plan.py\"}";
    o.mode = "frequency";
    erg_error err;
    ASSERT_EQ_INT(erg_server_new(&o, &srv, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "/nonexistent/plan.py");
    o.scheduler = "AllMaxPowerLimit";
    o.scheduler_args = "{}";
    ASSERT_EQ_INT(erg_server_new(&o, &srv, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "power limit");
    o.scheduler = "InstructionProfiler";
    o.mode = NULL;
    ASSERT_EQ_INT(erg_server_new(&o, &srv, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "mode");
}

/* ---------------------------------------------------------------------
 * Over sockets.
 * --------------------------------------------------------------------- */

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    return fd;
}

/* ---------------------------------------------------------------------
 * The Zeus PFO client's requests, byte for byte (docs/zeus-protocol.md §7:
 * httpx 0.28 request lines, headers and compact JSON bodies of
 * JobInfo.dict() / RankInfo.dict()), through register_job -> register_rank
 * -> schedule -> result, against answers FastAPI would give.
 * --------------------------------------------------------------------- */

/* One HTTP/1.1 exchange on its own connection: send, then read the answer
 * (headers + Content-Length body). */
typedef struct raw_resp {
    int status;
    char body[8192];
} raw_resp;

static int zeus_send(int port, const char *method, const char *target, const char *body)
{
    char req[8192];
    int n;
    if (body)
        n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: */*\r\n"
                     "Accept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n"
                     "User-Agent: python-httpx/0.28.1\r\nContent-Length: %zu\r\n"
                     "Content-Type: application/json\r\n\r\n%s",
                     method, target, port, strlen(body), body);
    else
        n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: */*\r\n"
                     "Accept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n"
                     "User-Agent: python-httpx/0.28.1\r\n\r\n",
                     method, target, port);
    ASSERT(n > 0 && n < (int)sizeof req);
    int fd = raw_connect(port);
    ASSERT(write(fd, req, (size_t)n) == n);
    return fd;
}

static void zeus_read(int fd, raw_resp *r)
{
    char buf[16384];
    size_t got = 0;
    long clen = -1;
    char *hdr_end = NULL;
    for (;;) {
        ssize_t k = read(fd, buf + got, sizeof buf - 1 - got);
        ASSERT(k >= 0);
        got += (size_t)k;
        buf[got] = 0;
        if (!hdr_end && (hdr_end = strstr(buf, "\r\n\r\n"))) {
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            ASSERT(cl && cl < hdr_end);
            clen = strtol(cl + 17, NULL, 10);
        }
        if (hdr_end && (long)(got - (size_t)(hdr_end + 4 - buf)) >= clen)
            break;
        ASSERT_MSG(k > 0, "connection closed early: %s", buf);
    }
    close(fd);
    ASSERT(sscanf(buf, "HTTP/1.1 %d", &r->status) == 1);
    snprintf(r->body, sizeof r->body, "%.*s", (int)clen, hdr_end + 4);
}

static void zeus_call(int port, const char *method, const char *target, const char *body,
                      raw_resp *r)
{
    zeus_read(zeus_send(port, method, target, body), r);
}

static char *read_text(const char *path)
{
    char *text;
    size_t len;
    erg_error err;
    ASSERT_MSG(!erg__read_file(path, 1 << 20, &text, &len, &err), "%s", err.msg);
    return text;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fputs(text, f);
    fclose(f);
}

TEST(zeus_client_replay_point_solution)
{
    const char *d = mktmp();
    char db[512], dump[512], plan[512], args[700];
    snprintf(db, sizeof db, "%s/z.db", d);
    snprintf(dump, sizeof dump, "%s/dump", d);
    snprintf(plan, sizeof plan, "%s/freqs_pipeline_00042.py", d);
    /* run_optimization.py's file: a repr'd list of tuples per stage. */
    write_text(plan,
               "[\n"
               "[('forward', 1410), ('forward', 1395), ('backward', 1380), ('backward', 1410)],\n"
               "[('forward', 1395), ('backward', 1395), ('forward', 1380), ('backward', 1365)],\n"
               "]\n# Iteration 42 cost change: -0.5\n# Iteration 42 total cost: 100.0\n"
               "# Iteration 42 total cost with P2P: 120.0\n");
    snprintf(args, sizeof args, "{\"solution_path\": \"%s\"}", plan);
    srv_cfg c = {db, dump, NULL, NULL, NULL, 0, 0, 0, 0, NULL, NULL, args};
    int port;
    pid_t srv = start_server(&c, &port);
    raw_resp r;
    zeus_call(port, "POST", "/register_job",
              "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":2,"
              "\"job_metadata\":\"run-7\"}",
              &r);
    ASSERT_MSG(r.status == 200, "%d %s", r.status, r.body);
    /* "YYYY-MM-DD-HH-MM-SS+dp1+pp2+tp1+PointSolution+run-7" as a JSON string */
    ASSERT_EQ_INT(strlen(r.body), 2 + 19 + strlen("+dp1+pp2+tp1+PointSolution+run-7"));
    ASSERT(r.body[0] == '"' && r.body[5] == '-' && r.body[8] == '-' && r.body[11] == '-' &&
           r.body[14] == '-' && r.body[17] == '-' && r.body[20] == '+');
    ASSERT_CONTAINS(r.body, "+dp1+pp2+tp1+PointSolution+run-7\"");
    char id[128];
    snprintf(id, sizeof id, "%.*s", (int)strlen(r.body) - 2, r.body + 1);
    char target[256];
    snprintf(target, sizeof target, "/register_rank/%s", id);
    for (int k = 0; k < 2; k++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,\"tp_rank\":0,"
                 "\"available_frequencies\":[1410,1395,1380,1365]}",
                 k, k);
        zeus_call(port, "POST", target, body, &r);
        ASSERT_EQ_INT(r.status, 200);
        ASSERT_STR_EQ(r.body, "null");
    }
    /* The schedule: a barrier of both ranks; then the plan verbatim, no
     * warm-up window (FastAPI's compact JSON). */
    static const char *const want[2] = {
        "{\"rank\":0,\"frequencies\":[[\"forward\",1410],[\"forward\",1395],[\"backward\",1380],"
        "[\"backward\",1410]]}",
        "{\"rank\":1,\"frequencies\":[[\"forward\",1395],[\"backward\",1395],[\"forward\",1380],"
        "[\"backward\",1365]]}"};
    for (int round = 0; round < 2; round++) {
        int fd[2];
        for (int k = 0; k < 2; k++) {
            snprintf(target, sizeof target, "/schedule/%s?rank=%d", id, k);
            fd[k] = zeus_send(port, "GET", target, NULL);
        }
        for (int k = 0; k < 2; k++) {
            zeus_read(fd[k], &r);
            ASSERT_EQ_INT(r.status, 200);
            ASSERT_STR_EQ(r.body, want[k]); /* the same plan every window */
        }
        if (round == 1)
            break;
        /* The protocol's results (the Zeus client itself never posts them). */
        snprintf(target, sizeof target, "/result/%s", id);
        for (int k = 0; k < 2; k++) {
            char body[512];
            snprintf(body, sizeof body,
                     "{\"rank\":%d,\"iter_time\":[0.5,0.25],\"iter_energy\":[100,90.5],"
                     "\"time_breakdown\":{\"forward\":[[0.1,0.1],[0.1,0.1]],\"custom\":[[1]]},"
                     "\"energy_breakdown\":{}}",
                     k);
            zeus_call(port, "POST", target, body, &r);
            ASSERT_MSG(r.status == 200, "%d %s", r.status, r.body);
            ASSERT_STR_EQ(r.body, "null");
        }
    }
    /* Dumps in Zeus's layout, as pydantic's .json() writes them. */
    char p[900];
    snprintf(p, sizeof p, "%s/%s/perseus.json", dump, id);
    ASSERT(access(p, F_OK) != 0);
    snprintf(p, sizeof p, "%s/%s/ranks.json", dump, id);
    char *t = read_text(p);
    ASSERT_STR_EQ(t, "[{\"rank\": 0, \"dp_rank\": 0, \"pp_rank\": 0, \"tp_rank\": 0, "
                     "\"available_frequencies\": [1410, 1395, 1380, 1365]}, {\"rank\": 1, "
                     "\"dp_rank\": 0, \"pp_rank\": 1, \"tp_rank\": 0, \"available_frequencies\": "
                     "[1410, 1395, 1380, 1365]}]");
    erg__free(t);
    snprintf(p, sizeof p, "%s/%s/0.sched.json", dump, id);
    t = read_text(p);
    ASSERT_STR_EQ(t, "[{\"rank\": 0, \"frequencies\": [[\"forward\", 1410], [\"forward\", 1395], "
                     "[\"backward\", 1380], [\"backward\", 1410]]}, {\"rank\": 1, \"frequencies\": "
                     "[[\"forward\", 1395], [\"backward\", 1395], [\"forward\", 1380], "
                     "[\"backward\", 1365]]}]");
    erg__free(t);
    snprintf(p, sizeof p, "%s/%s/0.prof.json", dump, id);
    t = read_text(p);
    ASSERT_STR_EQ(t, "[{\"rank\": 0, \"iter_time\": [0.5, 0.25], \"iter_energy\": [100.0, 90.5], "
                     "\"time_breakdown\": {\"forward\": [[0.1, 0.1], [0.1, 0.1]], \"custom\": "
                     "[[1.0]]}, \"energy_breakdown\": {}}, {\"rank\": 1, \"iter_time\": [0.5, "
                     "0.25], \"iter_energy\": [100.0, 90.5], \"time_breakdown\": {\"forward\": "
                     "[[0.1, 0.1], [0.1, 0.1]], \"custom\": [[1.0]]}, \"energy_breakdown\": {}}]");
    erg__free(t);
    /* The job record keeps what the client sent (job_metadata). */
    snprintf(target, sizeof target, "/v1/jobs/%s", id);
    zeus_call(port, "GET", target, NULL, &r);
    ASSERT_CONTAINS(r.body, "\"scheduler\":\"zeus:PointSolution\"");
    /* Validation as FastAPI: 422 with a detail. */
    zeus_call(port, "POST", "/register_job",
              "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":3,"
              "\"job_metadata\":null}",
              &r);
    ASSERT_EQ_INT(r.status, 422);
    ASSERT_CONTAINS(r.body, "\"detail\"");
    /* A kronos JobInfo on the same port: the kronos wire, unknown fields kept too. */
    zeus_call(port, "POST", "/register_job",
              "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":2,"
              "\"framework\":\"merak\",\"model_name\":\"gpt\",\"partition_method\":\"u\","
              "\"microbatch_size\":1,\"num_microbatches\":2,\"run_tag\":\"kronos-extra\"}",
              &r);
    ASSERT_MSG(r.status == 200, "%d %s", r.status, r.body);
    /* One configuration serves both protocols: the Zeus plan's PointSolution. */
    ASSERT_CONTAINS(r.body, "+merak+gpt+u+dp1+pp2+tp1+mbs1+nmb2+PointSolution\"");
    stop_server(srv);
    sqlite3 *q;
    ASSERT(sqlite3_open(db, &q) == SQLITE_OK);
    sqlite3_stmt *st;
    ASSERT(sqlite3_prepare_v2(q, "SELECT group_concat(info, ' ') FROM jobs", -1, &st, NULL) ==
           SQLITE_OK);
    ASSERT(sqlite3_step(st) == SQLITE_ROW);
    ASSERT_CONTAINS((const char *)sqlite3_column_text(st, 0), "\"job_metadata\":\"run-7\"");
    ASSERT_CONTAINS((const char *)sqlite3_column_text(st, 0), "\"run_tag\":\"kronos-extra\"");
    sqlite3_finalize(st);
    sqlite3_close(q);
}

TEST(zeus_client_replay_instruction_profiler)
{
    const char *d = mktmp();
    char db[512], dump[512];
    snprintf(db, sizeof db, "%s/z.db", d);
    snprintf(dump, sizeof dump, "%s/dump", d);
    srv_cfg c = {db,
                 dump,
                 NULL,
                 NULL,
                 NULL,
                 0,
                 0,
                 0,
                 0,
                 NULL,
                 "InstructionProfiler",
                 "{\"minimum_frequency\": 1380, \"warmup_step_ratio\": 0.1}"};
    int port;
    pid_t srv = start_server(&c, &port);
    raw_resp r;
    zeus_call(port, "POST", "/register_job",
              "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":2,"
              "\"job_metadata\":null}",
              &r);
    ASSERT_MSG(r.status == 200, "%d %s", r.status, r.body);
    ASSERT_CONTAINS(r.body, "+dp1+pp2+tp1+InstructionProfiler\"");
    char id[128], target[256];
    snprintf(id, sizeof id, "%.*s", (int)strlen(r.body) - 2, r.body + 1);
    snprintf(target, sizeof target, "/register_rank/%s", id);
    for (int k = 0; k < 2; k++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,\"tp_rank\":0,"
                 "\"available_frequencies\":[1410,1395,1380,1365],"
                 "\"pipe_schedule\":[\"forward\",\"backward\"]}",
                 k, k);
        zeus_call(port, "POST", target, body, &r);
        ASSERT_EQ_INT(r.status, 200);
    }
    /* 2 warm-up windows at the maximum, then 1410, 1395, 1380 (>= minimum). */
    static const int want[5] = {1410, 1410, 1410, 1395, 1380};
    for (int w = 0; w <= 5; w++) {
        int fd[2];
        for (int k = 0; k < 2; k++) {
            snprintf(target, sizeof target, "/schedule/%s?rank=%d", id, k);
            fd[k] = zeus_send(port, "GET", target, NULL);
        }
        for (int k = 0; k < 2; k++) {
            zeus_read(fd[k], &r);
            if (w == 5) { /* the end: Zeus's RuntimeError, a 500 with the marker */
                ASSERT_EQ_INT(r.status, 500);
                ASSERT_CONTAINS(r.body, "[profiling-done]");
                continue;
            }
            ASSERT_MSG(r.status == 200, "window %d: %d %s", w, r.status, r.body);
            char exp[160];
            snprintf(exp, sizeof exp,
                     "{\"rank\":%d,\"frequencies\":[[\"forward\",%d],[\"backward\",%d]]}", k,
                     want[w], want[w]);
            ASSERT_STR_EQ(r.body, exp);
        }
        if (w == 5)
            break;
        snprintf(target, sizeof target, "/result/%s", id);
        for (int k = 0; k < 2; k++) {
            char body[512];
            /* forward takes (k + 1) * 1410 / f * 0.01 s; no energy breakdown */
            double tf = (k + 1) * 1410.0 / want[w] * 0.01;
            snprintf(body, sizeof body,
                     "{\"rank\":%d,\"iter_time\":[1.0,1.0],\"iter_energy\":[200.0,200.0],"
                     "\"time_breakdown\":{\"forward\":[[%.17g],[%.17g]],\"backward\":[[0.02],"
                     "[0.02]]},\"energy_breakdown\":{}}",
                     k, tf * 3, tf);
            zeus_call(port, "POST", target, body, &r);
            ASSERT_MSG(r.status == 200, "%d %s", r.status, r.body);
        }
    }
    stop_server(srv);
    char p[900];
    snprintf(p, sizeof p, "%s/%s/None+None+None+dp1+tp1+pp2+mbsNone+nmbNone.csv", dump, id);
    char *t = read_text(p);
    char a[40], line[200];
    ASSERT(!strncmp(t, "stage,instruction,frequency,time,energy\n", 40));
    /* stage 1 forward at 1395: the first iteration is dropped, energy empty */
    snprintf(line, sizeof line, "\n1,forward,1395,%s,\n",
             erg__fmt_double_py(2 * 1410.0 / 1395 * 0.01, a, sizeof a));
    ASSERT_CONTAINS(t, line);
    ASSERT(!strstr(t, "nan"));
    erg__free(t);
    snprintf(p, sizeof p, "%s/%s/ranks.json", dump, id);
    t = read_text(p);
    ASSERT_CONTAINS(t, "\"available_frequencies\": [1410, 1395, 1380, 1365], \"pipe_schedule\": "
                       "[\"forward\", \"backward\"]}");
    erg__free(t);
}

TEST(huge_bodies_and_slow_clients)
{
    const char *d = mktmp();
    char db[512], dump[512], url[64];
    snprintf(db, sizeof db, "%s/s.db", d);
    snprintf(dump, sizeof dump, "%s/dump", d);
    srv_cfg c = {db, dump, NULL, NULL, NULL, 0, 0, 0, 1.0, NULL, NULL, NULL};
    int port;
    pid_t srv = start_server(&c, &port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    /* A slow client: half a request line, then silence. */
    int slow = raw_connect(port);
    ASSERT(write(slow, "GET /inf", 8) == 8);
    /* A body over the limit (declared up front): 413 at once. */
    int big = raw_connect(port);
    const char *hdr = "POST /register_job HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n"
                      "Content-Type: application/json\r\n\r\n";
    ASSERT(write(big, hdr, strlen(hdr)) == (ssize_t)strlen(hdr));
    char buf[512] = {0};
    ssize_t n = read(big, buf, sizeof buf - 1);
    ASSERT(n > 0);
    ASSERT_CONTAINS(buf, "413");
    close(big);
    /* A chunked body over the limit (no length up front). */
    int status;
    size_t blen = (16u << 20) + 100;
    char *body = malloc(blen + 1);
    memset(body, ' ', blen);
    body[blen] = 0;
    body[0] = '{';
    body[blen - 1] = '}';
    char *resp = http(url, "POST", "/register_job", body, &status);
    ASSERT_EQ_INT(status, 413);
    erg_free(resp);
    free(body);
    /* Meanwhile normal requests work. */
    resp = http(url, "GET", "/info", NULL, &status);
    ASSERT_EQ_INT(status, 200);
    ASSERT_CONTAINS(resp, "AllMaxFrequency");
    erg_free(resp);
    /* The slow client is dropped after the connection timeout (1 s). */
    struct timeval tv = {5, 0};
    setsockopt(slow, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    n = read(slow, buf, sizeof buf);
    ASSERT_MSG(n <= 0, "the server answered a half request");
    close(slow);
    resp = http(url, "GET", "/healthz", NULL, &status);
    ASSERT_EQ_INT(status, 200);
    erg_free(resp);
    stop_server(srv);
}

/* Two jobs x four ranks: InstructionProfiler, then PointSolution with plans
 * built from the measured profile; the dumps have Perseus's layout. */
TEST(profile_then_point_solution_8_processes)
{
    const char *d = mktmp();
    char db[512], dump[512], url[64];
    snprintf(db, sizeof db, "%s/s.db", d);
    snprintf(dump, sizeof dump, "%s/dump", d);
    srv_cfg c = {db, dump, "AllMaxFrequency", NULL, NULL, 0, 0, 0, 0, d, NULL, NULL};
    int port;
    pid_t srv = start_server(&c, &port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    const int S = 4, M = 4;
    char *jobs[2];
    pid_t pids[8];
    for (int j = 0; j < 2; j++)
        jobs[j] = register_job(url, S, 1, M, "InstructionProfiler",
                               "{\"minimum_power_state\": 700}", j ? "modelB" : "modelA");
    for (int j = 0; j < 2; j++)
        for (int r = 0; r < S; r++) {
            rank_cfg rc = {url, jobs[j], r, S, M, r, 0, 0, 4, 0, NULL, 1.0};
            pids[j * S + r] = fork_rank(&rc);
        }
    ASSERT_EQ_INT(wait_all(pids, 8), 0);
    /* The profile CSV of job 0: 7 states (>= 700 MHz) x 4 stages x F/B. */
    char csv[1024];
    snprintf(csv, sizeof csv, "%s/%s/sim+modelA+uniform+dp1+tp1+pp4+mbs1+nmb4.csv", dump, jobs[0]);
    erg_profile *prof = NULL;
    erg_error err;
    ASSERT_OK(erg_profile_read_csv(csv, &prof, &err));
    ASSERT_EQ_INT(erg_profile_num_stages(prof), S);
    ASSERT_EQ_INT(erg_profile_num_points(prof, 2, ERG_BACKWARD), NSTATES);
    erg_profile_free(prof);
    char *text;
    size_t len;
    ASSERT_OK(erg__read_file(csv, 1 << 20, &text, &len, &err));
    ASSERT(!strncmp(text, "stage,instruction,frequency,time,energy\n", 40));
    /* the measured time of stage 3 backward at 1050 MHz is the model's */
    char want[128], t1[40], e1[40];
    /* mean over iterations 1..3 (the first is dropped) of 4 samples each */
    double ts = 0, es = 0, t = sim_time(S, 3, 1, 1050);
    for (int k = 0; k < 12; k++) {
        ts += t;
        es += t * sim_power(S, 3, 1, 1050);
    }
    snprintf(want, sizeof want, "3,backward,1050,%s,%s\n",
             erg__fmt_double_py(ts / 12, t1, sizeof t1),
             erg__fmt_double_py(es / 12, e1, sizeof e1));
    ASSERT_CONTAINS(text, want);
    erg__free(text);
    /* Windows 0-1 are all-max warm-ups, 2-8 the sweep; the layout is Perseus's. */
    char p[1024];
    for (int w = 0; w < 2 + NSTATES; w++) {
        snprintf(p, sizeof p, "%s/%s/%d.sched.json", dump, jobs[1], w);
        json_t *v = load_json(p);
        ASSERT_EQ_INT(json_array_size(v), 4);
        json_t *e0 = json_array_get(v, 0);
        ASSERT_EQ_INT(json_object_size(e0), 2);
        int want_state = w < 2 ? 1410 : STATES[w - 2];
        ASSERT_EQ_INT(json_integer_value(json_array_get(json_object_get(e0, "power_states"), 0)),
                      want_state);
        json_decref(v);
        snprintf(p, sizeof p, "%s/%s/%d.prof.json", dump, jobs[1], w);
        v = load_json(p);
        ASSERT_EQ_INT(json_array_size(v), 4);
        json_t *r3 = json_array_get(v, 3);
        ASSERT_EQ_INT(json_integer_value(json_object_get(r3, "rank")), 3);
        ASSERT_EQ_INT(json_array_size(json_object_get(r3, "iter_time")), 4);
        ASSERT(json_object_get(r3, "time_breakdown") && json_object_get(r3, "energy_breakdown"));
        json_decref(v);
    }
    snprintf(p, sizeof p, "%s/%s/%d.sched.json", dump, jobs[1], 2 + NSTATES);
    ASSERT(!exists(p));
    snprintf(p, sizeof p, "%s/%s/perseus.json", dump, jobs[0]);
    json_t *pj = load_json(p);
    ASSERT_STR_EQ(json_string_value(json_object_get(pj, "scheduler")), "InstructionProfiler");
    ASSERT_STR_EQ(json_string_value(json_object_get(pj, "mode")), "frequency");
    json_decref(pj);

    /* The measured profile feeds the planner through the CLI: `ergon plan
     * perseus` (the whole frontier), then `ergon sample` keeps a few plans. */
    char exe[1024], cmd[8192], plans[600], frontier[600];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ASSERT(el > 0);
    exe[el] = 0;
    *strrchr(exe, '/') = 0; /* build/tests */
    *strrchr(exe, '/') = 0; /* build */
    snprintf(frontier, sizeof frontier, "%s/frontier", d);
    snprintf(plans, sizeof plans, "%s/plans", d);
    snprintf(cmd, sizeof cmd,
             "'%s/ergon' plan perseus --profile '%s' --stages %d --microbatches %d --out '%s' "
             "--blocking-power 80 --formats csv,py --quiet && '%s/ergon' sample '%s' '%s' -n 40 "
             ">/dev/null",
             exe, csv, S, M, frontier, exe, frontier, plans);
    ASSERT_MSG(system(cmd) == 0, "%s failed", cmd);
    int n_plans = 0;
    DIR *dd = opendir(plans);
    ASSERT(dd);
    for (struct dirent *e; (e = readdir(dd));)
        n_plans += strstr(e->d_name, ".py") != NULL;
    closedir(dd);
    ASSERT_MSG(n_plans >= 2 && n_plans <= 20, "%d sampled plans", n_plans);
    printf("# the frontier of the measured profile, sampled: %d plans\n", n_plans);
    char args[800];
    snprintf(args, sizeof args, "{\"solution_path\": \"%s\", \"warmup_iters\": 1}", plans);
    char *pjobs[2];
    for (int j = 0; j < 2; j++)
        pjobs[j] = register_job(url, S, 1, M, "PointSolution", args, j ? "modelB" : "modelA");
    for (int j = 0; j < 2; j++)
        for (int r = 0; r < S; r++) {
            rank_cfg rc = {url, pjobs[j], r, S, M, r, 0, 0, 3, 0, NULL, 1.0};
            pids[j * S + r] = fork_rank(&rc);
        }
    ASSERT_EQ_INT(wait_all(pids, 8), 0);
    /* Window 0 is the all-max warm-up; window 1 + i ran the i-th sampled plan,
     * expanded over the pipe schedule (load/p2p inherit the compute clock). */
    for (int w = 0; w <= n_plans; w++) {
        snprintf(p, sizeof p, "%s/%s/%d.sched.json", dump, pjobs[0], w);
        json_t *v = load_json(p);
        if (w > 0) {
            int **st = NULL, *lens = NULL, ns = 0;
            char plan[1200];
            snprintf(plan, sizeof plan, "%s/freqs_pipeline_%05d.py", plans, w - 1);
            if (!exists(plan)) { /* sample keeps original numbers: find the w-th file */
                struct dirent **list = NULL;
                int nl = scandir(plans, &list, NULL, alphasort), k = 0;
                for (int i = 0; i < nl; i++) {
                    if (strstr(list[i]->d_name, ".py") && k++ == w - 1)
                        snprintf(plan, sizeof plan, "%s/%s", plans, list[i]->d_name);
                    free(list[i]);
                }
                free(list);
            }
            ASSERT_OK(erg__srv_plan_load(plan, &st, &lens, &ns, &err));
            for (int stage = 0; stage < S; stage++) {
                json_t *ps = json_object_get(json_array_get(v, (size_t)stage), "power_states");
                const char *names[256];
                int n = pipe_schedule(S, M, stage, names), k = 0;
                ASSERT_EQ_INT(json_array_size(ps), n);
                int cur = st[stage][0];
                for (int i = 0; i < n; i++) {
                    if (!strcmp(names[i], "forward") || !strcmp(names[i], "backward"))
                        cur = st[stage][k++];
                    ASSERT_EQ_INT(json_integer_value(json_array_get(ps, (size_t)i)), cur);
                }
            }
            erg__srv_plan_stages_free(st, lens, ns);
        }
        json_decref(v);
    }
    snprintf(p, sizeof p, "%s/%s/%d.sched.json", dump, pjobs[0], n_plans + 1);
    ASSERT(!exists(p));
    /* Frontier on the planner's whole frontier: a straggler slowdown posted
     * during the run switches to the plan erg_frontier_choose_slowdown picks. */
    snprintf(args, sizeof args, "{\"frontier_dir\": \"%s\"}", frontier);
    char *fjob = register_job(url, S, 1, M, "Frontier", args, "modelA");
    for (int r = 0; r < S; r++) {
        rank_cfg rc = {url, fjob, r, S, M, r, 0, 0, 2, 50, NULL, 1.0};
        pids[r] = fork_rank(&rc);
    }
    char *fesc = curl_easy_escape(NULL, fjob, 0), fpath[1200];
    int st_code;
    long straggler_from = -1;
    for (int i = 0; i < 1000; i++) {
        snprintf(fpath, sizeof fpath, "/v1/jobs/%s", fesc);
        char *resp = http(url, "GET", fpath, NULL, &st_code);
        json_t *v = json_loads(resp, 0, NULL);
        long w = (long)json_integer_value(json_object_get(v, "window"));
        json_decref(v);
        erg_free(resp);
        if (straggler_from < 0 && w >= 1) {
            snprintf(fpath, sizeof fpath, "/v1/jobs/%s/straggler", fesc);
            resp = http(url, "POST", fpath, "{\"slowdown\": 1.15}", &st_code);
            ASSERT_EQ_INT(st_code, 200);
            v = json_loads(resp, 0, NULL);
            straggler_from = (long)json_integer_value(json_object_get(v, "applies_from_window"));
            json_decref(v);
            erg_free(resp);
        }
        if (straggler_from >= 0 && w > straggler_from) {
            snprintf(fpath, sizeof fpath, "/v1/jobs/%s/end", fesc);
            resp = http(url, "POST", fpath, NULL, &st_code);
            ASSERT_EQ_INT(st_code, 200);
            erg_free(resp);
            break;
        }
        usleep(10000);
    }
    ASSERT(straggler_from >= 1);
    ASSERT_EQ_INT(wait_all(pids, S), 0);
    erg_frontier *fr = NULL;
    ASSERT_OK(erg_frontier_read_dir(frontier, NULL, &fr, &err));
    size_t want_idx[2];
    ASSERT_OK(erg_frontier_choose_slowdown(fr, 1.0, &want_idx[0], &err));
    ASSERT_OK(erg_frontier_choose_slowdown(fr, 1.15, &want_idx[1], &err));
    ASSERT(want_idx[0] != want_idx[1]);
    for (int k = 0; k < 2; k++) {
        long w = k ? straggler_from : 0;
        snprintf(p, sizeof p, "%s/%s/%ld.sched.json", dump, fjob, w);
        json_t *v = load_json(p);
        erg_plan *pl = NULL;
        ASSERT_OK(erg_frontier_plan(fr, want_idx[k], &pl, &err));
        for (int stage = 0; stage < S; stage++) {
            json_t *ps = json_object_get(json_array_get(v, (size_t)stage), "power_states");
            const char *names[256];
            int n = pipe_schedule(S, M, stage, names), c2 = 0;
            const int *fq = erg_plan_stage_freqs_const(pl, stage);
            for (int i = 0; i < n; i++)
                if (!strcmp(names[i], "forward") || !strcmp(names[i], "backward")) {
                    ASSERT_EQ_INT(json_integer_value(json_array_get(ps, (size_t)i)), fq[c2]);
                    c2++;
                }
        }
        erg_plan_free(pl);
        json_decref(v);
    }
    erg_frontier_free(fr);
    curl_free(fesc);
    erg_free(fjob);

    int status;
    char *m = http(url, "GET", "/metrics", NULL, &status);
    ASSERT_CONTAINS(m, "ergon_jobs{state=\"done\"} 5");
    /* the planned clocks use less energy in the model than all-max */
    const char *sv = strstr(m, "\nergon_energy_saved_joules ");
    ASSERT(sv);
    ASSERT(atof(sv + 27) > 0);
    erg_free(m);
    stop_server(srv);
    for (int j = 0; j < 2; j++) {
        erg_free(jobs[j]);
        erg_free(pjobs[j]);
    }
}

/* Data parallelism (the 3D wrapper): 2 stages x 2 replicas, replica 1 is
 * 20 % slower; the profile holds, per stage, the max of the replicas' times
 * and the sum of their energies. */
TEST(data_parallel_results_are_aggregated_per_stage)
{
    const char *d = mktmp();
    char db[512], dump[512], url[64];
    snprintf(db, sizeof db, "%s/s.db", d);
    snprintf(dump, sizeof dump, "%s/dump", d);
    srv_cfg c = {db, dump, "AllMaxFrequency", NULL, NULL, 0, 0, 0, 0, NULL, NULL, NULL};
    int port;
    pid_t srv = start_server(&c, &port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    const int S = 2, M = 2;
    char *job =
        register_job(url, S, 2, M, "InstructionProfiler", "{\"minimum_power_state\": 1000}", "dp");
    pid_t pids[4];
    for (int r = 0; r < 4; r++) {
        /* Merak's grid: pp varies fastest, so rank = dp * S + pp. */
        rank_cfg rc = {url, job, r, S, M, r % S, r / S, 0, 3, 0, NULL, r / S ? 1.2 : 1.0};
        pids[r] = fork_rank(&rc);
    }
    ASSERT_EQ_INT(wait_all(pids, 4), 0);
    stop_server(srv);
    char csv[1024];
    snprintf(csv, sizeof csv, "%s/%s/sim+dp+uniform+dp2+tp1+pp2+mbs1+nmb2.csv", dump, job);
    char *text;
    size_t len;
    erg_error err;
    ASSERT_OK(erg__read_file(csv, 1 << 20, &text, &len, &err));
    /* stage 1 forward at 1230 MHz: mean over the kept iterations of the
     * per-sample max (the slow replica) and sum (both replicas) */
    double t = sim_time(S, 1, 0, 1230), ts = 0, es = 0, pw = sim_power(S, 1, 0, 1230);
    for (int k = 0; k < 2 * M; k++) { /* 2 kept iterations x M samples */
        ts += t * 1.2;
        es += t * pw + t * 1.2 * pw;
    }
    char want[160], a[40], b[40];
    snprintf(want, sizeof want, "1,forward,1230,%s,%s\n",
             erg__fmt_double_py(ts / (2 * M), a, sizeof a),
             erg__fmt_double_py(es / (2 * M), b, sizeof b));
    ASSERT_CONTAINS(text, want);
    erg__free(text);
    /* every rank of a stage got the same schedule */
    char p[1024];
    snprintf(p, sizeof p, "%s/%s/3.sched.json", dump, job);
    json_t *v = load_json(p);
    ASSERT_EQ_INT(json_array_size(v), 4);
    ASSERT(json_equal(json_object_get(json_array_get(v, 1), "power_states"),
                      json_object_get(json_array_get(v, 3), "power_states")));
    json_decref(v);
    erg_free(job);
}

/* Kill -9 the server while a window is half reported, restart it on the
 * same database: no acknowledged result is lost and the job completes. */
TEST(crash_and_restart_mid_window)
{
    const char *d = mktmp();
    char db[512], dump[512], url[64], acks[600];
    snprintf(db, sizeof db, "%s/s.db", d);
    snprintf(dump, sizeof dump, "%s/dump", d);
    snprintf(acks, sizeof acks, "%s/acks.txt", d);
    srv_cfg c = {db,   dump, "AllMaxFrequency", "{\"num_iters\": 4}", NULL, 0, 0, 0, 0, NULL,
                 NULL, NULL};
    int port;
    pid_t srv = start_server(&c, &port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    const int S = 4, M = 2;
    char *job = register_job(url, S, 1, M, NULL, NULL, "crash");
    pid_t pids[4];
    for (int r = 0; r < S; r++) {
        /* rank 3 reports late, so windows stay half reported for a while */
        rank_cfg rc = {url, job, r, S, M, r, 0, 0, 2, r == 3 ? 400 : 0, acks, 1.0};
        pids[r] = fork_rank(&rc);
    }
    /* Three times: wait until window k (1, 2, 3) has some but not all of
     * its results, kill -9 the server, restart it on the same database. */
    char spath[1024];
    char *esc = curl_easy_escape(NULL, job, 0);
    snprintf(spath, sizeof spath, "/v1/jobs/%s", esc);
    c.port = port;
    for (long target = 1; target <= 3; target++) {
        erg_srv_client *cl = NULL;
        erg_error err;
        erg_srv_client_opts co;
        erg_srv_client_opts_init(&co);
        co.backoff_max_s = 0.2;
        ASSERT_OK(erg_srv_client_new(url, &co, &cl, &err));
        bool killed = false;
        for (int i = 0; i < 1000 && !killed; i++) {
            int status;
            char *resp = NULL;
            ASSERT_OK(erg_srv_client_request(cl, "GET", spath, NULL, &status, &resp, &err));
            json_t *v = json_loads(resp, 0, NULL);
            long w = (long)json_integer_value(json_object_get(v, "window"));
            long nres = (long)json_integer_value(json_object_get(v, "results_in_window"));
            json_decref(v);
            erg_free(resp);
            if (w == target && nres >= 1 && nres < S) {
                kill(srv, SIGKILL);
                waitpid(srv, NULL, 0);
                killed = true;
            } else {
                ASSERT_MSG(w <= target, "window %ld passed before the kill in window %ld", w,
                           target);
                usleep(5000);
            }
        }
        erg_srv_client_free(cl);
        ASSERT_MSG(killed, "never saw window %ld half reported", target);
        usleep(200000);
        int port2;
        srv = start_server(&c, &port2);
        ASSERT_EQ_INT(port2, port);
    }
    ASSERT_EQ_INT(wait_all(pids, S), 0);
    /* The job finished: 4 windows of 4 results each, all dumped. */
    int status;
    char *resp = http(url, "GET", spath, NULL, &status);
    ASSERT_CONTAINS(resp, "\"state\":\"done\"");
    erg_free(resp);
    stop_server(srv);
    sqlite3 *h = NULL;
    ASSERT(sqlite3_open(db, &h) == SQLITE_OK);
    FILE *f = fopen(acks, "r");
    ASSERT(f);
    int r;
    long w;
    int nacks = 0;
    while (fscanf(f, "%d %ld", &r, &w) == 2) {
        sqlite3_stmt *q;
        sqlite3_prepare_v2(h, "SELECT COUNT(*) FROM results WHERE job_id=? AND window=? AND rank=?",
                           -1, &q, NULL);
        sqlite3_bind_text(q, 1, job, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(q, 2, w);
        sqlite3_bind_int(q, 3, r);
        ASSERT(sqlite3_step(q) == SQLITE_ROW);
        ASSERT_MSG(sqlite3_column_int(q, 0) == 1, "acknowledged result (rank %d, window %ld) lost",
                   r, w);
        sqlite3_finalize(q);
        nacks++;
    }
    fclose(f);
    ASSERT_EQ_INT(nacks, 16);
    sqlite3_close(h);
    for (int k = 0; k < 4; k++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s/%d.prof.json", dump, job, k);
        json_t *v = load_json(p);
        ASSERT_EQ_INT(json_array_size(v), 4);
        json_decref(v);
    }
    curl_free(esc);
    erg_free(job);
}

/* Frontier: the straggler endpoint switches to the minimum-energy plan that
 * meets the new deadline at the next window. */
TEST(frontier_switches_plan_for_straggler)
{
    const char *d = mktmp();
    char fdir[600], p[1024];
    snprintf(fdir, sizeof fdir, "%s/frontier", d);
    erg_error err;
    ASSERT_OK(erg__mkdir_p(fdir, &err));
    /* Three plans, slowest first: (time, energy) = (1.4, 70), (1.2, 80), (1.0, 100). */
    const int clocks[3] = {1000, 1200, 1410};
    snprintf(p, sizeof p, "%s/frontier.csv", fdir);
    FILE *f = fopen(p, "w");
    fprintf(f, "time,energy\n1.4,70\n1.2,80\n1.0,100\n");
    fclose(f);
    for (int k = 0; k < 3; k++) {
        erg_plan *pl = NULL;
        ASSERT_OK(erg_plan_new(NULL, 2, 2, &pl, &err));
        erg_plan_fill(pl, clocks[k]);
        snprintf(p, sizeof p, "%s/freqs_pipeline_%05d.py", fdir, k);
        ASSERT_OK(erg_plan_write_py(pl, NULL, p, &err));
        erg_plan_free(pl);
    }
    char args[800], db[700];
    snprintf(args, sizeof args, "{\"frontier_dir\": \"%s\"}", fdir);
    snprintf(db, sizeof db, "%s/state.sqlite", d);
    erg_server *srv = db_server("Frontier", args, db);
    char *resp;
    char body[2048];
    ASSERT_EQ_INT(call(srv, "POST", "/v1/jobs", NULL,
                       "{\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":2,"
                       "\"framework\":\"f\",\"model_name\":\"m\",\"partition_method\":\"p\","
                       "\"microbatch_size\":1,\"num_microbatches\":2}",
                       &resp),
                  201);
    json_t *v = json_loads(resp, 0, NULL);
    char id[512];
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(v, "job_id")));
    json_decref(v);
    erg_free(resp);
    char base[700];
    snprintf(base, sizeof base, "/v1/jobs/%s", id);
    for (int r = 0; r < 2; r++) {
        snprintf(body, sizeof body,
                 "{\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,\"tp_rank\":0,\"pipe_schedule\":"
                 "[\"forward\",\"forward\",\"p2p\",\"backward\",\"backward\"],"
                 "\"power_state_range\":[1410,1200,1000]}",
                 r, r);
        snprintf(p, sizeof p, "%s/ranks", base);
        ASSERT_EQ_INT(call(srv, "POST", p, NULL, body, NULL), 200);
    }
    /* slowdown -> expected clock of the window after it is set */
    const struct {
        const char *target;
        int clock;
    } steps[] = {{NULL, 1410},
                 {"{\"slowdown\": 1.25}", 1200},
                 {"{\"deadline_s\": 5}", 1000},
                 {"{\"deadline_s\": 0.5}", 1410}, /* impossible: fastest */
                 {"{\"slowdown\": 1.0}", 1410}};
    char sp[800], rp[800], stp[800];
    snprintf(sp, sizeof sp, "%s/schedule", base);
    snprintf(rp, sizeof rp, "%s/results", base);
    snprintf(stp, sizeof stp, "%s/straggler", base);
    for (int w = 0; w < 5; w++) {
        if (w == 2 || w == 4) {
            /* Restart on the same database: the straggler targets of past and
             * current windows are replayed with the scheduler. */
            erg_server_free(srv);
            srv = db_server("Frontier", args, db);
        }
        for (int r = 0; r < 2; r++) {
            char q[32];
            snprintf(q, sizeof q, "rank=%d", r);
            int st = call(srv, "GET", sp, q, NULL, &resp);
            if (r == 0)
                ASSERT_EQ_INT(st, 202); /* rank 1 has not asked yet */
            else {
                ASSERT_EQ_INT(st, 200);
                char want[64];
                snprintf(want, sizeof want, "[%d, %d, %d, %d, %d]", steps[w].clock, steps[w].clock,
                         steps[w].clock, steps[w].clock, steps[w].clock);
                ASSERT_CONTAINS(resp, want);
            }
            erg_free(resp);
        }
        if (w + 1 < 5) {
            ASSERT_EQ_INT(call(srv, "POST", stp, NULL, steps[w + 1].target, &resp), 200);
            ASSERT_CONTAINS(resp, "applies_from_window");
            erg_free(resp);
        }
        for (int r = 0; r < 2; r++) {
            snprintf(body, sizeof body,
                     "{\"rank\":%d,\"window\":%d,\"iter_time\":[1.0],\"iter_energy\":[50.0]}", r,
                     w);
            ASSERT_EQ_INT(call(srv, "POST", rp, NULL, body, NULL), 200);
            ASSERT_EQ_INT(call(srv, "POST", rp, NULL, body, &resp), 200); /* retry: duplicate */
            ASSERT_CONTAINS(resp, "\"duplicate\":true");
            erg_free(resp);
        }
    }
    ASSERT_EQ_INT(call(srv, "POST", stp, NULL, "{\"slowdown\": 0.5}", NULL), 400);
    ASSERT_EQ_INT(call(srv, "POST", stp, NULL, "{}", NULL), 400);
    snprintf(p, sizeof p, "%s/end", base);
    ASSERT_EQ_INT(call(srv, "POST", p, NULL, NULL, NULL), 200);
    ASSERT_EQ_INT(call(srv, "GET", sp, "rank=0", NULL, &resp), 200);
    ASSERT_CONTAINS(resp, "\"done\":true");
    erg_free(resp);
    erg_server_free(srv);
}

TEST(rank_timeout_aborts_and_idle_jobs_are_evicted)
{
    const char *d = mktmp();
    char db[512], dump[512], url[64];
    snprintf(db, sizeof db, "%s/s.db", d);
    snprintf(dump, sizeof dump, "%s/dump", d);
    srv_cfg c = {db, dump, "AllMaxFrequency", NULL, NULL, 0, 0.5, 0, 0, NULL, NULL, NULL};
    int port;
    pid_t srv = start_server(&c, &port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    char *job = register_job(url, 2, 1, 1, NULL, NULL, "timeout");
    erg_srv_client *cl = NULL;
    erg_error err;
    ASSERT_OK(erg_srv_client_new(url, NULL, &cl, &err));
    const char *ps[] = {"forward", "backward"};
    ASSERT_OK(erg_srv_client_register_rank(cl, job, 0, 0, 0, 0, ps, 2, STATES, 2, &err));
    /* rank 1 never registers: rank 0's wait ends with the job aborted */
    int *states;
    size_t n;
    long w;
    bool done;
    ASSERT_EQ_INT(erg_srv_client_fetch_schedule(cl, job, 0, &states, &n, &w, &done, &err),
                  ERG_ECANCELED);
    ASSERT_CONTAINS(err.msg, "did not register");
    erg_srv_client_free(cl);
    erg_free(job);
    stop_server(srv);
    /* idle eviction */
    c.rank_timeout_s = 0;
    c.idle_s = 0.3;
    srv = start_server(&c, &port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    /* a rank parked at a barrier of a job that goes idle is told, then the
     * job is evicted */
    char *pjob = register_job(url, 2, 1, 1, NULL, NULL, "parked");
    ASSERT_OK(erg_srv_client_new(url, NULL, &cl, &err));
    ASSERT_OK(erg_srv_client_register_rank(cl, pjob, 0, 0, 0, 0, ps, 2, STATES, 2, &err));
    ASSERT_EQ_INT(erg_srv_client_fetch_schedule(cl, pjob, 0, &states, &n, &w, &done, &err),
                  ERG_ECANCELED);
    ASSERT_CONTAINS(err.msg, "evicted");
    erg_srv_client_free(cl);
    erg_free(pjob);
    job = register_job(url, 2, 1, 1, NULL, NULL, "idle");
    usleep(1500000);
    char path[1024];
    char *esc = curl_easy_escape(NULL, job, 0);
    snprintf(path, sizeof path, "/v1/jobs/%s", esc);
    int status;
    char *resp = http(url, "GET", path, NULL, &status);
    ASSERT_EQ_INT(status, 404);
    ASSERT_CONTAINS(resp, "evicted");
    erg_free(resp);
    curl_free(esc);
    erg_free(job);
    stop_server(srv);
}

TAP_MAIN(TEST_ENTRY(expand_follows_spec), TEST_ENTRY(schedule_to_client_plan),
         TEST_ENTRY(plan_files_both_literal_formats),
         TEST_ENTRY(python_json_output_matches_real_dump), TEST_ENTRY(zeus_global_sweeps_and_ends),
         TEST_ENTRY(zeus_local_balances_stages),
         TEST_ENTRY(zeus_local_matches_reference_window_by_window),
         TEST_ENTRY(zeus_deploy_optimum_keeps_running),
         TEST_ENTRY(profiler_writes_empty_not_nan_and_energy_from_iterations),
         TEST_ENTRY(two_frequencies_and_allmax),
         TEST_ENTRY(instruction_profiler_sparse_mode_measures_a_sixth_and_predicts_the_rest),
         TEST_ENTRY(instruction_profiler_sparse_estimates_the_noise),
         TEST_ENTRY(zero_bubble_instruction_names_through_v1_schedulers),
         TEST_ENTRY(bad_input_gets_4xx_with_message), TEST_ENTRY(allocation_failures_are_answered),
         TEST_ENTRY(job_limit), TEST_ENTRY(scheduler_errors_reach_ranks),
         TEST_ENTRY(zeus_client_replay_point_solution),
         TEST_ENTRY(zeus_client_replay_instruction_profiler),
         TEST_ENTRY(huge_bodies_and_slow_clients),
         TEST_ENTRY(profile_then_point_solution_8_processes),
         TEST_ENTRY(data_parallel_results_are_aggregated_per_stage),
         TEST_ENTRY(crash_and_restart_mid_window), TEST_ENTRY(frontier_switches_plan_for_straggler),
         TEST_ENTRY(rank_timeout_aborts_and_idle_jobs_are_evicted))
