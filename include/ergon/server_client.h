/* server_client.h: an HTTP client of the control-plane server's /v1 API (libcurl), for the run-time
 * client and tests. */
#ifndef ERGON_SERVER_CLIENT_H
#define ERGON_SERVER_CLIENT_H

#include "ergon/ergon.h"
#include "ergon/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Retry and timeout policy. Initialise with erg_srv_client_opts_init. */
typedef struct erg_srv_client_opts {
    double request_timeout_s;  /* One HTTP exchange (default 30 s; schedule waits add theirs). */
    int max_retries;           /* Retries of a failed exchange (default 10). */
    double backoff_initial_s;  /* First retry delay (default 0.05 s), doubled each time... */
    double backoff_max_s;      /* ...up to this (default 2 s), with +-25 % jitter. */
    double schedule_wait_s;    /* Server-side wait per schedule poll (default 30 s). */
    double schedule_timeout_s; /* Total wait at a window barrier (default 86400 s). */
} erg_srv_client_opts;

ERG_API void erg_srv_client_opts_init(erg_srv_client_opts *opts);

/* One connection to a server. Not thread-safe: use one client per thread. */
typedef struct erg_srv_client erg_srv_client;

/* base_url: "http://127.0.0.1:7787" or "https://..." (no trailing slash needed). opts may be
 * NULL for the defaults. */
ERG_API erg_status erg_srv_client_new(const char *base_url, const erg_srv_client_opts *opts,
                                      erg_srv_client **out, erg_error *err);
ERG_API void erg_srv_client_free(erg_srv_client *c);
/* A server with access control (docs/http-api.md, "Access control"): send the token as
 * "Authorization: Bearer <token>" (NULL or "" = none), and verify an https server against
 * this PEM CA bundle (NULL = the system's). erg_srv_client_new takes both from
 * ERGON_SERVE_TOKEN and ERGON_SERVE_CA_FILE when set; a token in the URL
 * (https://user:TOKEN@host:port) works too. 401 and 403 answers are ERG_EPERM. */
ERG_API erg_status erg_srv_client_set_token(erg_srv_client *c, const char *token, erg_error *err);
ERG_API erg_status erg_srv_client_set_ca_file(erg_srv_client *c, const char *path, erg_error *err);
/* Options for bindings that must not mirror erg_srv_client_opts: a heap value with the
 * defaults (NULL when out of memory; free with erg_srv_client_opts_free), and one field set
 * by its name ("max_retries", "request_timeout_s", ...): an unknown name, or a max_retries
 * that is not an integer in int range, is ERG_EINVAL naming it (the values themselves are
 * checked by erg_srv_client_new, as for a struct filled by hand). */
ERG_API erg_srv_client_opts *erg_srv_client_opts_new(void);
ERG_API void erg_srv_client_opts_free(erg_srv_client_opts *opts);
ERG_API erg_status erg_srv_client_opts_set(erg_srv_client_opts *opts, const char *name,
                                           double value, erg_error *err);

/* What rank 0 registers (the Perseus server's JobInfo, docs/http-api.md). Strings are borrowed. */
typedef struct erg_srv_job_desc {
    int pp_degree, dp_degree, tp_degree, world_size;
    const char *framework, *model_name, *partition_method;
    int microbatch_size, num_microbatches;
    const char *scheduler;           /* NULL = the server's default scheduler. */
    const char *scheduler_args_json; /* JSON object or NULL. */
    const char *mode;                /* "frequency", "power limit" or NULL. */
} erg_srv_job_desc;

/* Register a job; *job_id (erg_free) is the server-assigned id. */
ERG_API erg_status erg_srv_client_register_job(erg_srv_client *c, const erg_srv_job_desc *desc,
                                               char **job_id, erg_error *err);
/* The same with the description as a JSON object whose keys are erg_srv_job_desc's field
 * names (scheduler_args as an object or scheduler_args_json as a string; absent ints are 0,
 * absent strings NULL; world_size defaults to pp x dp x tp), for bindings that must not
 * mirror the struct. An unknown key or a wrong type is ERG_EINVAL naming it. */
ERG_API erg_status erg_srv_client_register_job_json(erg_srv_client *c, const char *desc_json,
                                                    char **job_id, erg_error *err);
/* Register one rank: its per-iteration instruction list (the Perseus wire names:
 * "load", "forward", "backward", "p2p", ...) and the power states its GPU
 * supports. Idempotent: a retry with the same data succeeds. */
ERG_API erg_status erg_srv_client_register_rank(erg_srv_client *c, const char *job_id, int rank,
                                                int dp_rank, int pp_rank, int tp_rank,
                                                const char *const *pipe_schedule, size_t n_instrs,
                                                const int *power_states, size_t n_states,
                                                erg_error *err);
