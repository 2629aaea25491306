/* sched_envpipe.c: the server's EnvPipe scheduler: profile, plan with erg_plan_envpipe, then
 * one measured reconfiguration step per window until EnvPipe's termination rule holds.
 *
 * HOW IT RUNS, window by window (docs/envpipe.md; docs/http-api.md "EnvPipe online"):
 *
 * 1. Profiling (type uniform or envelope): warmup_windows windows with every instruction at
 *    the top supported clock, then one window per clock of the ranks' power_state_range
 *    (descending; only the clocks that pass the GPU's EnvPipe filter when `gpu` is given,
 *    and >= minimum_power_state). Each window gives, per stage and per clock, the mean time
 *    and energy of a forward and of a backward over the window's iterations after the
 *    warm-up drop (warmup_step_ratio). This phase sits behind three functions (prof_next,
 *    prof_observe, prof_build) so another profiling strategy can replace it. Unlike the
 *    artifact, the last stage is profiled like the others (the planner pins it at max in
 *    envelope mode anyway). Type baseline skips profiling. With "sparse": true the
 *    InstructionProfiler's sparse mode (sched_sparse.c) chooses each window's clocks per
 *    (stage, instruction) and its predicted full profile is the plan's input.
 * 2. Planning: erg_plan_envpipe on the measured profile with reconfigure "default" (the
 *    initial plan: energy-valley clocks, the outer envelope at max; r_s for "ours").
 *    The ranks must run the plan's order: "1f1b" needs the 1F1B order; "ours" needs the
 *    ranks to have registered the EnvPipe order with the r_s the plan computes, else the
 *    job fails naming both (the order is fixed when the ranks register, before any
 *    profile exists).
 * 3. Reconfiguration (greedy, balanced): each window serves the plan; its results' receive
 *    waits (wait_breakdown: per kind, per iteration, one wait per occurrence; the k-th
 *    forward of a stage is F_k) give each instruction's mean wait over the window's
 *    iterations after the warm-up drop, mapped to the plan's instruction id
 *    stage*2M + position. The threshold is computed once, from the first such window
 *    (threshold_scale x the smallest non-zero last-stage wait), unless threshold_s is
 *    given. ONE erg_envpipe_reconfigure_step then raises clocks (snapped up to a clock the
 *    ranks support). A window that changes nothing (path inside the outer envelope, or
 *    nothing left to raise) counts; finish_limit + 1 consecutive ones end the phase
 *    (EnvPipe's rule; it also ends when stuck).
 * 4. The final plan is served for final_windows more windows (-1: until the job ends).
 *
 * Files in the job's dump directory: envpipe-profile.csv (the measured profile),
 * envpipe-plan.json (the current plan, rewritten after every change), envpipe.log (the
 * grid after every reconfiguration window in EnvPipe's printed format, and the
 * termination) and envpipe-windows.csv (one row per window: phase, path, changed; only the
 * first 100 windows of the final plan). */
#include "server/sched_ops.h"

#include "ergon/envpipe.h"
#include "ergon/pipeline.h"
#include "ergon/plan.h"
#include "ergon/profile.h"

#include <math.h>
#include <string.h>

enum { EP_PROFILE, EP_RECONF, EP_FINAL, EP_DONE };
#define FINAL_ROWS 100

typedef struct srv_envpipe srv_envpipe;

struct srv_envpipe {
    const srv_sched_ctx *ctx;
    int S, M;
    erg_envpipe_opts opts; /* type, schedule, reconfig, blocking power, gpu */
    erg_gpu_spec gpu;
    bool have_gpu;
    int warm;           /* warm-up windows at the top clock */
    double ratio;       /* warm-up drop within a window */
    long final_windows; /* -1 = forever */
    double thr_arg;     /* threshold_s (0 = derive) */
    int step_mhz;
    int reg_r[ERG_SCHED_MAX_STAGES]; /* r_s of the registered order */
    /* profiling (prof_* functions) */
    srv_sparse_prof *sparse; /* "sparse": true: the InstructionProfiler's sparse mode */
    int n_clocks;
    int *clocks;     /* descending */
    double *pt, *pe; /* [(s * n_clocks + k) * 2 + kind]: means */
    long prof_k;     /* profiling windows handed out */
    int prof_clock;  /* the last one's uniform clock (0: mixed, sparse) */
    /* state */
    int phase;
    long window;         /* windows handed out */
    long reconf_windows; /* reconfiguration windows observed */
    erg_plan *plan;
    int max_mhz[ERG_SCHED_MAX_STAGES];
    double thr; /* 0 until known */
    int nochange;
    long final_left;
    int final_rows; /* final windows logged */
    int *path;
    int path_len;
    double *wait; /* [2SM] */
    erg__buf log, csv;
};

/* ---- small helpers ---- */

static int drop_of(int n, double ratio)
{
    int d = (int)floor(n * ratio);
    return d >= n ? (n > 0 ? n - 1 : 0) : d;
}

static bool passes_filter(const srv_envpipe *e, int f)
{
    return !e->have_gpu || (f % e->gpu.profile_step_mhz == 0 && f >= e->gpu.filter_min_mhz &&
                            f <= e->gpu.filter_max_mhz);
}

