/* fake_amdsmi.c: a fake libamd_smi.so: MI-series GPUs, permissions, energy, quirks, a call log. */
/*
 * The AMD SMI calls ergon uses, with amdsmi's C types and units (frequencies in Hz, power caps
 * in microwatts, power in W, an energy counter in units of its resolution, 15.259 uJ).
 * Environment:
 *   FAKE_AMDSMI_DEVICES  number of GPU processor handles (default 2, at most 8), one socket each
 *                        (MI250: one socket per two dies)
 *   FAKE_AMDSMI_LOG      file to which every state-changing call is appended,
 *                        "<function> <device> [args] = <status>"
 *   FAKE_AMDSMI_DENY     setters fail with NO_PERM (they also do when euid != 0)
 *   FAKE_AMDSMI_STATE    file holding the settings ("DEV RANGE_MIN RANGE_MAX CAP_UW" per
 *                        device), read at the first amdsmi_init, rewritten after each change,
 *                        so that settings outlive the process as on a real GPU; a change
 *                        rewrites only its device's line, under a record lock on
 *                        "<file>.lock", as the fake NVML (tests/fake_common)
 *   FAKE_AMDSMI_QUIRK    the misbehaviour of a real model:
 *     mi250     "AMD Instinct MI250X": dies in pairs; the even die reports the package's
 *               power and energy (both dies), the odd die 0 W and a counter that stays at 0
 *     mi300x    "AMD Instinct MI300X": average_socket_power is N/A (current is valid)
 *     mi100     "AMD Instinct MI100": the counter runs 1.6 times too fast
 *     stall     the counter stops moving after FAKE_AMDSMI_QUIRK_AFTER_S seconds (default 0.5)
 *               of the process's life
 *     backwards after FAKE_AMDSMI_QUIRK_AFTER_S seconds the counter starts again from 0 (a
 *               driver reload): a drop larger than anything a reading can gain, however long
 *               a loaded machine makes the gap between two readings
 *     drift     the counter runs 1.6 times too fast (any model name)
 * Devices (default "AMD Instinct MI210"): GFX DPM levels 500, 1000 and 1700 MHz, memory 1600
 * MHz, power cap 150..300 W (default 300 W). A range outside [500, 1700] or min >= max gives
 * INVAL (as rocm_smi's range check). Power is 40 W + 260 W * max / 1700 and the counter
 * integrates it over real time.
 */
#include "fake_common.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef uint32_t amdsmi_status_t;
typedef void *amdsmi_handle;

#define NDEV_MAX 8
#define SCLK_MIN 500
#define SCLK_MID 1000
#define SCLK_MAX 1700
#define MCLK 1600
#define CAP_MIN_UW 150000000ull
#define CAP_MAX_UW 300000000ull
#define RES_UJ 15.259f

enum { OK = 0, INVAL = 1, NOT_SUPPORTED = 2, NO_PERM = 10, NOT_INIT = 32 };

typedef struct {
    bool has_deep_sleep;
    uint32_t num_supported;
    uint32_t current;
    uint64_t frequency[33];
} amdsmi_frequencies_t;

typedef struct {
    uint64_t power_cap, default_power_cap, dpm_cap, min_power_cap, max_power_cap, reserved[3];
} amdsmi_power_cap_info_t;

typedef struct {
    uint64_t socket_power;
    uint32_t current_socket_power;
    uint32_t average_socket_power;
    uint64_t gfx_voltage, soc_voltage, mem_voltage;
    uint32_t power_limit;
    uint64_t reserved[18];
} amdsmi_power_info_t;

typedef struct {
    char market_name[256];
    uint32_t vendor_id;
    char vendor_name[256];
    uint32_t subvendor_id;
    uint64_t device_id;
    uint32_t rev_id;
    char asic_serial[256];
    uint32_t oam_id;
    uint32_t num_of_compute_units;
    uint64_t target_graphics_version;
    uint32_t subsystem_id;
    uint32_t reserved[21];
} amdsmi_asic_info_t;

struct fake_gpu {
    int index;
    unsigned range_min, range_max;
    uint64_t cap_uw;
    double energy_uj;
    double last_s;
    int busy; /* fake kernels running (fake_gpu_kernel_begin) */
};

static struct fake_gpu gpus[NDEV_MAX];
static double frozen_uj[NDEV_MAX]; /* stall quirk: the value it froze at (< 0: not yet) */
static double reload_uj[NDEV_MAX]; /* backwards quirk: the value at the reload (< 0: not yet) */
static int sockets[NDEV_MAX];      /* socket handles point here */
static int ngpu = 0, nsock = 0;
static int init_count = 0;
static double start_s;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void)
{
    return fake_now_s();
}

