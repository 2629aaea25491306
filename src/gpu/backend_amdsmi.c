/* backend_amdsmi.c: the AMD SMI back-end, loaded at run time with dlopen (no ROCm needed). */
#include "gpu/amdsmi_decl.h"
#include "gpu/dl_lib.h"
#include "gpu/gpu_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * libamd_smi.so is opened with dlopen (path from the caller, $ERGON_AMDSMI_LIBRARY,
 * libamd_smi.so, then /opt/rocm/lib/libamd_smi.so) and called through our declarations in
 * amdsmi_decl.h. What AMD's API gives and how ergon maps it (docs/runtime.md, "AMD"):
 *   devices   the GPU processor handles of every socket, in socket order (amd-smi's order);
 *   SM clock  the SYS (GFX/SCLK) domain: amdsmi_get_clk_freq lists only the DPM levels (a few,
 *             in Hz) while amdsmi_set_gpu_clk_range accepts any MHz between the lowest and
 *             highest level, so ergon offers every AMD_STEP_MHZ from the highest level down,
 *             plus the lowest. A lock [lo, hi] is amdsmi_set_gpu_clk_range(lo, hi, SYS);
 *             amdsmi refuses lo >= hi, so one clock f is locked as [f - 1, f] ([f, f + 1] at
 *             the lowest level). Reset is the range of the lowest to the highest level (as
 *             Zeus does);
 *   power cap amdsmi_get_power_cap_info / amdsmi_set_power_cap (sensor 0, microwatts);
 *   energy    amdsmi_get_energy_count: a counter times its resolution (microjoules);
 *   power     amdsmi_get_power_info: current_socket_power, or average_socket_power where the
 *             current one is N/A (and the other way round: MI300X has no average), in W.
 * MI250/MI250X: each package has two dies, two processor handles; the driver reports the
 * package's power and energy on the even die and nothing on the odd one. The even die's
 * energy scope is "package" and the odd die's energy and power are ERG_ENOTSUP naming its
 * sibling. MI100's counter is known to be unreliable (Zeus disables it): ergon integrates power.
 */
typedef erg_amdsmi_ret amd_ret;

#define ERG_AMDSMI_ENUM(name, value) name = value,
enum { ERG_AMDSMI_CODES(ERG_AMDSMI_ENUM) };
#undef ERG_AMDSMI_ENUM

#define AMD_STEP_MHZ 25
#define AMD_MAX_DEVICES 1024

typedef struct amd_api {
#define ERG_AMDSMI_FIELD(field, symbol, required, params) amd_ret(*field) params;
    ERG_AMDSMI_CALLS(ERG_AMDSMI_FIELD)
#undef ERG_AMDSMI_FIELD
} amd_api;

typedef struct amd_dev {
    erg_amdsmi_handle h;
    char name[96];
    bool odd_die; /* second die of an MI250 package: nothing measured here */
    bool package; /* first die of an MI250 package: measures both dies */
    bool unreliable_counter;
    float resolution_uj;
} amd_dev;

typedef struct amd_state {
    void *lib;
    amd_api api;
    amd_dev *devs;
} amd_state;

static const erg__dl_sym syms[] = {
#define ERG_AMDSMI_SYM(field, symbol, required, params)                                            \
    {offsetof(amd_api, field), {#symbol, NULL}, required},
    ERG_AMDSMI_CALLS(ERG_AMDSMI_SYM)
#undef ERG_AMDSMI_SYM
};

static amd_state *st_of(erg_gpu *g)
{
    return g->impl;
}

static erg_status amd_fail(amd_state *s, amd_ret r, erg_error *err, const char *what, int dev)
{
    erg_status code;
    switch (r) {
    case AMDSMI_STATUS_INVAL:
        code = ERG_EINVAL;
        break;
    case AMDSMI_STATUS_NOT_SUPPORTED:
    case AMDSMI_STATUS_NOT_YET_IMPLEMENTED:
        code = ERG_ENOTSUP;
        break;
    case AMDSMI_STATUS_NO_PERM:
        code = ERG_EPERM;
        break;
    case AMDSMI_STATUS_NOT_FOUND:
        code = ERG_ENOTFOUND;
        break;
    case AMDSMI_STATUS_TIMEOUT:
        code = ERG_ETIMEOUT;
        break;
    case AMDSMI_STATUS_DRIVER_NOT_LOADED:
    case AMDSMI_STATUS_NO_DRV:
        code = ERG_ENOGPU;
        break;
    default:
        code = ERG_EIO;
        break;
    }
    const char *text = NULL;
    if (s->api.status_string && s->api.status_string(r, &text) != AMDSMI_STATUS_SUCCESS)
        text = NULL;
    return erg_error_set(
        err, code, "GPU %d: %s failed: %s (amdsmi status %u)%s", dev, what,
        text ? text : "unknown error", (unsigned)r,
        r == AMDSMI_STATUS_NO_PERM ? "; setting clocks needs root: run through ergond" : "");
}

static void amd_close(erg_gpu *g)
{
    amd_state *s = st_of(g);
    if (!s)
        return;
    if (s->api.shut_down)
        s->api.shut_down();
    if (s->lib)
        dlclose(s->lib);
    erg__free(s->devs);
    erg__free(s);
}

static erg_status amd_name(erg_gpu *g, int dev, char *buf, size_t size, erg_error *err)
{
    (void)err;
    snprintf(buf, size, "%s", st_of(g)->devs[dev].name);
    return ERG_OK;
}

/* The DPM levels of one clock domain, MHz, descending. */
static erg_status levels(amd_state *s, int dev, uint32_t domain, int *out, size_t *n,
                         erg_error *err)
{
    erg_amdsmi_frequencies f;
    memset(&f, 0, sizeof f);
    amd_ret r = s->api.clk_freq(s->devs[dev].h, domain, &f);
    if (r)
        return amd_fail(s, r, err, "amdsmi_get_clk_freq", dev);
    size_t k = 0;
    for (uint32_t i = 0; i < f.num_supported && i < ERG_AMDSMI_MAX_NUM_FREQUENCIES; i++) {
        uint64_t mhz = f.frequency[i] / 1000000u;
        if (mhz > 0 && mhz < 100000)
            out[k++] = (int)mhz;
    }
    if (k == 0)
        return erg_error_set(err, ERG_ENOTSUP, "GPU %d reports no %s clock levels", dev,
                             domain == ERG_AMDSMI_CLK_TYPE_MEM ? "memory" : "graphics");
    qsort(out, k, sizeof *out, erg__cmp_int_desc);
    *n = k;
    return ERG_OK;
}

static erg_status amd_sm_clocks(erg_gpu *g, int dev, int **clocks, size_t *n, erg_error *err)
{
    int lv[ERG_AMDSMI_MAX_NUM_FREQUENCIES];
    size_t k = 0;
    erg_status st = levels(st_of(g), dev, ERG_AMDSMI_CLK_TYPE_SYS, lv, &k, err);
    if (st)
        return st;
    int hi = lv[0], lo = lv[k - 1];
    size_t cap = (size_t)(hi - lo) / AMD_STEP_MHZ + 2;
    int *c = erg__malloc(cap * sizeof *c);
    if (!c)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    size_t m = 0;
    for (int f = hi; f > lo; f -= AMD_STEP_MHZ)
        c[m++] = f;
    c[m++] = lo;
    *clocks = c;
    *n = m;
    return ERG_OK;
}

static erg_status amd_mem_clocks(erg_gpu *g, int dev, int **clocks, size_t *n, erg_error *err)
{
    int lv[ERG_AMDSMI_MAX_NUM_FREQUENCIES];
    size_t k = 0;
    erg_status st = levels(st_of(g), dev, ERG_AMDSMI_CLK_TYPE_MEM, lv, &k, err);
    if (st)
        return st;
    int *c = erg__malloc(k * sizeof *c);
    if (!c)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    memcpy(c, lv, k * sizeof *c);
    *clocks = c;
    *n = k;
    return ERG_OK;
}

static erg_status set_range(erg_gpu *g, int dev, int lo, int hi, erg_error *err)
{
    amd_state *s = st_of(g);
    if (lo == hi) {
        const int *c = g->sm_cache[dev];
        size_t n = g->sm_cache_n[dev];
        if (c && n && lo == c[n - 1])
            hi = lo + 1;
        else
            lo = hi - 1;
    }
    amd_ret r =
        s->api.set_clk_range(s->devs[dev].h, (uint64_t)lo, (uint64_t)hi, ERG_AMDSMI_CLK_TYPE_SYS);
    return r ? amd_fail(s, r, err, "amdsmi_set_gpu_clk_range", dev) : ERG_OK;
}

static erg_status amd_lock_sm(erg_gpu *g, int dev, int lo, int hi, erg_error *err)
{
    return set_range(g, dev, lo, hi, err);
}

static erg_status amd_reset_sm(erg_gpu *g, int dev, erg_error *err)
{
    int lv[ERG_AMDSMI_MAX_NUM_FREQUENCIES];
    size_t k = 0;
    erg_status st = levels(st_of(g), dev, ERG_AMDSMI_CLK_TYPE_SYS, lv, &k, err);
    if (st)
        return st;
    return set_range(g, dev, lv[k - 1], lv[0], err);
}

static erg_status amd_lock_mem(erg_gpu *g, int dev, int lo, int hi, erg_error *err)
{
    (void)g;
    (void)lo;
    (void)hi;
    return erg_error_set(err, ERG_ENOTSUP,
                         "GPU %d: ergon does not lock the memory clock of AMD GPUs", dev);
}

static erg_status amd_reset_mem(erg_gpu *g, int dev, erg_error *err)
{
    return amd_lock_mem(g, dev, 0, 0, err);
}

static erg_status amd_limits(erg_gpu *g, int dev, uint32_t *min_mw, uint32_t *max_mw,
                             uint32_t *def_mw, uint32_t *cur_mw, erg_error *err)
{
    amd_state *s = st_of(g);
    if (!s->api.power_cap_info)
        return erg_error_set(err, ERG_ENOTSUP, "this amdsmi has no power cap calls");
    erg_amdsmi_power_cap_info p;
    memset(&p, 0, sizeof p);
    amd_ret r = s->api.power_cap_info(s->devs[dev].h, 0, &p);
    if (r)
        return amd_fail(s, r, err, "amdsmi_get_power_cap_info", dev);
    uint64_t v[4] = {p.min_power_cap, p.max_power_cap, p.default_power_cap, p.power_cap};
    for (int i = 0; i < 4; i++)
        if (v[i] / 1000 > UINT32_MAX)
            return erg_error_set(err, ERG_EIO, "GPU %d: amdsmi reports a power cap of %llu uW", dev,
                                 (unsigned long long)v[i]);
    *min_mw = (uint32_t)(v[0] / 1000);
    *max_mw = (uint32_t)(v[1] / 1000);
    *def_mw = (uint32_t)(v[2] / 1000);
    *cur_mw = (uint32_t)(v[3] / 1000);
    return ERG_OK;
}

static erg_status amd_set_limit(erg_gpu *g, int dev, uint32_t mw, erg_error *err)
{
    amd_state *s = st_of(g);
    if (!s->api.set_power_cap)
        return erg_error_set(err, ERG_ENOTSUP, "this amdsmi cannot set power caps");
    amd_ret r = s->api.set_power_cap(s->devs[dev].h, 0, (uint64_t)mw * 1000u);
    return r ? amd_fail(s, r, err, "amdsmi_set_power_cap", dev) : ERG_OK;
}

static erg_status odd_die(amd_state *s, int dev, const char *what, erg_error *err)
{
    return erg_error_set(err, ERG_ENOTSUP,
                         "GPU %d is the second die of %s: the driver reports no %s for it; GPU "
                         "%d's reading covers both dies (the package)",
                         dev, s->devs[dev].name, what, dev - 1);
}

static erg_status amd_energy(erg_gpu *g, int dev, uint64_t *mj, erg_error *err)
{
    amd_state *s = st_of(g);
    if (s->devs[dev].odd_die)
        return odd_die(s, dev, "energy", err);
    uint64_t acc = 0, ts = 0;
    float res = 0;
    amd_ret r = s->api.energy_count(s->devs[dev].h, &acc, &res, &ts);
    if (r)
        return amd_fail(s, r, err, "amdsmi_get_energy_count", dev);
    if (!(res > 0.0f) || res > 1e6f)
        return erg_error_set(err, ERG_EIO, "GPU %d: amdsmi reports an energy resolution of %g uJ",
                             dev, (double)res);
    s->devs[dev].resolution_uj = res;
    *mj = (uint64_t)((long double)acc * res / 1000.0L);
    return ERG_OK;
}

static erg_status amd_power(erg_gpu *g, int dev, uint32_t *mw, erg_error *err)
{
    amd_state *s = st_of(g);
    if (s->devs[dev].odd_die)
        return odd_die(s, dev, "power", err);
    erg_amdsmi_power_info p;
    memset(&p, 0, sizeof p);
    amd_ret r = s->api.power_info(s->devs[dev].h, &p);
    if (r)
        return amd_fail(s, r, err, "amdsmi_get_power_info", dev);
    uint32_t w = p.current_socket_power;
    if (w == ERG_AMDSMI_NA_U32 || w == 0xFFFF)
        w = p.average_socket_power;
    if (w == ERG_AMDSMI_NA_U32 || w == 0xFFFF)
        return erg_error_set(err, ERG_ENOTSUP,
                             "GPU %d: amdsmi reports neither current nor "
                             "average socket power (both N/A)",
                             dev);
    if (w > 100000)
        return erg_error_set(err, ERG_EIO, "GPU %d: amdsmi reports %u W", dev, w);
    *mw = w * 1000u;
    return ERG_OK;
}

static void amd_energy_caps(erg_gpu *g, int dev, erg_gpu_energy_info *info)
{
    amd_state *s = st_of(g);
    amd_dev *d = &s->devs[dev];
    if (d->odd_die) {
        info->source = ERG_ENERGY_NONE;
        snprintf(info->scope, sizeof info->scope, "counted on GPU %d", dev - 1);
        return;
    }
    info->source = ERG_ENERGY_COUNTER;
    snprintf(info->scope, sizeof info->scope, "%s", d->package ? "package" : "gpu");
    info->resolution_mj = d->resolution_uj > 0 ? d->resolution_uj / 1000.0 : 0.0;
    if (d->unreliable_counter)
        snprintf(info->reason, sizeof info->reason, "%s energy counters are known to be unreliable",
                 d->name);
}

const erg__gpu_backend erg__gpu_amdsmi_backend = {
    .name = "amdsmi",
    .close = amd_close,
    .name_of = amd_name,
    .sm_clocks = amd_sm_clocks,
    .mem_clocks = amd_mem_clocks,
    .lock_sm = amd_lock_sm,
    .reset_sm = amd_reset_sm,
    .lock_mem = amd_lock_mem,
    .reset_mem = amd_reset_mem,
    .power_limits = amd_limits,
    .set_power_limit = amd_set_limit,
    .energy_mj = amd_energy,
    .power_mw = amd_power,
    .energy_caps = amd_energy_caps,
};

/* Every GPU processor handle, socket by socket. */
static erg_status enumerate(amd_state *s, int *count, erg_error *err)
{
    uint32_t nsock = 0;
    amd_ret r = s->api.socket_handles(&nsock, NULL);
    if (r)
        return amd_fail(s, r, err, "amdsmi_get_socket_handles", -1);
    if (nsock > AMD_MAX_DEVICES)
        nsock = AMD_MAX_DEVICES;
    erg_amdsmi_handle *socks = erg__calloc(nsock ? nsock : 1, sizeof *socks);
    s->devs = erg__calloc(AMD_MAX_DEVICES, sizeof *s->devs);
    if (!socks || !s->devs) {
        erg__free(socks);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    erg_status st = ERG_OK;
    if (nsock && (r = s->api.socket_handles(&nsock, socks))) {
        st = amd_fail(s, r, err, "amdsmi_get_socket_handles", -1);
        goto out;
    }
    int n = 0;
    for (uint32_t k = 0; k < nsock && n < AMD_MAX_DEVICES; k++) {
        uint32_t np = 0;
        if ((r = s->api.processor_handles(socks[k], &np, NULL))) {
            st = amd_fail(s, r, err, "amdsmi_get_processor_handles", -1);
            goto out;
        }
        if (np > (uint32_t)(AMD_MAX_DEVICES - n))
            np = (uint32_t)(AMD_MAX_DEVICES - n);
        erg_amdsmi_handle hs[64];
        if (np > 64)
            np = 64;
        if (np && (r = s->api.processor_handles(socks[k], &np, hs))) {
            st = amd_fail(s, r, err, "amdsmi_get_processor_handles", -1);
            goto out;
        }
        for (uint32_t j = 0; j < np && j < 64; j++)
            s->devs[n++].h = hs[j];
    }
    for (int i = 0; i < n; i++) {
        amd_dev *d = &s->devs[i];
        erg_amdsmi_asic_info a;
        memset(&a, 0, sizeof a);
        if ((r = s->api.asic_info(d->h, &a))) {
            st = amd_fail(s, r, err, "amdsmi_get_gpu_asic_info", i);
            goto out;
        }
        a.market_name[sizeof a.market_name - 1] = '\0';
        if (!a.market_name[0])
            snprintf(a.market_name, sizeof a.market_name, "AMD GPU");
        size_t len = strnlen(a.market_name, sizeof d->name - 1);
        memcpy(d->name, a.market_name, len);
        d->name[len] = '\0';
        d->unreliable_counter = strstr(d->name, "MI100") != NULL;
    }
    /* MI250 dies come in pairs, even then odd, the package's readings on the even one. */
    for (int i = 0; i + 1 < n; i += 2)
        if (strstr(s->devs[i].name, "MI250") && !strcmp(s->devs[i].name, s->devs[i + 1].name)) {
            s->devs[i].package = true;
            s->devs[i + 1].odd_die = true;
        }
    *count = n;
out:
    erg__free(socks);
    return st;
}

erg_status erg_gpu_open_amdsmi(const char *lib_path, erg_gpu **out, erg_error *err)
{
    if (!out)
        return erg_error_set(err, ERG_EINVAL, "erg_gpu_open_amdsmi: NULL output");
    static const erg__dl_vendor vendor = {
        "amdsmi",
        "ERGON_AMDSMI_LIBRARY",
        {"libamd_smi.so", "/opt/rocm/lib/libamd_smi.so"},
        "install ROCm's amd-smi-lib, point $ERGON_AMDSMI_LIBRARY or --gpu amdsmi:LIBRARY at "
        "libamd_smi.so, or use --gpu sim:GPU to try without a GPU"};
    amd_state *s = erg__calloc(1, sizeof *s);
    if (!s)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    const char *loaded = NULL;
    erg_status st =
        erg__dl_open(&vendor, lib_path, syms, ERG__ARRAY_LEN(syms), &s->api, &s->lib, &loaded, err);
    if (st) {
        erg__free(s);
        return st;
    }
    amd_ret r = s->api.init(ERG_AMDSMI_INIT_AMD_GPUS);
    if (r) {
        erg_error e;
        amd_fail(s, r, &e, "amdsmi_init", -1);
        dlclose(s->lib);
        erg__free(s);
        return erg_error_set(err, ERG_ENOGPU, "amdsmi unavailable: %s", e.msg);
    }
    int count = 0;
    if ((st = enumerate(s, &count, err)))
        goto fail;
    char spec[4200];
    snprintf(spec, sizeof spec, "amdsmi:%s", loaded);
    char *spec_copy = erg__strdup(spec);
    if (!spec_copy) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    if ((st = erg__gpu_alloc(&erg__gpu_amdsmi_backend, count, s, out, err))) {
        erg__free(spec_copy);
        goto fail;
    }
    (*out)->spec = spec_copy;
    return ERG_OK;
fail:
    s->api.shut_down();
    dlclose(s->lib);
    erg__free(s->devs);
    erg__free(s);
    return st;
}