static erg_status write_file(const srv_envpipe *e, const char *name, const char *data, size_t len,
                             erg_error *err)
{
    return erg__srv_sched_write_file(e->ctx, name, data, len, err);
}

static erg_status oom(erg_error *err)
{
    return erg_error_set(err, ERG_ENOMEM, "out of memory");
}

/* The compute kind of a registered instruction as an erg kind; -1 for others. */
static int erg_kind(int code)
{
    return code == SRV_I_FORWARD ? ERG_FORWARD : code == SRV_I_BACKWARD ? ERG_BACKWARD : -1;
}

static void fmt_r(const int *r, int S, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = 0;
    for (int s = 0; s < S && o + 12 < n; s++)
        o += (size_t)snprintf(buf + o, n - o, s ? ",%d" : "%d", r[s]);
}

/* Does stage s's registered compute order equal `order` (2M instructions)? */
static bool order_matches(const srv_sched_ctx *c, int s, const erg_instr *order)
{
    int k = 0;
    for (int i = 0; i < c->n_instrs[s]; i++) {
        if (!erg__srv_instr_is_compute(c->instrs[s][i]))
            continue;
        if (erg_kind(c->instrs[s][i]) != (int)order[k].kind)
            return false;
        k++;
    }
    return true;
}

/* ---- arguments ---- */

static erg_status srv_envpipe_check_args(const json_t *args, erg_error *err)
{
    const json_t *v;
    erg_envpipe_type t;
    erg_envpipe_reconfig rc;
    if ((v = json_object_get(args, "type")) &&
        erg_envpipe_type_parse(json_string_value(v), &t, err))
        return erg_error_set(err, ERG_EINVAL,
                             "EnvPipe type must be baseline, uniform or envelope, "
                             "not '%.32s'",
                             json_string_value(v));
    if ((v = json_object_get(args, "reconfigure")) &&
        erg_envpipe_reconfig_parse(json_string_value(v), &rc, err))
        return erg_error_set(err, ERG_EINVAL,
                             "EnvPipe reconfigure must be default, greedy or balanced, not '%.32s'",
                             json_string_value(v));
    if ((v = json_object_get(args, "scheduling")) && strcmp(json_string_value(v), "1f1b") &&
        strcmp(json_string_value(v), "ours"))
        return erg_error_set(err, ERG_EINVAL,
                             "EnvPipe scheduling must be 1f1b or ours, not '%.32s'",
                             json_string_value(v));
    double bp = json_number_value(json_object_get(args, "blocking_power_w"));
    if (!(bp >= 0) || !isfinite(bp))
        return erg_error_set(err, ERG_EINVAL, "EnvPipe blocking_power_w must be >= 0 W, got %g",
                             bp);
    if ((v = json_object_get(args, "threshold_scale")) &&
        !(json_number_value(v) > 0 && isfinite(json_number_value(v))))
        return erg_error_set(err, ERG_EINVAL, "EnvPipe threshold_scale must be > 0, got %g",
                             json_number_value(v));
    if ((v = json_object_get(args, "threshold_s")) &&
        !(json_number_value(v) > 0 && isfinite(json_number_value(v))))
        return erg_error_set(err, ERG_EINVAL, "EnvPipe threshold_s must be > 0, got %g",
                             json_number_value(v));
    static const struct {
        const char *name;
        long lo, hi;
    } ints[] = {{"reconfig_step_mhz", 1, 10000},
                {"finish_limit", 0, 1000000},
                {"warmup_windows", 0, 1000000},
                {"final_windows", -1, 1000000000},
                {"minimum_power_state", 0, 10000000}};
    for (size_t i = 0; i < ERG__ARRAY_LEN(ints); i++)
        if ((v = json_object_get(args, ints[i].name)) &&
            (json_integer_value(v) < ints[i].lo || json_integer_value(v) > ints[i].hi))
            return erg_error_set(err, ERG_EINVAL, "EnvPipe %s must be in [%ld, %ld], got %lld",
                                 ints[i].name, ints[i].lo, ints[i].hi,
                                 (long long)json_integer_value(v));
    erg_status sst = erg__srv_sparse_prof_check_args(args, err);
    if (sst)
        return sst;
    if (json_object_get(args, "gpu") && !json_object_get(args, "gpu_table_path"))
        return erg_error_set(err, ERG_EINVAL,
                             "EnvPipe gpu needs gpu_table_path, the GPU clock table "
                             "(data/gpus.csv) to look it up in");
    if ((v = json_object_get(args, "gpu_table_path"))) {
        erg_gpu_spec *tab = NULL;
        size_t n = 0;
        const erg_gpu_spec *g = NULL;
        erg_status st = erg_gpu_table_read(json_string_value(v), &tab, &n, err);
        if (!st && json_object_get(args, "gpu"))
            st = erg_gpu_table_find(tab, n, json_string_value(json_object_get(args, "gpu")), &g,
                                    err);
        erg_free(tab);
        if (st)
            return st;
    }
    return ERG_OK;
}

/* ---- the profiling phase (a seam: prof_next / prof_observe / prof_build) ---- */

/* The next profiling window's clocks into out[stage][instruction] and, when uniform, that
 * clock (else 0); false when profiling is over. */
