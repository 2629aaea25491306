/* jobs.h: the job, rank and window state machine of the control-plane server, shared by every
 * wire protocol. Wires parse and validate their bodies, call these functions (with the server
 * lock held) and format the outcome; nothing here knows about HTTP paths or error-body keys.
 *
 * THE JOB LIFE CYCLE (ARCHITECTURE.md, "The server's jobs") and HOW CRASH RECOVERY WORKS.
 *
 * A job is created (erg__srv_job_create), collects world_size ranks
 * (erg__srv_job_add_rank), then runs windows n = 0, 1, ...: the schedule of
 * window n is computed eagerly; asking for a schedule (erg__srv_job_ask) is a
 * barrier released when every rank has asked for window n; every rank then
 * reports one result (erg__srv_job_add_result); when all results are in, the
 * window is dumped and observed, and window n+1 is computed. A scheduler
 * that finishes ends the job ("[profiling-done]" on the kronos wire).
 *
 * Which window a request means is derived, not sent: if the rank's result
 * for the current window n is already stored it asks for n+1, otherwise for
 * n. So a retried request (lost response, server restart) is harmless.
 *
 * Every acknowledged fact goes to SQLite (store.h) before the reply: jobs,
 * ranks, results (one row per job, window, rank), the "barrier released"
 * flag of each window and straggler targets. Schedules themselves are NOT
 * stored: schedulers are deterministic functions of their arguments and the
 * results they observed, so a restart rebuilds each job by replaying its
 * scheduler: next(), observe(stored results of window 0), next(), ... until
 * the first window whose results are incomplete, which becomes the current
 * window (released or not as stored). Dumps missing after a crash are
 * rewritten during the replay. Ranks blocked when the server died retry.
 *
 * Locking: one mutex per server protects all state and the database
 * connection; requests waiting at a barrier are parked on their job (HTTP)
 * or sleep on its condition variable (direct calls). A job is never freed
 * while a request waits on it. */
#ifndef ERGON_SERVER_JOBS_H
#define ERGON_SERVER_JOBS_H

#include "server/server_internal.h"

enum {
    SRV_JOB_REGISTERING,
    SRV_JOB_RUNNING,
    SRV_JOB_DONE,
    SRV_JOB_FAILED,
    SRV_JOB_ABORTED,
    SRV_JOB_NUM_STATES
};
const char *erg__srv_job_state_name(int state);
static inline bool srv_job_live(int state)
{
    return state == SRV_JOB_REGISTERING || state == SRV_JOB_RUNNING;
}

/* What a state-machine call decided; the wire maps it to a status code. */
typedef enum srv_outcome {
    SRV_OK = 0,
    SRV_DUPLICATE,   /* The same fact was already stored (an idempotent retry). */
    SRV_INVALID,     /* The request contradicts the job (422 kronos, 400 v1). */
    SRV_CONFLICT,    /* Not possible in the job's current state (409). */
    SRV_NOT_FOUND,   /* Unknown rank (404). */
    SRV_UNAVAILABLE, /* Could not be stored, or a limit is reached (503). */
    SRV_NOT_RUNNING, /* The job is not running (409; j->state says why). */
    SRV_INTERNAL,    /* Out of memory (500). */
} srv_outcome;

typedef struct srv_rank {
    bool registered;
    json_t *info; /* The rank's record (stored, dumped in ranks.json). */
    int dp, pp, tp;
    int *instrs; /* pipe_schedule codes. */
    int n_instrs;
    int *states; /* power_state_range, descending. */
    int n_states;
    long asked;       /* Highest window this rank asked for (memory only). */
    double last_seen; /* Monotonic seconds of its last request. */
    int waiting;      /* Requests of this rank blocked at the barrier. */
} srv_rank;

struct srv_waiter;
struct srv_dump_file;

struct srv_job {
    char *id;
    json_t *info; /* The job's record (JobInfo as stored). */
    char *sched_name;
    json_t *sched_args;
    int mode;
    int state;
    char *message;
    int world, pp, dp, tp;
    srv_rank *ranks;
    int n_registered;
    srv_sched_ctx ctx;
    srv_sched *sched;
    int *stage_rep;      /* Per stage: the representative rank (dp = tp = 0). */
    long window;         /* Current window n. */
    bool released;       /* Barrier of window n released. */
    int **cur;           /* Per stage: schedule of window n (one state per instruction). */
    char **cur_json;     /* Per stage: the same as text, "[1410, 1410, ...]". */
    json_t **results;    /* Per rank: result record of window n (NULL until reported). */
    srv_result **parsed; /* Per rank: its numbers (NULL until reported). */
    int n_results;
    int tkind; /* Straggler target: 0 none, 1 slowdown, 2 deadline_s. */
    double tval;
    long choice; /* Frontier plan of window n (-1). */
    double created_wall, created_mono, last_activity;
    double baseline_j; /* Energy per iteration of the last all-max window (0 = none). */
    double energy_j, saved_j;
    int waiters;
    struct srv_waiter *parked; /* Suspended HTTP schedule requests. */
    pthread_cond_t cond;
    erg_server *srv;
    struct srv_dump_file *dump_q; /* Dump files the disk refused, oldest first (dump.c). */
    size_t dump_q_bytes;
    struct srv_job *next;
};

/* A rank as a wire hands it to the state machine (arrays borrowed). */
typedef struct srv_rank_spec {
    long rank;
    int dp, pp, tp;
    const int *instrs; /* The rank's instruction codes, in execution order. */
    int n_instrs;
    const int *states; /* Supported power states (any order, unique, > 0). */
    int n_states;
} srv_rank_spec;

