/* backend_daemon.c: the GPU back-end that goes through ergond (HTTP over its Unix socket). */
#include "gpu/gpu_internal.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define REPLY_MAX (1 << 20)
#define TIMEOUT_MS 10000

typedef struct daemon_state {
    char path[108];
    char **names; /* per device, from /discover */
    /* Where ergond's last energy reading of devices 0..63 came from (0: not read yet). */
    unsigned char source[64];
    char scope[64][48];
} daemon_state;

/* One request: connect, send, read to EOF; *body is malloc'd JSON (or ""). */
static erg_status request(daemon_state *s, const char *method, const char *target, int *status,
                          char **body, erg_error *err)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return erg_error_set(err, ERG_EIO, "socket: %s", strerror(errno));
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, s->path, strlen(s->path) + 1);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int e = errno;
        close(fd);
        return erg_error_set(err, ERG_ENOGPU, "ergond unreachable at %s: %s", s->path, strerror(e));
    }
    char req[1400];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n"
                     "Connection: close\r\n\r\n",
                     method, target);
    if (n < 0 || (size_t)n >= sizeof req) {
        close(fd);
        return erg_error_set(err, ERG_EINVAL, "request too long");
    }
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = send(fd, req + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            return erg_error_set(err, ERG_EIO, "sending to ergond: %s", strerror(e));
        }
        off += (size_t)w;
    }
    erg__buf b = {0};
    char chunk[4096];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int pr = poll(&p, 1, TIMEOUT_MS);
        if (pr == 0) {
            close(fd);
            erg__buf_free(&b);
            return erg_error_set(err, ERG_ETIMEOUT, "ergond did not answer %s %s", method, target);
        }
        ssize_t r = recv(fd, chunk, sizeof chunk, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (b.len + (size_t)r > REPLY_MAX || erg__buf_append(&b, chunk, (size_t)r)) {
            close(fd);
            erg__buf_free(&b);
            return erg_error_set(err, ERG_EIO, "ergond reply too large");
        }
    }
    close(fd);
    int code = 0;
    const char *sep = b.data ? strstr(b.data, "\r\n\r\n") : NULL;
    if (!b.data || sscanf(b.data, "HTTP/1.%*d %d", &code) != 1 || !sep) {
        erg__buf_free(&b);
        return erg_error_set(err, ERG_EIO, "malformed reply from ergond to %s %s", method, target);
    }
    char *copy = erg__strdup(sep + 4);
    erg__buf_free(&b);
    if (!copy)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    *status = code;
    *body = copy;
    return ERG_OK;
}

/* Map a non-200 reply to a status with the daemon's message. */
static erg_status reply_error(int code, const char *body, const char *what, erg_error *err)
{
    erg_status st = code == 403                  ? ERG_EPERM
                    : code == 400                ? ERG_EINVAL
                    : code == 404 || code == 405 ? ERG_ENOTSUP
                                                 : ERG_EIO;
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    const char *msg = NULL;
    char buf[400] = "";
    if (j && json_is_string(json_object_get(j, "error")))
        msg = json_string_value(json_object_get(j, "error"));
    else if (j && json_is_object(json_object_get(j, "errors"))) {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(j, "errors"), k, v)
        {
            if (json_is_string(v)) {
                snprintf(buf, sizeof buf, "GPU %s: %s", k, json_string_value(v));
                break;
            }
        }
        msg = buf;
    }
    erg_error_set(err, st, "ergond refused %s (HTTP %d): %s", what, code, msg && *msg ? msg : body);
    json_decref(j);
    return st;
}

/* GET and parse JSON; *out must be json_decref'd. */
static erg_status get_json(daemon_state *s, const char *target, json_t **out, erg_error *err)
{
    int code;
    char *body = NULL;
    erg_status st = request(s, "GET", target, &code, &body, err);
    if (st)
        return st;
    if (code != 200) {
        st = reply_error(code, body, target, err);
        erg__free(body);
        return st;
    }
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    erg__free(body);
    if (!j)
        return erg_error_set(err, ERG_EIO, "ergond sent invalid JSON for %s: %s", target, je.text);
    *out = j;
    return ERG_OK;
}

static erg_status post(daemon_state *s, const char *target, erg_error *err)
{
    int code;
    char *body = NULL;
    erg_status st = request(s, "POST", target, &code, &body, err);
    if (st)
        return st;
    if (code != 200)
        st = reply_error(code, body, target, err);
    erg__free(body);
    return st;
}

static daemon_state *ds(erg_gpu *g)
{
    return g->impl;
}

static void d_close(erg_gpu *g)
{
    daemon_state *s = ds(g);
    if (!s)
        return;
    for (int i = 0; s->names && i < g->count; i++)
        erg__free(s->names[i]);
    erg__free(s->names);
    erg__free(s);
}