#define log_call(...) fake_log_call("FAKE_AMDSMI_LOG", __VA_ARGS__)

#define IDLE_W 40.0

static const char *quirk(void)
{
    const char *q = getenv("FAKE_AMDSMI_QUIRK");
    return q ? q : "";
}

static bool is(const char *q)
{
    return !strcmp(quirk(), q);
}

static double quirk_after_s(void)
{
    const char *e = getenv("FAKE_AMDSMI_QUIRK_AFTER_S");
    double v = e ? atof(e) : 0.5;
    return v >= 0 ? v : 0.5;
}

/* The state file: "DEV RANGE_MIN RANGE_MAX CAP_UW" per device; a change rewrites only its
 * device's line (another process may share the GPU). */
enum { NVALS = 3 };

static void state_values(unsigned long long *v)
{
    for (int i = 0; i < ngpu; i++) {
        v[i * NVALS + 0] = gpus[i].range_min;
        v[i * NVALS + 1] = gpus[i].range_max;
        v[i * NVALS + 2] = gpus[i].cap_uw;
    }
}

static void save_state(int dev)
{
    unsigned long long v[NDEV_MAX * NVALS];
    state_values(v);
    fake_state_save("FAKE_AMDSMI_STATE", dev, ngpu, NVALS, v);
}

static void load_state(void)
{
    unsigned long long v[NDEV_MAX * NVALS];
    state_values(v);
    fake_state_load("FAKE_AMDSMI_STATE", ngpu, NVALS, v);
    for (int i = 0; i < ngpu; i++) {
        gpus[i].range_min = (unsigned)v[i * NVALS + 0];
        gpus[i].range_max = (unsigned)v[i * NVALS + 1];
        gpus[i].cap_uw = v[i * NVALS + 2];
    }
}

static bool denied(void)
{
    return fake_denied("FAKE_AMDSMI_DENY");
}

static struct fake_gpu *gpu_of(amdsmi_handle h)
{
    struct fake_gpu *d = h;
    if (!init_count || !d || d < gpus || d >= gpus + ngpu)
        return NULL;
    return d;
}

/* Power drawn by one die, W. */
static double die_power_w(const struct fake_gpu *d)
{
    if (fake_activity_model() && !d->busy)
        return IDLE_W;
    return IDLE_W + 260.0 * d->range_max / SCLK_MAX;
}

static void integrate(struct fake_gpu *d)
{
    double t = now_s();
    d->energy_uj += die_power_w(d) * (t - d->last_s) * 1e6;
    d->last_s = t;
}

amdsmi_status_t amdsmi_init(uint64_t flags)
{
    if (!(flags & 2u))
        return INVAL;
    pthread_mutex_lock(&mu);
    if (init_count++ == 0) {
        ngpu = fake_device_count("FAKE_AMDSMI_DEVICES", 2, NDEV_MAX);
        start_s = now_s();
        for (int i = 0; i < ngpu; i++) {
            memset(&gpus[i], 0, sizeof gpus[i]);
            gpus[i].index = i;
            gpus[i].range_min = SCLK_MIN;
            gpus[i].range_max = SCLK_MAX;
            gpus[i].cap_uw = CAP_MAX_UW;
            gpus[i].energy_uj = 3e11 + i * 1e9;
            gpus[i].last_s = start_s;
            frozen_uj[i] = reload_uj[i] = -1;
        }
        nsock = is("mi250") ? (ngpu + 1) / 2 : ngpu;
        load_state();
    }
    pthread_mutex_unlock(&mu);
    log_call("amdsmi_init = 0");
    return OK;
}

amdsmi_status_t amdsmi_shut_down(void)
{
    pthread_mutex_lock(&mu);
    int r = init_count > 0 ? OK : NOT_INIT;
    if (init_count > 0)
        init_count--;
    pthread_mutex_unlock(&mu);
    log_call("amdsmi_shut_down = %d", r);
    return (amdsmi_status_t)r;
}

amdsmi_status_t amdsmi_status_code_to_string(amdsmi_status_t s, const char **text)
{
    if (!text)
        return INVAL;
    switch (s) {
    case OK:
        *text = "AMDSMI_STATUS_SUCCESS: Call succeeded";
        break;
    case INVAL:
        *text = "AMDSMI_STATUS_INVAL: Invalid parameters";
        break;
    case NOT_SUPPORTED:
        *text = "AMDSMI_STATUS_NOT_SUPPORTED: Command not supported";
        break;
    case NO_PERM:
        *text = "AMDSMI_STATUS_NO_PERM: Permission Denied";
        break;
    case NOT_INIT:
        *text = "AMDSMI_STATUS_NOT_INIT: Device not initialized";
        break;
    default:
        *text = "AMDSMI_STATUS_UNKNOWN_ERROR: An unknown error occurred";
        break;
    }
    return OK;
}

