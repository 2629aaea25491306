/* sparse_check.c: plans chosen on a predicted profile, evaluated on the real
 * one (the acceptance check of sparse profiling). */
#include "core/internal.h"
#include "ergon/emulate.h"
#include "ergon/baselines.h"
#include "ergon/planner.h"

#include <math.h>
#include <string.h>

/* Make `plan` meet `deadline` on profile p: while its evaluated time is over,
 * move every instruction on a critical path to the next faster clock of its
 * (stage, kind). ERG_ENOTFOUND when no critical instruction can go faster. */
static erg_status repair(const erg_profile *p, const erg_dag *dag, erg_plan *plan, double power_w,
                         double deadline, erg_emulation *em, double *work, erg_error *err)
{
    int n = erg_dag_num_instrs(dag);
    double *dur = work, *es = work + n, *lf = work + 2 * n;
    for (int iter = 0; iter < 100000; iter++) {
        double T;
        erg_status st = erg_emulate(p, dag, plan, power_w, em, NULL, dur, err);
        if (st)
            return st;
        if (em->time_s <= deadline * (1 + 1e-12))
            return ERG_OK;
        if ((st = erg_dag_cpm(dag, dur, es, lf, &T, err)))
            return st;
        bool changed = false;
        for (int i = 0; i < n; i++) {
            if (lf[i] - es[i] - dur[i] > 1e-9 * T)
                continue;
            int s;
            erg_instr in = erg_dag_instr(dag, i, &s);
            size_t np = erg_profile_num_points(p, s, in.kind);
            const erg_profile_point *pts = erg_profile_points(p, s, in.kind);
            int best = -1;
            for (size_t j = 0; j < np; j++)
                if (pts[j].time_s < dur[i] && (best < 0 || pts[j].time_s > pts[best].time_s))
                    best = (int)j;
            if (best >= 0) {
                erg_plan_stage_freqs(plan, s)[i - erg_dag_rank_offset(dag, s)] = pts[best].freq_mhz;
                changed = true;
            }
        }
        if (!changed)
            break;
    }
    return erg_error_set(err, ERG_ENOTFOUND, "no plan meets the deadline %g s", deadline);
}

/* For each deadline, the least-energy plan on profile p (evaluated with p)
 * that meets it, among: the all-max plan, every frontier plan, and the plan
 * Perseus picks for the deadline (erg_frontier_choose_deadline) repaired
 * until it meets it. chosen[k] receives a copy. */
