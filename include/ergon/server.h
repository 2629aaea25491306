/* server.h: the control-plane server (Perseus/kronos and Zeus PFO protocols plus our /v1 API) used
 * by `ergon serve`. */
#ifndef ERGON_SERVER_H
#define ERGON_SERVER_H

#include "ergon/ergon.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Log levels of the server's structured log (same names as Perseus). */
typedef enum erg_log_level {
    ERG_LOG_DEBUG = 0,
    ERG_LOG_INFO = 1,
    ERG_LOG_WARNING = 2,
    ERG_LOG_ERROR = 3,
} erg_log_level;

/* Receives one structured log record: a single-line JSON object
 * ({"ts":..., "level":..., "event":..., ...}) without a newline. Called from
 * server threads (serialised by the server); must not call back into it. */
typedef void (*erg_log_fn)(void *user, erg_log_level level, const char *json_line);

/* How the server is configured. Initialise with erg_server_opts_init, then
 * change fields. Strings are borrowed: they must live until erg_server_new
 * returns (the server copies them). */
typedef struct erg_server_opts {
    const char *host;            /* Address to bind (default "127.0.0.1"). */
    int port;                    /* TCP port (default 7787; 0 = any free port). */
    const char *db_path;         /* SQLite file (WAL mode); ":memory:" = no persistence. */
    const char *dump_dir;        /* Root of the per-job dumps (default "dump"). */
    bool dump_data;              /* Write perseus.json, N.sched.json, N.prof.json (default true). */
    const char *scheduler;       /* Default scheduler class name; NULL (default): the Zeus
                                    configuration's counterpart if there is one, else
                                    "AllMaxFrequency" (docs/zeus-protocol.md §11). */
    const char *scheduler_args;  /* JSON object of scheduler arguments (NULL = "{}"). */
    const char *mode;            /* "frequency", "power limit" or NULL (= from the scheduler). */
    erg_log_level log_level;     /* Records below this level are dropped (default INFO). */
    double rank_timeout_s;       /* A silent rank aborts its job after this long; 0 = never. */
    double job_idle_timeout_s;   /* Jobs without requests for this long are evicted (604800). */
    double connection_timeout_s; /* Idle/slow HTTP connections are closed after this (30). */
    size_t max_body_bytes;       /* Larger request bodies get 413 (default 16 MiB). */
    unsigned max_connections;    /* Concurrent connections (default 4096; at most the
                                    descriptor limit less 128). */
    unsigned max_connections_per_ip; /* Of those, from one address (0 = half of them). */
    int max_jobs;                    /* Jobs held at once; more get 503 (default 1000). */
    bool durable_sync; /* SQLite synchronous=FULL (power-loss safe) instead of NORMAL. */
    /* Directories whose files clients may name in per-job scheduler arguments
     * (solution_path, frontier_dir, ...); none by default: only the start-up
     * scheduler_args may name files. */
    const char *const *plans_dirs;
    size_t n_plans_dirs;
    erg_log_fn log; /* Optional log sink (NULL = no logs). */
    void *log_user;
    /* Zeus PFO jobs (docs/zeus-protocol.md): their scheduler class
     * (PointSolution, PointSolution3D, InstructionProfiler(3D)) and its
     * arguments as a JSON object. Both NULL (default): Zeus jobs are refused
     * with a message saying how to configure them. */
    const char *zeus_scheduler;
    const char *zeus_scheduler_args;
    /* Access control of the HTTP front end (docs/http-api.md, "Access control"); requests
     * through erg_server_handle are not checked. auth_token: every route but /healthz needs
     * "Authorization: Bearer <token>" (or HTTP Basic credentials whose password is the
     * token); 16-4096 printable characters. allow_nets: CIDR networks ("10.0.0.0/8",
     * "fd00::/8") whose clients may use the Perseus and Zeus routes without the token (every
     * route when there is no token). A host other than loopback needs a token or networks
     * unless insecure is set. */
    const char *auth_token;
    const char *const *allow_nets;
    size_t n_allow_nets;
    bool insecure;
    /* HTTPS through libmicrohttpd (GnuTLS): PEM certificate chain and private key files;
     * both or neither. */
    const char *tls_cert_file;
    const char *tls_key_file;
} erg_server_opts;

ERG_API void erg_server_opts_init(erg_server_opts *opts);

typedef struct erg_server erg_server;

/* Open (or create) the database, validate the scheduler configuration, and
 * restore every job it holds (replaying the schedulers over the stored
 * results). Does not listen yet. ERG_EINVAL for a bad option or scheduler
 * configuration, ERG_EDB for a database error. */
ERG_API erg_status erg_server_new(const erg_server_opts *opts, erg_server **out, erg_error *err);
/* Remove a database that no server holds: db_path, its SQLite side files (-wal, -shm) and its
 * lock file (.lock); a file that is not there is no error. ERG_EDB when a server holds it
 * (naming its process, as erg_server_new does) or a file cannot be removed (naming it);
 * ":memory:" is a no-op. */
ERG_API erg_status erg_server_db_remove(const char *db_path, erg_error *err);
/* Start listening (HTTP threads and the housekeeping thread). */
ERG_API erg_status erg_server_start(erg_server *srv, erg_error *err);
/* The bound TCP port after erg_server_start (useful with port 0), else 0. */
ERG_API int erg_server_port(const erg_server *srv);
/* One record in the server's structured log (ts, level, event, msg), through
 * opts.log, e.g. the front end's shutdown line. */
ERG_API void erg_server_log(erg_server *srv, erg_log_level level, const char *event,
                            const char *msg);
/* Stop listening; blocked requests are answered 503. Safe to call twice. */
ERG_API void erg_server_stop(erg_server *srv);
/* Stop and release everything. NULL is a no-op. */
ERG_API void erg_server_free(erg_server *srv);

/* Handle one HTTP request without a socket (tests, fuzzing, embedding).
 * method: "GET"/"POST"; path: decoded URL path; query: the raw query string
 * without '?' (may be NULL); body: request body (may be NULL when len 0).
 * max_wait_s bounds how long a schedule request may wait at the window
 * barrier (0 = answer at once; a pending barrier then gives 202 on /v1 and
 * 503 on the Perseus route). On return *http_status is the HTTP status,
 * *body a NUL-terminated response the caller frees with erg_free and
 * *content_type a static string. Returns ERG_ENOMEM only when no response
 * could be built. Thread-safe. */
ERG_API erg_status erg_server_handle(erg_server *srv, const char *method, const char *path,
                                     const char *query, const char *body, size_t len,
                                     double max_wait_s, int *http_status, char **resp_body,
                                     const char **content_type);

#ifdef __cplusplus
}
#endif
#endif