static bool prof_next(srv_envpipe *e, int **out, int *clock_mhz)
{
    *clock_mhz = 0;
    if (e->sparse) {
        bool done = false;
        erg__srv_sparse_prof_next(e->sparse, out, &done);
        if (done)
            return false;
        e->prof_k++;
        return true;
    }
    long k = e->prof_k;
    int f;
    if (k < e->warm)
        f = e->ctx->states[0];
    else if (k - e->warm < e->n_clocks)
        f = e->clocks[k - e->warm];
    else
        return false;
    for (int s = 0; s < e->S; s++)
        for (int i = 0; i < e->ctx->n_instrs[s]; i++)
            out[s][i] = f;
    *clock_mhz = f;
    e->prof_k++;
    return true;
}

/* Whether the window just observed was the last profiling window (the sparse profiler
 * says so at its next prof_next instead). */
static bool prof_done(const srv_envpipe *e)
{
    return !e->sparse && e->prof_k >= e->warm + e->n_clocks;
}

/* The results of the profiling window last handed out. */
static erg_status prof_observe(srv_envpipe *e, const srv_result *r, erg_error *err)
{
    if (e->sparse)
        return erg__srv_sparse_prof_observe(e->sparse, r, err);
    long k = e->prof_k - 1 - e->warm;
    if (k < 0)
        return ERG_OK;
    for (int s = 0; s < e->S; s++) {
        int d = drop_of(r[s].n_iters, e->ratio);
        for (int kind = 0; kind < 2; kind++) {
            int code = kind ? SRV_I_BACKWARD : SRV_I_FORWARD;
            double t = erg__srv_series_mean(&r[s].time_bd[code], d);
            double en = erg__srv_series_mean(&r[s].energy_bd[code], d);
            if (isnan(t) || isnan(en))
                return erg_error_set(err, ERG_EINVAL,
                                     "EnvPipe profiling at %d MHz: stage %d reported no %s %s "
                                     "samples (the ranks must report time_breakdown and "
                                     "energy_breakdown)",
                                     e->clocks[k], s, erg__srv_instr_names[code],
                                     isnan(t) ? "time" : "energy");
            e->pt[((size_t)s * e->n_clocks + k) * 2 + kind] = t;
            e->pe[((size_t)s * e->n_clocks + k) * 2 + kind] = en;
        }
    }
    return ERG_OK;
}

/* The measured profile (and its CSV text). */
static erg_status prof_build(srv_envpipe *e, erg_profile **out, erg__buf *csv, erg_error *err)
{
    if (e->sparse) { /* the predicted full profile, with its `source` column */
        char *text = NULL;
        size_t len = 0;
        erg_status st = erg__srv_sparse_prof_csv(e->sparse, &text, &len, err);
        if (!st && erg__buf_append(csv, text, len))
            st = oom(err);
        erg_free(text);
        if (!st)
            st = erg__srv_sparse_prof_profile(e->sparse, out, err);
        return st;
    }
    erg_profile *p = NULL;
    erg_status st = erg_profile_new(&p, err);
    if (!st && erg__buf_printf(csv, "stage,instruction,frequency,time,energy\n"))
        st = oom(err);
    char a[40], b[40];
    for (int s = 0; !st && s < e->S; s++)
        for (int k = 0; !st && k < e->n_clocks; k++)
            for (int kind = 0; !st && kind < 2; kind++) {
                erg_profile_point pt = {e->clocks[k],
                                        e->pt[((size_t)s * e->n_clocks + k) * 2 + kind],
                                        e->pe[((size_t)s * e->n_clocks + k) * 2 + kind]};
                st = erg_profile_add(p, s, (erg_instr_kind)kind, &pt, err);
                if (!st &&
                    erg__buf_printf(csv, "%d,%s,%d,%s,%s\n", s, kind ? "backward" : "forward",
                                    pt.freq_mhz, erg__fmt_double_py(pt.time_s, a, sizeof a),
                                    erg__fmt_double_py(pt.energy_j, b, sizeof b)))
                    st = oom(err);
            }
    if (st) {
        erg_profile_free(p);
        return st;
    }
    *out = p;
    return ERG_OK;
}

/* ---- construction ---- */

static void srv_envpipe_free(srv_envpipe *e)
{
    if (!e)
        return;
    erg__srv_sparse_prof_free(e->sparse);
    erg__free(e->clocks);
    erg__free(e->pt);
    erg__free(e->pe);
    erg_plan_free(e->plan);
    erg__free(e->path);
    erg__free(e->wait);
    erg__buf_free(&e->log);
    erg__buf_free(&e->csv);
    erg__free(e);
}

/* The registered orders: every stage runs M forwards and M backwards (no other compute
 * kind) in the 1F1B order (scheduling 1f1b) or an EnvPipe order with some r_s (ours). */
