/* server_internal.h: the one header every file of the control-plane server shares: the
 * server object, requests, responses, logging, clocks, the wire-protocol table, the metrics
 * counters, the Perseus wire enums, results and the scheduler interface.
 *
 * Layout of src/server/ (one concern per file):
 *   http.c        life cycle, libmicrohttpd front end, housekeeping thread
 *   router.c      erg__srv_dispatch: body parsing outside the lock, routing to a wire, accounting
 *   conns.c       connection slots (in all, per client address), what a barrier can hold
 *   wire_perseus.c the Perseus protocol and ergon's /v1 API (same data model)
 *   wire_zeus.c   the Zeus PFO protocol (zeus.h: its configuration and dump layout)
 *   jobs.c/.h     the job, rank and window state machine (wire-neutral)
 *   store.c/.h    SQLite persistence
 *   dump.c        Perseus-layout dump files (deferred when the disk refuses them)
 *   metrics.c     /metrics (Prometheus text) and the latency histogram
 *   fleet.c/.h    the fleet under a power cap (/v1/fleet, its decisions and gauges)
 *   confine.c     --plans-dir: which files clients may name
 *   log.c         clocks and the structured log
 *   sched.c       the scheduler dispatcher over one ops table per class (sched_ops.h), and a
 *                 file per family: sched_fixed.c, sched_profiler.c (+ sched_sparse.c),
 *                 sched_zeus.c, sched_frontier.c, sched_envpipe.c
 *   wire.c        wire types, Python-compatible JSON, results, plan files (read by plan.c)
 * A second wire protocol is another wire_*.c with its srv_wire entry in router.c; it parses
 * its own bodies and formats its own answers, and drives jobs through jobs.h. */
#ifndef ERGON_SERVER_INTERNAL_H
#define ERGON_SERVER_INTERNAL_H

#include "core/internal.h"
#include "ergon/profile.h"
#include "ergon/server.h"

#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>

/* ---- Perseus wire enums ---- */
enum {
    SRV_I_LOAD,
    SRV_I_FORWARD,
    SRV_I_BACKWARD,
    SRV_I_P2P,
    SRV_I_CC,
    SRV_I_STEP,
    SRV_I_LOW,
    SRV_I_HIGH,
    SRV_I_OTHER,
    SRV_I_PURE_BACKWARD,
    /* ergon's zero-bubble / DualPipeV instruction kinds, by erg_instr_kind_name
     * (appended: the Perseus codes above keep their values). */
    SRV_I_BACKWARD_INPUT,
    SRV_I_BACKWARD_WEIGHT,
    SRV_I_OVERLAP_F_B,
    SRV_NUM_INSTR
};
extern const char *const erg__srv_instr_names[SRV_NUM_INSTR];
int erg__srv_instr_code(const char *name); /* -1 when unknown */
/* Whether an instruction is one a plan gives a clock: forward, backward,
 * backward_input, backward_weight, overlap_f_b. */
int erg__srv_instr_is_compute(int code);

enum { SRV_MODE_FREQUENCY = 0, SRV_MODE_POWER = 1, SRV_MODE_ANY = -1 };
const char *erg__srv_mode_name(int mode);
/* The integer field k of a request object, within [lo, hi]; false with the
 * reason ("field k is missing", "... must be an integer", "... out of range")
 * in why. Shared by the wire protocols. */
bool erg__srv_json_get_int(const json_t *o, const char *k, long lo, long hi, long *out, char *why,
                           size_t wn);

/* ---- JobInfo records (docs/http-api.md, "Job record") ----
 * A registration body is at most SRV_JOBINFO_MAX_BYTES (413 before it is parsed, so a
 * registration never parses more), and the fields ergon does not use are kept in the job
 * record only up to SRV_JOBINFO_UNKNOWN_MAX_BYTES of compact JSON in all: a job holds a
 * bounded record in memory and in SQLite whatever its client sent. */
#define SRV_JOBINFO_MAX_BYTES 65536
#define SRV_JOBINFO_UNKNOWN_MAX_BYTES 4096
/* Copy into rec the fields of in that rec lacks and that are not named in skip (NULL-ended,
 * may be NULL), in order, while their compact JSON (key and value) stays within
 * SRV_JOBINFO_UNKNOWN_MAX_BYTES in all. Returns how many were dropped; their names, quoted
 * and with their sizes, go to dropped (truncated to dn). */
