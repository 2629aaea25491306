/* fake_nvml.c: a fake libnvidia-ml.so.1: A100-like devices, permissions, energy, a call log. */
/*
 * Environment:
 *   FAKE_NVML_DEVICES  number of devices (default 2, at most 8)
 *   FAKE_NVML_LOG      file to which every state-changing call is appended,
 *                      one line "<function> <device> [args] = <return code>"
 *   FAKE_NVML_DENY     if set, setters fail with NO_PERMISSION (as for a
 *                      non-root user); they also fail when euid != 0
 *   FAKE_NVML_SET_DELAY_US  setters sleep this long first (real NVML
 *                      setters take 10-20 ms)
 *   FAKE_NVML_LOCKED_DELAY_US  clock setters sleep this long while holding the
 *                      library's lock, as the real NVML serialises its calls:
 *                      a thread that fork()s meanwhile leaves its child a held
 *                      lock (the hang of a watchdog that calls NVML after fork)
 *   FAKE_NVML_STATE    file holding the settings ("DEV LOCK_MIN LOCK_MAX
 *                      MEM_LOCK LIMIT_MW" per device, 0 = not locked):
 *                      read at the first nvmlInit, rewritten after each
 *                      change, so settings outlive the process as they do on
 *                      a real GPU (tests of a restarted ergond). Several
 *                      processes may share it, as they share a real GPU: a
 *                      change rewrites only its device's line, under a
 *                      record lock on "<file>.lock", and keeps the others' lines
 * Devices: SM clocks 1410..210 MHz in 15 MHz steps at memory clock 1215 MHz
 * (the only one), power limit 100..400 W (default 400 W). Power is
 * 60 W + 300 W * clock / 1410 and the energy counter integrates it over real
 * time. Lock requests outside the list, or min > max, give INVALID_ARGUMENT.
 */
#include "fake_common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct fake_dev *nvmlDevice_t;

#define NDEV_MAX 8
#define SM_MAX 1410
#define SM_MIN 210
#define SM_STEP 15
#define MEM_CLOCK 1215

struct fake_dev {
    int index;
    unsigned lock_min, lock_max; /* 0 = unlocked */
    unsigned mem_lock;
    unsigned limit_mw;
    double energy_mj;
    double last_s;
    int busy; /* fake kernels running (fake_gpu_kernel_begin) */
};

static struct fake_dev devs[NDEV_MAX];
static int ndev = 0;
static int init_count = 0;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void)
{
    return fake_now_s();
}

#define log_call(...) fake_log_call("FAKE_NVML_LOG", __VA_ARGS__)

#define IDLE_W 60.0

static double power_w(const struct fake_dev *d)
{
    if (fake_activity_model() && !d->busy)
        return IDLE_W;
    unsigned f = d->lock_max ? d->lock_max : SM_MAX;
    return IDLE_W + 300.0 * f / SM_MAX;
}

static void integrate(struct fake_dev *d)
{
    double t = now_s();
    d->energy_mj += power_w(d) * (t - d->last_s) * 1000.0;
    d->last_s = t;
}

static void delay_us(const char *var)
{
    fake_delay_us(var);
}

static void set_delay(void)
{
    delay_us("FAKE_NVML_SET_DELAY_US");
}

/* The state file: "DEV LOCK_MIN LOCK_MAX MEM_LOCK LIMIT_MW" per device. */
enum { NVALS = 4 };

/* Rewrite the state file with device `dev`'s settings (-1: every device), keeping the other
 * devices' lines as the file has them (another process may have changed them since). */
static void state_values(unsigned long long *v)
{
    for (int i = 0; i < ndev; i++) {
        v[i * NVALS + 0] = devs[i].lock_min;
        v[i * NVALS + 1] = devs[i].lock_max;
        v[i * NVALS + 2] = devs[i].mem_lock;
        v[i * NVALS + 3] = devs[i].limit_mw;
    }
}

static void save_state(int dev)
{
    unsigned long long v[NDEV_MAX * NVALS];
    state_values(v);
    fake_state_save("FAKE_NVML_STATE", dev, ndev, NVALS, v);
}

