/* cmd_fleet_sim.c: `ergon fleet simulate`: a day of a fleet through the real server (docs/fleet.md,
 * "A simulated day").
 *
 * Jobs of 8-64 GPUs (pipelines of the given frontiers' stages, 1-8 data-parallel copies) arrive,
 * straggle and leave over H hours, and the operator changes the cap twice; every event goes
 * through an in-process `ergon serve` (erg_server_handle: its router, the /v1 wire, the job state
 * machine with every rank registered, the Frontier scheduler, the fleet and its database) and the
 * fleet is read back after it (GET /v1/fleet). Between events the fleet's power, energy and
 * slowdown are integrated, and so are two baselines at the same moments for the same jobs:
 *   no cap     every job runs its own target (the Frontier plan for a slowdown of 1.0, or its
 *              straggler's pace), as without a fleet;
 *   power limit one per-GPU limit for every GPU (erg_plan_power_limit, emulated), the highest of a
 *              2 W grid whose fleet power fits the cap.
 * A job's slowdown is its iteration time over the fastest of its frontier (with a straggler, over
 * the straggler's pace when that is slower), for all three. */
#include "cli.h"

#include "ergon/emulate.h"
#include "ergon/baselines.h"
#include "ergon/envpipe.h"
#include "ergon/fleet.h"
#include "ergon/planner.h"
#include "ergon/server.h"

#include <errno.h>
#include <unistd.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PL_MIN_W 40
#define PL_STEP_W 2
#define PL_N 300 /* limits 40 .. 638 W */
static const double straggle_levels[] = {1.0, 1.05, 1.1, 1.2};
#define N_LEVELS 4

typedef struct sim_front {
    const char *dir;
    int S, M;
    double fastest_s, all_max_s, least_w;        /* least_w: the least power of a plan */
    double nocap_t[N_LEVELS], nocap_p[N_LEVELS]; /* the job's own target at each straggler level */
    double pl_t[PL_N], pl_p[PL_N];               /* under each per-GPU limit */
    char *ranks_json;                            /* per stage: pipe_schedule and clocks */
    size_t *rank_off;
} sim_front;

typedef struct sim_job {
    int front, dp, level;
    double arrive_h, leave_h, straggle_h;
    char id[256];
    bool live;
    double srv_t, srv_p, srv_sd; /* from the server's fleet */
} sim_job;

typedef struct sim_event {
    double h;
    int kind; /* 0 cap, 1 arrive, 2 straggle, 3 leave */
    int job;
    double cap_factor; /* cap events: the factor, then (set_caps) the cap in watts */
} sim_event;

static uint64_t rng_state;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static int cmp_event(const void *a, const void *b)
{
    const sim_event *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind - y->kind;
    return x->job - y->job;
}

