/* emulate_ex.c: plan evaluation with P2P transfer time on cross-stage edges
 * and a clock-switch latency (docs/emulate.md). */
#include "core/internal.h"
#include "ergon/emulate.h"

#include <math.h>
#include <string.h>

void erg_emulate_opts_init(erg_emulate_opts *o)
{
    memset(o, 0, sizeof *o);
}

double erg_emulate_opts_transfer_s(const erg_emulate_opts *o)
{
    if (!o)
        return 0;
    if (o->transfer_time_s > 0)
        return o->transfer_time_s;
    if (o->transfer_bytes > 0 && o->link_bandwidth_bps > 0)
        return o->transfer_bytes / o->link_bandwidth_bps + o->link_latency_s;
    return 0;
}

static bool bad(double v)
{
    return !(v >= 0) || !isfinite(v);
}

erg_status erg_emulate_ex(const erg_profile *profile, const erg_dag *dag, const erg_plan *plan,
                          const erg_emulate_opts *opts, erg_emulation *out, double *start_s,
                          double *dur_s, erg_error *err)
{
    if (!profile || !dag || !plan || !opts || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_emulate_ex: NULL argument");
    if (bad(opts->transfer_time_s) || bad(opts->transfer_bytes) ||
        bad(opts->link_bandwidth_bps) || bad(opts->link_latency_s) ||
        bad(opts->switch_latency_s))
        return erg_error_set(err, ERG_EINVAL,
                             "emulation: invalid transfer time %g s, transfer %g bytes at %g B/s "
                             "+ %g s, or switch latency %g s (all must be finite and >= 0)",
                             opts->transfer_time_s, opts->transfer_bytes,
                             opts->link_bandwidth_bps, opts->link_latency_s,
                             opts->switch_latency_s);
    if (opts->transfer_bytes > 0 && !(opts->link_bandwidth_bps > 0) &&
        !(opts->transfer_time_s > 0))
        return erg_error_set(err, ERG_EINVAL,
                             "emulation: transfer size %g bytes needs a link bandwidth",
                             opts->transfer_bytes);
    int n = erg_dag_num_instrs(dag);
    double *dur = erg__calloc((size_t)n * 3, sizeof(double));
    if (!dur)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    double *es = dur + n, *lat = dur + 2 * n;
    /* Base evaluation: durations, compute energy, argument checks. */
    erg_emulation base;
    erg_status st =
        erg_emulate(profile, dag, plan, opts->blocking_power_w, &base, NULL, dur, err);
    if (st) {
        erg__free(dur);
        return st;
    }
    int S = erg_dag_num_stages(dag); /* ranks */
    double L = opts->switch_latency_s, x = erg_emulate_opts_transfer_s(opts);
    if (!(x > 0))
        x = erg_dag_schedule(dag).p2p_time_s; /* the schedule's own P2P time */
    int switches = 0;
    for (int s = 0; s < S; s++) {
        const int *f = erg_plan_stage_freqs_const(plan, s);
        int off = erg_dag_rank_offset(dag, s), len = erg_dag_rank_len(dag, s);
        for (int k = 0; k < len; k++) {
            int prev = f[k ? k - 1 : len - 1];
            bool sw = f[k] != prev && L > 0;
            lat[off + k] = sw ? L : 0;
            switches += sw;
        }
    }
    /* Longest path: an instruction starts after its same-stage predecessor
     * (plus the switch latency it is charged) and after its cross-stage
     * predecessor plus the transfer time. */
    const int *topo = erg_dag_topo_order(dag);
    double T = 0;
    for (int k = 0; k < n; k++) {
        int u = topo[k];
        int su;
        erg_dag_instr(dag, u, &su); /* su: the rank */
        double t0 = lat[u]; /* the first instruction of a stage waits too */
        const int *pred;
        int np = erg_dag_predecessors(dag, u, &pred);
        for (int j = 0; j < np; j++) {
            int v = pred[j], sv;
            erg_dag_instr(dag, v, &sv);
            double t = es[v] + dur[v] + (sv == su ? lat[u] : x);
            if (t > t0)
                t0 = t;
        }
        es[u] = t0;
        if (t0 + dur[u] > T)
            T = t0 + dur[u];
    }
    double idle_s = 0;
    for (int s = 0; s < S; s++) {
        double busy = 0;
        int off = erg_dag_rank_offset(dag, s), len = erg_dag_rank_len(dag, s);
        for (int k = 0; k < len; k++)
            busy += dur[off + k];
        idle_s += T - busy;
    }
    out->time_s = T;
    out->compute_energy_j = base.compute_energy_j;
    out->blocking_energy_j = opts->blocking_power_w * idle_s;
    out->energy_j = out->compute_energy_j + out->blocking_energy_j;
    out->num_switches = switches;
    out->switch_time_s = switches * L;
    out->transfer_time_s = x;
    for (int i = 0; i < n; i++) {
        if (start_s)
            start_s[i] = es[i];
        if (dur_s)
            dur_s[i] = dur[i];
    }
    erg__free(dur);
    return ERG_OK;
}
