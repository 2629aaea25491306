/* store.c: SQLite persistence of the control-plane server: schema, WAL checkpoints, and the
 * rows of jobs, ranks, windows, results and events. */
#include "server/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const schema =
    "CREATE TABLE IF NOT EXISTS jobs("
    " job_id TEXT PRIMARY KEY, info TEXT NOT NULL, scheduler TEXT NOT NULL,"
    " scheduler_args TEXT NOT NULL, mode INTEGER NOT NULL, state TEXT NOT NULL,"
    " message TEXT, created REAL NOT NULL, tkind INTEGER NOT NULL DEFAULT 0,"
    " tval REAL NOT NULL DEFAULT 0, evicted INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS ranks("
    " job_id TEXT NOT NULL, rank INTEGER NOT NULL, info TEXT NOT NULL,"
    " PRIMARY KEY(job_id, rank));"
    "CREATE TABLE IF NOT EXISTS windows("
    " job_id TEXT NOT NULL, window INTEGER NOT NULL, released INTEGER NOT NULL DEFAULT 0,"
    " tkind INTEGER NOT NULL DEFAULT 0, tval REAL NOT NULL DEFAULT 0,"
    " choice INTEGER NOT NULL DEFAULT -1, PRIMARY KEY(job_id, window));"
    "CREATE TABLE IF NOT EXISTS results("
    " job_id TEXT NOT NULL, window INTEGER NOT NULL, rank INTEGER NOT NULL,"
    " body TEXT NOT NULL, received REAL NOT NULL, PRIMARY KEY(job_id, window, rank));"
    "CREATE TABLE IF NOT EXISTS events("
    " id INTEGER PRIMARY KEY, job_id TEXT, time REAL NOT NULL, kind TEXT NOT NULL,"
    " detail TEXT);";

static erg_status db_fail(erg_server *srv, erg_error *err, const char *what)
{
    return erg_error_set(err, ERG_EDB, "database %s: %s: %s", srv->db_path, what,
                         sqlite3_errmsg(srv->db));
}

/* The identity of the database file, taken when it is opened; a write is acknowledged only
 * while the path still names that file. A file deleted under the server (a clean-up job, an
 * operator's rm) keeps taking writes through the open descriptor, and they vanish with it:
 * before this check such registrations got 201 and were gone after a restart. */
static void remember_file(erg_server *srv)
{
    struct stat sb;
    srv->db_ident = stat(srv->db_path, &sb) == 0;
    srv->db_dev = srv->db_ident ? (unsigned long long)sb.st_dev : 0;
    srv->db_ino = srv->db_ident ? (unsigned long long)sb.st_ino : 0;
}

erg_status erg__srv_store_check(erg_server *srv, erg_error *err)
{
    if (!srv->db_ident)
        return ERG_OK;
    struct stat sb;
    int e = stat(srv->db_path, &sb) == 0 ? 0 : errno;
    bool same = !e && (unsigned long long)sb.st_dev == srv->db_dev &&
                (unsigned long long)sb.st_ino == srv->db_ino;
    if (same) {
        if (srv->db_gone)
            erg__srv_log(srv, ERG_LOG_WARNING, "db_back", NULL,
                         "database %s is the file this server opened again: writes are accepted",
                         srv->db_path);
        srv->db_gone = false;
        return ERG_OK;
    }
    char why[160];
    if (e)
        snprintf(why, sizeof why, "it was deleted or moved: %s", strerror(e));
    else
        snprintf(why, sizeof why, "another file (inode %llu) replaced it",
                 (unsigned long long)sb.st_ino);
    if (!srv->db_gone)
        erg__srv_log(
            srv, ERG_LOG_ERROR, "db_gone", NULL,
            "database %s is no longer the file this server opened (%s): every write is "
            "refused (503) until the file is back at that path, or the server is restarted",
            srv->db_path, why);
    srv->db_gone = true;
    return erg_error_set(err, ERG_EDB,
                         "database %s is no longer the file this server opened (%s); writes are "
                         "refused, since they would not survive a restart",
                         srv->db_path, why);
}