/* The rank records of one stage: its 1F1B pipe_schedule and the profile's clocks. */
static char *stage_ranks_json(const erg_profile *prof, int S, int M, int s)
{
    size_t cap = 64 + (size_t)M * 24 + 4096, len = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    int w = S - s - 1 < M ? S - s - 1 : M;
    len += (size_t)snprintf(out + len, cap - len, "\"pipe_schedule\": [");
    for (int i = 0; i < w; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s\"forward\"", len > 19 ? ", " : "");
    for (int i = 0; i < M - w; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s\"forward\", \"backward\"",
                                len > 19 ? ", " : "");
    for (int i = 0; i < w; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s\"backward\"", len > 19 ? ", " : "");
    len += (size_t)snprintf(out + len, cap - len, "], \"power_state_range\": [");
    size_t n = erg_profile_num_points(prof, s, ERG_FORWARD);
    const erg_profile_point *pt = erg_profile_points(prof, s, ERG_FORWARD);
    for (size_t i = 0; i < n && len + 16 < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%d", i ? ", " : "", pt[i].freq_mhz);
    snprintf(out + len, cap - len, "]");
    return out;
}

static int load_front(const char *cmd, const char *dir, sim_front *x)
{
    erg_error err = {0};
    erg_frontier *f = NULL;
    erg_frontier_baseline b;
    erg_frontier_baseline_init(&b);
    memset(x, 0, sizeof *x);
    x->dir = dir;
    if (erg_frontier_read_dir(dir, NULL, &f, &err) ||
        erg_frontier_baseline_open(dir, f, &b, &err)) {
        erg_frontier_free(f);
        return cli_report(cmd, &err);
    }
    int rc = CLI_OK;
    if (!b.have) {
        fprintf(stderr,
                "ergon %s: %s has no profile.csv and frontier-info.csv (plan it with "
                "'ergon plan perseus')\n",
                cmd, dir);
        rc = CLI_USER_ERROR;
        goto out;
    }
    x->S = erg_frontier_num_stages(f);
    x->M = erg_frontier_num_microbatches(f);
    x->all_max_s = b.all_max.time_s;
    x->fastest_s = INFINITY;
    x->least_w = INFINITY;
    for (size_t k = 0; k < erg_frontier_size(f) && !rc; k++) {
        erg_plan *p = NULL;
        erg_emulation em;
        if (erg_frontier_plan(f, k, &p, &err) ||
            erg_emulate(b.prof, b.dag, p, b.power_w, &em, NULL, NULL, &err))
            rc = cli_report(cmd, &err);
        else {
            x->fastest_s = fmin(x->fastest_s, em.time_s);
            x->least_w = fmin(x->least_w, em.energy_j / em.time_s);
        }
        erg_plan_free(p);
    }
    for (int l = 0; l < N_LEVELS && !rc; l++) {
        size_t k;
        erg_emulation em;
        if (erg_frontier_baseline_pick(&b, f, b.all_max.time_s * straggle_levels[l], &k, &em, &err))
            rc = cli_report(cmd, &err);
        x->nocap_t[l] = em.time_s;
        x->nocap_p[l] = em.energy_j / em.time_s;
    }
    erg_baseline_opts bo;
    erg_baseline_opts_init(&bo);
    bo.blocking_power_w = b.power_w;
    for (int i = 0; i < PL_N && !rc; i++) {
        erg_plan *p = NULL;
        erg_emulation em;
        bo.power_limit_w = PL_MIN_W + PL_STEP_W * i;
        if (erg_plan_power_limit(b.prof, x->S, x->M, &bo, &p, &err) ||
            erg_emulate(b.prof, b.dag, p, b.power_w, &em, NULL, NULL, &err))
            rc = cli_report(cmd, &err);
        else {
            x->pl_t[i] = em.time_s;
            x->pl_p[i] = em.energy_j / em.time_s;
        }
        erg_plan_free(p);
    }
    x->rank_off = calloc((size_t)x->S + 1, sizeof *x->rank_off);
    char **parts = calloc((size_t)x->S, sizeof *parts);
    size_t total = 0;
    for (int s = 0; s < x->S && !rc && parts; s++) {
        parts[s] = stage_ranks_json(b.prof, x->S, x->M, s);
        total += parts[s] ? strlen(parts[s]) + 1 : 0;
    }
    x->ranks_json = rc || !parts ? NULL : malloc(total + 1);
    if (x->ranks_json && x->rank_off) {
        size_t o = 0;
        for (int s = 0; s < x->S; s++) {
            x->rank_off[s] = o;
            strcpy(x->ranks_json + o, parts[s] ? parts[s] : "");
            o += strlen(x->ranks_json + o) + 1;
        }
    } else if (!rc) {
        fprintf(stderr, "ergon %s: out of memory\n", cmd);
        rc = CLI_USER_ERROR;
    }
    for (int s = 0; parts && s < x->S; s++)
        free(parts[s]);
    free(parts);
out:
    erg_frontier_baseline_free(&b);
    erg_frontier_free(f);
    return rc;
}

/* One request to the in-process server; the parsed JSON answer (NULL on a non-2xx answer, with
 * the body printed). */
static json_t *call(erg_server *srv, const char *method, const char *path, const char *body,
                    int *status)
{
    char *resp = NULL;
    const char *ct;
    int st = 0;
    erg_server_handle(srv, method, path, NULL, body, body ? strlen(body) : 0, 0, &st, &resp, &ct);
    if (status)
        *status = st;
    json_t *v = st >= 200 && st < 300 && resp ? json_loads(resp, 0, NULL) : NULL;
    if (!v)
        fprintf(stderr, "ergon fleet simulate: %s %s: %d %s\n", method, path, st, resp ? resp : "");
    erg_free(resp);
    return v;
}

static bool arrive(erg_server *srv, const sim_front *x, const char *name, sim_job *j)
{
    char body[2048];
    snprintf(body, sizeof body,
             "{\"pp_degree\": %d, \"dp_degree\": %d, \"tp_degree\": 1, \"world_size\": %d, "
             "\"framework\": \"sim\", \"model_name\": \"%s\", \"partition_method\": \"p\", "
             "\"microbatch_size\": 1, \"num_microbatches\": %d, \"scheduler\": \"Frontier\", "
             "\"scheduler_args\": {\"frontier_dir\": \"%s\"}}",
             x->S, j->dp, x->S * j->dp, name, x->M, x->dir);
    json_t *r = call(srv, "POST", "/v1/jobs", body, NULL);
    const char *id = json_string_value(json_object_get(r, "job_id"));
    if (!id || strlen(id) >= sizeof j->id) {
        json_decref(r);
        return false;
    }
    snprintf(j->id, sizeof j->id, "%s", id);
    json_decref(r);
    char path[400], *rb = malloc(strlen(x->ranks_json + 0) + 65536);
    bool ok = rb != NULL;
    snprintf(path, sizeof path, "/v1/jobs/%s/ranks", j->id);
    for (int d = 0; ok && d < j->dp; d++)
        for (int s = 0; ok && s < x->S; s++) {
            sprintf(rb, "{\"rank\": %d, \"dp_rank\": %d, \"pp_rank\": %d, \"tp_rank\": 0, %s}",
                    d * x->S + s, d, s, x->ranks_json + x->rank_off[s]);
            json_t *a = call(srv, "POST", path, rb, NULL);
            ok = a != NULL;
            json_decref(a);
        }
    free(rb);
    j->live = ok;
    return ok;
}

typedef struct sim_acc {
    double energy_j, slow_h, max_over; /* integrals over job-hours; max power / cap */
    double over_h;                     /* hours above the cap */
} sim_acc;

typedef struct sim_state { /* what holds between two events */
    double fleet_p, fleet_slow, nocap_p, nocap_slow, pl_p, pl_slow, cap_w, limit_w;
    long live, gpus;
} sim_state;

static void integrate(sim_acc a[3], const sim_state *st, double dt_h, double *job_h)
{
    double p[3] = {st->fleet_p, st->pl_p, st->nocap_p};
    double sl[3] = {st->fleet_slow, st->pl_slow, st->nocap_slow};
    for (int i = 0; i < 3; i++) {
        a[i].energy_j += p[i] * dt_h * 3600;
        a[i].slow_h += sl[i] * dt_h;
        if (st->cap_w > 0 && p[i] > st->cap_w * (1 + 1e-9))
            a[i].over_h += dt_h;
        if (st->cap_w > 0 && st->live)
            a[i].max_over = fmax(a[i].max_over, p[i] / st->cap_w);
    }
    *job_h += (double)st->live * dt_h;
}

/* The baselines for the live jobs now. */
static void baselines(const sim_front *fr, const sim_job *jobs, long n, sim_state *st)
{
    st->nocap_p = st->nocap_slow = st->pl_p = st->pl_slow = 0;
    st->live = st->gpus = 0;
    double sum[PL_N] = {0};
    for (long i = 0; i < n; i++) {
        const sim_job *j = &jobs[i];
        if (!j->live)
            continue;
        const sim_front *x = &fr[j->front];
        double floor_s = straggle_levels[j->level] * x->all_max_s * (j->level > 0);
        double fast = fmax(x->fastest_s, floor_s);
        st->live++;
        st->gpus += (long)x->S * j->dp;
        st->nocap_p += x->nocap_p[j->level] * j->dp;
        st->nocap_slow += fmax(x->nocap_t[j->level], floor_s) / fast;
        for (int k = 0; k < PL_N; k++)
            sum[k] += x->pl_p[k] * j->dp;
    }
    int best = 0;
    for (int k = 0; k < PL_N; k++)
        if (sum[k] <= st->cap_w * (1 + 1e-12))
            best = k;
    st->limit_w = PL_MIN_W + PL_STEP_W * best;
    st->pl_p = sum[best];
    for (long i = 0; i < n; i++) {
        const sim_job *j = &jobs[i];
        if (!j->live)
            continue;
        const sim_front *x = &fr[j->front];
        double floor_s = straggle_levels[j->level] * x->all_max_s * (j->level > 0);
        st->pl_slow += fmax(x->pl_t[best], floor_s) / fmax(x->fastest_s, floor_s);
    }
}

/* The fleet as the server has it now: each job's plan, and the check against the cap. */
static bool read_fleet(erg_server *srv, json_t *index, sim_job *jobs, sim_state *st,
                       long *violations)
{
    json_t *fl = call(srv, "GET", "/v1/fleet", NULL, NULL);
    if (!fl)
        return false;
    st->fleet_p = json_number_value(json_object_get(fl, "power_w"));
    st->fleet_slow = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(fl, "jobs"), i, e)
    {
        json_t *k = json_object_get(index, json_string_value(json_object_get(e, "job_id")));
        if (!k)
            continue;
        sim_job *j = &jobs[json_integer_value(k)];
        j->srv_t = json_number_value(json_object_get(e, "time_s"));
        j->srv_p = json_number_value(json_object_get(e, "power_w"));
        j->srv_sd = json_number_value(json_object_get(e, "slowdown"));
        st->fleet_slow += j->srv_sd;
    }
    if (st->cap_w > 0 && st->fleet_p > st->cap_w * (1 + 1e-9))
        (*violations)++;
    json_decref(fl);
    return true;
}

