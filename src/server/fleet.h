/* fleet.h: the server's fleet (docs/fleet.md): every running job of the Frontier scheduler is a
 * member; under an operator's power cap the server assigns each member a point of its frontier
 * (erg_fleet_assign) and re-solves when a member arrives, leaves or straggles, or when the cap
 * or a weight changes. A member's assignment reaches its scheduler as a target of kind
 * SRV_TARGET_FLEET (the plan index), stored per window like a straggler target, so a restart
 * replays it. A Zeus member cannot switch within a window (its client takes one plan and keeps
 * it): it is counted at the plan its window runs, fixed for the solver, except at its arrival
 * and when its ranks have reported the window. Decisions, the cap and the weights are in the
 * database (tables fleet_*). All functions run with the server lock held. */
#ifndef ERGON_SERVER_FLEET_H
#define ERGON_SERVER_FLEET_H

#include "server/server_internal.h"

/* The target kind of a fleet assignment: value = the plan index, -1 = none (the job's own
 * target again). */
#define SRV_TARGET_FLEET 3

struct srv_job;
/* Start-up (before the jobs are restored): the tables, the cap and the weights. */
erg_status erg__srv_fleet_open(erg_server *srv, erg_error *err);
void erg__srv_fleet_free(erg_server *srv);
/* A job started running (its scheduler is built; replay: restored after a restart). */
void erg__srv_fleet_job_started(erg_server *srv, struct srv_job *j, bool replay);
/* Every rank of a job reported its result of the current window, whose successor is not
 * computed yet: a Zeus member, counted until now at the plan its window runs, is free to move,
 * and the fleet decides its next window's point (a decision of reason "window"). */
void erg__srv_fleet_window_reported(erg_server *srv, struct srv_job *j);
/* A job ended (done, failed, aborted). */
void erg__srv_fleet_job_ended(erg_server *srv, struct srv_job *j);
/* A straggler target (kind 1 slowdown, 2 deadline_s) was set on a job. */
void erg__srv_fleet_job_target(erg_server *srv, struct srv_job *j, int kind, double value);
/* /v1/fleet routes (GET /v1/fleet, POST /v1/fleet, POST /v1/fleet/jobs/{id}); false when the
 * path is not one. */
bool erg__srv_fleet_route(erg_server *srv, const srv_req *rq, srv_resp *rs);
/* The fleet's gauges, appended to /metrics. */
void erg__srv_fleet_metrics(erg_server *srv, erg__buf *b);

#endif
