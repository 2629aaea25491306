/* daemon.c: ergond's server: Unix socket, peer credentials, zeusd endpoints, pidfd leases. */
#include "daemon/daemon_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/*
 * THE SERVER LOOP
 *
 * One thread polls: a self-pipe (stop), the listening socket, up to
 * MAX_CONNS connections and one pidfd per lease. A connection is read into a
 * fixed buffer (head + body caps); as soon as erg__http_parse says complete,
 * the request is handled inline, one response is written and the connection
 * is closed (Connection: close). A connection idle for CONN_TIMEOUT_S is
 * dropped. The peer's uid/gid/pid come from SO_PEERCRED at accept time.
 *
 * LEASES. A GPU changed by process P (set clocks / power limit) is leased to
 * P: it moves out of any other lease and into P's, whose pidfd (pidfd_open)
 * the loop polls. When P exits, whatever the cause, the pidfd becomes
 * readable and the daemon resets what P changed on the GPUs P still holds.
 * An explicit reset by P releases the GPU. On kernels without pidfd_open the
 * loop checks kill(pid, 0) twice a second instead (PID reuse could then delay
 * a reset; documented). When the daemon stops, all leased GPUs are reset.
 *
 * PERSISTENCE. With a state directory (erg_daemon_set_state_dir), every
 * lease change is written to DIR/leases (temp file, fsync, rename, fsync of
 * the directory) before the client gets its answer; a change about to be
 * made is first recorded as "pending". A restarted daemon (after SIGKILL, a
 * crash, an OOM kill) reads it back: a holder that is still alive, the same
 * process (pid and start time from /proc/PID/stat, so a reused pid does not
 * count), is re-adopted with a new pidfd; what a dead holder or a pending
 * change touched is reset. A missing or unreadable state means an earlier
 * daemon may have left anything: every GPU is reset. State from an earlier
 * boot (boot_id) is dropped: the driver reset the GPUs at boot.
 *
 * CONNECTION LIMITS. At most MAX_CONNS connections; one uid may hold at most
 * per_uid_limit of them, and uids other than root together never take the
 * last ROOT_RESERVED slots, so one local user cannot lock others or root out.
 */

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
    int pidfd;          /* -1: fall back to kill(pid, 0) */
    uint8_t what[64];   /* per GPU: CH_* bits this process changed */
    bool used;
} lease;

struct erg_daemon {
    erg_gpu *gpu;
    erg__config cfg;
    erg_daemon_log_fn log;
    void *log_user;
    int listen_fd;
    char *socket_path;
    char *lock_file;     /* writes refused while it exists (NULL = no admin lock) */
    int stop_pipe[2];
    conn *conns[MAX_CONNS];
    lease leases[MAX_LEASES];
    uint64_t requests;
    int conns_per_uid;   /* connections one non-root uid may hold at once */
    char *state_path;    /* DIR/leases, NULL = leases are not persisted */
    char boot_id[ERG__BOOT_ID_MAX + 1];
    uint8_t pending[64]; /* per GPU: CH_* bits a request is changing right now */
    bool dirty;          /* leases changed since the state was last written */
    bool save_failed;    /* the last write of the state failed (logged once) */
};

static void dlog(erg_daemon *d, int level, const char *fmt, ...) ERG_PRINTF(3, 4);
static void dlog(erg_daemon *d, int level, const char *fmt, ...)
{
    if (!d->log)
        return;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    d->log(d->log_user, level, msg);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- responses ---- */

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Internal Server Error";
    }
}

static void respond(erg__buf *resp, int status, const char *body)
{
    resp->len = 0;
    if (resp->data)
        resp->data[0] = '\0';
    erg__buf_printf(resp,
                    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                    "Connection: close\r\n\r\n%s",
                    status, reason(status), strlen(body), body);
}

/* {"error": "<msg>"} with the message JSON-escaped. */
static void respond_error(erg__buf *resp, int status, const char *fmt, ...) ERG_PRINTF(3, 4);
static void respond_error(erg__buf *resp, int status, const char *fmt, ...)
{
    char msg[600], body[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t o = 0;
    o += (size_t)snprintf(body, sizeof body, "{\"error\": \"");
    for (const char *c = msg; *c && o + 8 < sizeof body; c++) {
        unsigned char ch = (unsigned char)*c;
        if (ch == '"' || ch == '\\') {
            body[o++] = '\\';
            body[o++] = (char)ch;
        } else if (ch < 0x20)
            o += (size_t)snprintf(body + o, sizeof body - o, "\\u%04x", ch);
        else
            body[o++] = (char)ch;
    }
    snprintf(body + o, sizeof body - o, "\"}");
    respond(resp, status, body);
}

static int status_of(erg_status st)
{
    switch (st) {
    case ERG_OK: return 200;
    case ERG_EPERM: return 403;
    case ERG_EINVAL:
    case ERG_ENOTSUP: return 400;
    default: return 500;
    }
}

/* ---- leases ---- */

static int pidfd_open_compat(pid_t pid)
{
#ifdef SYS_pidfd_open
    long fd = syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) {
        fcntl((int)fd, F_SETFD, FD_CLOEXEC);
        return (int)fd;
    }
#endif
    return -1;
}

static lease *lease_of(erg_daemon *d, pid_t pid, unsigned uid, bool create)
{
    lease *freel = NULL;
    for (int i = 0; i < MAX_LEASES; i++) {
        if (d->leases[i].used && d->leases[i].pid == pid)
            return &d->leases[i];
        if (!d->leases[i].used && !freel)
            freel = &d->leases[i];
    }
    if (!create || !freel)
        return NULL;
    memset(freel, 0, sizeof *freel);
    freel->pid = pid;
    freel->uid = uid;
    freel->pidfd = pidfd_open_compat(pid);
    if (freel->pidfd < 0 && kill(pid, 0) != 0)
        return NULL; /* the process is already gone: nothing to hold */
    if (erg__proc_start_ticks(pid, &freel->start))
        freel->start = 0;
    freel->used = true;
    return freel;
}

