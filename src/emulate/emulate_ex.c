/* emulate_ex.c: plan evaluation with P2P transfer time on cross-stage edges
 * and a clock-switch latency (docs/emulate.md).
 *
 * THE SWITCH MODEL (one, used by `ergon emulate`, `compare`, `plan perseus
 * --switch-latency` and the switch-aware planner): a rank requests its next
 * instruction's clock when the instruction starts, only when it differs from
 * the clock last requested. The request is asynchronous (ergon's client sets
 * clocks from its own thread): it takes effect L seconds later, and until then
 * the GPU keeps running at the clock it had. An instruction that starts while
 * a request is pending runs at the old clock until the request lands, then at
 * the new one: with w = the fraction of its work done at the old clock (its
 * profiled time there sets the rate), it takes (elapsed at old) + (1 - w) x
 * its time at the new clock, and its energy splits the same way. A newer
 * request supersedes a pending one (it lands at its own time + L). The first
 * instruction of a rank starts at the clock of the rank's last one
 * (iterations repeat). Nothing stalls: the GPU never stops computing. */
#include "core/internal.h"
#include "emulate/emulate_internal.h"
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

void erg__async_pass(const erg_dag *dag, const int *freq, const double *t_plan,
                     const double *e_plan, erg__cost_lookup_fn lookup, void *user, double L,
                     double x, double *dur, double *es, int *cur, int *pend, double *pend_t,
                     erg__async_result *r)
{
    int S = erg_dag_num_stages(dag), n = erg_dag_num_instrs(dag);
    for (int s = 0; s < S; s++) {
        int off = erg_dag_rank_offset(dag, s), len = erg_dag_rank_len(dag, s);
        cur[s] = len ? freq[off + len - 1] : 0;
        pend[s] = 0;
        pend_t[s] = 0;
    }
    const int *topo = erg_dag_topo_order(dag);
    double T = 0, energy = 0;
    int switches = 0;
    for (int k = 0; k < n; k++) {
        int u = topo[k], su;
        erg_dag_instr(dag, u, &su); /* su: the rank */
        double t0 = 0;
        const int *pred;
        int np = erg_dag_predecessors(dag, u, &pred);
        for (int j = 0; j < np; j++) {
            int v = pred[j], sv;
            erg_dag_instr(dag, v, &sv);
            double t = es[v] + dur[v] + (sv == su ? 0 : x);
            if (t > t0)
                t0 = t;
        }
        es[u] = t0;
        double d = t_plan[u], e = e_plan[u];
        if (L > 0) {
            if (pend[su] && pend_t[su] <= t0) {
                cur[su] = pend[su];
                pend[su] = 0;
            }
            int target = pend[su] ? pend[su] : cur[su];
            if (freq[u] != target) {
                switches++;
                pend[su] = freq[u];
                pend_t[su] = t0 + L;
            }
            double to, eo;
            if (pend[su] && lookup(user, u, cur[su], &to, &eo) && to > 0) {
                double a = pend_t[su] - t0; /* time left at the old clock */
                if (a >= to) {              /* all of it at the old clock */
                    d = to;
                    e = eo;
                } else {
                    double w = a / to;
                    d = a + (1 - w) * t_plan[u];
                    e = w * eo + (1 - w) * e_plan[u];
                    cur[su] = pend[su];
                    pend[su] = 0;
                }
            } else if (pend[su]) { /* the old clock is not profiled: no penalty */
                cur[su] = pend[su];
                pend[su] = 0;
            }
        }
        dur[u] = d;
        energy += e;
        if (t0 + d > T)
            T = t0 + d;
    }
    double idle_s = 0;
    for (int s = 0; s < S; s++) {
        double busy = 0;
        int off = erg_dag_rank_offset(dag, s), len = erg_dag_rank_len(dag, s);
        for (int k = 0; k < len; k++)
            busy += dur[off + k];
        idle_s += T - busy;
    }
    r->time_s = T;
    r->compute_energy_j = energy;
    r->idle_s = idle_s;
    r->num_switches = switches;
}

typedef struct profile_lookup {
    const erg_profile *prof;
    const erg_dag *dag;
} profile_lookup;