static erg_status check_registered(srv_envpipe *e, erg_error *err)
{
    const srv_sched_ctx *c = e->ctx;
    int S = e->S, M = 0;
    for (int s = 0; s < S; s++) {
        int nf = 0, nb = 0, lead = 0;
        bool seen_b = false;
        for (int i = 0; i < c->n_instrs[s]; i++) {
            int code = c->instrs[s][i];
            if (!erg__srv_instr_is_compute(code))
                continue;
            if (erg_kind(code) < 0)
                return erg_error_set(err, ERG_EINVAL,
                                     "EnvPipe runs forward and backward instructions only "
                                     "(1f1b or ours); stage %d registered %s",
                                     s, erg__srv_instr_names[code]);
            if (code == SRV_I_FORWARD) {
                nf++;
                if (!seen_b)
                    lead++;
            } else {
                nb++;
                seen_b = true;
            }
        }
        if (s == 0)
            M = nf;
        if (nf != M || nb != M || M < 1)
            return erg_error_set(err, ERG_EINVAL,
                                 "EnvPipe: stage %d registered %d forwards and %d backwards; "
                                 "every stage needs M of each (stage 0 has %d)",
                                 s, nf, nb, M);
        int base = ERG__MIN(M, S - s);
        e->reg_r[s] = lead > base ? lead - base : 0;
    }
    e->M = M;
    erg_schedule sc = {.kind = e->opts.schedule};
    if (sc.kind == ERG_SCHED_ENVPIPE)
        memcpy(sc.extra_warmup, e->reg_r, sizeof e->reg_r);
    erg_instr *ord = erg__calloc((size_t)2 * M, sizeof *ord);
    if (!ord)
        return oom(err);
    erg_status st = ERG_OK;
    for (int s = 0; !st && s < S; s++) {
        if ((st = erg_schedule_stage_order(&sc, S, M, s, ord, err)))
            break;
        if (!order_matches(c, s, ord)) {
            char r[256];
            fmt_r(e->reg_r, S, r, sizeof r);
            st = erg_error_set(err, ERG_EINVAL,
                               "EnvPipe scheduling %s: stage %d's registered instruction order "
                               "is not the %s order%s (its ranks must run the order the plan "
                               "gives clocks to)",
                               sc.kind == ERG_SCHED_ENVPIPE ? "ours" : "1f1b", s,
                               sc.kind == ERG_SCHED_ENVPIPE ? "EnvPipe 'ours'" : "1F1B",
                               sc.kind == ERG_SCHED_ENVPIPE ? " for any extra warm-up r" : "");
        }
    }
    erg__free(ord);
    return st;
}

static erg_status srv_envpipe_new(const json_t *args, const srv_sched_ctx *ctx, srv_envpipe **out,
                                  erg_error *err)
{
    *out = NULL;
    erg_status st = srv_envpipe_check_args(args, err);
    if (st)
        return st;
    if (ctx->mode != SRV_MODE_FREQUENCY)
        return erg_error_set(err, ERG_EINVAL,
                             "EnvPipe sets SM clocks: the job must run in "
                             "frequency mode");
    if (ctx->num_stages > ERG_SCHED_MAX_STAGES)
        return erg_error_set(err, ERG_EINVAL, "EnvPipe plans at most %d stages (the job has %d)",
                             ERG_SCHED_MAX_STAGES, ctx->num_stages);
    srv_envpipe *e = erg__calloc(1, sizeof *e);
    if (!e)
        return oom(err);
    e->ctx = ctx;
    e->S = ctx->num_stages;
    erg_envpipe_opts_init(&e->opts);
    const char *ts = json_string_value(json_object_get(args, "type"));
    const char *rs = json_string_value(json_object_get(args, "reconfigure"));
    const char *ss = json_string_value(json_object_get(args, "scheduling"));
    if (ts)
        erg_envpipe_type_parse(ts, &e->opts.type, err);
    e->opts.reconfig = ERG_RECONFIG_BALANCED;
    if (rs)
        erg_envpipe_reconfig_parse(rs, &e->opts.reconfig, err);
    e->opts.schedule = ss && !strcmp(ss, "ours") ? ERG_SCHED_ENVPIPE : ERG_SCHED_1F1B;
    e->opts.blocking_power_w = json_number_value(json_object_get(args, "blocking_power_w"));
    const json_t *v;
    e->opts.threshold_scale =
        (v = json_object_get(args, "threshold_scale")) ? json_number_value(v) : 4.0;
    e->opts.finish_limit =
        (v = json_object_get(args, "finish_limit")) ? (int)json_integer_value(v) : 10;
    e->thr_arg = (v = json_object_get(args, "threshold_s")) ? json_number_value(v) : 0;
    e->warm = (v = json_object_get(args, "warmup_windows")) ? (int)json_integer_value(v) : 2;
    e->ratio = (v = json_object_get(args, "warmup_step_ratio")) ? json_number_value(v) : 0.1;
    e->final_windows =
        (v = json_object_get(args, "final_windows")) ? (long)json_integer_value(v) : -1;
    int min_state = (int)json_integer_value(json_object_get(args, "minimum_power_state"));
    if ((v = json_object_get(args, "gpu_table_path")) && json_object_get(args, "gpu")) {
        erg_gpu_spec *tab = NULL;
        size_t n = 0;
        const erg_gpu_spec *g = NULL;
        st = erg_gpu_table_read(json_string_value(v), &tab, &n, err);
        if (!st)
            st = erg_gpu_table_find(tab, n, json_string_value(json_object_get(args, "gpu")), &g,
                                    err);
        if (!st) {
            e->gpu = *g;
            e->have_gpu = true;
            e->opts.gpu = &e->gpu;
        }
        erg_free(tab);
        if (st)
            goto fail;
    }
    int gran = e->have_gpu ? e->gpu.reconfig_step_mhz : 30;
    e->step_mhz = (v = json_object_get(args, "reconfig_step_mhz")) ? (int)json_integer_value(v)
                  : e->opts.reconfig == ERG_RECONFIG_GREEDY        ? 3 * gran
                                                                   : gran;
    if ((st = check_registered(e, err)))
        goto fail;
    if (e->opts.schedule == ERG_SCHED_ENVPIPE && e->M < e->S) {
        st = erg_error_set(err, ERG_EINVAL,
                           "EnvPipe scheduling ours needs at least as many microbatches as "
                           "stages (M=%d < S=%d)",
                           e->M, e->S);
        goto fail;
    }
    size_t n = (size_t)2 * e->S * e->M;
    e->path = erg__calloc(n, sizeof(int));
    e->wait = erg__calloc(n, sizeof(double));
    e->clocks = erg__calloc((size_t)ctx->n_states, sizeof(int));
    if (!e->path || !e->wait || !e->clocks)
        goto nomem;
    if (e->opts.type == ERG_ENVPIPE_BASELINE) {
        e->warm = 0; /* no profiling (EnvPipe's knobs) */
    } else {
        for (int i = 0; i < ctx->n_states; i++)
            if (ctx->states[i] >= min_state && passes_filter(e, ctx->states[i]))
                e->clocks[e->n_clocks++] = ctx->states[i];
        if (e->n_clocks == 0) {
            st = erg_error_set(err, ERG_EINVAL,
                               "EnvPipe: none of the ranks' %d clocks (%d..%d MHz) passes "
                               "minimum_power_state %d%s%s",
                               ctx->n_states, ctx->states[ctx->n_states - 1], ctx->states[0],
                               min_state, e->have_gpu ? " and the filter of GPU " : "",
                               e->have_gpu ? e->gpu.name : "");
            goto fail;
        }
        e->pt = erg__calloc((size_t)e->S * e->n_clocks * 2, sizeof(double));
        e->pe = erg__calloc((size_t)e->S * e->n_clocks * 2, sizeof(double));
        if (!e->pt || !e->pe)
            goto nomem;
        if (json_is_true(json_object_get(args, "sparse")) &&
            (st = erg__srv_sparse_prof_new(ctx, args, min_state, e->ratio, false, &e->sparse, err)))
            goto fail;
    }
    if (erg__buf_printf(&e->csv, "window,phase,iter_time_s,iter_energy_j,clock_mhz,threshold_s,"
                                 "changed,no_change,path\n") ||
        erg__buf_printf(&e->log,
                        "EnvPipe type %s scheduling %s reconfigure %s step %d MHz "
                        "threshold_scale %g finish_limit %d; S=%d M=%d; profiling %d "
                        "warm-up + %d clock windows\n",
                        erg_envpipe_type_name(e->opts.type),
                        e->opts.schedule == ERG_SCHED_ENVPIPE ? "ours" : "1f1b",
                        erg_envpipe_reconfig_name(e->opts.reconfig), e->step_mhz,
                        e->opts.threshold_scale, e->opts.finish_limit, e->S, e->M, e->warm,
                        e->n_clocks))
        goto nomem;
    e->phase = EP_PROFILE;
    *out = e;
    return ERG_OK;
nomem:
    st = oom(err);
fail:
    srv_envpipe_free(e);
    return st;
}

