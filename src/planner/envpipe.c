/* envpipe.c: the EnvPipe planner (docs/envpipe.md): its names and options, the reconfiguration
 * step shared with the server's online EnvPipe (erg_envpipe_reconfigure_step), measured waits,
 * and the planner on the emulated pipeline in its five phases (plan_real). Perseus's emulation
 * of EnvPipe, --variant perseus-emulation, is envpipe_perseus.c. */
#include "planner/envpipe_internal.h"
#include "ergon/gpu_table.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- names and options ---- */

static const erg__name type_names[] = {
    {"baseline", ERG_ENVPIPE_BASELINE},
    {"uniform", ERG_ENVPIPE_UNIFORM},
    {"envelope", ERG_ENVPIPE_ENVELOPE},
};
static const erg__name reconfig_names[] = {
    {"default", ERG_RECONFIG_DEFAULT},
    {"greedy", ERG_RECONFIG_GREEDY},
    {"balanced", ERG_RECONFIG_BALANCED},
};
static const erg__name variant_names[] = {
    {"envpipe", ERG_ENVPIPE_REAL},
    {"real", ERG_ENVPIPE_REAL},
    {"perseus-emulation", ERG_ENVPIPE_PERSEUS_EMULATION},
};

erg_status erg_envpipe_type_parse(const char *s, erg_envpipe_type *out, erg_error *err)
{
    int v = 0;
    if (!erg__name_lookup(ERG__NAMES(type_names), s, &v))
        return erg_error_set(err, ERG_EINVAL,
                             "unknown EnvPipe type '%s' (use baseline, uniform or envelope)",
                             s ? s : "");
    *out = (erg_envpipe_type)v;
    return ERG_OK;
}

erg_status erg_envpipe_reconfig_parse(const char *s, erg_envpipe_reconfig *out, erg_error *err)
{
    int v = 0;
    if (!erg__name_lookup(ERG__NAMES(reconfig_names), s, &v))
        return erg_error_set(err, ERG_EINVAL,
                             "unknown reconfiguration '%s' (use default, greedy or balanced)",
                             s ? s : "");
    *out = (erg_envpipe_reconfig)v;
    return ERG_OK;
}

erg_status erg_envpipe_variant_parse(const char *s, erg_envpipe_variant *out, erg_error *err)
{
    int v = 0;
    if (!erg__name_lookup(ERG__NAMES(variant_names), s, &v))
        return erg_error_set(err, ERG_EINVAL,
                             "unknown EnvPipe variant '%s' (use envpipe or perseus-emulation)",
                             s ? s : "");
    *out = (erg_envpipe_variant)v;
    return ERG_OK;
}

/* Any other value reads as the last name, as before the tables. */
const char *erg_envpipe_type_name(erg_envpipe_type t)
{
    const char *n = erg__name_of(ERG__NAMES(type_names), (int)t);
    return n ? n : "envelope";
}

const char *erg_envpipe_reconfig_name(erg_envpipe_reconfig r)
{
    const char *n = erg__name_of(ERG__NAMES(reconfig_names), (int)r);
    return n ? n : "balanced";
}

void erg_envpipe_opts_init(erg_envpipe_opts *o)
{
    memset(o, 0, sizeof *o);
    o->variant = ERG_ENVPIPE_REAL;
    o->type = ERG_ENVPIPE_ENVELOPE;
    o->schedule = ERG_SCHED_ENVPIPE;
    o->reconfig = ERG_RECONFIG_BALANCED;
    o->finish_limit = 10;
    o->max_iterations = ERG_ENVPIPE_DEFAULT_MAX_ITERS;
    o->unit_s = 0.001;
}

/* ---- the grid: each stage's units in execution order ---- */

typedef struct layout {
    int S, M;
    erg_instr *order; /* [S*2M] */
} layout;

static erg_status layout_init(layout *L, const erg_plan *plan, erg_error *err)
{
    L->S = erg_plan_num_stages(plan);
    L->M = erg_plan_num_microbatches(plan);
    L->order = erg__calloc((size_t)L->S * 2 * L->M, sizeof(erg_instr));
    if (!L->order)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    erg_schedule sc = erg_plan_schedule(plan);
    for (int s = 0; s < L->S; s++) {
        erg_status st =
            erg_schedule_stage_order(&sc, L->S, L->M, s, L->order + (size_t)s * 2 * L->M, err);
        if (st) {
            erg__free(L->order);
            L->order = NULL;
            return st;
        }
    }
    return ERG_OK;
}

