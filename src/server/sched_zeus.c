/* sched_zeus.c: the Zeus baselines as Perseus's kronos runs them: ZeusGlobalPowerLimit (one
 * window per candidate state for every stage at once) and ZeusLocalPowerState (a per-stage
 * search around the heaviest stage), each picking the state of least Zeus cost, written to the
 * job's dump directory and, with deploy_optimum, served for the rest of the job. */
#include "server/sched_ops.h"

#include <math.h>
#include <string.h>

typedef struct zl_point {
    int state;
    int *balanced; /* per stage power state */
    double throughput, power, time, energy;
} zl_point;

typedef struct zeus {
    double ratio;
    double eta;
    /* ZeusGlobalPowerLimit */
    int n_cand;
    int *cand;
    double *z_time, *z_energy, *z_power, *z_tput;
    /* ZeusLocalPowerState */
    int phase; /* SRV_I_FORWARD / SRV_I_BACKWARD */
    int *idx;  /* Per stage index into states. */
    bool *found;
    double *prev_d, *prev_t;
    int zl_i;        /* Current outer index. */
    int zl_heaviest; /* -1 until known. */
    double zl_target;
    int zl_stage; /* 1 window A at i pending, 2 search windows, 3 confirming window */
    int n_points;
    zl_point *points;
    /* Keep running the optimum after the search (deploy_optimum). */
    bool deploy;
    bool deploying;
    int *opt_states; /* per stage */
} zeus;

static const srv_sched_arg global_args[] = {
    {"eta_knob", 'd', false},
    {"warmup_step_ratio", 'd', false},
    {"deploy_optimum", 'b', false},
};

static const srv_sched_arg local_args[] = {
    {"eta_knob", 'd', false},
    {"balanced_phase", 's', false},
    {"warmup_step_ratio", 'd', false},
    {"deploy_optimum", 'b', false},
};

static void zeus_free(void *state)
{
    zeus *z = state;
    erg__free(z->cand);
    erg__free(z->z_time);
    erg__free(z->z_energy);
    erg__free(z->z_power);
    erg__free(z->z_tput);
    erg__free(z->idx);
    erg__free(z->opt_states);
    erg__free(z->found);
    erg__free(z->prev_d);
    erg__free(z->prev_t);
    for (int i = 0; i < z->n_points; i++)
        erg__free(z->points[i].balanced);
    erg__free(z->points);
    erg__free(z);
}

/* What both classes share; NULL when out of memory. */
static zeus *zeus_new(srv_sched *s, const json_t *args)
{
    zeus *z = erg__calloc(1, sizeof *z);
    if (!z)
        return NULL;
    s->state = z;
    z->zl_heaviest = -1;
    z->ratio = srv_arg_d(args, "warmup_step_ratio", 0.1);
    z->eta = srv_arg_d(args, "eta_knob", 0.5);
    z->deploy = json_is_true(json_object_get(args, "deploy_optimum"));
    z->opt_states = erg__calloc((size_t)s->ctx->num_stages, sizeof(int));
    return z->opt_states ? z : NULL;
}

static erg_status global_init(srv_sched *s, const json_t *args, erg_error *err)
{
    const srv_sched_ctx *ctx = s->ctx;
    zeus *z = zeus_new(s, args);
    if (!z)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    z->n_cand = ctx->n_states > 1 ? ctx->n_states - 1 : 1;
    z->cand = erg__calloc((size_t)z->n_cand, sizeof(int));
    z->z_time = erg__calloc((size_t)z->n_cand, sizeof(double));
    z->z_energy = erg__calloc((size_t)z->n_cand, sizeof(double));
    z->z_power = erg__calloc((size_t)z->n_cand, sizeof(double));
    z->z_tput = erg__calloc((size_t)z->n_cand, sizeof(double));
    if (!z->cand || !z->z_time || !z->z_energy || !z->z_power || !z->z_tput)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (int i = 0; i < z->n_cand; i++)
        z->cand[i] = ctx->states[i];
    return ERG_OK;
}

