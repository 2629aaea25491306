/* core.h: the server object shared by core.c (state, handlers) and http.c (sockets, threads, life cycle). */
#ifndef ERGON_SERVER_CORE_H
#define ERGON_SERVER_CORE_H

#include "server/server_internal.h"

struct MHD_Daemon;
#define SRV_HIST_BUCKETS 15
extern const double srv_hist_bounds[SRV_HIST_BUCKETS]; /* seconds */
typedef struct srv_job srv_job;

struct erg_server {
    erg_server_opts opts;     /* Copy; the strings below own their text. */
    char *host, *db_path, *dump_dir, *scheduler;
    json_t *sched_args;
    int mode;                 /* Resolved default mode (SRV_MODE_ANY if none). */
    pthread_mutex_t mu;       /* Protects everything below and the database. */
    pthread_mutex_t log_mu;   /* Serialises log callbacks. */
    sqlite3 *db;
    sqlite3 *ckpt_db;         /* Housekeeping thread's connection (checkpoints). */
    srv_job *jobs;
    bool stopping;
    struct MHD_Daemon *mhd;
    int port;
    pthread_t hk;             /* Housekeeping thread. */
    bool hk_running;
    pthread_cond_t hk_cond;
    long windows_completed, results_total, evicted_total;
    long requests_by_class[6];
    /* Set by the HTTP front end: suspend a connection / resume it with an
     * answer (body ownership passes to wake). Called with mu held. */
    void (*park)(void *conn);
    void (*wake)(void *conn, int status, char *body, const char *ctype);
    long hist[4][SRV_HIST_BUCKETS + 1]; /* Handling time by route group and bucket. */
    double hist_sum[4];
};

typedef struct srv_resp {
    int status;
    char *body;          /* erg__malloc'd */
    const char *ctype;
    double waited_s;     /* Time spent waiting at a barrier. */
    bool parked;         /* The request was suspended; no answer yet. */
} srv_resp;

double srv_now_mono(void);
void srv_log(erg_server *srv, erg_log_level lvl, const char *event, const char *job_id,
             const char *fmt, ...) ERG_PRINTF(5, 6);
void srv_dispatch(erg_server *srv, const char *method, const char *path, const char *query,
                  const char *body, size_t len, double max_wait, void *conn, srv_resp *rs);
erg_status srv_db_open(erg_server *srv, erg_error *err);
erg_status srv_restore(erg_server *srv, erg_error *err);
bool srv_db_has_job(erg_server *srv, const char *id);
bool srv_db_has_result(erg_server *srv, const char *id, long window, long rank);
void srv_housekeeping(erg_server *srv); /* with mu held */
void srv_free_jobs(erg_server *srv);
void srv_wake_all(erg_server *srv);    /* with mu held */
void srv_checkpoint(erg_server *srv);  /* without mu: its own connection */

#endif