static bool lookup_profile(void *user, int id, int freq_mhz, double *time_s, double *energy_j)
{
    const profile_lookup *pl = user;
    erg_profile_point pt;
    erg_error e;
    if (erg_instr_cost_point(pl->prof, pl->dag, id, freq_mhz, &pt, &e))
        return false;
    *time_s = pt.time_s;
    *energy_j = pt.energy_j;
    return true;
}

erg_status erg_emulate_ex(const erg_profile *profile, const erg_dag *dag, const erg_plan *plan,
                          const erg_emulate_opts *opts, erg_emulation *out, double *start_s,
                          double *dur_s, erg_error *err)
{
    if (!profile || !dag || !plan || !opts || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_emulate_ex: NULL argument");
    if (bad(opts->transfer_time_s) || bad(opts->transfer_bytes) || bad(opts->link_bandwidth_bps) ||
        bad(opts->link_latency_s) || bad(opts->switch_latency_s))
        return erg_error_set(err, ERG_EINVAL,
                             "emulation: invalid transfer time %g s, transfer %g bytes at %g B/s "
                             "+ %g s, or switch latency %g s (all must be finite and >= 0)",
                             opts->transfer_time_s, opts->transfer_bytes, opts->link_bandwidth_bps,
                             opts->link_latency_s, opts->switch_latency_s);
    if (opts->transfer_bytes > 0 && !(opts->link_bandwidth_bps > 0) && !(opts->transfer_time_s > 0))
        return erg_error_set(err, ERG_EINVAL,
                             "emulation: transfer size %g bytes needs a link bandwidth",
                             opts->transfer_bytes);
    int n = erg_dag_num_instrs(dag), S = erg_dag_num_stages(dag);
    double *buf = erg__calloc((size_t)n * 5 + (size_t)S, sizeof(double));
    int *ibuf = erg__calloc((size_t)n + 2 * (size_t)S + 1, sizeof(int));
    if (!buf || !ibuf) {
        erg__free(buf);
        erg__free(ibuf);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    double *tp = buf, *ep = buf + n, *dur = buf + 2 * n, *es = buf + 3 * n, *es0 = buf + 4 * n,
           *pend_t = buf + 5 * n;
    int *freq = ibuf, *cur = ibuf + n, *pend = ibuf + n + S;
    /* Base evaluation: profiled durations, argument checks. */
    erg_emulation base;
    erg_status st = erg_emulate(profile, dag, plan, opts->blocking_power_w, &base, NULL, tp, err);
    for (int s = 0; !st && s < S; s++) {
        const int *f = erg_plan_stage_freqs_const(plan, s);
        int off = erg_dag_rank_offset(dag, s), len = erg_dag_rank_len(dag, s);
        for (int k = 0; k < len; k++) {
            erg_profile_point pt;
            freq[off + k] = f[k];
            st = erg_instr_cost_point(profile, dag, off + k, f[k], &pt, err);
            ep[off + k] = pt.energy_j;
        }
    }
    if (st) {
        erg__free(buf);
        erg__free(ibuf);
        return st;
    }
    double L = opts->switch_latency_s, x = erg_emulate_opts_transfer_s(opts);
    if (!(x > 0))
        x = erg_dag_schedule(dag).p2p_time_s; /* the schedule's own P2P time */
    profile_lookup pl = {profile, dag};
    erg__async_result r0, r;
    erg__async_pass(dag, freq, tp, ep, lookup_profile, &pl, 0, x, dur, es0, cur, pend, pend_t, &r0);
    erg__async_pass(dag, freq, tp, ep, lookup_profile, &pl, L, x, dur, es, cur, pend, pend_t, &r);
    out->time_s = r.time_s;
    out->compute_energy_j = L > 0 ? r.compute_energy_j : base.compute_energy_j;
    out->blocking_energy_j = opts->blocking_power_w * r.idle_s;
    out->energy_j = out->compute_energy_j + out->blocking_energy_j;
    out->num_switches = r.num_switches;
    out->switch_time_s = r.time_s - r0.time_s;
    out->transfer_time_s = x;
    for (int i = 0; i < n; i++) {
        if (start_s)
            start_s[i] = es[i];
        if (dur_s)
            dur_s[i] = dur[i];
    }
    erg__free(buf);
    erg__free(ibuf);
    return ERG_OK;
}