static erg_status exec_v(erg_server *srv, erg_error *err, const char *sql, const char *fmt,
                         va_list ap)
{
    erg_status chk = erg__srv_store_check(srv, err);
    if (chk)
        return chk;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(srv->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(srv, err, "prepare");
    for (int i = 0; fmt && fmt[i]; i++) {
        if (fmt[i] == 't')
            sqlite3_bind_text(st, i + 1, va_arg(ap, const char *), -1, SQLITE_TRANSIENT);
        else if (fmt[i] == 'i')
            sqlite3_bind_int64(st, i + 1, va_arg(ap, long long));
        else
            sqlite3_bind_double(st, i + 1, va_arg(ap, double));
    }
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return db_fail(srv, err, "write");
    return ERG_OK;
}

erg_status erg__srv_store_exec(erg_server *srv, erg_error *err, const char *sql, const char *fmt,
                               ...)
{
    va_list ap;
    va_start(ap, fmt);
    erg_status st = exec_v(srv, err, sql, fmt, ap);
    va_end(ap);
    return st;
}

void erg__srv_store_event(erg_server *srv, const char *job, const char *kind, const char *detail)
{
    erg_error e;
    erg__srv_store_exec(srv, &e, "INSERT INTO events(job_id, time, kind, detail) VALUES(?,?,?,?)",
                        "tdtt", job, erg__srv_now_wall(), kind, detail ? detail : "");
}

static bool path_in_memory(const char *db_path)
{
    return !*db_path || !strcmp(db_path, ":memory:") || !strncmp(db_path, "file::memory:", 13);
}

static bool in_memory(const erg_server *srv)
{
    return path_in_memory(srv->db_path);
}

/* One server per database: an exclusive lock (flock, held by the open file
 * description, so a second server in the same process is refused too) on
 * <db>.lock, which holds the owner's pid for the message of the next one. */
static erg_status lock_path(const char *db_path, int *lock_fd, erg_error *err)
{
    *lock_fd = -1;
    if (path_in_memory(db_path))
        return ERG_OK;
    erg__buf path = {0};
    if (erg__buf_printf(&path, "%s.lock", db_path))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    int fd = open(path.data, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        erg_status st = erg_error_set(err, ERG_EDB, "database %s: cannot open the lock file %s: %s",
                                      db_path, path.data, strerror(errno));
        erg__buf_free(&path);
        return st;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        close(fd);
        erg_status st =
            e == EWOULDBLOCK
                ? erg_error_set(err, ERG_EDB,
                                "database %s is in use by another server (process %s, lock file "
                                "%s); one database serves one server",
                                db_path, *pid ? pid : "unknown", path.data)
                : erg_error_set(err, ERG_EDB, "database %s: cannot lock %s: %s", db_path, path.data,
                                strerror(e));
        erg__buf_free(&path);
        return st;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        /* The lock holds; only the message of a second server lacks the pid. */
    }
    erg__buf_free(&path);
    *lock_fd = fd;
    return ERG_OK;
}

static erg_status lock_db(erg_server *srv, erg_error *err)
{
    return lock_path(srv->db_path, &srv->lock_fd, err);
}

erg_status erg_server_db_remove(const char *db_path, erg_error *err)
{
    if (!db_path)
        return erg_error_set(err, ERG_EINVAL, "erg_server_db_remove: NULL argument");
    int fd = -1;
    erg_status st = lock_path(db_path, &fd, err); /* no server may hold it while it goes */
    if (st || fd < 0)
        return st; /* in memory: nothing to remove */
    static const char *const sfx[] = {"", "-wal", "-shm", ".lock"};
    erg__buf p = {0};
    for (size_t i = 0; i < ERG__ARRAY_LEN(sfx) && !st; i++) {
        p.len = 0;
        if (erg__buf_printf(&p, "%s%s", db_path, sfx[i]))
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        else if (unlink(p.data) != 0 && errno != ENOENT)
            st = erg_error_set(err, ERG_EDB, "database %s: cannot remove %s: %s", db_path, p.data,
                               strerror(errno));
    }
    erg__buf_free(&p);
    close(fd);
    return st;
}

/* The WAL is bounded (issue 15 item 3). Checkpoints run on the housekeeping
 * thread: a PASSIVE one copies what it can beside the writers; when the log
 * still holds more than SRV_WAL_MAX_FRAMES frames, a TRUNCATE one runs under
 * the server lock (no write and no read is then in flight on the request
 * connection, so it always completes and empties the file). A commit that
 * leaves more than that in the log wakes the housekeeper (wal_hook) instead
 * of waiting for its period, so a burst cannot outrun it by much. */
#define SRV_WAL_MAX_FRAMES 1024
#define SRV_DB_BUSY_MS 5000 /* how long a request waits for a locked database */
#define SRV_WAL_SIZE_LIMIT_BYTES (4 << 20)

static int wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
    erg_server *srv = arg;
    if (frames > SRV_WAL_MAX_FRAMES)
        pthread_cond_signal(&srv->hk_cond); /* the committer holds srv->mu */
    /* The backstop: a housekeeper starved of CPU (a loaded machine) must not let the log grow
     * without bound, so past twice the limit the committer empties the log itself. TRUNCATE,
     * not PASSIVE: a passive checkpoint gives up at once while the housekeeper's own passive
     * one holds the checkpoint lock (a starved housekeeper holds it longest), and the log then
     * grew to 27 MB in one run of wal_stays_bounded_through_a_long_run (2026-11-26). The
     * committer holds srv->mu, so no request is reading; the housekeeper's passive checkpoint
     * needs no lock of ours, so waiting for it (the busy handler, up to 5 s) cannot deadlock.
     * Rare: past 2 x SRV_WAL_MAX_FRAMES frames only. */
    if (frames > 2 * SRV_WAL_MAX_FRAMES) {
        /* A checkpoint finds the checkpoint lock taken while the housekeeper's passive one
         * runs, and SQLite then returns SQLITE_BUSY at once, without the busy handler; with
         * the disk slow to sync (a loaded machine) that passive checkpoint lasts long enough
         * for the log to pass 16 MB in wal_stays_bounded_through_a_long_run (reproduced with
         * a concurrent fsync-heavy writer: 3 runs of 4, 2026-11-26). So retry until it lets go
         * -- it needs none of our locks -- up to the busy timeout in all. */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL) ==
               SQLITE_BUSY) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) >
                SRV_DB_BUSY_MS / 1000.0)
                break;
            usleep(2000);
        }
    }
    return SQLITE_OK;
}

