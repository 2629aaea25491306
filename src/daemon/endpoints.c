/* endpoints.c: ergond's endpoints -- zeusd's API on the Unix socket: /discover, /time, the
 * /gpu/set_* and /gpu/reset_* writes and the /gpu/get_* reads (docs/ergond.md) -- with their
 * parameter checks, authorisation and answers. Owns: the endpoint table and what a request may
 * do. Trusts: the peer's uid, gid, groups and pid as the kernel gave them at accept time
 * (SO_PEERCRED, SO_PEERGROUPS: loop.c) and the allow list (config.c); a peer whose pid the
 * kernel reports as 0 (another PID namespace) may read and reset, never set, since its lease
 * could never expire; nothing in the request
 * itself: unknown parameters, malformed numbers and GPU ids out of range are refused before
 * any GPU is touched. A write is authorised for every GPU it names before any is changed, is
 * refused while the administrator's lock file exists, and is recorded as a lease (leases.c)
 * before the answer; with a state directory, a change a process does not already hold is
 * recorded as pending first, and nothing is changed when that record cannot be written. */
#include "daemon/daemon_impl.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int status_of(erg_status st)
{
    switch (st) {
    case ERG_OK:
        return 200;
    case ERG_EPERM:
        return 403;
    case ERG_EINVAL:
    case ERG_ENOTSUP:
        return 400;
    default:
        return 500;
    }
}

typedef enum { EP_READ, EP_WRITE, EP_OPEN } ep_kind;

/* What an endpoint does; the table in erg__daemon_handle maps each path to one. */
typedef enum {
    OP_DISCOVER,
    OP_TIME,
    OP_SET_SM,       /* set_gpu_locked_clocks */
    OP_SET_MEM,      /* set_mem_locked_clocks */
    OP_RESET_SM,     /* reset_gpu_locked_clocks */
    OP_RESET_MEM,    /* reset_mem_locked_clocks */
    OP_RESET_CLOCKS, /* reset_locked_clocks: SM and memory */
    OP_SET_PL,       /* set_power_limit */
    OP_RESET_PL,     /* reset_power_limit */
    OP_GET_ENERGY,   /* get_cumulative_energy */
    OP_GET_POWER,    /* get_power */
    OP_GET_PL,       /* get_power_limit */
    OP_GET_PL_RANGE, /* get_power_limit_constraints */
    OP_GET_CLOCKS,   /* get_supported_clocks */
} ep_op;

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
        erg__http_respond(resp, 200, b.data);
    else
        erg__http_respond_error(resp, 500, "out of memory");
    erg__buf_free(&b);
}