static void lease_drop_if_empty(erg_daemon *d, lease *l)
{
    for (int g = 0; g < 64; g++)
        if (l->what[g])
            return;
    if (l->pidfd >= 0)
        close(l->pidfd);
    l->used = false;
    d->dirty = true;
}

/* Record that pid changed `what` on gpu: move the GPU into pid's lease. */
static void lease_take(erg_daemon *d, lease *l, int gpu, int what)
{
    for (int i = 0; i < MAX_LEASES; i++) {
        lease *o = &d->leases[i];
        if (o->used && o != l && o->what[gpu]) {
            l->what[gpu] |= o->what[gpu];
            o->what[gpu] = 0;
            lease_drop_if_empty(d, o);
            d->dirty = true;
        }
    }
    if ((l->what[gpu] & what) != what)
        d->dirty = true;
    l->what[gpu] |= (uint8_t)what;
}

static void lease_release(erg_daemon *d, pid_t pid, int gpu, int what)
{
    lease *l = lease_of(d, pid, 0, false);
    if (!l)
        return;
    if (l->what[gpu] & what)
        d->dirty = true;
    l->what[gpu] &= (uint8_t)~what;
    lease_drop_if_empty(d, l);
}

/* Reset what `what` says on GPU g; `who` names the cause in error lines. */
static void restore_gpu(erg_daemon *d, int g, int what, const char *who)
{
    erg_error e;
    if (what & CH_SM) {
        if (erg_gpu_reset_sm_clocks(d->gpu, g, &e))
            dlog(d, 2, "%s: GPU %d SM clock reset failed: %s", who, g, e.msg);
    }
    if (what & CH_MEM) {
        erg_status st = erg_gpu_reset_mem_clocks(d->gpu, g, &e);
        if (st && st != ERG_ENOTSUP)
            dlog(d, 2, "%s: GPU %d memory clock reset failed: %s", who, g, e.msg);
    }
    if (what & CH_PL) {
        if (erg_gpu_reset_power_limit(d->gpu, g, &e))
            dlog(d, 2, "%s: GPU %d power limit reset failed: %s", who, g, e.msg);
    }
}

static void lease_expire(erg_daemon *d, lease *l, const char *why)
{
    char who[48];
    snprintf(who, sizeof who, "lease of pid %d", (int)l->pid);
    for (int g = 0; g < 64 && g < erg_gpu_count(d->gpu); g++) {
        if (!l->what[g])
            continue;
        restore_gpu(d, g, l->what[g], who);
        dlog(d, 0, "pid %d %s: GPU %d restored", (int)l->pid, why, g);
        l->what[g] = 0;
        d->dirty = true;
    }
    lease_drop_if_empty(d, l);
}

/* ---- persistence ---- */

/* Write the leases (and pending changes) to the state file if they changed
 * (or `force`). Failures are logged once until a write succeeds again. */
static erg_status state_sync(erg_daemon *d, bool force, erg_error *err)
{
    if (!d->state_path || (!d->dirty && !force))
        return ERG_OK;
    erg__buf b = {0};
    erg__buf_printf(&b, "# ergond lease state: rewritten on every lease change; do not edit\n"
                        "ergond-leases 1\n");
    if (d->boot_id[0])
        erg__buf_printf(&b, "boot %s\n", d->boot_id);
    for (int i = 0; i < MAX_LEASES; i++) {
        const lease *l = &d->leases[i];
        if (!l->used)
            continue;
        for (int g = 0; g < 64; g++)
            if (l->what[g])
                erg__buf_printf(&b, "lease %d %llu %u %d %u\n", (int)l->pid, l->start, l->uid, g,
                                (unsigned)l->what[g]);
    }
    for (int g = 0; g < 64; g++)
        if (d->pending[g])
            erg__buf_printf(&b, "pending %d %u\n", g, (unsigned)d->pending[g]);
    erg_error e;
    erg_status st = b.data ? erg__write_file_ex(d->state_path, b.data, b.len,
                                                ERG__WRITE_DURABLE | ERG__WRITE_PRIVATE, &e)
                           : erg_error_set(&e, ERG_ENOMEM, "out of memory");
    erg__buf_free(&b);
    if (st) {
        if (!d->save_failed)
            dlog(d, 2, "cannot record leases in %s: %s (a restarted ergond would not know "
                       "them; retrying)",
                 d->state_path, e.msg);
        d->save_failed = true;
        if (err)
            *err = e;
        return st;
    }
    if (d->save_failed)
        dlog(d, 0, "leases recorded in %s again", d->state_path);
    d->save_failed = false;
    d->dirty = false;
    return ERG_OK;
}

/* ---- request handling ---- */

typedef enum { EP_READ, EP_WRITE, EP_OPEN } ep_kind;

/* Check every parameter is one of `allowed` (NULL-terminated). */
static bool params_known(const erg__query *q, const char *const *allowed, char *bad, size_t n)
{
    for (int i = 0; i < q->n; i++) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok |= !strcmp(q->key[i], *a);
        if (!ok) {
            snprintf(bad, n, "%s", q->key[i]);
            return false;
        }
    }
    return true;
}

static bool parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    long v;
    if (!s || !erg__parse_long(s, &v) || v < 0 || (unsigned long)v > max)
        return false;
    for (const char *c = s; *c; c++)
        if (*c < '0' || *c > '9')
            return false;
    *out = (unsigned long)v;
    return true;
}

static bool parse_bool(const char *s, bool *out)
{
    if (!s)
        return true; /* default kept */
    if (!strcmp(s, "true") || !strcmp(s, "1")) {
        *out = true;
        return true;
    }
    if (!strcmp(s, "false") || !strcmp(s, "0")) {
        *out = false;
        return true;
    }
    return false;
}