/* ---- planning ---- */

static erg_status write_plan(srv_envpipe *e, erg_error *err)
{
    char *text = NULL;
    erg_status st = erg_plan_format_json(e->plan, &text, err);
    if (!st)
        st = write_file(e, "envpipe-plan.json", text, strlen(text), err);
    erg_free(text);
    return st;
}

static erg_status write_logs(srv_envpipe *e, erg_error *err)
{
    erg_status st = write_file(e, "envpipe.log", e->log.data, e->log.len, err);
    if (!st)
        st = write_file(e, "envpipe-windows.csv", e->csv.data, e->csv.len, err);
    return st;
}

static void enter_final(srv_envpipe *e)
{
    e->phase = EP_FINAL;
    e->final_left = e->final_windows;
}

/* Profiling is over (or there was none): the initial plan. */
static erg_status plan_initial(srv_envpipe *e, erg_error *err)
{
    erg_status st = ERG_OK;
    int S = e->S, M = e->M;
    erg_envpipe_info info;
    memset(&info, 0, sizeof info);
    if (e->opts.type == ERG_ENVPIPE_BASELINE) {
        erg_schedule sc = {.kind = e->opts.schedule};
        if ((st = erg_plan_new(&sc, S, M, &e->plan, err)))
            return st;
        int top = 0;
        for (int i = 0; i < e->ctx->n_states && !top; i++)
            if (passes_filter(e, e->ctx->states[i]))
                top = e->ctx->states[i];
        if (!top)
            top = e->ctx->states[0];
        erg_plan_fill(e->plan, top);
        erg_plan_set_method(e->plan, "envpipe", err);
        for (int s = 0; s < S; s++)
            e->max_mhz[s] = top;
    } else {
        erg_profile *prof = NULL;
        erg__buf csv = {0};
        st = prof_build(e, &prof, &csv, err);
        if (!st)
            st = write_file(e, "envpipe-profile.csv", csv.data, csv.len, err);
        erg__buf_free(&csv);
        erg_envpipe_opts o = e->opts;
        o.reconfig = ERG_RECONFIG_DEFAULT; /* the initial plan; reconfiguration is measured */
        if (!st)
            st = erg_plan_envpipe(prof, S, M, &o, &e->plan, &info, err);
        erg_profile_free(prof);
        if (st) {
            char why[ERG_ERROR_MSG_LEN];
            snprintf(why, sizeof why, "%s", err->msg);
            return erg_error_set(err, st, "EnvPipe planning on the measured profile: %s", why);
        }
        memcpy(e->max_mhz, info.max_mhz, sizeof e->max_mhz);
    }
    /* The ranks must run the plan's order (fixed when they registered). */
    erg_schedule sc = erg_plan_schedule(e->plan);
    erg_instr *ord = erg__calloc((size_t)2 * M, sizeof *ord);
    if (!ord)
        return oom(err);
    for (int s = 0; !st && s < S; s++) {
        if ((st = erg_schedule_stage_order(&sc, S, M, s, ord, err)))
            break;
        if (!order_matches(e->ctx, s, ord)) {
            char want[256], got[256];
            fmt_r(sc.extra_warmup, S, want, sizeof want);
            fmt_r(e->reg_r, S, got, sizeof got);
            st = erg_error_set(err, ERG_EINVAL,
                               "EnvPipe scheduling ours: the plan needs the extra warm-up "
                               "forwards r = [%s] (from the profile), but the ranks registered "
                               "the order of r = [%s] (stage %d differs); the order is fixed "
                               "when the ranks register, so run them with the 'ours' order of "
                               "r = [%s] (train.py --schedule ours --extra-warmup %s) or use "
                               "scheduling 1f1b",
                               want, got, s, want, want);
        }
    }
    erg__free(ord);
    if (st)
        return st;
    char r[256], mx[256], opt[256];
    fmt_r(sc.extra_warmup, S, r, sizeof r);
    fmt_r(e->max_mhz, S, mx, sizeof mx);
    fmt_r(info.optimal_mhz, S, opt, sizeof opt);
    if (erg__buf_printf(&e->log,
                        "plan: max clocks [%s] MHz, energy-valley clocks [%s] MHz, "
                        "extra warm-up r = [%s]\n",
                        mx, opt, r))
        return oom(err);
    if (e->opts.reconfig == ERG_RECONFIG_DEFAULT) {
        enter_final(e);
        if (erg__buf_printf(&e->log, "terminated: reconfigure default (no reconfiguration); "
                                     "serving the initial plan\n"))
            return oom(err);
    } else {
        e->phase = EP_RECONF;
    }
    if ((st = write_plan(e, err)))
        return st;
    return write_logs(e, err);
}

