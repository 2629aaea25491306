/* daemon_impl.h: the ergond object, private to src/daemon: its limits, the connection and lease
 * records, the fields of erg_daemon, and what its files call on each other. Who writes what:
 * daemon.c builds and frees the object and owns the log; loop.c owns the socket and the
 * connections; endpoints.c answers requests; leases.c owns the lease table, its state file
 * and start-up recovery. The tests and the fuzz target use daemon_internal.h, not this. */
#ifndef ERGON_DAEMON_IMPL_H
#define ERGON_DAEMON_IMPL_H

#include "daemon/daemon_internal.h"

/* Limits. CONNECTION LIMITS: at most MAX_CONNS connections; one uid may hold at most
 * conns_per_uid of them, and uids other than root together never take the last ROOT_RESERVED
 * slots, so one local user cannot lock others or root out. */
#define MAX_CONNS 64
#define ROOT_RESERVED 8
#define DEFAULT_CONNS_PER_UID 8
#define MAX_LEASES 256
#define CONN_TIMEOUT_S 5.0
#define CONN_BUF (ERG__HTTP_MAX_HEAD + ERG__HTTP_MAX_BODY)

enum { CH_SM = 1, CH_MEM = 2, CH_PL = 4 };

typedef struct conn {
    int fd;
    erg__peer peer;
    double deadline;
    size_t len;
    char buf[CONN_BUF];
} conn;

typedef struct lease {
    pid_t pid;
    unsigned long long start; /* start time of pid (clock ticks after boot), 0 if unknown */
    unsigned uid;
    int pidfd;        /* -1: fall back to kill(pid, 0) */
    uint8_t what[64]; /* per GPU: CH_* bits this process changed */
    bool used;
} lease;

struct erg_daemon {
    erg_gpu *gpu;
    erg__config cfg;
    erg_daemon_log_fn log;
    void *log_user;
    int listen_fd;
    char *socket_path;
    char *lock_file; /* writes refused while it exists (NULL = no admin lock) */
    int stop_pipe[2];
    conn *conns[MAX_CONNS];
    lease leases[MAX_LEASES];
    uint64_t requests;
    int conns_per_uid; /* connections one non-root uid may hold at once */
    char *state_path;  /* DIR/leases, NULL = leases are not persisted */
    char boot_id[ERG__BOOT_ID_MAX + 1];
    uint8_t pending[64]; /* per GPU: CH_* bits a request is changing right now */
    bool dirty;          /* leases changed since the state was last written */
    bool save_failed;    /* the last write of the state failed (logged once) */
};

/* ---- the log (daemon.c) ---- */

/* Hand one line to the log callback, if any (level 0 info, 1 warning, 2 error). */
void erg__dlog(erg_daemon *d, int level, const char *fmt, ...) ERG_PRINTF(3, 4);

/* ---- responses (http.c) ---- */

/* The reason phrase of an HTTP status ("Internal Server Error" for any it does not know). */
const char *erg__http_reason(int status);
/* Replace resp with a complete response: status, JSON body, Connection: close. */
void erg__http_respond(erg__buf *resp, int status, const char *body);
/* The same with {"error": "<msg>"}, the message JSON-escaped. */
void erg__http_respond_error(erg__buf *resp, int status, const char *fmt, ...) ERG_PRINTF(3, 4);

/* ---- connections (loop.c) ---- */

/* Close connection slot i, if open, and free it. */
void erg__conn_close(erg_daemon *d, int i);

/* ---- leases (leases.c) ---- */

/* pid's lease; with `create`, a new one when it has none (NULL when the table is full or the
 * process is already gone). */
lease *erg__lease_of(erg_daemon *d, pid_t pid, unsigned uid, bool create);
/* Free l's slot (and close its pidfd) when it holds nothing any more. */
void erg__lease_drop_if_empty(erg_daemon *d, lease *l);
/* Record that l's process changed `what` (CH_* bits) on gpu: the GPU moves into l. */
void erg__lease_take(erg_daemon *d, lease *l, int gpu, int what);
/* pid reset `what` on gpu itself: it no longer holds it. */
void erg__lease_release(erg_daemon *d, pid_t pid, int gpu, int what);
/* l's process is gone (`why` for the log): reset what it changed, drop the lease. */
void erg__lease_expire(erg_daemon *d, lease *l, const char *why);
/* Write the leases and pending changes to the state file if they changed (or `force`).
 * Failures are logged once until a write succeeds again; err may be NULL. */
erg_status erg__lease_sync(erg_daemon *d, bool force, erg_error *err);

#endif
