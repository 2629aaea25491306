/* sched_envpipe.h: the server's EnvPipe scheduler (sched_envpipe.c), hooked into sched.c.
 *
 * It profiles (warm-up windows at the top clock, then one window per clock), plans with
 * erg_plan_envpipe on the profile it measured, serves the plan and after every window
 * applies ONE measured reconfiguration step (erg_envpipe_reconfigure_step on the receive
 * waits the ranks reported, "wait_breakdown") until EnvPipe's termination rule holds
 * (finish_limit + 1 consecutive windows without a change), then serves the final plan.
 * docs/http-api.md, "EnvPipe". Deterministic in its arguments and observed results (crash
 * recovery replays it, jobs.h). */
#ifndef ERGON_SERVER_SCHED_ENVPIPE_H
#define ERGON_SERVER_SCHED_ENVPIPE_H

#include "server/server_internal.h"

typedef struct srv_envpipe srv_envpipe;

/* Values of the arguments (their names and types are checked by sched.c's table). */
erg_status srv_envpipe_check_args(const json_t *args, erg_error *err);
erg_status srv_envpipe_new(const json_t *args, const srv_sched_ctx *ctx, srv_envpipe **out,
                           erg_error *err);
void srv_envpipe_free(srv_envpipe *e);
/* The next window's clocks into out[stage][instruction]; *done when finished. */
erg_status srv_envpipe_next(srv_envpipe *e, int **out, bool *done, erg_error *err);
/* Results (one per stage) of the window last returned by srv_envpipe_next. */
erg_status srv_envpipe_observe(srv_envpipe *e, const srv_result *per_stage, erg_error *err);

#endif
