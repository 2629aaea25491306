/* envpipe_order.c: the per-stage instruction order of EnvPipe's "ours" schedule. */
#include "core/internal.h"
#include "ergon/pipeline.h"

erg_status erg__schedule_envpipe_order(const erg_schedule *sched, int S, int M, int s,
                                       erg_instr *out, erg_error *err);

/* Forwards stage s runs before its first backward (k_s, docs/envpipe.md "The ours schedule"):
 * min(M, S - s + r_s), where the memory cap max_inflight may cut the extra
 * forwards but never below the 1F1B warm-up of S - s. */
static int envpipe_warmup(const erg_schedule *sched, int S, int M, int s)
{
    int r = s < ERG_SCHED_MAX_STAGES ? sched->extra_warmup[s] : 0;
    long k = (long)(S - s) + r;
    if (sched->max_inflight > 0 && k > sched->max_inflight)
        k = ERG__MAX(sched->max_inflight, S - s);
    return (int)ERG__MIN(k, (long)M);
}

/* EnvPipe's "ours" order (docs/envpipe.md, the closed form verified
 * against DeepSpeed's step grid): with k_s = min(M, S - s + r_s), stage s runs
 * F0 .. F(k_s - 1), then alternates B0, F(k_s), B1, F(k_s + 1), ... until the
 * forwards run out, then the remaining backwards. With r = 0 it is 1F1B.
 *
 * Checks (bad input is an error, never a deadlocked DAG): M >= S (EnvPipe's
 * runtime needs a full warm-up), every r_s >= 0, max_inflight >= 0, and
 * k_s >= k_{s+1} for every s. The last condition is what keeps the orders
 * acyclic: B(s, j) needs B(s+1, j), which stage s+1 issues after
 * F(s+1, k_{s+1} + j - 1), which needs F(s, k_{s+1} + j - 1); stage s has
 * issued only min(M, k_s + j) forwards before B(s, j). EnvPipe's own clamp
 * (docs/envpipe.md, step 3) produces such r. */
erg_status erg__schedule_envpipe_order(const erg_schedule *sched, int S, int M, int s,
                                       erg_instr *out, erg_error *err)
{
    if (M < S)
        return erg_error_set(err, ERG_EINVAL,
                             "the EnvPipe 'ours' schedule needs at least as many microbatches "
                             "as stages (got M=%d < S=%d)",
                             M, S);
    if (sched->max_inflight < 0)
        return erg_error_set(err, ERG_EINVAL, "max_inflight must be >= 0 (got %d)",
                             sched->max_inflight);
    for (int i = 0; i < S && i < ERG_SCHED_MAX_STAGES; i++)
        if (sched->extra_warmup[i] < 0)
            return erg_error_set(err, ERG_EINVAL,
                                 "extra warm-up forwards must be >= 0 (stage %d has %d)", i,
                                 sched->extra_warmup[i]);
    for (int i = 0; i + 1 < S; i++) {
        int a = envpipe_warmup(sched, S, M, i), b = envpipe_warmup(sched, S, M, i + 1);
        if (a < b)
            return erg_error_set(err, ERG_EINVAL,
                                 "extra warm-up forwards deadlock: stage %d runs %d warm-up "
                                 "forwards but stage %d runs %d (each stage needs at least as "
                                 "many as the next)",
                                 i, a, i + 1, b);
    }
    int w = envpipe_warmup(sched, S, M, s);
    int k = 0, f = 0, b = 0;
    while (f < w)
        out[k++] = (erg_instr){.kind = ERG_FORWARD, .microbatch = f++, .stage = s};
    while (f < M) {
        out[k++] = (erg_instr){.kind = ERG_BACKWARD, .microbatch = b++, .stage = s};
        out[k++] = (erg_instr){.kind = ERG_FORWARD, .microbatch = f++, .stage = s};
    }
    while (b < M)
        out[k++] = (erg_instr){.kind = ERG_BACKWARD, .microbatch = b++, .stage = s};
    return ERG_OK;
}