/* Id (stage*2M + position) of (s, kind, j). */
static int layout_id(const layout *L, int s, erg_instr_kind kind, int j)
{
    const erg_instr *o = L->order + (size_t)s * 2 * L->M;
    for (int k = 0; k < 2 * L->M; k++)
        if (o[k].kind == kind && o[k].microbatch == j)
            return s * 2 * L->M + k;
    return -1;
}

bool erg__envpipe_in_envelope(int S, int M, int s, erg_instr in)
{
    return s == S - 1 || (in.kind == ERG_FORWARD && in.microbatch == 0) ||
           (in.kind == ERG_BACKWARD && in.microbatch == M - 1);
}

erg_status erg_envpipe_format_grid(const erg_plan *plan, const double *wait_s, const int *path,
                                   int path_len, char **out, erg_error *err)
{
    *out = NULL;
    layout L;
    erg_status st = layout_init(&L, plan, err);
    if (st)
        return st;
    int n = 2 * L.S * L.M;
    bool *crit = erg__calloc((size_t)n, sizeof(bool));
    if (!crit) {
        erg__free(L.order);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (int i = 0; path && i < path_len; i++)
        if (path[i] >= 0 && path[i] < n)
            crit[path[i]] = true;
    erg__buf b = {0};
    for (int s = 0; s < L.S && !st; s++) {
        const int *f = erg_plan_stage_freqs_const(plan, s);
        st = erg__buf_printf(&b, "Stage %d |", s);
        for (int k = 0; k < 2 * L.M && !st; k++) {
            int id = s * 2 * L.M + k;
            erg_instr in = L.order[id];
            double w = wait_s ? wait_s[id] * 1e3 : 0.0;
            st = erg__buf_printf(&b, crit[id] ? " [%c%d %d %.1f]" : "  %c%d %d %.1f ",
                                 in.kind == ERG_FORWARD ? 'F' : 'B', in.microbatch, f[k], w);
        }
        if (!st)
            st = erg__buf_append(&b, "\n", 1);
    }
    erg__free(crit);
    erg__free(L.order);
    if (st) {
        erg__buf_free(&b);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    *out = b.data;
    return ERG_OK;
}

/* ---- critical path and the reconfiguration policies ---- */

/* EnvPipe's measured critical path (docs/envpipe.md, step 4): walk back from the
 * last unit of stage 0. A unit that waited less than the threshold in its
 * receive was not held up by another stage, so the path continues at the
 * previous unit of the same stage; otherwise it moves to the producer of the
 * input it waited for (F_j on stage s-1, B_j on stage s+1). Units without a
 * receive (stage-0 forwards, last-stage backwards) always step along their
 * row, so the walk ends at stage 0's F0. The list is ordered end -> start.
 * With threshold 0+ and emulated waits (start minus the previous unit's end)
 * this is a CPM critical path. Each step moves to a DAG predecessor, so the
 * walk is at most 2SM long. */
static int walk_path(const layout *L, const double *wait_s, double thr, int *path)
{
    int S = L->S, M = L->M, n = 2 * S * M, len = 0;
    int id = 2 * M - 1; /* stage 0's last unit */
    while (len < n) {
        path[len++] = id;
        int s = id / (2 * M), pos = id % (2 * M);
        if (s == 0 && pos == 0)
            break;
        erg_instr in = L->order[id];
        bool has_recv = (in.kind == ERG_FORWARD && s > 0) || (in.kind == ERG_BACKWARD && s < S - 1);
        if (pos > 0 && (!has_recv || wait_s[id] < thr))
            id--;
        else if (has_recv)
            id = layout_id(L, in.kind == ERG_FORWARD ? s - 1 : s + 1, in.kind, in.microbatch);
        else
            break; /* cannot happen: only stage 0's F0 has neither */
        if (id < 0)
            break;
    }
    return len;
}

typedef int (*snap_fn)(void *ctx, int s, erg_instr_kind kind, int cur, int target, int max);

static int snap_plain(void *ctx, int s, erg_instr_kind kind, int cur, int target, int max)
{
    (void)ctx;
    (void)s;
    (void)kind;
    (void)cur;
    return target > max ? max : target;
}

/* The greedy and balanced policies (docs/envpipe.md, --reconfig) on a path; returns
 * whether a clock changed. A path entirely in the outer envelope, or with
 * nothing below max, changes nothing. */
static bool apply_policy(erg_plan *plan, const layout *L, const int *path, int len,
                         erg_envpipe_reconfig policy, int step, const int *max_mhz, snap_fn snap,
                         void *ctx)
{
    int S = L->S, M = L->M;
    bool all_env = true;
    for (int i = 0; i < len && all_env; i++)
        all_env = erg__envpipe_in_envelope(S, M, path[i] / (2 * M), L->order[path[i]]);
    if (all_env || policy == ERG_RECONFIG_DEFAULT)
        return false;
    bool changed = false;
    if (policy == ERG_RECONFIG_GREEDY) {
        for (int i = 0; i < len; i++) {
            int s = path[i] / (2 * M), k = path[i] % (2 * M);
            int *f = erg_plan_stage_freqs(plan, s);
            if (f[k] < max_mhz[s]) {
                int nf = snap(ctx, s, L->order[path[i]].kind, f[k], f[k] + step, max_mhz[s]);
                if (nf > f[k]) {
                    f[k] = nf;
                    changed = true;
                    break;
                }
            }
        }
        return changed;
    }
    /* balanced: the lowest clock on the path (searching from the max). */
    int m = INT32_MAX;
    bool below = false;
    for (int i = 0; i < len; i++) {
        int s = path[i] / (2 * M), k = path[i] % (2 * M);
        int f = erg_plan_stage_freqs_const(plan, s)[k];
        if (f < max_mhz[s]) {
            below = true;
            if (f < m)
                m = f;
        }
    }
    if (!below)
        return false;
    for (int i = 0; i < len; i++) {
        int s = path[i] / (2 * M), k = path[i] % (2 * M);
        int *f = erg_plan_stage_freqs(plan, s);
        if (f[k] == m && f[k] < max_mhz[s]) {
            int nf = snap(ctx, s, L->order[path[i]].kind, f[k], f[k] + step, max_mhz[s]);
            if (nf > f[k]) {
                f[k] = nf;
                changed = true;
            }
        }
    }
    return changed;
}

erg_status erg_envpipe_reconfigure_step(erg_plan *plan, const double *wait_s, double thr,
                                        double scale, erg_envpipe_reconfig policy, int step,
                                        const int *max_mhz, int *path, int *path_len, bool *changed,
                                        erg_error *err)
{
    *changed = false;
    *path_len = 0;
    if (!plan || !wait_s || !max_mhz || !path)
        return erg_error_set(err, ERG_EINVAL, "erg_envpipe_reconfigure_step: NULL argument");
    if (step <= 0)
        return erg_error_set(err, ERG_EINVAL, "the clock step must be positive (got %d MHz)", step);
    layout L;
    erg_status st = layout_init(&L, plan, err);
    if (st)
        return st;
    int S = L.S, M = L.M;
    for (int i = 0; i < 2 * S * M; i++)
        if (!(wait_s[i] >= 0) || !isfinite(wait_s[i])) {
            erg__free(L.order);
            return erg_error_set(err, ERG_EINVAL, "wait of instruction %d is invalid (%g s)", i,
                                 wait_s[i]);
        }
    if (!(thr > 0)) {
        /* threshold = the smallest non-zero last-stage wait x scale (EnvPipe's) */
        double mn = INFINITY;
        for (int k = 0; k < 2 * M; k++) {
            double w = wait_s[(S - 1) * 2 * M + k];
            if (w > 0 && w < mn)
                mn = w;
        }
        if (!(scale > 0) || !isfinite(mn)) {
            erg__free(L.order);
            return erg_error_set(err, ERG_EINVAL,
                                 "cannot derive a wait threshold: the last stage has no non-zero "
                                 "wait or the scale %g is not positive",
                                 scale);
        }
        thr = mn * scale;
    }
    *path_len = walk_path(&L, wait_s, thr, path);
    *changed = apply_policy(plan, &L, path, *path_len, policy, step, max_mhz, snap_plain, NULL);
    erg__free(L.order);
    return ERG_OK;
}

/* ---- measured waits and max clocks (for the run-time reconfiguration) ---- */

#define ERG_MAX_WAITS_BYTES (64u << 20)

erg_status erg_envpipe_waits_parse(const char *text, size_t len, const char *name,
                                   const erg_plan *plan, double *wait_s, erg_error *err)
{
    if (!text || !plan || !wait_s)
        return erg_error_set(err, ERG_EINVAL, "erg_envpipe_waits_parse: NULL argument");
    if (!name)
        name = "<waits>";
    layout L;
    erg_status st = layout_init(&L, plan, err);
    if (st)
        return st;
    int S = L.S, M = L.M, n = 2 * S * M;
    bool *seen = erg__calloc((size_t)n, sizeof(bool));
    if (!seen) {
        erg__free(L.order);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    static const char *const cols[4] = {"stage", "instruction", "microbatch", "wait_ms"};
    int col[4];
    size_t ncols = 0;
    bool header = false;
    int rows = 0, r;
    erg__csv c;
    erg__csv_init(&c, text, len);
    while (!st && (r = erg__csv_next(&c)) > 0) {
        if (!header) {
            ncols = c.nfields;
            for (int k = 0; k < 4 && !st; k++) {
                col[k] = -1;
                for (size_t i = 0; i < c.nfields; i++)
                    if (!strcmp(c.fields[i], cols[k]))
                        col[k] = (int)i;
                if (col[k] < 0)
                    st = erg_error_set(err, ERG_EPARSE,
                                       "%s:%ld: missing column '%s' (need "
                                       "stage,instruction,microbatch,wait_ms)",
                                       name, c.line, cols[k]);
            }
            header = true;
            continue;
        }
        if (c.nfields != ncols) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: expected %zu fields, found %zu", name,
                               c.line, ncols, c.nfields);
            break;
        }
        long sv, mb;
        double w;
        const char *in = c.fields[col[1]];
        erg_instr_kind kind;
        if (!strcmp(in, "forward") || !strcmp(in, "F"))
            kind = ERG_FORWARD;
        else if (!strcmp(in, "backward") || !strcmp(in, "B"))
            kind = ERG_BACKWARD;
        else {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: instruction '%s' is not forward, backward, F or B", name,
                               c.line, in);
            break;
        }
        if (!erg__parse_long(c.fields[col[0]], &sv) || sv < 0 || sv >= S ||
            !erg__parse_long(c.fields[col[2]], &mb) || mb < 0 || mb >= M) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: stage '%s' or microbatch '%s' out of range (S=%d, M=%d)",
                               name, c.line, c.fields[col[0]], c.fields[col[2]], S, M);
            break;
        }
        if (!erg__parse_double(c.fields[col[3]], &w) || w < 0) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: wait_ms must be a number >= 0, got '%s'",
                               name, c.line, c.fields[col[3]]);
            break;
        }
        int id = layout_id(&L, (int)sv, kind, (int)mb);
        if (seen[id]) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: stage %ld %s %ld listed twice", name,
                               c.line, sv, erg_instr_kind_name(kind), mb);
            break;
        }
        seen[id] = true;
        wait_s[id] = w / 1e3;
        rows++;
    }
    if (!st && r < 0)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (!st && rows != n)
        st = erg_error_set(err, ERG_EPARSE, "%s: %d waits for a plan with %d instructions", name,
                           rows, n);
    erg__csv_free(&c);
    erg__free(seen);
    erg__free(L.order);
    return st;
}