static erg_status local_init(srv_sched *s, const json_t *args, erg_error *err)
{
    const srv_sched_ctx *ctx = s->ctx;
    zeus *z = zeus_new(s, args);
    if (!z)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    z->phase = strcmp(srv_arg_s(args, "balanced_phase", "forward"), "backward") ? SRV_I_FORWARD
                                                                                : SRV_I_BACKWARD;
    z->idx = erg__calloc((size_t)ctx->num_stages, sizeof(int));
    z->found = erg__calloc((size_t)ctx->num_stages, sizeof(bool));
    z->prev_d = erg__calloc((size_t)ctx->num_stages, sizeof(double));
    z->prev_t = erg__calloc((size_t)ctx->num_stages, sizeof(double));
    z->points = erg__calloc((size_t)ctx->n_states, sizeof(zl_point));
    if (!z->idx || !z->found || !z->prev_d || !z->prev_t || !z->points)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    return ERG_OK;
}

static int zl_state(const srv_sched *s, int stage)
{
    const zeus *z = s->state;
    return s->ctx->states[z->idx[stage]];
}

/* Deploying the optimum: every window at its states. */
static bool deploy_next(srv_sched *s)
{
    const zeus *z = s->state;
    if (!z->deploying)
        return false;
    const srv_sched_ctx *c = s->ctx;
    for (int stg = 0; stg < c->num_stages; stg++)
        for (int i = 0; i < c->n_instrs[stg]; i++)
            s->out[stg][i] = z->opt_states[stg];
    return true;
}

static erg_status global_next(srv_sched *s, bool *done, erg_error *err)
{
    (void)done, (void)err;
    const zeus *z = s->state;
    if (deploy_next(s))
        return ERG_OK;
    erg__srv_sched_uniform(s, s->step == 0 ? srv_sched_max_state(s) : z->cand[s->step - 1]);
    return ERG_OK;
}

static erg_status local_next(srv_sched *s, bool *done, erg_error *err)
{
    (void)done, (void)err;
    const srv_sched_ctx *c = s->ctx;
    if (deploy_next(s))
        return ERG_OK;
    if (s->step == 0) {
        erg__srv_sched_uniform(s, srv_sched_max_state(s));
    } else {
        for (int stg = 0; stg < c->num_stages; stg++)
            for (int i = 0; i < c->n_instrs[stg]; i++)
                s->out[stg][i] = zl_state(s, stg);
    }
    return ERG_OK;
}

/* Zeus metrics of one window over the stages: throughput = 1 / max mean
 * iteration time; power = sum of mean per-iteration power; energy = sum of
 * mean iteration energy (warm-up iterations dropped). */
static void zeus_metrics(const srv_sched *s, const srv_result *r, double *tput, double *power,
                         double *energy)
{
    const zeus *z = s->state;
    double tmax = 0, p = 0, e = 0;
    for (int stg = 0; stg < s->ctx->num_stages; stg++) {
        int n = r[stg].n_iters, d = erg__srv_drop_of(n, z->ratio);
        if (d >= n)
            d = n - 1; /* keep at least one iteration */
        double t = erg__srv_mean(r[stg].iter_time_s, d, n);
        tmax = ERG__MAX(tmax, t);
        double ps = 0;
        for (int i = d; i < n; i++)
            ps += r[stg].iter_time_s[i] > 0 ? r[stg].iter_energy_j[i] / r[stg].iter_time_s[i] : 0;
        p += ps / (n - d);
        e += erg__srv_mean(r[stg].iter_energy_j, d, n);
    }
    *tput = tmax > 0 ? 1.0 / tmax : 0;
    *power = p;
    *energy = e;
}

/* Zeus cost, including the reference's quirk: its MAXPOWER constant is
 * already max-state x world size and is multiplied by the world size again. */
static double zeus_cost(const srv_sched *s, double tput, double power)
{
    const zeus *z = s->state;
    double ws = s->ctx->num_stages;
    double maxpower = srv_sched_max_state(s) * ws;
    return tput > 0 ? (z->eta * power + (1 - z->eta) * maxpower * ws) / tput : INFINITY;
}

/* ZeusLocalPowerState's cost: its constant is max state x world size, scaled
 * once (kronos baselines.py; docs/zeus-protocol.md §9 step 5). */
static double zlocal_cost(const srv_sched *s, double tput, double power)
{
    const zeus *z = s->state;
    double ws = s->ctx->num_stages;
    return tput > 0 ? (z->eta * power + (1 - z->eta) * srv_sched_max_state(s) * ws) / tput
                    : INFINITY;
}

/* The Python-compatible JSON text of o (consumed) into the job's file name. */
static erg_status write_json(const srv_sched *s, const char *name, json_t *o, erg_error *err)
{
    erg__buf b = {0};
    erg_status st = o ? erg__srv_json_py(o, &b) : ERG_ENOMEM;
    json_decref(o);
    if (!st)
        st = erg__srv_sched_write_file(s->ctx, name, b.data, b.len, err);
    else
        erg_error_set(err, st, "out of memory");
    erg__buf_free(&b);
    return st;
}