/* Waits for a database locked by another process (an sqlite3 shell in a
 * write transaction, a backup) like sqlite3_busy_timeout(5 s), but says so
 * in the log: once when a wait starts, once if it gives up. */
static int busy_handler(void *arg, int count)
{
    erg_server *srv = arg;
    if (count == 0)
        erg__srv_log(srv, ERG_LOG_WARNING, "db_busy", NULL,
                     "database %s is locked by another process; waiting up to %d ms (requests "
                     "that need it wait too)",
                     srv->db_path, SRV_DB_BUSY_MS);
    if (count >= SRV_DB_BUSY_MS / 10) {
        erg__srv_log(srv, ERG_LOG_ERROR, "db_busy_timeout", NULL,
                     "database %s still locked by another process after %d ms; the request fails",
                     srv->db_path, SRV_DB_BUSY_MS);
        return 0;
    }
    usleep(10000);
    return 1;
}

erg_status erg__srv_store_open(erg_server *srv, erg_error *err)
{
    erg_status lst = lock_db(srv, err);
    if (lst)
        return lst;
    if (sqlite3_open_v2(srv->db_path, &srv->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK)
        return db_fail(srv, err, "open");
    sqlite3_busy_handler(srv->db, busy_handler, srv);
    char *msg = NULL;
    /* WAL; checkpoints are not run inside commits (they fsync and would stall
     * every request behind the server lock) but by the housekeeping thread
     * on its own connection (erg__srv_store_checkpoint). */
    char pragmas[256];
    snprintf(pragmas, sizeof pragmas,
             "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s; PRAGMA wal_autocheckpoint=0;"
             "PRAGMA journal_size_limit=%d;",
             srv->opts.durable_sync ? "FULL" : "NORMAL", SRV_WAL_SIZE_LIMIT_BYTES);
    if (sqlite3_exec(srv->db, pragmas, NULL, NULL, &msg) != SQLITE_OK ||
        sqlite3_exec(srv->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
        erg_status st = erg_error_set(err, ERG_EDB, "database %s: %s", srv->db_path,
                                      msg ? msg : sqlite3_errmsg(srv->db));
        sqlite3_free(msg);
        return st;
    }
    if (!in_memory(srv)) {
        sqlite3_wal_hook(srv->db, wal_hook, srv); /* replaces wal_autocheckpoint (0 anyway) */
        remember_file(srv);
    }
    return ERG_OK;
}

void erg__srv_store_close(erg_server *srv)
{
    if (srv->ckpt_db) {
        sqlite3_close(srv->ckpt_db);
        srv->ckpt_db = NULL;
        srv->ckpt_ready = false;
    }
    if (srv->db) {
        sqlite3_wal_checkpoint_v2(srv->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_close(srv->db);
        srv->db = NULL;
    }
    if (srv->lock_fd >= 0) {
        if (ftruncate(srv->lock_fd, 0) != 0) {
            /* a stale pid in an unlocked file is never reported */
        }
        close(srv->lock_fd); /* releases the lock */
        srv->lock_fd = -1;
    }
}

void erg__srv_store_checkpoint(erg_server *srv)
{
    if (in_memory(srv))
        return;
    if (!srv->ckpt_db &&
        sqlite3_open_v2(srv->db_path, &srv->ckpt_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        sqlite3_close(srv->ckpt_db);
        srv->ckpt_db = NULL;
        return;
    }
    if (!srv->ckpt_ready) {
        /* A connection that has not read the database yet does not know it is
         * in WAL mode: its checkpoints do nothing and report -1 frames (why the
         * WAL was never checkpointed before). */
        sqlite3_busy_timeout(srv->ckpt_db, 1000);
        if (sqlite3_exec(srv->ckpt_db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) !=
            SQLITE_OK)
            return;
        srv->ckpt_ready = true;
    }
    int log_frames = 0, done = 0;
    sqlite3_wal_checkpoint_v2(srv->ckpt_db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log_frames, &done);
    if (log_frames > SRV_WAL_MAX_FRAMES || (log_frames > 64 && done == log_frames)) {
        /* Most frames are copied already: finish and empty the log while no
         * request touches the database. */
        pthread_mutex_lock(&srv->mu);
        int rc = sqlite3_wal_checkpoint_v2(srv->ckpt_db, NULL, SQLITE_CHECKPOINT_TRUNCATE,
                                           &log_frames, &done);
        pthread_mutex_unlock(&srv->mu);
        if (rc != SQLITE_OK)
            erg__srv_log(srv, ERG_LOG_WARNING, "checkpoint", NULL, "WAL checkpoint of %s: %s",
                         srv->db_path, sqlite3_errmsg(srv->ckpt_db));
    }
}

static bool exists_q(erg_server *srv, const char *sql, const char *id, long a, long b, int nint)
{
    sqlite3_stmt *q = NULL;
    bool found = false;
    if (sqlite3_prepare_v2(srv->db, sql, -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, id, -1, SQLITE_TRANSIENT);
        if (nint > 0)
            sqlite3_bind_int64(q, 2, a);
        if (nint > 1)
            sqlite3_bind_int64(q, 3, b);
        found = sqlite3_step(q) == SQLITE_ROW;
    }
    sqlite3_finalize(q);
    return found;
}

bool erg__srv_store_has_job(erg_server *srv, const char *id)
{
    return exists_q(srv, "SELECT 1 FROM jobs WHERE job_id=?", id, 0, 0, 0);
}

bool erg__srv_store_has_result(erg_server *srv, const char *id, long window, long rank)
{
    return exists_q(srv, "SELECT 1 FROM results WHERE job_id=? AND window=? AND rank=?", id, window,
                    rank, 2);
}

erg_status erg__srv_store_insert_job(erg_server *srv, const char *id, const char *info,
                                     const char *sched, const char *args, int mode, double created,
                                     erg_error *err)
{
    return erg__srv_store_exec(
        srv, err,
        "INSERT INTO jobs(job_id, info, scheduler, scheduler_args, mode, state, "
        "message, created) VALUES(?,?,?,?,?,?,'',?)",
        "ttttitd", id, info, sched, args, (long long)mode, "registering", created);
}

erg_status erg__srv_store_job_state(erg_server *srv, const char *id, const char *state,
                                    const char *message)
{
    erg_error e;
    return erg__srv_store_exec(srv, &e, "UPDATE jobs SET state=?, message=? WHERE job_id=?", "ttt",
                               state, message ? message : "", id);
}

erg_status erg__srv_store_job_target(erg_server *srv, const char *id, int kind, double value)
{
    erg_error e;
    return erg__srv_store_exec(srv, &e, "UPDATE jobs SET tkind=?, tval=? WHERE job_id=?", "idt",
                               (long long)kind, value, id);
}

erg_status erg__srv_store_job_evicted(erg_server *srv, const char *id)
{
    erg_error e;
    return erg__srv_store_exec(srv, &e, "UPDATE jobs SET evicted=1 WHERE job_id=?", "t", id);
}

erg_status erg__srv_store_insert_rank(erg_server *srv, const char *id, long rank, const char *info,
                                      erg_error *err)
{
    return erg__srv_store_exec(srv, err, "INSERT INTO ranks(job_id, rank, info) VALUES(?,?,?)",
                               "tit", id, (long long)rank, info);
}

erg_status erg__srv_store_insert_result(erg_server *srv, const char *id, long window, long rank,
                                        const char *body, erg_error *err)
{
    return erg__srv_store_exec(srv, err,
                               "INSERT INTO results(job_id, window, rank, body, received) "
                               "VALUES(?,?,?,?,?)",
                               "tiitd", id, (long long)window, (long long)rank, body,
                               erg__srv_now_wall());
}

int erg__srv_store_load_results(erg_server *srv, const char *id, long window, json_t **per_rank,
                                int world)
{
    sqlite3_stmt *q = NULL;
    int n = 0;
    if (sqlite3_prepare_v2(srv->db, "SELECT rank, body FROM results WHERE job_id=? AND window=?",
                           -1, &q, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(q, 1, id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(q, 2, window);
    while (sqlite3_step(q) == SQLITE_ROW) {
        int r = sqlite3_column_int(q, 0);
        const char *body = (const char *)sqlite3_column_text(q, 1);
        if (r < 0 || r >= world || per_rank[r] || !body)
            continue;
        json_t *v = json_loads(body, 0, NULL);
        if (v) {
            per_rank[r] = v;
            n++;
        }
    }
    sqlite3_finalize(q);
    return n;
}

bool erg__srv_store_window_get(erg_server *srv, const char *id, long window, int *released,
                               int *tkind, double *tval)
{
    sqlite3_stmt *q = NULL;
    bool have = false;
    if (sqlite3_prepare_v2(srv->db,
                           "SELECT released, tkind, tval FROM windows WHERE job_id=? AND window=?",
                           -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, id, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(q, 2, window);
        if (sqlite3_step(q) == SQLITE_ROW) {
            have = true;
            *released = sqlite3_column_int(q, 0);
            *tkind = sqlite3_column_int(q, 1);
            *tval = sqlite3_column_double(q, 2);
        }
        sqlite3_finalize(q);
    }
    return have;
}

void erg__srv_store_window_add(erg_server *srv, const char *id, long window, int tkind, double tval,
                               long choice)
{
    erg_error e;
    erg__srv_store_exec(
        srv, &e,
        "INSERT OR IGNORE INTO windows(job_id, window, released, tkind, tval, choice) "
        "VALUES(?,?,0,?,?,?)",
        "tiidi", id, (long long)window, (long long)tkind, tval, (long long)choice);
}

void erg__srv_store_window_release(erg_server *srv, const char *id, long window)
{
    erg_error e;
    erg__srv_store_exec(srv, &e, "UPDATE windows SET released=1 WHERE job_id=? AND window=?", "ti",
                        id, (long long)window);
}

erg_status erg__srv_store_each_job(erg_server *srv,
                                   void (*fn)(erg_server *, const srv_store_job_row *, void *),
                                   void *user, erg_error *err)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(srv->db,
                           "SELECT job_id, info, scheduler, scheduler_args, mode, state, message, "
                           "created, tkind, tval FROM jobs WHERE evicted=0 ORDER BY created",
                           -1, &q, NULL) != SQLITE_OK)
        return db_fail(srv, err, "read jobs");
    while (sqlite3_step(q) == SQLITE_ROW) {
        srv_store_job_row row = {
            .id = (const char *)sqlite3_column_text(q, 0),
            .info = (const char *)sqlite3_column_text(q, 1),
            .scheduler = (const char *)sqlite3_column_text(q, 2),
            .args = (const char *)sqlite3_column_text(q, 3),
            .mode = sqlite3_column_int(q, 4),
            .state = (const char *)sqlite3_column_text(q, 5),
            .message = (const char *)sqlite3_column_text(q, 6),
            .created = sqlite3_column_double(q, 7),
            .tkind = sqlite3_column_int(q, 8),
            .tval = sqlite3_column_double(q, 9),
        };
        fn(srv, &row, user);
    }
    sqlite3_finalize(q);
    return ERG_OK;
}

void erg__srv_store_each_rank(erg_server *srv, const char *id,
                              void (*fn)(erg_server *, long rank, const char *info, void *),
                              void *user)
{
    sqlite3_stmt *rq = NULL;
    if (sqlite3_prepare_v2(srv->db, "SELECT rank, info FROM ranks WHERE job_id=?", -1, &rq, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_text(rq, 1, id, -1, SQLITE_TRANSIENT);
        while (sqlite3_step(rq) == SQLITE_ROW)
            fn(srv, sqlite3_column_int(rq, 0), (const char *)sqlite3_column_text(rq, 1), user);
    }
    sqlite3_finalize(rq);
}
