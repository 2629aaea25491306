/* zeus.h: the Zeus PFO wire protocol's pieces that other server files need: which jobs are
 * Zeus jobs, the Zeus server configuration, and the Zeus dump layout (docs/zeus-protocol.md). */
#ifndef ERGON_SERVER_ZEUS_H
#define ERGON_SERVER_ZEUS_H

#include "server/jobs.h"

#include <string.h>

/* Zeus jobs run the "zeus:"-prefixed scheduler classes (sched.c's table). */
static inline bool srv_job_is_zeus(const srv_job *j)
{
    return j->sched_name && !strncmp(j->sched_name, "zeus:", 5);
}

/* One configuration serves both protocols (docs/zeus-protocol.md, "One configuration").
 * Start-up, in this order: erg__srv_zeus_config validates and keeps opts->zeus_scheduler /
 * zeus_scheduler_args (nothing when neither is given); when the server's scheduler was not
 * given, erg__srv_zeus_to_perseus gives its counterpart (*name static, the arguments new);
 * erg__srv_zeus_reconcile then either refuses a Zeus configuration that differs from a given server
 * scheduler (ERG_EINVAL naming both) or derives the Zeus one from the server's (srv->zeus_off
 * says why when Zeus jobs cannot be served). */
erg_status erg__srv_zeus_config(erg_server *srv, const erg_server_opts *opts, erg_error *err);
json_t *erg__srv_zeus_to_perseus(const erg_server *srv, const char **name);
erg_status erg__srv_zeus_reconcile(erg_server *srv, bool perseus_given, erg_error *err);
/* /info's "zeus" object: served, scheduler, arguments, where they came from, the plan
 * (real path, format, stages); or the reason Zeus jobs are refused. */
json_t *erg__srv_zeus_info(const erg_server *srv);
/* One "zeus" log record saying the same. */
void erg__srv_zeus_log_config(erg_server *srv);
void erg__srv_zeus_config_free(erg_server *srv);

/* Dumps in Zeus's layout: ranks.json records with RankInfo's fields only,
 * N.sched.json as FrequencySchedules, the InstructionProfiler CSV name with
 * Python's "None" for absent fields. */
json_t *erg__srv_zeus_rank_dump(const srv_job *j, const json_t *record);
json_t *erg__srv_zeus_sched_dump(const srv_job *j);
char *erg__srv_zeus_csv_name(const srv_job *j);

#endif