static erg_status d_name(erg_gpu *g, int dev, char *buf, size_t size, erg_error *err)
{
    snprintf(buf, size, "%s", ds(g)->names[dev] ? ds(g)->names[dev] : "unknown");
    return ERG_OK;
}

static erg_status clocks(erg_gpu *g, int dev, const char *key, int **out, size_t *n, erg_error *err)
{
    char target[128];
    snprintf(target, sizeof target, "/gpu/get_supported_clocks?gpu_ids=%d", dev);
    json_t *j = NULL;
    erg_status st = get_json(ds(g), target, &j, err);
    if (st)
        return st;
    char id[16];
    snprintf(id, sizeof id, "%d", dev);
    json_t *arr = json_object_get(json_object_get(j, id), key);
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > 100000) {
        json_decref(j);
        return erg_error_set(err, ERG_EIO, "ergond: no %s for GPU %d", key, dev);
    }
    size_t k = json_array_size(arr);
    int *c = erg__malloc(k * sizeof *c);
    if (!c) {
        json_decref(j);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < k; i++)
        c[i] = (int)json_integer_value(json_array_get(arr, i));
    json_decref(j);
    *out = c;
    *n = k;
    return ERG_OK;
}

static erg_status d_sm_clocks(erg_gpu *g, int dev, int **c, size_t *n, erg_error *err)
{
    return clocks(g, dev, "sm_clocks_mhz", c, n, err);
}

static erg_status d_mem_clocks(erg_gpu *g, int dev, int **c, size_t *n, erg_error *err)
{
    return clocks(g, dev, "mem_clocks_mhz", c, n, err);
}

static erg_status d_lock(erg_gpu *g, const char *op, int dev, int lo, int hi, erg_error *err)
{
    char target[200];
    snprintf(target, sizeof target,
             "/gpu/%s?gpu_ids=%d&min_clock_mhz=%d&max_clock_mhz=%d&block=true", op, dev, lo, hi);
    return post(ds(g), target, err);
}

static erg_status d_simple(erg_gpu *g, const char *op, int dev, erg_error *err)
{
    char target[200];
    snprintf(target, sizeof target, "/gpu/%s?gpu_ids=%d&block=true", op, dev);
    return post(ds(g), target, err);
}

static erg_status d_lock_sm(erg_gpu *g, int dev, int lo, int hi, erg_error *err)
{
    return d_lock(g, "set_gpu_locked_clocks", dev, lo, hi, err);
}

static erg_status d_reset_sm(erg_gpu *g, int dev, erg_error *err)
{
    return d_simple(g, "reset_gpu_locked_clocks", dev, err);
}

static erg_status d_lock_mem(erg_gpu *g, int dev, int lo, int hi, erg_error *err)
{
    return d_lock(g, "set_mem_locked_clocks", dev, lo, hi, err);
}

static erg_status d_reset_mem(erg_gpu *g, int dev, erg_error *err)
{
    return d_simple(g, "reset_mem_locked_clocks", dev, err);
}

static erg_status d_limits(erg_gpu *g, int dev, uint32_t *lo, uint32_t *hi, uint32_t *def,
                           uint32_t *cur, erg_error *err)
{
    char target[128], id[16];
    snprintf(id, sizeof id, "%d", dev);
    json_t *j = NULL;
    snprintf(target, sizeof target, "/gpu/get_power_limit_constraints?gpu_ids=%d", dev);
    erg_status st = get_json(ds(g), target, &j, err);
    if (st)
        return st;
    json_t *o = json_object_get(j, id);
    *lo = (uint32_t)json_integer_value(json_object_get(o, "min_power_limit_mw"));
    *hi = (uint32_t)json_integer_value(json_object_get(o, "max_power_limit_mw"));
    *def = (uint32_t)json_integer_value(json_object_get(o, "default_power_limit_mw"));
    json_decref(j);
    snprintf(target, sizeof target, "/gpu/get_power_limit?gpu_ids=%d", dev);
    if ((st = get_json(ds(g), target, &j, err)))
        return st;
    *cur = (uint32_t)json_integer_value(json_object_get(json_object_get(j, id), "power_limit_mw"));
    json_decref(j);
    return ERG_OK;
}

static erg_status d_set_limit(erg_gpu *g, int dev, uint32_t mw, erg_error *err)
{
    char target[200];
    snprintf(target, sizeof target, "/gpu/set_power_limit?gpu_ids=%d&power_limit_mw=%u&block=true",
             dev, mw);
    return post(ds(g), target, err);
}

