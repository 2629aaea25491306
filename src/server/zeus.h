/* zeus.h: the Zeus PFO wire protocol's pieces that other server files need: which jobs are
 * Zeus jobs, the Zeus server configuration, and the Zeus dump layout (docs/zeus-protocol.md). */
#ifndef ERGON_SERVER_ZEUS_H
#define ERGON_SERVER_ZEUS_H

#include "server/jobs.h"

#include <string.h>

/* Zeus jobs run the "zeus:"-prefixed scheduler classes (sched.c). */
static inline bool srv_job_is_zeus(const srv_job *j)
{
    return j->sched_name && !strncmp(j->sched_name, "zeus:", 5);
}

/* Validate and keep opts->zeus_scheduler / zeus_scheduler_args (start-up). */
erg_status srv_zeus_config(erg_server *srv, const erg_server_opts *opts, erg_error *err);
void srv_zeus_config_free(erg_server *srv);

/* Dumps in Zeus's layout: ranks.json records with RankInfo's fields only,
 * N.sched.json as FrequencySchedules, the InstructionProfiler CSV name with
 * Python's "None" for absent fields. */
json_t *srv_zeus_rank_dump(const srv_job *j, const json_t *record);
json_t *srv_zeus_sched_dump(const srv_job *j);
char *srv_zeus_csv_name(const srv_job *j);

#endif