static void make_jobs(sim_job *jobs, long n, long initial, int nf, double hours)
{
    for (long i = 0; i < n; i++) {
        sim_job *j = &jobs[i];
        j->front = (int)(urand() * nf);
        j->dp = 1 + (int)(urand() * 8);
        /* the jobs running at the start have 1-30 h left, the others run 2-24 h */
        j->arrive_h = i < initial ? 0 : urand() * hours;
        j->leave_h = j->arrive_h + (i < initial ? 1 + 29 * urand() : 2 + 22 * urand());
        j->straggle_h = -1;
        if (urand() < 0.2) {
            j->straggle_h = j->arrive_h + urand() * (j->leave_h - j->arrive_h);
            j->level = 1 + (int)(urand() * (N_LEVELS - 1));
        }
    }
}

#define SIM_CAPS 12
static sim_event *make_events(sim_job *jobs, long n, double hours, size_t *ne)
{
    sim_event *ev = calloc((size_t)n * 3 + SIM_CAPS, sizeof *ev);
    size_t k = 0;
    if (!ev)
        return NULL;
    for (int c = 0; c < SIM_CAPS; c++) /* the operator's cap, every H/12; tighter mid-day */
        ev[k++] = (sim_event){hours * c / SIM_CAPS, 0, -1, c >= 4 && c < 8 ? 0.9 : 1.0};
    for (long i = 0; i < n; i++) {
        ev[k++] = (sim_event){jobs[i].arrive_h, 1, (int)i, 0};
        if (jobs[i].straggle_h >= 0 && jobs[i].straggle_h < hours)
            ev[k++] = (sim_event){jobs[i].straggle_h, 2, (int)i, 0};
        if (jobs[i].leave_h < hours)
            ev[k++] = (sim_event){jobs[i].leave_h, 3, (int)i, 0};
    }
    qsort(ev, k, sizeof *ev, cmp_event);
    *ne = k;
    return ev;
}