erg_status erg_envpipe_waits_read(const char *path, const erg_plan *plan, double *wait_s,
                                  erg_error *err)
{
    char *text;
    size_t len;
    erg_status st = erg__read_file(path, ERG_MAX_WAITS_BYTES, &text, &len, err);
    if (st)
        return st;
    st = erg_envpipe_waits_parse(text, len, path, plan, wait_s, err);
    erg__free(text);
    return st;
}

erg_status erg_envpipe_max_clocks(const erg_profile *profile, int S, const erg_gpu_spec *gpu,
                                  int *max_mhz, erg_error *err)
{
    if (!max_mhz)
        return erg_error_set(err, ERG_EINVAL, "NULL argument");
    erg__ctab *c;
    erg_status st = erg__ctab_new(profile, S, &c, err);
    if (st)
        return st;
    for (int s = 0; s < S && !st; s++) {
        max_mhz[s] = 0;
        for (int i = 0; i < c->nboth[s] && !max_mhz[s]; i++) {
            int f = c->both[s][i];
            if (!gpu || (gpu->profile_step_mhz > 0 && f % gpu->profile_step_mhz == 0 &&
                         f >= gpu->filter_min_mhz && f <= gpu->filter_max_mhz))
                max_mhz[s] = f;
        }
        if (!max_mhz[s])
            st = erg_error_set(err, ERG_ENOTFOUND,
                               "stage %d: no profiled clock passes the %s filter", s,
                               gpu ? gpu->name : "");
    }
    erg__ctab_free(c);
    return st;
}