/* Two-call pattern: NULL array => the count. */
amdsmi_status_t amdsmi_get_socket_handles(uint32_t *count, amdsmi_handle *handles)
{
    if (!init_count)
        return NOT_INIT;
    if (!count)
        return INVAL;
    if (!handles) {
        *count = (uint32_t)nsock;
        return OK;
    }
    uint32_t n = *count < (uint32_t)nsock ? *count : (uint32_t)nsock;
    for (uint32_t i = 0; i < n; i++)
        handles[i] = &sockets[i];
    *count = n;
    return OK;
}

amdsmi_status_t amdsmi_get_processor_handles(amdsmi_handle sock, uint32_t *count,
                                             amdsmi_handle *handles)
{
    int *s = sock;
    if (!init_count)
        return NOT_INIT;
    if (!count || !s || s < sockets || s >= sockets + nsock)
        return INVAL;
    int k = (int)(s - sockets);
    int per = is("mi250") ? 2 : 1;
    int first = k * per, n = first + per <= ngpu ? per : ngpu - first;
    if (!handles) {
        *count = (uint32_t)n;
        return OK;
    }
    if (*count < (uint32_t)n)
        n = (int)*count;
    for (int i = 0; i < n; i++)
        handles[i] = &gpus[first + i];
    *count = (uint32_t)n;
    return OK;
}

amdsmi_status_t amdsmi_get_gpu_asic_info(amdsmi_handle h, amdsmi_asic_info_t *info)
{
    struct fake_gpu *d = gpu_of(h);
    if (!d || !info)
        return INVAL;
    memset(info, 0, sizeof *info);
    const char *name = is("mi250")    ? "AMD Instinct MI250X"
                       : is("mi300x") ? "AMD Instinct MI300X"
                       : is("mi100")  ? "AMD Instinct MI100"
                                      : "AMD Instinct MI210";
    snprintf(info->market_name, sizeof info->market_name, "%s", name);
    snprintf(info->vendor_name, sizeof info->vendor_name, "Advanced Micro Devices Inc. [AMD/ATI]");
    info->vendor_id = 0x1002;
    info->oam_id = (uint32_t)d->index;
    return OK;
}

amdsmi_status_t amdsmi_get_clk_freq(amdsmi_handle h, uint32_t type, amdsmi_frequencies_t *f)
{
    struct fake_gpu *d = gpu_of(h);
    if (!d || !f)
        return INVAL;
    memset(f, 0, sizeof *f);
    if (type == 0) {
        f->num_supported = 3;
        f->frequency[0] = SCLK_MIN * 1000000ull;
        f->frequency[1] = SCLK_MID * 1000000ull;
        f->frequency[2] = SCLK_MAX * 1000000ull;
        f->current = d->range_max >= SCLK_MAX ? 2 : d->range_max >= SCLK_MID ? 1 : 0;
        f->has_deep_sleep = true;
        return OK;
    }
    if (type == 4) {
        f->num_supported = 1;
        f->frequency[0] = MCLK * 1000000ull;
        return OK;
    }
    return NOT_SUPPORTED;
}

amdsmi_status_t amdsmi_set_gpu_clk_range(amdsmi_handle h, uint64_t lo, uint64_t hi, uint32_t type)
{
    struct fake_gpu *d = gpu_of(h);
    int r = OK;
    pthread_mutex_lock(&mu);
    if (!d)
        r = INVAL;
    else if (denied())
        r = NO_PERM;
    else if (type != 0 || lo >= hi || lo < SCLK_MIN || hi > SCLK_MAX)
        r = INVAL;
    else {
        integrate(d);
        d->range_min = (unsigned)lo;
        d->range_max = (unsigned)hi;
        save_state(d->index);
    }
    pthread_mutex_unlock(&mu);
    log_call("amdsmi_set_gpu_clk_range %d %llu %llu %u = %d", d ? d->index : -1,
             (unsigned long long)lo, (unsigned long long)hi, type, r);
    return (amdsmi_status_t)r;
}

amdsmi_status_t amdsmi_get_power_cap_info(amdsmi_handle h, uint32_t sensor,
                                          amdsmi_power_cap_info_t *p)
{
    struct fake_gpu *d = gpu_of(h);
    if (!d || !p || sensor != 0)
        return INVAL;
    memset(p, 0, sizeof *p);
    p->power_cap = d->cap_uw;
    p->default_power_cap = CAP_MAX_UW;
    p->dpm_cap = SCLK_MAX;
    p->min_power_cap = CAP_MIN_UW;
    p->max_power_cap = CAP_MAX_UW;
    return OK;
}

