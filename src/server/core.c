/* core.c: the control-plane server's state: jobs, ranks, the window barrier, results, SQLite persistence, dumps, metrics and the request handlers. */
#include "server/server_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "server/core.h"

/*
 * THE JOB LIFE CYCLE (spec §1.4) and HOW CRASH RECOVERY WORKS.
 *
 * A job is created by register_job, collects world_size register_rank
 * calls, then runs windows n = 0, 1, ...: the schedule of window n is
 * computed eagerly; GET schedule is a barrier released when every rank has
 * asked for window n; every rank then reports one result; when all results
 * are in, the window is dumped and observed, and window n+1 is computed. A
 * scheduler that finishes ends the job ("[profiling-done]").
 *
 * Which window a GET means is derived, not sent: if the rank's result for
 * the current window n is already stored it asks for n+1, otherwise for n.
 * So a retried GET (lost response, server restart) is harmless.
 *
 * Every acknowledged fact goes to SQLite before the reply: jobs, ranks,
 * results (one row per job, window, rank), the "barrier released" flag of
 * each window and straggler targets. Schedules themselves are NOT stored:
 * schedulers are deterministic functions of their arguments and the results
 * they observed, so a restart rebuilds each job by replaying its scheduler:
 * next(), observe(stored results of window 0), next(), ... until the first
 * window whose results are incomplete, which becomes the current window
 * (released or not as stored). Dumps missing after a crash are rewritten
 * during the replay. Ranks blocked in GET when the server died simply retry.
 *
 * Locking: one mutex per server protects all state and the database
 * connection; requests waiting at a barrier sleep on their job's condition
 * variable. A job is never freed while a request waits on it.
 */

enum { J_REGISTERING, J_RUNNING, J_DONE, J_FAILED, J_ABORTED };
static const char *const state_names[] = {"registering", "running", "done", "failed", "aborted"};

typedef struct srv_rank {
    bool registered;
    json_t *info;      /* Normalised RankInfo. */
    int dp, pp, tp;
    int *instrs;       /* pipe_schedule codes. */
    int n_instrs;
    long asked;        /* Highest window this rank asked for (memory only). */
    double last_seen;  /* Monotonic seconds of its last request. */
    int waiting;       /* Requests of this rank blocked at the barrier. */
} srv_rank;

typedef struct srv_job {
    char *id;
    json_t *info;        /* Normalised JobInfo. */
    char *sched_name;
    json_t *sched_args;
    int mode;
    int state;
    char *message;
    int world, pp, dp, tp;
    srv_rank *ranks;
    int n_registered;
    srv_sched_ctx ctx;
    srv_sched *sched;
    int *stage_rep;      /* Per stage: the representative rank (dp = tp = 0). */
    long window;         /* Current window n. */
    bool released;       /* Barrier of window n released. */
    int **cur;           /* Per stage: schedule of window n. */
    char **cur_json;     /* Per stage: "[1410, 1410, ...]". */
    json_t **results;    /* Per rank: result of window n (NULL until reported). */
    srv_result **parsed; /* Per rank: its numbers (NULL until reported). */
    int n_results;
    int tkind;           /* Straggler target: 0 none, 1 slowdown, 2 deadline_s. */
    double tval;
    long choice;         /* Frontier plan of window n (-1). */
    double created_wall, created_mono, last_activity;
    double baseline_j;   /* Energy per iteration of the last all-max window (0 = none). */
    double energy_j, saved_j;
    int waiters;
    struct srv_waiter *parked; /* Suspended HTTP schedule requests. */
    pthread_cond_t cond;
    struct srv_job *next;
} srv_job;

const double srv_hist_bounds[SRV_HIST_BUCKETS] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                   0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                                   0.5,     1,      2.5};

/* ---- small helpers ---- */

double srv_now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void srv_log(erg_server *srv, erg_log_level lvl, const char *event, const char *job_id,
             const char *fmt, ...)
{
    if (!srv->opts.log || lvl < srv->opts.log_level)
        return;
    static const char *const names[] = {"debug", "info", "warning", "error"};
    char msg[1024] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    char ts[40];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ".%03ldZ", now.tv_nsec / 1000000);
    json_t *o = json_pack("{s:s,s:s,s:s}", "ts", ts, "level", names[lvl], "event", event);
    if (!o)
        return;
    if (job_id)
        json_object_set_new(o, "job_id", json_string(job_id));
    if (msg[0])
        json_object_set_new(o, "msg", json_string(msg));
    char *line = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (line) {
        pthread_mutex_lock(&srv->log_mu);
        srv->opts.log(srv->opts.log_user, lvl, line);
        pthread_mutex_unlock(&srv->log_mu);
        free(line);
    }
}

/* ---- database ---- */

static const char *const schema =
    "CREATE TABLE IF NOT EXISTS jobs("
    " job_id TEXT PRIMARY KEY, info TEXT NOT NULL, scheduler TEXT NOT NULL,"
    " scheduler_args TEXT NOT NULL, mode INTEGER NOT NULL, state TEXT NOT NULL,"
    " message TEXT, created REAL NOT NULL, tkind INTEGER NOT NULL DEFAULT 0,"
    " tval REAL NOT NULL DEFAULT 0, evicted INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS ranks("
    " job_id TEXT NOT NULL, rank INTEGER NOT NULL, info TEXT NOT NULL,"
    " PRIMARY KEY(job_id, rank));"
    "CREATE TABLE IF NOT EXISTS windows("
    " job_id TEXT NOT NULL, window INTEGER NOT NULL, released INTEGER NOT NULL DEFAULT 0,"
    " tkind INTEGER NOT NULL DEFAULT 0, tval REAL NOT NULL DEFAULT 0,"
    " choice INTEGER NOT NULL DEFAULT -1, PRIMARY KEY(job_id, window));"
    "CREATE TABLE IF NOT EXISTS results("
    " job_id TEXT NOT NULL, window INTEGER NOT NULL, rank INTEGER NOT NULL,"
    " body TEXT NOT NULL, received REAL NOT NULL, PRIMARY KEY(job_id, window, rank));"
    "CREATE TABLE IF NOT EXISTS events("
    " id INTEGER PRIMARY KEY, job_id TEXT, time REAL NOT NULL, kind TEXT NOT NULL,"
    " detail TEXT);";

static erg_status db_fail(erg_server *srv, erg_error *err, const char *what)
{
    return erg_error_set(err, ERG_EDB, "database %s: %s: %s", srv->db_path, what,
                         sqlite3_errmsg(srv->db));
}

/* Run one statement with text/int/double bindings given as a format:
 * 't' text, 'i' int64, 'd' double. */
static erg_status db_run(erg_server *srv, erg_error *err, const char *sql, const char *fmt, ...)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(srv->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(srv, err, "prepare");
    va_list ap;
    va_start(ap, fmt);
    for (int i = 0; fmt && fmt[i]; i++) {
        if (fmt[i] == 't')
            sqlite3_bind_text(st, i + 1, va_arg(ap, const char *), -1, SQLITE_TRANSIENT);
        else if (fmt[i] == 'i')
            sqlite3_bind_int64(st, i + 1, va_arg(ap, long long));
        else
            sqlite3_bind_double(st, i + 1, va_arg(ap, double));
    }
    va_end(ap);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return db_fail(srv, err, "write");
    return ERG_OK;
}

static void db_event(erg_server *srv, const char *job, const char *kind, const char *detail)
{
    erg_error e;
    db_run(srv, &e, "INSERT INTO events(job_id, time, kind, detail) VALUES(?,?,?,?)", "tdtt", job,
           now_wall(), kind, detail ? detail : "");
}

static char *dumps_compact(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        return NULL;
    char *r = erg__strdup(s);
    free(s);
    return r;
}

static erg_status db_save_job_state(erg_server *srv, srv_job *j)
{
    erg_error e;
    return db_run(srv, &e, "UPDATE jobs SET state=?, message=? WHERE job_id=?", "ttt",
                  state_names[j->state], j->message ? j->message : "", j->id);
}

/* ---- jobs ---- */

static void wake_parked(erg_server *srv, srv_job *j);

static void job_free(srv_job *j)
{
    if (!j)
        return;
    srv_sched_free(j->sched);
    for (int r = 0; j->ranks && r < j->world; r++) {
        json_decref(j->ranks[r].info);
        erg__free(j->ranks[r].instrs);
    }
    for (int r = 0; j->results && r < j->world; r++)
        json_decref(j->results[r]);
    for (int r = 0; j->parsed && r < j->world; r++)
        if (j->parsed[r]) {
            srv_result_free(j->parsed[r]);
            erg__free(j->parsed[r]);
        }
    erg__free(j->parsed);
    for (int s = 0; s < j->pp; s++) {
        if (j->cur)
            erg__free(j->cur[s]);
        if (j->cur_json)
            erg__free(j->cur_json[s]);
    }
    erg__free(j->cur);
    erg__free(j->cur_json);
    erg__free(j->results);
    erg__free(j->ranks);
    erg__free(j->stage_rep);
    erg__free(j->ctx.n_instrs);
    erg__free(j->ctx.instrs);
    erg__free(j->ctx.states);
    erg__free(j->ctx.job_dir);
    erg__free(j->ctx.profile_csv_name);
    json_decref(j->info);
    json_decref(j->sched_args);
    erg__free(j->sched_name);
    erg__free(j->message);
    erg__free(j->id);
    pthread_cond_destroy(&j->cond);
    erg__free(j);
}

static srv_job *job_find(erg_server *srv, const char *id)
{
    for (srv_job *j = srv->jobs; j; j = j->next)
        if (!strcmp(j->id, id))
            return j;
    return NULL;
}

static void set_message(srv_job *j, const char *msg)
{
    erg__free(j->message);
    j->message = erg__strdup(msg ? msg : "");
}

