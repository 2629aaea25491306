/* test_server.c: the control-plane server with its ranks as processes on loopback: profiling
 * then plans (8 processes), data parallelism, kill -9 and restart mid-window, a straggler under
 * the Frontier scheduler, rank timeouts and idle jobs. The other concerns: test_server_sched.c
 * (schedulers), test_server_sparse.c (sparse profiling), test_server_handlers.c (bad input
 * through the handlers), test_server_wire.c (the Zeus client's bytes, hostile clients). */
#include "server_test_util.h"

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

/* ---- a Zeus PFO job in the fleet (docs/fleet.md, "The rule") ---- */

/* GET /v1/fleet: the fleet (the caller frees it) and the member id (borrowed from it). */
static json_t *fleet_get(erg_server *srv, const char *id, json_t **member)
{
    char *resp;
    ASSERT_EQ_INT(call(srv, "GET", "/v1/fleet", NULL, NULL, &resp), 200);
    json_t *fl = json_loads(resp, 0, NULL);
    erg_free(resp);
    ASSERT(fl);
    *member = NULL;
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(fl, "jobs"), i, x)
    {
        if (!strcmp(json_string_value(json_object_get(x, "job_id")), id))
            *member = x;
    }
    ASSERT_MSG(*member, "%s is not a member of the fleet", id);
    return fl;
}

