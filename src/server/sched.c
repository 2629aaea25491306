/* sched.c: the server's schedulers (AllMax, TwoFrequencies, InstructionProfiler, PointSolution, the Zeus baselines, Frontier) as state machines over pipeline stages. */
#include "server/server_internal.h"
#include "server/sched_envpipe.h"

#include "ergon/emulate.h"
#include "ergon/planner.h"

#include <dirent.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

/*
 * Every scheduler works on STAGES, never on ranks: the server groups a job's
 * ranks by pp_rank (the "3D wrapper" of the reference), hands one aggregated
 * result per stage to srv_sched_observe (max of times, sum of energies) and
 * copies stage s's schedule to every rank with pp_rank == s. For pure
 * pipeline parallelism a stage is exactly one rank, so this is the
 * reference's plain behaviour.
 *
 * The reference's generator schedulers become explicit state machines: each
 * srv_sched_next call returns the schedule of the next window (or "done",
 * the [profiling-done] ending), each srv_sched_observe receives that
 * window's results. Schedulers are deterministic functions of their
 * arguments and the results they observed, which is what makes crash
 * recovery a replay (see jobs.h).
 */

typedef enum {
    K_ALLMAX,
    K_TWOFREQ,
    K_PROFILER,
    K_POINT,
    K_ZGLOBAL,
    K_ZLOCAL,
    K_FRONTIER,
    K_ZPOINT,   /* Zeus PFO PointSolution: the plan's pairs verbatim, every window */
    K_ZPROF,    /* Zeus PFO InstructionProfiler (#158): K_PROFILER with Zeus's arguments */
    K_ENVPIPE,  /* EnvPipe online (sched_envpipe.c) */
} sched_kind;

static const struct {
    srv_sched_class cls;
    sched_kind kind;
} classes[] = {
    {{"AllMax", SRV_MODE_ANY}, K_ALLMAX},
    {{"AllMaxFrequency", SRV_MODE_FREQUENCY}, K_ALLMAX},
    {{"AllMaxPowerLimit", SRV_MODE_POWER}, K_ALLMAX},
    {{"TwoFrequencies", SRV_MODE_FREQUENCY}, K_TWOFREQ},
    {{"InstructionProfiler", SRV_MODE_ANY}, K_PROFILER},
    {{"PointSolution", SRV_MODE_ANY}, K_POINT},
    {{"ZeusGlobalPowerLimit", SRV_MODE_POWER}, K_ZGLOBAL},
    {{"ZeusLocalPowerState", SRV_MODE_ANY}, K_ZLOCAL},
    {{"Frontier", SRV_MODE_FREQUENCY}, K_FRONTIER},
    {{"EnvPipe", SRV_MODE_FREQUENCY}, K_ENVPIPE},
    /* Zeus PFO classes (docs/zeus-protocol.md §4), run for jobs of the Zeus
     * wire under these internal names. */
    {{"zeus:PointSolution", SRV_MODE_FREQUENCY}, K_ZPOINT},
    {{"zeus:InstructionProfiler", SRV_MODE_FREQUENCY}, K_ZPROF},
};

/* Arguments each scheduler accepts: name, type ('i' int, 'd' number, 's'
 * string, 'b' bool), required. */
typedef struct arg_spec {
    sched_kind kind;
    const char *name;
    char type;
    bool required;
} arg_spec;

static const arg_spec arg_specs[] = {
    {K_ALLMAX, "num_iters", 'i', false},
    {K_TWOFREQ, "forward_freq", 'i', true},
    {K_TWOFREQ, "backward_freq", 'i', true},
    {K_PROFILER, "warmup_step_ratio", 'd', false},
    {K_PROFILER, "minimum_power_state", 'i', false},
    {K_PROFILER, "energy_from_iterations", 'b', false},
    {K_PROFILER, "sparse", 'b', false},
    {K_PROFILER, "budget", 'i', false},
    {K_PROFILER, "patience", 'i', false},
    {K_PROFILER, "rel_ci", 'd', false},
    {K_PROFILER, "max_windows_per_clock", 'i', false},
    /* For Zeus clients of the same server that send no pipe_schedule (wire_zeus.c);
     * Perseus clients send theirs. */
    {K_PROFILER, "num_microbatches", 'i', false},
    {K_PROFILER, "schedule", 's', false},
    {K_POINT, "warmup_iters", 'i', false},
    {K_POINT, "solution_path", 's', false},
    {K_POINT, "reverse", 'b', false},
    {K_ZGLOBAL, "eta_knob", 'd', false},
    {K_ZGLOBAL, "warmup_step_ratio", 'd', false},
    {K_ZGLOBAL, "deploy_optimum", 'b', false},
    {K_ZLOCAL, "eta_knob", 'd', false},
    {K_ZLOCAL, "balanced_phase", 's', false},
    {K_ZLOCAL, "warmup_step_ratio", 'd', false},
    {K_ZLOCAL, "deploy_optimum", 'b', false},
    {K_FRONTIER, "frontier_dir", 's', true},
    {K_FRONTIER, "warmup_iters", 'i', false},
    {K_FRONTIER, "slowdown", 'd', false},
    {K_FRONTIER, "deadline_s", 'd', false},
    {K_ZPOINT, "solution_path", 's', true},
    {K_ZPROF, "warmup_step_ratio", 'd', false},
    {K_ZPROF, "minimum_frequency", 'i', false},
    /* ergon's: each stage's instruction names for a client that sends no pipe_schedule
     * (Zeus 0.16's RankInfo has none), from this schedule of pp_degree stages. */
    {K_ZPROF, "num_microbatches", 'i', false},
    {K_ZPROF, "schedule", 's', false},
    {K_ENVPIPE, "type", 's', false},
    {K_ENVPIPE, "scheduling", 's', false},
    {K_ENVPIPE, "reconfigure", 's', false},
    {K_ENVPIPE, "blocking_power_w", 'd', true},
    {K_ENVPIPE, "gpu", 's', false},
    {K_ENVPIPE, "gpu_table_path", 's', false},
    {K_ENVPIPE, "reconfig_step_mhz", 'i', false},
    {K_ENVPIPE, "threshold_scale", 'd', false},
    {K_ENVPIPE, "threshold_s", 'd', false},
    {K_ENVPIPE, "finish_limit", 'i', false},
    {K_ENVPIPE, "warmup_windows", 'i', false},
    {K_ENVPIPE, "warmup_step_ratio", 'd', false},
    {K_ENVPIPE, "minimum_power_state", 'i', false},
    {K_ENVPIPE, "final_windows", 'i', false},
    {K_ENVPIPE, "sparse", 'b', false},
    {K_ENVPIPE, "budget", 'i', false},
    {K_ENVPIPE, "patience", 'i', false},
    {K_ENVPIPE, "rel_ci", 'd', false},
    {K_ENVPIPE, "max_windows_per_clock", 'i', false},
};

