/* backend_nvml.c: the NVML back-end, loaded at run time with dlopen (no nvml.h needed). */
#include "gpu/dl_lib.h"
#include "gpu/gpu_internal.h"
#include "gpu/nvml_decl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The NVML types and calls we use are declared by us in nvml_decl.h (checked against NVIDIA's
 * nvml.h by a test). The library is opened with dlopen (path from the caller,
 * $ERGON_NVML_LIBRARY, libnvidia-ml.so.1, then libnvidia-ml.so) so that the build needs no CUDA
 * toolkit and the tests can substitute a fake NVML built from tests/. Required symbols missing
 * => the back-end is unavailable (dlclose, clear message); optional ones (memory clocks, power
 * limits) => ERG_ENOTSUP.
 */
typedef erg_nvml_ret nvml_ret;
typedef erg_nvml_dev nvml_dev;

#define ERG_NVML_ENUM(name, value) name = value,
enum { ERG_NVML_CODES(ERG_NVML_ENUM) };
#undef ERG_NVML_ENUM

typedef struct nvml_api {
#define ERG_NVML_FIELD(field, symbol, fallback, required, ret, params) ret(*field) params;
    ERG_NVML_CALLS(ERG_NVML_FIELD)
#undef ERG_NVML_FIELD
} nvml_api;

typedef struct nvml_state {
    void *lib;
    nvml_api api;
    nvml_dev *devs;
} nvml_state;