/* ---- shared helpers ---- */

static erg_status check_common(const erg_profile *profile, int S, int M, double power_w,
                               erg_error *err)
{
    if (!profile)
        return erg_error_set(err, ERG_EINVAL, "NULL profile");
    if (S < 1 || M < 1)
        return erg_error_set(err, ERG_EINVAL, "a pipeline needs S >= 1 and M >= 1 (got S=%d, M=%d)",
                             S, M);
    if (S > ERG_SCHED_MAX_STAGES)
        return erg_error_set(err, ERG_EINVAL, "at most %d stages are supported (got %d)",
                             ERG_SCHED_MAX_STAGES, S);
    if (!(power_w >= 0) || !isfinite(power_w))
        return erg_error_set(err, ERG_EINVAL, "invalid blocking power %g W", power_w);
    return ERG_OK;
}

/* Emulated receive waits: start minus the previous unit's end on the same
 * stage (minus 0 for the first unit); 0 for units without a receive. */
void erg__envpipe_emulated_waits(const erg_dag *dag, const double *es, const double *dur,
                                 double *wait)
{
    int S = erg_dag_num_stages(dag), M = erg_dag_num_microbatches(dag);
    for (int s = 0; s < S; s++)
        for (int k = 0; k < 2 * M; k++) {
            int id = s * 2 * M + k;
            erg_instr in = erg_dag_instr(dag, id, NULL);
            bool has_recv =
                (in.kind == ERG_FORWARD && s > 0) || (in.kind == ERG_BACKWARD && s < S - 1);
            double prev_end = k ? es[id - 1] + dur[id - 1] : 0.0;
            double w = es[id] - prev_end;
            wait[id] = has_recv && w > 0 ? w : 0.0;
        }
}

