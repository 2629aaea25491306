/* sched_profiler.c: InstructionProfiler, Perseus's and Zeus PFO's: two warm-up windows at the
 * top state, then one window per supported state down to minimum_power_state (Zeus:
 * minimum_frequency), each window's mean time and energy per (stage, instruction) appended to
 * the profile CSV of the job's dump directory. With "sparse": true the sparse profiler
 * (sched_sparse.c) picks each window's clocks and the CSV is its predicted full profile. */
#include "server/sched_ops.h"

#include "ergon/pipeline.h"

#include <math.h>
#include <string.h>

typedef struct profiler {
    double ratio;
    bool energy_from_iters; /* no energy samples: time x mean iteration power */
    int min_state;
    erg__buf csv;
    srv_sparse_prof *sparse; /* sparse mode */
} profiler;

static const srv_sched_arg profiler_args[] = {
    {"warmup_step_ratio", 'd', false},
    {"minimum_power_state", 'i', false},
    {"energy_from_iterations", 'b', false},
    {"sparse", 'b', false},
    {"budget", 'i', false},
    {"patience", 'i', false},
    {"rel_ci", 'd', false},
    {"max_windows_per_clock", 'i', false},
    {"time_noise", 'd', false},
    /* For Zeus clients of the same server that send no pipe_schedule (wire_zeus.c);
     * Perseus clients send theirs. */
    {"num_microbatches", 'i', false},
    {"schedule", 's', false},
};

static const srv_sched_arg zeus_profiler_args[] = {
    {"warmup_step_ratio", 'd', false},
    {"minimum_frequency", 'i', false},
    /* ergon's: each stage's instruction names for a client that sends no pipe_schedule
     * (Zeus 0.16's RankInfo has none), from this schedule of pp_degree stages. */
    {"num_microbatches", 'i', false},
    {"schedule", 's', false},
};

/* num_microbatches and schedule, which both variants take. */
static erg_status zeus_profiler_check(const json_t *args, erg_error *err)
{
    erg_schedule_kind sk;
    erg_error se;
    if (json_object_get(args, "num_microbatches") && srv_arg_i(args, "num_microbatches", 0) < 1)
        return erg_error_set(err, ERG_EINVAL, "scheduler_args: num_microbatches must be >= 1");
    if (json_object_get(args, "schedule") &&
        erg_schedule_parse(srv_arg_s(args, "schedule", ""), &sk, &se))
        return erg_error_set(err, ERG_EINVAL, "scheduler_args: schedule: %s", se.msg);
    return ERG_OK;
}

static erg_status profiler_check(const json_t *args, erg_error *err)
{
    erg_status st = zeus_profiler_check(args, err);
    return st ? st : erg__srv_sparse_prof_check_args(args, err);
}

static void profiler_free(void *state)
{
    profiler *p = state;
    erg__buf_free(&p->csv);
    erg__srv_sparse_prof_free(p->sparse);
    erg__free(p);
}

static erg_status profiler_init(srv_sched *s, const json_t *args, erg_error *err)
{
    const srv_sched_ctx *ctx = s->ctx;
    profiler *p = erg__calloc(1, sizeof *p);
    if (!p)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    s->state = p;
    p->ratio = srv_arg_d(args, "warmup_step_ratio", 0.1);
    p->min_state = (int)srv_arg_i(args, "minimum_power_state", 850);
    p->energy_from_iters = json_is_true(json_object_get(args, "energy_from_iterations"));
    if (!ctx->job_dir)
        return erg_error_set(err, ERG_EINVAL,
                             "InstructionProfiler writes its profile into the dump directory: "
                             "enable dumping");
    if (json_is_true(json_object_get(args, "sparse")))
        return erg__srv_sparse_prof_new(ctx, args, p->min_state, p->ratio, p->energy_from_iters,
                                        &p->sparse, err);
    if (erg__buf_printf(&p->csv, "stage,instruction,%s,time,energy\n",
                        erg__srv_mode_name(ctx->mode)))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    return ERG_OK;
}

/* The same windows and CSV with Zeus's argument names and header. */
static erg_status zeus_profiler_init(srv_sched *s, const json_t *args, erg_error *err)
{
    profiler *p = erg__calloc(1, sizeof *p);
    if (!p)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    s->state = p;
    p->ratio = srv_arg_d(args, "warmup_step_ratio", 0.1);
    p->min_state = (int)srv_arg_i(args, "minimum_frequency", 850);
    if (!s->ctx->job_dir)
        return erg_error_set(err, ERG_EINVAL,
                             "InstructionProfiler requires dump_data to be enabled.");
    if (erg__buf_printf(&p->csv, "stage,instruction,frequency,time,energy\n"))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    return ERG_OK;
}

