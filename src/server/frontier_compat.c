/* frontier_compat.c: stand-in (weak) definitions of the frontier-directory functions of planner.h, used only until the planner module provides the real ones. */
#include "core/internal.h"
#include "ergon/planner.h"

#include <math.h>
#include <string.h>

/*
 * The server's Frontier scheduler needs to read a frontier directory and
 * choose a plan. The planner module (src/planner/) owns those functions; it
 * is developed in parallel. These WEAK definitions let the server build and
 * be tested before it lands: when the planner's strong definitions are
 * linked, the linker takes them and everything below is unused. Delete this
 * file once the planner is merged.
 */

struct erg_frontier {
    size_t n;
    double *time_s, *energy_j;
    char *dir;
    int num_stages, num_microbatches;
};

#define WEAK __attribute__((weak))

WEAK void erg_frontier_free(erg_frontier *f)
{
    if (!f)
        return;
    erg__free(f->time_s);
    erg__free(f->energy_j);
    erg__free(f->dir);
    erg__free(f);
}

WEAK size_t erg_frontier_size(const erg_frontier *f)
{
    return f ? f->n : 0;
}

WEAK int erg_frontier_num_stages(const erg_frontier *f)
{
    return f ? f->num_stages : 0;
}

WEAK int erg_frontier_num_microbatches(const erg_frontier *f)
{
    return f ? f->num_microbatches : 0;
}

WEAK erg_status erg_frontier_plan(const erg_frontier *f, size_t index, erg_plan **out,
                                  erg_error *err)
{
    if (index >= f->n)
        return erg_error_set(err, ERG_EINVAL, "plan index %zu out of range (%zu plans)", index,
                             f->n);
    erg__buf p = {0};
    if (erg__buf_printf(&p, "%s/freqs_pipeline_%05zu.py", f->dir, index))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    erg_status st = erg_plan_read(p.data, NULL, out, err);
    erg__buf_free(&p);
    return st;
}

WEAK erg_status erg_frontier_read_dir(const char *dir, const erg_schedule *sched_hint,
                                      erg_frontier **out, erg_error *err)
{
    (void)sched_hint;
    *out = NULL;
    erg__buf path = {0};
    if (erg__buf_printf(&path, "%s/frontier.csv", dir))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    char *text = NULL;
    size_t len = 0;
    erg_status st = erg__read_file(path.data, 64u << 20, &text, &len, err);
    if (st) {
        erg__buf_free(&path);
        return st;
    }
    erg_frontier *f = erg__calloc(1, sizeof *f);
    erg__csv c;
    erg__csv_init(&c, text, len);
    size_t cap = 0;
    bool header = true;
    int r;
    if (!f || !(f->dir = erg__strdup(dir))) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    while ((r = erg__csv_next(&c)) > 0) {
        if (header) {
            header = false;
            if (c.nfields >= 2 && !strcmp(c.fields[0], "time"))
                continue;
        }
        double t, e;
        if (c.nfields < 2 || !erg__parse_double(c.fields[0], &t) ||
            !erg__parse_double(c.fields[1], &e)) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: expected time,energy", path.data,
                               c.line);
            goto done;
        }
        if (f->n == cap) {
            cap = cap ? cap * 2 : 64;
            double *a = erg__reallocarray(f->time_s, cap, sizeof(double));
            if (a)
                f->time_s = a;
            double *b = erg__reallocarray(f->energy_j, cap, sizeof(double));
            if (b)
                f->energy_j = b;
            if (!a || !b) {
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                goto done;
            }
        }
        f->time_s[f->n] = t;
        f->energy_j[f->n++] = e;
    }
    if (r < 0) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    if (f->n == 0) {
        st = erg_error_set(err, ERG_EPARSE, "%s has no plans", path.data);
        goto done;
    }
    erg_plan *p0 = NULL;
    if ((st = erg_frontier_plan(f, 0, &p0, err)))
        goto done;
    f->num_stages = erg_plan_num_stages(p0);
    f->num_microbatches = erg_plan_num_microbatches(p0);
    erg_plan_free(p0);
done:
    erg__csv_free(&c);
    erg__free(text);
    erg__buf_free(&path);
    if (st)
        erg_frontier_free(f);
    else
        *out = f;
    return st;
}

WEAK erg_status erg_frontier_choose_deadline(const erg_frontier *f, double deadline_s,
                                             size_t *index, erg_error *err)
{
    size_t best = (size_t)-1;
    double fastest = INFINITY;
    for (size_t i = 0; i < f->n; i++) {
        fastest = fmin(fastest, f->time_s[i]);
        if (f->time_s[i] <= deadline_s && (best == (size_t)-1 || f->energy_j[i] < f->energy_j[best]))
            best = i;
    }
    if (best == (size_t)-1)
        return erg_error_set(err, ERG_ENOTFOUND,
                             "no plan meets the deadline %g s (the fastest takes %g s)",
                             deadline_s, fastest);
    *index = best;
    return ERG_OK;
}

WEAK erg_status erg_frontier_choose_slowdown(const erg_frontier *f, double slowdown,
                                             size_t *index, erg_error *err)
{
    if (!(slowdown >= 1))
        return erg_error_set(err, ERG_EINVAL, "slowdown must be >= 1, got %g", slowdown);
    double fastest = INFINITY;
    for (size_t i = 0; i < f->n; i++)
        fastest = fmin(fastest, f->time_s[i]);
    return erg_frontier_choose_deadline(f, slowdown * fastest, index, err);
}