static bool apply(erg_server *srv, const sim_front *fr, sim_job *jobs, const sim_event *e,
                  int *cur_level, sim_state *st, json_t *index)
{
    char path[400], body[128];
    sim_job *j = e->job >= 0 ? &jobs[e->job] : NULL;
    json_t *r = NULL;
    if (e->kind == 0) {
        st->cap_w = e->cap_factor; /* set_caps made it watts */
        snprintf(body, sizeof body, "{\"cap_w\": %.17g}", st->cap_w);
        r = call(srv, "POST", "/v1/fleet", body, NULL);
    } else if (e->kind == 1) {
        char name[64];
        snprintf(name, sizeof name, "job%d", e->job);
        if (!arrive(srv, &fr[j->front], name, j))
            return false;
        json_object_set_new(index, j->id, json_integer(e->job));
        cur_level[e->job] = 0;
        return true;
    } else if (e->kind == 2 && j->live) {
        snprintf(path, sizeof path, "/v1/jobs/%s/straggler", j->id);
        snprintf(body, sizeof body, "{\"slowdown\": %.17g}", straggle_levels[j->level]);
        cur_level[e->job] = j->level;
        r = call(srv, "POST", path, body, NULL);
    } else if (e->kind == 3 && j->live) {
        snprintf(path, sizeof path, "/v1/jobs/%s/end", j->id);
        j->live = false;
        r = call(srv, "POST", path, "{}", NULL);
    } else {
        return true;
    }
    bool ok = r != NULL;
    json_decref(r);
    return ok;
}