static void job_finish(erg_server *srv, srv_job *j, int state, const char *msg)
{
    if (j->state == J_DONE || j->state == J_FAILED || j->state == J_ABORTED)
        return;
    j->state = state;
    set_message(j, msg);
    db_save_job_state(srv, j);
    db_event(srv, j->id, state_names[state], msg);
    srv_log(srv, state == J_DONE ? ERG_LOG_INFO : ERG_LOG_WARNING, "job_end", j->id, "%s: %s",
            state_names[state], msg ? msg : "");
    pthread_cond_broadcast(&j->cond);
    wake_parked(srv, j);
}

static srv_job *job_alloc(const char *id, json_t *info, const char *sched, json_t *args,
                          int mode)
{
    srv_job *j = erg__calloc(1, sizeof *j);
    if (!j)
        return NULL;
    pthread_cond_init(&j->cond, NULL);
    j->id = erg__strdup(id);
    j->sched_name = erg__strdup(sched);
    j->info = json_incref(info);
    j->sched_args = json_incref(args);
    j->mode = mode;
    j->choice = -1;
    j->pp = (int)json_integer_value(json_object_get(info, "pp_degree"));
    j->dp = (int)json_integer_value(json_object_get(info, "dp_degree"));
    j->tp = (int)json_integer_value(json_object_get(info, "tp_degree"));
    j->world = (int)json_integer_value(json_object_get(info, "world_size"));
    j->ranks = erg__calloc((size_t)j->world, sizeof *j->ranks);
    j->results = erg__calloc((size_t)j->world, sizeof *j->results);
    j->parsed = erg__calloc((size_t)j->world, sizeof *j->parsed);
    j->cur = erg__calloc((size_t)j->pp, sizeof *j->cur);
    j->cur_json = erg__calloc((size_t)j->pp, sizeof *j->cur_json);
    if (!j->id || !j->sched_name || !j->ranks || !j->results || !j->cur || !j->cur_json ||
        !j->parsed) {
        job_free(j);
        return NULL;
    }
    for (int r = 0; r < j->world; r++)
        j->ranks[r].asked = -1;
    j->created_mono = j->last_activity = srv_now_mono();
    return j;
}

static erg_status write_json_file(const char *dir, const char *name, const json_t *v,
                                  bool only_if_missing, erg_error *err)
{
    erg__buf path = {0}, b = {0};
    erg_status st = erg__buf_printf(&path, "%s/%s", dir, name);
    struct stat sb;
    if (!st && only_if_missing && stat(path.data, &sb) == 0)
        goto out;
    if (!st)
        st = srv_json_py(v, &b);
    if (st)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    else
        st = erg__write_file(path.data, b.data ? b.data : "", b.len, err);
out:
    erg__buf_free(&path);
    erg__buf_free(&b);
    return st;
}

