/* gpu.c: the GPU back-end front: argument checks, clock validation, dispatch to an ops table. */
#include "gpu/gpu_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double erg__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int erg__cmp_int_desc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

erg_status erg__gpu_alloc(const erg__gpu_backend *ops, int count, void *impl, erg_gpu **out,
                          erg_error *err)
{
    erg_gpu *g = erg__calloc(1, sizeof *g);
    if (!g)
        return erg_error_set(err, ERG_ENOMEM, "out of memory opening the %s back-end", ops->name);
    g->ops = ops;
    g->count = count;
    g->impl = impl;
    size_t n = count > 0 ? (size_t)count : 1;
    g->sm_cache = erg__calloc(n, sizeof *g->sm_cache);
    g->sm_cache_n = erg__calloc(n, sizeof *g->sm_cache_n);
    g->mem_cache = erg__calloc(n, sizeof *g->mem_cache);
    g->mem_cache_n = erg__calloc(n, sizeof *g->mem_cache_n);
    if (!g->sm_cache || !g->sm_cache_n || !g->mem_cache || !g->mem_cache_n ||
        erg__energy_alloc(g)) {
        erg__free(g->sm_cache);
        erg__free(g->sm_cache_n);
        erg__free(g->mem_cache);
        erg__free(g->mem_cache_n);
        erg__energy_free(g);
        erg__free(g);
        return erg_error_set(err, ERG_ENOMEM, "out of memory opening the %s back-end", ops->name);
    }
    *out = g;
    return ERG_OK;
}

void erg_gpu_close(erg_gpu *g)
{
    if (!g)
        return;
    if (g->ops && g->ops->close)
        g->ops->close(g);
    for (int i = 0; i < g->count; i++) {
        erg__free(g->sm_cache[i]);
        erg__free(g->mem_cache[i]);
    }
    erg__free(g->sm_cache);
    erg__free(g->sm_cache_n);
    erg__free(g->mem_cache);
    erg__free(g->mem_cache_n);
    erg__energy_free(g);
    erg__free(g->spec);
    erg__free(g);
}

const char *erg_gpu_open_spec(const erg_gpu *g)
{
    return g && g->spec ? g->spec : "";
}