static double num(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

/* The Zeus job is counted at plan k (k's power_w), in /v1/fleet and /metrics. */
static void zeus_counted_at(erg_server *srv, const char *zj, long k, double power_w)
{
    json_t *z, *fl = fleet_get(srv, zj, &z);
    ASSERT_MSG(json_integer_value(json_object_get(z, "point")) == k &&
                   json_integer_value(json_object_get(z, "window_point")) == k &&
                   fabs(num(z, "power_w") - power_w) < 1e-9,
               "the Zeus job runs plan %ld (%g W) but is counted at plan %lld (%g W)", k, power_w,
               (long long)json_integer_value(json_object_get(z, "point")), num(z, "power_w"));
    json_decref(fl);
    char *resp, want[700];
    ASSERT_EQ_INT(call(srv, "GET", "/metrics", NULL, NULL, &resp), 200);
    snprintf(want, sizeof want, "\nergon_fleet_job_power_watts{job=\"%s\"} ", zj);
    const char *at = strstr(resp, want);
    ASSERT_MSG(at && fabs(strtod(at + strlen(want), NULL) - power_w) < 1e-9,
               "/metrics does not count the Zeus job at %g W", power_w);
    erg_free(resp);
}

/* Every rank of the Zeus job asks for its window's schedule (direct calls do not wait: the
 * first rank is told to retry until the last one has asked); each answer's clocks are clock. */
static void zeus_fetch(erg_server *srv, const char *zj, int clock)
{
    char path[600], q[32], want[64];
    snprintf(path, sizeof path, "/schedule/%s", zj);
    snprintf(want, sizeof want, "[\"forward\",%d]", clock);
    char *resp;
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=0", NULL, &resp), 503);
    erg_free(resp);
    for (int r = 1; r >= 0; r--) {
        snprintf(q, sizeof q, "rank=%d", r);
        ASSERT_EQ_INT(call(srv, "GET", path, q, NULL, &resp), 200);
        ASSERT_CONTAINS(resp, want);
        erg_free(resp);
    }
}

/* A Zeus job whose ranks fetched a window and have not reported it is counted at the window's
 * plan, and the /v1 job is assigned around it; once its ranks report the window, its next
 * window runs the point of a "window" decision. The same after a restart. */
TEST(fleet_counts_a_zeus_job_at_the_plan_its_window_runs)
{
    const char *d = mktmp();
    char fdir[600], p[1024];
    snprintf(fdir, sizeof fdir, "%s/frontier", d);
    erg_error err;
    ASSERT_OK(erg__mkdir_p(fdir, &err));
    /* Three plans of a 2-stage pipeline (world 2): 50 W, 70 W and 100 W. */
    const int clocks[3] = {1000, 1200, 1410};
    snprintf(p, sizeof p, "%s/frontier.csv", fdir);
    write_text(p, "time,energy\n1.5,75\n1.2,84\n1.0,100\n");
    for (int k = 0; k < 3; k++) {
        erg_plan *pl = NULL;
        ASSERT_OK(erg_plan_new(NULL, 2, 2, &pl, &err));
        erg_plan_fill(pl, clocks[k]);
        snprintf(p, sizeof p, "%s/freqs_pipeline_%05d.py", fdir, k);
        ASSERT_OK(erg_plan_write_py(pl, NULL, p, &err));
        erg_plan_free(pl);
    }
    char args[800], db[700], body[1024], v1[512], zj[512];
    snprintf(args, sizeof args, "{\"frontier_dir\": \"%s\"}", fdir);
    snprintf(db, sizeof db, "%s/state.sqlite", d);
    erg_server *srv = db_server("Frontier", args, db);
    char *resp;
    ASSERT_EQ_INT(call(srv, "POST", "/v1/jobs", NULL,
                       "{\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":2,"
                       "\"framework\":\"f\",\"model_name\":\"m\",\"partition_method\":\"p\","
                       "\"microbatch_size\":1,\"num_microbatches\":2}",
                       &resp),
                  201);
    json_t *v = json_loads(resp, 0, NULL);
    snprintf(v1, sizeof v1, "%s", json_string_value(json_object_get(v, "job_id")));
    json_decref(v);
    erg_free(resp);
    for (int r = 0; r < 2; r++) {
        snprintf(body, sizeof body,
                 "{\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,\"tp_rank\":0,\"pipe_schedule\":"
                 "[\"forward\",\"forward\",\"backward\",\"backward\"],"
                 "\"power_state_range\":[1410,1200,1000]}",
                 r, r);
        snprintf(p, sizeof p, "/v1/jobs/%s/ranks", v1);
        ASSERT_EQ_INT(call(srv, "POST", p, NULL, body, NULL), 200);
    }
    ASSERT_EQ_INT(call(srv, "POST", "/v1/fleet", NULL, "{\"cap_w\": 200}", NULL), 200);
    /* the Zeus job arrives (both at 100 W) and its ranks fetch window 0, as Zeus 0.16's do */
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL,
                       "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,"
                       "\"world_size\":2,\"job_metadata\":null}",
                       &resp),
                  200);
    v = json_loads(resp, JSON_DECODE_ANY, NULL);
    ASSERT(json_is_string(v));
    snprintf(zj, sizeof zj, "%s", json_string_value(v));
    json_decref(v);
    erg_free(resp);
    for (int r = 0; r < 2; r++) {
        snprintf(body, sizeof body,
                 "{\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,\"tp_rank\":0,"
                 "\"available_frequencies\":[1410,1200,1000]}",
                 r, r);
        snprintf(p, sizeof p, "/register_rank/%s", zj);
        ASSERT_EQ_INT(call(srv, "POST", p, NULL, body, NULL), 200);
    }
    zeus_fetch(srv, zj, 1410);
    zeus_counted_at(srv, zj, 2, 100);
    /* a lower cap: free, 70 W + 70 W would be best; the Zeus job runs 100 W, so the /v1 job
     * takes 50 W */
    ASSERT_EQ_INT(call(srv, "POST", "/v1/fleet", NULL, "{\"cap_w\": 155}", NULL), 200);
    zeus_counted_at(srv, zj, 2, 100);
    json_t *z, *m, *fl = fleet_get(srv, zj, &z);
    ASSERT_MSG(json_is_true(json_object_get(z, "fixed")), "/v1/fleet: the Zeus job is not fixed");
    json_decref(fl);
    fl = fleet_get(srv, v1, &m);
    ASSERT(json_integer_value(json_object_get(m, "point")) == 0 &&
           json_is_false(json_object_get(m, "fixed")));
    ASSERT(num(fl, "power_w") == 150 &&
           json_is_true(json_object_get(json_object_get(fl, "last_decision"), "feasible")));
    json_decref(fl);
    /* a cap the fixed job alone exceeds: infeasible, the /v1 job at its least power, the
     * shortfall as negative headroom */
    ASSERT_EQ_INT(call(srv, "POST", "/v1/fleet", NULL, "{\"cap_w\": 90}", NULL), 200);
    zeus_counted_at(srv, zj, 2, 100);
    fl = fleet_get(srv, v1, &m);
    ASSERT(json_integer_value(json_object_get(m, "point")) == 0 && num(fl, "power_w") == 150 &&
           num(fl, "headroom_w") == -60 &&
           json_is_false(json_object_get(json_object_get(fl, "last_decision"), "feasible")));
    json_decref(fl);
    ASSERT_EQ_INT(call(srv, "POST", "/v1/fleet", NULL, "{\"cap_w\": 155}", NULL), 200);
    /* a restart replays the same counted points */
    erg_server_free(srv);
    srv = db_server("Frontier", args, db);
    zeus_counted_at(srv, zj, 2, 100);
    fl = fleet_get(srv, v1, &m);
    ASSERT(json_integer_value(json_object_get(m, "point")) == 0 && num(fl, "power_w") == 150);
    json_decref(fl);
    /* the Zeus job's ranks report window 0: free at its end, 70 W each; window 1 runs it */
    snprintf(p, sizeof p, "/result/%s", zj);
    for (int r = 0; r < 2; r++) {
        snprintf(body, sizeof body, "{\"rank\":%d,\"iter_time\":[1.0],\"iter_energy\":[100.0]}", r);
        ASSERT_EQ_INT(call(srv, "POST", p, NULL, body, NULL), 200);
    }
    zeus_fetch(srv, zj, 1200);
    zeus_counted_at(srv, zj, 1, 70);
    fl = fleet_get(srv, v1, &m);
    ASSERT(json_integer_value(json_object_get(m, "point")) == 1 && num(fl, "power_w") == 140);
    json_decref(fl);
    erg_server_free(srv);
    /* the Zeus job's decision rows are the plans its windows ran */
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;
    ASSERT(sqlite3_open(db, &h) == SQLITE_OK);
    ASSERT(sqlite3_prepare_v2(h,
                              "SELECT group_concat(x, ' ') FROM (SELECT d.reason || ':' || "
                              "a.point AS x FROM fleet_assignments a JOIN fleet_decisions d ON "
                              "d.id = a.decision WHERE a.job_id = ? ORDER BY d.id)",
                              -1, &q, NULL) == SQLITE_OK);
    sqlite3_bind_text(q, 1, zj, -1, SQLITE_STATIC);
    ASSERT(sqlite3_step(q) == SQLITE_ROW);
    ASSERT_STR_EQ((const char *)sqlite3_column_text(q, 0), "arrive:2 window:1");
    sqlite3_finalize(q);
    sqlite3_close(h);
}

TAP_MAIN(TEST_ENTRY(profile_then_point_solution_8_processes),
         TEST_ENTRY(data_parallel_results_are_aggregated_per_stage),
         TEST_ENTRY(crash_and_restart_mid_window), TEST_ENTRY(frontier_switches_plan_for_straggler),
         TEST_ENTRY(rank_timeout_aborts_and_idle_jobs_are_evicted),
         TEST_ENTRY(fleet_counts_a_zeus_job_at_the_plan_its_window_runs))