static json_t *server_info_json(erg_server *srv, const char *sched, const json_t *args, int mode)
{
    static const char *const lv[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
    return json_pack("{s:s,s:O,s:s,s:s,s:b,s:s}", "scheduler", sched, "scheduler_args", args,
                     "log_level", lv[srv->opts.log_level], "mode",
                     mode == SRV_MODE_ANY ? "unspecified" : srv_mode_name(mode), "dump_data",
                     srv->opts.dump_data, "dump_dir", srv->dump_dir);
}

static int cmp_desc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

/* Build the scheduler's view of the job once every rank registered. */
static erg_status job_build_ctx(erg_server *srv, srv_job *j, erg_error *err)
{
    srv_sched_ctx *c = &j->ctx;
    c->num_stages = j->pp;
    c->mode = j->mode;
    j->stage_rep = erg__calloc((size_t)j->pp, sizeof(int));
    c->n_instrs = erg__calloc((size_t)j->pp, sizeof(int));
    c->instrs = erg__calloc((size_t)j->pp, sizeof(int *));
    if (!j->stage_rep || !c->n_instrs || !c->instrs)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (int s = 0; s < j->pp; s++)
        j->stage_rep[s] = -1;
    /* The representative of stage s: the rank with pp_rank = s and the
     * smallest (dp_rank, tp_rank), i.e. dp = tp = 0 in a complete grid. */
    for (int r = 0; r < j->world; r++) {
        srv_rank *rk = &j->ranks[r];
        int s = rk->pp, cur = j->stage_rep[s];
        if (cur < 0 || rk->dp < j->ranks[cur].dp ||
            (rk->dp == j->ranks[cur].dp && rk->tp < j->ranks[cur].tp))
            j->stage_rep[s] = r;
    }
    for (int s = 0; s < j->pp; s++) {
        if (j->stage_rep[s] < 0)
            return erg_error_set(err, ERG_EINVAL, "no rank has pp_rank %d", s);
        c->instrs[s] = j->ranks[j->stage_rep[s]].instrs;
        c->n_instrs[s] = j->ranks[j->stage_rep[s]].n_instrs;
    }
    const json_t *psr = json_object_get(j->ranks[0].info, "power_state_range");
    c->n_states = (int)json_array_size(psr);
    c->states = erg__calloc((size_t)c->n_states + 1, sizeof(int));
    if (!c->states)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (int i = 0; i < c->n_states; i++)
        c->states[i] = (int)json_integer_value(json_array_get(psr, (size_t)i));
    qsort(c->states, (size_t)c->n_states, sizeof(int), cmp_desc);
    if (srv->opts.dump_data) {
        erg__buf d = {0}, n = {0};
        const json_t *in = j->info;
        if (erg__buf_printf(&d, "%s/%s", srv->dump_dir, j->id) ||
            erg__buf_printf(&n, "%s+%s+%s+dp%d+tp%d+pp%d+mbs%d+nmb%d.csv",
                            json_string_value(json_object_get(in, "framework")),
                            json_string_value(json_object_get(in, "model_name")),
                            json_string_value(json_object_get(in, "partition_method")), j->dp,
                            j->tp, j->pp,
                            (int)json_integer_value(json_object_get(in, "microbatch_size")),
                            (int)json_integer_value(json_object_get(in, "num_microbatches")))) {
            erg__buf_free(&d);
            erg__buf_free(&n);
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
        c->job_dir = d.data;
        c->profile_csv_name = n.data;
        erg_status st = erg__mkdir_p(c->job_dir, err);
        if (st)
            return st;
        json_t *si = server_info_json(srv, j->sched_name, j->sched_args, j->mode);
        json_t *ranks = json_array();
        for (int r = 0; ranks && r < j->world; r++)
            json_array_append(ranks, j->ranks[r].info);
        if (!si || !ranks)
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        if (!st)
            st = write_json_file(c->job_dir, "perseus.json", si, false, err);
        if (!st)
            st = write_json_file(c->job_dir, "ranks.json", ranks, false, err);
        json_decref(si);
        json_decref(ranks);
        if (st)
            return st;
    }
    return ERG_OK;
}

static erg_status set_current_schedule(srv_job *j, int **per_stage, erg_error *err)
{
    for (int s = 0; s < j->pp; s++) {
        int n = j->ctx.n_instrs[s];
        erg__free(j->cur[s]);
        erg__free(j->cur_json[s]);
        j->cur_json[s] = NULL;
        j->cur[s] = erg__malloc((size_t)n * sizeof(int) + 1);
        erg__buf b = {0};
        if (!j->cur[s] || erg__buf_append(&b, "[", 1))
            goto oom;
        memcpy(j->cur[s], per_stage[s], (size_t)n * sizeof(int));
        for (int i = 0; i < n; i++)
            if (erg__buf_printf(&b, i ? ", %d" : "%d", per_stage[s][i])) {
                erg__buf_free(&b);
                goto oom;
            }
        if (erg__buf_append(&b, "]", 1)) {
            erg__buf_free(&b);
            goto oom;
        }
        j->cur_json[s] = b.data;
    }
    return ERG_OK;
oom:
    return erg_error_set(err, ERG_ENOMEM, "out of memory");
}

/* Energy bookkeeping for /metrics: energy per iteration of a window is the
 * mean over iterations of the sum over ranks; all-max windows set the
 * baseline, the others save (baseline - energy) per iteration. */
static void account_energy(srv_job *j, const srv_result *per_rank)
{
    int n = per_rank[0].n_iters;
    for (int r = 1; r < j->world; r++)
        n = ERG__MIN(n, per_rank[r].n_iters);
    if (n <= 0)
        return;
    double total = 0;
    for (int r = 0; r < j->world; r++)
        for (int i = 0; i < n; i++)
            total += per_rank[r].iter_energy_j[i];
    double per_iter = total / n;
    j->energy_j += total;
    bool allmax = true;
    int mx = j->ctx.states[0];
    for (int s = 0; s < j->pp && allmax; s++)
        for (int i = 0; i < j->ctx.n_instrs[s]; i++)
            if (j->cur[s][i] != mx) {
                allmax = false;
                break;
            }
    if (allmax)
        j->baseline_j = per_iter;
    else if (j->baseline_j > 0)
        j->saved_j += (j->baseline_j - per_iter) * n;
}

static json_t *sched_dump_json(srv_job *j)
{
    json_t *a = json_array();
    for (int r = 0; a && r < j->world; r++) {
        int s = j->ranks[r].pp;
        json_t *ps = json_array();
        for (int i = 0; ps && i < j->ctx.n_instrs[s]; i++)
            json_array_append_new(ps, json_integer(j->cur[s][i]));
        json_t *o = json_object();
        json_object_set_new(o, "rank", json_integer(r));
        json_object_set_new(o, "power_states", ps);
        json_array_append_new(a, o);
    }
    return a;
}

/* All results of window n are in: dump, account, observe. */
static erg_status complete_window(erg_server *srv, srv_job *j, bool replay, erg_error *err)
{
    erg_status st = ERG_OK;
    srv_result *pr = erg__calloc((size_t)j->world, sizeof *pr);
    srv_result *ps = erg__calloc((size_t)j->pp, sizeof *ps);
    const srv_result **grp = erg__calloc((size_t)j->world, sizeof *grp);
    if (!pr || !ps || !grp) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto out;
    }
    for (int r = 0; !st && r < j->world; r++) {
        if (j->parsed[r]) {
            pr[r] = *j->parsed[r]; /* moved */
            erg__free(j->parsed[r]);
            j->parsed[r] = NULL;
        } else {
            st = srv_result_from_json(j->results[r], &pr[r], err);
        }
    }
    for (int s = 0; !st && s < j->pp; s++) {
        int n = 0;
        grp[n++] = &pr[j->stage_rep[s]];
        for (int r = 0; r < j->world; r++)
            if (j->ranks[r].pp == s && r != j->stage_rep[s])
                grp[n++] = &pr[r];
        st = srv_result_aggregate(grp, n, &ps[s], err);
    }
    if (st)
        goto out;
    if (srv->opts.dump_data && j->ctx.job_dir) {
        json_t *res = json_array();
        for (int r = 0; res && r < j->world; r++)
            json_array_append(res, j->results[r]);
        json_t *sch = sched_dump_json(j);
        char name[64];
        snprintf(name, sizeof name, "%ld.prof.json", j->window);
        if (!res || !sch)
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        if (!st)
            st = write_json_file(j->ctx.job_dir, name, res, replay, err);
        snprintf(name, sizeof name, "%ld.sched.json", j->window);
        if (!st)
            st = write_json_file(j->ctx.job_dir, name, sch, replay, err);
        json_decref(res);
        json_decref(sch);
        if (st)
            goto out;
    }
    account_energy(j, pr);
    st = srv_sched_observe(j->sched, ps, err);
    if (!replay)
        srv->windows_completed++;
out:
    for (int r = 0; pr && r < j->world; r++)
        srv_result_free(&pr[r]);
    for (int s = 0; ps && s < j->pp; s++)
        srv_result_free(&ps[s]);
    erg__free(pr);
    erg__free(ps);
    erg__free(grp);
    for (int r = 0; r < j->world; r++) {
        json_decref(j->results[r]);
        j->results[r] = NULL;
    }
    j->n_results = 0;
    return st;
}

/* Load the stored results of window n (replay). Returns the count. */
static int load_results(erg_server *srv, srv_job *j)
{
    sqlite3_stmt *q = NULL;
    int n = 0;
    if (sqlite3_prepare_v2(srv->db, "SELECT rank, body FROM results WHERE job_id=? AND window=?",
                           -1, &q, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(q, 1, j->id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(q, 2, j->window);
    while (sqlite3_step(q) == SQLITE_ROW) {
        int r = sqlite3_column_int(q, 0);
        const char *body = (const char *)sqlite3_column_text(q, 1);
        if (r < 0 || r >= j->world || j->results[r] || !body)
            continue;
        json_t *v = json_loads(body, 0, NULL);
        if (v) {
            j->results[r] = v;
            n++;
        }
    }
    sqlite3_finalize(q);
    return n;
}

/* Compute the schedule of window j->window (and, while replaying, fold in
 * every stored complete window). */
static void advance(erg_server *srv, srv_job *j, bool replay)
{
    erg_error err;
    for (;;) {
        /* The straggler target in effect for this window. */
        sqlite3_stmt *q = NULL;
        int have_row = 0, released = 0, tk = j->tkind;
        double tv = j->tval;
        if (sqlite3_prepare_v2(srv->db,
                               "SELECT released, tkind, tval FROM windows WHERE job_id=? AND "
                               "window=?",
                               -1, &q, NULL) == SQLITE_OK) {
            sqlite3_bind_text(q, 1, j->id, -1, SQLITE_TRANSIENT);
            sqlite3_bind_int64(q, 2, j->window);
            if (sqlite3_step(q) == SQLITE_ROW) {
                have_row = 1;
                released = sqlite3_column_int(q, 0);
                tk = sqlite3_column_int(q, 1);
                tv = sqlite3_column_double(q, 2);
            }
            sqlite3_finalize(q);
        }
        srv_sched_set_target(j->sched, tk, tv);
        int **per_stage = NULL;
        bool done = false;
        erg_status st = srv_sched_next(j->sched, &per_stage, &done, &err);
        if (!st && done) {
            job_finish(srv, j, J_DONE, "the scheduler has finished");
            return;
        }
        if (!st)
            st = set_current_schedule(j, per_stage, &err);
        if (st) {
            job_finish(srv, j, J_FAILED, err.msg);
            return;
        }
        j->choice = srv_sched_choice(j->sched);
        j->released = released;
        if (!have_row)
            db_run(srv, &err,
                   "INSERT OR IGNORE INTO windows(job_id, window, released, tkind, tval, choice) "
                   "VALUES(?,?,0,?,?,?)",
                   "tiidi", j->id, (long long)j->window, (long long)tk, tv,
                   (long long)j->choice);
        if (!replay)
            break;
        int n = load_results(srv, j);
        j->n_results = n;
        if (n < j->world)
            break;
        if (complete_window(srv, j, true, &err)) {
            job_finish(srv, j, J_FAILED, err.msg);
            return;
        }
        j->window++;
    }
    srv_log(srv, ERG_LOG_DEBUG, "window", j->id, "window %ld scheduled", j->window);
    pthread_cond_broadcast(&j->cond);
}

static void start_running(erg_server *srv, srv_job *j, bool replay)
{
    erg_error err;
    erg_status st = job_build_ctx(srv, j, &err);
    if (!st)
        st = srv_sched_new(j->sched_name, j->sched_args, &j->ctx, &j->sched, &err);
    if (st) {
        j->state = J_REGISTERING; /* job_finish only ends live jobs */
        job_finish(srv, j, J_FAILED, err.msg);
        return;
    }
    j->state = J_RUNNING;
    if (!replay)
        db_save_job_state(srv, j);
    j->window = 0;
    advance(srv, j, replay);
}

static void try_release(erg_server *srv, srv_job *j)
{
    if (j->state != J_RUNNING || j->released)
        return;
    for (int r = 0; r < j->world; r++)
        if (j->ranks[r].asked < j->window)
            return;
    j->released = true;
    erg_error e;
    db_run(srv, &e, "UPDATE windows SET released=1 WHERE job_id=? AND window=?", "ti", j->id,
           (long long)j->window);
    srv_log(srv, ERG_LOG_DEBUG, "barrier", j->id, "window %ld released", j->window);
    pthread_cond_broadcast(&j->cond);
    wake_parked(srv, j);
}

/* ---- validation of wire objects ---- */

static bool get_int(const json_t *o, const char *k, long lo, long hi, long *out, char *why,
                    size_t wn)
{
    const json_t *v = json_object_get(o, k);
    if (!v) {
        snprintf(why, wn, "field %s is missing", k);
        return false;
    }
    if (!json_is_integer(v)) {
        snprintf(why, wn, "field %s must be an integer", k);
        return false;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        snprintf(why, wn, "field %s = %lld is out of range [%ld, %ld]", k, x, lo, hi);
        return false;
    }
    *out = (long)x;
    return true;
}

static bool safe_name(const char *s)
{
    if (!*s || !strcmp(s, ".") || !strcmp(s, "..") || strlen(s) > 128)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == '/' || *p == '\\' || *p == 0x7f)
            return false;
    return true;
}

static const char *const job_str_fields[] = {"framework", "model_name", "partition_method"};
static const char *const job_int_fields[] = {"pp_degree",       "dp_degree",       "tp_degree",
                                             "world_size",      "microbatch_size", "num_microbatches"};

/* JobInfo -> normalised object (or NULL with why). */
static json_t *check_job_info(const json_t *in, bool v1, char *why, size_t wn)
{
    if (!json_is_object(in)) {
        snprintf(why, wn, "the body must be a JobInfo object");
        return NULL;
    }
    const json_t *jid = json_object_get(in, "job_id");
    if (jid && (!json_is_string(jid) || json_string_length(jid) != 0)) {
        snprintf(why, wn, "job_id must be an empty string: the server assigns it");
        return NULL;
    }
    if (!jid && !v1) {
        snprintf(why, wn, "field job_id is missing");
        return NULL;
    }
    json_t *o = json_object();
    json_object_set_new(o, "job_id", json_string(""));
    long v[6];
    for (int i = 0; i < 6; i++)
        if (!get_int(in, job_int_fields[i], 1, 1 << 20, &v[i], why, wn)) {
            json_decref(o);
            return NULL;
        }
    if (v[3] != v[0] * v[1] * v[2] || v[3] > 65536) {
        snprintf(why, wn,
                 "world_size %ld must equal pp_degree x dp_degree x tp_degree = %ld (at most "
                 "65536)",
                 v[3], v[0] * v[1] * v[2]);
        json_decref(o);
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        const json_t *s = json_object_get(in, job_str_fields[i]);
        if (!json_is_string(s) || !safe_name(json_string_value(s))) {
            snprintf(why, wn,
                     "field %s must be a non-empty string of at most 128 characters without '/' "
                     "or control characters",
                     job_str_fields[i]);
            json_decref(o);
            return NULL;
        }
        json_object_set(o, job_str_fields[i], (json_t *)s);
    }
    for (int i = 0; i < 6; i++)
        json_object_set_new(o, job_int_fields[i], json_integer(v[i]));
    return o;
}

/* RankInfo -> normalised object; fills the rank's fields. */
static json_t *check_rank_info(const srv_job *j, const json_t *in, char *why, size_t wn,
                               long *rank_out)
{
    if (!json_is_object(in)) {
        snprintf(why, wn, "the body must be a RankInfo object");
        return NULL;
    }
    const json_t *jid = json_object_get(in, "job_id");
    if (jid && (!json_is_string(jid) || strcmp(json_string_value(jid), j->id))) {
        snprintf(why, wn, "job_id in the body does not match the job");
        return NULL;
    }
    long rank, dp, pp, tp;
    if (!get_int(in, "rank", 0, j->world - 1, &rank, why, wn) ||
        !get_int(in, "dp_rank", 0, j->dp - 1, &dp, why, wn) ||
        !get_int(in, "pp_rank", 0, j->pp - 1, &pp, why, wn) ||
        !get_int(in, "tp_rank", 0, j->tp - 1, &tp, why, wn))
        return NULL;
    const json_t *ps = json_object_get(in, "pipe_schedule");
    size_t n = json_array_size(ps);
    if (!json_is_array(ps) || n == 0 || n > 1000000) {
        snprintf(why, wn, "pipe_schedule must be a non-empty list of instructions");
        return NULL;
    }
    json_t *psn = json_array();
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(ps, i);
        if (!json_is_string(x) || srv_instr_code(json_string_value(x)) < 0) {
            snprintf(why, wn,
                     "pipe_schedule[%zu] is not a pipe instruction (load, forward, backward, p2p, "
                     "cc, step, low, high, other, pure_backward)",
                     i);
            json_decref(psn);
            return NULL;
        }
        json_array_append(psn, (json_t *)x);
    }
    const json_t *pr = json_object_get(in, "power_state_range");
    size_t m = json_array_size(pr);
    if (!json_is_array(pr) || m == 0 || m > 10000) {
        snprintf(why, wn, "power_state_range must be a non-empty list of integers");
        json_decref(psn);
        return NULL;
    }
    int *vals = erg__calloc(m, sizeof(int));
    if (!vals) {
        snprintf(why, wn, "out of memory");
        json_decref(psn);
        return NULL;
    }
    for (size_t i = 0; i < m; i++) {
        const json_t *x = json_array_get(pr, i);
        if (!json_is_integer(x) || json_integer_value(x) <= 0 ||
            json_integer_value(x) > 1000000000) {
            snprintf(why, wn, "power_state_range[%zu] must be a positive integer", i);
            erg__free(vals);
            json_decref(psn);
            return NULL;
        }
        vals[i] = (int)json_integer_value(x);
    }
    qsort(vals, m, sizeof(int), cmp_desc);
    for (size_t i = 1; i < m; i++)
        if (vals[i] == vals[i - 1]) {
            snprintf(why, wn, "power_state_range has the value %d twice", vals[i]);
            erg__free(vals);
            json_decref(psn);
            return NULL;
        }
    json_t *prn = json_array();
    for (size_t i = 0; i < m; i++)
        json_array_append_new(prn, json_integer(vals[i]));
    erg__free(vals);
    *rank_out = rank;
    return json_pack("{s:s,s:i,s:i,s:i,s:i,s:o,s:o}", "job_id", j->id, "rank", (json_int_t)rank,
                     "dp_rank", (json_int_t)dp, "pp_rank", (json_int_t)pp, "tp_rank",
                     (json_int_t)tp, "pipe_schedule", psn, "power_state_range", prn);
}

/* Apply a (normalised) rank to the in-memory job. */
static erg_status rank_apply(srv_job *j, long r, json_t *info)
{
    srv_rank *rk = &j->ranks[r];
    const json_t *ps = json_object_get(info, "pipe_schedule");
    size_t n = json_array_size(ps);
    rk->instrs = erg__calloc(n, sizeof(int));
    if (!rk->instrs)
        return ERG_ENOMEM;
    for (size_t i = 0; i < n; i++)
        rk->instrs[i] = srv_instr_code(json_string_value(json_array_get(ps, i)));
    rk->n_instrs = (int)n;
    rk->dp = (int)json_integer_value(json_object_get(info, "dp_rank"));
    rk->pp = (int)json_integer_value(json_object_get(info, "pp_rank"));
    rk->tp = (int)json_integer_value(json_object_get(info, "tp_rank"));
    rk->info = json_incref(info);
    rk->registered = true;
    rk->last_seen = srv_now_mono();
    j->n_registered++;
    return ERG_OK;
}

/* Deep copy of a result with every measurement as a float (pydantic v1 turns
 * ints into floats for these fields, and the dumps show that). */
static json_t *floats(const json_t *v)
{
    if (json_is_number(v))
        return json_real(json_number_value(v));
    if (json_is_array(v)) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < json_array_size(v); i++)
            json_array_append_new(a, floats(json_array_get(v, i)));
        return a;
    }
    if (json_is_object(v)) {
        json_t *o = json_object();
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) json_object_set_new(o, k, floats(x));
        return o;
    }
    return json_incref((json_t *)v);
}

