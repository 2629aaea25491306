/* srv.h: the server object and what every file of the control-plane server shares: requests,
 * responses, logging, clocks, the wire-protocol table and the metrics counters.
 *
 * Layout of src/server/ (one concern per file):
 *   http.c        life cycle, libmicrohttpd front end, housekeeping thread
 *   router.c      srv_dispatch: body parsing outside the lock, routing to a wire, accounting
 *   conns.c       connection slots (in all, per client address), what a barrier can hold
 *   wire_kronos.c the Perseus (kronos) protocol and ergon's /v1 API (same data model)
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
#ifndef ERGON_SERVER_SRV_H
#define ERGON_SERVER_SRV_H

#include "server/server_internal.h"

struct MHD_Daemon;
#define SRV_HIST_BUCKETS 15
#define SRV_HIST_GROUPS 4
extern const double srv_hist_bounds[SRV_HIST_BUCKETS]; /* seconds */
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
    long hist[SRV_HIST_GROUPS][SRV_HIST_BUCKETS + 1]; /* Handling time by route group and bucket. */
    double hist_sum[SRV_HIST_GROUPS];
    /* The database file opened (store.c, srv_store_check): writes are refused while its path
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
extern const srv_wire srv_wire_kronos;
extern const srv_wire srv_wire_zeus; /* wire_zeus.c: Zeus PFO (docs/zeus-protocol.md) */

/* ---- clocks and logs ---- */
double srv_now_mono(void);
double srv_now_wall(void);
/* The local time a job id begins with, as Perseus and Zeus write it: 2026-11-26-13-05-09. */
#define SRV_JOB_ID_TIME_LEN 32
void srv_job_id_time(char ts[SRV_JOB_ID_TIME_LEN]);
void srv_log(erg_server *srv, erg_log_level lvl, const char *event, const char *job_id,
             const char *fmt, ...) ERG_PRINTF(5, 6);

/* ---- router.c ---- */
void srv_dispatch(erg_server *srv, const char *method, const char *path, const char *query,
                  const char *body, size_t len, double max_wait, void *conn, srv_resp *rs);
/* Set rs to status and the compact JSON text of body (consumed; NULL = "null"). */
void srv_respond(srv_resp *rs, int status, json_t *body);
/* Set rs to status and {"<key>": "<formatted message>"}. */
void srv_respond_error(srv_resp *rs, const char *key, int status, const char *fmt, ...)
    ERG_PRINTF(4, 5);
/* Compact JSON text (erg__malloc'd) or NULL. */
char *srv_json_compact(const json_t *v);
/* The value of key in a raw query string (percent-decoding; '+' is a space
 * in queries), truncated to on - 1 bytes. */
bool srv_query_get(const char *q, const char *key, char *out, size_t on);

/* ---- auth.c: access control of the HTTP front end (docs/http-api.md) ---- */
typedef enum { SRV_AUTH_OK, SRV_AUTH_MISSING, SRV_AUTH_WRONG } srv_auth_result;
/* Start-up: keep the token and the networks; refuse a non-loopback host without either
 * (unless opts->insecure) and half a TLS configuration. */
erg_status srv_auth_init(erg_server *srv, const erg_server_opts *o, erg_error *err);
void srv_auth_free(erg_server *srv);
/* The Authorization header (may be NULL) against the token: "Bearer TOKEN", or "Basic" with
 * TOKEN as the password; compared in constant time. */
srv_auth_result srv_auth_token(const erg_server *srv, const char *authorization);
/* Whether the client address is in an --allow-net network. */
struct sockaddr;
bool srv_auth_net_allowed(const erg_server *srv, const struct sockaddr *sa);
/* Routes anyone may use (/healthz), and routes an allowed network may use without the token. */
bool srv_auth_route_open(const char *path);
bool srv_auth_route_net_ok(const erg_server *srv, const char *path);

/* ---- conns.c: the HTTP front's connection slots ---- */
struct sockaddr;
/* Connections kept for other requests when a job's ranks wait at a barrier (a quarter of a
 * limit below 64). */
#define SRV_CONN_RESERVE 16
erg_status srv_conns_init(erg_server *srv, erg_error *err);
void srv_conns_free(erg_server *srv);
/* A new connection gets a slot (refusals are logged, at most one warning a second). */
bool srv_conns_admit(erg_server *srv, const struct sockaddr *sa);
void srv_conns_opened(erg_server *srv, const struct sockaddr *sa);
void srv_conns_closed(erg_server *srv, const struct sockaddr *sa);
/* libmicrohttpd did not take one itself (its own limit, or accept() out of descriptors):
 * logged as the server's refusals are. */
void srv_conns_refused_by_mhd(erg_server *srv, const char *msg);
/* How many ranks of one job can wait at a barrier at once (each holds a connection), and in
 * how (what that number is made of); -1 when there is no HTTP front (direct calls). */
long srv_conns_barrier_capacity(const erg_server *srv, char *how, size_t hn);

/* ---- confine.c ---- */
/* Scheduler arguments from a client: every argument naming a file must resolve inside a
 * --plans-dir directory (*out: a copy with those paths resolved). ERG_EPERM with why
 * (which never quotes a file's content) otherwise. */
erg_status srv_confine_sched_args(erg_server *srv, const json_t *args, json_t **out, char *why,
                                  size_t wn);
erg_status srv_plans_dirs_init(erg_server *srv, const char *const *dirs, size_t n, erg_error *err);
void srv_plans_dirs_free(erg_server *srv);

/* ---- dump.c ---- */
/* Start-up: the dump root exists (created if needed), is a directory and
 * takes new files; else ERG_EIO naming it and the reason. */
erg_status srv_dump_dir_check(erg_server *srv, erg_error *err);
/* ServerInfo as /info shows it and perseus.json holds it. */
json_t *srv_server_info_json(erg_server *srv, const char *sched, const json_t *args, int mode);

/* ---- metrics.c ---- */
void srv_metrics_text(erg_server *srv, srv_resp *rs); /* with mu held */
/* Count an answered request and its handling time (with mu held). */
void srv_metrics_observe(erg_server *srv, int group, int status, double dt);

#endif