typedef struct snap_ctx {
    const erg__ctab *c;
} snap_ctx;

/* The profile clock of (s, kind) nearest to target among those in
 * (cur, max] (ties go up); cur when there is none. */
static int snap_profile(void *vctx, int s, erg_instr_kind kind, int cur, int target, int max)
{
    const snap_ctx *x = vctx;
    const erg__ckind *k = &x->c->k[s * 2 + (int)kind];
    if (target > max)
        target = max;
    int best = cur;
    long bd = -1;
    for (int i = 0; i < k->n; i++) {
        int f = k->freq[i];
        if (f <= cur || f > max)
            continue;
        long d = labs((long)f - target);
        if (bd < 0 || d < bd || (d == bd && f > best)) {
            best = f;
            bd = d;
        }
    }
    return best;
}

erg_status erg__envpipe_finish_plan(const erg__ctab *c, const erg_dag *dag, erg_plan *plan,
                                    double power_w, const char *method, erg_error *err)
{
    erg__eval ev;
    erg_status st = erg__ctab_eval(c, dag, plan, power_w, NULL, NULL, NULL, &ev, err);
    if (!st) {
        erg_plan_set_estimate(plan, ev.time_s, ev.energy_j);
        st = erg_plan_set_method(plan, method, err);
    }
    return st;
}

/* ---- EnvPipe as the artifact runs it, on the emulated pipeline ----
 *
 * (docs/envpipe.md, "How the plan is built") plan_real checks the options EnvPipe alone has,
 * then runs five phases, a function each, over one real_run that they fill in turn:
 * 1. clock_lists: the clock list per stage, the profile's clocks (with forward and backward
 *    points), filtered by the GPU table's rule when a GPU is given; [0] is "max". In envelope
 *    mode the last stage stays at max.
 * 2. energy_valley: for each list index k, the whole pipeline runs at clock k (1F1B, r = 0);
 *    the stage's per-iteration energy includes its idle time at blocking power. The
 *    energy-valley optimum is the argmin (ties: higher).
 * 3. extra_warmups: r_s from T_B at max and T_F at the optimum, capped by the memory cap and by
 *    M - (S - s), then EnvPipe's clamp along the pipeline.
 * 4. initial_plan: the schedule with those r_s and the initial clocks (the --type knob).
 * 5. reconfigure: reconfiguration on the emulated pipeline: CPM critical path, envelope test,
 *    greedy or balanced, until finish_limit + 1 consecutive iterations change nothing (never
 *    loops: also capped at max_iterations). */

typedef struct real_run {
    const erg_envpipe_opts *o;
    const erg__ctab *c;
    int S, M, n;                     /* stages, microbatches, instructions (2 S M) */
    int *list[ERG_SCHED_MAX_STAGES]; /* per stage: its clocks, [0] the max (phase 1) */
    int nlist[ERG_SCHED_MAX_STAGES];
    int mx[ERG_SCHED_MAX_STAGES];  /* per stage: the max clock (phase 1) */
    int opt[ERG_SCHED_MAX_STAGES]; /* per stage: the optimum (phase 2; the max before) */
    int r[ERG_SCHED_MAX_STAGES];   /* per stage: extra warm-up forwards (phase 3; 0 before) */
} real_run;

