/* fleet.c: many jobs under one power cap in `ergon serve` (docs/fleet.md, src/server/fleet.h).
 *
 * A member is a running job of the Frontier scheduler, whichever protocol registered it (Perseus,
 * /v1, Zeus). Its frontier directory is read once per directory (members share it): each plan's
 * iteration time and average power, emulated with the directory's profile and blocking power
 * when it has them (as `ergon choose` evaluates plans), the planner's estimates otherwise. A
 * member's power is the pipeline's times world / pp (its data- and tensor-parallel copies run the
 * same plan); a straggler target sets a floor under its time (points faster than the straggler's
 * pace buy nothing). With a cap the fleet solves erg_fleet_assign over the members and sends
 * every changed point to its job as a target of kind SRV_TARGET_FLEET; without one, members run
 * their own targets. Every decision, with the members whose point changed, is a row of
 * fleet_decisions and fleet_assignments. */
#include "server/fleet.h"

#include "server/jobs.h"
#include "server/store.h"
#include "server/zeus.h"

#include "ergon/emulate.h"
#include "ergon/fleet.h"
#include "ergon/planner.h"

#include <math.h>
#include <sqlite3.h>
#include <string.h>

typedef struct fl_front { /* one frontier directory */
    char *dir;
    size_t n;
    double *time_s, *power_w; /* per plan, one pipeline */
    double all_max_s;         /* slowdown targets are relative to it */
    struct fl_front *next;
} fl_front;

typedef struct fl_member {
    srv_job *job;
    const fl_front *fr;
    double scale; /* world / pp */
    int tkind;    /* straggler target: 0 none, 1 slowdown, 2 deadline_s */
    double tval;
    double *t_eff, *p; /* per plan: max(time, straggler's), power x scale */
    double fastest_s;
    long point; /* assigned plan (-1: none) */
    bool open;  /* a Zeus member whose next window is being decided now (fleet_window_reported) */
    struct fl_member *next;
} fl_member;

struct srv_fleet {
    bool have_cap;
    double cap_w;
    json_t *cfg; /* job_id -> {"weight": w, "tkind": k, "tval": v} (table fleet_jobs) */
    fl_front *fronts;
    fl_member *members;
    size_t n_members;
    bool dirty, busy;
    long decisions;
    bool have_result;
    erg_fleet_result last;
    double last_solve_s;
};

static const char *const fleet_schema[] = {
    "CREATE TABLE IF NOT EXISTS fleet_config(key TEXT PRIMARY KEY, value REAL)",
    "CREATE TABLE IF NOT EXISTS fleet_jobs(job_id TEXT PRIMARY KEY, weight REAL NOT NULL"
    " DEFAULT 1, tkind INTEGER NOT NULL DEFAULT 0, tval REAL NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS fleet_decisions(id INTEGER PRIMARY KEY, time REAL NOT NULL,"
    " reason TEXT NOT NULL, cap_w REAL, power_w REAL, weighted_slowdown REAL,"
    " lower_bound REAL, exact INTEGER, gap REAL, solve_s REAL, members INTEGER,"
    " feasible INTEGER)",
    "CREATE TABLE IF NOT EXISTS fleet_assignments(decision INTEGER NOT NULL, job_id TEXT NOT"
    " NULL, point INTEGER NOT NULL, time_s REAL, power_w REAL, weight REAL)",
};

/* ---- configuration ---- */

