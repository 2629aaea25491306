/* cost.c: the profiled time and energy of one instruction of a DAG. */
#include "core/internal.h"
#include "pipeline/dag_internal.h"

static erg_status part_cost(const erg_profile *prof, const erg_dag *d, int rank, int stage,
                            erg_instr_kind kind, int freq, double X, double *t, double *e,
                            erg_error *err)
{
    int np = erg_profile_num_stages(prof);
    int row = rank;
    double share = 1.0 / (d->rank_nstages[rank] > 0 ? d->rank_nstages[rank] : 1);
    if (np >= d->NS && d->NS > d->S) {
        row = stage; /* one profile stage per pipeline stage */
        share = 1;
    }
    erg_instr_kind pk = kind;
    double f = 1;
    if (kind == ERG_BACKWARD_INPUT || kind == ERG_BACKWARD_WEIGHT) {
        if (erg_profile_num_points(prof, row, kind) == 0) {
            pk = ERG_BACKWARD;
            f = kind == ERG_BACKWARD_INPUT ? X : 1 - X;
        }
    }
    erg_profile_point pt;
    erg_status st = erg_profile_lookup(prof, row, pk, freq, &pt, err);
    if (st)
        return erg_error_set(err, st,
                             "stage %d (rank %d) %s runs at %d MHz, which the profile does not "
                             "have",
                             stage, rank,
                             kind == ERG_BACKWARD_INPUT    ? "backward_input"
                             : kind == ERG_BACKWARD_WEIGHT ? "backward_weight"
                                                           : erg_instr_kind_name(kind),
                             freq);
    *t += pt.time_s * f * share;
    *e += pt.energy_j * f * share;
    return ERG_OK;
}

erg_status erg_instr_cost_point(const erg_profile *prof, const erg_dag *d, int id, int freq,
                                erg_profile_point *out, erg_error *err)
{
    if (!prof || !d || !out || id < 0 || id >= d->n)
        return erg_error_set(err, ERG_EINVAL, "erg_instr_cost_point: bad argument");
    int r = d->stage[id];
    if (erg_profile_num_stages(prof) < d->S)
        return erg_error_set(err, ERG_EINVAL, "the profile has %d stages, the pipeline %d ranks",
                             erg_profile_num_stages(prof), d->S);
    erg_instr in = d->instr[id];
    double X = erg_schedule_backward_split(&d->sched), t = 0, e = 0;
    erg_status st;
    if (in.kind == ERG_OVERLAP_F_B) {
        st = part_cost(prof, d, r, in.stage, ERG_FORWARD, freq, X, &t, &e, err);
        if (!st)
            st = part_cost(prof, d, r, in.stage2, in.kind2, freq, X, &t, &e, err);
    } else {
        st = part_cost(prof, d, r, in.stage, in.kind, freq, X, &t, &e, err);
    }
    if (st)
        return st;
    out->freq_mhz = freq;
    out->time_s = t;
    out->energy_j = e;
    return ERG_OK;
}