/* The operator's caps: at each cap event, capf (0.9 capf mid-day) x the power the running jobs
 * draw without a cap once that moment's events are in, raised where needed so that every job
 * running before the next cap event still fits at its least power (2 % over): ev[k].cap_factor
 * becomes watts. *lo and *hi: the least and greatest cap. */
static void set_caps(const sim_front *fr, const sim_job *jobs, sim_event *ev, size_t ne,
                     double capf, double *lo, double *hi, double *peak_nocap, double *peak_least)
{
    double *nocap = calloc(ne + 1, sizeof(double)), *least = calloc(ne + 1, sizeof(double));
    if (!nocap || !least) {
        free(nocap);
        free(least);
        return;
    }
    double a = 0, b = 0;
    for (size_t k = 0; k < ne; k++) {
        const sim_job *j = ev[k].job >= 0 ? &jobs[ev[k].job] : NULL;
        double sign = ev[k].kind == 1 ? 1 : ev[k].kind == 3 ? -1 : 0;
        if (j && sign != 0) {
            a += sign * fr[j->front].nocap_p[0] * j->dp;
            b += sign * fr[j->front].least_w * j->dp;
        }
        nocap[k] = a;
        least[k] = b;
        *peak_nocap = fmax(*peak_nocap, a);
        *peak_least = fmax(*peak_least, b);
    }
    *lo = INFINITY;
    *hi = 0;
    for (size_t k = 0; k < ne; k++) {
        if (ev[k].kind != 0)
            continue;
        size_t m = k;
        while (m + 1 < ne && ev[m + 1].h == ev[k].h)
            m++;
        double need = 0;
        for (size_t n = k; n < ne && (n == k || ev[n].kind != 0); n++)
            need = fmax(need, least[n]);
        double cap = fmax(ev[k].cap_factor * capf * nocap[m], 1.02 * need);
        ev[k].cap_factor = cap;
        *lo = fmin(*lo, cap);
        *hi = fmax(*hi, cap);
    }
    free(nocap);
    free(least);
}

/* The day's report: the markdown table on stdout, DIR/summary.json through the library. */
static int report_day(const char *cmd, const char *out, erg_fleet_sim_summary *sm,
                      const sim_acc acc[3], const double peak_w[2], long initial, double hours,
                      double capf)
{
    const char *names[3] = {"ergon fleet (frontier points)", "per-GPU power limit",
                            "no cap (each job's own target)"};
    erg_fleet_sim_policy *pol[3] = {&sm->fleet, &sm->power_limit, &sm->no_cap};
    for (int i = 0; i < 3; i++)
        *pol[i] = (erg_fleet_sim_policy){acc[i].slow_h / sm->job_h, acc[i].energy_j, acc[i].over_h,
                                         acc[i].max_over};
    printf("A simulated day: %ld jobs (%ld at the start), at most %ld running on %ld GPUs, "
           "%.0f job-hours over %g h; %zu events through the server. The operator's cap, "
           "set every %g h to %g x the running jobs' power without a cap (0.9 x that from "
           "hour %g to %g; never below their least power): %.0f .. %.0f W (the day's peak "
           "without a cap %.0f W, at least power %.0f W).\n\n",
           sm->jobs, initial, sm->peak_jobs, sm->peak_gpus, sm->job_h, hours, sm->events,
           hours / SIM_CAPS, capf, hours / 3, 2 * hours / 3, sm->cap_min_w, sm->cap_max_w,
           peak_w[0], peak_w[1]);
    printf("| | mean slowdown | energy of the day | hours over the cap | highest power / cap "
           "|\n|---|---|---|---|---|\n");
    for (int i = 0; i < 3; i++)
        printf("| %s | %.4f | %.2f MWh | %.2f | %.4f |\n", names[i], pol[i]->mean_slowdown,
               pol[i]->energy_j / 3.6e9, pol[i]->over_h, pol[i]->max_power_over_cap);
    printf("\nfleet power over the cap at %ld of the server's answers\n", sm->violations);
    char sp[4200];
    snprintf(sp, sizeof sp, "%s/summary.json", out);
    erg_error err = {0};
    if (erg_fleet_sim_summary_write_json(sp, sm, &err))
        return cli_report(cmd, &err);
    return sm->violations ? CLI_USER_ERROR : CLI_OK;
}