/* Wait at the window barrier and fetch this rank's schedule: one power state
 * per pipe instruction in *power_states (erg_free), *n entries, for window
 * *window. When the job has ended normally *done is true and nothing is
 * returned. ERG_ECANCELED when the job was aborted, ERG_ESTATE when its
 * scheduler failed, ERG_ETIMEOUT after schedule_timeout_s. */
ERG_API erg_status erg_srv_client_fetch_schedule(erg_srv_client *c, const char *job_id, int rank,
                                                 int **power_states, size_t *n, long *window,
                                                 bool *done, erg_error *err);

/* A window's measurements of one rank (ProfilingResult), built step by step. */
typedef struct erg_srv_result erg_srv_result;
ERG_API erg_status erg_srv_result_new(int rank, erg_srv_result **out, erg_error *err);
ERG_API void erg_srv_result_free(erg_srv_result *r);
/* Start a new iteration with its total time and energy (this GPU). */
ERG_API erg_status erg_srv_result_add_iteration(erg_srv_result *r, double time_s, double energy_j,
                                                erg_error *err);
/* Where this rank's energies come from: "counter", "integrated", "model", "none" or
 * "mixed" (erg_energy_source_name of the GPU's erg_gpu_energy_info_get). Sent as the
 * result's "energy_source" field; the server keeps it in its dumps (N.prof.json). */
ERG_API erg_status erg_srv_result_set_energy_source(erg_srv_result *r, const char *source,
                                                    erg_error *err);
/* One occurrence of an instruction in the last added iteration. energy_j may
 * be NAN (not measured): then only the time is recorded. */
ERG_API erg_status erg_srv_result_add_sample(erg_srv_result *r, const char *instr, double time_s,
                                             double energy_j, erg_error *err);
/* The time (s, >= 0, finite) this rank waited in the receive before one
 * occurrence of an instruction in the last added iteration, in the order the
 * instructions ran (the k-th call for "forward" is the iteration's k-th
 * forward; 0 for an instruction without a receive). Sent as the result's
 * "wait_breakdown" (docs/http-api.md), which only ergon's EnvPipe scheduler
 * reads; a result without waits is sent exactly as before. */
ERG_API erg_status erg_srv_result_add_wait(erg_srv_result *r, const char *instr, double wait_s,
                                           erg_error *err);
/* Report a window's result. Retries are safe: the server acknowledges a
 * duplicate of an already stored (job, window, rank) result. */
ERG_API erg_status erg_srv_client_report(erg_srv_client *c, const char *job_id, long window,
                                         const erg_srv_result *r, erg_error *err);

/* Tell the server this rank is alive (needed when the server runs with a
 * rank timeout shorter than a window). */
ERG_API erg_status erg_srv_client_heartbeat(erg_srv_client *c, const char *job_id, int rank,
                                            erg_error *err);
/* End the job normally (abort = false) or abort it; reason may be NULL. */
ERG_API erg_status erg_srv_client_end_job(erg_srv_client *c, const char *job_id, bool abort,
                                          const char *reason, erg_error *err);
/* Frontier jobs: set the straggler's slowdown (>= 1; deadline_s <= 0) or an
 * iteration deadline (slowdown <= 0). Takes effect at the next window. */
ERG_API erg_status erg_srv_client_set_straggler(erg_srv_client *c, const char *job_id,
                                                double slowdown, double deadline_s, erg_error *err);
/* Bridge to the run-time client (client.h): turn a fetched schedule into a
 * plan for erg_client_set_plan(c, plan, stage). The states of the
 * "forward" and "backward" entries of pipe_schedule (n entries, as
 * registered) become stage `stage`'s 2M clocks in execution order (the
 * order of a plan's stage); other stages stay 0 (unset). sched may be NULL
 * (1F1B). ERG_EINVAL when the schedule does not have 2 x num_microbatches
 * compute entries. The caller frees *out with erg_plan_free. */
ERG_API erg_status erg_srv_schedule_to_plan(const char *const *pipe_schedule,
                                            const int *power_states, size_t n, int num_stages,
                                            int num_microbatches, int stage,
                                            const erg_schedule *sched, erg_plan **out,
                                            erg_error *err);

/* Any request, with the retry policy (path is sent as given; body may be
 * NULL for GET). *response (erg_free) and *http_status are set when the
 * server answered; the status is ERG_OK for any HTTP answer. */
ERG_API erg_status erg_srv_client_request(erg_srv_client *c, const char *method, const char *path,
                                          const char *body, int *http_status, char **response,
                                          erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
