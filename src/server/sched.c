/* sched.c: the server's scheduler dispatcher: the class table (name, mode, ops), the argument
 * checks every class shares, and erg__srv_sched_new/next/observe/free over each class's ops
 * (sched_ops.h says which file holds which family and how schedulers work). */
#include "server/sched_ops.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>

static const struct {
    srv_sched_class cls;
    const srv_sched_ops *ops;
} classes[] = {
    {{"AllMax", SRV_MODE_ANY, false}, &erg__srv_sched_allmax},
    {{"AllMaxFrequency", SRV_MODE_FREQUENCY, false}, &erg__srv_sched_allmax},
    {{"AllMaxPowerLimit", SRV_MODE_POWER, false}, &erg__srv_sched_allmax},
    {{"TwoFrequencies", SRV_MODE_FREQUENCY, false}, &erg__srv_sched_twofreq},
    {{"InstructionProfiler", SRV_MODE_ANY, false}, &erg__srv_sched_profiler},
    {{"PointSolution", SRV_MODE_ANY, false}, &erg__srv_sched_point},
    {{"ZeusGlobalPowerLimit", SRV_MODE_POWER, false}, &erg__srv_sched_zeus_global},
    {{"ZeusLocalPowerState", SRV_MODE_ANY, false}, &erg__srv_sched_zeus_local},
    {{"Frontier", SRV_MODE_FREQUENCY, true}, &erg__srv_sched_frontier},
    {{"EnvPipe", SRV_MODE_FREQUENCY, false}, &erg__srv_sched_envpipe},
    /* Zeus PFO classes (docs/zeus-protocol.md §4), run for jobs of the Zeus
     * wire under these internal names. */
    {{"zeus:PointSolution", SRV_MODE_FREQUENCY, false}, &erg__srv_sched_zeus_point},
    {{"zeus:InstructionProfiler", SRV_MODE_FREQUENCY, false}, &erg__srv_sched_zeus_profiler},
    /* ergon's Frontier for Zeus jobs: the same class, so that they join the fleet. */
    {{"zeus:Frontier", SRV_MODE_FREQUENCY, true}, &erg__srv_sched_frontier},
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

const srv_sched_class *erg__srv_sched_find(const char *name)
{
    int i = find_class(name);
    return i < 0 ? NULL : &classes[i].cls;
}

bool erg__srv_is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

bool erg__srv_is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

erg_status erg__srv_sched_check_args(const char *name, const json_t *args, erg_error *err)
{
    int ci = find_class(name);
    if (ci < 0)
        return erg_error_set(err, ERG_EINVAL,
                             "unknown scheduler '%.64s' (known: AllMax, AllMaxFrequency, "
                             "AllMaxPowerLimit, TwoFrequencies, InstructionProfiler, "
                             "PointSolution, ZeusGlobalPowerLimit, ZeusLocalPowerState, Frontier, "
                             "EnvPipe)",
                             name ? name : "");
    const srv_sched_ops *ops = classes[ci].ops;
    if (!json_is_object(args))
        return erg_error_set(err, ERG_EINVAL, "scheduler_args must be a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)args, key, v)
    {
        const srv_sched_arg *sp = NULL;
        for (size_t i = 0; i < ops->n_args; i++)
            if (!strcmp(ops->args[i].name, key))
                sp = &ops->args[i];
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
    for (size_t i = 0; i < ops->n_args; i++)
        if (ops->args[i].required && !json_object_get(args, ops->args[i].name))
            return erg_error_set(err, ERG_EINVAL, "scheduler %s needs the argument %s", name,
                                 ops->args[i].name);
    /* Ranges of the arguments several classes share, by name. */
    if (srv_arg_i(args, "num_iters", 1) < 1 || srv_arg_i(args, "warmup_iters", 0) < 0)
        return erg_error_set(err, ERG_EINVAL,
                             "scheduler_args: num_iters must be >= 1 and warmup_iters >= 0, got "
                             "num_iters %lld, warmup_iters %lld",
                             (long long)srv_arg_i(args, "num_iters", 1),
                             (long long)srv_arg_i(args, "warmup_iters", 0));
    double r = srv_arg_d(args, "warmup_step_ratio", 0.1), eta = srv_arg_d(args, "eta_knob", 0.5);
    if (!(r >= 0 && r < 1) || !(eta >= 0 && eta <= 1))
        return erg_error_set(err, ERG_EINVAL,
                             "scheduler_args: warmup_step_ratio must be in [0, 1) and eta_knob "
                             "in [0, 1], got %g and %g",
                             r, eta);
    const char *phase = srv_arg_s(args, "balanced_phase", "forward");
    if (strcmp(phase, "forward") && strcmp(phase, "backward"))
        return erg_error_set(err, ERG_EINVAL,
                             "balanced_phase must be forward or backward, not '%.32s'", phase);
    if (json_object_get(args, "slowdown") && !(srv_arg_d(args, "slowdown", 1) >= 1))
        return erg_error_set(err, ERG_EINVAL, "scheduler_args: slowdown must be >= 1, got %g",
                             srv_arg_d(args, "slowdown", 1));
    if (json_object_get(args, "deadline_s") && !(srv_arg_d(args, "deadline_s", 1) > 0))
        return erg_error_set(err, ERG_EINVAL, "scheduler_args: deadline_s must be > 0, got %g",
                             srv_arg_d(args, "deadline_s", 1));
    return ops->check ? ops->check(args, err) : ERG_OK;
}

/* ---- the scheduler object ---- */

void erg__srv_sched_uniform(srv_sched *s, int v)
{
    for (int st = 0; st < s->ctx->num_stages; st++)
        for (int i = 0; i < s->ctx->n_instrs[st]; i++)
            s->out[st][i] = v;
}

bool erg__srv_state_supported(const srv_sched_ctx *c, int v)
{
    for (int i = 0; i < c->n_states; i++)
        if (c->states[i] == v)
            return true;
    return false;
}

erg_status erg__srv_sched_write_file(const srv_sched_ctx *c, const char *name, const char *data,
                                     size_t len, erg_error *err)
{
    if (!c->job_dir)
        return ERG_OK;
    if (c->write_file)
        return c->write_file(c->write_user, name, data ? data : "", len, err);
    erg__buf path = {0};
    if (erg__buf_printf(&path, "%s/%s", c->job_dir, name))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    erg_status st = erg__write_file(path.data, data ? data : "", len, err);
    erg__buf_free(&path);
    return st;
}

void erg__srv_sched_free(srv_sched *s)
{
    if (!s)
        return;
    if (s->out)
        for (int i = 0; i < s->ctx->num_stages; i++)
            erg__free(s->out[i]);
    erg__free(s->out);
    if (s->state)
        s->ops->free(s->state);
    erg__free(s);
}

erg_status erg__srv_sched_new(const char *name, const json_t *args, const srv_sched_ctx *ctx,
                              srv_sched **out, erg_error *err)
{
    *out = NULL;
    erg_status st = erg__srv_sched_check_args(name, args, err);
    if (st)
        return st;
    if (ctx->num_stages < 1 || ctx->n_states < 1)
        return erg_error_set(err, ERG_EINVAL, "the job has no stages or no power states");
    srv_sched *s = erg__calloc(1, sizeof *s);
    if (!s)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    s->ops = classes[find_class(name)].ops;
    s->ctx = ctx;
    s->choice = -1;
    s->out = erg__calloc((size_t)ctx->num_stages, sizeof *s->out);
    if (!s->out)
        goto oom;
    for (int i = 0; i < ctx->num_stages; i++)
        if (!(s->out[i] = erg__calloc((size_t)ctx->n_instrs[i] + 1, sizeof(int))))
            goto oom;
    if ((st = s->ops->init(s, args, err)))
        goto fail;
    *out = s;
    return ERG_OK;
oom:
    st = erg_error_set(err, ERG_ENOMEM, "out of memory");
fail:
    erg__srv_sched_free(s);
    return st;
}

void erg__srv_sched_set_target(srv_sched *s, int kind, double value)
{
    if (s && kind && s->ops->set_target)
        s->ops->set_target(s, kind, value);
}

long erg__srv_sched_choice(const srv_sched *s)
{
    return s ? s->choice : -1;
}

erg_status erg__srv_sched_next(srv_sched *s, int ***per_stage, bool *done, erg_error *err)
{
    *done = false;
    *per_stage = s->out;
    if (s->done) {
        *done = true;
        return ERG_OK;
    }
    erg_status st = s->ops->next(s, done, err);
    if (!st && *done) {
        s->done = true;
        return ERG_OK;
    }
    if (!st)
        s->step++;
    return st;
}

erg_status erg__srv_sched_observe(srv_sched *s, const srv_result *per_stage, erg_error *err)
{
    return s->ops->observe ? s->ops->observe(s, per_stage, err) : ERG_OK;
}

/* ---- measurements the families share ---- */

int erg__srv_drop_of(int n, double ratio)
{
    int d = (int)floor(n * ratio);
    return d < 1 ? 1 : d;
}

double erg__srv_iter_power(const srv_result *r, int drop)
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
