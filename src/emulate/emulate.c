/* emulate.c: evaluate a plan with profiled per-instruction time and energy. */
#include "core/internal.h"
#include "ergon/emulate.h"

#include <math.h>

erg_status erg_emulate(const erg_profile *profile, const erg_dag *dag, const erg_plan *plan,
                       double blocking_power_w, erg_emulation *out, double *start_s, double *dur_s,
                       erg_error *err)
{
    if (!profile || !dag || !plan || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_emulate: NULL argument");
    int S = erg_dag_num_stages(dag), M = erg_dag_num_microbatches(dag);
    if (erg_plan_num_stages(plan) != S || erg_plan_num_microbatches(plan) != M)
        return erg_error_set(err, ERG_EINVAL,
                             "the plan is for S=%d stages, M=%d microbatches but the pipeline "
                             "has S=%d, M=%d",
                             erg_plan_num_stages(plan), erg_plan_num_microbatches(plan), S, M);
    if (erg_profile_num_stages(profile) < S)
        return erg_error_set(err, ERG_EINVAL, "the profile has %d stages, the plan needs %d",
                             erg_profile_num_stages(profile), S);
    if (!(blocking_power_w >= 0) || !isfinite(blocking_power_w))
        return erg_error_set(err, ERG_EINVAL, "invalid blocking power %g W", blocking_power_w);
    int n = erg_dag_num_instrs(dag);
    double *dur = erg__calloc((size_t)n * 2, sizeof(double));
    if (!dur)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    double *es = dur + n;
    double compute_j = 0;
    erg_status st = ERG_OK;
    for (int s = 0; s < S && !st; s++) {
        const int *f = erg_plan_stage_freqs_const(plan, s);
        int off = erg_dag_rank_offset(dag, s), len = erg_dag_rank_len(dag, s);
        if (erg_plan_stage_len(plan, s) != len) {
            st = erg_error_set(err, ERG_EINVAL,
                               "the plan has %d clocks for rank %d but the schedule runs %d "
                               "instructions there",
                               erg_plan_stage_len(plan, s), s, len);
            break;
        }
        for (int k = 0; k < len; k++) {
            int id = off + k;
            erg_instr in = erg_dag_instr(dag, id, NULL);
            erg_profile_point pt;
            st = erg_instr_cost_point(profile, dag, id, f[k], &pt, err);
            if (st) {
                if (st == ERG_ENOTFOUND && in.kind <= ERG_BACKWARD && erg_dag_num_chunks(dag) == 1)
                    erg_error_set(err, st,
                                  "stage %d %s of microbatch %d runs at %d MHz, which the profile "
                                  "does not have",
                                  s, erg_instr_kind_name(in.kind), in.microbatch, f[k]);
                break;
            }
            dur[id] = pt.time_s;
            compute_j += pt.energy_j;
        }
    }
    double T = 0;
    if (!st)
        st = erg_dag_cpm_p2p(dag, dur, erg_dag_schedule(dag).p2p_time_s, es, NULL, &T, err);
    if (!st) {
        double idle_s = 0;
        for (int s = 0; s < S; s++) {
            double busy = 0;
            for (int k = 0; k < erg_dag_rank_len(dag, s); k++)
                busy += dur[erg_dag_rank_offset(dag, s) + k];
            idle_s += T - busy;
        }
        out->time_s = T;
        out->compute_energy_j = compute_j;
        out->blocking_energy_j = blocking_power_w * idle_s;
        out->energy_j = compute_j + out->blocking_energy_j;
        out->num_switches = 0;
        out->switch_time_s = 0;
        out->transfer_time_s = 0;
        for (int i = 0; i < n; i++) {
            if (start_s)
                start_s[i] = es[i];
            if (dur_s)
                dur_s[i] = dur[i];
        }
    }
    erg__free(dur);
    return st;
}