/* The in-process server of the simulation, its database DIR/fleet.db made anew. */
static int sim_server(const char *cmd, const char *out, const sim_front *fr, const char **dirs,
                      int nf, long njobs, erg_server **srv)
{
    char db[4096], argsj[4200];
    snprintf(db, sizeof db, "%s/fleet.db", out);
    snprintf(argsj, sizeof argsj, "{\"frontier_dir\": \"%s\"}", fr[0].dir);
    erg_server_opts so;
    erg_server_opts_init(&so);
    so.port = 0;
    so.db_path = db;
    so.dump_data = false;
    so.scheduler = "Frontier";
    so.scheduler_args = argsj;
    so.plans_dirs = dirs;
    so.n_plans_dirs = (size_t)nf;
    so.max_jobs = (int)njobs + 16;
    so.job_idle_timeout_s = 1e9;
    erg_error err = {0};
    if (erg_server_db_remove(db, &err) || erg_server_new(&so, srv, &err))
        return cli_report(cmd, &err);
    return CLI_OK;
}

static int fleet_sim_run(const char *cmd, char *list, const char *out, long njobs, long initial,
                         double hours, double capf, uint64_t seed)
{
    sim_front fr[32];
    const char *dirs[32];
    int nf = 0, rc = CLI_OK;
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
        if (nf == 32)
            return cli_usage_error(cmd, "at most 32 frontiers");
        dirs[nf] = t;
        rc = load_front(cmd, t, &fr[nf]);
        nf += !rc;
    }
    if (rc || !nf)
        return rc ? rc : cli_usage_error(cmd, "--frontiers names no directory");
    rng_state = seed * 2654435761ull + 1;
    sim_job *jobs = calloc((size_t)njobs, sizeof *jobs);
    int *cur_level = calloc((size_t)njobs, sizeof *cur_level);
    size_t ne = 0;
    if (!jobs || !cur_level)
        return cli_usage_error(cmd, "out of memory");
    make_jobs(jobs, njobs, initial, nf, hours);
    sim_event *ev = make_events(jobs, njobs, hours, &ne);
    erg_fleet_sim_summary sm = {.jobs = njobs, .events = ne};
    sim_acc acc[3] = {{0}};
    double peak_w[2] = {0, 0}; /* the day's peak power without a cap, and at least power */
    if (ev)
        set_caps(fr, jobs, ev, ne, capf, &sm.cap_min_w, &sm.cap_max_w, &peak_w[0], &peak_w[1]);
    erg_server *srv = NULL;
    erg_error err = {0};
    erg_fleet_sim_sample *tl = ev ? calloc(ne, sizeof *tl) : NULL; /* at most a row per event */
    size_t ntl = 0;
    json_t *index = json_object();
    if (!tl || !index) {
        rc = cli_usage_error(cmd, "out of memory");
        goto done;
    }
    if ((rc = sim_server(cmd, out, fr, dirs, nf, njobs, &srv)))
        goto done;
    sim_state st = {0};
    double prev_h = 0;
    for (size_t k = 0; k < ne && !rc; k++) {
        if (ev[k].h > prev_h) {
            integrate(acc, &st, ev[k].h - prev_h, &sm.job_h);
            prev_h = ev[k].h;
        }
        if (!apply(srv, fr, jobs, &ev[k], cur_level, &st, index)) {
            rc = CLI_USER_ERROR;
            break;
        }
        if (k + 1 < ne && ev[k + 1].h == ev[k].h)
            continue; /* read the fleet once all of this moment's events are in */
        for (long i = 0; i < njobs; i++)
            jobs[i].level = jobs[i].live ? cur_level[i] : jobs[i].level;
        if (!read_fleet(srv, index, jobs, &st, &sm.violations)) {
            rc = CLI_USER_ERROR;
            break;
        }
        baselines(fr, jobs, njobs, &st);
        sm.peak_gpus = st.gpus > sm.peak_gpus ? st.gpus : sm.peak_gpus;
        sm.peak_jobs = st.live > sm.peak_jobs ? st.live : sm.peak_jobs;
        tl[ntl++] = (erg_fleet_sim_sample){
            .time_h = ev[k].h,
            .cap_w = st.cap_w,
            .jobs = st.live,
            .gpus = st.gpus,
            .fleet_w = st.fleet_p,
            .power_limit_w = st.pl_p,
            .per_gpu_limit_w = st.limit_w,
            .no_cap_w = st.nocap_p,
            .fleet_mean_slowdown = st.live ? st.fleet_slow / (double)st.live : 0,
            .power_limit_mean_slowdown = st.live ? st.pl_slow / (double)st.live : 0};
    }
    if (!rc && hours > prev_h)
        integrate(acc, &st, hours - prev_h, &sm.job_h);
    char tp[4200];
    snprintf(tp, sizeof tp, "%s/timeline.csv", out);
    if (erg_fleet_sim_timeline_write_csv(tp, tl, ntl, &err)) /* a failed day's too */
        rc = rc ? rc : cli_report(cmd, &err);
    if (!rc)
        rc = report_day(cmd, out, &sm, acc, peak_w, initial, hours, capf);