static void load_state(void)
{
    unsigned long long v[NDEV_MAX * NVALS];
    state_values(v);
    fake_state_load("FAKE_NVML_STATE", ndev, NVALS, v);
    for (int i = 0; i < ndev; i++) {
        devs[i].lock_min = (unsigned)v[i * NVALS + 0];
        devs[i].lock_max = (unsigned)v[i * NVALS + 1];
        devs[i].mem_lock = (unsigned)v[i * NVALS + 2];
        devs[i].limit_mw = (unsigned)v[i * NVALS + 3];
    }
}

static int denied(void)
{
    return fake_denied("FAKE_NVML_DENY");
}

static int valid_dev(nvmlDevice_t d)
{
    return d && d >= devs && d < devs + ndev && init_count > 0;
}

static int valid_clock(unsigned f)
{
    return f >= SM_MIN && f <= SM_MAX && (SM_MAX - f) % SM_STEP == 0;
}

nvmlReturn_t nvmlInit_v2(void)
{
    pthread_mutex_lock(&mu);
    if (init_count++ == 0) {
        ndev = fake_device_count("FAKE_NVML_DEVICES", 2, NDEV_MAX);
        for (int i = 0; i < ndev; i++) {
            memset(&devs[i], 0, sizeof devs[i]);
            devs[i].index = i;
            devs[i].limit_mw = 400000;
            devs[i].energy_mj = 5e8 + i * 1e6;
            devs[i].last_s = now_s();
        }
        load_state();
    }
    pthread_mutex_unlock(&mu);
    log_call("nvmlInit_v2 = 0");
    return 0;
}

nvmlReturn_t nvmlInit(void)
{
    return nvmlInit_v2();
}

/* pynvml (nvidia-ml-py, which Zeus uses) initialises with nvmlInitWithFlags(0). */
nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return nvmlInit_v2();
}

/* Zeus asks every device whether it is a Grace Hopper chip; an A100 is not: NOT_SUPPORTED
 * (3), the answer Zeus expects from other chips. */
nvmlReturn_t nvmlDeviceGetC2cModeInfoV(nvmlDevice_t dev, void *info)
{
    (void)dev;
    (void)info;
    return 3;
}

nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&mu);
    int r = init_count > 0 ? 0 : 1;
    if (init_count > 0)
        init_count--;
    pthread_mutex_unlock(&mu);
    log_call("nvmlShutdown = %d", r);
    return r;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case 0:
        return "Success";
    case 1:
        return "Uninitialized";
    case 2:
        return "Invalid Argument";
    case 3:
        return "Not Supported";
    case 4:
        return "Insufficient Permissions";
    case 6:
        return "Not Found";
    case 7:
        return "Insufficient Size";
    default:
        return "Unknown Error";
    }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!init_count)
        return 1;
    if (!count)
        return 2;
    *count = (unsigned)ndev;
    return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (!init_count)
        return 1;
    if (!d || i >= (unsigned)ndev)
        return 2;
    *d = &devs[i];
    return 0;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
    if (!valid_dev(d) || !name)
        return 2;
    snprintf(name, len, "Fake NVIDIA A100-SXM4-40GB");
    return 0;
}

nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t d, unsigned int *count,
                                                unsigned int *clocks)
{
    if (!valid_dev(d) || !count)
        return 2;
    if (*count < 1 || !clocks) {
        *count = 1;
        return 7;
    }
    clocks[0] = MEM_CLOCK;
    *count = 1;
    return 0;
}

nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t d, unsigned int mem,
                                                  unsigned int *count, unsigned int *clocks)
{
    if (!valid_dev(d) || !count)
        return 2;
    if (mem != MEM_CLOCK)
        return 6;
    unsigned n = (SM_MAX - SM_MIN) / SM_STEP + 1;
    if (*count < n || !clocks) {
        *count = n;
        return 7;
    }
    for (unsigned i = 0; i < n; i++)
        clocks[i] = SM_MAX - i * SM_STEP;
    *count = n;
    return 0;
}

nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t d, unsigned int lo, unsigned int hi)
{
    int r = 0;
    set_delay();
    pthread_mutex_lock(&mu);
    if (!valid_dev(d))
        r = 2;
    else if (denied())
        r = 4;
    else if (lo > hi || !valid_clock(lo) || !valid_clock(hi))
        r = 2;
    else {
        integrate(d);
        delay_us("FAKE_NVML_LOCKED_DELAY_US");
        d->lock_min = lo;
        d->lock_max = hi;
        save_state(d->index);
    }
    pthread_mutex_unlock(&mu);
    log_call("nvmlDeviceSetGpuLockedClocks %d %u %u = %d", valid_dev(d) ? d->index : -1, lo, hi, r);
    return r;
}

nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t d)
{
    int r = 0;
    set_delay();
    pthread_mutex_lock(&mu);
    if (!valid_dev(d))
        r = 2;
    else if (denied())
        r = 4;
    else {
        integrate(d);
        delay_us("FAKE_NVML_LOCKED_DELAY_US");
        d->lock_min = d->lock_max = 0;
        save_state(d->index);
    }
    pthread_mutex_unlock(&mu);
    log_call("nvmlDeviceResetGpuLockedClocks %d = %d", valid_dev(d) ? d->index : -1, r);
    return r;
}

nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t d, unsigned int lo, unsigned int hi)
{
    int r = !valid_dev(d) ? 2 : denied() ? 4 : (lo != MEM_CLOCK || hi != MEM_CLOCK) ? 2 : 0;
    if (!r) {
        pthread_mutex_lock(&mu);
        d->mem_lock = hi;
        save_state(d->index);
        pthread_mutex_unlock(&mu);
    }
    log_call("nvmlDeviceSetMemoryLockedClocks %d %u %u = %d", valid_dev(d) ? d->index : -1, lo, hi,
             r);
    return r;
}

nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t d)
{
    int r = !valid_dev(d) ? 2 : denied() ? 4 : 0;
    if (!r) {
        pthread_mutex_lock(&mu);
        d->mem_lock = 0;
        save_state(d->index);
        pthread_mutex_unlock(&mu);
    }
    log_call("nvmlDeviceResetMemoryLockedClocks %d = %d", valid_dev(d) ? d->index : -1, r);
    return r;
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t d, unsigned int *lo,
                                                          unsigned int *hi)
{
    if (!valid_dev(d) || !lo || !hi)
        return 2;
    *lo = 100000;
    *hi = 400000;
    return 0;
}

nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t d, unsigned int *mw)
{
    if (!valid_dev(d) || !mw)
        return 2;
    *mw = 400000;
    return 0;
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned int *mw)
{
    if (!valid_dev(d) || !mw)
        return 2;
    *mw = d->limit_mw;
    return 0;
}

nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t d, unsigned int mw)
{
    int r = !valid_dev(d) ? 2 : denied() ? 4 : (mw < 100000 || mw > 400000) ? 2 : 0;
    if (!r) {
        pthread_mutex_lock(&mu);
        d->limit_mw = mw;
        save_state(d->index);
        pthread_mutex_unlock(&mu);
    }
    log_call("nvmlDeviceSetPowerManagementLimit %d %u = %d", valid_dev(d) ? d->index : -1, mw, r);
    return r;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj)
{
    if (!valid_dev(d) || !mj)
        return 2;
    pthread_mutex_lock(&mu);
    integrate(d);
    *mj = (unsigned long long)d->energy_mj;
    pthread_mutex_unlock(&mu);
    return 0;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    if (!valid_dev(d) || !mw)
        return 2;
    pthread_mutex_lock(&mu);
    *mw = (unsigned)(power_w(d) * 1000.0);
    pthread_mutex_unlock(&mu);
    return 0;
}

/* Fake compute (tests/fake_common/fake_common.h): not NVML's; a trainer finds them with
 * dlsym to hold each instruction as long as the device's clock makes it last. */
double fake_gpu_kernel_begin(unsigned dev, double work_s);
int fake_gpu_kernel_end(unsigned dev);

double fake_gpu_kernel_begin(unsigned dev, double work_s)
{
    pthread_mutex_lock(&mu);
    if (!init_count || dev >= (unsigned)ndev) {
        pthread_mutex_unlock(&mu);
        return -1.0;
    }
    struct fake_dev *d = &devs[dev];
    integrate(d);
    d->busy++;
    double t = fake_kernel_s(work_s, d->lock_max ? d->lock_max : SM_MAX, SM_MAX);
    pthread_mutex_unlock(&mu);
    return t;
}

int fake_gpu_kernel_end(unsigned dev)
{
    pthread_mutex_lock(&mu);
    if (!init_count || dev >= (unsigned)ndev) {
        pthread_mutex_unlock(&mu);
        return -1;
    }
    integrate(&devs[dev]);
    if (devs[dev].busy > 0)
        devs[dev].busy--;
    pthread_mutex_unlock(&mu);
    return 0;
}