static erg_status profiler_next(srv_sched *s, bool *done, erg_error *err)
{
    (void)err;
    const srv_sched_ctx *c = s->ctx;
    const profiler *p = s->state;
    long k = s->step;
    if (p->sparse)
        erg__srv_sparse_prof_next(p->sparse, s->out, done);
    else if (k < 2)
        erg__srv_sched_uniform(s, srv_sched_max_state(s));
    else if (k - 2 < c->n_states && c->states[k - 2] >= p->min_state)
        erg__srv_sched_uniform(s, c->states[k - 2]);
    else
        *done = true;
    return ERG_OK;
}

/* Sparse mode: observe, then rewrite the predicted profile (once every
 * (stage, instruction) has its maximum clock) and the summary. */
static erg_status sparse_observe(srv_sched *s, const srv_result *r, erg_error *err)
{
    profiler *p = s->state;
    erg_status st = erg__srv_sparse_prof_observe(p->sparse, r, err);
    if (st || !erg__srv_sparse_prof_ready(p->sparse))
        return st;
    char *text = NULL;
    size_t len = 0;
    erg_error e2;
    if ((st = erg__srv_sparse_prof_csv(p->sparse, &text, &len, &e2)))
        return erg_error_set(err, st, "sparse profile: %s", e2.msg);
    st = erg__srv_sched_write_file(s->ctx, s->ctx->profile_csv_name, text, len, err);
    erg_free(text);
    if (st)
        return st;
    erg__buf sum = {0};
    if (erg__srv_sparse_prof_summary(p->sparse, &sum) || erg__buf_append(&sum, "\n", 1)) {
        erg__buf_free(&sum);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    st = erg__srv_sched_write_file(s->ctx, "InstructionProfiler-sparse.json", sum.data, sum.len,
                                   err);
    erg__buf_free(&sum);
    return st;
}

static erg_status profiler_observe(srv_sched *s, const srv_result *r, erg_error *err)
{
    profiler *p = s->state;
    if (p->sparse)
        return sparse_observe(s, r, err);
    long k = s->step - 1;
    if (k < 2)
        return ERG_OK;
    int state = s->ctx->states[k - 2];
    char a[40], b[40];
    for (int stg = 0; stg < s->ctx->num_stages; stg++) {
        int d = erg__srv_drop_of(r[stg].n_iters, p->ratio);
        /* forward and backward rows (Perseus's CSV), then backward_input and
         * backward_weight rows for a stage whose pipe_schedule has them (a
         * zero-bubble schedule; ergon's profile CSV reads them). */
        static const int kinds[] = {SRV_I_FORWARD, SRV_I_BACKWARD, SRV_I_BACKWARD_INPUT,
                                    SRV_I_BACKWARD_WEIGHT};
        for (int ki = 0; ki < 4; ki++) {
            int kind = kinds[ki];
            if (ki >= 2) {
                bool has = false;
                for (int i = 0; i < s->ctx->n_instrs[stg]; i++)
                    has = has || s->ctx->instrs[stg][i] == kind;
                if (!has)
                    continue;
            }
            double t = erg__srv_series_mean(&r[stg].time_bd[kind], d);
            double e = erg__srv_series_mean(&r[stg].energy_bd[kind], d);
            if (isnan(e) && p->energy_from_iters && !isnan(t)) {
                /* Approximation: the instruction draws the iteration's mean
                 * power (it includes communication and idle time). */
                double pw = erg__srv_iter_power(&r[stg], d);
                if (!isnan(pw))
                    e = t * pw;
            }
            /* pandas' to_csv writes NaN (the mean of no samples) as an
             * empty field, as Perseus's CSV has it. */
            if (erg__buf_printf(&p->csv, "%d,%s,%d,%s,%s\n", stg, erg__srv_instr_names[kind], state,
                                isnan(t) ? "" : erg__fmt_double_py(t, a, sizeof a),
                                isnan(e) ? "" : erg__fmt_double_py(e, b, sizeof b)))
                return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
    }
    return erg__srv_sched_write_file(s->ctx, s->ctx->profile_csv_name, p->csv.data, p->csv.len,
                                     err);
}

const srv_sched_ops erg__srv_sched_profiler = {
    .args = profiler_args,
    .n_args = ERG__ARRAY_LEN(profiler_args),
    .check = profiler_check,
    .init = profiler_init,
    .next = profiler_next,
    .observe = profiler_observe,
    .free = profiler_free,
};

const srv_sched_ops erg__srv_sched_zeus_profiler = {
    .args = zeus_profiler_args,
    .n_args = ERG__ARRAY_LEN(zeus_profiler_args),
    .check = zeus_profiler_check,
    .init = zeus_profiler_init,
    .next = profiler_next,
    .observe = profiler_observe,
    .free = profiler_free,
};
