/* baselines.c: the comparison baselines: all-max, Zeus global and per-stage clocks, uniform. */
#include "ergon/envpipe.h"
#include "ergon/baselines.h"
#include "planner/ctab.h"

#include <math.h>
#include <string.h>

void erg_baseline_opts_init(erg_baseline_opts *o)
{
    memset(o, 0, sizeof *o);
    o->eta = 0.5;
    o->schedule.kind = ERG_SCHED_1F1B;
}

typedef struct bctx {
    erg__ctab *c;
    erg_dag *dag;
    erg_plan *plan;
    double pmax_w; /* P_max of the whole pipeline: S x per-GPU max power */
} bctx;

static void bctx_free(bctx *b)
{
    erg_plan_free(b->plan);
    erg_dag_free(b->dag);
    erg__ctab_free(b->c);
}

static erg_status bctx_init(bctx *b, const erg_profile *p, int S, int M, const erg_schedule *sched,
                            double power_w, erg_error *err)
{
    memset(b, 0, sizeof *b);
    if (!p)
        return erg_error_set(err, ERG_EINVAL, "NULL profile");
    if (S < 1 || M < 1)
        return erg_error_set(err, ERG_EINVAL, "a pipeline needs S >= 1 and M >= 1 (got S=%d, M=%d)",
                             S, M);
    if (!(power_w >= 0) || !isfinite(power_w))
        return erg_error_set(err, ERG_EINVAL, "invalid blocking power %g W", power_w);
    erg_schedule def = {.kind = ERG_SCHED_1F1B};
    erg_status st = erg__ctab_new(p, S, &b->c, err);
    if (!st)
        st = erg_dag_new(sched ? sched : &def, S, M, &b->dag, err);
    if (!st)
        st = erg_plan_new(sched ? sched : &def, S, M, &b->plan, err);
    if (st)
        bctx_free(b);
    return st;
}

/* Zeus's P_max: the option, else the GPU's power limit, else the highest
 * average power of any profiled instruction; times S GPUs. */
static erg_status zeus_pmax(bctx *b, const erg_baseline_opts *o, erg_error *err)
{
    if (!(o->eta >= 0 && o->eta <= 1))
        return erg_error_set(err, ERG_EINVAL, "eta must be in [0, 1] (got %g)", o->eta);
    double p = o->max_power_w;
    if (!(p >= 0) || !isfinite(p))
        return erg_error_set(err, ERG_EINVAL, "invalid max power %g W", p);
    if (p == 0 && o->gpu)
        p = o->gpu->max_power_w;
    for (int s = 0; s < b->c->S && p == 0; s++)
        for (int k = 0; k < 2; k++) {
            const erg__ckind *ck = &b->c->k[s * 2 + k];
            for (int i = 0; i < ck->n; i++)
                if (ck->t[i] > 0 && ck->e[i] / ck->t[i] > p)
                    p = ck->e[i] / ck->t[i];
        }
    b->pmax_w = p * b->c->S;
    return ERG_OK;
}

static void fill_stage(erg_plan *plan, int s, int M, int f)
{
    int *pf = erg_plan_stage_freqs(plan, s);
    (void)M;
    for (int i = 0; i < erg_plan_stage_len(plan, s); i++)
        pf[i] = f;
}

/* The clock table a kind throttles by: I and W are parts of the backward,
 * OVERLAP_F_B starts with its forward. */
static erg_instr_kind table_kind(erg_instr_kind k)
{
    return k == ERG_BACKWARD_INPUT || k == ERG_BACKWARD_WEIGHT ? ERG_BACKWARD
           : k == ERG_OVERLAP_F_B                              ? ERG_FORWARD
                                                               : k;
}

static erg_status finish(bctx *b, const erg_baseline_opts *o, const char *method, erg_plan **out,
                         erg_error *err)
{
    erg__eval ev;
    erg_status st =
        erg__ctab_eval(b->c, b->dag, b->plan, o->blocking_power_w, NULL, NULL, NULL, &ev, err);
    if (!st) {
        erg_plan_set_estimate(b->plan, ev.time_s, ev.energy_j);
        st = erg_plan_set_method(b->plan, method, err);
    }
    if (!st) {
        *out = b->plan;
        b->plan = NULL;
    }
    bctx_free(b);
    return st;
}