static void handle_discover(erg_daemon *d, erg__buf *resp)
{
    erg__buf b = {0};
    erg__buf_printf(&b, "{\"gpus\": [");
    for (int i = 0; i < erg_gpu_count(d->gpu); i++) {
        char name[128] = "unknown";
        erg_gpu_name(d->gpu, i, name, sizeof name, NULL);
        for (char *c = name; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
                *c = '_';
        uint64_t mj;
        bool energy = erg_gpu_energy_mj(d->gpu, i, &mj, NULL) == ERG_OK;
        erg__buf_printf(&b,
                        "%s{\"id\": %d, \"name\": \"%s\", \"pci_address\": \"\", "
                        "\"cumulative_energy_available\": %s}",
                        i ? ", " : "", i, name, energy ? "true" : "false");
    }
    erg__buf_printf(&b, "], \"cpus\": [], \"enabled_api_groups\": [\"gpu-control\", "
                        "\"gpu-read\"], \"auth_required\": false}");
    if (b.data)
        respond(resp, 200, b.data);
    else
        respond_error(resp, 500, "out of memory");
    erg__buf_free(&b);
}

static void handle_write(erg_daemon *d, const char *op, const erg__query *q, uint64_t mask,
                         const erg__peer *peer, erg__buf *resp)
{
    unsigned uid = peer->uid, gid = peer->gid;
    pid_t pid = peer->pid;
    int count = erg_gpu_count(d->gpu);
    if (d->lock_file && access(d->lock_file, F_OK) == 0) {
        dlog(d, 1, "refused %s for uid %u pid %d: writes disabled (%s exists)", op, uid, (int)pid,
             d->lock_file);
        respond_error(resp, 503, "writes are disabled by the administrator (%s exists)",
                      d->lock_file);
        return;
    }
    /* authorisation first, for every GPU named */
    for (int g = 0; g < count; g++)
        if ((mask >> g) & 1 &&
            !erg__config_allows_groups(&d->cfg, uid, gid, peer->groups, peer->ngroups, g)) {
            dlog(d, 1, "refused %s on GPU %d for uid %u gid %u pid %d: not in the allow list",
                 op, g, uid, gid, (int)pid);
            respond_error(resp, 403, "uid %u (gid %u) may not change GPU %d (not in the allow "
                                     "list of ergond)",
                          uid, gid, g);
            return;
        }
    unsigned long lo = 0, hi = 0, mw = 0;
    bool set_sm = !strcmp(op, "set_gpu_locked_clocks"), set_mem = !strcmp(op, "set_mem_locked_clocks");
    bool set_pl = !strcmp(op, "set_power_limit");
    if (set_sm || set_mem) {
        if (!parse_uint(erg__query_get(q, "min_clock_mhz"), 100000, &lo) ||
            !parse_uint(erg__query_get(q, "max_clock_mhz"), 100000, &hi)) {
            respond_error(resp, 400, "min_clock_mhz and max_clock_mhz must be integers in MHz");
            return;
        }
        if (lo > hi) {
            respond_error(resp, 400, "min_clock_mhz %lu is above max_clock_mhz %lu", lo, hi);
            return;
        }
    }
    if (set_pl && !parse_uint(erg__query_get(q, "power_limit_mw"), 10000000, &mw)) {
        respond_error(resp, 400, "power_limit_mw must be an integer in mW");
        return;
    }
    lease *l = NULL;
    bool wrote_pending = false;
    if (set_sm || set_mem || set_pl) {
        l = lease_of(d, pid, uid, true);
        if (!l) {
            respond_error(resp, 503, "cannot track process %d for its lease", (int)pid);
            return;
        }
        /* Write-ahead: a crash during the driver calls leaves "pending"
         * records, which a restarted daemon resets. Not needed (and no
         * fsync) when this process already holds what it changes: the
         * recorded lease covers a crash then. */
        int what = set_sm ? CH_SM : set_mem ? CH_MEM : CH_PL;
        for (int g = 0; g < count; g++)
            if ((mask >> g) & 1 && (l->what[g] & what) != what) {
                d->pending[g] |= (uint8_t)what;
                wrote_pending = true;
            }
        erg_error se;
        if (wrote_pending && state_sync(d, true, &se)) {
            memset(d->pending, 0, sizeof d->pending);
            lease_drop_if_empty(d, l);
            respond_error(resp, 503, "cannot record the lease, so nothing was changed: %s",
                          se.msg);
            return;
        }
    }
    erg__buf errs = {0};
    int worst = 200;
    for (int g = 0; g < count; g++) {
        if (!((mask >> g) & 1))
            continue;
        erg_error e;
        erg_status st = ERG_OK;
        int what = 0;
        if (set_sm) {
            st = erg_gpu_lock_sm_clocks(d->gpu, g, (int)lo, (int)hi, &e);
            what = CH_SM;
        } else if (set_mem) {
            st = erg_gpu_lock_mem_clocks(d->gpu, g, (int)lo, (int)hi, &e);
            what = CH_MEM;
        } else if (set_pl) {
            st = erg_gpu_set_power_limit(d->gpu, g, (uint32_t)mw, &e);
            what = CH_PL;
        } else if (!strcmp(op, "reset_gpu_locked_clocks")) {
            st = erg_gpu_reset_sm_clocks(d->gpu, g, &e);
            lease_release(d, pid, g, CH_SM);
        } else if (!strcmp(op, "reset_mem_locked_clocks")) {
            st = erg_gpu_reset_mem_clocks(d->gpu, g, &e);
            lease_release(d, pid, g, CH_MEM);
        } else if (!strcmp(op, "reset_locked_clocks")) {
            st = erg_gpu_reset_sm_clocks(d->gpu, g, &e);
            erg_error e2;
            erg_status st2 = erg_gpu_reset_mem_clocks(d->gpu, g, &e2);
            if (!st && st2 && st2 != ERG_ENOTSUP) {
                st = st2;
                e = e2;
            }
            lease_release(d, pid, g, CH_SM | CH_MEM);
        } else if (!strcmp(op, "reset_power_limit")) {
            st = erg_gpu_reset_power_limit(d->gpu, g, &e);
            lease_release(d, pid, g, CH_PL);
        }
        if (st) {
            int hs = status_of(st);
            if (hs > worst || worst == 200)
                worst = hs;
            dlog(d, 1, "%s on GPU %d for pid %d failed: %s", op, g, (int)pid, e.msg);
            char msg[600];
            size_t o = 0;
            for (const char *c = e.msg; *c && o + 2 < sizeof msg; c++)
                msg[o++] = (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) ? '\'' : *c;
            msg[o] = '\0';
            erg__buf_printf(&errs, "%s\"%d\": \"%s\"", errs.len ? ", " : "", g, msg);
        } else {
            if (what)
                lease_take(d, l, g, what);
            dlog(d, 0, "%s on GPU %d for uid %u pid %d", op, g, uid, (int)pid);
        }
    }
    if (l)
        lease_drop_if_empty(d, l);
    if (wrote_pending) {
        memset(d->pending, 0, sizeof d->pending);
        d->dirty = true;
    }
    state_sync(d, false, NULL); /* before the answer: an acknowledged lease survives a crash */
    if (worst == 200)
        respond(resp, 200, "");
    else {
        erg__buf body = {0};
        erg__buf_printf(&body, "{\"errors\": {%s}}", errs.data ? errs.data : "");
        respond(resp, worst, body.data ? body.data : "{}");
        erg__buf_free(&body);
    }
    erg__buf_free(&errs);
}

static void handle_read(erg_daemon *d, const char *op, uint64_t mask, erg__buf *resp)
{
    int count = erg_gpu_count(d->gpu);
    erg__buf b = {0};
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    long long ts_ms = (long long)rt.tv_sec * 1000 + rt.tv_nsec / 1000000;
    bool power = !strcmp(op, "get_power");
    if (power)
        erg__buf_printf(&b, "{\"timestamp_ms\": %lld, \"power_mw\": {", ts_ms);
    else
        erg__buf_printf(&b, "{");
    bool first = true;
    for (int g = 0; g < count; g++) {
        if (!((mask >> g) & 1))
            continue;
        erg_error e;
        erg_status st = ERG_OK;
        if (power) {
            uint32_t mw;
            if (!(st = erg_gpu_power_mw(d->gpu, g, &mw, &e)))
                erg__buf_printf(&b, "%s\"%d\": %u", first ? "" : ", ", g, mw);
        } else if (!strcmp(op, "get_cumulative_energy")) {
            uint64_t mj;
            erg_gpu_energy_info info;
            if (!(st = erg_gpu_energy_mj(d->gpu, g, &mj, &e)) &&
                !(st = erg_gpu_energy_info_get(d->gpu, g, &info, &e)))
                erg__buf_printf(&b,
                                "%s\"%d\": {\"energy_mj\": %llu, \"energy_source\": \"%s\", "
                                "\"energy_scope\": \"%s\"}",
                                first ? "" : ", ", g, (unsigned long long)mj,
                                erg_energy_source_name(info.source), info.scope);
        } else if (!strcmp(op, "get_power_limit") || !strcmp(op, "get_power_limit_constraints")) {
            uint32_t lo, hi, def, cur;
            if (!(st = erg_gpu_power_limits(d->gpu, g, &lo, &hi, &def, &cur, &e))) {
                if (op[15] == '\0')
                    erg__buf_printf(&b, "%s\"%d\": {\"power_limit_mw\": %u}", first ? "" : ", ",
                                    g, cur);
                else
                    erg__buf_printf(&b,
                                    "%s\"%d\": {\"min_power_limit_mw\": %u, "
                                    "\"max_power_limit_mw\": %u, \"default_power_limit_mw\": %u}",
                                    first ? "" : ", ", g, lo, hi, def);
            }
        } else if (!strcmp(op, "get_supported_clocks")) {
            int *sm = NULL, *mem = NULL;
            size_t nsm = 0, nmem = 0;
            if (!(st = erg_gpu_sm_clocks(d->gpu, g, &sm, &nsm, &e)) &&
                !(st = erg_gpu_mem_clocks(d->gpu, g, &mem, &nmem, &e))) {
                erg__buf_printf(&b, "%s\"%d\": {\"sm_clocks_mhz\": [", first ? "" : ", ", g);
                for (size_t i = 0; i < nsm; i++)
                    erg__buf_printf(&b, "%s%d", i ? ", " : "", sm[i]);
                erg__buf_printf(&b, "], \"mem_clocks_mhz\": [");
                for (size_t i = 0; i < nmem; i++)
                    erg__buf_printf(&b, "%s%d", i ? ", " : "", mem[i]);
                erg__buf_printf(&b, "]}");
            }
            erg__free(sm);
            erg__free(mem);
        }
        if (st) {
            erg__buf_free(&b);
            respond_error(resp, status_of(st), "GPU %d: %s", g, e.msg);
            return;
        }
        first = false;
    }
    erg__buf_printf(&b, power ? "}}" : "}");
    if (b.data)
        respond(resp, 200, b.data);
    else
        respond_error(resp, 500, "out of memory");
    erg__buf_free(&b);
}

void erg__daemon_handle(erg_daemon *d, const erg__http_req *req, const erg__peer *peer,
                        erg__buf *resp)
{
    static const char *const write_params_clk[] = {"gpu_ids", "min_clock_mhz", "max_clock_mhz",
                                                   "block", NULL};
    static const char *const write_params_pl[] = {"gpu_ids", "power_limit_mw", "block", NULL};
    static const char *const write_params_reset[] = {"gpu_ids", "block", NULL};
    static const char *const read_params[] = {"gpu_ids", NULL};
    static const char *const no_params[] = {NULL};
    static const struct {
        const char *path;
        const char *method;
        const char *const *params;
        ep_kind kind;
    } eps[] = {
        {"/discover", "GET", no_params, EP_OPEN},
        {"/time", "GET", no_params, EP_OPEN},
        {"/gpu/set_gpu_locked_clocks", "POST", write_params_clk, EP_WRITE},
        {"/gpu/set_mem_locked_clocks", "POST", write_params_clk, EP_WRITE},
        {"/gpu/reset_gpu_locked_clocks", "POST", write_params_reset, EP_WRITE},
        {"/gpu/reset_mem_locked_clocks", "POST", write_params_reset, EP_WRITE},
        {"/gpu/reset_locked_clocks", "POST", write_params_reset, EP_WRITE},
        {"/gpu/set_power_limit", "POST", write_params_pl, EP_WRITE},
        {"/gpu/reset_power_limit", "POST", write_params_reset, EP_WRITE},
        {"/gpu/get_cumulative_energy", "GET", read_params, EP_READ},
        {"/gpu/get_power", "GET", read_params, EP_READ},
        {"/gpu/get_power_limit", "GET", read_params, EP_READ},
        {"/gpu/get_power_limit_constraints", "GET", read_params, EP_READ},
        {"/gpu/get_supported_clocks", "GET", read_params, EP_READ},
    };
    d->requests++;
    size_t i = 0;
    while (i < ERG__ARRAY_LEN(eps) && strcmp(eps[i].path, req->path))
        i++;
    if (i == ERG__ARRAY_LEN(eps)) {
        respond_error(resp, 404, "no endpoint %s", req->path);
        return;
    }
    if (strcmp(req->method, eps[i].method)) {
        respond_error(resp, 405, "%s expects %s", eps[i].path, eps[i].method);
        return;
    }
    erg__query q;
    if (erg__query_parse(req->query, &q)) {
        respond_error(resp, 400, "malformed query string");
        return;
    }
    char bad[40];
    if (!params_known(&q, eps[i].params, bad, sizeof bad)) {
        respond_error(resp, 400, "unknown parameter '%s' for %s", bad, eps[i].path);
        return;
    }
    bool block = true;
    if (!parse_bool(erg__query_get(&q, "block"), &block)) {
        respond_error(resp, 400, "block must be true or false");
        return;
    }
    if (eps[i].kind == EP_OPEN) {
        if (!strcmp(req->path, "/time")) {
            struct timespec rt;
            clock_gettime(CLOCK_REALTIME, &rt);
            char body[64];
            snprintf(body, sizeof body, "{\"timestamp_ms\": %lld}",
                     (long long)rt.tv_sec * 1000 + rt.tv_nsec / 1000000);
            respond(resp, 200, body);
        } else
            handle_discover(d, resp);
        return;
    }
    int count = erg_gpu_count(d->gpu);
    uint64_t mask;
    const char *ids = erg__query_get(&q, "gpu_ids");
    if (!ids && eps[i].kind == EP_READ)
        mask = count >= 64 ? UINT64_MAX : (((uint64_t)1 << count) - 1);
    else if (!ids) {
        respond_error(resp, 400, "gpu_ids is required");
        return;
    } else if (erg__parse_gpu_ids(ids, count > 64 ? 64 : count, &mask)) {
        respond_error(resp, 400, "gpu_ids '%s' is not a list of GPU ids in [0, %d]", ids,
                      count - 1);
        return;
    }
    const char *op = req->path + 5; /* after "/gpu/" */
    if (eps[i].kind == EP_READ)
        handle_read(d, op, mask, resp);
    else
        handle_write(d, op, &q, mask, peer, resp);
}

/* ---- construction ---- */

static erg_status daemon_alloc(const char *cfg_text, size_t cfg_len, const char *cfg_name,
                               erg_gpu *gpu, erg_daemon **out, erg_error *err)
{
    if (!gpu)
        return erg_error_set(err, ERG_EINVAL, "ergond needs a GPU back-end");
    if (erg_gpu_count(gpu) > 64)
        return erg_error_set(err, ERG_ENOTSUP, "ergond handles at most 64 GPUs");
    erg_daemon *d = erg__calloc(1, sizeof *d);
    if (!d)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    d->gpu = gpu;
    d->listen_fd = -1;
    d->conns_per_uid = DEFAULT_CONNS_PER_UID;
    d->stop_pipe[0] = d->stop_pipe[1] = -1;
    erg_status st = erg__config_parse(cfg_text, cfg_len, cfg_name, &d->cfg, err);
    if (st) {
        erg__free(d);
        return st;
    }
    *out = d;
    return ERG_OK;
}

erg_status erg__daemon_new_detached(const char *config_text, erg_gpu *gpu, erg_daemon **out,
                                    erg_error *err)
{
    return daemon_alloc(config_text, strlen(config_text), "config", gpu, out, err);
}

erg_status erg_daemon_new(const char *socket_path, unsigned socket_mode, const char *config_path,
                          erg_gpu *gpu, erg_daemon_log_fn log, void *log_user, erg_daemon **out,
                          erg_error *err)
{
    if (!socket_path || !config_path || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_daemon_new: NULL argument");
    if (socket_mode > 0777)
        return erg_error_set(err, ERG_EINVAL, "socket mode %o is not a permission mode",
                             socket_mode);
    struct sockaddr_un addr;
    if (strlen(socket_path) >= sizeof addr.sun_path)
        return erg_error_set(err, ERG_EINVAL, "socket path '%s' is too long", socket_path);
    char *text = NULL;
    size_t len = 0;
    /* StrictModes: a config another user can change could grant itself GPU access. */
    erg_status st = erg__read_secure_file(config_path, "config file", 1 << 20, &text, &len, err);
    if (st)
        return st;
    erg_daemon *d = NULL;
    st = daemon_alloc(text, len, config_path, gpu, &d, err);
    erg__free(text);
    if (st)
        return st;
    d->log = log;
    d->log_user = log_user;
    if (pipe2(d->stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        st = erg_error_set(err, ERG_EIO, "pipe: %s", strerror(errno));
        goto fail;
    }
    d->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (d->listen_fd < 0) {
        st = erg_error_set(err, ERG_EIO, "socket: %s", strerror(errno));
        goto fail;
    }
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, socket_path, strlen(socket_path) + 1);
    /* A socket file that nobody answers on is stale: remove it. */
    struct stat sb;
    if (lstat(socket_path, &sb) == 0) {
        if (!S_ISSOCK(sb.st_mode)) {
            st = erg_error_set(err, ERG_EEXIST, "%s exists and is not a socket", socket_path);
            goto fail;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int live = probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof addr) == 0;
        if (probe >= 0)
            close(probe);
        if (live) {
            st = erg_error_set(err, ERG_EEXIST, "another daemon answers on %s", socket_path);
            goto fail;
        }
        unlink(socket_path);
    }
    mode_t old = umask(0177);
    int rc = bind(d->listen_fd, (struct sockaddr *)&addr, sizeof addr);
    umask(old);
    if (rc != 0) {
        st = erg_error_set(err, ERG_EIO, "bind %s: %s", socket_path, strerror(errno));
        goto fail;
    }
    if (!(d->socket_path = erg__strdup(socket_path))) {
        unlink(socket_path);
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    if (chmod(socket_path, socket_mode) != 0 || listen(d->listen_fd, 64) != 0) {
        st = erg_error_set(err, ERG_EIO, "%s: %s", socket_path, strerror(errno));
        goto fail;
    }
    *out = d;
    return ERG_OK;
fail:
    erg_daemon_free(d);
    return st;
}

erg_status erg_daemon_set_lock_file(erg_daemon *d, const char *path, erg_error *err)
{
    if (!d)
        return erg_error_set(err, ERG_EINVAL, "NULL daemon");
    char *copy = NULL;
    if (path && !(copy = erg__strdup(path)))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (copy) {
        /* Whoever can create or remove the file there controls writes. */
        char *slash = strrchr(copy, '/');
        erg_status st;
        if (!slash)
            st = erg__check_secure_dirs(".", "lock file", path, err);
        else if (slash == copy)
            st = erg__check_secure_dirs("/", "lock file", path, err);
        else {
            *slash = '\0';
            st = erg__check_secure_dirs(copy, "lock file", path, err);
            *slash = '/';
        }
        if (st) {
            erg__free(copy);
            return st;
        }
    }
    erg__free(d->lock_file);
    d->lock_file = copy;
    return ERG_OK;
}

/* Is the process that held a lease (pid, start time) still the same live
 * process? On success *pidfd is a pidfd for it (or -1 without pidfd_open). */
static bool holder_alive(pid_t pid, unsigned long long start, int *pidfd)
{
    *pidfd = -1;
    if (start == 0)
        return false; /* its identity was never known: cannot tell it from a reused pid */
    int fd = pidfd_open_compat(pid);
    if (fd < 0 && kill(pid, 0) != 0 && errno == ESRCH)
        return false;
    /* Read the start time after opening the pidfd: if it matches, the
     * process that has the pid now started before the pidfd was opened, so
     * the pidfd refers to it. */
    unsigned long long now_start;
    if (erg__proc_start_ticks(pid, &now_start) || now_start != start) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    *pidfd = fd;
    return true;
}

static void reset_everything(erg_daemon *d, const char *why)
{
    dlog(d, 1, "%s: resetting clocks and power limits of every GPU, since an earlier ergond may "
               "have left changes that nobody would undo",
         why);
    for (int g = 0; g < erg_gpu_count(d->gpu); g++) {
        restore_gpu(d, g, CH_SM | CH_MEM | CH_PL, "start-up reset");
        dlog(d, 0, "start-up: GPU %d restored", g);
    }
}

/* Apply a lease state read at start-up: re-adopt live holders, reset what
 * dead holders and pending changes touched. */
static void recover(erg_daemon *d, const erg__state *s)
{
    int count = erg_gpu_count(d->gpu);
    uint8_t reset[64] = {0};
    for (size_t i = 0; i < s->n; i++) {
        const erg__lease_rec *r = &s->rec[i];
        if (r->gpu >= count) {
            dlog(d, 1, "%s: GPU %d is not present any more; its lease is dropped", d->state_path,
                 r->gpu);
            continue;
        }
        if (r->pending) {
            dlog(d, 1, "a change on GPU %d was in progress when ergond stopped: resetting it",
                 r->gpu);
            reset[r->gpu] |= (uint8_t)r->bits;
            continue;
        }
        lease *l = NULL;
        for (int k = 0; k < MAX_LEASES && !l; k++)
            if (d->leases[k].used && d->leases[k].pid == r->pid &&
                d->leases[k].start == r->start)
                l = &d->leases[k];
        int fd = -1;
        if (!l && holder_alive(r->pid, r->start, &fd)) {
            for (int k = 0; k < MAX_LEASES && !l; k++)
                if (!d->leases[k].used)
                    l = &d->leases[k];
            if (!l) {
                if (fd >= 0)
                    close(fd);
            } else {
                memset(l, 0, sizeof *l);
                l->pid = r->pid;
                l->start = r->start;
                l->uid = r->uid;
                l->pidfd = fd;
                l->used = true;
            }
        }
        if (l) {
            lease_take(d, l, r->gpu, (int)r->bits);
            dlog(d, 0, "pid %d (uid %u) still holds GPU %d: lease re-adopted", (int)r->pid,
                 r->uid, r->gpu);
        } else {
            reset[r->gpu] |= (uint8_t)r->bits;
            dlog(d, 0, "pid %d (uid %u) exited while ergond was down: resetting GPU %d",
                 (int)r->pid, r->uid, r->gpu);
        }
    }
    for (int g = 0; g < count; g++) {
        if (!reset[g])
            continue;
        restore_gpu(d, g, reset[g], "start-up reset");
        /* what was reset is nobody's any more */
        for (int k = 0; k < MAX_LEASES; k++)
            if (d->leases[k].used && (d->leases[k].what[g] & reset[g])) {
                d->leases[k].what[g] &= (uint8_t)~reset[g];
                lease_drop_if_empty(d, &d->leases[k]);
            }
        dlog(d, 0, "start-up: GPU %d restored", g);
    }
}

erg_status erg_daemon_set_state_dir(erg_daemon *d, const char *dir, erg_error *err)
{
    if (!d || !dir || !*dir)
        return erg_error_set(err, ERG_EINVAL, "erg_daemon_set_state_dir: NULL argument");
    if (d->state_path)
        return erg_error_set(err, ERG_ESTATE, "the state directory is already set");
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno != ENOENT || mkdir(dir, 0700) != 0)
            return erg_error_set(err, ERG_EIO, "state directory %s: %s", dir, strerror(errno));
        dlog(d, 0, "created state directory %s", dir);
    } else if (!S_ISDIR(sb.st_mode))
        return erg_error_set(err, ERG_EINVAL, "state directory %s is not a directory", dir);
    erg_status st = erg__check_secure_dirs(dir, "state directory", dir, err);
    if (st)
        return st;
    size_t n = strlen(dir) + sizeof "/leases";
    if (!(d->state_path = erg__malloc(n)))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    snprintf(d->state_path, n, "%s/leases", dir);
    erg__boot_id(d->boot_id, sizeof d->boot_id);

    char *text = NULL;
    size_t len = 0;
    erg_error e;
    st = erg__read_secure_file(d->state_path, "lease state", 4 << 20, &text, &len, &e);
    if (st == ERG_ENOTFOUND) {
        char why[600];
        snprintf(why, sizeof why, "no lease state in %s (first start, or it was removed)", dir);
        reset_everything(d, why);
    } else if (st) {
        dlog(d, 2, "%s", e.msg);
        reset_everything(d, "the lease state cannot be trusted");
    } else {
        erg__state s;
        st = erg__state_parse(text, len, d->state_path, &s, &e);
        if (st) {
            dlog(d, 2, "%s", e.msg);
            reset_everything(d, "the lease state cannot be read");
        } else if (s.boot[0] && d->boot_id[0] && strcmp(s.boot, d->boot_id)) {
            dlog(d, 0, "%s was written before the last boot: its %zu lease record(s) are dropped "
                       "(the GPUs were reset when the driver loaded)",
                 d->state_path, s.n);
        } else
            recover(d, &s);
        erg__state_free(&s);
    }
    erg__free(text);
    int held = 0;
    for (int k = 0; k < MAX_LEASES; k++)
        held += d->leases[k].used;
    dlog(d, 0, "lease state in %s: %d live holder%s re-adopted", d->state_path, held,
         held == 1 ? "" : "s");
    /* Write it now: a failure here (read-only or full disk) is a start-up
     * error rather than a daemon that silently cannot keep its promise. */
    st = state_sync(d, true, err);
    if (st) {
        erg__free(d->state_path);
        d->state_path = NULL;
    }
    return st;
}

erg_status erg_daemon_set_socket_group(erg_daemon *d, unsigned gid, erg_error *err)
{
    if (!d || !d->socket_path)
        return erg_error_set(err, ERG_EINVAL, "erg_daemon_set_socket_group: no socket");
    if (lchown(d->socket_path, (uid_t)-1, (gid_t)gid) != 0)
        return erg_error_set(err, ERG_EIO, "cannot give socket %s to gid %u: %s",
                             d->socket_path, gid, strerror(errno));
    return ERG_OK;
}

erg_status erg_daemon_set_conn_limit(erg_daemon *d, int per_uid, erg_error *err)
{
    if (!d)
        return erg_error_set(err, ERG_EINVAL, "NULL daemon");
    if (per_uid < 1 || per_uid > MAX_CONNS - ROOT_RESERVED)
        return erg_error_set(err, ERG_EINVAL,
                             "connections per uid must be in [1, %d], got %d",
                             MAX_CONNS - ROOT_RESERVED, per_uid);
    d->conns_per_uid = per_uid;
    return ERG_OK;
}

void erg_daemon_stop(erg_daemon *d)
{
    if (d && d->stop_pipe[1] >= 0) {
        ssize_t w = write(d->stop_pipe[1], "x", 1);
        (void)w;
    }
}

static void close_conn(erg_daemon *d, int i)
{
    if (d->conns[i]) {
        close(d->conns[i]->fd);
        erg__free(d->conns[i]);
        d->conns[i] = NULL;
    }
}

static void send_all(int fd, const char *data, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, data + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

static void accept_conns(erg_daemon *d)
{
    for (;;) {
        int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct ucred cred;
        socklen_t cl = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
            close(fd);
            continue;
        }
        int slot = -1, mine = 0, non_root = 0;
        for (int i = 0; i < MAX_CONNS; i++) {
            if (!d->conns[i]) {
                if (slot < 0)
                    slot = i;
                continue;
            }
            mine += d->conns[i]->peer.uid == cred.uid;
            non_root += d->conns[i]->peer.uid != 0;
        }
        const char *full = NULL;
        char why[160];
        if (slot < 0)
            full = "too many connections";
        else if (cred.uid != 0 && mine >= d->conns_per_uid) {
            snprintf(why, sizeof why,
                     "too many connections from uid %u (at most %d at once per uid)",
                     (unsigned)cred.uid, d->conns_per_uid);
            full = why;
        } else if (cred.uid != 0 && non_root >= MAX_CONNS - ROOT_RESERVED)
            full = "too many connections (the last slots are kept for root)";
        if (full) {
            /* Read what already arrived (closing with unread data makes the
             * peer's read fail with ECONNRESET before it sees the answer). */
            char sink[1024];
            for (int k = 0; k < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; k++)
                ;
            erg__buf r = {0};
            respond_error(&r, 503, "%s", full);
            if (r.data)
                send_all(fd, r.data, r.len);
            erg__buf_free(&r);
            shutdown(fd, SHUT_WR);
            close(fd);
            continue;
        }
        struct timeval tv = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        conn *c = erg__malloc(sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->peer.uid = cred.uid;
        c->peer.gid = cred.gid;
        c->peer.pid = cred.pid;
        c->peer.ngroups = 0;
#ifdef SO_PEERGROUPS
        {
            /* The groups the peer had when it connected (Linux >= 4.13). */
            gid_t gl[ERG__PEER_MAX_GROUPS];
            socklen_t gll = sizeof gl;
            if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, gl, &gll) == 0)
                for (size_t k = 0; k < gll / sizeof gl[0]; k++)
                    c->peer.groups[c->peer.ngroups++] = (unsigned)gl[k];
        }
#endif
        c->len = 0;
        c->deadline = now_s() + CONN_TIMEOUT_S;
        d->conns[slot] = c;
    }
}