/* ---- windows ---- */

static erg_status expand_plan(srv_envpipe *e, int **out, erg_error *err)
{
    for (int s = 0; s < e->S; s++) {
        erg_status st =
            erg__srv_expand(erg_plan_stage_freqs_const(e->plan, s), erg_plan_stage_len(e->plan, s),
                            e->ctx->instrs[s], e->ctx->n_instrs[s], out[s], err);
        if (st)
            return st;
    }
    return ERG_OK;
}

static erg_status srv_envpipe_next(srv_envpipe *e, int **out, bool *done, erg_error *err)
{
    *done = false;
    if (e->phase == EP_PROFILE) {
        if (!prof_next(e, out, &e->prof_clock)) {
            /* no (more) profiling windows: baseline, or the sparse profiler is done */
            erg_status st = plan_initial(e, err);
            if (st)
                return st;
            return srv_envpipe_next(e, out, done, err);
        }
        e->window++;
        return ERG_OK;
    }
    if (e->phase == EP_FINAL && e->final_left == 0)
        e->phase = EP_DONE;
    if (e->phase == EP_DONE) {
        *done = true;
        return ERG_OK;
    }
    if (e->phase == EP_FINAL && e->final_left > 0)
        e->final_left--;
    erg_status st = expand_plan(e, out, err);
    if (!st)
        e->window++;
    return st;
}

/* Mean iteration time (max over stages) and energy (sum) of a window after the drop. */
static void window_metrics(const srv_envpipe *e, const srv_result *r, double *t, double *en)
{
    *t = 0;
    *en = 0;
    for (int s = 0; s < e->S; s++) {
        int d = drop_of(r[s].n_iters, e->ratio);
        *t = ERG__MAX(*t, erg__srv_mean(r[s].iter_time_s, d, r[s].n_iters));
        *en += erg__srv_mean(r[s].iter_energy_j, d, r[s].n_iters);
    }
}