int erg__srv_jobinfo_add_unknown(json_t *rec, const json_t *in, const char *const *skip,
                                 char *dropped, size_t dn);

/* ---- Python-compatible JSON text (json.dumps defaults: ", " and ": ",
 * floats as repr(), ensure_ascii) ---- */
erg_status erg__srv_json_py(const json_t *v, erg__buf *out);
/* Maximum nesting depth of a JSON text (strings skipped); for cheap
 * rejection before parsing. */
int erg__srv_json_depth(const char *s, size_t len);

/* ---- a measurement of one window by one rank or (aggregated) stage ---- */
typedef struct srv_series {
    int n_iters;   /* Iterations with samples. */
    int *n_occ;    /* Samples per iteration. */
    double **vals; /* vals[i][k]. */
} srv_series;

typedef struct srv_result {
    int n_iters;
    double *iter_time_s;
    double *iter_energy_j;
    srv_series time_bd[SRV_NUM_INSTR];
    srv_series energy_bd[SRV_NUM_INSTR];
    /* ergon /v1 extension "wait_breakdown": per instruction kind, per
     * iteration, the time the rank waited in the receive before each
     * occurrence (s); empty when the client sent none (EnvPipe scheduler). */
    srv_series wait_bd[SRV_NUM_INSTR];
} srv_result;

/* Validate a ProfilingResult object (already normalised) into r. */
erg_status erg__srv_result_from_json(const json_t *obj, srv_result *r, erg_error *err);
void erg__srv_result_free(srv_result *r);
erg_status erg__srv_result_copy(const srv_result *in, srv_result *out);
/* 3D aggregation: max of times and waits, sum of energies, element-wise over the common shape. */
erg_status erg__srv_result_aggregate(const srv_result *const *in, int n, srv_result *out,
                                     erg_error *err);
/* Mean of the samples of iterations [drop, n) of one series; NAN when empty. */
double erg__srv_series_mean(const srv_series *s, int drop);
double erg__srv_mean(const double *v, int from, int to);

/* ---- schedulers (sched.c dispatches to a file per family: sched_ops.h) ---- */
typedef struct srv_sched_ctx {
    int num_stages;
    int *n_instrs; /* Per stage: length of its pipe_schedule. */
    int **instrs;  /* Per stage: instruction codes. */
    int *states;   /* Supported power states, descending. */
    int n_states;
    int mode;               /* SRV_MODE_FREQUENCY / SRV_MODE_POWER. */
    char *job_dir;          /* Dump directory of the job, or NULL when not dumping. */
    char *profile_csv_name; /* InstructionProfiler's CSV file name. */
    /* Writes a file of the job's dump directory (the server defers it when the
     * disk refuses; it never fails the job). NULL: written directly. */
    erg_status (*write_file)(void *user, const char *name, const char *data, size_t len,
                             erg_error *err);
    void *write_user;
} srv_sched_ctx;

typedef struct srv_sched srv_sched;

typedef struct srv_sched_class {
    const char *name;
    int fixed_mode; /* SRV_MODE_ANY when knob-agnostic. */
    bool targets;   /* Takes straggler targets (erg__srv_sched_set_target). */
} srv_sched_class;

/* Look up a scheduler class by name (NULL when unknown). */
const srv_sched_class *erg__srv_sched_find(const char *name);
/* Check the arguments of a scheduler before any job exists (names, types,
 * files that must exist). */
erg_status erg__srv_sched_check_args(const char *name, const json_t *args, erg_error *err);
erg_status erg__srv_sched_new(const char *name, const json_t *args, const srv_sched_ctx *ctx,
                              srv_sched **out, erg_error *err);
void erg__srv_sched_free(srv_sched *s);
/* The schedule of the next window: per stage one power state per
 * instruction (arrays owned by the scheduler until the next call), or
 * *done = true when the scheduler has finished. */