static void serve_conn(erg_daemon *d, int i)
{
    conn *c = d->conns[i];
    ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (r <= 0) {
        close_conn(d, i);
        return;
    }
    c->len += (size_t)r;
    erg__http_req req;
    int pr = erg__http_parse(c->buf, c->len, &req);
    erg__buf resp = {0};
    if (pr < 0) {
        dlog(d, 1, "malformed request from pid %d uid %u: HTTP %d", (int)c->peer.pid, c->peer.uid, -pr);
        respond_error(&resp, -pr, "malformed request (%s)", reason(-pr));
    } else if (pr == 0) {
        if (c->len < sizeof c->buf)
            return;
        respond_error(&resp, 431, "request too large");
    } else
        erg__daemon_handle(d, &req, &c->peer, &resp);
    if (resp.data)
        send_all(c->fd, resp.data, resp.len);
    erg__buf_free(&resp);
    close_conn(d, i);
}

erg_status erg_daemon_run(erg_daemon *d, erg_error *err)
{
    if (!d || d->listen_fd < 0)
        return erg_error_set(err, ERG_EINVAL, "daemon not listening");
    dlog(d, 0, "ergond serving %d GPU%s on %s", erg_gpu_count(d->gpu),
         erg_gpu_count(d->gpu) == 1 ? "" : "s", d->socket_path);
    struct pollfd pfd[2 + MAX_CONNS + MAX_LEASES];
    int who[2 + MAX_CONNS + MAX_LEASES];
    for (;;) {
        int n = 0;
        pfd[n] = (struct pollfd){d->stop_pipe[0], POLLIN, 0};
        who[n++] = -1;
        pfd[n] = (struct pollfd){d->listen_fd, POLLIN, 0};
        who[n++] = -2;
        bool fallback = false;
        for (int i = 0; i < MAX_CONNS; i++)
            if (d->conns[i]) {
                pfd[n] = (struct pollfd){d->conns[i]->fd, POLLIN, 0};
                who[n++] = i;
            }
        for (int i = 0; i < MAX_LEASES; i++)
            if (d->leases[i].used) {
                if (d->leases[i].pidfd >= 0) {
                    pfd[n] = (struct pollfd){d->leases[i].pidfd, POLLIN, 0};
                    who[n++] = 1000 + i;
                } else
                    fallback = true;
            }
        int rc = poll(pfd, (nfds_t)n, fallback ? 500 : 1000);
        if (rc < 0 && errno != EINTR)
            return erg_error_set(err, ERG_EIO, "poll: %s", strerror(errno));
        if (rc > 0 && (pfd[0].revents & POLLIN))
            break;
        for (int k = 2; rc > 0 && k < n; k++) {
            if (!pfd[k].revents)
                continue;
            if (who[k] >= 1000) {
                lease *l = &d->leases[who[k] - 1000];
                if (l->used)
                    lease_expire(d, l, "exited");
            } else if (d->conns[who[k]])
                serve_conn(d, who[k]);
        }
        if (rc > 0 && (pfd[1].revents & POLLIN))
            accept_conns(d);
        double now = now_s();
        for (int i = 0; i < MAX_CONNS; i++)
            if (d->conns[i] && now > d->conns[i]->deadline) {
                erg__buf resp = {0};
                respond_error(&resp, 408, "request timed out");
                if (resp.data)
                    send_all(d->conns[i]->fd, resp.data, resp.len);
                erg__buf_free(&resp);
                close_conn(d, i);
            }
        if (fallback)
            for (int i = 0; i < MAX_LEASES; i++)
                if (d->leases[i].used && d->leases[i].pidfd < 0 &&
                    kill(d->leases[i].pid, 0) != 0 && errno == ESRCH)
                    lease_expire(d, &d->leases[i], "exited");
        state_sync(d, false, NULL);
    }
    for (int i = 0; i < MAX_LEASES; i++)
        if (d->leases[i].used)
            lease_expire(d, &d->leases[i], "still held at shutdown");
    state_sync(d, false, NULL);
    dlog(d, 0, "ergond stopped after %llu requests", (unsigned long long)d->requests);
    return ERG_OK;
}

void erg_daemon_free(erg_daemon *d)
{
    if (!d)
        return;
    for (int i = 0; i < MAX_CONNS; i++)
        close_conn(d, i);
    for (int i = 0; i < MAX_LEASES; i++)
        if (d->leases[i].used && d->leases[i].pidfd >= 0)
            close(d->leases[i].pidfd);
    if (d->listen_fd >= 0) {
        close(d->listen_fd);
        if (d->socket_path)
            unlink(d->socket_path);
    }
    for (int i = 0; i < 2; i++)
        if (d->stop_pipe[i] >= 0)
            close(d->stop_pipe[i]);
    erg__free(d->socket_path);
    erg__free(d->lock_file);
    erg__free(d->state_path);
    erg__config_free(&d->cfg);
    erg__free(d);
}