erg_status erg_gpu_open(const char *spec, erg_gpu **out, erg_error *err)
{
    if (!spec || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_gpu_open: NULL argument");
    if (!strcmp(spec, "nvml"))
        return erg_gpu_open_nvml(NULL, out, err);
    if (!strncmp(spec, "nvml:", 5))
        return erg_gpu_open_nvml(spec + 5, out, err);
    if (!strcmp(spec, "amdsmi"))
        return erg_gpu_open_amdsmi(NULL, out, err);
    if (!strncmp(spec, "amdsmi:", 7))
        return erg_gpu_open_amdsmi(spec + 7, out, err);
    if (!strcmp(spec, "auto")) {
        erg_error e1, e2;
        if (erg_gpu_open_nvml(NULL, out, &e1) == ERG_OK)
            return ERG_OK;
        if (erg_gpu_open_amdsmi(NULL, out, &e2) == ERG_OK)
            return ERG_OK;
        /* Each reason without its own advice; one piece of advice for both. */
        char *cut1 = strstr(e1.msg, "; install"), *cut2 = strstr(e2.msg, "; install");
        if (cut1)
            *cut1 = '\0';
        if (cut2)
            *cut2 = '\0';
        return erg_error_set(
            err, ERG_ENOGPU,
            "no GPU library opens: %.180s; %.180s; install the NVIDIA driver or "
            "ROCm's amd-smi-lib, set $ERGON_NVML_LIBRARY or $ERGON_AMDSMI_LIBRARY, "
            "or use --gpu sim:GPU",
            e1.msg, e2.msg);
    }
    if (!strncmp(spec, "daemon:", 7))
        return erg_gpu_open_daemon(spec + 7, out, err);
    if (strlen(spec) > 4096)
        return erg_error_set(err, ERG_EINVAL, "GPU spec is too long");
    if (!strcmp(spec, "sim") || !strncmp(spec, "sim:", 4)) {
        /* sim[:gpu[:model[:n]]] */
        char gpu[32] = "a100", model[32] = "gpt3-xl";
        long n = 1;
        const char *p = spec[3] == ':' ? spec + 4 : spec + 3;
        char fields[3][32] = {"", "", ""};
        int nf = 0;
        while (*p && nf < 3) {
            const char *c = strchr(p, ':');
            size_t len = c ? (size_t)(c - p) : strlen(p);
            if (len >= sizeof fields[0])
                return erg_error_set(err, ERG_EINVAL, "GPU spec '%s': field too long", spec);
            memcpy(fields[nf], p, len);
            fields[nf][len] = '\0';
            nf++;
            p = c ? c + 1 : p + len;
            if (!c)
                break;
        }
        if (*p)
            return erg_error_set(err, ERG_EINVAL, "GPU spec '%s': too many fields", spec);
        if (fields[0][0])
            memcpy(gpu, fields[0], sizeof gpu);
        if (fields[1][0])
            memcpy(model, fields[1], sizeof model);
        if (fields[2][0] && (!erg__parse_long(fields[2], &n) || n < 1 || n > 64))
            return erg_error_set(err, ERG_EINVAL,
                                 "GPU spec '%s': device count '%s' is not in [1, 64]", spec,
                                 fields[2]);
        return erg_gpu_open_sim(gpu, model, (int)n, out, err);
    }
    return erg_error_set(err, ERG_EINVAL,
                         "unknown GPU back-end '%s' (expected sim[:GPU[:MODEL[:N]]], nvml, "
                         "nvml:LIBRARY, amdsmi, amdsmi:LIBRARY, auto or daemon:SOCKET)",
                         spec);
}

const char *erg_gpu_backend_name(const erg_gpu *g)
{
    return g ? g->ops->name : "none";
}

int erg_gpu_count(const erg_gpu *g)
{
    return g ? g->count : 0;
}

static erg_status check_dev(erg_gpu *g, int dev, erg_error *err)
{
    if (!g)
        return erg_error_set(err, ERG_EINVAL, "no GPU back-end (NULL handle)");
    if (dev < 0 || dev >= g->count)
        return erg_error_set(err, ERG_EINVAL, "GPU %d does not exist (%d device%s on %s)", dev,
                             g->count, g->count == 1 ? "" : "s", g->ops->name);
    return ERG_OK;
}

static erg_status cached_clocks(erg_gpu *g, int dev, bool mem, const int **clocks, size_t *n,
                                erg_error *err)
{
    int **cache = mem ? g->mem_cache : g->sm_cache;
    size_t *cn = mem ? g->mem_cache_n : g->sm_cache_n;
    if (!cache[dev]) {
        int *c = NULL;
        size_t k = 0;
        erg_status st =
            mem ? g->ops->mem_clocks(g, dev, &c, &k, err) : g->ops->sm_clocks(g, dev, &c, &k, err);
        if (st)
            return st;
        if (k == 0) {
            erg__free(c);
            return erg_error_set(err, ERG_ENOTSUP, "GPU %d reports no supported %s clocks", dev,
                                 mem ? "memory" : "SM");
        }
        cache[dev] = c;
        cn[dev] = k;
    }
    *clocks = cache[dev];
    *n = cn[dev];
    return ERG_OK;
}

static erg_status copy_clocks(erg_gpu *g, int dev, bool mem, int **clocks, size_t *n,
                              erg_error *err)
{
    if (!clocks || !n)
        return erg_error_set(err, ERG_EINVAL, "NULL output argument");
    erg_status st = check_dev(g, dev, err);
    if (st)
        return st;
    const int *c = NULL;
    size_t k = 0;
    st = cached_clocks(g, dev, mem, &c, &k, err);
    if (st)
        return st;
    int *copy = erg__malloc(k * sizeof *copy);
    if (!copy)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    memcpy(copy, c, k * sizeof *copy);
    *clocks = copy;
    *n = k;
    return ERG_OK;
}

erg_status erg_gpu_sm_clocks(erg_gpu *g, int dev, int **clocks, size_t *n, erg_error *err)
{
    return copy_clocks(g, dev, false, clocks, n, err);
}

erg_status erg_gpu_mem_clocks(erg_gpu *g, int dev, int **clocks, size_t *n, erg_error *err)
{
    return copy_clocks(g, dev, true, clocks, n, err);
}

erg_status erg_gpu_name(erg_gpu *g, int dev, char *buf, size_t size, erg_error *err)
{
    erg_status st = check_dev(g, dev, err);
    if (st)
        return st;
    if (!buf || size == 0)
        return erg_error_set(err, ERG_EINVAL, "erg_gpu_name: empty buffer");
    return g->ops->name_of(g, dev, buf, size, err);
}

/* Fail closed: a clock is accepted only if it is exactly in the list the
 * device reports, and min <= max. */
static erg_status check_range(erg_gpu *g, int dev, bool mem, int min_mhz, int max_mhz,
                              erg_error *err)
{
    erg_status st = check_dev(g, dev, err);
    if (st)
        return st;
    if (min_mhz > max_mhz)
        return erg_error_set(err, ERG_EINVAL,
                             "GPU %d: minimum clock %d MHz is above maximum %d MHz", dev, min_mhz,
                             max_mhz);
    const int *c = NULL;
    size_t n = 0;
    st = cached_clocks(g, dev, mem, &c, &n, err);
    if (st)
        return st;
    bool okmin = false, okmax = false;
    for (size_t i = 0; i < n; i++) {
        okmin |= c[i] == min_mhz;
        okmax |= c[i] == max_mhz;
    }
    if (!okmin || !okmax) {
        int bad = okmin ? max_mhz : min_mhz, step = n > 1 ? c[0] - c[1] : 0, below = 0, above = 0;
        for (size_t i = 0; i < n; i++) {
            if (i + 1 < n && c[i] - c[i + 1] != step)
                step = 0; /* not evenly spaced */
            if (c[i] < bad && (!below || c[i] > below))
                below = c[i];
            if (c[i] > bad && (!above || c[i] < above))
                above = c[i];
        }
        char steps[48] = "", near[64] = "";
        if (step > 0)
            snprintf(steps, sizeof steps, " in steps of %d MHz", step);
        if (below && above)
            snprintf(near, sizeof near, "; nearest: %d or %d MHz", below, above);
        return erg_error_set(err, ERG_EINVAL,
                             "GPU %d does not support %s clock %d MHz (supported: %d..%d MHz%s%s)",
                             dev, mem ? "memory" : "SM", bad, c[n - 1], c[0], steps, near);
    }
    return ERG_OK;
}

erg_status erg_gpu_lock_sm_clocks(erg_gpu *g, int dev, int min_mhz, int max_mhz, erg_error *err)
{
    erg_status st = check_range(g, dev, false, min_mhz, max_mhz, err);
    return st ? st : g->ops->lock_sm(g, dev, min_mhz, max_mhz, err);
}

erg_status erg_gpu_reset_sm_clocks(erg_gpu *g, int dev, erg_error *err)
{
    erg_status st = check_dev(g, dev, err);
    return st ? st : g->ops->reset_sm(g, dev, err);
}

erg_status erg_gpu_lock_mem_clocks(erg_gpu *g, int dev, int min_mhz, int max_mhz, erg_error *err)
{
    erg_status st = check_range(g, dev, true, min_mhz, max_mhz, err);
    return st ? st : g->ops->lock_mem(g, dev, min_mhz, max_mhz, err);
}

erg_status erg_gpu_reset_mem_clocks(erg_gpu *g, int dev, erg_error *err)
{
    erg_status st = check_dev(g, dev, err);
    return st ? st : g->ops->reset_mem(g, dev, err);
}

erg_status erg_gpu_power_limits(erg_gpu *g, int dev, uint32_t *min_mw, uint32_t *max_mw,
                                uint32_t *default_mw, uint32_t *current_mw, erg_error *err)
{
    erg_status st = check_dev(g, dev, err);
    if (st)
        return st;
    uint32_t a = 0, b = 0, c = 0, d = 0;
    st = g->ops->power_limits(g, dev, &a, &b, &c, &d, err);
    if (st)
        return st;
    if (min_mw)
        *min_mw = a;
    if (max_mw)
        *max_mw = b;
    if (default_mw)
        *default_mw = c;
    if (current_mw)
        *current_mw = d;
    return ERG_OK;
}

erg_status erg_gpu_set_power_limit(erg_gpu *g, int dev, uint32_t limit_mw, erg_error *err)
{
    uint32_t lo, hi;
    erg_status st = erg_gpu_power_limits(g, dev, &lo, &hi, NULL, NULL, err);
    if (st)
        return st;
    if (limit_mw < lo || limit_mw > hi)
        return erg_error_set(err, ERG_EINVAL, "GPU %d: power limit %u mW is outside [%u, %u] mW",
                             dev, limit_mw, lo, hi);
    return g->ops->set_power_limit(g, dev, limit_mw, err);
}

erg_status erg_gpu_reset_power_limit(erg_gpu *g, int dev, erg_error *err)
{
    uint32_t def;
    erg_status st = erg_gpu_power_limits(g, dev, NULL, NULL, &def, NULL, err);
    return st ? st : g->ops->set_power_limit(g, dev, def, err);
}

erg_status erg_gpu_energy_mj(erg_gpu *g, int dev, uint64_t *energy_mj, erg_error *err)
{
    erg_status st = check_dev(g, dev, err);
    if (!st && !energy_mj)
        st = erg_error_set(err, ERG_EINVAL, "NULL output argument");
    return st ? st : erg__energy_read(g, dev, energy_mj, err);
}

erg_status erg_gpu_power_mw(erg_gpu *g, int dev, uint32_t *power_mw, erg_error *err)
{
    erg_status st = check_dev(g, dev, err);
    if (!st && !power_mw)
        st = erg_error_set(err, ERG_EINVAL, "NULL output argument");
    return st ? st : g->ops->power_mw(g, dev, power_mw, err);
}

erg_status erg_gpu_restore(erg_gpu *g, int dev, erg_error *err)
{
    erg_status first = erg_gpu_reset_sm_clocks(g, dev, err);
    erg_error e2;
    erg_status st = erg_gpu_reset_mem_clocks(g, dev, &e2);
    if (st && st != ERG_ENOTSUP && !first) {
        first = st;
        if (err)
            *err = e2;
    }
    st = erg_gpu_reset_power_limit(g, dev, &e2);
    if (st && st != ERG_ENOTSUP && !first) {
        first = st;
        if (err)
            *err = e2;
    }
    return first;
}
