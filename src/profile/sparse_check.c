/* sparse_check.c: plans chosen on a predicted profile, evaluated on the real
 * one (the acceptance check of sparse profiling). */
#include "core/internal.h"
#include "ergon/emulate.h"
#include "ergon/envpipe.h"
#include "ergon/planner.h"
#include "ergon/sparse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* For each deadline, the index of the least-energy plan of `f` (or -1: the
 * all-max plan) whose evaluation on `p` meets it. */
static erg_status choose(const erg_profile *p, const erg_dag *dag, const erg_frontier *f,
                         const erg_plan *allmax, double power_w, const double *deadline,
                         int nd, long *pick, erg_error *err)
{
    double best[3];
    erg_emulation em;
    erg_status st = erg_emulate(p, dag, allmax, power_w, &em, NULL, NULL, err);
    if (st)
        return st;
    for (int k = 0; k < nd; k++) {
        pick[k] = -2;
        best[k] = INFINITY;
        if (em.time_s <= deadline[k] * (1 + 1e-12)) {
            pick[k] = -1;
            best[k] = em.energy_j;
        }
    }
    size_t n = erg_frontier_size(f);
    for (size_t i = 0; i < n; i++) {
        erg_plan *plan = NULL;
        if ((st = erg_frontier_plan(f, i, &plan, err)) ||
            (st = erg_emulate(p, dag, plan, power_w, &em, NULL, NULL, err))) {
            erg_plan_free(plan);
            return st;
        }
        erg_plan_free(plan);
        for (int k = 0; k < nd; k++)
            if (em.time_s <= deadline[k] * (1 + 1e-12) && em.energy_j < best[k]) {
                best[k] = em.energy_j;
                pick[k] = (long)i;
            }
    }
    for (int k = 0; k < nd; k++)
        if (pick[k] == -2)
            return erg_error_set(err, ERG_ENOTFOUND, "no plan meets the deadline %g s",
                                 deadline[k]);
    return ERG_OK;
}

erg_status erg_sparse_check_plans(const erg_profile *real, const erg_profile *pred,
                                  int num_stages, int num_microbatches, double blocking_power_w,
                                  double unit_s, erg_sparse_check out[3], erg_error *err)
{
    if (!real || !pred || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_sparse_check_plans: NULL argument");
    int S = num_stages, M = num_microbatches;
    erg_schedule sched;
    memset(&sched, 0, sizeof sched);
    sched.kind = ERG_SCHED_1F1B;
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    o.blocking_power_w = blocking_power_w;
    o.unit_s = unit_s;
    erg_dag *dag = NULL;
    erg_frontier *fr = NULL, *fp = NULL;
    erg_plan *allmax = NULL, *plan = NULL;
    erg_emulation em;
    erg_status st;
    if ((st = erg_dag_new(&sched, S, M, &dag, err)) ||
        (st = erg_plan_all_max(real, S, M, &sched, blocking_power_w, &allmax, err)) ||
        (st = erg_emulate(real, dag, allmax, blocking_power_w, &em, NULL, NULL, err)))
        goto done;
    double deadline[3] = {em.time_s, em.time_s * 1.01, INFINITY};
    long pr[3], pp[3];
    if ((st = erg_plan_perseus(real, S, M, &o, &fr, err)) ||
        (st = erg_plan_perseus(pred, S, M, &o, &fp, err)) ||
        (st = choose(real, dag, fr, allmax, blocking_power_w, deadline, 3, pr, err)) ||
        (st = choose(pred, dag, fp, allmax, blocking_power_w, deadline, 3, pp, err)))
        goto done;
    for (int k = 0; k < 3; k++) {
        out[k].deadline_s = deadline[k];
        for (int w = 0; w < 2; w++) {
            long idx = w ? pp[k] : pr[k];
            const erg_plan *use = allmax;
            if (idx >= 0) {
                if ((st = erg_frontier_plan(w ? fp : fr, (size_t)idx, &plan, err)))
                    goto done;
                use = plan;
            }
            if ((st = erg_emulate(real, dag, use, blocking_power_w, &em, NULL, NULL, err)))
                goto done;
            if (getenv("ERG_DEBUG_PLAN") && w) {
                char path[64];
                snprintf(path, sizeof path, "/tmp/plan%d.json", k);
                erg_plan_write_json(use, path, NULL);
            }
            if (getenv("ERG_DEBUG_HIST")) {
                fprintf(stderr, "target %d %s:", k, w ? "pred" : "real");
                for (int s = 0; s < S; s += S - 1) {
                    for (int kind = 0; kind < 2; kind++) {
                        int cnt[4000] = {0};
                        for (int m = 0; m < M; m++) {
                            int f = erg_plan_freq(use, s, (erg_instr_kind)kind, m);
                            if (f > 0 && f < 4000) cnt[f]++;
                        }
                        fprintf(stderr, " | s%d%c", s, kind ? 'B' : 'F');
                        for (int f = 3999; f > 0; f--)
                            if (cnt[f]) fprintf(stderr, " %d:%d", f, cnt[f]);
                    }
                }
                fprintf(stderr, "\n");
            }
            if (w) {
                out[k].pred_time_s = em.time_s;
                out[k].pred_energy_j = em.energy_j;
                if ((st = erg_emulate(pred, dag, use, blocking_power_w, &em, NULL, NULL, err)))
                    goto done;
                out[k].pred_est_time_s = em.time_s;
                out[k].pred_est_energy_j = em.energy_j;
            } else {
                out[k].ref_time_s = em.time_s;
                out[k].ref_energy_j = em.energy_j;
            }
            erg_plan_free(plan);
            plan = NULL;
        }
    }
done:
    erg_plan_free(plan);
    erg_plan_free(allmax);
    erg_frontier_free(fr);
    erg_frontier_free(fp);
    erg_dag_free(dag);
    return st;
}