erg_status erg__srv_sched_next(srv_sched *s, int ***per_stage, bool *done, erg_error *err);
/* Results of the window last returned by erg__srv_sched_next, one per stage. */
erg_status erg__srv_sched_observe(srv_sched *s, const srv_result *per_stage, erg_error *err);
/* Whether v is one of the job's power states. */
bool erg__srv_state_supported(const srv_sched_ctx *c, int v);
/* Warm-up iterations dropped from a window of n: max(1, floor(n * ratio)). */
int erg__srv_drop_of(int n, double ratio);
/* Mean power (energy / time) of iterations [drop, n) of r; NAN when none. */
double erg__srv_iter_power(const srv_result *r, int drop);

/* Frontier: set the straggler target (kind 0 none, 1 slowdown, 2 deadline_s). */
void erg__srv_sched_set_target(srv_sched *s, int kind, double value);
/* Frontier: the plan index used by the last schedule (-1 when none). */
long erg__srv_sched_choice(const srv_sched *s);
/* Plan -> per-instruction expansion (docs/http-api.md, Schedulers). */
erg_status erg__srv_expand(const int *plan, int n_plan, const int *instrs, int n_instrs, int *out,
                           erg_error *err);

/* Parse a plan file in either literal format (kronos: lists of ints; master:
 * lists of ("forward"|"backward", int) pairs) or our JSON: per stage the
 * clocks of its compute instructions in order. */
erg_status erg__srv_plan_load(const char *path, int ***stages, int **lens, int *n_stages,
                              erg_error *err);
void erg__srv_plan_stages_free(int **stages, int *lens, int n);

/* A plan as (instruction name, clock) pairs per stage: the Zeus format as
 * written, or a kronos/JSON plan whose stages' forward/backward names come
 * from the 1F1B order of its stage and microbatch counts. */
typedef struct srv_plan_pairs {
    int n_stages;
    int *lens;     /* pairs per stage */
    char ***names; /* names[s][i] */
    int **freqs;   /* freqs[s][i] */
} srv_plan_pairs;
erg_status erg__srv_plan_load_pairs(const char *path, int hint_stages, srv_plan_pairs *out,
                                    erg_error *err);
void erg__srv_plan_pairs_free(srv_plan_pairs *p);

/* ---- the server object, requests and the files' shared functions ---- */

struct MHD_Daemon;
#define SRV_HIST_BUCKETS 15
#define SRV_HIST_GROUPS 4
extern const double erg__srv_hist_bounds[SRV_HIST_BUCKETS]; /* seconds */
typedef struct srv_job srv_job;
typedef struct srv_net srv_net;

struct erg_server {
    erg_server_opts opts; /* Copy; the strings below own their text. */
    char *host, *db_path, *dump_dir, *scheduler;
    json_t *sched_args;
    int mode;             /* Resolved default mode (SRV_MODE_ANY if none). */
    char *zeus_scheduler; /* Zeus jobs' "zeus:" class, NULL when not configured. */
    json_t *zeus_sched_args;
    const char *zeus_source; /* Where the Zeus configuration came from (static text). */
    char *zeus_off;          /* Why Zeus jobs are refused (NULL when served). */
    pthread_mutex_t mu;      /* Protects everything below and the database. */
    pthread_mutex_t log_mu;  /* Serialises log callbacks. */
    sqlite3 *db;
    sqlite3 *ckpt_db;     /* Housekeeping thread's connection (checkpoints). */
    bool ckpt_ready;      /* ckpt_db has read the database (knows it is in WAL mode). */
    int lock_fd;          /* <db>.lock, held exclusively while the server lives (-1). */
    unsigned conns;       /* Open HTTP connections (atomic; http.c). */
    unsigned conn_limit;  /* Their bound. */
    size_t body_inflight; /* Request body bytes held by connections (atomic). */
    size_t body_budget;   /* Their bound. */
    char *token;          /* Access token (auth.c), NULL when none. */
    size_t token_len;
    srv_net *nets; /* --allow-net client networks. */
    size_t n_nets;
    char *tls_cert, *tls_key; /* PEM text when serving https, else NULL. */
    char **plans_dirs;        /* --plans-dir, resolved (realpath). */
    size_t n_plans_dirs;
    srv_job *jobs;
    bool stopping;
    struct MHD_Daemon *mhd;
    int port;
    /* conns.c: what one client address may hold, the descriptor limit that lowered
     * conn_limit (0: none did), open connections per address. */
    unsigned conn_per_ip;
    unsigned long conn_nofile;
    struct srv_conn_table *conn_tab;
    pthread_t hk; /* Housekeeping thread. */
    bool hk_running;
    pthread_cond_t hk_cond;
    long windows_completed, results_total, evicted_total;
    long requests_by_class[6];
    /* Set by the HTTP front end: suspend a connection / resume it with an
     * answer (body ownership passes to wake). Called with mu held. */
    void (*park)(void *conn);
    void (*wake)(void *conn, int status, char *body, const char *ctype);
    /* Test hooks (tests/unit/test_server_burst.c), set before erg_server_start: the number of
     * HTTP event threads (0: the default, http.c) and a function every request passes through
     * in its event thread just before it is handled (NULL: none). */
    unsigned http_threads;
    void (*request_hook)(erg_server *srv, const char *url);
    long hist[SRV_HIST_GROUPS][SRV_HIST_BUCKETS + 1]; /* Handling time by route group and bucket. */
    double hist_sum[SRV_HIST_GROUPS];
    /* The database file opened (store.c, erg__srv_store_check): writes are refused while its path
     * names another file or none. */
    unsigned long long db_dev, db_ino;
    bool db_ident;           /* db_dev/db_ino are known (a file, not :memory:). */
    bool db_gone;            /* The path is not that file now: writes are refused. */
    struct srv_fleet *fleet; /* fleet.c: the power cap, its members and decisions */
};