/* The search is over: deploy the optimum or finish. */
static void settle(srv_sched *s)
{
    zeus *z = s->state;
    if (z->deploy)
        z->deploying = true;
    else
        s->done = true;
}

static erg_status global_observe(srv_sched *s, const srv_result *r, erg_error *err)
{
    zeus *z = s->state;
    if (z->deploying)
        return ERG_OK;
    long k = s->step - 1;
    if (k == 0)
        return ERG_OK;
    int i = (int)k - 1;
    zeus_metrics(s, r, &z->z_tput[i], &z->z_power[i], &z->z_energy[i]);
    z->z_time[i] = z->z_tput[i] > 0 ? 1 / z->z_tput[i] : INFINITY;
    if (i + 1 < z->n_cand)
        return ERG_OK;
    json_t *o = json_object();
    for (int j = 0; o && j < z->n_cand; j++) {
        char key[24];
        snprintf(key, sizeof key, "%d", z->cand[j]);
        json_object_set_new(o, key,
                            json_pack("{s:f,s:f}", "time", z->z_time[j], "energy", z->z_energy[j]));
    }
    erg_status st = write_json(s, "ZeusGlobalPowerLimit.json", o, err);
    int best = 0;
    for (int j = 1; j < z->n_cand; j++)
        if (zeus_cost(s, z->z_tput[j], z->z_power[j]) <
            zeus_cost(s, z->z_tput[best], z->z_power[best]))
            best = j;
    for (int stg = 0; stg < s->ctx->num_stages; stg++)
        z->opt_states[stg] = z->cand[best];
    settle(s);
    return st;
}

static erg_status zlocal_finish(srv_sched *s, erg_error *err)
{
    zeus *z = s->state;
    int best = 0;
    double best_cost = INFINITY;
    for (int i = 0; i < z->n_points; i++) {
        double c = zlocal_cost(s, z->points[i].throughput, z->points[i].power);
        if (c < best_cost) {
            best_cost = c;
            best = i;
        }
    }
    json_t *res = json_object();
    for (int i = 0; res && i < z->n_points; i++) {
        zl_point *p = &z->points[i];
        json_t *bal = json_array();
        for (int stg = 0; bal && stg < s->ctx->num_stages; stg++)
            json_array_append_new(bal, json_integer(p->balanced[stg]));
        char key[24];
        snprintf(key, sizeof key, "%d", p->state);
        json_object_set_new(res, key,
                            json_pack("{s:o,s:f,s:f,s:f,s:f}", "balanced_power_states", bal,
                                      "throughput", p->throughput, "power", p->power, "time",
                                      p->time, "energy", p->energy));
    }
    json_t *o = json_pack(
        "{s:i,s:i,s:o}", "heaviest_stage", z->zl_heaviest, "optimal_heaviest_stage_power_state",
        z->n_points ? z->points[best].state : srv_sched_max_state(s), "profiling_results", res);
    erg_status st = write_json(s, "ZeusLocalPowerState.json", o, err);
    if (z->n_points)
        for (int stg = 0; stg < s->ctx->num_stages; stg++)
            z->opt_states[stg] = z->points[best].balanced[stg];
    else
        for (int stg = 0; stg < s->ctx->num_stages; stg++)
            z->opt_states[stg] = srv_sched_max_state(s);
    settle(s);
    return st;
}

/*
 * ZeusLocalPowerState ("ZeusPerStage"): HOW IT WORKS, window for window as
 * Perseus's kronos baselines.py (docs/zeus-protocol.md §9). After one all-max
 * warm-up window, an outer loop walks the heaviest stage's state S[i] down
 * the supported list. At each i every stage's index is raised to at least i
 * and a window runs ("A"); the first such window fixes the heaviest stage
 * (argmax of the balanced-phase times), and each A fixes T* (its time at
 * S[i]). Then search passes: each lowers every unfound stage one state while
 * its distance to T* does not grow (or its time drops: noise), steps it back
 * up once it grows and marks it found; every pass is followed by a window
 * with the new states -- also the pass that finds the last stage, so the
 * recorded point (S[i], every stage's state, throughput, power, energy)
 * comes from a window run with exactly the recorded states. Without any
 * stage to search (one stage), window A is recorded. The sweep stops after
 * the lowest state or once a recorded state is the lowest; the point of
 * least Zeus cost (world size scaled once) wins.
 */