static int find_class(const char *name)
{
    if (!name)
        return -1;
    size_t n = strlen(name);
    /* The *3D variants are the same classes: stage grouping is always on. */
    if (n > 2 && !strcmp(name + n - 2, "3D"))
        n -= 2;
    for (size_t i = 0; i < ERG__ARRAY_LEN(classes); i++)
        if (strlen(classes[i].cls.name) == n && !strncmp(classes[i].cls.name, name, n))
            return (int)i;
    return -1;
}

const srv_sched_class *srv_sched_find(const char *name)
{
    int i = find_class(name);
    return i < 0 ? NULL : &classes[i].cls;
}

static double arg_d(const json_t *args, const char *k, double dflt)
{
    const json_t *v = json_object_get(args, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static long arg_i(const json_t *args, const char *k, long dflt)
{
    const json_t *v = json_object_get(args, k);
    return json_is_integer(v) ? (long)json_integer_value(v) : dflt;
}

static const char *arg_s(const json_t *args, const char *k, const char *dflt)
{
    const json_t *v = json_object_get(args, k);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

erg_status srv_sched_check_args(const char *name, const json_t *args, erg_error *err)
{
    int ci = find_class(name);
    if (ci < 0)
        return erg_error_set(err, ERG_EINVAL,
                             "unknown scheduler '%.64s' (known: AllMax, AllMaxFrequency, "
                             "AllMaxPowerLimit, TwoFrequencies, InstructionProfiler, "
                             "PointSolution, ZeusGlobalPowerLimit, ZeusLocalPowerState, Frontier, "
                             "EnvPipe)",
                             name ? name : "");
    sched_kind k = classes[ci].kind;
    if (!json_is_object(args))
        return erg_error_set(err, ERG_EINVAL, "scheduler_args must be a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)args, key, v) {
        const arg_spec *sp = NULL;
        for (size_t i = 0; i < ERG__ARRAY_LEN(arg_specs); i++)
            if (arg_specs[i].kind == k && !strcmp(arg_specs[i].name, key))
                sp = &arg_specs[i];
        if (!sp)
            return erg_error_set(err, ERG_EINVAL, "scheduler %s takes no argument '%.64s'", name,
                                 key);
        bool ok = sp->type == 'i'   ? json_is_integer(v)
                  : sp->type == 'd' ? json_is_number(v)
                  : sp->type == 's' ? json_is_string(v)
                                    : json_is_boolean(v);
        if (!ok)
            return erg_error_set(err, ERG_EINVAL, "scheduler argument %s must be %s", key,
                                 sp->type == 'i'   ? "an integer"
                                 : sp->type == 'd' ? "a number"
                                 : sp->type == 's' ? "a string"
                                                   : "true or false");
    }
    for (size_t i = 0; i < ERG__ARRAY_LEN(arg_specs); i++)
        if (arg_specs[i].kind == k && arg_specs[i].required &&
            !json_object_get(args, arg_specs[i].name))
            return erg_error_set(err, ERG_EINVAL, "scheduler %s needs the argument %s", name,
                                 arg_specs[i].name);
    if (arg_i(args, "num_iters", 1) < 1 || arg_i(args, "warmup_iters", 0) < 0)
        return erg_error_set(err, ERG_EINVAL,
                             "scheduler_args: num_iters must be >= 1 and warmup_iters >= 0, got "
                             "num_iters %lld, warmup_iters %lld",
                             (long long)arg_i(args, "num_iters", 1),
                             (long long)arg_i(args, "warmup_iters", 0));
    double r = arg_d(args, "warmup_step_ratio", 0.1), eta = arg_d(args, "eta_knob", 0.5);
    if (!(r >= 0 && r < 1) || !(eta >= 0 && eta <= 1))
        return erg_error_set(err, ERG_EINVAL,
                             "scheduler_args: warmup_step_ratio must be in [0, 1) and eta_knob "
                             "in [0, 1], got %g and %g",
                             r, eta);
    const char *phase = arg_s(args, "balanced_phase", "forward");
    if (strcmp(phase, "forward") && strcmp(phase, "backward"))
        return erg_error_set(err, ERG_EINVAL, "balanced_phase must be forward or backward, not '%.32s'",
                             phase);
    if (json_object_get(args, "slowdown") && !(arg_d(args, "slowdown", 1) >= 1))
        return erg_error_set(err, ERG_EINVAL, "scheduler_args: slowdown must be >= 1, got %g",
                             arg_d(args, "slowdown", 1));
    if (json_object_get(args, "deadline_s") && !(arg_d(args, "deadline_s", 1) > 0))
        return erg_error_set(err, ERG_EINVAL, "scheduler_args: deadline_s must be > 0, got %g",
                             arg_d(args, "deadline_s", 1));
    if (k == K_POINT) {
        const char *p = arg_s(args, "solution_path", "frequencies.py");
        if (!is_file(p) && !is_dir(p))
            return erg_error_set(err, ERG_EINVAL,
                                 "solution_path '%.200s' is neither a plan file nor a directory",
                                 p);
    }
    if (k == K_ZPOINT) {
        /* Zeus: one existing plan file (no directory). */
        const char *p = arg_s(args, "solution_path", "");
        if (!is_file(p))
            return erg_error_set(err, ERG_EINVAL, "Solution file not found: %.200s", p);
        /* Zeus reads only .py plans; ergon detects the format from the content: Zeus's
         * (name, clock) lists, a Perseus plan or an ergon JSON plan. */
        srv_plan_pairs pairs;
        erg_error pe;
        if (srv_plan_load_pairs(p, 0, &pairs, &pe))
            return erg_error_set(err, ERG_EINVAL,
                                 "Solution file %.200s is neither a Zeus plan (a list per stage "
                                 "of (name, clock) tuples), a Perseus plan nor an ergon JSON "
                                 "plan: %.300s",
                                 p, pe.msg);
        srv_plan_pairs_free(&pairs);
    }
    if (k == K_ZPROF || k == K_PROFILER) {
        erg_schedule_kind sk;
        erg_error se;
        if (json_object_get(args, "num_microbatches") && arg_i(args, "num_microbatches", 0) < 1)
            return erg_error_set(err, ERG_EINVAL, "scheduler_args: num_microbatches must be >= 1");
        if (json_object_get(args, "schedule") && erg_schedule_parse(arg_s(args, "schedule", ""), &sk, &se))
            return erg_error_set(err, ERG_EINVAL, "scheduler_args: schedule: %s", se.msg);
    }
    if (k == K_ENVPIPE)
        return srv_envpipe_check_args(args, err);
    if (k == K_PROFILER) {
        erg_status st = srv_sparse_prof_check_args(args, err);
        if (st)
            return st;
    }
    if (k == K_FRONTIER && !is_dir(arg_s(args, "frontier_dir", "")))
        return erg_error_set(err, ERG_EINVAL, "frontier_dir '%.200s' is not a directory",
                             arg_s(args, "frontier_dir", ""));
    return ERG_OK;
}

/* ---- the scheduler object ---- */

typedef struct zl_point {
    int state;
    int *balanced; /* per stage power state */
    double throughput, power, time, energy;
} zl_point;

struct srv_sched {
    sched_kind kind;
    const srv_sched_ctx *ctx;
    int **out;   /* Per-stage output buffers. */
    long step;   /* Windows handed out so far. */
    bool done;
    /* AllMax */
    long num_iters;
    /* TwoFrequencies */
    int fwd, bwd;
    /* InstructionProfiler, Zeus */
    double ratio;
    bool energy_from_iters; /* no energy samples: time x mean iteration power */
    int min_state;
    erg__buf csv;
    srv_sparse_prof *sparse; /* InstructionProfiler's sparse mode */
    /* PointSolution */
    long warmup;
    int n_plans;
    int ***plans;
    int **plan_lens;
    /* Zeus */
    double eta;
    int n_cand;
    int *cand;
    double *z_time, *z_energy, *z_power, *z_tput;
    /* Zeus local */
    int phase;         /* SRV_I_FORWARD / SRV_I_BACKWARD */
    int *idx;          /* Per stage index into states. */
    bool *found;
    double *prev_d, *prev_t;
    int zl_i;          /* Current outer index. */
    int zl_heaviest;   /* -1 until known. */
    double zl_target;
    int zl_stage;      /* 1 window A at i pending, 2 search windows, 3 confirming window */
    int n_points;
    zl_point *points;
    /* Zeus: keep running the optimum after the search (deploy_optimum). */
    bool deploy;
    bool deploying;
    int *opt_states; /* per stage */
    /* Frontier */
    erg_frontier *frontier;
    erg_frontier_baseline baseline; /* all-max with the profile, when the directory has it */
    int tkind;
    double tval;
    long choice;
    /* EnvPipe */
    srv_envpipe *envpipe;
};

static void uniform(srv_sched *s, int v)
{
    for (int st = 0; st < s->ctx->num_stages; st++)
        for (int i = 0; i < s->ctx->n_instrs[st]; i++)
            s->out[st][i] = v;
}

static int max_state(const srv_sched *s)
{
    return s->ctx->states[0];
}

bool srv_state_supported(const srv_sched_ctx *c, int v)
{
    for (int i = 0; i < c->n_states; i++)
        if (c->states[i] == v)
            return true;
    return false;
}

void srv_sched_free(srv_sched *s)
{
    if (!s)
        return;
    if (s->out)
        for (int i = 0; i < s->ctx->num_stages; i++)
            erg__free(s->out[i]);
    erg__free(s->out);
    erg__buf_free(&s->csv);
    srv_sparse_prof_free(s->sparse);
    for (int p = 0; p < s->n_plans; p++)
        srv_plan_stages_free(s->plans[p], s->plan_lens[p], s->ctx->num_stages);
    erg__free(s->plans);
    erg__free(s->plan_lens);
    erg__free(s->cand);
    erg__free(s->z_time);
    erg__free(s->z_energy);
    erg__free(s->z_power);
    erg__free(s->z_tput);
    erg__free(s->idx);
    erg__free(s->opt_states);
    erg__free(s->found);
    erg__free(s->prev_d);
    erg__free(s->prev_t);
    for (int i = 0; i < s->n_points; i++)
        erg__free(s->points[i].balanced);
    erg__free(s->points);
    erg_frontier_free(s->frontier);
    erg_frontier_baseline_free(&s->baseline);
    srv_envpipe_free(s->envpipe);
    erg__free(s);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Check a plan (per-stage compute clocks) against the job. */
static erg_status check_plan(srv_sched *s, int **stages, int *lens, int n, const char *name,
                             erg_error *err)
{
    const srv_sched_ctx *c = s->ctx;
    if (n != c->num_stages)
        return erg_error_set(err, ERG_EINVAL, "plan %s has %d stages but the job has %d", name,
                             n, c->num_stages);
    for (int st = 0; st < n; st++) {
        erg_status r = srv_expand(stages[st], lens[st], c->instrs[st], c->n_instrs[st],
                                  s->out[st], err);
        if (r) {
            char why[ERG_ERROR_MSG_LEN];
            snprintf(why, sizeof why, "%s", err->msg);
            return erg_error_set(err, ERG_EINVAL, "plan %s, stage %d: %s", name, st, why);
        }
        if (c->mode == SRV_MODE_FREQUENCY)
            for (int i = 0; i < lens[st]; i++)
                if (!srv_state_supported(s->ctx, stages[st][i]))
                    return erg_error_set(err, ERG_EINVAL,
                                         "plan %s, stage %d: clock %d MHz is not in the ranks' "
                                         "power_state_range",
                                         name, st, stages[st][i]);
    }
    return ERG_OK;
}

static erg_status load_point(srv_sched *s, const json_t *args, erg_error *err)
{
    const char *path = arg_s(args, "solution_path", "frequencies.py");
    bool reverse = json_is_true(json_object_get(args, "reverse"));
    char **names = NULL;
    size_t nn = 0, cap = 0;
    erg_status st = ERG_OK;
    if (is_dir(path)) {
        DIR *d = opendir(path);
        if (!d)
            return erg_error_set(err, ERG_EINVAL, "cannot open solution_path %s", path);
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name);
            if (l < 4 || strcmp(e->d_name + l - 3, ".py") || e->d_name[0] == '.')
                continue;
            if (nn == cap) {
                cap = cap ? cap * 2 : 64;
                char **nd = erg__reallocarray(names, cap, sizeof *nd);
                if (!nd) {
                    st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                    break;
                }
                names = nd;
            }
            erg__buf b = {0};
            if (erg__buf_printf(&b, "%s/%s", path, e->d_name)) {
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                break;
            }
            names[nn++] = b.data;
        }
        closedir(d);
        if (!st && nn == 0)
            st = erg_error_set(err, ERG_EINVAL, "solution_path %s holds no *.py plan files "
                                                "(a frontier in one plans.ergon file is served "
                                                "by the Frontier scheduler, frontier_dir; or "
                                                "plan with 'ergon plan perseus "
                                                "--per-plan-files')",
                               path);
    } else if (is_file(path)) {
        names = erg__calloc(1, sizeof *names);
        if (names && (names[0] = erg__strdup(path)))
            nn = 1;
        else
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    } else {
        st = erg_error_set(err, ERG_EINVAL,
                           "solution_path '%.200s' is neither a plan file nor a directory", path);
    }
    if (!st) {
        qsort(names, nn, sizeof *names, cmp_str);
        if (reverse)
            for (size_t i = 0; i < nn / 2; i++) {
                char *t = names[i];
                names[i] = names[nn - 1 - i];
                names[nn - 1 - i] = t;
            }
        s->plans = erg__calloc(nn, sizeof *s->plans);
        s->plan_lens = erg__calloc(nn, sizeof *s->plan_lens);
        if (!s->plans || !s->plan_lens)
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (size_t i = 0; !st && i < nn; i++) {
        int n = 0;
        st = srv_plan_load(names[i], &s->plans[i], &s->plan_lens[i], &n, err);
        if (st)
            break;
        s->n_plans++;
        if (n != s->ctx->num_stages) {
            /* Keep the free loop's stage count consistent. */
            st = erg_error_set(err, ERG_EINVAL, "plan %s has %d stages but the job has %d",
                               names[i], n, s->ctx->num_stages);
            srv_plan_stages_free(s->plans[i], s->plan_lens[i], n);
            s->plans[i] = NULL;
            s->plan_lens[i] = NULL;
            s->n_plans--;
            break;
        }
        st = check_plan(s, s->plans[i], s->plan_lens[i], n, names[i], err);
    }
    for (size_t i = 0; i < nn; i++)
        erg__free(names[i]);
    erg__free(names);
    return st;
}

/* Zeus PointSolution: one plan file of (name, clock) pairs per stage, served
 * verbatim (the job's instruction lists were taken from the same file). */
static erg_status load_zeus_point(srv_sched *s, const json_t *args, erg_error *err)
{
    const char *path = arg_s(args, "solution_path", "");
    srv_plan_pairs pp;
    erg_status st = srv_plan_load_pairs(path, s->ctx->num_stages, &pp, err);
    if (st)
        return st;
    if (pp.n_stages != s->ctx->num_stages) {
        st = erg_error_set(err, ERG_EINVAL,
                           "Solution file assumes %d ranks, but the job has %d ranks.",
                           pp.n_stages, s->ctx->num_stages);
        goto out;
    }
    for (int g = 0; g < pp.n_stages; g++) {
        if (pp.lens[g] != s->ctx->n_instrs[g]) {
            st = erg_error_set(err, ERG_EINVAL,
                               "%s: stage %d has %d pairs but its ranks registered %d",
                               path, g, pp.lens[g], s->ctx->n_instrs[g]);
            goto out;
        }
        memcpy(s->out[g], pp.freqs[g], (size_t)pp.lens[g] * sizeof(int));
    }
out:
    srv_plan_pairs_free(&pp);
    return st;
}

erg_status srv_sched_new(const char *name, const json_t *args, const srv_sched_ctx *ctx,
                         srv_sched **out, erg_error *err)
{
    *out = NULL;
    erg_status st = srv_sched_check_args(name, args, err);
    if (st)
        return st;
    if (ctx->num_stages < 1 || ctx->n_states < 1)
        return erg_error_set(err, ERG_EINVAL, "the job has no stages or no power states");
    srv_sched *s = erg__calloc(1, sizeof *s);
    if (!s)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    s->kind = classes[find_class(name)].kind;
    s->ctx = ctx;
    s->choice = -1;
    s->zl_heaviest = -1;
    s->out = erg__calloc((size_t)ctx->num_stages, sizeof *s->out);
    if (!s->out)
        goto oom;
    for (int i = 0; i < ctx->num_stages; i++)
        if (!(s->out[i] = erg__calloc((size_t)ctx->n_instrs[i] + 1, sizeof(int))))
            goto oom;
    s->num_iters = arg_i(args, "num_iters", 1);
    s->ratio = arg_d(args, "warmup_step_ratio", 0.1);
    s->eta = arg_d(args, "eta_knob", 0.5);
    s->deploy = json_is_true(json_object_get(args, "deploy_optimum"));
    s->opt_states = erg__calloc((size_t)ctx->num_stages, sizeof(int));
    if (!s->opt_states)
        goto oom;
    switch (s->kind) {
    case K_ALLMAX:
        break;
    case K_TWOFREQ:
        s->fwd = (int)arg_i(args, "forward_freq", 0);
        s->bwd = (int)arg_i(args, "backward_freq", 0);
        if (!srv_state_supported(s->ctx, s->fwd) || !srv_state_supported(s->ctx, s->bwd)) {
            st = erg_error_set(err, ERG_EINVAL,
                               "forward_freq %d and backward_freq %d must both be supported "
                               "power states",
                               s->fwd, s->bwd);
            goto fail;
        }
        break;
    case K_PROFILER:
        s->min_state = (int)arg_i(args, "minimum_power_state", 850);
        s->energy_from_iters = json_is_true(json_object_get(args, "energy_from_iterations"));
        if (!ctx->job_dir) {
            st = erg_error_set(err, ERG_EINVAL,
                               "InstructionProfiler writes its profile into the dump directory: "
                               "enable dumping");
            goto fail;
        }
        if (json_is_true(json_object_get(args, "sparse"))) {
            if ((st = srv_sparse_prof_new(ctx, args, s->min_state, s->ratio,
                                          s->energy_from_iters, &s->sparse, err)))
                goto fail;
            break;
        }
        if (erg__buf_printf(&s->csv, "stage,instruction,%s,time,energy\n",
                            srv_mode_name(ctx->mode)))
            goto oom;
        break;
    case K_ZPROF:
        s->kind = K_PROFILER; /* same windows and CSV; Zeus's argument names */
        s->min_state = (int)arg_i(args, "minimum_frequency", 850);
        if (!ctx->job_dir) {
            st = erg_error_set(err, ERG_EINVAL,
                               "InstructionProfiler requires dump_data to be enabled.");
            goto fail;
        }
        if (erg__buf_printf(&s->csv, "stage,instruction,frequency,time,energy\n"))
            goto oom;
        break;
    case K_ZPOINT:
        if ((st = load_zeus_point(s, args, err)))
            goto fail;
        break;
    case K_POINT:
        s->warmup = arg_i(args, "warmup_iters", 2);
        if ((st = load_point(s, args, err)))
            goto fail;
        break;
    case K_ZGLOBAL:
        s->n_cand = ctx->n_states > 1 ? ctx->n_states - 1 : 1;
        s->cand = erg__calloc((size_t)s->n_cand, sizeof(int));
        s->z_time = erg__calloc((size_t)s->n_cand, sizeof(double));
        s->z_energy = erg__calloc((size_t)s->n_cand, sizeof(double));
        s->z_power = erg__calloc((size_t)s->n_cand, sizeof(double));
        s->z_tput = erg__calloc((size_t)s->n_cand, sizeof(double));
        if (!s->cand || !s->z_time || !s->z_energy || !s->z_power || !s->z_tput)
            goto oom;
        for (int i = 0; i < s->n_cand; i++)
            s->cand[i] = ctx->states[i];
        break;
    case K_ZLOCAL:
        s->phase = strcmp(arg_s(args, "balanced_phase", "forward"), "backward") ? SRV_I_FORWARD
                                                                                : SRV_I_BACKWARD;
        s->idx = erg__calloc((size_t)ctx->num_stages, sizeof(int));
        s->found = erg__calloc((size_t)ctx->num_stages, sizeof(bool));
        s->prev_d = erg__calloc((size_t)ctx->num_stages, sizeof(double));
        s->prev_t = erg__calloc((size_t)ctx->num_stages, sizeof(double));
        s->points = erg__calloc((size_t)ctx->n_states, sizeof(zl_point));
        if (!s->idx || !s->found || !s->prev_d || !s->prev_t || !s->points)
            goto oom;
        break;
    case K_FRONTIER: {
        s->warmup = arg_i(args, "warmup_iters", 0);
        if (json_object_get(args, "deadline_s")) {
            s->tkind = 2;
            s->tval = arg_d(args, "deadline_s", 0);
        } else {
            s->tkind = 1;
            s->tval = arg_d(args, "slowdown", 1.0);
        }
        if ((st = erg_frontier_read_dir(arg_s(args, "frontier_dir", ""), NULL, &s->frontier,
                                        err)))
            goto fail;
        if (erg_frontier_size(s->frontier) == 0) {
            st = erg_error_set(err, ERG_EINVAL, "the frontier in %s has no plans",
                               arg_s(args, "frontier_dir", ""));
            goto fail;
        }
        if (erg_frontier_num_stages(s->frontier) != ctx->num_stages) {
            st = erg_error_set(err, ERG_EINVAL, "the frontier in %s has %d stages but the job has %d",
                               arg_s(args, "frontier_dir", ""),
                               erg_frontier_num_stages(s->frontier), ctx->num_stages);
            goto fail;
        }
        /* The same baseline as `ergon choose`: a slowdown is relative to
         * all-max clocks evaluated with the profile, and a plan fits when its
         * profiled time does (with no baseline: the planner's estimates). */
        if ((st = erg_frontier_baseline_open(arg_s(args, "frontier_dir", ""), s->frontier,
                                             &s->baseline, err)))
            goto fail;
        /* A target no plan meets is refused here, with the numbers, rather than served with
         * the fastest plan without a word (a later straggler target that cannot be met still
         * runs the fastest plan: the job's message says so). */
        if (s->baseline.have) {
            size_t idx;
            erg_emulation em;
            erg_error e2 = {0};
            double deadline_s =
                s->tkind == 2 ? s->tval : s->baseline.all_max.time_s * s->tval;
            erg_status ps = erg_frontier_baseline_pick(&s->baseline, s->frontier, deadline_s,
                                                       &idx, &em, &e2);
            if (ps == ERG_ENOTFOUND) {
                st = erg_error_set(err, ERG_EINVAL,
                                   "Frontier on %s: %s; plan the frontier again with this ergon "
                                   "(plan perseus adds all-max clocks as its fastest plan where "
                                   "needed) or give a larger slowdown or deadline",
                                   arg_s(args, "frontier_dir", ""), e2.msg);
                goto fail;
            }
        }
        break;
    }
    case K_ENVPIPE:
        if ((st = srv_envpipe_new(args, ctx, &s->envpipe, err)))
            goto fail;
        break;
    }
    *out = s;
    return ERG_OK;
oom:
    st = erg_error_set(err, ERG_ENOMEM, "out of memory");
fail:
    srv_sched_free(s);
    return st;
}

void srv_sched_set_target(srv_sched *s, int kind, double value)
{
    if (s && s->kind == K_FRONTIER && kind) {
        s->tkind = kind;
        s->tval = value;
    }
}

long srv_sched_choice(const srv_sched *s)
{
    return s ? s->choice : -1;
}

/* Frontier: pick the plan for the current target and expand it. */
static erg_status frontier_next(srv_sched *s, erg_error *err)
{
    size_t idx = 0;
    erg_error e2;
    erg_status st;
    if (s->baseline.have) {
        erg_emulation em;
        double deadline_s = s->tkind == 2 ? s->tval : s->baseline.all_max.time_s * s->tval;
        st = erg_frontier_baseline_pick(&s->baseline, s->frontier, deadline_s, &idx, &em, &e2);
    } else {
        st = s->tkind == 2 ? erg_frontier_choose_deadline(s->frontier, s->tval, &idx, &e2)
                           : erg_frontier_choose_slowdown(s->frontier, s->tval, &idx, &e2);
    }
    if (st == ERG_ENOTFOUND)
        idx = erg_frontier_size(s->frontier) - 1; /* impossible: run the fastest plan */
    else if (st)
        return erg_error_set(err, st, "frontier choice: %s", e2.msg);
    erg_plan *plan = NULL;
    if ((st = erg_frontier_plan(s->frontier, idx, &plan, err)))
        return st;
    const srv_sched_ctx *c = s->ctx;
    for (int stg = 0; !st && stg < c->num_stages; stg++) {
        const int *f = erg_plan_stage_freqs_const(plan, stg);
        st = f ? srv_expand(f, erg_plan_stage_len(plan, stg), c->instrs[stg], c->n_instrs[stg],
                            s->out[stg], err)
               : erg_error_set(err, ERG_EINVAL, "frontier plan %zu lacks stage %d", idx, stg);
        if (st) {
            char why[ERG_ERROR_MSG_LEN];
            snprintf(why, sizeof why, "%s", err->msg);
            erg_error_set(err, ERG_EINVAL, "frontier plan %zu, stage %d: %s", idx, stg, why);
        }
    }
    erg_plan_free(plan);
    if (!st)
        s->choice = (long)idx;
    return st;
}

static int zl_state(const srv_sched *s, int stage)
{
    return s->ctx->states[s->idx[stage]];
}

erg_status srv_sched_next(srv_sched *s, int ***per_stage, bool *done, erg_error *err)
{
    const srv_sched_ctx *c = s->ctx;
    *done = false;
    *per_stage = s->out;
    if (s->done) {
        *done = true;
        return ERG_OK;
    }
    long k = s->step;
    erg_status st = ERG_OK;
    if (s->deploying) {
        for (int stg = 0; stg < c->num_stages; stg++)
            for (int i = 0; i < c->n_instrs[stg]; i++)
                s->out[stg][i] = s->opt_states[stg];
        s->step++;
        return ERG_OK;
    }
    switch (s->kind) {
    case K_ALLMAX:
        uniform(s, max_state(s));
        break;
    case K_TWOFREQ:
        for (int stg = 0; stg < c->num_stages; stg++) {
            int cur = s->fwd;
            for (int i = 0; i < c->n_instrs[stg]; i++) {
                int in = c->instrs[stg][i];
                if (in == SRV_I_FORWARD || in == SRV_I_OVERLAP_F_B)
                    cur = s->fwd;
                else if (in == SRV_I_BACKWARD || in == SRV_I_BACKWARD_INPUT ||
                         in == SRV_I_BACKWARD_WEIGHT)
                    cur = s->bwd;
                s->out[stg][i] = cur;
            }
        }
        break;
    case K_PROFILER:
        if (s->sparse) {
            srv_sparse_prof_next(s->sparse, s->out, done);
            if (*done) {
                s->done = true;
                return ERG_OK;
            }
        } else if (k < 2) {
            uniform(s, max_state(s));
        } else if (k - 2 < c->n_states && c->states[k - 2] >= s->min_state) {
            uniform(s, c->states[k - 2]);
        } else {
            *done = s->done = true;
            return ERG_OK;
        }
        break;
    case K_POINT:
        if (k < s->warmup) {
            uniform(s, max_state(s));
        } else if (k - s->warmup < s->n_plans) {
            int **pl = s->plans[k - s->warmup];
            for (int stg = 0; !st && stg < c->num_stages; stg++)
                st = srv_expand(pl[stg], s->plan_lens[k - s->warmup][stg], c->instrs[stg],
                                c->n_instrs[stg], s->out[stg], err);
        } else {
            *done = s->done = true;
            return ERG_OK;
        }
        break;
    case K_ZGLOBAL:
        if (k == 0)
            uniform(s, max_state(s));
        else
            uniform(s, s->cand[k - 1]);
        break;
    case K_ZLOCAL:
        if (k == 0) {
            uniform(s, max_state(s));
        } else {
            for (int stg = 0; stg < c->num_stages; stg++)
                for (int i = 0; i < c->n_instrs[stg]; i++)
                    s->out[stg][i] = zl_state(s, stg);
        }
        break;
    case K_FRONTIER:
        if (k < s->warmup)
            uniform(s, max_state(s));
        else
            st = frontier_next(s, err);
        break;
    case K_ZPOINT: /* the plan, filled at construction, for every window */
    case K_ZPROF:  /* (constructed as K_PROFILER) */
        break;
    case K_ENVPIPE:
        st = srv_envpipe_next(s->envpipe, s->out, done, err);
        if (!st && *done) {
            s->done = true;
            return ERG_OK;
        }
        break;
    }
    if (!st)
        s->step++;
    return st;
}

int srv_drop_of(int n, double ratio)
{
    int d = (int)floor(n * ratio);
    return d < 1 ? 1 : d;
}

double srv_iter_power(const srv_result *r, int drop)
{
    double p = 0;
    int cnt = 0;
    for (int i = drop; i < r->n_iters; i++)
        if (r->iter_time_s[i] > 0) {
            p += r->iter_energy_j[i] / r->iter_time_s[i];
            cnt++;
        }
    return cnt ? p / cnt : NAN;
}

/* Zeus metrics of one window over the stages: throughput = 1 / max mean
 * iteration time; power = sum of mean per-iteration power; energy = sum of
 * mean iteration energy (warm-up iterations dropped). */
static void zeus_metrics(const srv_sched *s, const srv_result *r, double *tput, double *power,
                         double *energy)
{
    double tmax = 0, p = 0, e = 0;
    for (int stg = 0; stg < s->ctx->num_stages; stg++) {
        int n = r[stg].n_iters, d = srv_drop_of(n, s->ratio);
        if (d >= n)
            d = n - 1; /* keep at least one iteration */
        double t = srv_mean(r[stg].iter_time_s, d, n);
        tmax = ERG__MAX(tmax, t);
        double ps = 0;
        for (int i = d; i < n; i++)
            ps += r[stg].iter_time_s[i] > 0 ? r[stg].iter_energy_j[i] / r[stg].iter_time_s[i] : 0;
        p += ps / (n - d);
        e += srv_mean(r[stg].iter_energy_j, d, n);
    }
    *tput = tmax > 0 ? 1.0 / tmax : 0;
    *power = p;
    *energy = e;
}

/* Zeus cost, including the reference's quirk: its MAXPOWER constant is
 * already max-state x world size and is multiplied by the world size again. */
static double zeus_cost(const srv_sched *s, double tput, double power)
{
    double ws = s->ctx->num_stages;
    double maxpower = max_state(s) * ws;
    return tput > 0 ? (s->eta * power + (1 - s->eta) * maxpower * ws) / tput : INFINITY;
}

/* ZeusLocalPowerState's cost: its constant is max state x world size, scaled
 * once (kronos baselines.py; docs/zeus-protocol.md §9 step 5). */
static double zlocal_cost(const srv_sched *s, double tput, double power)
{
    double ws = s->ctx->num_stages;
    return tput > 0 ? (s->eta * power + (1 - s->eta) * max_state(s) * ws) / tput : INFINITY;
}

static erg_status write_job_file(const srv_sched *s, const char *name, const erg__buf *b,
                                 erg_error *err)
{
    if (!s->ctx->job_dir)
        return ERG_OK;
    if (s->ctx->write_file)
        return s->ctx->write_file(s->ctx->write_user, name, b->data ? b->data : "", b->len, err);
    erg__buf path = {0};
    if (erg__buf_printf(&path, "%s/%s", s->ctx->job_dir, name))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    erg_status st = erg__write_file(path.data, b->data ? b->data : "", b->len, err);
    erg__buf_free(&path);
    return st;
}

/* Sparse mode: observe, then rewrite the predicted profile (once every
 * (stage, instruction) has its maximum clock) and the summary. */
static erg_status sparse_observe(srv_sched *s, const srv_result *r, erg_error *err)
{
    erg_status st = srv_sparse_prof_observe(s->sparse, r, err);
    if (st || !srv_sparse_prof_ready(s->sparse))
        return st;
    char *text = NULL;
    size_t len = 0;
    erg_error e2;
    if ((st = srv_sparse_prof_csv(s->sparse, &text, &len, &e2)))
        return erg_error_set(err, st, "sparse profile: %s", e2.msg);
    erg__buf b = {.data = text, .len = len, .cap = len + 1};
    st = write_job_file(s, s->ctx->profile_csv_name, &b, err);
    erg_free(text);
    if (st)
        return st;
    erg__buf sum = {0};
    if (srv_sparse_prof_summary(s->sparse, &sum) || erg__buf_append(&sum, "\n", 1)) {
        erg__buf_free(&sum);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    st = write_job_file(s, "InstructionProfiler-sparse.json", &sum, err);
    erg__buf_free(&sum);
    return st;
}

static erg_status profiler_observe(srv_sched *s, const srv_result *r, erg_error *err)
{
    if (s->sparse)
        return sparse_observe(s, r, err);
    long k = s->step - 1;
    if (k < 2)
        return ERG_OK;
    int state = s->ctx->states[k - 2];
    char a[40], b[40];
    for (int stg = 0; stg < s->ctx->num_stages; stg++) {
        int d = srv_drop_of(r[stg].n_iters, s->ratio);
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
            double t = srv_series_mean(&r[stg].time_bd[kind], d);
            double e = srv_series_mean(&r[stg].energy_bd[kind], d);
            if (isnan(e) && s->energy_from_iters && !isnan(t)) {
                /* Approximation: the instruction draws the iteration's mean
                 * power (it includes communication and idle time). */
                double p = srv_iter_power(&r[stg], d);
                if (!isnan(p))
                    e = t * p;
            }
            /* pandas' to_csv writes NaN (the mean of no samples) as an
             * empty field, as Perseus's CSV has it. */
            if (erg__buf_printf(&s->csv, "%d,%s,%d,%s,%s\n", stg, srv_instr_names[kind], state,
                                isnan(t) ? "" : erg__fmt_double_py(t, a, sizeof a),
                                isnan(e) ? "" : erg__fmt_double_py(e, b, sizeof b)))
                return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
    }
    return write_job_file(s, s->ctx->profile_csv_name, &s->csv, err);
}

static erg_status zglobal_observe(srv_sched *s, const srv_result *r, erg_error *err)
{
    long k = s->step - 1;
    if (k == 0)
        return ERG_OK;
    int i = (int)k - 1;
    zeus_metrics(s, r, &s->z_tput[i], &s->z_power[i], &s->z_energy[i]);
    s->z_time[i] = s->z_tput[i] > 0 ? 1 / s->z_tput[i] : INFINITY;
    if (i + 1 < s->n_cand)
        return ERG_OK;
    json_t *o = json_object();
    for (int j = 0; o && j < s->n_cand; j++) {
        char key[24];
        snprintf(key, sizeof key, "%d", s->cand[j]);
        json_object_set_new(o, key,
                            json_pack("{s:f,s:f}", "time", s->z_time[j], "energy",
                                      s->z_energy[j]));
    }
    erg__buf b = {0};
    erg_status st = o ? srv_json_py(o, &b) : ERG_ENOMEM;
    json_decref(o);
    if (!st)
        st = write_job_file(s, "ZeusGlobalPowerLimit.json", &b, err);
    else
        erg_error_set(err, st, "out of memory");
    erg__buf_free(&b);
    int best = 0;
    for (int j = 1; j < s->n_cand; j++)
        if (zeus_cost(s, s->z_tput[j], s->z_power[j]) < zeus_cost(s, s->z_tput[best], s->z_power[best]))
            best = j;
    for (int stg = 0; stg < s->ctx->num_stages; stg++)
        s->opt_states[stg] = s->cand[best];
    if (s->deploy)
        s->deploying = true;
    else
        s->done = true;
    return st;
}

static erg_status zlocal_finish(srv_sched *s, erg_error *err)
{
    int best = 0;
    double best_cost = INFINITY;
    for (int i = 0; i < s->n_points; i++) {
        double c = zlocal_cost(s, s->points[i].throughput, s->points[i].power);
        if (c < best_cost) {
            best_cost = c;
            best = i;
        }
    }
    json_t *res = json_object();
    for (int i = 0; res && i < s->n_points; i++) {
        zl_point *p = &s->points[i];
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
    json_t *o = json_pack("{s:i,s:i,s:o}", "heaviest_stage", s->zl_heaviest,
                          "optimal_heaviest_stage_power_state",
                          s->n_points ? s->points[best].state : max_state(s), "profiling_results",
                          res);
    erg__buf b = {0};
    erg_status st = o ? srv_json_py(o, &b) : ERG_ENOMEM;
    json_decref(o);
    if (!st)
        st = write_job_file(s, "ZeusLocalPowerState.json", &b, err);
    else
        erg_error_set(err, st, "out of memory");
    erg__buf_free(&b);
    if (s->n_points)
        for (int stg = 0; stg < s->ctx->num_stages; stg++)
            s->opt_states[stg] = s->points[best].balanced[stg];
    else
        for (int stg = 0; stg < s->ctx->num_stages; stg++)
            s->opt_states[stg] = max_state(s);
    if (s->deploy)
        s->deploying = true;
    else
        s->done = true;
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
    const srv_sched_ctx *c = s->ctx;
    int S = c->num_stages, last = c->n_states - 1;
    zl_point *p = &s->points[s->n_points];
    p->state = c->states[s->zl_i];
    p->balanced = erg__calloc((size_t)S, sizeof(int));
    if (!p->balanced)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (int stg = 0; stg < S; stg++)
        p->balanced[stg] = zl_state(s, stg);
    zeus_metrics(s, r, &p->throughput, &p->power, &p->energy);
    p->time = p->throughput > 0 ? 1 / p->throughput : INFINITY;
    s->n_points++;
    bool any_lowest = false;
    for (int stg = 0; stg < S; stg++)
        any_lowest = any_lowest || s->idx[stg] >= last;
    if (any_lowest || s->zl_i >= last || s->n_points >= c->n_states)
        return zlocal_finish(s, err);
    s->zl_i++;
    for (int stg = 0; stg < S; stg++)
        if (s->idx[stg] < s->zl_i)
            s->idx[stg] = s->zl_i;
    s->zl_stage = 1;
    return ERG_OK;
}

static erg_status zlocal_observe(srv_sched *s, const srv_result *r, erg_error *err)
{
    const srv_sched_ctx *c = s->ctx;
    int S = c->num_stages, last = c->n_states - 1;
    if (s->step == 1) { /* warm-up done */
        s->zl_i = 0;
        s->zl_stage = 1;
        return ERG_OK;
    }
    double t[512] = {0};
    if (S > 512)
        return erg_error_set(err, ERG_EINVAL, "ZeusLocalPowerState supports at most 512 stages");
    for (int stg = 0; stg < S; stg++)
        t[stg] = srv_series_mean(&r[stg].time_bd[s->phase], srv_drop_of(r[stg].n_iters, s->ratio));
    if (s->zl_stage == 3) /* the window after the last search pass */
        return zlocal_record(s, r, err);
    if (s->zl_stage == 1) { /* window A at S[zl_i] */
        if (s->zl_heaviest < 0) {
            s->zl_heaviest = 0;
            for (int stg = 1; stg < S; stg++)
                if (t[stg] > t[s->zl_heaviest])
                    s->zl_heaviest = stg;
        }
        s->zl_target = t[s->zl_heaviest];
        bool all = true;
        for (int stg = 0; stg < S; stg++) {
            s->found[stg] = stg == s->zl_heaviest;
            s->prev_d[stg] = INFINITY;
            s->prev_t[stg] = 0;
            all = all && s->found[stg];
        }
        if (all) /* nothing to search: the reference records window A */
            return zlocal_record(s, r, err);
    }
    /* One search pass over the times of the window just observed. */
    for (int stg = 0; stg < S; stg++) {
        if (s->found[stg])
            continue;
        double d = fabs(t[stg] - s->zl_target);
        if (d <= s->prev_d[stg] || t[stg] < s->prev_t[stg]) {
            if (s->idx[stg] >= last)
                s->found[stg] = true;
            else
                s->idx[stg]++;
        } else {
            s->idx[stg]--;
            s->found[stg] = true;
        }
    }
    for (int stg = 0; stg < S; stg++) {
        s->prev_d[stg] = fabs(t[stg] - s->zl_target);
        s->prev_t[stg] = t[stg];
    }
    bool all = true;
    for (int stg = 0; stg < S; stg++)
        all = all && s->found[stg];
    /* Every pass is followed by a window with the new states; after the pass
     * that found the last stage, that window's results are the point's. */
    s->zl_stage = all ? 3 : 2;
    return ERG_OK;
}

erg_status srv_sched_observe(srv_sched *s, const srv_result *per_stage, erg_error *err)
{
    if (s->deploying)
        return ERG_OK;
    switch (s->kind) {
    case K_ALLMAX:
        if (s->step >= s->num_iters)
            s->done = true;
        return ERG_OK;
    case K_PROFILER:
        return profiler_observe(s, per_stage, err);
    case K_ZGLOBAL:
        return zglobal_observe(s, per_stage, err);
    case K_ZLOCAL:
        return zlocal_observe(s, per_stage, err);
    case K_ENVPIPE:
        return srv_envpipe_observe(s->envpipe, per_stage, err);
    case K_TWOFREQ:
    case K_POINT:
    case K_FRONTIER:
    case K_ZPOINT:
    case K_ZPROF:
        return ERG_OK;
    }
    return ERG_OK;
}