/* The answer to one request. */
typedef struct srv_resp {
    int status;
    char *body; /* erg__malloc'd */
    const char *ctype;
    double waited_s; /* Time spent waiting at a barrier. */
    bool parked;     /* The request was suspended; no answer yet. */
} srv_resp;

/* A request body parsed (and, for results, validated) before the server
 * lock is taken, so the expensive part of a request runs in parallel. */
typedef struct srv_body {
    size_t len;
    json_t *v;                   /* Parsed body or NULL. */
    char err[ERG_ERROR_MSG_LEN]; /* Why it did not parse. */
    int status;                  /* Its status (413), 0: the wire's validation status. */
    json_t *result;              /* Results: normalised ProfilingResult. */
    srv_result parsed;           /* Results: its numbers. */
    bool have_parsed;
    long rank; /* Results: the rank field (>= 0). */
} srv_body;

/* One request as the wires see it (under the server lock). */
typedef struct srv_req {
    const char *method, *path, *query; /* query: raw, without '?', may be NULL */
    bool get, post;
    const srv_body *body;
    double max_wait; /* Longest barrier wait the caller allows (s). */
    void *conn;      /* HTTP connection (may be parked), NULL for direct calls. */
} srv_req;

/* A wire protocol: route() answers the request (true) or leaves it to the
 * next wire (false). Runs with the server lock held. */
typedef struct srv_wire {
    const char *name;
    bool (*route)(erg_server *srv, const srv_req *rq, srv_resp *rs);
} srv_wire;
extern const srv_wire erg__srv_wire_perseus;
extern const srv_wire erg__srv_wire_zeus; /* wire_zeus.c: Zeus PFO (docs/zeus-protocol.md) */

/* ---- clocks and logs ---- */
double erg__srv_now_mono(void);
double erg__srv_now_wall(void);
/* The local time a job id begins with, as Perseus and Zeus write it: 2026-11-26-13-05-09. */
#define SRV_JOB_ID_TIME_LEN 32
void erg__srv_job_id_time(char ts[SRV_JOB_ID_TIME_LEN]);
void erg__srv_log(erg_server *srv, erg_log_level lvl, const char *event, const char *job_id,
                  const char *fmt, ...) ERG_PRINTF(5, 6);

/* ---- router.c ---- */
void erg__srv_dispatch(erg_server *srv, const char *method, const char *path, const char *query,
                       const char *body, size_t len, double max_wait, void *conn, srv_resp *rs);