static erg_status zlocal_record(srv_sched *s, const srv_result *r, erg_error *err)
{
    zeus *z = s->state;
    const srv_sched_ctx *c = s->ctx;
    int S = c->num_stages, last = c->n_states - 1;
    zl_point *p = &z->points[z->n_points];
    p->state = c->states[z->zl_i];
    p->balanced = erg__calloc((size_t)S, sizeof(int));
    if (!p->balanced)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (int stg = 0; stg < S; stg++)
        p->balanced[stg] = zl_state(s, stg);
    zeus_metrics(s, r, &p->throughput, &p->power, &p->energy);
    p->time = p->throughput > 0 ? 1 / p->throughput : INFINITY;
    z->n_points++;
    bool any_lowest = false;
    for (int stg = 0; stg < S; stg++)
        any_lowest = any_lowest || z->idx[stg] >= last;
    if (any_lowest || z->zl_i >= last || z->n_points >= c->n_states)
        return zlocal_finish(s, err);
    z->zl_i++;
    for (int stg = 0; stg < S; stg++)
        if (z->idx[stg] < z->zl_i)
            z->idx[stg] = z->zl_i;
    z->zl_stage = 1;
    return ERG_OK;
}

static erg_status local_observe(srv_sched *s, const srv_result *r, erg_error *err)
{
    zeus *z = s->state;
    if (z->deploying)
        return ERG_OK;
    const srv_sched_ctx *c = s->ctx;
    int S = c->num_stages, last = c->n_states - 1;
    if (s->step == 1) { /* warm-up done */
        z->zl_i = 0;
        z->zl_stage = 1;
        return ERG_OK;
    }
    double t[512] = {0};
    if (S > 512)
        return erg_error_set(err, ERG_EINVAL, "ZeusLocalPowerState supports at most 512 stages");
    for (int stg = 0; stg < S; stg++)
        t[stg] = erg__srv_series_mean(&r[stg].time_bd[z->phase],
                                      erg__srv_drop_of(r[stg].n_iters, z->ratio));
    if (z->zl_stage == 3) /* the window after the last search pass */
        return zlocal_record(s, r, err);
    if (z->zl_stage == 1) { /* window A at S[zl_i] */
        if (z->zl_heaviest < 0) {
            z->zl_heaviest = 0;
            for (int stg = 1; stg < S; stg++)
                if (t[stg] > t[z->zl_heaviest])
                    z->zl_heaviest = stg;
        }
        z->zl_target = t[z->zl_heaviest];
        bool all = true;
        for (int stg = 0; stg < S; stg++) {
            z->found[stg] = stg == z->zl_heaviest;
            z->prev_d[stg] = INFINITY;
            z->prev_t[stg] = 0;
            all = all && z->found[stg];
        }
        if (all) /* nothing to search: the reference records window A */
            return zlocal_record(s, r, err);
    }
    /* One search pass over the times of the window just observed. */
    for (int stg = 0; stg < S; stg++) {
        if (z->found[stg])
            continue;
        double d = fabs(t[stg] - z->zl_target);
        if (d <= z->prev_d[stg] || t[stg] < z->prev_t[stg]) {
            if (z->idx[stg] >= last)
                z->found[stg] = true;
            else
                z->idx[stg]++;
        } else {
            z->idx[stg]--;
            z->found[stg] = true;
        }
    }
    for (int stg = 0; stg < S; stg++) {
        z->prev_d[stg] = fabs(t[stg] - z->zl_target);
        z->prev_t[stg] = t[stg];
    }
    bool all = true;
    for (int stg = 0; stg < S; stg++)
        all = all && z->found[stg];
    /* Every pass is followed by a window with the new states; after the pass
     * that found the last stage, that window's results are the point's. */
    z->zl_stage = all ? 3 : 2;
    return ERG_OK;
}

const srv_sched_ops erg__srv_sched_zeus_global = {
    .args = global_args,
    .n_args = ERG__ARRAY_LEN(global_args),
    .init = global_init,
    .next = global_next,
    .observe = global_observe,
    .free = zeus_free,
};

const srv_sched_ops erg__srv_sched_zeus_local = {
    .args = local_args,
    .n_args = ERG__ARRAY_LEN(local_args),
    .init = local_init,
    .next = local_next,
    .observe = local_observe,
    .free = zeus_free,
};
