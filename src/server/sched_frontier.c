/* sched_frontier.c: Frontier: warmup_iters windows at the top state, then, every window, the
 * plan of a Perseus frontier (frontier_dir) for the job's target -- a slowdown over all-max
 * clocks or a deadline, changed at run time by straggler targets -- chosen as `ergon choose`
 * chooses it (erg_frontier_baseline_pick) -- or, for a job of the server's fleet under a power
 * cap, the plan the fleet assigned (server/fleet.h). */
#include "server/sched_ops.h"

#include "server/fleet.h"

#include "ergon/emulate.h"
#include "ergon/planner.h"

#include <string.h>

typedef struct frontier {
    long warmup;
    erg_frontier *frontier;
    erg_frontier_baseline baseline; /* all-max with the profile, when the directory has it */
    int tkind;                      /* 1 slowdown, 2 deadline_s */
    double tval;
    long fleet; /* the plan the server's fleet assigned (server/fleet.h), -1: none */
} frontier;

static const srv_sched_arg frontier_args[] = {
    {"frontier_dir", 's', true},
    {"warmup_iters", 'i', false},
    {"slowdown", 'd', false},
    {"deadline_s", 'd', false},
};

static erg_status frontier_check(const json_t *args, erg_error *err)
{
    if (!erg__srv_is_dir(srv_arg_s(args, "frontier_dir", "")))
        return erg_error_set(err, ERG_EINVAL, "frontier_dir '%.200s' is not a directory",
                             srv_arg_s(args, "frontier_dir", ""));
    return ERG_OK;
}

static void frontier_free(void *state)
{
    frontier *f = state;
    erg_frontier_free(f->frontier);
    erg_frontier_baseline_free(&f->baseline);
    erg__free(f);
}

static erg_status frontier_init(srv_sched *s, const json_t *args, erg_error *err)
{
    const srv_sched_ctx *ctx = s->ctx;
    frontier *f = erg__calloc(1, sizeof *f);
    if (!f)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    s->state = f;
    f->fleet = -1;
    f->warmup = srv_arg_i(args, "warmup_iters", 0);
    if (json_object_get(args, "deadline_s")) {
        f->tkind = 2;
        f->tval = srv_arg_d(args, "deadline_s", 0);
    } else {
        f->tkind = 1;
        f->tval = srv_arg_d(args, "slowdown", 1.0);
    }
    const char *dir = srv_arg_s(args, "frontier_dir", "");
    erg_status st;
    if ((st = erg_frontier_read_dir(dir, NULL, &f->frontier, err)))
        return st;
    if (erg_frontier_size(f->frontier) == 0)
        return erg_error_set(err, ERG_EINVAL, "the frontier in %s has no plans", dir);
    if (erg_frontier_num_stages(f->frontier) != ctx->num_stages)
        return erg_error_set(err, ERG_EINVAL, "the frontier in %s has %d stages but the job has %d",
                             dir, erg_frontier_num_stages(f->frontier), ctx->num_stages);
    /* The same baseline as `ergon choose`: a slowdown is relative to
     * all-max clocks evaluated with the profile, and a plan fits when its
     * profiled time does (with no baseline: the planner's estimates). */
    if ((st = erg_frontier_baseline_open(dir, f->frontier, &f->baseline, err)))
        return st;
    /* A target no plan meets is refused here, with the numbers, rather than served with
     * the fastest plan without a word (a later straggler target that cannot be met still
     * runs the fastest plan: the job's message says so). */
    if (f->baseline.have) {
        size_t idx;
        erg_emulation em;
        erg_error e2 = {0};
        double deadline_s = f->tkind == 2 ? f->tval : f->baseline.all_max.time_s * f->tval;
        erg_status ps =
            erg_frontier_baseline_pick(&f->baseline, f->frontier, deadline_s, &idx, &em, &e2);
        if (ps == ERG_ENOTFOUND)
            return erg_error_set(err, ERG_EINVAL,
                                 "Frontier on %s: %s; plan the frontier again with this ergon "
                                 "(plan perseus adds all-max clocks as its fastest plan where "
                                 "needed) or give a larger slowdown or deadline",
                                 dir, e2.msg);
    }
    return ERG_OK;
}

/* A straggler target (1, 2) replaces the fleet's assignment; the fleet's (SRV_TARGET_FLEET: a
 * plan index, -1 none) keeps the straggler target for when the fleet lets the job go. */
static void frontier_set_target(srv_sched *s, int kind, double value)
{
    frontier *f = s->state;
    if (kind == SRV_TARGET_FLEET) {
        f->fleet = value >= 0 ? (long)value : -1;
        return;
    }
    f->tkind = kind;
    f->tval = value;
    f->fleet = -1;
}

/* Pick the plan for the current target and expand it. */
static erg_status frontier_next(srv_sched *s, bool *done, erg_error *err)
{
    (void)done;
    const frontier *f = s->state;
    if (s->step < f->warmup) {
        erg__srv_sched_uniform(s, srv_sched_max_state(s));
        return ERG_OK;
    }
    size_t idx = 0;
    erg_error e2;
    erg_status st;
    if (f->fleet >= 0) {
        size_t n = erg_frontier_size(f->frontier);
        idx = (size_t)f->fleet < n ? (size_t)f->fleet : n - 1;
        st = ERG_OK;
    } else if (f->baseline.have) {
        erg_emulation em;
        double deadline_s = f->tkind == 2 ? f->tval : f->baseline.all_max.time_s * f->tval;
        st = erg_frontier_baseline_pick(&f->baseline, f->frontier, deadline_s, &idx, &em, &e2);
    } else {
        st = f->tkind == 2 ? erg_frontier_choose_deadline(f->frontier, f->tval, &idx, &e2)
                           : erg_frontier_choose_slowdown(f->frontier, f->tval, &idx, &e2);
    }
    if (st == ERG_ENOTFOUND)
        idx = erg_frontier_size(f->frontier) - 1; /* impossible: run the fastest plan */
    else if (st)
        return erg_error_set(err, st, "frontier choice: %s", e2.msg);
    erg_plan *plan = NULL;
    if ((st = erg_frontier_plan(f->frontier, idx, &plan, err)))
        return st;
    const srv_sched_ctx *c = s->ctx;
    for (int stg = 0; !st && stg < c->num_stages; stg++) {
        const int *fr = erg_plan_stage_freqs_const(plan, stg);
        st = fr ? erg__srv_expand(fr, erg_plan_stage_len(plan, stg), c->instrs[stg],
                                  c->n_instrs[stg], s->out[stg], err)
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

const srv_sched_ops erg__srv_sched_frontier = {
    .args = frontier_args,
    .n_args = ERG__ARRAY_LEN(frontier_args),
    .check = frontier_check,
    .init = frontier_init,
    .next = frontier_next,
    .free = frontier_free,
    .set_target = frontier_set_target,
};