static void fail(srv_resp *rs, bool v1, int status, const char *fmt, ...) ERG_PRINTF(4, 5);
static json_t *normalize_result(const json_t *in, srv_result *parsed, long *rank, char *why,
                                size_t wn)
{
    if (!json_is_object(in)) {
        snprintf(why, wn, "the body must be a ProfilingResult object");
        return NULL;
    }
    if (!get_int(in, "rank", 0, 1 << 20, rank, why, wn))
        return NULL;
    json_t *o = json_pack("{s:i}", "rank", (json_int_t)*rank);
    static const char *const keys[] = {"iter_time", "iter_energy", "time_breakdown",
                                       "energy_breakdown"};
    for (int i = 0; o && i < 4; i++) {
        const json_t *v = json_object_get(in, keys[i]);
        json_object_set_new(o, keys[i], v ? floats(v) : i < 2 ? json_array() : json_object());
    }
    erg_error e;
    if (!o || srv_result_from_json(o, parsed, &e)) {
        snprintf(why, wn, "%s", o ? e.msg : "out of memory");
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- responses ---- */

static void respond(srv_resp *rs, int status, json_t *body)
{
    rs->status = status;
    rs->ctype = "application/json";
    if (!body) {
        rs->body = erg__strdup("null");
        return;
    }
    rs->body = dumps_compact(body);
    json_decref(body);
}

static void fail(srv_resp *rs, bool v1, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    respond(rs, status, json_pack("{s:s}", v1 ? "error" : "detail", msg));
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The value of key in a raw query string (percent-decoding; '+' is a space
 * in queries), truncated to on - 1 bytes. */
static bool query_get(const char *q, const char *key, char *out, size_t on)
{
    size_t kl = strlen(key);
    while (q && *q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        if (len > kl && !strncmp(q, key, kl) && q[kl] == '=') {
            size_t o = 0;
            for (size_t i = kl + 1; i < len && o + 1 < on; i++) {
                char c = q[i];
                int hi, lo;
                if (c == '%' && i + 2 < len &&
                    (hi = hexval(q[i + 1])) >= 0 && (lo = hexval(q[i + 2])) >= 0) {
                    out[o++] = (char)(hi * 16 + lo);
                    i += 2;
                } else {
                    out[o++] = c == '+' ? ' ' : c;
                }
            }
            out[o] = 0;
            return true;
        }
        q = amp ? amp + 1 : NULL;
    }
    return false;
}

/* A request body parsed (and, for results, validated) before the server
 * lock is taken, so the expensive part of a request runs in parallel. */
typedef struct srv_body {
    size_t len;
    json_t *v;           /* Parsed body or NULL. */
    char err[ERG_ERROR_MSG_LEN]; /* Why it did not parse. */
    json_t *result;      /* Results: normalised ProfilingResult. */
    srv_result parsed;   /* Results: its numbers. */
    bool have_parsed;
    long rank;           /* Results: the rank field (>= 0). */
} srv_body;

static void body_prepare(srv_body *b, const char *body, size_t len, bool is_result)
{
    memset(b, 0, sizeof *b);
    b->len = len;
    if (!body || len == 0) {
        snprintf(b->err, sizeof b->err, "the request needs a JSON body");
        return;
    }
    if (srv_json_depth(body, len) > 32) {
        snprintf(b->err, sizeof b->err, "the JSON body is nested more than 32 levels deep");
        return;
    }
    json_error_t je;
    b->v = json_loadb(body, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!b->v) {
        snprintf(b->err, sizeof b->err, "malformed JSON at line %d, column %d: %s", je.line,
                 je.column, je.text);
        return;
    }
    if (is_result)
        b->result = normalize_result(b->v, &b->parsed, &b->rank, b->err, sizeof b->err);
    b->have_parsed = b->result != NULL;
}

static void body_free(srv_body *b)
{
    json_decref(b->v);
    json_decref(b->result);
    if (b->have_parsed)
        srv_result_free(&b->parsed);
}

static json_t *body_json(const srv_body *b, srv_resp *rs, bool v1)
{
    if (!b->v) {
        fail(rs, v1, v1 ? 400 : 422, "%s", b->err);
        return NULL;
    }
    return json_incref(b->v);
}

/* ---- handlers ---- */

static void h_info(erg_server *srv, srv_resp *rs, bool v1)
{
    json_t *o = server_info_json(srv, srv->scheduler, srv->sched_args, srv->mode);
    if (v1 && o) {
        json_object_set_new(o, "version", json_string(erg_version()));
        json_object_set_new(o, "api", json_string("v1"));
    }
    respond(rs, 200, o);
}

static void h_register_job(erg_server *srv, const srv_body *b, srv_resp *rs, bool v1)
{
    json_t *in = body_json(b, rs, v1);
    if (!in)
        return;
    char why[512];
    int vcode = v1 ? 400 : 422;
    json_t *info = check_job_info(in, v1, why, sizeof why);
    const char *sched = srv->scheduler;
    json_t *args = json_incref(srv->sched_args);
    int mode = srv->mode;
    erg_error e;
    if (!info) {
        fail(rs, v1, vcode, "%s", why);
        goto out;
    }
    if (v1 && json_object_get(in, "scheduler")) {
        const json_t *sn = json_object_get(in, "scheduler");
        const json_t *sa = json_object_get(in, "scheduler_args");
        const json_t *md = json_object_get(in, "mode");
        if (!json_is_string(sn) || (sa && !json_is_object(sa)) || (md && !json_is_string(md))) {
            fail(rs, v1, 400, "scheduler must be a string, scheduler_args an object, mode a string");
            goto out;
        }
        sched = json_string_value(sn);
        json_decref(args);
        args = sa ? json_incref((json_t *)sa) : json_object();
        if (srv_sched_check_args(sched, args, &e)) {
            fail(rs, v1, 400, "%s", e.msg);
            goto out;
        }
        const srv_sched_class *cls = srv_sched_find(sched);
        int want = md ? (!strcmp(json_string_value(md), "frequency") ? SRV_MODE_FREQUENCY
                         : !strcmp(json_string_value(md), "power limit") ? SRV_MODE_POWER
                                                                         : -2)
                      : SRV_MODE_ANY;
        if (want == -2) {
            fail(rs, v1, 400, "mode must be \"frequency\" or \"power limit\"");
            goto out;
        }
        if (cls->fixed_mode != SRV_MODE_ANY) {
            if (want != SRV_MODE_ANY && want != cls->fixed_mode) {
                fail(rs, v1, 400, "scheduler %s runs in %s mode", sched,
                     srv_mode_name(cls->fixed_mode));
                goto out;
            }
            mode = cls->fixed_mode;
        } else {
            mode = want != SRV_MODE_ANY ? want : srv->mode;
            if (mode == SRV_MODE_ANY) {
                fail(rs, v1, 400, "scheduler %s needs a mode (\"frequency\" or \"power limit\")",
                     sched);
                goto out;
            }
        }
    }
    int held = 0;
    for (srv_job *o = srv->jobs; o; o = o->next)
        held++;
    if (held >= srv->opts.max_jobs) {
        fail(rs, v1, 503,
             "the server holds %d jobs (--max-jobs); end or abort some, or wait for idle jobs to "
             "be evicted",
             held);
        goto out;
    }
    /* The Perseus job id: local time + the job's fields + scheduler. */
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%d-%H-%M-%S", &tm);
    erg__buf id = {0};
    if (erg__buf_printf(&id, "%s+%s+%s+%s+dp%d+pp%d+tp%d+mbs%d+nmb%d+%s", ts,
                        json_string_value(json_object_get(info, "framework")),
                        json_string_value(json_object_get(info, "model_name")),
                        json_string_value(json_object_get(info, "partition_method")),
                        (int)json_integer_value(json_object_get(info, "dp_degree")),
                        (int)json_integer_value(json_object_get(info, "pp_degree")),
                        (int)json_integer_value(json_object_get(info, "tp_degree")),
                        (int)json_integer_value(json_object_get(info, "microbatch_size")),
                        (int)json_integer_value(json_object_get(info, "num_microbatches")),
                        sched)) {
        fail(rs, v1, 500, "out of memory");
        goto out;
    }
    size_t base = id.len;
    for (int k = 2; job_find(srv, id.data) || srv_db_has_job(srv, id.data); k++) {
        id.len = base;
        id.data[base] = 0;
        erg__buf_printf(&id, "+%d", k);
    }
    srv_job *j = job_alloc(id.data, info, sched, args, mode);
    char *infos = dumps_compact(info), *argss = dumps_compact(args);
    erg_status st = j && infos && argss ? ERG_OK : ERG_ENOMEM;
    if (!st)
        st = db_run(srv, &e,
                    "INSERT INTO jobs(job_id, info, scheduler, scheduler_args, mode, state, "
                    "message, created) VALUES(?,?,?,?,?,?,'',?)",
                    "ttttitd", id.data, infos, sched, argss, (long long)mode, "registering",
                    now_wall());
    erg__free(infos);
    erg__free(argss);
    if (st) {
        job_free(j);
        fail(rs, v1, st == ERG_EDB ? 503 : 500, "could not create the job: %s",
             st == ERG_EDB ? e.msg : "out of memory");
        erg__buf_free(&id);
        goto out;
    }
    j->created_wall = now_wall();
    j->next = srv->jobs;
    srv->jobs = j;
    srv_log(srv, ERG_LOG_INFO, "register_job", j->id, "world_size %d, scheduler %s", j->world,
            sched);
    if (v1)
        respond(rs, 201, json_pack("{s:s}", "job_id", id.data));
    else
        respond(rs, 200, json_string(id.data));
    erg__buf_free(&id);
out:
    json_decref(in);
    json_decref(info);
    json_decref(args);
}

static srv_job *lookup(erg_server *srv, const char *id, srv_resp *rs, bool v1)
{
    srv_job *j = id ? job_find(srv, id) : NULL;
    if (!j) {
        if (id && srv_db_has_job(srv, id))
            fail(rs, v1, 404, "job '%.300s' was evicted (idle) and is no longer served", id);
        else
            fail(rs, v1, 404, "unknown job '%.300s'", id ? id : "");
    }
    else
        j->last_activity = srv_now_mono();
    return j;
}

static void h_register_rank(erg_server *srv, const char *path_id, const srv_body *b,
                            srv_resp *rs, bool v1)
{
    json_t *in = body_json(b, rs, v1);
    if (!in)
        return;
    int vcode = v1 ? 400 : 422;
    const char *id = path_id;
    if (!id) {
        const json_t *jid = json_object_get(in, "job_id");
        if (!json_is_string(jid)) {
            fail(rs, v1, vcode, "field job_id must be the string returned by register_job");
            json_decref(in);
            return;
        }
        id = json_string_value(jid);
    }
    srv_job *j = lookup(srv, id, rs, v1);
    char why[512];
    long r = -1;
    json_t *info = j ? check_rank_info(j, in, why, sizeof why, &r) : NULL;
    if (!j)
        goto out;
    if (!info) {
        fail(rs, v1, vcode, "%s", why);
        goto out;
    }
    srv_rank *rk = &j->ranks[r];
    if (rk->registered) {
        if (json_equal(rk->info, info)) {
            rk->last_seen = srv_now_mono();
            respond(rs, 200, v1 ? json_pack("{s:i,s:b}", "rank", (json_int_t)r, "duplicate", 1)
                                : NULL);
        } else {
            fail(rs, v1, 409, "rank %ld is already registered with different information", r);
        }
        goto out;
    }
    if (j->state != J_REGISTERING) {
        fail(rs, v1, 409, "job %s is %s; it takes no more ranks", j->id, state_names[j->state]);
        goto out;
    }
    for (int o = 0; o < j->world; o++) {
        srv_rank *ok = &j->ranks[o];
        if (!ok->registered)
            continue;
        long dp = json_integer_value(json_object_get(info, "dp_rank"));
        long pp = json_integer_value(json_object_get(info, "pp_rank"));
        long tp = json_integer_value(json_object_get(info, "tp_rank"));
        if (ok->dp == dp && ok->pp == pp && ok->tp == tp) {
            fail(rs, v1, vcode, "rank %d already has dp_rank %ld, pp_rank %ld, tp_rank %ld", o, dp,
                 pp, tp);
            goto out;
        }
        if (ok->pp == pp &&
            !json_equal(json_object_get(ok->info, "pipe_schedule"),
                        json_object_get(info, "pipe_schedule"))) {
            fail(rs, v1, vcode,
                 "rank %ld's pipe_schedule differs from rank %d's, which has the same pp_rank %ld",
                 r, o, pp);
            goto out;
        }
    }
    char *s = dumps_compact(info);
    erg_error e;
    erg_status st = s ? db_run(srv, &e, "INSERT INTO ranks(job_id, rank, info) VALUES(?,?,?)",
                               "tit", j->id, (long long)r, s)
                      : ERG_ENOMEM;
    erg__free(s);
    if (!st)
        st = rank_apply(j, r, info);
    if (st) {
        fail(rs, v1, 503, "could not store the rank: %s", st == ERG_EDB ? e.msg : "out of memory");
        goto out;
    }
    srv_log(srv, ERG_LOG_DEBUG, "register_rank", j->id, "rank %ld (%d of %d)", r,
            j->n_registered, j->world);
    if (j->n_registered == j->world)
        start_running(srv, j, false);
    respond(rs, 200, v1 ? json_pack("{s:i,s:b}", "rank", (json_int_t)r, "duplicate", 0) : NULL);
out:
    json_decref(in);
    json_decref(info);
}

static void schedule_reply(srv_job *j, long r, srv_resp *rs, bool v1)
{
    int s = j->ranks[r].pp;
    erg__buf b = {0};
    erg_status st = v1 ? erg__buf_printf(&b, "{\"rank\":%ld,\"window\":%ld,\"done\":false,\"power_states\":%s}",
                                        r, j->window, j->cur_json[s])
                       : erg__buf_printf(&b, "{\"rank\":%ld,\"power_states\":%s}", r,
                                         j->cur_json[s]);
    if (st) {
        rs->status = 500;
        rs->body = erg__strdup("{\"detail\":\"out of memory\"}");
    } else {
        rs->status = 200;
        rs->body = b.data;
    }
    rs->ctype = "application/json";
}

static bool end_reply(srv_job *j, long r, srv_resp *rs, bool v1)
{
    if (j->state == J_DONE) {
        if (v1)
            respond(rs, 200, json_pack("{s:i,s:b,s:s,s:s}", "rank", (json_int_t)r, "done", 1,
                                       "state", "done", "message", j->message ? j->message : ""));
        else
            fail(rs, false, 500, "[profiling-done] job %s has finished: %s", j->id,
                 j->message ? j->message : "");
        return true;
    }
    if (j->state == J_FAILED) {
        if (v1)
            respond(rs, 409, json_pack("{s:s,s:s}", "error", j->message ? j->message : "",
                                       "state", "failed"));
        else
            fail(rs, false, 400, "%s", j->message ? j->message : "scheduler failure");
        return true;
    }
    if (j->state == J_ABORTED) {
        if (v1)
            respond(rs, 409, json_pack("{s:s,s:s}", "error", j->message ? j->message : "",
                                       "state", "aborted"));
        else
            fail(rs, false, 500, "job %s was aborted: %s", j->id, j->message ? j->message : "");
        return true;
    }
    return false;
}

/* Answer a schedule request if its answer is known now (ready, ended,
 * stale, shutting down, or deadline passed); false when it must wait. */
static bool schedule_try(erg_server *srv, srv_job *j, long r, long w, bool v1, bool expired,
                         srv_resp *rs)
{
    if (srv->stopping) {
        fail(rs, v1, 503, "the server is shutting down; retry");
        return true;
    }
    if (end_reply(j, r, rs, v1))
        return true;
    if (j->state == J_RUNNING && j->window == w && j->released) {
        schedule_reply(j, r, rs, v1);
        return true;
    }
    if (j->state == J_RUNNING && j->window > w) {
        fail(rs, v1, 409, "window %ld of job %s is over; rank %ld asked for it late", w, j->id, r);
        return true;
    }
    if (expired) {
        if (v1)
            respond(rs, 202, json_pack("{s:i,s:i,s:b,s:b}", "rank", (json_int_t)r, "window",
                                       (json_int_t)w, "pending", 1, "done", 0));
        else
            fail(rs, false, 503, "window %ld of job %s is not ready yet; retry", w, j->id);
        return true;
    }
    return false;
}

/*
 * Parked requests. Over HTTP a schedule request that must wait does not
 * hold a thread: its connection is suspended (libmicrohttpd) and a waiter
 * is queued on the job. Whatever may answer it (barrier released, job
 * ended, deadline passed, shutdown) calls wake_parked, which builds every
 * answer that is now known and resumes those connections. So a barrier of
 * 1,000 ranks costs 1,000 formatted responses, not 1,000 thread wake-ups.
 * Suspending happens under the server lock, before the waiter is visible,
 * so a wake can never overtake its suspend.
 */
typedef struct srv_waiter {
    long rank, window;
    bool v1;
    double deadline;
    void *conn;
    struct srv_waiter *next;
} srv_waiter;

static void wake_parked(erg_server *srv, srv_job *j)
{
    srv_waiter **pp = &j->parked;
    double now = srv_now_mono();
    while (*pp) {
        srv_waiter *w = *pp;
        srv_resp r2;
        memset(&r2, 0, sizeof r2);
        if (!schedule_try(srv, j, w->rank, w->window, w->v1, now >= w->deadline, &r2)) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        j->waiters--;
        j->ranks[w->rank].waiting--;
        j->ranks[w->rank].last_seen = now;
        j->last_activity = now;
        if (!r2.body) {
            r2.status = 500;
            r2.body = erg__strdup("{\"detail\":\"out of memory\"}");
            r2.ctype = "application/json";
        }
        srv->requests_by_class[r2.status / 100]++;
        srv->wake(w->conn, r2.status, r2.body, r2.ctype);
        erg__free(w);
    }
}

static void h_schedule(erg_server *srv, const char *id, const char *query, double max_wait,
                       void *conn, srv_resp *rs, bool v1)
{
    char buf[32];
    long r;
    if (!query_get(query, "rank", buf, sizeof buf) || !erg__parse_long(buf, &r)) {
        fail(rs, v1, v1 ? 400 : 422, "query parameter rank=<int> is required");
        return;
    }
    double wait = max_wait;
    if (v1) {
        double w = 30;
        if (query_get(query, "wait", buf, sizeof buf) &&
            (!erg__parse_double(buf, &w) || w < 0 || w > 600)) {
            fail(rs, v1, 400, "query parameter wait must be seconds in [0, 600]");
            return;
        }
        wait = fmin(w, max_wait);
    }
    srv_job *j = lookup(srv, id, rs, v1);
    if (!j)
        return;
    if (r < 0 || r >= j->world) {
        fail(rs, v1, 404, "rank %ld is not in job %s (world size %d)", r, j->id, j->world);
        return;
    }
    srv_rank *rk = &j->ranks[r];
    if (!rk->registered) {
        fail(rs, v1, 404, "rank %ld has not registered in job %s", r, j->id);
        return;
    }
    long w = j->results[r] ? j->window + 1 : j->window;
    if (j->state == J_REGISTERING)
        w = 0;
    if (rk->asked < w)
        rk->asked = w;
    rk->last_seen = srv_now_mono();
    try_release(srv, j);
    double deadline = srv_now_mono() + wait;
    if (schedule_try(srv, j, r, w, v1, wait <= 0, rs))
        return;
    if (conn && srv->park && srv->wake) {
        srv_waiter *wt = erg__calloc(1, sizeof *wt);
        if (!wt) {
            fail(rs, v1, 503, "out of memory; retry");
            return;
        }
        *wt = (srv_waiter){r, w, v1, deadline, conn, j->parked};
        srv->park(conn);
        j->parked = wt;
        j->waiters++;
        rk->waiting++;
        rs->parked = true;
        return;
    }
    /* Direct calls (erg_server_handle): wait on the job's condition. */
    j->waiters++;
    rk->waiting++;
    for (;;) {
        rk->last_seen = srv_now_mono();
        double now = srv_now_mono();
        if (schedule_try(srv, j, r, w, v1, now >= deadline, rs))
            break;
        double step = fmin(deadline - now, 1.0);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + step;
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
        double tw = srv_now_mono();
        pthread_cond_timedwait(&j->cond, &srv->mu, &ts);
        rs->waited_s += srv_now_mono() - tw;
    }
    rk->waiting--;
    j->waiters--;
    rk->last_seen = srv_now_mono();
    j->last_activity = srv_now_mono();
}

static void h_result(erg_server *srv, const char *id, const srv_body *b, srv_resp *rs,
                     bool v1)
{
    json_t *in = body_json(b, rs, v1);
    if (!in)
        return;
    int vcode = v1 ? 400 : 422;
    srv_job *j = lookup(srv, id, rs, v1);
    long r = b->rank;
    json_t *res = NULL;
    if (!j)
        goto out;
    if (!b->result) {
        fail(rs, v1, vcode, "%s", b->err);
        goto out;
    }
    if (r >= j->world) {
        fail(rs, v1, vcode, "field rank = %ld is out of range [0, %d]", r, j->world - 1);
        goto out;
    }
    res = json_incref(b->result);
    long win = j->window;
    const json_t *wv = json_object_get(in, "window");
    if (v1 && wv) {
        if (!json_is_integer(wv) || json_integer_value(wv) < 0) {
            fail(rs, v1, 400, "field window must be a non-negative integer");
            goto out;
        }
        win = (long)json_integer_value(wv);
    }
    srv_rank *rk = &j->ranks[r];
    if (!rk->registered) {
        fail(rs, v1, 404, "rank %ld has not registered in job %s", r, j->id);
        goto out;
    }
    rk->last_seen = srv_now_mono();
    if (win < j->window || (win == j->window && j->results[r])) {
        bool stored = win == j->window || srv_db_has_result(srv, j->id, win, r);
        if (v1 && stored)
            respond(rs, 200, json_pack("{s:i,s:i,s:b}", "rank", (json_int_t)r, "window",
                                       (json_int_t)win, "duplicate", 1));
        else
            fail(rs, v1, 409, "rank %ld already reported its result for window %ld of job %s", r,
                 win, j->id);
        goto out;
    }
    if (j->state != J_RUNNING) {
        char msg[700];
        snprintf(msg, sizeof msg, "job %s is %s; it takes no results", j->id,
                 state_names[j->state]);
        respond(rs, 409, json_pack("{s:s,s:s}", v1 ? "error" : "detail", msg, "state",
                                   state_names[j->state]));
        goto out;
    }
    if (win > j->window || !j->released) {
        fail(rs, v1, 409,
             "window %ld of job %s has not started: every rank must fetch its schedule first", win,
             j->id);
        goto out;
    }
    char *s = dumps_compact(res);
    erg_error e;
    erg_status st = s ? db_run(srv, &e,
                               "INSERT INTO results(job_id, window, rank, body, received) "
                               "VALUES(?,?,?,?,?)",
                               "tiitd", j->id, (long long)win, (long long)r, s, now_wall())
                      : ERG_ENOMEM;
    erg__free(s);
    if (st) {
        fail(rs, v1, 503, "could not store the result: %s", st == ERG_EDB ? e.msg : "out of memory");
        goto out;
    }
    j->results[r] = res;
    res = NULL;
    /* Keep the numbers: complete_window then need not parse them again. */
    srv_result *pc = erg__malloc(sizeof *pc);
    if (pc && srv_result_copy(&b->parsed, pc) == ERG_OK)
        j->parsed[r] = pc;
    else
        erg__free(pc);
    j->n_results++;
    srv->results_total++;
    respond(rs, 200, v1 ? json_pack("{s:i,s:i,s:b}", "rank", (json_int_t)r, "window",
                                    (json_int_t)win, "duplicate", 0)
                        : NULL);
    if (j->n_results == j->world) {
        if (complete_window(srv, j, false, &e)) {
            job_finish(srv, j, J_FAILED, e.msg);
        } else {
            srv_log(srv, ERG_LOG_INFO, "window_done", j->id, "window %ld complete", j->window);
            j->window++;
            advance(srv, j, false);
            try_release(srv, j);
        }
    }
out:
    json_decref(in);
    json_decref(res);
}

static void h_heartbeat(erg_server *srv, const char *id, const srv_body *b,
                        srv_resp *rs)
{
    json_t *in = body_json(b, rs, true);
    if (!in)
        return;
    srv_job *j = lookup(srv, id, rs, true);
    long r;
    char why[256];
    if (j && !get_int(in, "rank", 0, j->world - 1, &r, why, sizeof why))
        fail(rs, true, 400, "%s", why);
    else if (j && !j->ranks[r].registered)
        fail(rs, true, 404, "rank %ld has not registered in job %s", r, j->id);
    else if (j) {
        j->ranks[r].last_seen = srv_now_mono();
        respond(rs, 200, json_pack("{s:s,s:i}", "state", state_names[j->state], "window",
                                   (json_int_t)j->window));
    }
    json_decref(in);
}

static void h_end(erg_server *srv, const char *id, const srv_body *b, bool abort,
                  srv_resp *rs)
{
    json_t *in = b->len ? body_json(b, rs, true) : json_object();
    if (!in)
        return;
    srv_job *j = lookup(srv, id, rs, true);
    const json_t *reason = json_object_get(in, "reason");
    if (j && reason && !json_is_string(reason))
        fail(rs, true, 400, "field reason must be a string");
    else if (j) {
        if (j->state == J_REGISTERING || j->state == J_RUNNING) {
            char msg[400];
            snprintf(msg, sizeof msg, "%s by a client%s%.300s", abort ? "aborted" : "ended",
                     reason ? ": " : "", reason ? json_string_value(reason) : "");
            job_finish(srv, j, abort ? J_ABORTED : J_DONE, msg);
        }
        respond(rs, 200, json_pack("{s:s,s:s}", "job_id", j->id, "state", state_names[j->state]));
    }
    json_decref(in);
}

static void h_straggler(erg_server *srv, const char *id, const srv_body *b,
                        srv_resp *rs)
{
    json_t *in = body_json(b, rs, true);
    if (!in)
        return;
    srv_job *j = lookup(srv, id, rs, true);
    const json_t *sd = json_object_get(in, "slowdown"), *dl = json_object_get(in, "deadline_s");
    if (!j)
        goto out;
    if (!srv_sched_find(j->sched_name) || strncmp(j->sched_name, "Frontier", 8)) {
        fail(rs, true, 409, "job %s runs %s; straggler targets need the Frontier scheduler", j->id,
             j->sched_name);
        goto out;
    }
    if ((sd && dl) || (!sd && !dl)) {
        fail(rs, true, 400, "give exactly one of slowdown (>= 1) or deadline_s (> 0)");
        goto out;
    }
    if ((sd && (!json_is_number(sd) || !(json_number_value(sd) >= 1) ||
                json_number_value(sd) > 1e6)) ||
        (dl && (!json_is_number(dl) || !(json_number_value(dl) > 0)))) {
        fail(rs, true, 400, "slowdown must be a number >= 1, deadline_s a number > 0");
        goto out;
    }
    j->tkind = sd ? 1 : 2;
    j->tval = json_number_value(sd ? sd : dl);
    erg_error e;
    db_run(srv, &e, "UPDATE jobs SET tkind=?, tval=? WHERE job_id=?", "idt", (long long)j->tkind,
           j->tval, j->id);
    char det[64];
    snprintf(det, sizeof det, "%s=%g", sd ? "slowdown" : "deadline_s", j->tval);
    db_event(srv, j->id, "straggler", det);
    srv_log(srv, ERG_LOG_INFO, "straggler", j->id, "%s", det);
    long from = j->state == J_RUNNING ? j->window + 1 : 0;
    json_t *o = json_pack("{s:s,s:i}", "job_id", j->id, "applies_from_window", (json_int_t)from);
    if (o)
        json_object_set_new(o, sd ? "slowdown" : "deadline_s", json_real(j->tval));
    respond(rs, 200, o);
out:
    json_decref(in);
}

static json_t *job_status(srv_job *j)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:b,s:I,s:f,s:f}", "job_id", j->id,
                          "state", state_names[j->state], "message", j->message ? j->message : "",
                          "scheduler", j->sched_name, "world_size", j->world, "ranks_registered",
                          j->n_registered, "window", (int)j->window, "results_in_window",
                          j->n_results, "barrier_released", j->released, "frontier_choice",
                          (json_int_t)j->choice, "energy_j", j->energy_j, "energy_saved_j",
                          j->saved_j);
    if (o && j->tkind)
        json_object_set_new(o, j->tkind == 1 ? "slowdown" : "deadline_s", json_real(j->tval));
    if (o)
        json_object_set_new(o, "mode", json_string(srv_mode_name(j->mode)));
    return o;
}

