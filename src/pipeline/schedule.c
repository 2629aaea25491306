/* schedule.c: per-stage instruction orders of the supported pipeline schedules. */
#include "core/internal.h"
#include "ergon/pipeline.h"

#include <string.h>

static const erg__name sched_names[] = {
    {"1f1b", ERG_SCHED_1F1B},
    {"gpipe", ERG_SCHED_GPIPE},
    {"ours", ERG_SCHED_ENVPIPE},
    {"envpipe", ERG_SCHED_ENVPIPE},
    {"interleaved-1f1b", ERG_SCHED_INTERLEAVED_1F1B},
    {"interleaved1f1b", ERG_SCHED_INTERLEAVED_1F1B},
    {"looped-bfs", ERG_SCHED_LOOPED_BFS},
    {"loopedbfs", ERG_SCHED_LOOPED_BFS},
    {"interleaved-zb", ERG_SCHED_INTERLEAVED_ZB},
    {"interleavedzerobubble", ERG_SCHED_INTERLEAVED_ZB},
    {"zbv", ERG_SCHED_ZBV},
    {"zbvzerobubble", ERG_SCHED_ZBV},
    {"dualpipev", ERG_SCHED_DUALPIPEV},
};

erg_status erg_schedule_parse(const char *name, erg_schedule_kind *out, erg_error *err)
{
    int kind = 0;
    if (erg__name_lookup(ERG__NAMES(sched_names), name, &kind)) {
        *out = (erg_schedule_kind)kind;
        return ERG_OK;
    }
    return erg_error_set(err, ERG_EINVAL,
                         "unknown schedule '%s' (use 1f1b, gpipe, ours, interleaved-1f1b, "
                         "looped-bfs, interleaved-zb, zbv or dualpipev; or --schedule-file)",
                         name ? name : "");
}

int erg_schedule_chunks(const erg_schedule *sched)
{
    if (!sched)
        return 1;
    if (sched->kind == ERG_SCHED_FILE && sched->order)
        return erg_order_num_stages(sched->order) / erg_order_num_ranks(sched->order);
    if (sched->chunks > 0)
        return sched->chunks;
    switch (sched->kind) {
    case ERG_SCHED_1F1B:
    case ERG_SCHED_GPIPE:
    case ERG_SCHED_ENVPIPE:
    case ERG_SCHED_FILE:
        return 1;
    default:
        return 2;
    }
}

double erg_schedule_backward_split(const erg_schedule *sched)
{
    return sched && sched->backward_split > 0 && sched->backward_split < 1 ? sched->backward_split
                                                                           : 0.5;
}

/* ---- schedule values for bindings: heap value and field accessors ---- */

erg_schedule *erg_schedule_new(erg_schedule_kind kind)
{
    erg_schedule *s = erg__calloc(1, sizeof *s);
    if (s)
        s->kind = kind;
    return s;
}

void erg_schedule_free(erg_schedule *sched)
{
    erg__free(sched);
}

erg_schedule_kind erg_schedule_get_kind(const erg_schedule *sched)
{
    return sched->kind;
}

int erg_schedule_get_max_inflight(const erg_schedule *sched)
{
    return sched->max_inflight;
}

void erg_schedule_set_max_inflight(erg_schedule *sched, int max_inflight)
{
    sched->max_inflight = max_inflight;
}

int erg_schedule_get_chunks(const erg_schedule *sched)
{
    return sched->chunks;
}

void erg_schedule_set_chunks(erg_schedule *sched, int chunks)
{
    sched->chunks = chunks;
}

int erg_schedule_get_extra_warmup(const erg_schedule *sched, int stage)
{
    return stage >= 0 && stage < ERG_SCHED_MAX_STAGES ? sched->extra_warmup[stage] : 0;
}

erg_status erg_schedule_set_extra_warmup(erg_schedule *sched, int stage, int r, erg_error *err)
{
    if (stage < 0 || stage >= ERG_SCHED_MAX_STAGES)
        return erg_error_set(err, ERG_EINVAL,
                             "extra warm-up of stage %d: a schedule carries stages 0..%d", stage,
                             ERG_SCHED_MAX_STAGES - 1);
    sched->extra_warmup[stage] = r;
    return ERG_OK;
}

int erg_schedule_is_vshape(erg_schedule_kind kind)
{
    return kind == ERG_SCHED_ZBV || kind == ERG_SCHED_DUALPIPEV;
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
    case ERG_SCHED_INTERLEAVED_1F1B:
        return "interleaved-1f1b";
    case ERG_SCHED_LOOPED_BFS:
        return "looped-bfs";
    case ERG_SCHED_INTERLEAVED_ZB:
        return "interleaved-zb";
    case ERG_SCHED_ZBV:
        return "zbv";
    case ERG_SCHED_DUALPIPEV:
        return "dualpipev";
    case ERG_SCHED_FILE:
        return "file";
    }
    return "unknown";
}

/* Synchronous 1F1B as DeepSpeed runs it (docs/schedules.md): stage s does
 * w = min(S - s, M) warm-up forwards, then alternates backward/forward until
 * the forwards run out, then drains the backwards. */
static void order_1f1b(int S, int M, int s, int warmup, erg_instr *out)
{
    int w = warmup < M ? warmup : M;
    int k = 0, f = 0, b = 0;
    (void)S;
    while (f < w)
        out[k++] = (erg_instr){.kind = ERG_FORWARD, .microbatch = f++, .stage = s};
    while (f < M) {
        out[k++] = (erg_instr){.kind = ERG_BACKWARD, .microbatch = b++, .stage = s};
        out[k++] = (erg_instr){.kind = ERG_FORWARD, .microbatch = f++, .stage = s};
    }
    while (b < M)
        out[k++] = (erg_instr){.kind = ERG_BACKWARD, .microbatch = b++, .stage = s};
}

erg_status erg__schedule_envpipe_order(const erg_schedule *sched, int S, int M, int s,
                                       erg_instr *out, erg_error *err);

erg_status erg_schedule_stage_order(const erg_schedule *sched, int num_stages, int num_microbatches,
                                    int stage, erg_instr *out, erg_error *err)
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
            out[m] = (erg_instr){.kind = ERG_FORWARD, .microbatch = m, .stage = stage};
            out[M + m] = (erg_instr){.kind = ERG_BACKWARD, .microbatch = m, .stage = stage};
        }
        return ERG_OK;
    case ERG_SCHED_ENVPIPE:
        return erg__schedule_envpipe_order(sched, S, M, stage, out, err);
    default:
        return erg_error_set(err, ERG_EINVAL,
                             "schedule %s has no per-stage F/B order (use erg_order_new)",
                             erg_schedule_name(sched->kind));
    }
    return erg_error_set(err, ERG_EINVAL, "unknown schedule kind %d", (int)sched->kind);
}