/* What only EnvPipe asks of the options: its schedules, M >= S for "ours", max_inflight. */
static erg_status check_real_opts(int S, int M, const erg_envpipe_opts *o, erg_error *err)
{
    if (o->schedule != ERG_SCHED_1F1B && o->schedule != ERG_SCHED_ENVPIPE)
        return erg_error_set(err, ERG_EINVAL,
                             "EnvPipe runs on the 1f1b or ours schedule, not %s (its envelope and "
                             "extra warm-up forwards are defined for one stage per rank and a "
                             "full backward; plan other schedules with plan perseus, see "
                             "docs/schedules.md)",
                             erg_schedule_name(o->schedule));
    if (o->schedule == ERG_SCHED_ENVPIPE && M < S)
        return erg_error_set(err, ERG_EINVAL,
                             "the EnvPipe 'ours' schedule needs at least as many microbatches "
                             "as stages (got M=%d < S=%d)",
                             M, S);
    if (o->max_inflight < 0)
        return erg_error_set(err, ERG_EINVAL, "max_inflight must be >= 0 (got %d)",
                             o->max_inflight);
    return ERG_OK;
}

/* Phase 1: each stage's clock list (R->list, R->nlist); its first clock is the stage's max
 * and, until phase 2, its optimum. */
static erg_status clock_lists(real_run *R, erg_error *err)
{
    const erg__ctab *c = R->c;
    const erg_envpipe_opts *o = R->o;
    for (int s = 0; s < R->S; s++) {
        R->list[s] = erg__calloc((size_t)c->nboth[s], sizeof(int));
        if (!R->list[s])
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        for (int i = 0; i < c->nboth[s]; i++) {
            int f = c->both[s][i];
            if (o->gpu && (f % o->gpu->profile_step_mhz != 0 || f < o->gpu->filter_min_mhz ||
                           f > o->gpu->filter_max_mhz))
                continue;
            R->list[s][R->nlist[s]++] = f;
        }
        if (R->nlist[s] == 0)
            return erg_error_set(err, ERG_ENOTFOUND,
                                 "stage %d: no profiled clock passes the %s filter (multiples of "
                                 "%d MHz in [%d, %d])",
                                 s, o->gpu->name, o->gpu->profile_step_mhz, o->gpu->filter_min_mhz,
                                 o->gpu->filter_max_mhz);
        R->mx[s] = R->opt[s] = R->list[s][0];
    }
    return ERG_OK;
}

/* Phase 2 (not for --type baseline): the energy-valley optimum of each stage (R->opt), from
 * the pipeline profiled at each clock level, 1F1B with r = 0. stage_j: room for S energies. */
static erg_status energy_valley(real_run *R, double *stage_j, erg_error *err)
{
    const erg_envpipe_opts *o = R->o;
    int S = R->S, M = R->M;
    bool pin_last = o->type == ERG_ENVPIPE_ENVELOPE;
    erg_dag *dag = NULL;
    erg_plan *plan = NULL;
    erg_schedule ps = {.kind = ERG_SCHED_1F1B};
    erg_status st = erg_dag_new(&ps, S, M, &dag, err);
    if (!st)
        st = erg_plan_new(&ps, S, M, &plan, err);
    int K = 0;
    for (int s = 0; s < S; s++)
        K = ERG__MAX(K, R->nlist[s]);
    double best[ERG_SCHED_MAX_STAGES];
    for (int k = 0; k < K && !st; k++) {
        for (int s = 0; s < S; s++) {
            int f = (pin_last && s == S - 1) ? R->mx[s] : R->list[s][ERG__MIN(k, R->nlist[s] - 1)];
            int *pf = erg_plan_stage_freqs(plan, s);
            for (int i = 0; i < 2 * M; i++)
                pf[i] = f;
        }
        erg__eval ev;
        st = erg__ctab_eval(R->c, dag, plan, o->blocking_power_w, NULL, NULL, stage_j, &ev, err);
        for (int s = 0; s < S && !st; s++) {
            if (pin_last && s == S - 1)
                continue;
            if (k < R->nlist[s] && (k == 0 || stage_j[s] < best[s])) {
                best[s] = stage_j[s];
                R->opt[s] = R->list[s][k];
            }
        }
    }
    erg_dag_free(dag);
    erg_plan_free(plan);
    return st;
}

/* Phase 3 (docs/envpipe.md, step 3; the "ours" schedule, not --type baseline): the extra
 * warm-up forwards r_s (R->r), which stay 0 otherwise. */
static void extra_warmups(real_run *R)
{
    const erg_envpipe_opts *o = R->o;
    const erg__ctab *c = R->c;
    int S = R->S, M = R->M;
    int *r = R->r;
    if (o->schedule != ERG_SCHED_ENVPIPE || o->type == ERG_ENVPIPE_BASELINE)
        return;
    for (int s = 0; s + 1 < S; s++) {
        double tb = c->k[s * 2 + 1].t[erg__ctab_find(c, s, ERG_BACKWARD, R->mx[s])];
        double tf = c->k[s * 2].t[erg__ctab_find(c, s, ERG_FORWARD, R->opt[s])];
        double x = tf > 0 ? floor(tb * (S - s - 1) / tf) : (double)M;
        long rs = x > M ? M : (long)x;
        if (o->max_inflight > 0)
            rs = ERG__MIN(rs, (long)ERG__MAX(0, o->max_inflight - (S - s)));
        rs = ERG__MIN(rs, (long)(M - (S - s)));
        r[s] = rs > 0 ? (int)rs : 0;
    }
    for (int i = 0; i + 1 < S; i++)
        if (r[i] < r[i + 1] && r[i] + (S - i) != M)
            r[i + 1] = r[i];
}

