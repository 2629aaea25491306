/* sched_fixed.c: the schedulers that serve fixed clocks: AllMax (every instruction at the top
 * state for num_iters windows), TwoFrequencies (one clock for forwards, one for backwards),
 * PointSolution (warm-up windows at the top state, then each plan file of solution_path in
 * turn) and Zeus PFO's PointSolution (one plan's (name, clock) pairs, every window). */
#include "server/sched_ops.h"

#include <dirent.h>
#include <string.h>

/* ---- AllMax ---- */

typedef struct allmax {
    long num_iters;
} allmax;

static const srv_sched_arg allmax_args[] = {
    {"num_iters", 'i', false},
};

static erg_status allmax_init(srv_sched *s, const json_t *args, erg_error *err)
{
    allmax *a = erg__calloc(1, sizeof *a);
    if (!a)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    a->num_iters = srv_arg_i(args, "num_iters", 1);
    s->state = a;
    return ERG_OK;
}

static erg_status allmax_next(srv_sched *s, bool *done, erg_error *err)
{
    (void)done, (void)err;
    erg__srv_sched_uniform(s, srv_sched_max_state(s));
    return ERG_OK;
}

static erg_status allmax_observe(srv_sched *s, const srv_result *r, erg_error *err)
{
    (void)r, (void)err;
    if (s->step >= ((allmax *)s->state)->num_iters)
        s->done = true;
    return ERG_OK;
}

const srv_sched_ops erg__srv_sched_allmax = {
    .args = allmax_args,
    .n_args = ERG__ARRAY_LEN(allmax_args),
    .init = allmax_init,
    .next = allmax_next,
    .observe = allmax_observe,
    .free = erg__free,
};

/* ---- TwoFrequencies ---- */

typedef struct twofreq {
    int fwd, bwd;
} twofreq;

static const srv_sched_arg twofreq_args[] = {
    {"forward_freq", 'i', true},
    {"backward_freq", 'i', true},
};

static erg_status twofreq_init(srv_sched *s, const json_t *args, erg_error *err)
{
    twofreq *t = erg__calloc(1, sizeof *t);
    if (!t)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    s->state = t;
    t->fwd = (int)srv_arg_i(args, "forward_freq", 0);
    t->bwd = (int)srv_arg_i(args, "backward_freq", 0);
    if (!erg__srv_state_supported(s->ctx, t->fwd) || !erg__srv_state_supported(s->ctx, t->bwd))
        return erg_error_set(err, ERG_EINVAL,
                             "forward_freq %d and backward_freq %d must both be supported "
                             "power states",
                             t->fwd, t->bwd);
    return ERG_OK;
}

static erg_status twofreq_next(srv_sched *s, bool *done, erg_error *err)
{
    (void)done, (void)err;
    const srv_sched_ctx *c = s->ctx;
    const twofreq *t = s->state;
    for (int stg = 0; stg < c->num_stages; stg++) {
        int cur = t->fwd;
        for (int i = 0; i < c->n_instrs[stg]; i++) {
            int in = c->instrs[stg][i];
            if (in == SRV_I_FORWARD || in == SRV_I_OVERLAP_F_B)
                cur = t->fwd;
            else if (in == SRV_I_BACKWARD || in == SRV_I_BACKWARD_INPUT ||
                     in == SRV_I_BACKWARD_WEIGHT)
                cur = t->bwd;
            s->out[stg][i] = cur;
        }
    }
    return ERG_OK;
}

const srv_sched_ops erg__srv_sched_twofreq = {
    .args = twofreq_args,
    .n_args = ERG__ARRAY_LEN(twofreq_args),
    .init = twofreq_init,
    .next = twofreq_next,
    .free = erg__free,
};

/* ---- PointSolution ---- */

typedef struct point {
    int num_stages;
    long warmup;
    int n_plans;
    int ***plans;
    int **plan_lens;
} point;