static void h_metrics(erg_server *srv, srv_resp *rs)
{
    int by_state[5] = {0};
    long ranks = 0, waiting = 0;
    double energy = 0, saved = 0;
    for (srv_job *j = srv->jobs; j; j = j->next) {
        by_state[j->state]++;
        ranks += j->n_registered;
        waiting += j->waiters;
        energy += j->energy_j;
        saved += j->saved_j;
    }
    erg__buf b = {0};
    erg__buf_printf(&b, "# HELP ergon_jobs Jobs held by the server, by state.\n"
                        "# TYPE ergon_jobs gauge\n");
    for (int s = 0; s < 5; s++)
        erg__buf_printf(&b, "ergon_jobs{state=\"%s\"} %d\n", state_names[s], by_state[s]);
    char e1[40], e2[40];
    erg__buf_printf(
        &b,
        "# HELP ergon_ranks_registered Ranks registered in jobs held by the server.\n"
        "# TYPE ergon_ranks_registered gauge\nergon_ranks_registered %ld\n"
        "# HELP ergon_requests_waiting Schedule requests waiting at a window barrier.\n"
        "# TYPE ergon_requests_waiting gauge\nergon_requests_waiting %ld\n"
        "# HELP ergon_windows_completed_total Windows whose results all arrived (this process).\n"
        "# TYPE ergon_windows_completed_total counter\nergon_windows_completed_total %ld\n"
        "# HELP ergon_results_total Results acknowledged (this process).\n"
        "# TYPE ergon_results_total counter\nergon_results_total %ld\n"
        "# HELP ergon_jobs_evicted_total Jobs evicted after being idle (this process).\n"
        "# TYPE ergon_jobs_evicted_total counter\nergon_jobs_evicted_total %ld\n"
        "# HELP ergon_energy_joules Measured GPU energy of the completed windows of held jobs.\n"
        "# TYPE ergon_energy_joules gauge\nergon_energy_joules %s\n"
        "# HELP ergon_energy_saved_joules Energy saved against each job's all-max windows.\n"
        "# TYPE ergon_energy_saved_joules gauge\nergon_energy_saved_joules %s\n"
        "# HELP ergon_http_requests_total HTTP requests answered, by status class.\n"
        "# TYPE ergon_http_requests_total counter\n",
        ranks, waiting, srv->windows_completed, srv->results_total, srv->evicted_total,
        erg__fmt_double_py(energy, e1, sizeof e1), erg__fmt_double_py(saved, e2, sizeof e2));
    for (int c = 1; c < 6; c++)
        erg__buf_printf(&b, "ergon_http_requests_total{code=\"%dxx\"} %ld\n", c,
                        srv->requests_by_class[c]);
    static const char *const groups[] = {"schedule", "result", "register", "other"};
    erg__buf_printf(&b, "# HELP ergon_request_duration_seconds Server-side handling time of a "
                        "request (lock queueing included, barrier waits excluded).\n"
                        "# TYPE ergon_request_duration_seconds histogram\n");
    for (int g = 0; g < 4; g++) {
        long cum = 0;
        char le[40];
        for (int k = 0; k <= SRV_HIST_BUCKETS; k++) {
            cum += srv->hist[g][k];
            if (k < SRV_HIST_BUCKETS)
                erg__fmt_double_py(srv_hist_bounds[k], le, sizeof le);
            else
                snprintf(le, sizeof le, "+Inf");
            erg__buf_printf(&b, "ergon_request_duration_seconds_bucket{route=\"%s\",le=\"%s\"} %ld\n",
                            groups[g], le, cum);
        }
        erg__buf_printf(&b, "ergon_request_duration_seconds_sum{route=\"%s\"} %s\n", groups[g],
                        erg__fmt_double_py(srv->hist_sum[g], le, sizeof le));
        erg__buf_printf(&b, "ergon_request_duration_seconds_count{route=\"%s\"} %ld\n", groups[g],
                        cum);
    }
    rs->status = 200;
    rs->ctype = "text/plain; version=0.0.4";
    rs->body = b.data ? b.data : erg__strdup("");
}