/* Each instruction's mean receive wait over the window (plan ids stage*2M + position). */
static erg_status window_waits(srv_envpipe *e, const srv_result *r, erg_error *err)
{
    const srv_sched_ctx *c = e->ctx;
    int S = e->S, M = e->M;
    for (int s = 0; s < S; s++) {
        int d = drop_of(r[s].n_iters, e->ratio);
        int occ[2] = {0, 0}, pos = 0;
        for (int i = 0; i < c->n_instrs[s]; i++) {
            int kind = erg_kind(c->instrs[s][i]);
            if (kind < 0)
                continue;
            int k = occ[kind]++;
            double *w = &e->wait[s * 2 * M + pos++];
            *w = 0;
            bool has_recv = (kind == ERG_FORWARD && s > 0) || (kind == ERG_BACKWARD && s < S - 1);
            if (!has_recv)
                continue;
            const srv_series *ser = &r[s].wait_bd[kind ? SRV_I_BACKWARD : SRV_I_FORWARD];
            double sum = 0;
            int cnt = 0;
            for (int it = d; it < ser->n_iters && it < r[s].n_iters; it++)
                if (k < ser->n_occ[it]) {
                    sum += ser->vals[it][k];
                    cnt++;
                }
            if (!cnt)
                return erg_error_set(err, ERG_EINVAL,
                                     "EnvPipe reconfiguration, window %ld: stage %d reported no "
                                     "receive wait for its %s of microbatch %d (occurrence %d); "
                                     "the ranks must report wait_breakdown (docs/http-api.md)",
                                     e->window - 1, s, kind ? "backward" : "forward", k, k);
            *w = sum / cnt;
        }
    }
    return ERG_OK;
}

/* Stage, kind and microbatch of plan id stage*2M + position (the registered order equals
 * the plan's; the k-th forward of a stage is microbatch k). */
static void id_instr(const srv_envpipe *e, int id, int *stage, int *kind, int *mb)
{
    int s = id / (2 * e->M), pos = id % (2 * e->M), cnt[2] = {0, 0}, p = 0;
    *stage = s;
    *kind = 0;
    *mb = 0;
    for (int j = 0; j < e->ctx->n_instrs[s]; j++) {
        int k = erg_kind(e->ctx->instrs[s][j]);
        if (k < 0)
            continue;
        if (p++ == pos) {
            *kind = k;
            *mb = cnt[k];
            return;
        }
        cnt[k]++;
    }
}

static bool append_path(const srv_envpipe *e, erg__buf *b)
{
    for (int i = 0; i < e->path_len; i++) {
        int s, kind, mb;
        id_instr(e, e->path[i], &s, &kind, &mb);
        if (erg__buf_printf(b, "%sS%d%c%d", i ? " " : "", s, kind ? 'B' : 'F', mb))
            return true;
    }
    return false;
}

/* Is every unit of the critical path in the outer envelope (EnvPipe's test)? */
static bool path_in_envelope(const srv_envpipe *e)
{
    for (int i = 0; i < e->path_len; i++) {
        int s, kind, mb;
        id_instr(e, e->path[i], &s, &kind, &mb);
        if (!(s == e->S - 1 || (kind == ERG_FORWARD && mb == 0) ||
              (kind == ERG_BACKWARD && mb == e->M - 1)))
            return false;
    }
    return true;
}

/* The smallest clock the ranks support that is >= f (f itself when none is). */
static int snap_up(const srv_sched_ctx *c, int f)
{
    int best = 0;
    for (int i = 0; i < c->n_states; i++)
        if (c->states[i] >= f && (!best || c->states[i] < best))
            best = c->states[i];
    return best ? best : f;
}

static erg_status reconf_observe(srv_envpipe *e, const srv_result *r, erg_error *err)
{
    int S = e->S, M = e->M;
    erg_status st = window_waits(e, r, err);
    if (st)
        return st;
    e->reconf_windows++;
    if (!(e->thr > 0)) {
        if (e->thr_arg > 0) {
            e->thr = e->thr_arg;
        } else { /* computed once, from the first window (EnvPipe's threshold) */
            double mn = INFINITY;
            for (int k = 0; k < 2 * M; k++) {
                double w = e->wait[(S - 1) * 2 * M + k];
                if (w > 0 && w < mn)
                    mn = w;
            }
            if (isfinite(mn))
                e->thr = mn * e->opts.threshold_scale;
        }
        if (e->thr > 0 && erg__buf_printf(&e->log, "threshold %.3f ms\n", e->thr * 1e3))
            return oom(err);
    }
    bool changed = false;
    e->path_len = 0;
    if (e->thr > 0) {
        int n = 2 * S * M;
        int *prev = erg__calloc((size_t)n, sizeof(int));
        if (!prev)
            return oom(err);
        for (int s = 0; s < S; s++)
            memcpy(prev + s * 2 * M, erg_plan_stage_freqs_const(e->plan, s),
                   (size_t)2 * M * sizeof(int));
        st = erg_envpipe_reconfigure_step(e->plan, e->wait, e->thr, e->opts.threshold_scale,
                                          e->opts.reconfig, e->step_mhz, e->max_mhz, e->path,
                                          &e->path_len, &changed, err);
        /* a raised clock the ranks do not support goes up to the next one they do */
        for (int s = 0; !st && s < S; s++) {
            int *f = erg_plan_stage_freqs(e->plan, s);
            for (int k = 0; k < 2 * M; k++)
                if (f[k] != prev[s * 2 * M + k] && !erg__srv_state_supported(e->ctx, f[k]))
                    f[k] = snap_up(e->ctx, f[k]);
        }
        erg__free(prev);
        if (st)
            return st;
    } else if (erg__buf_printf(&e->log, "no threshold yet: the last stage measured no non-zero "
                                        "wait\n")) {
        return oom(err);
    }
    e->nochange = changed ? 0 : e->nochange + 1;
    double t, en;
    window_metrics(e, r, &t, &en);
    char *grid = NULL;
    if ((st = erg_envpipe_format_grid(e->plan, e->wait, e->path, e->path_len, &grid, err)))
        return st;
    char a[40], b[40], c[40];
    bool bad =
        erg__buf_printf(&e->log, "window %ld (reconfiguration %ld): %s, no-change %d\n%s",
                        e->window - 1, e->reconf_windows, changed ? "changed" : "no change",
                        e->nochange, grid) ||
        erg__buf_printf(&e->csv, "%ld,reconfigure,%s,%s,,%s,%d,%d,", e->window - 1,
                        erg__fmt_double_py(t, a, sizeof a), erg__fmt_double_py(en, b, sizeof b),
                        erg__fmt_double_py(e->thr, c, sizeof c), changed ? 1 : 0, e->nochange) ||
        append_path(e, &e->csv) || erg__buf_append(&e->csv, "\n", 1);
    erg_free(grid);
    if (bad)
        return oom(err);
    if (e->nochange > e->opts.finish_limit) {
        bool env = path_in_envelope(e);
        enter_final(e);
        if (erg__buf_printf(&e->log,
                            "terminated after %ld reconfiguration windows: %d consecutive "
                            "windows without a change (finish_limit %d); %s\n",
                            e->reconf_windows, e->nochange, e->opts.finish_limit,
                            !(e->thr > 0) ? "no threshold: the last stage never measured a "
                                            "non-zero wait (give threshold_s)"
                            : env         ? "the critical path is the outer envelope"
                                          : "stuck: the critical path leaves the envelope but "
                                            "nothing on it can be raised"))
            return oom(err);
    }
    if (changed && (st = write_plan(e, err)))
        return st;
    return write_logs(e, err);
}

