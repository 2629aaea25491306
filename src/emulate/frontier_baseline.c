/* frontier_baseline.c: the one baseline of every user-facing saving -- all-max
 * clocks evaluated with the profile, as `ergon emulate` evaluates a plan --
 * and the choice of a frontier plan against it. Shared by the CLI (`plan
 * perseus`'s summary, `choose`, `show`) and the server's Frontier scheduler,
 * so that they pick the same plan for the same target.
 *
 * `ergon plan perseus --out DIR` writes DIR/frontier-info.csv (key,value
 * rows, docs/formats.md) and DIR/profile.csv; a directory without them
 * (Perseus's own output, older ergon) has no baseline (have = false), and
 * callers fall back to the planner's estimates. */
#include "core/internal.h"
#include "ergon/emulate.h"
#include "ergon/baselines.h"

#include <stdio.h>
#include <string.h>

void erg_frontier_baseline_init(erg_frontier_baseline *b)
{
    memset(b, 0, sizeof *b);
    b->power_w = -1;
}

void erg_frontier_baseline_free(erg_frontier_baseline *b)
{
    if (!b)
        return;
    if (b->own) {
        erg_dag_free(b->dag);
        erg_profile_free(b->prof);
    }
    erg_frontier_baseline_init(b);
}

static void join(char *out, size_t n, const char *dir, const char *name)
{
    size_t l = strlen(dir);
    while (l > 1 && dir[l - 1] == '/')
        l--;
    snprintf(out, n, "%.*s/%s", (int)l, dir, name);
}

/* One evaluation of a plan against the baseline: with the switch latency and transfer of a
 * switch-aware frontier when it has them, the profiled values alone otherwise. */
static erg_status eval_plan(const erg_frontier_baseline *b, const erg_plan *p, erg_emulation *em,
                            erg_error *err)
{
    if (!(b->switch_latency_s > 0) && !(b->transfer_time_s > 0))
        return erg_emulate(b->prof, b->dag, p, b->power_w, em, NULL, NULL, err);
    erg_emulate_opts o;
    erg_emulate_opts_init(&o);
    o.blocking_power_w = b->power_w;
    o.switch_latency_s = b->switch_latency_s;
    o.transfer_time_s = b->transfer_time_s;
    return erg_emulate_ex(b->prof, b->dag, p, &o, em, NULL, NULL, err);
}