static erg_status choose(const erg_profile *p, const erg_dag *dag, const erg_frontier *f,
                         const erg_plan *allmax, double power_w, const double *deadline, int nd,
                         erg_plan **chosen, erg_error *err)
{
    double best[3];
    long pick[3];
    erg_emulation em;
    erg_status st = erg_emulate(p, dag, allmax, power_w, &em, NULL, NULL, err);
    if (st)
        return st;
    for (int k = 0; k < nd; k++) {
        chosen[k] = NULL;
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
    int ni = erg_dag_num_instrs(dag);
    double *work = erg__calloc((size_t)ni * 3, sizeof(double));
    if (!work)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (int k = 0; k < nd && !st; k++) {
        if (pick[k] == -1)
            st = erg_plan_copy(allmax, &chosen[k], err);
        else if (pick[k] >= 0)
            st = erg_frontier_plan(f, (size_t)pick[k], &chosen[k], err);
        if (st)
            break;
        size_t idx;
        erg_plan *rp = NULL;
        if (!isfinite(deadline[k]) || erg_frontier_choose_deadline(f, deadline[k], &idx, NULL))
            continue;
        if ((st = erg_frontier_plan(f, idx, &rp, err)))
            break;
        erg_status rs = repair(p, dag, rp, power_w, deadline[k], &em, work, err);
        if (rs == ERG_OK && em.energy_j < best[k]) {
            best[k] = em.energy_j;
            erg_plan_free(chosen[k]);
            chosen[k] = rp;
            rp = NULL;
        } else if (rs && rs != ERG_ENOTFOUND)
            st = rs;
        erg_plan_free(rp);
    }
    erg__free(work);
    for (int k = 0; k < nd && !st; k++)
        if (!chosen[k])
            st = erg_error_set(err, ERG_ENOTFOUND, "no plan meets the deadline %g s", deadline[k]);
    if (st)
        for (int k = 0; k < nd; k++) {
            erg_plan_free(chosen[k]);
            chosen[k] = NULL;
        }
    return st;
}

erg_status erg_sparse_check_plans(const erg_profile *real, const erg_profile *pred, int num_stages,
                                  int num_microbatches, double blocking_power_w, double unit_s,
                                  erg_sparse_check out[3], erg_error *err)
{
    return erg_sparse_check_plans_noisy(real, real, pred, num_stages, num_microbatches,
                                        blocking_power_w, unit_s, out, err);
}

/* The all-max iteration time of profile p. */
static erg_status allmax_time(const erg_profile *p, const erg_dag *dag, const erg_plan *allmax,
                              double power_w, double *time_s, erg_error *err)
{
    erg_emulation em;
    erg_status st = erg_emulate(p, dag, allmax, power_w, &em, NULL, NULL, err);
    *time_s = em.time_s;
    return st;
}

erg_status erg_sparse_check_plans_noisy(const erg_profile *truth, const erg_profile *ref,
                                        const erg_profile *pred, int num_stages,
                                        int num_microbatches, double blocking_power_w,
                                        double unit_s, erg_sparse_check out[3], erg_error *err)
{
    if (!truth || !ref || !pred || !out)
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
    erg_frontier *fr = NULL, *fp = NULL, *ft = NULL;
    erg_plan *allmax = NULL, *cr[3] = {0}, *cp[3] = {0}, *ct[3] = {0};
    erg_emulation em;
    erg_status st;
    double t_truth, t_ref, t_pred;
    if ((st = erg_dag_new(&sched, S, M, &dag, err)) ||
        (st = erg_plan_all_max(truth, S, M, &sched, blocking_power_w, &allmax, err)) ||
        (st = allmax_time(truth, dag, allmax, blocking_power_w, &t_truth, err)) ||
        (st = allmax_time(ref, dag, allmax, blocking_power_w, &t_ref, err)) ||
        (st = allmax_time(pred, dag, allmax, blocking_power_w, &t_pred, err)))
        goto done;
    /* each profile chooses against its own all-max time (what its user
     * sees); the targets on the truth are the truth's */
    static const double factor[3] = {1, 1.01, INFINITY};
    double dl_truth[3], dl_ref[3], dl_pred[3];
    for (int k = 0; k < 3; k++) {
        dl_truth[k] = t_truth * factor[k];
        dl_ref[k] = t_ref * factor[k];
        dl_pred[k] = t_pred * factor[k];
    }
    if ((st = erg_plan_perseus(ref, S, M, &o, &fr, err)) ||
        (st = erg_plan_perseus(pred, S, M, &o, &fp, err)) ||
        (st = choose(ref, dag, fr, allmax, blocking_power_w, dl_ref, 3, cr, err)) ||
        (st = choose(pred, dag, fp, allmax, blocking_power_w, dl_pred, 3, cp, err)))
        goto done;
    for (int k = 0; k < 3; k++) {
        out[k].deadline_s = dl_truth[k];
        if ((st = erg_emulate(truth, dag, cr[k], blocking_power_w, &em, NULL, NULL, err)))
            goto done;
        out[k].ref_time_s = em.time_s;
        out[k].ref_energy_j = em.energy_j;
        if ((st = erg_emulate(truth, dag, cp[k], blocking_power_w, &em, NULL, NULL, err)))
            goto done;
        out[k].pred_time_s = em.time_s;
        out[k].pred_energy_j = em.energy_j;
        if ((st = erg_emulate(pred, dag, cp[k], blocking_power_w, &em, NULL, NULL, err)))
            goto done;
        out[k].pred_est_time_s = em.time_s;
        out[k].pred_est_energy_j = em.energy_j;
    }
    /* the truth's own choice at the prediction's plans' times */
    if (truth != ref && (st = erg_plan_perseus(truth, S, M, &o, &ft, err)))
        goto done;
    for (int which = 0; which < 2; which++) {
        double dl_at[3];
        for (int k = 0; k < 3; k++) {
            dl_at[k] = which ? out[k].ref_time_s : out[k].pred_time_s;
            erg_plan_free(ct[k]);
            ct[k] = NULL;
        }
        if ((st = choose(truth, dag, truth != ref ? ft : fr, allmax, blocking_power_w, dl_at, 3, ct,
                         err)))
            goto done;
        for (int k = 0; k < 3; k++) {
            if ((st = erg_emulate(truth, dag, ct[k], blocking_power_w, &em, NULL, NULL, err)))
                goto done;
            if (which)
                out[k].best_energy_at_ref_time_j = em.energy_j;
            else
                out[k].best_energy_at_pred_time_j = em.energy_j;
        }
    }
done:
    erg_frontier_free(ft);
    for (int k = 0; k < 3; k++)
        erg_plan_free(ct[k]);
    for (int k = 0; k < 3; k++) {
        erg_plan_free(cr[k]);
        erg_plan_free(cp[k]);
    }
    erg_plan_free(allmax);
    erg_frontier_free(fr);
    erg_frontier_free(fp);
    erg_dag_free(dag);
    return st;
}