static const srv_sched_arg point_args[] = {
    {"warmup_iters", 'i', false},
    {"solution_path", 's', false},
    {"reverse", 'b', false},
};

static erg_status point_check(const json_t *args, erg_error *err)
{
    const char *p = srv_arg_s(args, "solution_path", "frequencies.py");
    if (!erg__srv_is_file(p) && !erg__srv_is_dir(p))
        return erg_error_set(err, ERG_EINVAL,
                             "solution_path '%.200s' is neither a plan file nor a directory", p);
    return ERG_OK;
}

static void point_free(void *state)
{
    point *p = state;
    for (int i = 0; i < p->n_plans; i++)
        erg__srv_plan_stages_free(p->plans[i], p->plan_lens[i], p->num_stages);
    erg__free(p->plans);
    erg__free(p->plan_lens);
    erg__free(p);
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
        return erg_error_set(err, ERG_EINVAL, "plan %s has %d stages but the job has %d", name, n,
                             c->num_stages);
    for (int st = 0; st < n; st++) {
        erg_status r =
            erg__srv_expand(stages[st], lens[st], c->instrs[st], c->n_instrs[st], s->out[st], err);
        if (r) {
            char why[ERG_ERROR_MSG_LEN];
            snprintf(why, sizeof why, "%s", err->msg);
            return erg_error_set(err, ERG_EINVAL, "plan %s, stage %d: %s", name, st, why);
        }
        if (c->mode == SRV_MODE_FREQUENCY)
            for (int i = 0; i < lens[st]; i++)
                if (!erg__srv_state_supported(s->ctx, stages[st][i]))
                    return erg_error_set(err, ERG_EINVAL,
                                         "plan %s, stage %d: clock %d MHz is not in the ranks' "
                                         "power_state_range",
                                         name, st, stages[st][i]);
    }
    return ERG_OK;
}