/* ---- jobs ---- */
srv_job *erg__srv_job_find(erg_server *srv, const char *id);
/* Jobs that count against --max-jobs. */
int erg__srv_jobs_held(erg_server *srv);
/* Create a job: its id is id_base, or id_base+"+2", "+3", ... when taken (by a job held
 * or stored, or by a dump directory: erg__srv_dump_claim_dir);
 * info must hold integer pp_degree, dp_degree, tp_degree and world_size
 * (= pp*dp*tp, validated by the wire). Stores it and links it.
 * SRV_UNAVAILABLE with why when --max-jobs is reached or the database fails. */
srv_outcome erg__srv_job_create(erg_server *srv, const char *id_base, json_t *info,
                                const char *sched, json_t *args, int mode, srv_job **out, char *why,
                                size_t wn);
/* Register a rank; record is stored as its RankInfo. A rank registered
 * again with an equal record is SRV_DUPLICATE; the last rank starts the job. */
srv_outcome erg__srv_job_add_rank(erg_server *srv, srv_job *j, const srv_rank_spec *spec,
                                  json_t *record, char *why, size_t wn);
/* A rank asks for its schedule: derive the window it means (*window), mark
 * it alive, and release the barrier if it was the last one. */
srv_outcome erg__srv_job_ask(erg_server *srv, srv_job *j, long rank, long *window, char *why,
                             size_t wn);

/* Where the schedule of window w stands for a rank. */
typedef enum srv_sched_state {
    SRV_SCHED_STOPPING, /* The server is shutting down. */
    SRV_SCHED_ENDED,    /* The job is done, failed or aborted (j->state, j->message). */
    SRV_SCHED_READY,    /* j->cur / j->cur_json hold it. */
    SRV_SCHED_LATE,     /* Window w is over. */
    SRV_SCHED_PENDING,  /* The barrier is not released yet. */
} srv_sched_state;
srv_sched_state erg__srv_job_schedule_state(erg_server *srv, const srv_job *j, long w);

/* A wire's answer to a waiting schedule request: fill rs and return true
 * when the answer is known (expired: its deadline passed), else false. */
typedef bool (*srv_answer_fn)(erg_server *srv, srv_job *j, long rank, long window, int flags,
                              bool expired, srv_resp *rs);
/* Answer now if possible, else wait up to wait_s: park the HTTP connection
 * (rs->parked) or, for direct calls (conn NULL), wait on the job. flags is
 * passed to answer unchanged (wire-specific). false (rs untouched) when out
 * of memory. */
bool erg__srv_job_wait(erg_server *srv, srv_job *j, long rank, long window, double wait_s,
                       void *conn, srv_answer_fn answer, int flags, srv_resp *rs);

/* Accept a rank's result for window win (record: the stored ProfilingResult;
 * parsed: its numbers, copied). SRV_DUPLICATE when (win, rank) is stored
 * already; SRV_CONFLICT when the window has not started or the rank
 * reported it already; SRV_NOT_RUNNING when the job is not running.
 * Completes the window when it was the last result. */
srv_outcome erg__srv_job_add_result(erg_server *srv, srv_job *j, long rank, long win,
                                    json_t *record, const srv_result *parsed, char *why, size_t wn);
/* End a live job (done, failed or aborted) and answer its waiters. */
void erg__srv_job_finish(erg_server *srv, srv_job *j, int state, const char *msg);
/* Set a straggler target (kind 1 slowdown, 2 deadline_s); returns the
 * first window it applies to. */
long erg__srv_job_set_target(erg_server *srv, srv_job *j, int kind, double value);
/* A request for the job arrived (idle eviction clock). */
void erg__srv_job_touch(srv_job *j);

/* ---- dump.c: Perseus-layout dump files of a job ----
 * A dump the disk refuses (full, read-only, not a directory) never fails the
 * job: it is queued on the job, logged, and written by the housekeeping
 * thread once the disk takes it (erg__srv_dumps_flush), in order. The queue is
 * bounded (SRV_DUMP_QUEUE_MAX_BYTES for the server); past it a dump is
 * dropped with an error record (the results stay in SQLite). */
/* Claim <dump>/<id> for a new job by creating it (mkdir, never an existing one): false when
 * it exists, made by a job of this or another server sharing the dump directory (the id is
 * then taken); true when it was created, when dumps are off, or when the disk refused it
 * for another reason (the dumps are deferred then). erg__srv_dump_unclaim_dir removes it again
 * while empty (the job was not created). */
bool erg__srv_dump_claim_dir(erg_server *srv, const char *id);
void erg__srv_dump_unclaim_dir(erg_server *srv, const char *id);
/* Name the job's dump directory (ctx.job_dir) and write perseus.json and ranks.json. */
erg_status erg__srv_dump_job_start(erg_server *srv, srv_job *j, erg_error *err);
/* N.prof.json and N.sched.json of the current window (only if missing when replaying). */
erg_status erg__srv_dump_window(erg_server *srv, srv_job *j, bool replay, erg_error *err);
/* Retry every deferred dump (housekeeping, with mu held). */
void erg__srv_dumps_flush(erg_server *srv);
/* Forget a job's deferred dumps (the job is freed). */
void erg__srv_dump_queue_free(srv_job *j);

/* ---- whole server ---- */
erg_status erg__srv_jobs_restore(erg_server *srv, erg_error *err); /* with mu held */
void erg__srv_jobs_housekeeping(erg_server *srv);                  /* with mu held */
void erg__srv_jobs_wake_all(erg_server *srv);                      /* with mu held */
void erg__srv_jobs_free(erg_server *srv);

#endif