static erg_status srv_envpipe_observe(srv_envpipe *e, const srv_result *per_stage, erg_error *err)
{
    char a[40], b[40];
    double t, en;
    switch (e->phase) {
    case EP_PROFILE: {
        erg_status st = prof_observe(e, per_stage, err);
        if (st)
            return st;
        window_metrics(e, per_stage, &t, &en);
        long k = e->prof_k - 1;
        char f[16] = "";
        if (e->prof_clock)
            snprintf(f, sizeof f, "%d", e->prof_clock);
        if (erg__buf_printf(&e->csv, "%ld,%s,%s,%s,%s,,,,\n", e->window - 1,
                            !e->sparse && k < e->warm ? "warmup" : "profile",
                            erg__fmt_double_py(t, a, sizeof a), erg__fmt_double_py(en, b, sizeof b),
                            f))
            return oom(err);
        if (prof_done(e))
            return plan_initial(e, err);
        return write_logs(e, err);
    }
    case EP_RECONF:
        return reconf_observe(e, per_stage, err);
    case EP_FINAL:
    case EP_DONE:
        /* the first FINAL_ROWS final windows get a row (the final plan may run for the
         * rest of the training: the files stay bounded) */
        if (e->final_rows >= FINAL_ROWS)
            return ERG_OK;
        e->final_rows++;
        window_metrics(e, per_stage, &t, &en);
        if (erg__buf_printf(&e->csv, "%ld,final,%s,%s,,,,,\n", e->window - 1,
                            erg__fmt_double_py(t, a, sizeof a),
                            erg__fmt_double_py(en, b, sizeof b)))
            return oom(err);
        return write_logs(e, err);
    }
    return ERG_OK;
}

/* ---- the ops sched.c dispatches to ---- */

static const srv_sched_arg envpipe_args[] = {
    {"type", 's', false},
    {"scheduling", 's', false},
    {"reconfigure", 's', false},
    {"blocking_power_w", 'd', true},
    {"gpu", 's', false},
    {"gpu_table_path", 's', false},
    {"reconfig_step_mhz", 'i', false},
    {"threshold_scale", 'd', false},
    {"threshold_s", 'd', false},
    {"finish_limit", 'i', false},
    {"warmup_windows", 'i', false},
    {"warmup_step_ratio", 'd', false},
    {"minimum_power_state", 'i', false},
    {"final_windows", 'i', false},
    {"sparse", 'b', false},
    {"budget", 'i', false},
    {"patience", 'i', false},
    {"rel_ci", 'd', false},
    {"max_windows_per_clock", 'i', false},
    {"time_noise", 'd', false},
};

static erg_status envpipe_init(srv_sched *s, const json_t *args, erg_error *err)
{
    srv_envpipe *e = NULL;
    erg_status st = srv_envpipe_new(args, s->ctx, &e, err);
    s->state = e;
    return st;
}

static erg_status envpipe_next(srv_sched *s, bool *done, erg_error *err)
{
    return srv_envpipe_next(s->state, s->out, done, err);
}

static erg_status envpipe_observe(srv_sched *s, const srv_result *per_stage, erg_error *err)
{
    return srv_envpipe_observe(s->state, per_stage, err);
}

static void envpipe_free(void *state)
{
    srv_envpipe_free(state);
}

const srv_sched_ops erg__srv_sched_envpipe = {
    .args = envpipe_args,
    .n_args = ERG__ARRAY_LEN(envpipe_args),
    .check = srv_envpipe_check_args,
    .init = envpipe_init,
    .next = envpipe_next,
    .observe = envpipe_observe,
    .free = envpipe_free,
};