static erg_status point_init(srv_sched *s, const json_t *args, erg_error *err)
{
    point *pt = erg__calloc(1, sizeof *pt);
    if (!pt)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    s->state = pt;
    pt->num_stages = s->ctx->num_stages;
    pt->warmup = srv_arg_i(args, "warmup_iters", 2);
    const char *path = srv_arg_s(args, "solution_path", "frequencies.py");
    bool reverse = json_is_true(json_object_get(args, "reverse"));
    char **names = NULL;
    size_t nn = 0, cap = 0;
    erg_status st = ERG_OK;
    if (erg__srv_is_dir(path)) {
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
            st = erg_error_set(err, ERG_EINVAL,
                               "solution_path %s holds no *.py plan files "
                               "(a frontier in one plans.ergon file is served "
                               "by the Frontier scheduler, frontier_dir; or "
                               "plan with 'ergon plan perseus "
                               "--per-plan-files')",
                               path);
    } else if (erg__srv_is_file(path)) {
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
        pt->plans = erg__calloc(nn, sizeof *pt->plans);
        pt->plan_lens = erg__calloc(nn, sizeof *pt->plan_lens);
        if (!pt->plans || !pt->plan_lens)
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (size_t i = 0; !st && i < nn; i++) {
        int n = 0;
        st = erg__srv_plan_load(names[i], &pt->plans[i], &pt->plan_lens[i], &n, err);
        if (st)
            break;
        pt->n_plans++;
        if (n != s->ctx->num_stages) {
            /* Keep the free loop's stage count consistent. */
            st = erg_error_set(err, ERG_EINVAL, "plan %s has %d stages but the job has %d",
                               names[i], n, s->ctx->num_stages);
            erg__srv_plan_stages_free(pt->plans[i], pt->plan_lens[i], n);
            pt->plans[i] = NULL;
            pt->plan_lens[i] = NULL;
            pt->n_plans--;
            break;
        }
        st = check_plan(s, pt->plans[i], pt->plan_lens[i], n, names[i], err);
    }
    for (size_t i = 0; i < nn; i++)
        erg__free(names[i]);
    erg__free(names);
    return st;
}

static erg_status point_next(srv_sched *s, bool *done, erg_error *err)
{
    const srv_sched_ctx *c = s->ctx;
    const point *pt = s->state;
    long k = s->step;
    erg_status st = ERG_OK;
    if (k < pt->warmup) {
        erg__srv_sched_uniform(s, srv_sched_max_state(s));
    } else if (k - pt->warmup < pt->n_plans) {
        int **pl = pt->plans[k - pt->warmup];
        for (int stg = 0; !st && stg < c->num_stages; stg++)
            st = erg__srv_expand(pl[stg], pt->plan_lens[k - pt->warmup][stg], c->instrs[stg],
                                 c->n_instrs[stg], s->out[stg], err);
    } else {
        *done = true;
    }
    return st;
}

const srv_sched_ops erg__srv_sched_point = {
    .args = point_args,
    .n_args = ERG__ARRAY_LEN(point_args),
    .check = point_check,
    .init = point_init,
    .next = point_next,
    .free = point_free,
};

/* ---- Zeus PFO's PointSolution ---- */

static const srv_sched_arg zeus_point_args[] = {
    {"solution_path", 's', true},
};

static erg_status zeus_point_check(const json_t *args, erg_error *err)
{
    /* Zeus: one existing plan file (no directory). */
    const char *p = srv_arg_s(args, "solution_path", "");
    if (!erg__srv_is_file(p))
        return erg_error_set(err, ERG_EINVAL, "Solution file not found: %.200s", p);
    /* Zeus reads only .py plans; ergon detects the format from the content: Zeus's
     * (name, clock) lists, a Perseus plan or an ergon JSON plan. */
    srv_plan_pairs pairs;
    erg_error pe;
    if (erg__srv_plan_load_pairs(p, 0, &pairs, &pe))
        return erg_error_set(err, ERG_EINVAL,
                             "Solution file %.200s is neither a Zeus plan (a list per stage "
                             "of (name, clock) tuples), a Perseus plan nor an ergon JSON "
                             "plan: %.300s",
                             p, pe.msg);
    erg__srv_plan_pairs_free(&pairs);
    return ERG_OK;
}

/* One plan file of (name, clock) pairs per stage, served verbatim (the job's instruction
 * lists were taken from the same file): filled once, here. */
static erg_status zeus_point_init(srv_sched *s, const json_t *args, erg_error *err)
{
    const char *path = srv_arg_s(args, "solution_path", "");
    srv_plan_pairs pp;
    erg_status st = erg__srv_plan_load_pairs(path, s->ctx->num_stages, &pp, err);
    if (st)
        return st;
    if (pp.n_stages != s->ctx->num_stages) {
        st = erg_error_set(err, ERG_EINVAL,
                           "Solution file assumes %d ranks, but the job has %d ranks.", pp.n_stages,
                           s->ctx->num_stages);
        goto out;
    }
    for (int g = 0; g < pp.n_stages; g++) {
        if (pp.lens[g] != s->ctx->n_instrs[g]) {
            st = erg_error_set(err, ERG_EINVAL,
                               "%s: stage %d has %d pairs but its ranks registered %d", path, g,
                               pp.lens[g], s->ctx->n_instrs[g]);
            goto out;
        }
        memcpy(s->out[g], pp.freqs[g], (size_t)pp.lens[g] * sizeof(int));
    }
out:
    erg__srv_plan_pairs_free(&pp);
    return st;
}

static erg_status zeus_point_next(srv_sched *s, bool *done, erg_error *err)
{
    (void)s, (void)done, (void)err; /* the plan, filled at construction, for every window */
    return ERG_OK;
}

const srv_sched_ops erg__srv_sched_zeus_point = {
    .args = zeus_point_args,
    .n_args = ERG__ARRAY_LEN(zeus_point_args),
    .check = zeus_point_check,
    .init = zeus_point_init,
    .next = zeus_point_next,
    .free = erg__free,
};