/* ---- routing ---- */

void srv_dispatch(erg_server *srv, const char *method, const char *path, const char *query,
                  const char *body, size_t len, double max_wait, void *conn, srv_resp *rs)
{
    memset(rs, 0, sizeof *rs);
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    bool v1 = !strncmp(path, "/v1/", 4);
    size_t pl = strlen(path);
    bool is_result = !strncmp(path, "/result/", 8) ||
                     (v1 && pl > 8 && !strcmp(path + pl - 8, "/results"));
    srv_body pb;
    double t0 = srv_now_mono();
    body_prepare(&pb, post ? body : NULL, post ? len : 0, is_result);
    const srv_body *b = &pb;
    pthread_mutex_lock(&srv->mu);
    if (!strcmp(path, "/info") || !strcmp(path, "/v1/info")) {
        if (get)
            h_info(srv, rs, v1);
        else
            fail(rs, v1, 405, "use GET on %s", path);
    } else if (!strcmp(path, "/metrics")) {
        if (get)
            h_metrics(srv, rs);
        else
            fail(rs, false, 405, "use GET on /metrics");
    } else if (!strcmp(path, "/healthz")) {
        respond(rs, 200, json_pack("{s:s}", "status", srv->stopping ? "stopping" : "ok"));
    } else if (!strcmp(path, "/register_job") || !strcmp(path, "/v1/jobs")) {
        if (post)
            h_register_job(srv, b, rs, v1);
        else if (get && v1) {
            json_t *a = json_array();
            for (srv_job *j = srv->jobs; a && j; j = j->next)
                json_array_append_new(a, json_pack("{s:s,s:s,s:i}", "job_id", j->id, "state",
                                                   state_names[j->state], "window",
                                                   (int)j->window));
            respond(rs, 200, json_pack("{s:o}", "jobs", a));
        } else
            fail(rs, v1, 405, "use POST on %s", path);
    } else if (!strcmp(path, "/register_rank")) {
        if (post)
            h_register_rank(srv, NULL, b, rs, false);
        else
            fail(rs, false, 405, "use POST on /register_rank");
    } else if (!strncmp(path, "/schedule/", 10)) {
        if (get)
            h_schedule(srv, path + 10, query, max_wait, conn, rs, false);
        else
            fail(rs, false, 405, "use GET on /schedule/{job_id}");
    } else if (!strncmp(path, "/result/", 8)) {
        if (post)
            h_result(srv, path + 8, b, rs, false);
        else
            fail(rs, false, 405, "use POST on /result/{job_id}");
    } else if (!strncmp(path, "/v1/jobs/", 9)) {
        const char *id0 = path + 9, *slash = strchr(id0, '/');
        size_t idl = slash ? (size_t)(slash - id0) : strlen(id0);
        char *id = erg__strndup(id0, idl);
        const char *act = slash ? slash + 1 : "";
        if (!id) {
            fail(rs, true, 500, "out of memory");
        } else if (!*act) {
            if (!get)
                fail(rs, true, 405, "use GET on /v1/jobs/{job_id}");
            else {
                srv_job *j = lookup(srv, id, rs, true);
                if (j)
                    respond(rs, 200, job_status(j));
            }
        } else if (!strcmp(act, "ranks") && post) {
            h_register_rank(srv, id, b, rs, true);
        } else if (!strcmp(act, "schedule") && get) {
            h_schedule(srv, id, query, max_wait, conn, rs, true);
        } else if (!strcmp(act, "results") && post) {
            h_result(srv, id, b, rs, true);
        } else if (!strcmp(act, "heartbeat") && post) {
            h_heartbeat(srv, id, b, rs);
        } else if ((!strcmp(act, "end") || !strcmp(act, "abort")) && post) {
            h_end(srv, id, b, !strcmp(act, "abort"), rs);
        } else if (!strcmp(act, "straggler") && post) {
            h_straggler(srv, id, b, rs);
        } else if (!strcmp(act, "ranks") || !strcmp(act, "schedule") || !strcmp(act, "results") ||
                   !strcmp(act, "heartbeat") || !strcmp(act, "end") || !strcmp(act, "abort") ||
                   !strcmp(act, "straggler")) {
            fail(rs, true, 405, "wrong method for /v1/jobs/{job_id}/%s (see docs/http-api.md)",
                 act);
        } else {
            fail(rs, true, 404, "no such endpoint /v1/jobs/{job_id}/%.64s", act);
        }
        erg__free(id);
    } else {
        fail(rs, v1, 404, "no such endpoint %.200s", path);
    }
    if (rs->parked) {
        pthread_mutex_unlock(&srv->mu);
        body_free(&pb);
        return;
    }
    if (!rs->body) {
        rs->status = 500;
        rs->body = erg__strdup("{\"detail\":\"out of memory\"}");
        rs->ctype = "application/json";
    }
    if (rs->status >= 100 && rs->status < 600)
        srv->requests_by_class[rs->status / 100]++;
    /* Server-side handling time (queueing on the lock included, barrier
     * waits excluded) into the latency histogram. */
    int group = strstr(path, "schedule") ? 0 : is_result ? 1 : strstr(path, "register") || (v1 && pl > 6 && !strcmp(path + pl - 6, "/ranks")) || !strcmp(path, "/v1/jobs") ? 2 : 3;
    double dt = srv_now_mono() - t0 - rs->waited_s;
    int bk = 0;
    while (bk < SRV_HIST_BUCKETS && dt > srv_hist_bounds[bk])
        bk++;
    srv->hist[group][bk]++;
    srv->hist_sum[group] += dt > 0 ? dt : 0;
    pthread_mutex_unlock(&srv->mu);
    body_free(&pb);
    srv_log(srv, ERG_LOG_DEBUG, "request", NULL, "%s %.200s -> %d", method, path, rs->status);
}