erg_status erg_plan_all_max(const erg_profile *profile, int S, int M, const erg_schedule *sched,
                            double power_w, erg_plan **out, erg_error *err)
{
    if (!out)
        return erg_error_set(err, ERG_EINVAL, "NULL argument");
    *out = NULL;
    bctx b;
    erg_status st = bctx_init(&b, profile, S, M, sched, power_w, err);
    if (st)
        return st;
    for (int s = 0; s < S; s++)
        fill_stage(b.plan, s, M, b.c->both[s][0]);
    erg_baseline_opts o;
    erg_baseline_opts_init(&o);
    o.blocking_power_w = power_w;
    return finish(&b, &o, "all-max", out, err);
}

/* Under a power limit L an instruction runs at its highest clock whose
 * average power e/t is at most L (the lowest clock when none fits): how a
 * power cap throttles the SM clock, read off a clock profile. */
static int clock_under_limit(const erg__ctab *c, int s, erg_instr_kind kind, double limit_w)
{
    const erg__ckind *k = &c->k[s * 2 + (int)kind];
    int f = k->freq[0];
    for (int i = 0; i < k->n; i++)
        if (k->t[i] > 0 && k->e[i] / k->t[i] <= limit_w)
            f = k->freq[i];
    return f;
}

static erg_status zeus_power_limit(bctx *b, const erg_baseline_opts *o, erg_plan **out,
                                   erg_error *err)
{
    double step = o->power_limit_step_w, pmax = b->pmax_w / b->c->S;
    if (!(step > 0) || !isfinite(step) || pmax / step > 100000) {
        bctx_free(b);
        return erg_error_set(err, ERG_EINVAL,
                             "the power-limit step must be positive and at most 1e5 steps below "
                             "P_max %g W (got %g W)",
                             pmax, step);
    }
    int S = b->c->S;
    double best = INFINITY, bestL = pmax;
    int nsteps = (int)floor(pmax / step + 1e-9);
    for (int i = nsteps; i >= 1; i--) { /* from the highest limit down: ties keep it */
        double L = step * i;
        for (int s = 0; s < S; s++) {
            int *pf = erg_plan_stage_freqs(b->plan, s);
            for (int k = 0; k < erg_dag_rank_len(b->dag, s); k++) {
                erg_instr in = erg_dag_instr(b->dag, erg_dag_rank_offset(b->dag, s) + k, NULL);
                pf[k] = clock_under_limit(b->c, s, table_kind(in.kind), L);
            }
        }
        erg__eval ev;
        erg_status st =
            erg__ctab_eval(b->c, b->dag, b->plan, o->blocking_power_w, NULL, NULL, NULL, &ev, err);
        if (st) {
            bctx_free(b);
            return st;
        }
        double cost = o->eta * ev.energy_j + (1 - o->eta) * b->pmax_w * ev.time_s;
        if (cost < best) {
            best = cost;
            bestL = L;
        }
    }
    for (int s = 0; s < S; s++) {
        int *pf = erg_plan_stage_freqs(b->plan, s);
        for (int k = 0; k < erg_dag_rank_len(b->dag, s); k++) {
            erg_instr in = erg_dag_instr(b->dag, erg_dag_rank_offset(b->dag, s) + k, NULL);
            pf[k] = clock_under_limit(b->c, s, table_kind(in.kind), bestL);
        }
    }
    char method[64];
    snprintf(method, sizeof method, "zeus-global-power-limit-%gW", bestL);
    return finish(b, o, method, out, err);
}

/* Every instruction at its highest clock under limit L; *over: one draws more than L at its
 * lowest clock. */
static void fill_under_limit(bctx *b, double L, bool *over)
{
    *over = false;
    for (int s = 0; s < b->c->S; s++) {
        int *pf = erg_plan_stage_freqs(b->plan, s);
        for (int k = 0; k < erg_dag_rank_len(b->dag, s); k++) {
            erg_instr in = erg_dag_instr(b->dag, erg_dag_rank_offset(b->dag, s) + k, NULL);
            erg_instr_kind tk = table_kind(in.kind);
            pf[k] = clock_under_limit(b->c, s, tk, L);
            const erg__ckind *ck = &b->c->k[s * 2 + (int)tk];
            for (int i = 0; i < ck->n; i++)
                if (ck->freq[i] == pf[k] && ck->t[i] > 0 && ck->e[i] / ck->t[i] > L)
                    *over = true;
        }
    }
}