/* The value of a `key,number` row of DIR/frontier-info.csv; false when absent. */
static bool info_number(const char *dir, const char *key, double *v)
{
    char path[4096], fmt[80];
    join(path, sizeof path, dir, "frontier-info.csv");
    snprintf(fmt, sizeof fmt, "%s,%%lf", key);
    char *text = NULL;
    size_t len = 0;
    erg_error e;
    if (erg__read_file(path, 1 << 20, &text, &len, &e))
        return false;
    bool found = false;
    for (const char *p = text; p && *p;) {
        double w;
        if (sscanf(p, fmt, &w) == 1 && w >= 0 && w < 1e6) {
            *v = w;
            found = true;
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    erg__free(text);
    return found;
}

bool erg_frontier_info_power(const char *dir, double *power_w)
{
    return info_number(dir, "blocking_power_w", power_w);
}

/* The value of a `key,text` row of DIR/frontier-info.csv into out ("" when absent). */
static void info_text(const char *dir, const char *key, char *out, size_t size)
{
    char path[4096], fmt[80];
    join(path, sizeof path, dir, "frontier-info.csv");
    snprintf(fmt, sizeof fmt, "%s,%%%zu[^\r\n]", key, size - 1);
    out[0] = '\0';
    char *text = NULL;
    size_t len = 0;
    erg_error e;
    if (erg__read_file(path, 1 << 20, &text, &len, &e))
        return;
    for (const char *q = text; q && *q;) {
        if (sscanf(q, fmt, out) == 1)
            break;
        out[0] = '\0';
        q = strchr(q, '\n');
        if (q)
            q++;
    }
    erg__free(text);
}

/* plans.ergon and frontier-info.csv name the same frontier (frontier_dir.c), or neither names
 * one (older ergon); plan files carry none and are not checked. */
static erg_status check_frontier_fingerprint(const char *dir, const erg_frontier *f, erg_error *err)
{
    char want[64], have[ERG_FRONTIER_FINGERPRINT_LEN], info[4096], packed[4096];
    if (!erg_frontier_fingerprint(f, have))
        return ERG_OK;
    info_text(dir, "frontier_fingerprint", want, sizeof want);
    if (!strcmp(want, have))
        return ERG_OK;
    join(info, sizeof info, dir, "frontier-info.csv");
    join(packed, sizeof packed, dir, "plans.ergon");
    if (!have[0])
        return erg_error_set(err, ERG_EINVAL,
                             "%s carries no frontier fingerprint, but %s names frontier %s: the "
                             "files come from different runs; plan again into this directory",
                             packed, info, want);
    if (!want[0])
        return erg_error_set(err, ERG_EINVAL,
                             "%s is frontier %s, but %s names no frontier: the files come from "
                             "different runs; plan again into this directory",
                             packed, have, info);
    return erg_error_set(err, ERG_EINVAL,
                         "%s is frontier %s, but %s names frontier %s: the files come from "
                         "different runs (another model's plans, or two writers); plan again "
                         "into this directory",
                         packed, have, info, want);
}

static erg_status baseline_open_locked(const char *dir, const erg_frontier *f,
                                       erg_frontier_baseline *b, erg_error *err)
{
    char path[4096];
    if (!erg_frontier_info_power(dir, &b->power_w))
        return ERG_OK; /* no info: the caller falls back to the estimates */
    erg_status st = check_frontier_fingerprint(dir, f, err);
    if (st)
        return st;
    info_number(dir, "switch_latency_s", &b->switch_latency_s);
    info_number(dir, "transfer_time_s", &b->transfer_time_s);
    join(path, sizeof path, dir, "profile.csv");
    st = erg_profile_read_csv(path, &b->prof, err);
    if (st)
        return st;
    b->own = true;
    /* The profile must be the one the frontier was planned with (frontier-info.csv records its
     * fingerprint; older directories do not). */
    {
        char want[64], have[ERG_PROFILE_FINGERPRINT_LEN];
        info_text(dir, "profile_fingerprint", want, sizeof want);
        erg_profile_fingerprint(b->prof, have);
        if (want[0] && strcmp(want, have)) {
            st = erg_error_set(err, ERG_EINVAL,
                               "%s is profile %s, but the frontier in %s was planned with profile "
                               "%s (frontier-info.csv): the profile was replaced; plan again",
                               path, have, dir, want);
            goto fail;
        }
    }
    /* As `ergon emulate` evaluates a plan: the schedule plan 0 names (its
     * kind, chunks, order and backward split), its DAG, the profile's rows
     * per rank or per pipeline stage. p0 owns a schedule file's order, so it
     * lives until the DAG and the all-max plan are built (they copy it). */
    erg_plan *p0 = NULL, *allmax = NULL;
    if ((st = erg_frontier_plan(f, 0, &p0, err)))
        goto fail;
    erg_schedule sched = erg_plan_schedule(p0);
    int S = erg_plan_num_stages(p0), M = erg_plan_num_microbatches(p0);
    int V = erg_schedule_chunks(&sched), ns = erg_profile_num_stages(b->prof);
    if (ns != S && ns != S * V) {
        st = erg_error_set(err, ERG_EINVAL,
                           "%s has %d stages but the frontier's plans have %d ranks x %d chunks "
                           "(expected %d or %d)",
                           path, ns, S, V, S, S * V);
        erg_plan_free(p0);
        goto fail;
    }
    if ((st = erg_dag_new(&sched, S, M, &b->dag, err)) ||
        (st = erg_plan_all_max(b->prof, S, M, &sched, b->power_w, &allmax, err)) ||
        (st = eval_plan(b, allmax, &b->all_max, err))) {
        erg_plan_free(allmax);
        erg_plan_free(p0);
        goto fail;
    }
    erg_plan_free(allmax);
    erg_plan_free(p0);
    b->have = true;
    return ERG_OK;
fail:
    erg_frontier_baseline_free(b);
    return st;
}

erg_status erg_frontier_baseline_open(const char *dir, const erg_frontier *f,
                                      erg_frontier_baseline *b, erg_error *err)
{
    erg_frontier_baseline_init(b);
    erg_frontier_dir_lock *lock = NULL;
    erg_status st =
        erg_frontier_dir_lock_take(dir, false, ERG_FRONTIER_DIR_LOCK_WAIT_S, &lock, err);
    if (!st)
        st = baseline_open_locked(dir, f, b, err);
    erg_frontier_dir_lock_release(lock);
    return st;
}

erg_status erg_frontier_pick(const erg_frontier *f, double deadline_s, erg_frontier_eval_fn eval,
                             void *user, size_t *k, erg_emulation *em, erg_error *err)
{
    erg_status st = erg_frontier_choose_deadline(f, deadline_s, k, err);
    if (st || !eval)
        return st;
    /* The planner's times are quantised down: step to faster plans until the
     * profiled time really fits. */
    size_t n = erg_frontier_size(f);
    for (;;) {
        if ((st = eval(user, *k, em, err)))
            return st;
        if (em->time_s <= deadline_s * (1 + 1e-12))
            return ERG_OK;
        if (*k + 1 >= n)
            return erg_error_set(err, ERG_ENOTFOUND,
                                 "no plan meets the deadline of %.6g s with the profiled values: "
                                 "the fastest plan takes %.6g s",
                                 deadline_s, em->time_s);
        ++*k;
    }
}

static erg_status baseline_eval(void *user, size_t k, erg_emulation *em, erg_error *err)
{
    const erg_frontier_baseline *b = ((const void **)user)[0];
    const erg_frontier *f = ((const void **)user)[1];
    erg_plan *p;
    erg_status st = erg_frontier_plan(f, k, &p, err);
    if (!st)
        st = eval_plan(b, p, em, err);
    erg_plan_free(p);
    return st;
}

erg_status erg_frontier_baseline_pick(const erg_frontier_baseline *b, const erg_frontier *f,
                                      double deadline_s, size_t *k, erg_emulation *em,
                                      erg_error *err)
{
    const void *ctx[2] = {b, f};
    erg_status st =
        erg_frontier_pick(f, deadline_s, b->have ? baseline_eval : NULL, (void *)ctx, k, em, err);
    if (st == ERG_ENOTFOUND && b->have) {
        char why[ERG_ERROR_MSG_LEN];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return erg_error_set(err, ERG_ENOTFOUND, "%s (all-max clocks: %.6g s)", why,
                             b->all_max.time_s);
    }
    return st;
}

erg_status erg_frontier_baseline_complete(const erg_frontier_baseline *b, erg_frontier *f,
                                          const erg_plan *all_max, bool *added, erg_error *err)
{
    if (added)
        *added = false;
    if (!b || !b->have || !f || !all_max)
        return erg_error_set(err, ERG_EINVAL,
                             "completing a frontier needs its all-max baseline and plan");
    size_t n = erg_frontier_size(f);
    if (n == 0)
        return erg_error_set(err, ERG_EINVAL, "the frontier is empty");
    erg_plan *p = NULL;
    erg_emulation em;
    erg_status st = erg_frontier_plan(f, n - 1, &p, err);
    if (!st)
        st = eval_plan(b, p, &em, err);
    erg_plan_free(p);
    if (st || em.time_s <= b->all_max.time_s * (1 + 1e-12))
        return st;
    erg_frontier_point last, pt;
    if ((st = erg_frontier_get(f, n - 1, &last, err)))
        return st;
    pt = last; /* the estimated time: all-max's quantised makespan is the fastest plan's */
    if ((b->switch_latency_s > 0 || b->transfer_time_s > 0) && b->all_max.time_s < pt.time_s)
        /* a switch-aware frontier's times are emulated, not quantised */
        pt.time_s = b->all_max.time_s;
    pt.energy_j = b->all_max.energy_j;
    pt.cost_j = last.cost_j + (pt.energy_j - last.energy_j); /* same blocking term */
    pt.cost_change_j = pt.cost_j - last.cost_j;
    if ((st = erg_frontier_append_plan(f, all_max, &pt, err)))
        return st;
    if (added)
        *added = true;
    return ERG_OK;
}