/* Phase 4: the DAG and the plan of the schedule with r_s, at the initial clocks of --type:
 * max everywhere (baseline), the optimum everywhere (uniform), the optimum outside the outer
 * envelope (envelope). On failure *dag and *plan hold what was built, for the caller to free. */
static erg_status initial_plan(const real_run *R, erg_dag **dag, erg_plan **plan, erg_error *err)
{
    const erg_envpipe_opts *o = R->o;
    int S = R->S, M = R->M;
    erg_schedule sched = {.kind = o->schedule, .max_inflight = o->max_inflight};
    for (int s = 0; s < S; s++)
        sched.extra_warmup[s] = R->r[s];
    erg_status st = erg_dag_new(&sched, S, M, dag, err);
    if (!st)
        st = erg_plan_new(&sched, S, M, plan, err);
    if (st)
        return st;
    for (int id = 0; id < R->n; id++) {
        int s;
        erg_instr in = erg_dag_instr(*dag, id, &s);
        int f = R->mx[s];
        if (o->type == ERG_ENVPIPE_UNIFORM)
            f = R->opt[s];
        else if (o->type == ERG_ENVPIPE_ENVELOPE && !erg__envpipe_in_envelope(S, M, s, in))
            f = R->opt[s];
        erg_plan_stage_freqs(*plan, s)[id % (2 * M)] = f;
    }
    return ERG_OK;
}

/* Phase 5 (not for --reconfig default): raise clocks on the emulated pipeline's critical path
 * until it settles. buf: 3 n doubles of work space (start times, durations, waits); path: n
 * ints. *iters counts the iterations; *stuck says the last path left the envelope. */
static erg_status reconfigure(const real_run *R, const erg_dag *dag, erg_plan *plan, double *buf,
                              int *path, int *iters, bool *stuck, erg_error *err)
{
    const erg_envpipe_opts *o = R->o;
    const erg__ctab *c = R->c;
    int S = R->S, M = R->M, n = R->n;
    double *es = buf, *dur = buf + n, *wait = buf + 2 * n;
    int gran = o->gpu ? o->gpu->reconfig_step_mhz : 30;
    int step = o->reconfig_step_mhz > 0             ? o->reconfig_step_mhz
               : o->reconfig == ERG_RECONFIG_GREEDY ? 3 * gran
                                                    : gran;
    layout L;
    erg_status st = layout_init(&L, plan, err);
    if (st)
        return st;
    snap_ctx sx = {c};
    int maxit = o->max_iterations > 0 ? o->max_iterations : ERG_ENVPIPE_DEFAULT_MAX_ITERS;
    int finish = o->finish_limit >= 0 ? o->finish_limit : 10;
    int nochange = 0;
    double mthr = -1;
    while (*iters < maxit) {
        erg__eval ev;
        st = erg__ctab_eval(c, dag, plan, o->blocking_power_w, es, dur, NULL, &ev, err);
        if (st)
            break;
        erg__envpipe_emulated_waits(dag, es, dur, wait);
        /* threshold: a wait shorter than 1 ns (relative to T) is no wait */
        double thr = 1e-9 * (ev.time_s > 1 ? ev.time_s : 1);
        if (o->threshold_scale > 0) {
            /* the measured-wait rule: every receive also pays the transfer */
            for (int id = 0; id < n; id++) {
                int s = id / (2 * M);
                erg_instr in = L.order[id];
                if ((in.kind == ERG_FORWARD && s > 0) || (in.kind == ERG_BACKWARD && s < S - 1))
                    wait[id] += o->transfer_s;
            }
            if (mthr < 0) { /* computed once, from the first iteration (as EnvPipe) */
                double mn = INFINITY;
                for (int k = 0; k < 2 * M; k++) {
                    double w = wait[(S - 1) * 2 * M + k];
                    if (w > 0 && w < mn)
                        mn = w;
                }
                mthr = isfinite(mn) ? mn * o->threshold_scale : thr;
            }
            thr = mthr;
        }
        int len = walk_path(&L, wait, thr, path);
        bool changed =
            apply_policy(plan, &L, path, len, o->reconfig, step, R->mx, snap_profile, &sx);
        ++*iters;
        if (o->on_iteration) {
            char *grid = NULL;
            st = erg_envpipe_format_grid(plan, wait, path, len, &grid, err);
            if (st)
                break;
            int stop = o->on_iteration(o->user, *iters, plan, grid);
            erg__free(grid);
            if (stop) {
                st = erg_error_set(err, ERG_ECANCELED, "canceled");
                break;
            }
        }
        if (changed) {
            nochange = 0;
            continue;
        }
        bool all_env = true;
        for (int i = 0; i < len && all_env; i++)
            all_env = erg__envpipe_in_envelope(S, M, path[i] / (2 * M), L.order[path[i]]);
        *stuck = !all_env;
        if (++nochange > finish)
            break;
    }
    erg__free(L.order);
    return st;
}