done:
    free(tl);
    json_decref(index);
    erg_server_free(srv);
    for (int i = 0; i < nf; i++) {
        free(fr[i].ranks_json);
        free(fr[i].rank_off);
    }
    free(ev);
    free(jobs);
    free(cur_level);
    return rc;
}

static const cli_help fleet_sim_help = {
    "usage: ergon fleet simulate --frontiers DIR[,DIR...] --out DIR [--jobs N]\n"
    "                            [--initial K] [--hours H] [--cap-fraction F] [--seed S]\n",
    "A day of a fleet through an in-process 'ergon serve' (docs/fleet.md): N jobs\n"
    "(default 1100; K = 600 of them running at the start with 1-30 hours left, the others\n"
    "arriving over H = 24 hours and running 2-24 hours) of the frontiers' pipelines with\n"
    "1-8 data-parallel copies (8-64 GPUs for 8-stage frontiers); a fifth of them straggle\n"
    "once (slowdown 1.05, 1.1 or 1.2). Every H/12 the operator sets the cap to F (default\n"
    "0.8; 0.9 F from H/3 to 2H/3) x the running jobs' power without a cap (never below\n"
    "what they need at their least power). Every event goes through the server\n"
    "(its router, jobs, Frontier scheduler, fleet and database DIR/fleet.db); the fleet\n"
    "is compared with no cap and with one per-GPU power limit at the same cap.\n"
    "Writes DIR/timeline.csv and DIR/summary.json, prints a markdown table. Exit\n"
    "status 1 when the fleet's power ever exceeded the cap.\n",
    NULL};

int cmd_fleet_simulate(int argc, char **argv)
{
    const char *cmd = "fleet simulate";
    const char *list = NULL, *out = NULL;
    long njobs = 1100, initial = 600, seed = 1;
    double hours = 24, capf = 0.8;
    const cli_opt opts[] = {
        CLI_OPT_S("frontiers", "DIR[,DIR...]", &list,
                  "frontier directories of 'ergon plan perseus' (required)"),
        CLI_OPT_S("out", "DIR", &out, "results directory, created (required)"),
        CLI_OPT_L("jobs", "N", &njobs, 1, 100000, "jobs in all (default 1100)"),
        CLI_OPT_L("initial", "K", &initial, 1, 100000,
                  "jobs running at the start (default 600; at most --jobs)"),
        CLI_OPT_D("hours", "H", &hours, 0.01, 1e4, "simulated hours (default 24)"),
        CLI_OPT_D("cap-fraction", "F", &capf, 0.01, 10,
                  "the cap as a fraction of the uncapped power (default 0.8)"),
        CLI_OPT_L("seed", "S", &seed, 0, 1L << 30, "random seed (default 1)"),
        CLI_OPTS_END,
    };
    int rc = cli_opts_parse_all(cmd, argc, argv, opts, &fleet_sim_help);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    if (!list || !out)
        return cli_usage_error(cmd, "--frontiers and --out are required");
    if (initial > njobs)
        return cli_usage_error(cmd, "--initial %ld is more than --jobs %ld", initial, njobs);
    if (mkdir(out, 0755) && errno != EEXIST) {
        fprintf(stderr, "ergon %s: cannot create %s\n", cmd, out);
        return CLI_USER_ERROR;
    }
    return fleet_sim_run(cmd, (char *)list, out, njobs, initial, hours, capf, (uint64_t)seed);
}