static const erg__dl_sym syms[] = {
#define ERG_NVML_SYM(field, symbol, fallback, required, ret, params)                               \
    {offsetof(nvml_api, field), {#symbol, fallback}, required},
    ERG_NVML_CALLS(ERG_NVML_SYM)
#undef ERG_NVML_SYM
};

static nvml_state *st_of(erg_gpu *g)
{
    return g->impl;
}

/* Map an NVML return code to an erg_status with NVML's own text. */
static erg_status nvml_fail(nvml_state *s, nvml_ret r, erg_error *err, const char *what, int dev)
{
    erg_status code;
    switch (r) {
    case NVML_ERROR_INVALID_ARGUMENT:
        code = ERG_EINVAL;
        break;
    case NVML_ERROR_NOT_SUPPORTED:
        code = ERG_ENOTSUP;
        break;
    case NVML_ERROR_NO_PERMISSION:
        code = ERG_EPERM;
        break;
    case NVML_ERROR_NOT_FOUND:
        code = ERG_ENOTFOUND;
        break;
    case NVML_ERROR_TIMEOUT:
        code = ERG_ETIMEOUT;
        break;
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_GPU_IS_LOST:
        code = ERG_ENOGPU;
        break;
    default:
        code = ERG_EIO;
        break;
    }
    const char *text = s->api.error_string ? s->api.error_string(r) : NULL;
    return erg_error_set(err, code, "GPU %d: %s failed: %s (NVML error %d)%s", dev, what,
                         text ? text : "unknown error", r,
                         r == NVML_ERROR_NO_PERMISSION
                             ? "; setting clocks needs root or CAP_SYS_ADMIN: run through ergond"
                             : "");
}

static void nvml_close(erg_gpu *g)
{
    nvml_state *s = st_of(g);
    if (!s)
        return;
    if (s->api.shutdown)
        s->api.shutdown();
    if (s->lib)
        dlclose(s->lib);
    erg__free(s->devs);
    erg__free(s);
}

static erg_status nvml_name(erg_gpu *g, int dev, char *buf, size_t size, erg_error *err)
{
    nvml_state *s = st_of(g);
    char tmp[96] = "";
    nvml_ret r = s->api.get_name(s->devs[dev], tmp, sizeof tmp);
    if (r)
        return nvml_fail(s, r, err, "nvmlDeviceGetName", dev);
    tmp[sizeof tmp - 1] = '\0';
    snprintf(buf, size, "%s", tmp);
    return ERG_OK;
}

/* The two-call size pattern: ask with a buffer, grow on INSUFFICIENT_SIZE. */
static erg_status clock_list(nvml_state *s, int dev, bool mem, unsigned int mem_mhz, int **out,
                             size_t *n, erg_error *err)
{
    unsigned int cap = 256;
    for (int tries = 0; tries < 4; tries++) {
        unsigned int *buf = erg__malloc(cap * sizeof *buf);
        if (!buf)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        unsigned int count = cap;
        nvml_ret r = mem ? s->api.mem_clocks(s->devs[dev], &count, buf)
                         : s->api.sm_clocks(s->devs[dev], mem_mhz, &count, buf);
        if (r == NVML_ERROR_INSUFFICIENT_SIZE && count > cap && count <= 65536) {
            erg__free(buf);
            cap = count;
            continue;
        }
        if (r) {
            erg__free(buf);
            return nvml_fail(s, r, err,
                             mem ? "nvmlDeviceGetSupportedMemoryClocks"
                                 : "nvmlDeviceGetSupportedGraphicsClocks",
                             dev);
        }
        if (count > cap)
            count = cap;
        int *c = erg__malloc((count ? count : 1) * sizeof *c);
        if (!c) {
            erg__free(buf);
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
        for (unsigned int i = 0; i < count; i++)
            c[i] = (int)buf[i];
        erg__free(buf);
        qsort(c, count, sizeof *c, erg__cmp_int_desc);
        *out = c;
        *n = count;
        return ERG_OK;
    }
    return erg_error_set(err, ERG_EIO, "GPU %d: the clock list keeps growing", dev);
}

static erg_status nvml_mem_clocks(erg_gpu *g, int dev, int **clocks, size_t *n, erg_error *err)
{
    return clock_list(st_of(g), dev, true, 0, clocks, n, err);
}

static erg_status nvml_sm_clocks(erg_gpu *g, int dev, int **clocks, size_t *n, erg_error *err)
{
    int *mem = NULL;
    size_t nm = 0;
    erg_status st = clock_list(st_of(g), dev, true, 0, &mem, &nm, err);
    if (st)
        return st;
    if (nm == 0) {
        erg__free(mem);
        return erg_error_set(err, ERG_ENOTSUP, "GPU %d reports no memory clocks", dev);
    }
    unsigned int top = (unsigned int)mem[0];
    erg__free(mem);
    return clock_list(st_of(g), dev, false, top, clocks, n, err);
}

static erg_status nvml_lock_sm(erg_gpu *g, int dev, int lo, int hi, erg_error *err)
{
    nvml_state *s = st_of(g);
    nvml_ret r = s->api.set_locked(s->devs[dev], (unsigned int)lo, (unsigned int)hi);
    return r ? nvml_fail(s, r, err, "nvmlDeviceSetGpuLockedClocks", dev) : ERG_OK;
}

static erg_status nvml_reset_sm(erg_gpu *g, int dev, erg_error *err)
{
    nvml_state *s = st_of(g);
    nvml_ret r = s->api.reset_locked(s->devs[dev]);
    return r ? nvml_fail(s, r, err, "nvmlDeviceResetGpuLockedClocks", dev) : ERG_OK;
}

static erg_status nvml_lock_mem(erg_gpu *g, int dev, int lo, int hi, erg_error *err)
{
    nvml_state *s = st_of(g);
    if (!s->api.set_mem_locked)
        return erg_error_set(err, ERG_ENOTSUP, "this NVML has no memory clock locking");
    nvml_ret r = s->api.set_mem_locked(s->devs[dev], (unsigned int)lo, (unsigned int)hi);
    return r ? nvml_fail(s, r, err, "nvmlDeviceSetMemoryLockedClocks", dev) : ERG_OK;
}

static erg_status nvml_reset_mem(erg_gpu *g, int dev, erg_error *err)
{
    nvml_state *s = st_of(g);
    if (!s->api.reset_mem_locked)
        return erg_error_set(err, ERG_ENOTSUP, "this NVML has no memory clock locking");
    nvml_ret r = s->api.reset_mem_locked(s->devs[dev]);
    return r ? nvml_fail(s, r, err, "nvmlDeviceResetMemoryLockedClocks", dev) : ERG_OK;
}

static erg_status nvml_limits(erg_gpu *g, int dev, uint32_t *min_mw, uint32_t *max_mw,
                              uint32_t *def_mw, uint32_t *cur_mw, erg_error *err)
{
    nvml_state *s = st_of(g);
    if (!s->api.limit_constraints || !s->api.limit_default || !s->api.limit_get)
        return erg_error_set(err, ERG_ENOTSUP, "this NVML has no power management limits");
    unsigned int a = 0, b = 0, c = 0, d = 0;
    nvml_ret r = s->api.limit_constraints(s->devs[dev], &a, &b);
    if (r)
        return nvml_fail(s, r, err, "nvmlDeviceGetPowerManagementLimitConstraints", dev);
    if ((r = s->api.limit_default(s->devs[dev], &c)))
        return nvml_fail(s, r, err, "nvmlDeviceGetPowerManagementDefaultLimit", dev);
    if ((r = s->api.limit_get(s->devs[dev], &d)))
        return nvml_fail(s, r, err, "nvmlDeviceGetPowerManagementLimit", dev);
    *min_mw = a;
    *max_mw = b;
    *def_mw = c;
    *cur_mw = d;
    return ERG_OK;
}

static erg_status nvml_set_limit(erg_gpu *g, int dev, uint32_t mw, erg_error *err)
{
    nvml_state *s = st_of(g);
    if (!s->api.limit_set)
        return erg_error_set(err, ERG_ENOTSUP, "this NVML cannot set power limits");
    nvml_ret r = s->api.limit_set(s->devs[dev], mw);
    return r ? nvml_fail(s, r, err, "nvmlDeviceSetPowerManagementLimit", dev) : ERG_OK;
}

static erg_status nvml_energy(erg_gpu *g, int dev, uint64_t *mj, erg_error *err)
{
    nvml_state *s = st_of(g);
    unsigned long long e = 0;
    nvml_ret r = s->api.energy(s->devs[dev], &e);
    if (r)
        return nvml_fail(s, r, err, "nvmlDeviceGetTotalEnergyConsumption", dev);
    *mj = e;
    return ERG_OK;
}

static erg_status nvml_power(erg_gpu *g, int dev, uint32_t *mw, erg_error *err)
{
    nvml_state *s = st_of(g);
    unsigned int p = 0;
    nvml_ret r = s->api.power(s->devs[dev], &p);
    if (r)
        return nvml_fail(s, r, err, "nvmlDeviceGetPowerUsage", dev);
    *mw = p;
    return ERG_OK;
}

/* NVML's counter covers the GPU board, except on Grace Hopper (GH200) where it covers the
 * whole module (GPU, CPU and memory). Resolution: 1 mJ. */
static void nvml_energy_caps(erg_gpu *g, int dev, erg_gpu_energy_info *info)
{
    char name[96] = "";
    info->source = ERG_ENERGY_COUNTER;
    info->resolution_mj = 1.0;
    bool module = nvml_name(g, dev, name, sizeof name, NULL) == ERG_OK && strstr(name, "GH200");
    snprintf(info->scope, sizeof info->scope, "%s", module ? "module" : "gpu");
}

const erg__gpu_backend erg__gpu_nvml_backend = {
    "nvml",         nvml_close,    nvml_name,     nvml_sm_clocks,   nvml_mem_clocks,
    nvml_lock_sm,   nvml_reset_sm, nvml_lock_mem, nvml_reset_mem,   nvml_limits,
    nvml_set_limit, nvml_energy,   nvml_power,    nvml_energy_caps, 0,
};

erg_status erg_gpu_open_nvml(const char *lib_path, erg_gpu **out, erg_error *err)
{
    if (!out)
        return erg_error_set(err, ERG_EINVAL, "erg_gpu_open_nvml: NULL output");
    static const erg__dl_vendor vendor = {
        "NVML",
        "ERGON_NVML_LIBRARY",
        {"libnvidia-ml.so.1", "libnvidia-ml.so"},
        "install the NVIDIA driver, point $ERGON_NVML_LIBRARY or --gpu nvml:LIBRARY at "
        "libnvidia-ml.so.1, or use --gpu sim:GPU to try without a GPU"};
    nvml_state *s = erg__calloc(1, sizeof *s);
    if (!s)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    const char *loaded = NULL;
    erg_status lst =
        erg__dl_open(&vendor, lib_path, syms, ERG__ARRAY_LEN(syms), &s->api, &s->lib, &loaded, err);
    if (lst) {
        erg__free(s);
        return lst;
    }
    nvml_ret r = s->api.init();
    if (r) {
        const char *text = s->api.error_string(r);
        dlclose(s->lib);
        erg__free(s);
        return erg_error_set(err, ERG_ENOGPU, "NVML unavailable: nvmlInit failed: %s (%d)",
                             text ? text : "unknown error", r);
    }
    unsigned int count = 0;
    erg_status st = ERG_OK;
    if ((r = s->api.get_count(&count))) {
        st = nvml_fail(s, r, err, "nvmlDeviceGetCount", -1);
        goto fail;
    }
    if (count > 1024)
        count = 1024;
    s->devs = erg__calloc(count ? count : 1, sizeof *s->devs);
    if (!s->devs) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    for (unsigned int i = 0; i < count; i++)
        if ((r = s->api.get_handle(i, &s->devs[i]))) {
            st = nvml_fail(s, r, err, "nvmlDeviceGetHandleByIndex", (int)i);
            goto fail;
        }
    char spec[4200];
    snprintf(spec, sizeof spec, "nvml:%s", loaded);
    char *spec_copy = erg__strdup(spec);
    if (!spec_copy) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    st = erg__gpu_alloc(&erg__gpu_nvml_backend, (int)count, s, out, err);
    if (st) {
        erg__free(spec_copy);
        goto fail;
    }
    (*out)->spec = spec_copy;
    return ERG_OK;
fail:
    s->api.shutdown();
    dlclose(s->lib);
    erg__free(s->devs);
    erg__free(s);
    return st;
}
