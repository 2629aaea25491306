/* jobs.c: the control-plane server's job, rank and window state machine (life cycle, barrier,
 * results, window completion, replay after a restart, timeouts and eviction). Wire-neutral:
 * see jobs.h for the life cycle and the API the wire layers use. */
#include "server/jobs.h"
#include "server/fleet.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "server/store.h"
#include "server/zeus.h"

static const char *const state_names[SRV_JOB_NUM_STATES] = {"registering", "running", "done",
                                                            "failed", "aborted"};

const char *erg__srv_job_state_name(int state)
{
    return state >= 0 && state < SRV_JOB_NUM_STATES ? state_names[state] : "unknown";
}

/* ---- allocation ---- */

static void job_free(srv_job *j)
{
    if (!j)
        return;
    erg__srv_sched_free(j->sched);
    erg__srv_dump_queue_free(j);
    for (int r = 0; j->ranks && r < j->world; r++) {
        json_decref(j->ranks[r].info);
        erg__free(j->ranks[r].instrs);
        erg__free(j->ranks[r].states);
    }
    for (int r = 0; j->results && r < j->world; r++)
        json_decref(j->results[r]);
    for (int r = 0; j->parsed && r < j->world; r++)
        if (j->parsed[r]) {
            erg__srv_result_free(j->parsed[r]);
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

srv_job *erg__srv_job_find(erg_server *srv, const char *id)
{
    for (srv_job *j = srv->jobs; j; j = j->next)
        if (!strcmp(j->id, id))
            return j;
    return NULL;
}

void erg__srv_job_touch(srv_job *j)
{
    j->last_activity = erg__srv_now_mono();
}

/* Only live jobs count against --max-jobs: a finished one holds no rank. */
int erg__srv_jobs_held(erg_server *srv)
{
    int held = 0;
    for (srv_job *o = srv->jobs; o; o = o->next)
        held += srv_job_live(o->state);
    return held;
}

static void set_message(srv_job *j, const char *msg)
{
    erg__free(j->message);
    j->message = erg__strdup(msg ? msg : "");
}

static srv_job *job_alloc(const char *id, json_t *info, const char *sched, json_t *args, int mode)
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
    if (j->pp < 1 || j->dp < 1 || j->tp < 1 || j->world != j->pp * j->dp * j->tp) {
        j->world = j->pp = 0;
        job_free(j);
        return NULL;
    }
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
    j->created_mono = j->last_activity = erg__srv_now_mono();
    return j;
}

/* ---- parked requests ----
 *
 * Over HTTP a schedule request that must wait does not hold a thread: its
 * connection is suspended (libmicrohttpd) and a waiter is queued on the job.
 * Whatever may answer it (barrier released, job ended, deadline passed,
 * shutdown) calls wake_parked, which asks the waiter's wire for every answer
 * that is now known and resumes those connections. So a barrier of 1,000
 * ranks costs 1,000 formatted responses, not 1,000 thread wake-ups.
 * Suspending happens under the server lock, before the waiter is visible, so
 * a wake can never overtake its suspend. */
typedef struct srv_waiter {
    long rank, window;
    int flags;
    srv_answer_fn answer;
    double deadline;
    void *conn;
    struct srv_waiter *next;
} srv_waiter;

static void wake_parked(erg_server *srv, srv_job *j)
{
    srv_waiter **pp = &j->parked;
    double now = erg__srv_now_mono();
    while (*pp) {
        srv_waiter *w = *pp;
        srv_resp r2;
        memset(&r2, 0, sizeof r2);
        double t0 = erg__srv_now_mono();
        if (!w->answer(srv, j, w->rank, w->window, w->flags, now >= w->deadline, &r2)) {
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
        /* a parked request is a schedule request: counted, with the time its answer took
         * (its wait at the barrier excluded, as for requests answered at once) */
        erg__srv_metrics_observe(srv, 0, r2.status, erg__srv_now_mono() - t0);
        srv->wake(w->conn, r2.status, r2.body, r2.ctype);
        erg__free(w);
    }
}

bool erg__srv_job_wait(erg_server *srv, srv_job *j, long r, long w, double wait, void *conn,
                       srv_answer_fn answer, int flags, srv_resp *rs)
{
    srv_rank *rk = &j->ranks[r];
    double deadline = erg__srv_now_mono() + wait;
    if (answer(srv, j, r, w, flags, wait <= 0, rs))
        return true;
    if (conn && srv->park && srv->wake) {
        srv_waiter *wt = erg__calloc(1, sizeof *wt);
        if (!wt)
            return false;
        *wt = (srv_waiter){r, w, flags, answer, deadline, conn, j->parked};
        srv->park(conn);
        j->parked = wt;
        j->waiters++;
        rk->waiting++;
        rs->parked = true;
        return true;
    }
    /* Direct calls (erg_server_handle): wait on the job's condition. */
    j->waiters++;
    rk->waiting++;
    for (;;) {
        rk->last_seen = erg__srv_now_mono();
        double now = erg__srv_now_mono();
        if (answer(srv, j, r, w, flags, now >= deadline, rs))
            break;
        double step = fmin(deadline - now, 1.0);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + step;
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
        double tw = erg__srv_now_mono();
        pthread_cond_timedwait(&j->cond, &srv->mu, &ts);
        rs->waited_s += erg__srv_now_mono() - tw;
    }
    rk->waiting--;
    j->waiters--;
    rk->last_seen = erg__srv_now_mono();
    j->last_activity = erg__srv_now_mono();
    return true;
}

/* ---- life cycle ---- */

void erg__srv_job_finish(erg_server *srv, srv_job *j, int state, const char *msg)
{
    if (!srv_job_live(j->state))
        return;
    j->state = state;
    set_message(j, msg);
    erg__srv_store_job_state(srv, j->id, state_names[j->state], j->message);
    erg__srv_store_event(srv, j->id, state_names[state], msg);
    erg__srv_log(srv, state == SRV_JOB_DONE ? ERG_LOG_INFO : ERG_LOG_WARNING, "job_end", j->id,
                 "%s: %s", state_names[state], msg ? msg : "");
    pthread_cond_broadcast(&j->cond);
    wake_parked(srv, j);
    erg__srv_fleet_job_ended(srv, j);
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
    j->srv = srv;
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
    /* Rank 0's supported states are the job's (as in the Perseus server). */
    c->n_states = j->ranks[0].n_states;
    c->states = erg__calloc((size_t)c->n_states + 1, sizeof(int));
    if (!c->states)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    memcpy(c->states, j->ranks[0].states, (size_t)c->n_states * sizeof(int));
    return erg__srv_dump_job_start(srv, j, err);
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
            st = erg__srv_result_from_json(j->results[r], &pr[r], err);
        }
    }
    for (int s = 0; !st && s < j->pp; s++) {
        int n = 0;
        grp[n++] = &pr[j->stage_rep[s]];
        for (int r = 0; r < j->world; r++)
            if (j->ranks[r].pp == s && r != j->stage_rep[s])
                grp[n++] = &pr[r];
        st = erg__srv_result_aggregate(grp, n, &ps[s], err);
    }
    if (st)
        goto out;
    if ((st = erg__srv_dump_window(srv, j, replay, err)))
        goto out;
    account_energy(j, pr);
    st = erg__srv_sched_observe(j->sched, ps, err);
    if (!replay)
        srv->windows_completed++;
out:
    for (int r = 0; pr && r < j->world; r++)
        erg__srv_result_free(&pr[r]);
    for (int s = 0; ps && s < j->pp; s++)
        erg__srv_result_free(&ps[s]);
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

/* Compute the schedule of window j->window (and, while replaying, fold in
 * every stored complete window). */
static void advance(erg_server *srv, srv_job *j, bool replay)
{
    erg_error err;
    for (;;) {
        /* The straggler target in effect for this window. */
        int released = 0, tk = j->tkind;
        double tv = j->tval;
        bool have_row = erg__srv_store_window_get(srv, j->id, j->window, &released, &tk, &tv);
        erg__srv_sched_set_target(j->sched, tk, tv);
        int **per_stage = NULL;
        bool done = false;
        erg_status st = erg__srv_sched_next(j->sched, &per_stage, &done, &err);
        if (!st && done) {
            erg__srv_job_finish(srv, j, SRV_JOB_DONE, "the scheduler has finished");
            return;
        }
        if (!st)
            st = set_current_schedule(j, per_stage, &err);
        if (st) {
            erg__srv_job_finish(srv, j, SRV_JOB_FAILED, err.msg);
            return;
        }
        j->choice = erg__srv_sched_choice(j->sched);
        j->released = released;
        if (!have_row)
            erg__srv_store_window_add(srv, j->id, j->window, tk, tv, j->choice);
        if (!replay)
            break;
        int n = erg__srv_store_load_results(srv, j->id, j->window, j->results, j->world);
        j->n_results = n;
        if (n < j->world)
            break;
        if (complete_window(srv, j, true, &err)) {
            erg__srv_job_finish(srv, j, SRV_JOB_FAILED, err.msg);
            return;
        }
        j->window++;
    }
    erg__srv_log(srv, ERG_LOG_DEBUG, "window", j->id, "window %ld scheduled", j->window);
    pthread_cond_broadcast(&j->cond);
}

static void start_running(erg_server *srv, srv_job *j, bool replay)
{
    erg_error err;
    erg_status st = job_build_ctx(srv, j, &err);
    if (!st)
        st = erg__srv_sched_new(j->sched_name, j->sched_args, &j->ctx, &j->sched, &err);
    if (st) {
        j->state = SRV_JOB_REGISTERING; /* erg__srv_job_finish only ends live jobs */
        erg__srv_job_finish(srv, j, SRV_JOB_FAILED, err.msg);
        return;
    }
    j->state = SRV_JOB_RUNNING;
    if (!replay)
        erg__srv_store_job_state(srv, j->id, state_names[j->state], j->message);
    j->window = 0;
    erg__srv_fleet_job_started(srv, j, replay); /* under a cap: its fleet point, before window 0 */
    advance(srv, j, replay);
}

static void try_release(erg_server *srv, srv_job *j)
{
    if (j->state != SRV_JOB_RUNNING || j->released)
        return;
    for (int r = 0; r < j->world; r++)
        if (j->ranks[r].asked < j->window)
            return;
    j->released = true;
    erg__srv_store_window_release(srv, j->id, j->window);
    erg__srv_log(srv, ERG_LOG_DEBUG, "barrier", j->id, "window %ld released", j->window);
    pthread_cond_broadcast(&j->cond);
    wake_parked(srv, j);
}

/* ---- requests ---- */

static void trim_finished(erg_server *srv);

/* Ranks of a live job that may wait at a barrier at once: all of them, but a Zeus job's
 * ranks ask once (its client fetches one schedule), so none once its first barrier opened. */
static long barrier_demand(const srv_job *j)
{
    if (!srv_job_live(j->state) || (srv_job_is_zeus(j) && j->window == 0 && j->released))
        return 0;
    return j->world;
}

/* A rank waiting at a barrier holds its HTTP connection until every rank has asked, so a job
 * whose ranks cannot all hold one at once would wait forever, the ranks refused a connection
 * failing (issue 38 item 4): such a job is refused here, with the numbers. SRV_INVALID when
 * the job alone is too wide, SRV_UNAVAILABLE when the live jobs' ranks leave too few. */
static srv_outcome check_width(erg_server *srv, long world, char *why, size_t wn)
{
    char how[400];
    long cap = erg__srv_conns_barrier_capacity(srv, how, sizeof how);
    if (cap < 0) /* no HTTP front: direct calls wait on the job, not on a connection */
        return SRV_OK;
    if (world > cap) {
        snprintf(why, wn,
                 "world_size %ld is more than the %ld ranks this server can hold waiting at a "
                 "barrier (%s): its ranks would wait forever. Raise --max-connections and "
                 "--max-connections-per-ip to at least %ld (and the descriptor limit, ulimit -n, "
                 "to %ld)",
                 world, cap > 0 ? cap : 0, how, world + SRV_CONN_RESERVE,
                 world + SRV_CONN_RESERVE + 128);
        return SRV_INVALID;
    }
    long others = 0;
    int n = 0;
    for (srv_job *j = srv->jobs; j; j = j->next) {
        long d = barrier_demand(j);
        others += d;
        n += d > 0;
    }
    if (world > cap - others) {
        snprintf(why, wn,
                 "world_size %ld does not fit beside the live jobs: the server can hold %ld ranks "
                 "waiting at barriers (%s), and the ranks of its %d live job(s) may hold %ld of "
                 "them; retry once one has ended (or end or abort one: POST "
                 "/v1/jobs/{job_id}/end), or raise the limits",
                 world, cap, how, n, others);
        return SRV_UNAVAILABLE;
    }
    return SRV_OK;
}

srv_outcome erg__srv_job_create(erg_server *srv, const char *id_base, json_t *info,
                                const char *sched, json_t *args, int mode, srv_job **out, char *why,
                                size_t wn)
{
    *out = NULL;
    trim_finished(srv);
    int held = erg__srv_jobs_held(srv);
    if (held >= srv->opts.max_jobs) {
        snprintf(why, wn,
                 "the server runs %d jobs (--max-jobs); end or abort some, or wait for idle jobs "
                 "to be evicted",
                 held);
        return SRV_UNAVAILABLE;
    }
    long world = (long)json_integer_value(json_object_get(info, "world_size"));
    srv_outcome wo = check_width(srv, world, why, wn);
    if (wo != SRV_OK) {
        erg__srv_log(srv, ERG_LOG_WARNING, "register_job", NULL, "refused: %s", why);
        return wo;
    }
    erg__buf id = {0};
    if (erg__buf_printf(&id, "%s", id_base)) {
        snprintf(why, wn, "out of memory");
        return SRV_INTERNAL;
    }
    size_t base = id.len;
    /* Unique across servers that share the dump directory too: the id is the one whose
     * dump directory this job creates (two servers gave identical JobInfos of one second
     * one id, and one job's dumps replaced the other's). */
    for (int k = 2; erg__srv_job_find(srv, id.data) || erg__srv_store_has_job(srv, id.data) ||
                    !erg__srv_dump_claim_dir(srv, id.data);
         k++) {
        id.len = base;
        id.data[base] = 0;
        erg__buf_printf(&id, "+%d", k);
    }
    srv_job *j = job_alloc(id.data, info, sched, args, mode);
    char *infos = erg__srv_json_compact(info), *argss = erg__srv_json_compact(args);
    erg_error e;
    erg_status st = j && infos && argss ? ERG_OK : ERG_ENOMEM;
    if (!st)
        st = erg__srv_store_insert_job(srv, id.data, infos, sched, argss, mode, erg__srv_now_wall(),
                                       &e);
    erg__free(infos);
    erg__free(argss);
    if (st)
        erg__srv_dump_unclaim_dir(srv, id.data);
    erg__buf_free(&id);
    if (st) {
        job_free(j);
        snprintf(why, wn, "could not create the job: %s", st == ERG_EDB ? e.msg : "out of memory");
        return st == ERG_EDB ? SRV_UNAVAILABLE : SRV_INTERNAL;
    }
    j->created_wall = erg__srv_now_wall();
    j->next = srv->jobs;
    srv->jobs = j;
    erg__srv_log(srv, ERG_LOG_INFO, "register_job", j->id, "world_size %d, scheduler %s", j->world,
                 sched);
    *out = j;
    return SRV_OK;
}

/* Apply a rank to the in-memory job. */
static erg_status rank_apply(srv_job *j, const srv_rank_spec *sp, json_t *record)
{
    srv_rank *rk = &j->ranks[sp->rank];
    rk->instrs = erg__calloc((size_t)sp->n_instrs + 1, sizeof(int));
    rk->states = erg__calloc((size_t)sp->n_states + 1, sizeof(int));
    if (!rk->instrs || !rk->states) {
        erg__free(rk->instrs);
        erg__free(rk->states);
        rk->instrs = rk->states = NULL;
        return ERG_ENOMEM;
    }
    memcpy(rk->instrs, sp->instrs, (size_t)sp->n_instrs * sizeof(int));
    memcpy(rk->states, sp->states, (size_t)sp->n_states * sizeof(int));
    qsort(rk->states, (size_t)sp->n_states, sizeof(int), cmp_desc);
    rk->n_instrs = sp->n_instrs;
    rk->n_states = sp->n_states;
    rk->dp = sp->dp;
    rk->pp = sp->pp;
    rk->tp = sp->tp;
    rk->info = json_incref(record);
    rk->registered = true;
    rk->last_seen = erg__srv_now_mono();
    j->n_registered++;
    return ERG_OK;
}

static bool same_instrs(const srv_rank *a, const srv_rank_spec *b)
{
    return a->n_instrs == b->n_instrs &&
           !memcmp(a->instrs, b->instrs, (size_t)b->n_instrs * sizeof(int));
}

srv_outcome erg__srv_job_add_rank(erg_server *srv, srv_job *j, const srv_rank_spec *sp,
                                  json_t *record, char *why, size_t wn)
{
    long r = sp->rank;
    if (r < 0 || r >= j->world) {
        snprintf(why, wn, "field rank = %ld is out of range [0, %d]", r, j->world - 1);
        return SRV_INVALID;
    }
    srv_rank *rk = &j->ranks[r];
    if (rk->registered) {
        if (json_equal(rk->info, record)) {
            rk->last_seen = erg__srv_now_mono();
            return SRV_DUPLICATE;
        }
        snprintf(why, wn, "rank %ld is already registered with different information", r);
        return SRV_CONFLICT;
    }
    if (j->state != SRV_JOB_REGISTERING) {
        snprintf(why, wn, "job %s is %s; it takes no more ranks", j->id, state_names[j->state]);
        return SRV_CONFLICT;
    }
    for (int o = 0; o < j->world; o++) {
        srv_rank *ok = &j->ranks[o];
        if (!ok->registered)
            continue;
        if (ok->dp == sp->dp && ok->pp == sp->pp && ok->tp == sp->tp) {
            snprintf(why, wn, "rank %d already has dp_rank %d, pp_rank %d, tp_rank %d", o, sp->dp,
                     sp->pp, sp->tp);
            return SRV_INVALID;
        }
        if (ok->pp == sp->pp && !same_instrs(ok, sp)) {
            snprintf(why, wn,
                     "rank %ld's pipe_schedule differs from rank %d's, which has the same pp_rank "
                     "%d",
                     r, o, sp->pp);
            return SRV_INVALID;
        }
    }
    char *s = erg__srv_json_compact(record);
    erg_error e;
    erg_status st = s ? erg__srv_store_insert_rank(srv, j->id, r, s, &e) : ERG_ENOMEM;
    erg__free(s);
    if (!st)
        st = rank_apply(j, sp, record);
    if (st) {
        snprintf(why, wn, "could not store the rank: %s", st == ERG_EDB ? e.msg : "out of memory");
        return SRV_UNAVAILABLE;
    }
    erg__srv_log(srv, ERG_LOG_DEBUG, "register_rank", j->id, "rank %ld (%d of %d)", r,
                 j->n_registered, j->world);
    if (j->n_registered == j->world)
        start_running(srv, j, false);
    return SRV_OK;
}

srv_outcome erg__srv_job_ask(erg_server *srv, srv_job *j, long r, long *window, char *why,
                             size_t wn)
{
    if (r < 0 || r >= j->world) {
        snprintf(why, wn, "rank %ld is not in job %s (world size %d)", r, j->id, j->world);
        return SRV_NOT_FOUND;
    }
    srv_rank *rk = &j->ranks[r];
    if (!rk->registered) {
        snprintf(why, wn, "rank %ld has not registered in job %s", r, j->id);
        return SRV_NOT_FOUND;
    }
    long w = j->results[r] ? j->window + 1 : j->window;
    if (j->state == SRV_JOB_REGISTERING)
        w = 0;
    if (rk->asked < w)
        rk->asked = w;
    rk->last_seen = erg__srv_now_mono();
    try_release(srv, j);
    *window = w;
    return SRV_OK;
}

srv_sched_state erg__srv_job_schedule_state(erg_server *srv, const srv_job *j, long w)
{
    if (srv->stopping)
        return SRV_SCHED_STOPPING;
    if (!srv_job_live(j->state))
        return SRV_SCHED_ENDED;
    if (j->state == SRV_JOB_RUNNING && j->window == w && j->released)
        return SRV_SCHED_READY;
    if (j->state == SRV_JOB_RUNNING && j->window > w)
        return SRV_SCHED_LATE;
    return SRV_SCHED_PENDING;
}

srv_outcome erg__srv_job_add_result(erg_server *srv, srv_job *j, long r, long win, json_t *record,
                                    const srv_result *parsed, char *why, size_t wn)
{
    if (r < 0 || r >= j->world) {
        snprintf(why, wn, "field rank = %ld is out of range [0, %d]", r, j->world - 1);
        return SRV_INVALID;
    }
    srv_rank *rk = &j->ranks[r];
    if (!rk->registered) {
        snprintf(why, wn, "rank %ld has not registered in job %s", r, j->id);
        return SRV_NOT_FOUND;
    }
    rk->last_seen = erg__srv_now_mono();
    if (win < j->window || (win == j->window && j->results[r])) {
        snprintf(why, wn, "rank %ld already reported its result for window %ld of job %s", r, win,
                 j->id);
        bool stored = win == j->window || erg__srv_store_has_result(srv, j->id, win, r);
        return stored ? SRV_DUPLICATE : SRV_CONFLICT;
    }
    if (j->state != SRV_JOB_RUNNING) {
        snprintf(why, wn, "job %s is %s; it takes no results", j->id, state_names[j->state]);
        return SRV_NOT_RUNNING;
    }
    if (win > j->window || !j->released) {
        snprintf(why, wn,
                 "window %ld of job %s has not started: every rank must fetch its schedule first",
                 win, j->id);
        return SRV_CONFLICT;
    }
    char *s = erg__srv_json_compact(record);
    erg_error e;
    erg_status st = s ? erg__srv_store_insert_result(srv, j->id, win, r, s, &e) : ERG_ENOMEM;
    erg__free(s);
    if (st) {
        snprintf(why, wn, "could not store the result: %s",
                 st == ERG_EDB ? e.msg : "out of memory");
        return SRV_UNAVAILABLE;
    }
    j->results[r] = json_incref(record);
    /* Keep the numbers: complete_window then need not parse them again. */
    srv_result *pc = erg__malloc(sizeof *pc);
    if (pc && erg__srv_result_copy(parsed, pc) == ERG_OK)
        j->parsed[r] = pc;
    else
        erg__free(pc);
    j->n_results++;
    srv->results_total++;
    if (j->n_results == j->world) {
        erg__srv_fleet_window_reported(srv, j); /* before the next window is computed */
        if (complete_window(srv, j, false, &e)) {
            erg__srv_job_finish(srv, j, SRV_JOB_FAILED, e.msg);
        } else {
            erg__srv_log(srv, ERG_LOG_INFO, "window_done", j->id, "window %ld complete", j->window);
            j->window++;
            advance(srv, j, false);
            try_release(srv, j);
        }
    }
    return SRV_OK;
}

long erg__srv_job_set_target(erg_server *srv, srv_job *j, int kind, double value)
{
    j->tkind = kind;
    j->tval = value;
    erg__srv_store_job_target(srv, j->id, kind, value);
    char det[64];
    bool fleet = kind == SRV_TARGET_FLEET;
    snprintf(det, sizeof det, "%s=%g",
             fleet       ? "plan"
             : kind == 1 ? "slowdown"
                         : "deadline_s",
             value);
    erg__srv_store_event(srv, j->id, fleet ? "fleet" : "straggler", det);
    erg__srv_log(srv, ERG_LOG_INFO, fleet ? "fleet" : "straggler", j->id, "%s", det);
    erg__srv_fleet_job_target(srv, j, kind, value);
    return j->state == SRV_JOB_RUNNING ? j->window + 1 : 0;
}

/* ---- restore ---- */

/* A stored rank record (RankInfo: dp_rank, pp_rank, tp_rank, pipe_schedule
 * names, power_state_range) back into the job. */
static void restore_rank(erg_server *srv, long r, const char *text, void *user)
{
    (void)srv;
    srv_job *j = user;
    json_t *ri = text ? json_loads(text, 0, NULL) : NULL;
    if (!ri || r < 0 || r >= j->world || j->ranks[r].registered) {
        json_decref(ri);
        return;
    }
    const json_t *ps = json_object_get(ri, "pipe_schedule");
    const json_t *pr = json_object_get(ri, "power_state_range");
    size_t n = json_array_size(ps), m = json_array_size(pr);
    int *instrs = erg__calloc(n + 1, sizeof(int)), *states = erg__calloc(m + 1, sizeof(int));
    if (instrs && states) {
        for (size_t i = 0; i < n; i++)
            instrs[i] = erg__srv_instr_code(json_string_value(json_array_get(ps, i)));
        for (size_t i = 0; i < n; i++) /* Zeus names outside the enum */
            if (instrs[i] < 0)
                instrs[i] = SRV_I_OTHER;
        for (size_t i = 0; i < m; i++)
            states[i] = (int)json_integer_value(json_array_get(pr, i));
        srv_rank_spec sp = {r,
                            (int)json_integer_value(json_object_get(ri, "dp_rank")),
                            (int)json_integer_value(json_object_get(ri, "pp_rank")),
                            (int)json_integer_value(json_object_get(ri, "tp_rank")),
                            instrs,
                            (int)n,
                            states,
                            (int)m};
        rank_apply(j, &sp, ri);
    }
    erg__free(instrs);
    erg__free(states);
    json_decref(ri);
}

/* Did a dump write end this job? Before dumps were deferred (issue 15 item 4)
 * a refused dump failed its job for good, with the path in the message:
 * "<dump>/<job>/N.prof.json: write failed: ..." (or "cannot create",
 * "cannot create directory"). Such a job is taken up again at restore. */
static bool failed_by_dump(const erg_server *srv, const srv_job *j)
{
    if (j->state != SRV_JOB_FAILED || !j->message)
        return false;
    size_t dl = strlen(srv->dump_dir);
    const char *m = j->message;
    if (strncmp(m, srv->dump_dir, dl) || (m[dl] != '/' && m[dl] != ':'))
        return false;
    if (m[dl] == '/' && (strncmp(m + dl + 1, j->id, strlen(j->id)) ||
                         (m[dl + 1 + strlen(j->id)] != '/' && m[dl + 1 + strlen(j->id)] != ':')))
        return false;
    return strstr(m, ": write failed: ") || strstr(m, ": cannot create: ") ||
           strstr(m, ": cannot create directory: ");
}

/* A stored JobInfo as a bounded record: its fields ergon reads, then the others up to
 * SRV_JOBINFO_UNKNOWN_MAX_BYTES. A row written before registrations were bounded may hold
 * megabytes of them: it is rewritten, so that they are not parsed again at the next start. */
static json_t *restore_info(erg_server *srv, const char *id, const char *text)
{
    static const char *const known[] = {"job_id",           "framework",       "model_name",
                                        "partition_method", "pp_degree",       "dp_degree",
                                        "tp_degree",        "world_size",      "job_metadata",
                                        "microbatch_size",  "num_microbatches"};
    json_t *in = text ? json_loads(text, 0, NULL) : NULL;
    json_t *rec = json_is_object(in) ? json_object() : NULL;
    for (size_t i = 0; rec && i < sizeof known / sizeof known[0]; i++)
        if (json_object_get(in, known[i]))
            json_object_set(rec, known[i], json_object_get(in, known[i]));
    char dropped[512];
    if (rec && erg__srv_jobinfo_add_unknown(rec, in, NULL, dropped, sizeof dropped)) {
        char *s = erg__srv_json_compact(rec);
        erg_error e;
        erg_status st =
            s ? erg__srv_store_exec(srv, &e, "UPDATE jobs SET info=? WHERE job_id=?", "tt", s, id)
              : ERG_ENOMEM;
        erg__free(s);
        erg__srv_log(srv, ERG_LOG_WARNING, "restore", id,
                     "JobInfo fields ergon does not use are kept up to %d bytes; dropped from the "
                     "stored record%s: %s",
                     SRV_JOBINFO_UNKNOWN_MAX_BYTES, st ? " (in memory only: the row stays)" : "",
                     dropped);
    }
    json_decref(in);
    return rec;
}

static void restore_job(erg_server *srv, const srv_store_job_row *row, void *user)
{
    int *restored = user;
    json_t *info = row->id ? restore_info(srv, row->id, row->info) : NULL;
    json_t *args = row->args ? json_loads(row->args, 0, NULL) : NULL;
    srv_job *j = info && args && row->id && row->scheduler
                     ? job_alloc(row->id, info, row->scheduler, args, row->mode)
                     : NULL;
    json_decref(info);
    json_decref(args);
    if (!j)
        return;
    j->created_wall = row->created;
    j->tkind = row->tkind;
    j->tval = row->tval;
    for (int s = 0; s < SRV_JOB_NUM_STATES; s++)
        if (row->state && !strcmp(row->state, state_names[s]))
            j->state = s;
    set_message(j, row->message);
    erg__srv_store_each_rank(srv, j->id, restore_rank, j);
    j->next = srv->jobs;
    srv->jobs = j;
    (*restored)++;
    bool revive = srv->opts.dump_data && j->n_registered == j->world && failed_by_dump(srv, j);
    if (revive) {
        erg__srv_log(srv, ERG_LOG_WARNING, "restore", j->id,
                     "taken up again: it failed only because a dump could not be written (%s)",
                     j->message);
        erg__srv_store_event(srv, j->id, "revived", j->message);
        set_message(j, "");
        j->state = SRV_JOB_RUNNING;
    }
    if (j->n_registered == j->world && srv_job_live(j->state)) {
        j->state = SRV_JOB_REGISTERING;
        start_running(srv, j, true);
        if (revive && srv_job_live(j->state))
            erg__srv_store_job_state(srv, j->id, state_names[j->state], j->message);
    }
}

erg_status erg__srv_jobs_restore(erg_server *srv, erg_error *err)
{
    int restored = 0;
    erg_status st = erg__srv_store_each_job(srv, restore_job, &restored, err);
    if (st)
        return st;
    if (restored)
        erg__srv_log(srv, ERG_LOG_INFO, "restore", NULL, "restored %d jobs from %s", restored,
                     srv->db_path);
    trim_finished(srv);
    return ERG_OK;
}

/* ---- housekeeping ---- */

/* Drop *pp from memory (its rows stay; requests for it get 404 "evicted"). */
static void evict(erg_server *srv, srv_job **pp, const char *why)
{
    srv_job *j = *pp;
    if (j->dump_q)
        erg__srv_dumps_flush(srv);
    if (j->dump_q) {
        erg__srv_log(srv, ERG_LOG_ERROR, "dump", j->id,
                     "evicted with %zu bytes of dumps the disk never took (results are in the "
                     "database)",
                     j->dump_q_bytes);
        erg__srv_store_event(srv, j->id, "dump_dropped", "evicted before the disk took its dumps");
    }
    erg__srv_store_job_evicted(srv, j->id);
    erg__srv_log(srv, ERG_LOG_INFO, "evict", j->id, "%s", why);
    srv->evicted_total++;
    *pp = j->next;
    job_free(j);
}

/* Finished jobs are kept for their status, but at most --max-jobs of them:
 * beyond that the least recently used ones are evicted, so job churn does
 * not grow the server's memory. */
static void trim_finished(erg_server *srv)
{
    for (;;) {
        int finished = 0;
        srv_job **oldest = NULL;
        for (srv_job **pp = &srv->jobs; *pp; pp = &(*pp)->next) {
            srv_job *j = *pp;
            if (srv_job_live(j->state) || j->waiters)
                continue;
            finished++;
            if (!oldest || j->last_activity <= (*oldest)->last_activity)
                oldest = pp;
        }
        if (finished <= srv->opts.max_jobs || !oldest)
            return;
        evict(srv, oldest, "finished; more than --max-jobs finished jobs are held");
    }
}

void erg__srv_jobs_housekeeping(erg_server *srv)
{
    double now = erg__srv_now_mono();
    erg__srv_dumps_flush(srv);
    for (srv_job *j = srv->jobs; j; j = j->next)
        if (j->parked)
            wake_parked(srv, j); /* deadlines */
    srv_job **pp = &srv->jobs;
    while (*pp) {
        srv_job *j = *pp;
        if (srv_job_live(j->state) && srv->opts.rank_timeout_s > 0) {
            for (int r = 0; r < j->world; r++) {
                srv_rank *rk = &j->ranks[r];
                double seen = rk->registered ? rk->last_seen : j->created_mono;
                if (rk->waiting == 0 && now - seen > srv->opts.rank_timeout_s &&
                    (rk->registered || j->state == SRV_JOB_REGISTERING)) {
                    char msg[160];
                    snprintf(msg, sizeof msg, "rank %d %s for %.1f s (rank timeout %.1f s)", r,
                             rk->registered ? "was silent" : "did not register", now - seen,
                             srv->opts.rank_timeout_s);
                    erg__srv_job_finish(srv, j, SRV_JOB_ABORTED, msg);
                    break;
                }
            }
        }
        double idle = now - j->last_activity;
        if (idle > srv->opts.job_idle_timeout_s && srv_job_live(j->state))
            erg__srv_job_finish(srv, j, SRV_JOB_ABORTED,
                                "evicted after being idle"); /* answers parked ones */
        if (j->waiters == 0 && idle > srv->opts.job_idle_timeout_s) {
            char why[64];
            snprintf(why, sizeof why, "idle for %.0f s", idle);
            evict(srv, pp, why);
            continue;
        }
        pp = &j->next;
    }
    trim_finished(srv);
}

void erg__srv_jobs_free(erg_server *srv)
{
    erg__srv_dumps_flush(srv); /* a last try */
    for (srv_job *j = srv->jobs; j; j = j->next)
        if (j->dump_q)
            erg__srv_log(srv, ERG_LOG_ERROR, "dump", j->id,
                         "stopping with %zu bytes of dumps the disk did not take; a restart "
                         "rewrites missing window dumps from the database",
                         j->dump_q_bytes);
    while (srv->jobs) {
        srv_job *j = srv->jobs;
        srv->jobs = j->next;
        job_free(j);
    }
}

void erg__srv_jobs_wake_all(erg_server *srv)
{
    for (srv_job *j = srv->jobs; j; j = j->next) {
        pthread_cond_broadcast(&j->cond);
        wake_parked(srv, j);
    }
}