static erg_status d_energy(erg_gpu *g, int dev, uint64_t *mj, erg_error *err)
{
    char target[128], id[16];
    snprintf(target, sizeof target, "/gpu/get_cumulative_energy?gpu_ids=%d", dev);
    snprintf(id, sizeof id, "%d", dev);
    json_t *j = NULL;
    erg_status st = get_json(ds(g), target, &j, err);
    if (st)
        return st;
    json_t *v = json_object_get(json_object_get(j, id), "energy_mj");
    if (!json_is_integer(v)) {
        json_decref(j);
        return erg_error_set(err, ERG_EIO, "ergond: no energy for GPU %d", dev);
    }
    *mj = (uint64_t)json_integer_value(v);
    /* ergond says where it came from (older ergond: nothing, a counter). */
    const char *src = json_string_value(json_object_get(json_object_get(j, id), "energy_source"));
    const char *scope = json_string_value(json_object_get(json_object_get(j, id), "energy_scope"));
    if (dev < 64) {
        daemon_state *s = ds(g);
        s->source[dev] = 1 + erg__energy_source_parse(src);
        snprintf(s->scope[dev], sizeof s->scope[dev], "%s", scope ? scope : "gpu");
    }
    json_decref(j);
    return ERG_OK;
}

static erg_status d_power(erg_gpu *g, int dev, uint32_t *mw, erg_error *err)
{
    char target[128], id[16];
    snprintf(target, sizeof target, "/gpu/get_power?gpu_ids=%d", dev);
    snprintf(id, sizeof id, "%d", dev);
    json_t *j = NULL;
    erg_status st = get_json(ds(g), target, &j, err);
    if (st)
        return st;
    json_t *v = json_object_get(json_object_get(j, "power_mw"), id);
    if (!json_is_integer(v)) {
        json_decref(j);
        return erg_error_set(err, ERG_EIO, "ergond: no power for GPU %d", dev);
    }
    *mw = (uint32_t)json_integer_value(v);
    json_decref(j);
    return ERG_OK;
}

/* ergond checks its own devices' counters (and integrates where it replaced one). */
static void d_energy_caps(erg_gpu *g, int dev, erg_gpu_energy_info *info)
{
    daemon_state *s = ds(g);
    info->source = ERG_ENERGY_COUNTER;
    snprintf(info->scope, sizeof info->scope, "gpu");
    if (dev < 64 && s->source[dev]) {
        info->source = (erg_energy_source)(s->source[dev] - 1);
        snprintf(info->scope, sizeof info->scope, "%s", s->scope[dev]);
    }
}

static const erg__gpu_backend daemon_backend = {
    "daemon",    d_close,    d_name,     d_sm_clocks,   d_mem_clocks,
    d_lock_sm,   d_reset_sm, d_lock_mem, d_reset_mem,   d_limits,
    d_set_limit, d_energy,   d_power,    d_energy_caps, 1,
};

erg_status erg_gpu_open_daemon(const char *socket_path, erg_gpu **out, erg_error *err)
{
    if (!socket_path || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_gpu_open_daemon: NULL argument");
    daemon_state *s = erg__calloc(1, sizeof *s);
    if (!s)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (strlen(socket_path) >= sizeof s->path) {
        erg__free(s);
        return erg_error_set(err, ERG_EINVAL, "socket path '%s' is too long", socket_path);
    }
    memcpy(s->path, socket_path, strlen(socket_path) + 1);
    json_t *j = NULL;
    erg_status st = get_json(s, "/discover", &j, err);
    if (st) {
        erg__free(s);
        return st;
    }
    json_t *gpus = json_object_get(j, "gpus");
    size_t n = json_is_array(gpus) ? json_array_size(gpus) : 0;
    if (n > 64)
        n = 64;
    s->names = erg__calloc(n ? n : 1, sizeof *s->names);
    for (size_t i = 0; s->names && i < n; i++) {
        const char *name = json_string_value(json_object_get(json_array_get(gpus, i), "name"));
        s->names[i] = erg__strdup(name ? name : "unknown");
    }
    json_decref(j);
    char spec[160];
    snprintf(spec, sizeof spec, "daemon:%s", socket_path);
    char *spec_copy = erg__strdup(spec);
    if (!s->names || !spec_copy) {
        erg__free(spec_copy);
        erg_gpu tmp = {.impl = s, .count = (int)n};
        d_close(&tmp);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    st = erg__gpu_alloc(&daemon_backend, (int)n, s, out, err);
    if (st) {
        erg__free(spec_copy);
        erg_gpu tmp = {.impl = s, .count = (int)n};
        d_close(&tmp);
        return st;
    }
    (*out)->spec = spec_copy;
    return ERG_OK;
}
