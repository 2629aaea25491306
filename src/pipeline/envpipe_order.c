/* envpipe_order.c: EnvPipe's "ours" schedule (envpipe-spec); see issue 3. */
#include "core/internal.h"
#include "ergon/pipeline.h"

erg_status erg_schedule_envpipe_order(const erg_schedule *sched, int S, int M, int s,
                                      erg_instr *out, erg_error *err);

erg_status erg_schedule_envpipe_order(const erg_schedule *sched, int S, int M, int s,
                                      erg_instr *out, erg_error *err)
{
    (void)sched;
    (void)S;
    (void)M;
    (void)s;
    (void)out;
    return erg_error_set(err, ERG_ENOTSUP, "the EnvPipe 'ours' schedule is not available yet");
}