/* Set rs to status and the compact JSON text of body (consumed; NULL = "null"). */
void erg__srv_respond(srv_resp *rs, int status, json_t *body);
/* Set rs to status and {"<key>": "<formatted message>"}. */
void erg__srv_respond_error(srv_resp *rs, const char *key, int status, const char *fmt, ...)
    ERG_PRINTF(4, 5);
/* Compact JSON text (erg__malloc'd) or NULL. */
char *erg__srv_json_compact(const json_t *v);
/* The value of key in a raw query string (percent-decoding; '+' is a space
 * in queries), truncated to on - 1 bytes. */
bool erg__srv_query_get(const char *q, const char *key, char *out, size_t on);

/* ---- auth.c: access control of the HTTP front end (docs/http-api.md) ---- */
typedef enum { SRV_AUTH_OK, SRV_AUTH_MISSING, SRV_AUTH_WRONG } srv_auth_result;
/* Start-up: keep the token and the networks; refuse a non-loopback host without either
 * (unless opts->insecure) and half a TLS configuration. */
erg_status erg__srv_auth_init(erg_server *srv, const erg_server_opts *o, erg_error *err);
void erg__srv_auth_free(erg_server *srv);
/* The Authorization header (may be NULL) against the token: "Bearer TOKEN", or "Basic" with
 * TOKEN as the password; compared in constant time. */
srv_auth_result erg__srv_auth_token(const erg_server *srv, const char *authorization);
/* Whether the client address is in an --allow-net network. */
struct sockaddr;
bool erg__srv_auth_net_allowed(const erg_server *srv, const struct sockaddr *sa);
/* Routes anyone may use (/healthz), and routes an allowed network may use without the token. */
bool erg__srv_auth_route_open(const char *path);
bool erg__srv_auth_route_net_ok(const erg_server *srv, const char *path);

/* ---- conns.c: the HTTP front's connection slots ---- */
struct sockaddr;
/* Connections kept for other requests when a job's ranks wait at a barrier (a quarter of a
 * limit below 64). */
#define SRV_CONN_RESERVE 16
erg_status erg__srv_conns_init(erg_server *srv, erg_error *err);
void erg__srv_conns_free(erg_server *srv);
/* A new connection gets a slot (refusals are logged, at most one warning a second). */
bool erg__srv_conns_admit(erg_server *srv, const struct sockaddr *sa);
void erg__srv_conns_opened(erg_server *srv, const struct sockaddr *sa);
void erg__srv_conns_closed(erg_server *srv, const struct sockaddr *sa);
/* libmicrohttpd did not take one itself (its own limit, or accept() out of descriptors):
 * logged as the server's refusals are. */
void erg__srv_conns_refused_by_mhd(erg_server *srv, const char *msg);
/* How many ranks of one job can wait at a barrier at once (each holds a connection), and in
 * how (what that number is made of); -1 when there is no HTTP front (direct calls). */
long erg__srv_conns_barrier_capacity(const erg_server *srv, char *how, size_t hn);

/* ---- confine.c ---- */
/* Scheduler arguments from a client: every argument naming a file must resolve inside a
 * --plans-dir directory (*out: a copy with those paths resolved). ERG_EPERM with why
 * (which never quotes a file's content) otherwise. */
erg_status erg__srv_confine_sched_args(erg_server *srv, const json_t *args, json_t **out, char *why,
                                       size_t wn);
erg_status erg__srv_plans_dirs_init(erg_server *srv, const char *const *dirs, size_t n,
                                    erg_error *err);
void erg__srv_plans_dirs_free(erg_server *srv);

/* ---- dump.c ---- */
/* Start-up: the dump root exists (created if needed), is a directory and
 * takes new files; else ERG_EIO naming it and the reason. */
erg_status erg__srv_dump_dir_check(erg_server *srv, erg_error *err);
/* ServerInfo as /info shows it and perseus.json holds it. */
json_t *erg__srv_server_info_json(erg_server *srv, const char *sched, const json_t *args, int mode);

/* ---- metrics.c ---- */
void erg__srv_metrics_text(erg_server *srv, srv_resp *rs); /* with mu held */
/* Count an answered request and its handling time (with mu held). */
void erg__srv_metrics_observe(erg_server *srv, int group, int status, double dt);

#endif