/* ---- restore and housekeeping ---- */

bool srv_db_has_job(erg_server *srv, const char *id)
{
    sqlite3_stmt *q = NULL;
    bool found = false;
    if (sqlite3_prepare_v2(srv->db, "SELECT 1 FROM jobs WHERE job_id=?", -1, &q, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_text(q, 1, id, -1, SQLITE_TRANSIENT);
        found = sqlite3_step(q) == SQLITE_ROW;
    }
    sqlite3_finalize(q);
    return found;
}

bool srv_db_has_result(erg_server *srv, const char *id, long window, long rank)
{
    sqlite3_stmt *q = NULL;
    bool found = false;
    if (sqlite3_prepare_v2(srv->db,
                           "SELECT 1 FROM results WHERE job_id=? AND window=? AND rank=?", -1, &q,
                           NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, id, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(q, 2, window);
        sqlite3_bind_int64(q, 3, rank);
        found = sqlite3_step(q) == SQLITE_ROW;
    }
    sqlite3_finalize(q);
    return found;
}

erg_status srv_db_open(erg_server *srv, erg_error *err)
{
    if (sqlite3_open_v2(srv->db_path, &srv->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK)
        return db_fail(srv, err, "open");
    sqlite3_busy_timeout(srv->db, 5000);
    char *msg = NULL;
    /* WAL; checkpoints are not run inside commits (they fsync and would stall
     * every request behind the server lock) but by the housekeeping thread
     * on its own connection (srv_checkpoint). */
    const char *pragmas = srv->opts.durable_sync
                              ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                                "PRAGMA wal_autocheckpoint=0;"
                              : "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                                "PRAGMA wal_autocheckpoint=0;";
    if (sqlite3_exec(srv->db, pragmas, NULL, NULL, &msg) != SQLITE_OK ||
        sqlite3_exec(srv->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
        erg_status st = erg_error_set(err, ERG_EDB, "database %s: %s", srv->db_path,
                                      msg ? msg : sqlite3_errmsg(srv->db));
        sqlite3_free(msg);
        return st;
    }
    return ERG_OK;
}

void srv_checkpoint(erg_server *srv)
{
    if (!strcmp(srv->db_path, ":memory:") || !*srv->db_path)
        return;
    if (!srv->ckpt_db &&
        sqlite3_open_v2(srv->db_path, &srv->ckpt_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        sqlite3_close(srv->ckpt_db);
        srv->ckpt_db = NULL;
        return;
    }
    sqlite3_busy_timeout(srv->ckpt_db, 100);
    int log_frames = 0, done = 0;
    sqlite3_wal_checkpoint_v2(srv->ckpt_db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log_frames, &done);
    /* Once everything is copied, truncate the log when nobody is writing. */
    if (log_frames > 4096 && done == log_frames)
        sqlite3_wal_checkpoint_v2(srv->ckpt_db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
}

erg_status srv_restore(erg_server *srv, erg_error *err)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(srv->db,
                           "SELECT job_id, info, scheduler, scheduler_args, mode, state, message, "
                           "created, tkind, tval FROM jobs WHERE evicted=0 ORDER BY created",
                           -1, &q, NULL) != SQLITE_OK)
        return db_fail(srv, err, "read jobs");
    int restored = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(q, 0);
        json_t *info = json_loads((const char *)sqlite3_column_text(q, 1), 0, NULL);
        json_t *args = json_loads((const char *)sqlite3_column_text(q, 3), 0, NULL);
        const char *state = (const char *)sqlite3_column_text(q, 5);
        srv_job *j = info && args && id ? job_alloc(id, info, (const char *)sqlite3_column_text(q, 2),
                                                    args, sqlite3_column_int(q, 4))
                                        : NULL;
        json_decref(info);
        json_decref(args);
        if (!j)
            continue;
        j->created_wall = sqlite3_column_double(q, 7);
        j->tkind = sqlite3_column_int(q, 8);
        j->tval = sqlite3_column_double(q, 9);
        for (int s = 0; s < 5; s++)
            if (state && !strcmp(state, state_names[s]))
                j->state = s;
        set_message(j, (const char *)sqlite3_column_text(q, 6));
        sqlite3_stmt *rq = NULL;
        if (sqlite3_prepare_v2(srv->db, "SELECT rank, info FROM ranks WHERE job_id=?", -1, &rq,
                               NULL) == SQLITE_OK) {
            sqlite3_bind_text(rq, 1, id, -1, SQLITE_TRANSIENT);
            while (sqlite3_step(rq) == SQLITE_ROW) {
                int r = sqlite3_column_int(rq, 0);
                json_t *ri = json_loads((const char *)sqlite3_column_text(rq, 1), 0, NULL);
                if (ri && r >= 0 && r < j->world && !j->ranks[r].registered)
                    rank_apply(j, r, ri);
                json_decref(ri);
            }
        }
        sqlite3_finalize(rq);
        j->next = srv->jobs;
        srv->jobs = j;
        restored++;
        if (j->n_registered == j->world && (j->state == J_RUNNING || j->state == J_REGISTERING)) {
            j->state = J_REGISTERING;
            start_running(srv, j, true);
        }
    }
    sqlite3_finalize(q);
    if (restored)
        srv_log(srv, ERG_LOG_INFO, "restore", NULL, "restored %d jobs from %s", restored,
                srv->db_path);
    return ERG_OK;
}

void srv_housekeeping(erg_server *srv)
{
    double now = srv_now_mono();
    for (srv_job *j = srv->jobs; j; j = j->next)
        if (j->parked)
            wake_parked(srv, j); /* deadlines */
    srv_job **pp = &srv->jobs;
    while (*pp) {
        srv_job *j = *pp;
        bool live = j->state == J_REGISTERING || j->state == J_RUNNING;
        if (live && srv->opts.rank_timeout_s > 0) {
            for (int r = 0; r < j->world; r++) {
                srv_rank *rk = &j->ranks[r];
                double seen = rk->registered ? rk->last_seen : j->created_mono;
                if (rk->waiting == 0 && now - seen > srv->opts.rank_timeout_s &&
                    (rk->registered || j->state == J_REGISTERING)) {
                    char msg[160];
                    snprintf(msg, sizeof msg, "rank %d %s for %.1f s (rank timeout %.1f s)", r,
                             rk->registered ? "was silent" : "did not register",
                             now - seen, srv->opts.rank_timeout_s);
                    job_finish(srv, j, J_ABORTED, msg);
                    break;
                }
            }
        }
        double idle = now - j->last_activity;
        if (idle > srv->opts.job_idle_timeout_s &&
            (j->state == J_REGISTERING || j->state == J_RUNNING))
            job_finish(srv, j, J_ABORTED, "evicted after being idle"); /* answers parked ones */
        if (j->waiters == 0 && idle > srv->opts.job_idle_timeout_s) {
            erg_error e;
            db_run(srv, &e, "UPDATE jobs SET evicted=1 WHERE job_id=?", "t", j->id);
            srv_log(srv, ERG_LOG_INFO, "evict", j->id, "idle for %.0f s", idle);
            srv->evicted_total++;
            *pp = j->next;
            job_free(j);
            continue;
        }
        pp = &j->next;
    }
}

void srv_free_jobs(erg_server *srv)
{
    while (srv->jobs) {
        srv_job *j = srv->jobs;
        srv->jobs = j->next;
        job_free(j);
    }
}

void srv_wake_all(erg_server *srv)
{
    for (srv_job *j = srv->jobs; j; j = j->next) {
        pthread_cond_broadcast(&j->cond);
        wake_parked(srv, j);
    }
}