/* EnvPipe on the emulated pipeline: the options' checks, then the five phases above. */
static erg_status plan_real(const erg_profile *profile, int S, int M, const erg_envpipe_opts *o,
                            erg_plan **out, erg_envpipe_info *info, erg_error *err)
{
    erg_status st = check_real_opts(S, M, o, err);
    if (st)
        return st;
    real_run R = {.o = o, .S = S, .M = M, .n = 2 * S * M};
    erg__ctab *c = NULL;
    erg_dag *dag = NULL;
    erg_plan *plan = NULL;
    double *buf = NULL;
    int *path = NULL;
    int iters = 0;
    bool stuck = false;
    if ((st = erg__ctab_new(profile, S, &c, err)))
        return st;
    R.c = c;
    if ((st = clock_lists(&R, err)))
        goto done;
    buf = erg__calloc((size_t)R.n * 3 + (size_t)S, sizeof(double));
    path = erg__calloc((size_t)R.n, sizeof(int));
    if (!buf || !path) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    if (o->type != ERG_ENVPIPE_BASELINE && (st = energy_valley(&R, buf + 3 * R.n, err)))
        goto done;
    extra_warmups(&R);
    if ((st = initial_plan(&R, &dag, &plan, err)))
        goto done;
    if (o->reconfig != ERG_RECONFIG_DEFAULT &&
        (st = reconfigure(&R, dag, plan, buf, path, &iters, &stuck, err)))
        goto done;
    if (info) {
        info->iterations = iters;
        info->stuck = stuck;
        for (int s = 0; s < S; s++) {
            info->max_mhz[s] = R.mx[s];
            info->optimal_mhz[s] = o->type == ERG_ENVPIPE_BASELINE ? 0 : R.opt[s];
            info->extra_warmup[s] = R.r[s];
        }
    }
    st = erg__envpipe_finish_plan(c, dag, plan, o->blocking_power_w, "envpipe", err);
done:
    for (int s = 0; s < S; s++)
        erg__free(R.list[s]);
    erg__free(buf);
    erg__free(path);
    erg_dag_free(dag);
    erg__ctab_free(c);
    if (st)
        erg_plan_free(plan);
    else
        *out = plan;
    return st;
}

erg_status erg_plan_envpipe(const erg_profile *profile, int S, int M, const erg_envpipe_opts *o,
                            erg_plan **out, erg_envpipe_info *info, erg_error *err)
{
    if (!out || !o)
        return erg_error_set(err, ERG_EINVAL, "erg_plan_envpipe: NULL argument");
    *out = NULL;
    erg_status st = check_common(profile, S, M, o->blocking_power_w, err);
    if (st)
        return st;
    if (info)
        memset(info, 0, sizeof *info);
    if (o->gpu && (o->gpu->profile_step_mhz <= 0 || o->gpu->reconfig_step_mhz <= 0))
        return erg_error_set(err, ERG_EINVAL, "GPU %s has a non-positive clock step", o->gpu->name);
    if (!(o->threshold_scale >= 0) || !isfinite(o->threshold_scale) || !(o->transfer_s >= 0) ||
        !isfinite(o->transfer_s))
        return erg_error_set(err, ERG_EINVAL,
                             "the wait threshold scale and the transfer time must be >= 0 "
                             "(got %g, %g s)",
                             o->threshold_scale, o->transfer_s);
    if (o->reconfig_step_mhz < 0)
        return erg_error_set(err, ERG_EINVAL, "the clock step must be positive (got %d MHz)",
                             o->reconfig_step_mhz);
    if (o->variant == ERG_ENVPIPE_PERSEUS_EMULATION)
        return erg__envpipe_perseus_emulation(profile, S, M, o, out, info, err);
    return plan_real(profile, S, M, o, out, info, err);
}