erg_status erg_plan_power_limit(const erg_profile *profile, int S, int M,
                                const erg_baseline_opts *o, erg_plan **out, erg_error *err)
{
    if (!out || !o)
        return erg_error_set(err, ERG_EINVAL, "NULL argument");
    *out = NULL;
    if (!(o->power_limit_w > 0) || !isfinite(o->power_limit_w))
        return erg_error_set(err, ERG_EINVAL,
                             "power-limit: the per-GPU limit must be a positive number of watts, "
                             "not %g",
                             o->power_limit_w);
    bctx b;
    erg_status st = bctx_init(&b, profile, S, M, &o->schedule, o->blocking_power_w, err);
    if (st)
        return st;
    bool over;
    fill_under_limit(&b, o->power_limit_w, &over);
    char method[96];
    snprintf(method, sizeof method, "power-limit-%gW%s", o->power_limit_w,
             over ? " (over at the lowest clock)" : "");
    return finish(&b, o, method, out, err);
}

/* zeus-global: Zeus picks one power limit for all GPUs by minimising
 * eta*E + (1-eta)*P_max*T over the limits it can set; with a clock profile
 * the knob is one SM clock for every GPU, tried exhaustively over the clocks
 * every stage was profiled at. Ties go to the higher clock. */
erg_status erg_plan_zeus_global(const erg_profile *profile, int S, int M,
                                const erg_baseline_opts *o, erg_plan **out, erg_error *err)
{
    if (!out || !o)
        return erg_error_set(err, ERG_EINVAL, "NULL argument");
    *out = NULL;
    bctx b;
    erg_status st = bctx_init(&b, profile, S, M, &o->schedule, o->blocking_power_w, err);
    if (st)
        return st;
    st = zeus_pmax(&b, o, err);
    if (!st && o->power_limit_step_w != 0)
        return zeus_power_limit(&b, o, out, err);
    if (!st && b.c->ncommon == 0)
        st = erg_error_set(err, ERG_ENOTFOUND,
                           "no clock is in the profile of every stage, so no global clock exists");
    if (st) {
        bctx_free(&b);
        return st;
    }
    double best = INFINITY;
    int bestf = b.c->common[0];
    for (int i = 0; i < b.c->ncommon; i++) {
        for (int s = 0; s < S; s++)
            fill_stage(b.plan, s, M, b.c->common[i]);
        erg__eval ev;
        st = erg__ctab_eval(b.c, b.dag, b.plan, o->blocking_power_w, NULL, NULL, NULL, &ev, err);
        if (st) {
            bctx_free(&b);
            return st;
        }
        double cost = o->eta * ev.energy_j + (1 - o->eta) * b.pmax_w * ev.time_s;
        if (cost < best) {
            best = cost;
            bestf = b.c->common[i];
        }
    }
    for (int s = 0; s < S; s++)
        fill_stage(b.plan, s, M, bestf);
    return finish(&b, o, "zeus-global", out, err);
}

static double stage_pace(const erg__ctab *c, int s, int f)
{
    int i = erg__ctab_find(c, s, ERG_FORWARD, f), j = erg__ctab_find(c, s, ERG_BACKWARD, f);
    return c->k[s * 2].t[i] + c->k[s * 2 + 1].t[j];
}

/* zeus-stage: one clock per stage, in the spirit of Zeus's per-stage
 * ("local") baseline in the Perseus paper: the heaviest stage (largest
 * forward + backward time at its max clock) sets the pace; for each of its
 * clocks, every other stage runs at its lowest clock whose forward + backward
 * time still fits in the heaviest stage's, so it does not become the
 * bottleneck. The assignment with the lowest Zeus cost wins. */
