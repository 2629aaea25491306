/* schedule.c: per-stage instruction orders of the supported pipeline schedules. */
#include "core/internal.h"
#include "ergon/pipeline.h"

#include <string.h>
#include <strings.h>

erg_status erg_schedule_parse(const char *name, erg_schedule_kind *out, erg_error *err)
{
    if (name && !strcasecmp(name, "1f1b"))
        *out = ERG_SCHED_1F1B;
    else if (name && !strcasecmp(name, "gpipe"))
        *out = ERG_SCHED_GPIPE;
    else if (name && (!strcasecmp(name, "ours") || !strcasecmp(name, "envpipe")))
        *out = ERG_SCHED_ENVPIPE;
    else
        return erg_error_set(err, ERG_EINVAL, "unknown schedule '%s' (use 1f1b, gpipe or ours)",
                             name ? name : "");
    return ERG_OK;
}

const char *erg_schedule_name(erg_schedule_kind kind)
{
    switch (kind) {
    case ERG_SCHED_1F1B:
        return "1f1b";
    case ERG_SCHED_GPIPE:
        return "gpipe";
    case ERG_SCHED_ENVPIPE:
        return "ours";
    }
    return "unknown";
}

/* Synchronous 1F1B as DeepSpeed runs it (lowtime-spec §2.1): stage s does
 * w = min(S - s, M) warm-up forwards, then alternates backward/forward until
 * the forwards run out, then drains the backwards. */
static void order_1f1b(int S, int M, int s, int warmup, erg_instr *out)
{
    int w = warmup < M ? warmup : M;
    int k = 0, f = 0, b = 0;
    (void)S;
    while (f < w)
        out[k++] = (erg_instr){ERG_FORWARD, f++};
    while (f < M) {
        out[k++] = (erg_instr){ERG_BACKWARD, b++};
        out[k++] = (erg_instr){ERG_FORWARD, f++};
    }
    while (b < M)
        out[k++] = (erg_instr){ERG_BACKWARD, b++};
}

erg_status erg_schedule_envpipe_order(const erg_schedule *sched, int S, int M, int s,
                                      erg_instr *out, erg_error *err);

erg_status erg_schedule_stage_order(const erg_schedule *sched, int num_stages,
                                    int num_microbatches, int stage, erg_instr *out,
                                    erg_error *err)
{
    if (!sched || !out)
        return erg_error_set(err, ERG_EINVAL, "NULL argument");
    if (num_stages < 1 || num_microbatches < 1)
        return erg_error_set(err, ERG_EINVAL,
                             "a pipeline needs at least 1 stage and 1 microbatch (got S=%d, M=%d)",
                             num_stages, num_microbatches);
    if (stage < 0 || stage >= num_stages)
        return erg_error_set(err, ERG_EINVAL, "stage %d out of range (0..%d)", stage,
                             num_stages - 1);
    int S = num_stages, M = num_microbatches;
    switch (sched->kind) {
    case ERG_SCHED_1F1B:
        order_1f1b(S, M, stage, S - stage, out);
        return ERG_OK;
    case ERG_SCHED_GPIPE:
        for (int m = 0; m < M; m++) {
            out[m] = (erg_instr){ERG_FORWARD, m};
            out[M + m] = (erg_instr){ERG_BACKWARD, m};
        }
        return ERG_OK;
    case ERG_SCHED_ENVPIPE:
        return erg_schedule_envpipe_order(sched, S, M, stage, out, err);
    }
    return erg_error_set(err, ERG_EINVAL, "unknown schedule kind %d", (int)sched->kind);
}