static double cfg_num(const struct srv_fleet *fl, const char *id, const char *key, double dflt)
{
    const json_t *v = json_object_get(json_object_get(fl->cfg, id), key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static erg_status cfg_set(erg_server *srv, const char *id, double weight, int tkind, double tval)
{
    struct srv_fleet *fl = srv->fleet;
    json_object_set_new(fl->cfg, id,
                        json_pack("{s:f,s:i,s:f}", "weight", weight, "tkind", tkind, "tval", tval));
    erg_error e;
    return erg__srv_store_exec(
        srv, &e,
        "INSERT INTO fleet_jobs(job_id, weight, tkind, tval) VALUES(?,?,?,?) ON "
        "CONFLICT(job_id) DO UPDATE SET weight=excluded.weight, "
        "tkind=excluded.tkind, tval=excluded.tval",
        "tdid", id, weight, (long long)tkind, tval);
}

erg_status erg__srv_fleet_open(erg_server *srv, erg_error *err)
{
    struct srv_fleet *fl = erg__calloc(1, sizeof *fl);
    if (!fl || !(fl->cfg = json_object())) {
        erg__free(fl);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    srv->fleet = fl;
    for (size_t i = 0; i < ERG__ARRAY_LEN(fleet_schema); i++) {
        erg_status st = erg__srv_store_exec(srv, err, fleet_schema[i], "");
        if (st)
            return st;
    }
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(srv->db, "SELECT value FROM fleet_config WHERE key='cap_w'", -1, &q,
                           NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL) {
        fl->have_cap = true;
        fl->cap_w = sqlite3_column_double(q, 0);
    }
    sqlite3_finalize(q);
    q = NULL;
    if (sqlite3_prepare_v2(srv->db, "SELECT job_id, weight, tkind, tval FROM fleet_jobs", -1, &q,
                           NULL) == SQLITE_OK)
        while (sqlite3_step(q) == SQLITE_ROW) {
            const char *id = (const char *)sqlite3_column_text(q, 0);
            if (id)
                json_object_set_new(
                    fl->cfg, id,
                    json_pack("{s:f,s:i,s:f}", "weight", sqlite3_column_double(q, 1), "tkind",
                              sqlite3_column_int(q, 2), "tval", sqlite3_column_double(q, 3)));
        }
    sqlite3_finalize(q);
    return ERG_OK;
}

static void member_free(fl_member *m)
{
    erg__free(m->t_eff);
    erg__free(m->p);
    erg__free(m);
}

void erg__srv_fleet_free(erg_server *srv)
{
    struct srv_fleet *fl = srv->fleet;
    if (!fl)
        return;
    while (fl->members) {
        fl_member *m = fl->members;
        fl->members = m->next;
        member_free(m);
    }
    while (fl->fronts) {
        fl_front *f = fl->fronts;
        fl->fronts = f->next;
        erg__free(f->dir);
        erg__free(f->time_s);
        erg__free(f->power_w);
        erg__free(f);
    }
    json_decref(fl->cfg);
    erg__free(fl);
    srv->fleet = NULL;
}

/* ---- frontiers ---- */

/* Plan k's time and energy: emulated against the baseline when there is one. */
static erg_status point_of(const erg_frontier *f, const erg_frontier_baseline *b, size_t k,
                           double *t, double *e, erg_error *err)
{
    if (!b->have) {
        erg_frontier_point pt;
        erg_status st = erg_frontier_get(f, k, &pt, err);
        *t = pt.time_s;
        *e = pt.energy_j;
        return st;
    }
    erg_plan *p = NULL;
    erg_emulation em;
    erg_emulate_opts o;
    erg_emulate_opts_init(&o);
    o.blocking_power_w = b->power_w;
    o.switch_latency_s = b->switch_latency_s;
    o.transfer_time_s = b->transfer_time_s;
    erg_status st = erg_frontier_plan(f, k, &p, err);
    if (!st)
        st = erg_emulate_ex(b->prof, b->dag, p, &o, &em, NULL, NULL, err);
    erg_plan_free(p);
    *t = em.time_s;
    *e = em.energy_j;
    return st;
}

static const fl_front *front_get(erg_server *srv, const char *dir, erg_error *err)
{
    struct srv_fleet *fl = srv->fleet;
    for (fl_front *x = fl->fronts; x; x = x->next)
        if (!strcmp(x->dir, dir))
            return x;
    erg_frontier *f = NULL;
    erg_frontier_baseline b;
    erg_frontier_baseline_init(&b);
    fl_front *x = erg__calloc(1, sizeof *x);
    erg_status st = x ? erg_frontier_read_dir(dir, NULL, &f, err)
                      : erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (!st)
        st = erg_frontier_baseline_open(dir, f, &b, err);
    if (!st) {
        x->n = erg_frontier_size(f);
        x->dir = erg__strdup(dir);
        x->time_s = erg__calloc(x->n + 1, sizeof(double));
        x->power_w = erg__calloc(x->n + 1, sizeof(double));
        if (!x->dir || !x->time_s || !x->power_w)
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    double fastest = INFINITY;
    for (size_t k = 0; !st && k < x->n; k++) {
        double t, e;
        st = point_of(f, &b, k, &t, &e, err);
        x->time_s[k] = t;
        x->power_w[k] = t > 0 ? e / t : 0;
        fastest = fmin(fastest, t);
    }
    if (!st && !x->n)
        st = erg_error_set(err, ERG_EINVAL, "the frontier in %s has no plans", dir);
    if (!st) {
        x->all_max_s = b.have ? b.all_max.time_s : fastest;
        x->next = fl->fronts;
        fl->fronts = x;
    }
    erg_frontier_baseline_free(&b);
    erg_frontier_free(f);
    if (st && x) {
        erg__free(x->dir);
        erg__free(x->time_s);
        erg__free(x->power_w);
        erg__free(x);
        x = NULL;
    }
    return x;
}

/* The member's times with its straggler's floor. */
static void member_times(fl_member *m)
{
    double floor_s = m->tkind == 1 ? m->tval * m->fr->all_max_s : m->tkind == 2 ? m->tval : 0;
    m->fastest_s = INFINITY;
    for (size_t k = 0; k < m->fr->n; k++) {
        m->t_eff[k] = fmax(m->fr->time_s[k], floor_s);
        m->fastest_s = fmin(m->fastest_s, m->t_eff[k]);
    }
}

/* A job of the Frontier scheduler, whichever protocol registered it (Zeus jobs run it as
 * "zeus:Frontier"). */
static bool frontier_job(const srv_job *j)
{
    return !strcmp(j->sched_name, "Frontier") || !strcmp(j->sched_name, "zeus:Frontier");
}

static fl_member *member_of(erg_server *srv, const srv_job *j)
{
    for (fl_member *m = srv->fleet ? srv->fleet->members : NULL; m; m = m->next)
        if (m->job == j)
            return m;
    return NULL;
}

/* The plan the member's current window runs (the fastest plan while it warms up). */
static size_t window_point(const fl_member *m)
{
    long c = m->job->choice;
    return c >= 0 && (size_t)c < m->fr->n ? (size_t)c : m->fr->n - 1;
}

/* The plan a member runs now: its assignment, else its window's. */
static size_t member_point(const fl_member *m)
{
    return m->point >= 0 ? (size_t)m->point : window_point(m);
}

/* A member that cannot switch: a Zeus job's ranks take a window's plan once and run it until they
 * report its results (Zeus 0.16's client never does), and the plan of a window is computed when
 * the previous one completes. So a Zeus member is counted at the plan of its current window and is
 * free to move only at its arrival and when its ranks have reported every result of its window
 * (m->open). Perseus and /v1 members are free. */
static bool member_fixed(const fl_member *m)
{
    return srv_job_is_zeus(m->job) && !m->open;
}

/* The plan a member is counted at: the plan its current window runs when it is fixed (the
 * fastest plan while it warms up at all-max clocks), its assignment otherwise. */
static size_t counted_point(const fl_member *m)
{
    return member_fixed(m) ? window_point(m) : member_point(m);
}

/* ---- solving ---- */

static void set_point(erg_server *srv, fl_member *m, long point)
{
    m->point = point;
    erg__srv_job_set_target(srv, m->job, SRV_TARGET_FLEET, (double)point);
}

/* Without a cap the members run their own targets again: a decision too (cap_w NULL), with a
 * row of point -1 for every member released. */
static void release_all(erg_server *srv, const char *reason)
{
    struct srv_fleet *fl = srv->fleet;
    erg_error e;
    long long id = -1;
    fl->busy = true; /* our own targets do not re-enter */
    for (fl_member *m = fl->members; m; m = m->next) {
        if (m->point < 0)
            continue;
        if (id < 0 &&
            !erg__srv_store_exec(srv, &e,
                                 "INSERT INTO fleet_decisions(time, reason, members, "
                                 "feasible, exact) VALUES(?,?,?,1,1)",
                                 "dti", erg__srv_now_wall(), reason, (long long)fl->n_members))
            id = sqlite3_last_insert_rowid(srv->db);
        if (id >= 0)
            erg__srv_store_exec(
                srv, &e, "INSERT INTO fleet_assignments(decision, job_id, point) VALUES(?,?,-1)",
                "it", id, m->job->id);
        set_point(srv, m, -1);
        if (m->tkind)
            erg__srv_job_set_target(srv, m->job, m->tkind, m->tval);
    }
    fl->busy = false;
}

static void store_decision(erg_server *srv, const char *reason, const size_t *choice,
                           const long *before)
{
    struct srv_fleet *fl = srv->fleet;
    const erg_fleet_result *r = &fl->last;
    erg_error e;
    bool began = !erg__srv_store_exec(srv, &e, "BEGIN", "");
    erg_status st = erg__srv_store_exec(
        srv, &e,
        "INSERT INTO fleet_decisions(time, reason, cap_w, power_w, "
        "weighted_slowdown, lower_bound, exact, gap, solve_s, members, feasible) "
        "VALUES(?,?,?,?,?,?,?,?,?,?,?)",
        "dtddddiddii", erg__srv_now_wall(), reason, fl->cap_w, r->power_w, r->cost, r->lower_bound,
        (long long)r->exact, r->gap, fl->last_solve_s, (long long)fl->n_members,
        (long long)r->feasible);
    long long id = sqlite3_last_insert_rowid(srv->db);
    size_t i = 0;
    for (fl_member *m = fl->members; !st && m; m = m->next, i++) {
        if (before[i] == (long)choice[i])
            continue;
        st =
            erg__srv_store_exec(srv, &e,
                                "INSERT INTO fleet_assignments(decision, job_id, point, time_s, "
                                "power_w, weight) VALUES(?,?,?,?,?,?)",
                                "itiddd", id, m->job->id, (long long)choice[i], m->t_eff[choice[i]],
                                m->p[choice[i]], cfg_num(fl, m->job->id, "weight", 1));
    }
    if (began)
        erg__srv_store_exec(srv, &e, st ? "ROLLBACK" : "COMMIT", "");
    if (st)
        erg__srv_log(srv, ERG_LOG_ERROR, "fleet", NULL, "decision not stored: %s", e.msg);
}

static void solve(erg_server *srv, const char *reason)
{
    struct srv_fleet *fl = srv->fleet;
    fl->dirty = false;
    if (!fl->have_cap || !fl->n_members) {
        release_all(srv, reason);
        return;
    }
    size_t n = fl->n_members;
    erg_fleet_job *jobs = erg__calloc(n, sizeof *jobs);
    size_t *choice = erg__calloc(n, sizeof *choice);
    long *before = erg__calloc(n, sizeof *before);
    if (!jobs || !choice || !before) {
        erg__srv_log(srv, ERG_LOG_ERROR, "fleet", NULL, "out of memory: the fleet was not solved");
        goto out;
    }
    /* A fixed member is its one point (weight 0 there: its slowdown is added back after). */
    size_t i = 0, n_fixed = 0;
    double fixed_cost = 0;
    for (fl_member *m = fl->members; m; m = m->next, i++) {
        double w = cfg_num(fl, m->job->id, "weight", 1);
        size_t k = counted_point(m);
        jobs[i] = member_fixed(m) ? (erg_fleet_job){m->t_eff + k, m->p + k, 1, 0}
                                  : (erg_fleet_job){m->t_eff, m->p, m->fr->n, w};
        n_fixed += member_fixed(m);
        fixed_cost += member_fixed(m) ? w * m->t_eff[k] / m->fastest_s : 0;
        before[i] = m->point;
    }
    erg_error err;
    double t0 = erg__srv_now_mono();
    erg_status st = erg_fleet_assign(jobs, n, fl->cap_w, NULL, choice, &fl->last, &err);
    fl->last_solve_s = erg__srv_now_mono() - t0;
    if (st) {
        erg__srv_log(srv, ERG_LOG_ERROR, "fleet", NULL, "not solved: %s", err.msg);
        goto out;
    }
    i = 0;
    for (fl_member *m = fl->members; m; m = m->next, i++)
        if (member_fixed(m))
            choice[i] = counted_point(m);
    fl->last.cost += fixed_cost;
    fl->last.lower_bound += fixed_cost;
    fl->have_result = true;
    fl->decisions++;
    fl->busy = true; /* our own targets do not re-enter */
    i = 0;
    for (fl_member *m = fl->members; m; m = m->next, i++)
        if (m->point != (long)choice[i])
            set_point(srv, m, (long)choice[i]);
    fl->busy = false;
    store_decision(srv, reason, choice, before);
    char over[96] = "";
    if (!fl->last.feasible)
        snprintf(over, sizeof over,
                 " (over by %.1f W: every free job at its least power, %zu fixed)",
                 fl->last.power_w - fl->cap_w, n_fixed);
    erg__srv_log(srv, fl->last.feasible ? ERG_LOG_INFO : ERG_LOG_WARNING, "fleet", NULL,
                 "%s: %zu jobs (%zu fixed at the plan they run), %.1f W of a %.1f W cap%s, "
                 "weighted slowdown %.6f (%s, gap %.3g), %.1f ms",
                 reason, n, n_fixed, fl->last.power_w, fl->cap_w, over, fl->last.cost,
                 !fl->last.feasible ? "infeasible"
                 : fl->last.exact   ? "exact"
                                    : "not proven",
                 fl->last.gap, fl->last_solve_s * 1e3);
out:
    erg__free(jobs);
    erg__free(choice);
    erg__free(before);
}

/* ---- job events ---- */

void erg__srv_fleet_job_started(erg_server *srv, srv_job *j, bool replay)
{
    struct srv_fleet *fl = srv->fleet;
    if (!fl || !frontier_job(j) || member_of(srv, j))
        return;
    const char *dir = json_string_value(json_object_get(j->sched_args, "frontier_dir"));
    erg_error err;
    const fl_front *fr = dir ? front_get(srv, dir, &err) : NULL;
    fl_member *m = fr ? erg__calloc(1, sizeof *m) : NULL;
    if (m) {
        m->t_eff = erg__calloc(fr->n, sizeof(double));
        m->p = erg__calloc(fr->n, sizeof(double));
    }
    if (!m || !m->t_eff || !m->p) {
        erg__srv_log(srv, ERG_LOG_WARNING, "fleet", j->id, "not a fleet member: %s",
                     fr    ? "out of memory"
                     : dir ? err.msg
                           : "no frontier_dir");
        if (m)
            member_free(m);
        return;
    }
    m->job = j;
    m->fr = fr;
    m->scale = (double)j->world / (double)j->pp;
    m->point = replay && j->tkind == SRV_TARGET_FLEET ? (long)j->tval : -1;
    m->tkind = (int)cfg_num(fl, j->id, "tkind", 0);
    m->tval = cfg_num(fl, j->id, "tval", 0);
    if (!m->tkind && (j->tkind == 1 || j->tkind == 2)) {
        m->tkind = j->tkind;
        m->tval = j->tval;
    }
    for (size_t k = 0; k < fr->n; k++)
        m->p[k] = fr->power_w[k] * m->scale;
    member_times(m);
    m->next = fl->members;
    fl->members = m;
    fl->n_members++;
    if (replay) {
        fl->dirty = true; /* solved once at the next fleet request */
    } else {
        m->open = true; /* window 0 is computed after this decision */
        solve(srv, "arrive");
        m->open = false;
    }
}

void erg__srv_fleet_window_reported(erg_server *srv, srv_job *j)
{
    struct srv_fleet *fl = srv->fleet;
    fl_member *m = member_of(srv, j);
    if (!m || !fl->have_cap || !srv_job_is_zeus(j))
        return;
    if (fl->dirty)
        solve(srv, "restart"); /* the state before this window's end, as the restart found it */
    m->open = true;
    solve(srv, "window");
    m->open = false;
}

void erg__srv_fleet_job_ended(erg_server *srv, srv_job *j)
{
    struct srv_fleet *fl = srv->fleet;
    for (fl_member **pp = fl ? &fl->members : NULL; pp && *pp; pp = &(*pp)->next)
        if ((*pp)->job == j) {
            fl_member *m = *pp;
            *pp = m->next;
            fl->n_members--;
            member_free(m);
            solve(srv, "leave");
            return;
        }
}

void erg__srv_fleet_job_target(erg_server *srv, srv_job *j, int kind, double value)
{
    struct srv_fleet *fl = srv->fleet;
    fl_member *m = member_of(srv, j);
    if (!m || fl->busy || (kind != 1 && kind != 2))
        return;
    m->tkind = kind;
    m->tval = value;
    member_times(m);
    cfg_set(srv, j->id, cfg_num(fl, j->id, "weight", 1), kind, value);
    if (fl->have_cap) {
        m->point = -2; /* the straggler target replaced the assignment: send it again */
        solve(srv, "straggler");
    }
}

/* ---- the /v1 API ---- */

static json_t *fleet_json(erg_server *srv)
{
    struct srv_fleet *fl = srv->fleet;
    json_t *jobs = json_array();
    double power = 0, cost = 0;
    for (fl_member *m = fl->members; m; m = m->next) {
        size_t k = counted_point(m);
        double w = cfg_num(fl, m->job->id, "weight", 1), sd = m->t_eff[k] / m->fastest_s;
        power += m->p[k];
        cost += w * sd;
        json_t *o = json_pack("{s:s,s:f,s:I,s:b,s:f,s:f,s:f,s:f}", "job_id", m->job->id, "weight",
                              w, "point", (json_int_t)k, "assigned", m->point >= 0, "time_s",
                              m->t_eff[k], "power_w", m->p[k], "energy_per_iteration_j",
                              m->p[k] * m->t_eff[k], "slowdown", sd);
        double lo = INFINITY, hi = 0;
        for (size_t i = 0; i < m->fr->n; i++)
            lo = fmin(lo, m->p[i]), hi = fmax(hi, m->p[i]);
        if (o) {
            json_object_set_new(o, "min_power_w", json_real(lo));
            json_object_set_new(o, "max_power_w", json_real(hi));
            /* The plan the job's current window runs: the assigned point reaches it at its next
             * window (a Zeus 0.16 client asks for one window only). null: none yet, warm-up. */
            json_object_set_new(o, "window", json_integer(m->job->window));
            json_object_set_new(o, "fixed", json_boolean(member_fixed(m)));
            json_object_set_new(o, "window_point",
                                m->job->choice >= 0 ? json_integer(m->job->choice) : json_null());
        }
        if (o && m->tkind)
            json_object_set_new(
                o, "straggler",
                json_pack("{s:f}", m->tkind == 1 ? "slowdown" : "deadline_s", m->tval));
        json_array_append_new(jobs, o);
    }
    json_t *o = json_pack("{s:o,s:f,s:o,s:f,s:I,s:I,s:o}", "cap_w",
                          fl->have_cap ? json_real(fl->cap_w) : json_null(), "power_w", power,
                          "headroom_w", fl->have_cap ? json_real(fl->cap_w - power) : json_null(),
                          "weighted_slowdown", cost, "members", (json_int_t)fl->n_members,
                          "decisions", (json_int_t)fl->decisions, "jobs", jobs);
    if (o && fl->have_result)
        json_object_set_new(o, "last_decision",
                            json_pack("{s:b,s:b,s:f,s:f,s:f,s:f,s:I}", "feasible",
                                      fl->last.feasible, "exact", fl->last.exact, "power_w",
                                      fl->last.power_w, "lower_bound", fl->last.lower_bound, "gap",
                                      fl->last.gap, "solve_s", fl->last_solve_s, "nodes",
                                      (json_int_t)fl->last.nodes));
    return o;
}

static void set_cap(erg_server *srv, const srv_req *rq, srv_resp *rs)
{
    struct srv_fleet *fl = srv->fleet;
    const json_t *in = rq->body->v, *cap = json_object_get(in, "cap_w");
    erg_error e;
    if (!json_is_object(in) || !cap || (!json_is_null(cap) && !json_is_number(cap)) ||
        (json_is_number(cap) && !(json_number_value(cap) > 0 && json_number_value(cap) <= 1e12))) {
        erg__srv_respond_error(rs, "error", 400,
                               "the body must be {\"cap_w\": W} with 0 < W <= 1e12, or {\"cap_w\": "
                               "null} to lift the cap%s%s",
                               rq->body->v ? "" : ": ", rq->body->v ? "" : rq->body->err);
        return;
    }
    erg_status st =
        json_is_null(cap)
            ? erg__srv_store_exec(srv, &e, "DELETE FROM fleet_config WHERE key='cap_w'", "")
            : erg__srv_store_exec(srv, &e,
                                  "INSERT INTO fleet_config(key, value) VALUES('cap_w', ?) "
                                  "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                                  "d", json_number_value(cap));
    if (st) {
        erg__srv_respond_error(rs, "error", 503, "%s", e.msg);
        return;
    }
    fl->have_cap = !json_is_null(cap);
    fl->cap_w = fl->have_cap ? json_number_value(cap) : 0;
    erg__srv_store_event(srv, NULL, "fleet_cap", fl->have_cap ? "set" : "lifted");
    solve(srv, "cap");
    erg__srv_respond(rs, 200, fleet_json(srv));
}

static void set_weight(erg_server *srv, const char *id, const srv_req *rq, srv_resp *rs)
{
    struct srv_fleet *fl = srv->fleet;
    const json_t *in = rq->body->v, *w = json_object_get(in, "weight");
    srv_job *j = erg__srv_job_find(srv, id);
    if (!j) {
        erg__srv_respond_error(rs, "error", 404, "unknown job '%.300s'", id);
        return;
    }
    if (!json_is_object(in) || !json_is_number(w) ||
        !(json_number_value(w) >= 0 && json_number_value(w) <= 1e6)) {
        erg__srv_respond_error(rs, "error", 400,
                               "the body must be {\"weight\": W} with 0 <= W <= 1e6");
        return;
    }
    if (cfg_set(srv, j->id, json_number_value(w), (int)cfg_num(fl, j->id, "tkind", 0),
                cfg_num(fl, j->id, "tval", 0))) {
        erg__srv_respond_error(rs, "error", 503, "the weight could not be stored");
        return;
    }
    if (member_of(srv, j))
        solve(srv, "weight");
    erg__srv_respond(rs, 200, fleet_json(srv));
}

bool erg__srv_fleet_route(erg_server *srv, const srv_req *rq, srv_resp *rs)
{
    const char *p = rq->path;
    if (strcmp(p, "/v1/fleet") && strncmp(p, "/v1/fleet/jobs/", 15))
        return false;
    struct srv_fleet *fl = srv->fleet;
    if (!fl) { /* a server object made without srv_fleet_open (tests, fuzz targets) */
        erg__srv_respond_error(rs, "error", 503, "this server keeps no fleet");
        return true;
    }
    if (fl->dirty)
        solve(srv, "restart");
    if (!strcmp(p, "/v1/fleet")) {
        if (rq->get)
            erg__srv_respond(rs, 200, fleet_json(srv));
        else if (rq->post)
            set_cap(srv, rq, rs);
        else
            erg__srv_respond_error(rs, "error", 405, "use GET or POST on /v1/fleet");
        return true;
    }
    if (!rq->post)
        erg__srv_respond_error(rs, "error", 405, "use POST on /v1/fleet/jobs/{id}");
    else
        set_weight(srv, p + 15, rq, rs);
    return true;
}

/* ---- /metrics ---- */

static void label(erg__buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            erg__buf_printf(b, "\\%c", *s);
        else if (*s == '\n')
            erg__buf_printf(b, "\\n");
        else
            erg__buf_append(b, s, 1);
    }
}

static void gauge(erg__buf *b, const char *name, const char *help)
{
    erg__buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

void erg__srv_fleet_metrics(erg_server *srv, erg__buf *b)
{
    struct srv_fleet *fl = srv->fleet;
    if (!fl)
        return;
    if (fl->dirty)
        solve(srv, "restart");
    static const struct {
        const char *name, *help;
    } per_job[] = {
        {"ergon_fleet_job_power_watts", "Average power of the plan a fleet job runs (all GPUs)."},
        {"ergon_fleet_job_energy_per_iteration_joules", "Energy per iteration of that plan."},
        {"ergon_fleet_job_slowdown", "Its iteration time over the job's fastest."},
        {"ergon_fleet_job_weight", "The job's weight in the fleet's weighted slowdown."},
    };
    double power = 0, cost = 0;
    for (size_t g = 0; g < ERG__ARRAY_LEN(per_job); g++) {
        gauge(b, per_job[g].name, per_job[g].help);
        for (fl_member *m = fl->members; m; m = m->next) {
            size_t k = counted_point(m);
            double w = cfg_num(fl, m->job->id, "weight", 1), sd = m->t_eff[k] / m->fastest_s;
            double v[4] = {m->p[k], m->p[k] * m->t_eff[k], sd, w};
            char num[40];
            erg__buf_printf(b, "%s{job=\"", per_job[g].name);
            label(b, m->job->id);
            erg__buf_printf(b, "\"} %s\n", erg__fmt_double_py(v[g], num, sizeof num));
            if (g == 0) {
                power += m->p[k];
                cost += w * sd;
            }
        }
    }
    char n1[40], n2[40];
    gauge(b, "ergon_fleet_jobs", "Jobs in the fleet (running, Frontier scheduler).");
    erg__buf_printf(b, "ergon_fleet_jobs %zu\n", fl->n_members);
    gauge(b, "ergon_fleet_power_watts", "Sum of the fleet jobs' average powers.");
    erg__buf_printf(b, "ergon_fleet_power_watts %s\n", erg__fmt_double_py(power, n1, sizeof n1));
    gauge(b, "ergon_fleet_weighted_slowdown", "Sum over fleet jobs of weight x slowdown.");
    erg__buf_printf(b, "ergon_fleet_weighted_slowdown %s\n",
                    erg__fmt_double_py(cost, n1, sizeof n1));
    if (fl->have_cap) {
        gauge(b, "ergon_fleet_cap_watts", "The fleet's power cap.");
        erg__buf_printf(b, "ergon_fleet_cap_watts %s\n",
                        erg__fmt_double_py(fl->cap_w, n1, sizeof n1));
        gauge(b, "ergon_fleet_headroom_watts", "The cap minus the fleet's power.");
        erg__buf_printf(b, "ergon_fleet_headroom_watts %s\n",
                        erg__fmt_double_py(fl->cap_w - power, n2, sizeof n2));
    }
    erg__buf_printf(b,
                    "# HELP ergon_fleet_decisions_total Fleet assignments solved (this "
                    "process).\n# TYPE ergon_fleet_decisions_total counter\n"
                    "ergon_fleet_decisions_total %ld\n",
                    fl->decisions);
    if (fl->have_result) {
        gauge(b, "ergon_fleet_solve_seconds", "Time the last fleet assignment took.");
        erg__buf_printf(b, "ergon_fleet_solve_seconds %s\n",
                        erg__fmt_double_py(fl->last_solve_s, n1, sizeof n1));
        gauge(b, "ergon_fleet_optimality_gap",
              "Weighted slowdown the last assignment did not "
              "prove optimal (0: exact).");
        erg__buf_printf(b, "ergon_fleet_optimality_gap %s\n",
                        erg__fmt_double_py(fl->last.exact ? 0 : fl->last.gap, n1, sizeof n1));
    }
}