amdsmi_status_t amdsmi_set_power_cap(amdsmi_handle h, uint32_t sensor, uint64_t cap_uw)
{
    struct fake_gpu *d = gpu_of(h);
    int r = !d || sensor != 0                              ? INVAL
            : denied()                                     ? NO_PERM
            : (cap_uw < CAP_MIN_UW || cap_uw > CAP_MAX_UW) ? INVAL
                                                           : OK;
    if (!r) {
        pthread_mutex_lock(&mu);
        d->cap_uw = cap_uw;
        save_state(d->index);
        pthread_mutex_unlock(&mu);
    }
    log_call("amdsmi_set_power_cap %d %llu = %d", d ? d->index : -1, (unsigned long long)cap_uw, r);
    return (amdsmi_status_t)r;
}

static bool odd_die(const struct fake_gpu *d)
{
    return is("mi250") && (d->index % 2) == 1;
}

/* Package power of an MI250 even die: both dies. */
static double reported_power_w(const struct fake_gpu *d)
{
    if (odd_die(d))
        return 0.0;
    double w = die_power_w(d);
    if (is("mi250") && d->index + 1 < ngpu)
        w += die_power_w(&gpus[d->index + 1]);
    return w;
}

amdsmi_status_t amdsmi_get_energy_count(amdsmi_handle h, uint64_t *acc, float *res,
                                        uint64_t *timestamp)
{
    struct fake_gpu *d = gpu_of(h);
    if (!d || !acc || !res || !timestamp)
        return INVAL;
    pthread_mutex_lock(&mu);
    double t = now_s();
    integrate(d);
    double uj = d->energy_uj;
    if (is("mi250")) {
        if (odd_die(d))
            uj = 0;
        else if (d->index + 1 < ngpu) {
            integrate(&gpus[d->index + 1]);
            uj += gpus[d->index + 1].energy_uj;
        }
    }
    double after = quirk_after_s();
    if (is("mi100") || is("drift"))
        uj = 3e11 + (uj - 3e11) * 1.6;
    else if (is("stall") && t - start_s > after) {
        /* Frozen at what it read when the quirk began. */
        if (frozen_uj[d->index] < 0)
            frozen_uj[d->index] = uj;
        uj = frozen_uj[d->index];
    } else if (is("backwards") && t - start_s > after) {
        if (reload_uj[d->index] < 0)
            reload_uj[d->index] = uj;
        uj -= reload_uj[d->index];
    }
    pthread_mutex_unlock(&mu);
    *acc = (uint64_t)(uj / RES_UJ);
    *res = RES_UJ;
    *timestamp = (uint64_t)(t * 1e9);
    return OK;
}

amdsmi_status_t amdsmi_get_power_info(amdsmi_handle h, amdsmi_power_info_t *p)
{
    struct fake_gpu *d = gpu_of(h);
    if (!d || !p)
        return INVAL;
    memset(p, 0, sizeof *p);
    pthread_mutex_lock(&mu);
    uint32_t w = (uint32_t)(reported_power_w(d) + 0.5);
    p->socket_power = w;
    p->current_socket_power = w;
    p->average_socket_power = is("mi300x") ? UINT32_MAX : w;
    p->power_limit = (uint32_t)(d->cap_uw / 1000000u);
    pthread_mutex_unlock(&mu);
    return OK;
}

/* Fake compute (tests/fake_common/fake_common.h): not amdsmi's; a trainer finds them with
 * dlsym to hold each instruction as long as the device's clock makes it last. dev is the
 * processor's index in handle order (ergon's device index). */
double fake_gpu_kernel_begin(unsigned dev, double work_s);
int fake_gpu_kernel_end(unsigned dev);

double fake_gpu_kernel_begin(unsigned dev, double work_s)
{
    pthread_mutex_lock(&mu);
    if (!init_count || dev >= (unsigned)ngpu) {
        pthread_mutex_unlock(&mu);
        return -1.0;
    }
    struct fake_gpu *d = &gpus[dev];
    integrate(d);
    d->busy++;
    double t = fake_kernel_s(work_s, d->range_max, SCLK_MAX);
    pthread_mutex_unlock(&mu);
    return t;
}

int fake_gpu_kernel_end(unsigned dev)
{
    pthread_mutex_lock(&mu);
    if (!init_count || dev >= (unsigned)ngpu) {
        pthread_mutex_unlock(&mu);
        return -1;
    }
    integrate(&gpus[dev]);
    if (gpus[dev].busy > 0)
        gpus[dev].busy--;
    pthread_mutex_unlock(&mu);
    return 0;
}