erg_status erg_plan_zeus_stage(const erg_profile *profile, int S, int M, const erg_baseline_opts *o,
                               erg_plan **out, erg_error *err)
{
    if (!out || !o)
        return erg_error_set(err, ERG_EINVAL, "NULL argument");
    *out = NULL;
    bctx b;
    erg_status st = bctx_init(&b, profile, S, M, &o->schedule, o->blocking_power_w, err);
    if (!st)
        st = zeus_pmax(&b, o, err);
    if (st) {
        bctx_free(&b);
        return st;
    }
    const erg__ctab *c = b.c;
    int h = 0;
    for (int s = 1; s < S; s++)
        if (stage_pace(c, s, c->both[s][0]) > stage_pace(c, h, c->both[h][0]))
            h = s;
    double best = INFINITY;
    int *bestf = erg__calloc((size_t)S, sizeof(int));
    if (!bestf) {
        bctx_free(&b);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (int i = 0; i < c->nboth[h]; i++) {
        double pace = stage_pace(c, h, c->both[h][i]);
        for (int s = 0; s < S; s++) {
            int f = c->both[s][0];
            if (s == h)
                f = c->both[h][i];
            else
                for (int j = 0; j < c->nboth[s]; j++) /* descending: keep the lowest that fits */
                    if (stage_pace(c, s, c->both[s][j]) <= pace)
                        f = c->both[s][j];
            fill_stage(b.plan, s, M, f);
        }
        erg__eval ev;
        st = erg__ctab_eval(c, b.dag, b.plan, o->blocking_power_w, NULL, NULL, NULL, &ev, err);
        if (st)
            break;
        double cost = o->eta * ev.energy_j + (1 - o->eta) * b.pmax_w * ev.time_s;
        if (cost < best) {
            best = cost;
            for (int s = 0; s < S; s++)
                bestf[s] = erg_plan_stage_freqs_const(b.plan, s)[0];
        }
    }
    if (st) {
        erg__free(bestf);
        bctx_free(&b);
        return st;
    }
    for (int s = 0; s < S; s++)
        fill_stage(b.plan, s, M, bestf[s]);
    erg__free(bestf);
    return finish(&b, o, "zeus-stage", out, err);
}

/* uniform: EnvPipe's "uniform" type without the GPU clock filter: every
 * stage at the bottom of its energy valley (its per-iteration energy,
 * idle time included, with the whole pipeline at each clock level). */
erg_status erg_plan_uniform(const erg_profile *profile, int S, int M, const erg_baseline_opts *o,
                            erg_plan **out, erg_error *err)
{
    if (!out || !o)
        return erg_error_set(err, ERG_EINVAL, "NULL argument");
    *out = NULL;
    erg_envpipe_opts eo;
    erg_envpipe_opts_init(&eo);
    eo.type = ERG_ENVPIPE_UNIFORM;
    eo.reconfig = ERG_RECONFIG_DEFAULT;
    eo.schedule = ERG_SCHED_1F1B;
    eo.blocking_power_w = o->blocking_power_w;
    eo.gpu = NULL;
    erg_status st = erg_plan_envpipe(profile, S, M, &eo, out, NULL, err);
    if (!st && o->schedule.kind != ERG_SCHED_1F1B) {
        /* the same clocks on the requested schedule */
        erg_plan *p = NULL;
        st = erg_plan_new(&o->schedule, S, M, &p, err);
        for (int s = 0; !st && s < S; s++)
            fill_stage(p, s, M, erg_plan_stage_freqs_const(*out, s)[0]);
        erg_plan_free(*out);
        *out = NULL;
        if (!st) {
            erg__ctab *c = NULL;
            erg_dag *dag = NULL;
            erg__eval ev;
            st = erg__ctab_new(profile, S, &c, err);
            if (!st)
                st = erg_dag_new(&o->schedule, S, M, &dag, err);
            if (!st)
                st = erg__ctab_eval(c, dag, p, o->blocking_power_w, NULL, NULL, NULL, &ev, err);
            if (!st)
                erg_plan_set_estimate(p, ev.time_s, ev.energy_j);
            erg_dag_free(dag);
            erg__ctab_free(c);
        }
        if (st)
            erg_plan_free(p);
        else
            *out = p;
    }
    if (!st)
        st = erg_plan_set_method(*out, "uniform", err);
    if (st) {
        erg_plan_free(*out);
        *out = NULL;
    }
    return st;
}