/* A write endpoint; `name` (the path after /gpu/) is for the log. */
static void handle_write(erg_daemon *d, ep_op op, const char *name, const erg__query *q,
                         uint64_t mask, const erg__peer *peer, erg__buf *resp)
{
    unsigned uid = peer->uid, gid = peer->gid;
    pid_t pid = peer->pid;
    int count = erg_gpu_count(d->gpu);
    if (d->lock_file && access(d->lock_file, F_OK) == 0) {
        erg__dlog(d, 1, "refused %s for uid %u pid %d: writes disabled (%s exists)", name, uid,
                  (int)pid, d->lock_file);
        erg__http_respond_error(resp, 503, "writes are disabled by the administrator (%s exists)",
                                d->lock_file);
        return;
    }
    /* authorisation first, for every GPU named */
    for (int g = 0; g < count; g++)
        if ((mask >> g) & 1 &&
            !erg__config_allows_groups(&d->cfg, uid, gid, peer->groups, peer->ngroups, g)) {
            erg__dlog(d, 1, "refused %s on GPU %d for uid %u gid %u pid %d: not in the allow list",
                      name, g, uid, gid, (int)pid);
            erg__http_respond_error(resp, 403,
                                    "uid %u (gid %u) may not change GPU %d (not in the allow "
                                    "list of ergond)",
                                    uid, gid, g);
            return;
        }
    unsigned long lo = 0, hi = 0, mw = 0;
    bool set_sm = op == OP_SET_SM, set_mem = op == OP_SET_MEM, set_pl = op == OP_SET_PL;
    if (set_sm || set_mem) {
        if (!parse_uint(erg__query_get(q, "min_clock_mhz"), 100000, &lo) ||
            !parse_uint(erg__query_get(q, "max_clock_mhz"), 100000, &hi)) {
            erg__http_respond_error(resp, 400,
                                    "min_clock_mhz and max_clock_mhz must be integers in MHz");
            return;
        }
        if (lo > hi) {
            erg__http_respond_error(resp, 400, "min_clock_mhz %lu is above max_clock_mhz %lu", lo,
                                    hi);
            return;
        }
    }
    if (set_pl && !parse_uint(erg__query_get(q, "power_limit_mw"), 10000000, &mw)) {
        erg__http_respond_error(resp, 400, "power_limit_mw must be an integer in mW");
        return;
    }
    lease *l = NULL;
    bool wrote_pending = false;
    if ((set_sm || set_mem || set_pl) && pid <= 0) {
        /* The peer is in a PID namespace ergond's does not contain: nothing could tell ergond
         * when it exits, so nothing it set would ever be reset. */
        erg__dlog(d, 1,
                  "refused %s for uid %u: the kernel reports pid %d (a PID namespace ergond "
                  "cannot see), so its lease could never expire",
                  name, uid, (int)pid);
        erg__http_respond_error(resp, 403,
                                "ergond cannot see this client's process (the kernel reports "
                                "pid %d: the client is in a PID namespace that ergond's does "
                                "not contain, such as another container), so it could not "
                                "reset the GPU when the client exits; nothing was changed. Run "
                                "ergond in the host's PID namespace, or in one that contains "
                                "the clients'",
                                (int)pid);
        return;
    }
    if (set_sm || set_mem || set_pl) {
        l = erg__lease_of(d, pid, uid, true);
        if (!l) {
            erg__http_respond_error(resp, 503, "cannot track process %d for its lease", (int)pid);
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
        if (wrote_pending && erg__lease_sync(d, true, &se)) {
            memset(d->pending, 0, sizeof d->pending);
            erg__lease_drop_if_empty(d, l);
            erg__http_respond_error(resp, 503,
                                    "cannot record the lease, so nothing was changed: %s", se.msg);
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
        } else if (op == OP_RESET_SM) {
            st = erg_gpu_reset_sm_clocks(d->gpu, g, &e);
            erg__lease_release(d, pid, g, CH_SM);
        } else if (op == OP_RESET_MEM) {
            st = erg_gpu_reset_mem_clocks(d->gpu, g, &e);
            erg__lease_release(d, pid, g, CH_MEM);
        } else if (op == OP_RESET_CLOCKS) {
            st = erg_gpu_reset_sm_clocks(d->gpu, g, &e);
            erg_error e2;
            erg_status st2 = erg_gpu_reset_mem_clocks(d->gpu, g, &e2);
            if (!st && st2 && st2 != ERG_ENOTSUP) {
                st = st2;
                e = e2;
            }
            erg__lease_release(d, pid, g, CH_SM | CH_MEM);
        } else if (op == OP_RESET_PL) {
            st = erg_gpu_reset_power_limit(d->gpu, g, &e);
            erg__lease_release(d, pid, g, CH_PL);
        }
        if (st) {
            int hs = status_of(st);
            if (hs > worst || worst == 200)
                worst = hs;
            erg__dlog(d, 1, "%s on GPU %d for pid %d failed: %s", name, g, (int)pid, e.msg);
            char msg[600];
            size_t o = 0;
            for (const char *c = e.msg; *c && o + 2 < sizeof msg; c++)
                msg[o++] = (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) ? '\'' : *c;
            msg[o] = '\0';
            erg__buf_printf(&errs, "%s\"%d\": \"%s\"", errs.len ? ", " : "", g, msg);
        } else {
            if (what)
                erg__lease_take(d, l, g, what);
            erg__dlog(d, 0, "%s on GPU %d for uid %u pid %d", name, g, uid, (int)pid);
        }
    }
    if (l)
        erg__lease_drop_if_empty(d, l);
    if (wrote_pending) {
        memset(d->pending, 0, sizeof d->pending);
        d->dirty = true;
    }
    erg__lease_sync(d, false, NULL); /* before the answer: an acknowledged lease survives a crash */
    if (worst == 200)
        erg__http_respond(resp, 200, "");
    else {
        erg__buf body = {0};
        erg__buf_printf(&body, "{\"errors\": {%s}}", errs.data ? errs.data : "");
        erg__http_respond(resp, worst, body.data ? body.data : "{}");
        erg__buf_free(&body);
    }
    erg__buf_free(&errs);
}

/* A read endpoint. */
static void handle_read(erg_daemon *d, ep_op op, uint64_t mask, erg__buf *resp)
{
    int count = erg_gpu_count(d->gpu);
    erg__buf b = {0};
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    long long ts_ms = (long long)rt.tv_sec * 1000 + rt.tv_nsec / 1000000;
    bool power = op == OP_GET_POWER;
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
        } else if (op == OP_GET_ENERGY) {
            uint64_t mj;
            erg_gpu_energy_info info;
            if (!(st = erg_gpu_energy_mj(d->gpu, g, &mj, &e)) &&
                !(st = erg_gpu_energy_info_get(d->gpu, g, &info, &e)))
                erg__buf_printf(&b,
                                "%s\"%d\": {\"energy_mj\": %llu, \"energy_source\": \"%s\", "
                                "\"energy_scope\": \"%s\"}",
                                first ? "" : ", ", g, (unsigned long long)mj,
                                erg_energy_source_name(info.source), info.scope);
        } else if (op == OP_GET_PL || op == OP_GET_PL_RANGE) {
            uint32_t lo, hi, def, cur;
            if (!(st = erg_gpu_power_limits(d->gpu, g, &lo, &hi, &def, &cur, &e))) {
                if (op == OP_GET_PL)
                    erg__buf_printf(&b, "%s\"%d\": {\"power_limit_mw\": %u}", first ? "" : ", ", g,
                                    cur);
                else
                    erg__buf_printf(&b,
                                    "%s\"%d\": {\"min_power_limit_mw\": %u, "
                                    "\"max_power_limit_mw\": %u, \"default_power_limit_mw\": %u}",
                                    first ? "" : ", ", g, lo, hi, def);
            }
        } else if (op == OP_GET_CLOCKS) {
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
            erg__http_respond_error(resp, status_of(st), "GPU %d: %s", g, e.msg);
            return;
        }
        first = false;
    }
    erg__buf_printf(&b, power ? "}}" : "}");
    if (b.data)
        erg__http_respond(resp, 200, b.data);
    else
        erg__http_respond_error(resp, 500, "out of memory");
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
        ep_op op;
    } eps[] = {
        {"/discover", "GET", no_params, EP_OPEN, OP_DISCOVER},
        {"/time", "GET", no_params, EP_OPEN, OP_TIME},
        {"/gpu/set_gpu_locked_clocks", "POST", write_params_clk, EP_WRITE, OP_SET_SM},
        {"/gpu/set_mem_locked_clocks", "POST", write_params_clk, EP_WRITE, OP_SET_MEM},
        {"/gpu/reset_gpu_locked_clocks", "POST", write_params_reset, EP_WRITE, OP_RESET_SM},
        {"/gpu/reset_mem_locked_clocks", "POST", write_params_reset, EP_WRITE, OP_RESET_MEM},
        {"/gpu/reset_locked_clocks", "POST", write_params_reset, EP_WRITE, OP_RESET_CLOCKS},
        {"/gpu/set_power_limit", "POST", write_params_pl, EP_WRITE, OP_SET_PL},
        {"/gpu/reset_power_limit", "POST", write_params_reset, EP_WRITE, OP_RESET_PL},
        {"/gpu/get_cumulative_energy", "GET", read_params, EP_READ, OP_GET_ENERGY},
        {"/gpu/get_power", "GET", read_params, EP_READ, OP_GET_POWER},
        {"/gpu/get_power_limit", "GET", read_params, EP_READ, OP_GET_PL},
        {"/gpu/get_power_limit_constraints", "GET", read_params, EP_READ, OP_GET_PL_RANGE},
        {"/gpu/get_supported_clocks", "GET", read_params, EP_READ, OP_GET_CLOCKS},
    };
    d->requests++;
    size_t i = 0;
    while (i < ERG__ARRAY_LEN(eps) && strcmp(eps[i].path, req->path))
        i++;
    if (i == ERG__ARRAY_LEN(eps)) {
        erg__http_respond_error(resp, 404, "no endpoint %s", req->path);
        return;
    }
    if (strcmp(req->method, eps[i].method)) {
        erg__http_respond_error(resp, 405, "%s expects %s", eps[i].path, eps[i].method);
        return;
    }
    erg__query q;
    if (erg__query_parse(req->query, &q)) {
        erg__http_respond_error(resp, 400, "malformed query string");
        return;
    }
    char bad[40];
    if (!params_known(&q, eps[i].params, bad, sizeof bad)) {
        erg__http_respond_error(resp, 400, "unknown parameter '%s' for %s", bad, eps[i].path);
        return;
    }
    bool block = true;
    if (!parse_bool(erg__query_get(&q, "block"), &block)) {
        erg__http_respond_error(resp, 400, "block must be true or false");
        return;
    }
    if (eps[i].kind == EP_OPEN) {
        if (eps[i].op == OP_TIME) {
            struct timespec rt;
            clock_gettime(CLOCK_REALTIME, &rt);
            char body[64];
            snprintf(body, sizeof body, "{\"timestamp_ms\": %lld}",
                     (long long)rt.tv_sec * 1000 + rt.tv_nsec / 1000000);
            erg__http_respond(resp, 200, body);
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
        erg__http_respond_error(resp, 400, "gpu_ids is required");
        return;
    } else if (erg__parse_gpu_ids(ids, count > 64 ? 64 : count, &mask)) {
        erg__http_respond_error(resp, 400, "gpu_ids '%s' is not a list of GPU ids in [0, %d]", ids,
                                count - 1);
        return;
    }
    if (eps[i].kind == EP_READ)
        handle_read(d, eps[i].op, mask, resp);
    else
        handle_write(d, eps[i].op, req->path + 5 /* after "/gpu/" */, &q, mask, peer, resp);
}
