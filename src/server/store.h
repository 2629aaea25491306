/* store.h: SQLite persistence of the control-plane server (jobs, ranks, windows, results,
 * events). Every function is called with the server lock held, except erg__srv_store_checkpoint
 * (its own connection, housekeeping thread). */
#ifndef ERGON_SERVER_STORE_H
#define ERGON_SERVER_STORE_H

#include "server/server_internal.h"

erg_status erg__srv_store_open(erg_server *srv, erg_error *err);
void erg__srv_store_close(erg_server *srv);
/* WAL checkpoint on the housekeeping connection (without the server lock). */
void erg__srv_store_checkpoint(erg_server *srv);

/* Whether the database path is still the file the server opened: ERG_EDB naming the path
 * when it was deleted or replaced (writes there would not survive a restart), logged once
 * (db_gone; db_back when it returns). Every write checks it first (erg__srv_store_exec). */
erg_status erg__srv_store_check(erg_server *srv, erg_error *err);

/* Run one statement with bindings given as a format: 't' text, 'i' int64
 * (long long), 'd' double. ERG_EDB with the SQLite message. */
erg_status erg__srv_store_exec(erg_server *srv, erg_error *err, const char *sql, const char *fmt,
                               ...);
void erg__srv_store_event(erg_server *srv, const char *job, const char *kind, const char *detail);

bool erg__srv_store_has_job(erg_server *srv, const char *id);
bool erg__srv_store_has_result(erg_server *srv, const char *id, long window, long rank);
erg_status erg__srv_store_insert_job(erg_server *srv, const char *id, const char *info,
                                     const char *sched, const char *args, int mode, double created,
                                     erg_error *err);
erg_status erg__srv_store_job_state(erg_server *srv, const char *id, const char *state,
                                    const char *message);
erg_status erg__srv_store_job_target(erg_server *srv, const char *id, int kind, double value);
erg_status erg__srv_store_job_evicted(erg_server *srv, const char *id);
erg_status erg__srv_store_insert_rank(erg_server *srv, const char *id, long rank, const char *info,
                                      erg_error *err);
erg_status erg__srv_store_insert_result(erg_server *srv, const char *id, long window, long rank,
                                        const char *body, erg_error *err);
/* Stored results of a window into per_rank[0..world) (slots already set are
 * kept); returns how many were loaded. */
int erg__srv_store_load_results(erg_server *srv, const char *id, long window, json_t **per_rank,
                                int world);
/* The window row: false when there is none. */
bool erg__srv_store_window_get(erg_server *srv, const char *id, long window, int *released,
                               int *tkind, double *tval);
void erg__srv_store_window_add(erg_server *srv, const char *id, long window, int tkind, double tval,
                               long choice);
void erg__srv_store_window_release(erg_server *srv, const char *id, long window);

/* Restore: every job not evicted, oldest first, then its ranks. */
typedef struct srv_store_job_row {
    const char *id, *info, *scheduler, *args, *state, *message;
    int mode, tkind;
    double created, tval;
} srv_store_job_row;
erg_status erg__srv_store_each_job(erg_server *srv,
                                   void (*fn)(erg_server *, const srv_store_job_row *, void *),
                                   void *user, erg_error *err);
void erg__srv_store_each_rank(erg_server *srv, const char *id,
                              void (*fn)(erg_server *, long rank, const char *info, void *),
                              void *user);

#endif
