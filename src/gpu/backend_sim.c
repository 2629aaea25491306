/* backend_sim.c: the simulated GPU back-end: the DVFS model behind the gpu.h interface. */
#include "gpu/gpu_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/*
 * Each device is stage `dev` of the model. State changes (clock, power
 * limit, activity) first integrate the power drawn since the last change
 * into the energy counter, so the counter is exact for piecewise-constant
 * power: E += P(state) * (now - last). Reads do the same. A mutex per device
 * makes the clock thread and the training thread safe together.
 *
 * Beside that wall-clock counter, every instruction begun is accounted in
 * simulated time (`acct`): the model's time and energy at the clock the
 * device has when it begins, whatever the host then takes to run it.
 */
typedef struct sim_dev {
    pthread_mutex_t mu;
    int sm_lock_mhz;      /* Locked SM clock (max of the locked range), 0 = unlocked. */
    int mem_lock_mhz;     /* Locked memory clock, 0 = unlocked. */
    uint32_t limit_mw;    /* Current power limit. */
    bool busy;            /* An instruction is running. */
    erg_instr_kind kind;  /* Which one. */
    double energy_mj;     /* Counter (fractional part kept). */
    double last_s;        /* Time of the last integration. */
    erg_sim_work work[4]; /* Forward, backward, backward_input, backward_weight work. */
    /* Simulated time and energy of the instructions begun (erg_gpu_sim_account). */
    uint64_t acct_instructions;
    double acct_time_s, acct_energy_j;
    int acct_last_freq_mhz;
} sim_dev;

typedef struct sim_state {
    const erg_sim_gpu_info *info;
    int n;
    sim_dev *devs;
} sim_state;

static sim_dev *dev_of(erg_gpu *g, int dev)
{
    return &((sim_state *)g->impl)->devs[dev];
}

static const erg_sim_gpu_info *info_of(erg_gpu *g)
{
    return ((sim_state *)g->impl)->info;
}

/* The SM clock the model runs at now (the top of the locked range, else the maximum). */
static int clock_now_mhz(const erg_sim_gpu_info *info, const sim_dev *d)
{
    return d->sm_lock_mhz ? d->sm_lock_mhz : info->max_freq_mhz;
}

/* Power now and, if busy, the instruction time; caller holds the mutex. */
static double power_now_w(const erg_sim_gpu_info *info, const sim_dev *d, double *time_s)
{
    if (time_s)
        *time_s = 0;
    if (!d->busy)
        return info->blocking_power_w;
    erg_sim_gpu_info capped = *info;
    double limit_w = d->limit_mw / 1000.0;
    if (limit_w < capped.power_cap_w)
        capped.power_cap_w = limit_w;
    double f = clock_now_mhz(info, d);
    double t = 0, p = info->blocking_power_w;
    if (erg_sim_eval(&capped, &d->work[d->kind], f, &t, &p, NULL) != ERG_OK)
        return info->blocking_power_w;
    if (time_s)
        *time_s = t;
    return p;
}

static void integrate(const erg_sim_gpu_info *info, sim_dev *d)
{
    double now = erg__now_s();
    d->energy_mj += power_now_w(info, d, NULL) * (now - d->last_s) * 1000.0;
    d->last_s = now;
}

static void sim_close(erg_gpu *g)
{
    sim_state *s = g->impl;
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        pthread_mutex_destroy(&s->devs[i].mu);
    erg__free(s->devs);
    erg__free(s);
}

static erg_status sim_name(erg_gpu *g, int dev, char *buf, size_t size, erg_error *err)
{
    snprintf(buf, size, "%s (simulated)", info_of(g)->full_name);
    return ERG_OK;
}

static erg_status sim_sm_clocks(erg_gpu *g, int dev, int **clocks, size_t *n, erg_error *err)
{
    const erg_sim_gpu_info *in = info_of(g);
    size_t k = (size_t)((in->max_freq_mhz - in->min_freq_mhz) / in->step_mhz) + 1;
    int *c = erg__malloc(k * sizeof *c);
    if (!c)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (size_t i = 0; i < k; i++)
        c[i] = in->max_freq_mhz - (int)i * in->step_mhz;
    *clocks = c;
    *n = k;
    return ERG_OK;
}

static erg_status sim_mem_clocks(erg_gpu *g, int dev, int **clocks, size_t *n, erg_error *err)
{
    int *c = erg__malloc(sizeof *c);
    if (!c)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    c[0] = info_of(g)->mem_freq_mhz;
    *clocks = c;
    *n = 1;
    return ERG_OK;
}

static erg_status sim_lock_sm(erg_gpu *g, int dev, int min_mhz, int max_mhz, erg_error *err)
{
    sim_dev *d = dev_of(g, dev);
    pthread_mutex_lock(&d->mu);
    integrate(info_of(g), d);
    d->sm_lock_mhz = max_mhz; /* the model runs at the top of the range */
    pthread_mutex_unlock(&d->mu);
    return ERG_OK;
}

static erg_status sim_reset_sm(erg_gpu *g, int dev, erg_error *err)
{
    sim_dev *d = dev_of(g, dev);
    pthread_mutex_lock(&d->mu);
    integrate(info_of(g), d);
    d->sm_lock_mhz = 0;
    pthread_mutex_unlock(&d->mu);
    return ERG_OK;
}

static erg_status sim_lock_mem(erg_gpu *g, int dev, int min_mhz, int max_mhz, erg_error *err)
{
    sim_dev *d = dev_of(g, dev);
    pthread_mutex_lock(&d->mu);
    d->mem_lock_mhz = max_mhz;
    pthread_mutex_unlock(&d->mu);
    return ERG_OK;
}

static erg_status sim_reset_mem(erg_gpu *g, int dev, erg_error *err)
{
    sim_dev *d = dev_of(g, dev);
    pthread_mutex_lock(&d->mu);
    d->mem_lock_mhz = 0;
    pthread_mutex_unlock(&d->mu);
    return ERG_OK;
}

static erg_status sim_power_limits(erg_gpu *g, int dev, uint32_t *min_mw, uint32_t *max_mw,
                                   uint32_t *default_mw, uint32_t *current_mw, erg_error *err)
{
    const erg_sim_gpu_info *in = info_of(g);
    sim_dev *d = dev_of(g, dev);
    *max_mw = *default_mw = (uint32_t)lround(in->power_cap_w * 1000.0);
    *min_mw = (uint32_t)lround(in->power_cap_w * 400.0);
    pthread_mutex_lock(&d->mu);
    *current_mw = d->limit_mw;
    pthread_mutex_unlock(&d->mu);
    return ERG_OK;
}

static erg_status sim_set_power_limit(erg_gpu *g, int dev, uint32_t mw, erg_error *err)
{
    sim_dev *d = dev_of(g, dev);
    pthread_mutex_lock(&d->mu);
    integrate(info_of(g), d);
    d->limit_mw = mw;
    pthread_mutex_unlock(&d->mu);
    return ERG_OK;
}

static erg_status sim_energy(erg_gpu *g, int dev, uint64_t *mj, erg_error *err)
{
    sim_dev *d = dev_of(g, dev);
    pthread_mutex_lock(&d->mu);
    integrate(info_of(g), d);
    *mj = (uint64_t)d->energy_mj;
    pthread_mutex_unlock(&d->mu);
    return ERG_OK;
}

static erg_status sim_power(erg_gpu *g, int dev, uint32_t *mw, erg_error *err)
{
    sim_dev *d = dev_of(g, dev);
    pthread_mutex_lock(&d->mu);
    *mw = (uint32_t)lround(power_now_w(info_of(g), d, NULL) * 1000.0);
    pthread_mutex_unlock(&d->mu);
    return ERG_OK;
}

static void sim_energy_caps(erg_gpu *g, int dev, erg_gpu_energy_info *info)
{
    (void)g;
    (void)dev;
    info->source = ERG_ENERGY_MODEL;
    snprintf(info->scope, sizeof info->scope, "gpu");
}

const erg__gpu_backend erg__gpu_sim_backend = {
    "sim",
    sim_close,
    sim_name,
    sim_sm_clocks,
    sim_mem_clocks,
    sim_lock_sm,
    sim_reset_sm,
    sim_lock_mem,
    sim_reset_mem,
    sim_power_limits,
    sim_set_power_limit,
    sim_energy,
    sim_power,
    sim_energy_caps,
    1,
};

erg_status erg_gpu_open_sim(const char *gpu, const char *model, int num_devices, erg_gpu **out,
                            erg_error *err)
{
    if (!out)
        return erg_error_set(err, ERG_EINVAL, "erg_gpu_open_sim: NULL output");
    const erg_sim_gpu_info *info;
    erg_status st = erg_sim_gpu_find(gpu, &info, err);
    if (st)
        return st;
    if (num_devices < 1 || num_devices > 64)
        return erg_error_set(err, ERG_EINVAL, "simulated device count %d is not in [1, 64]",
                             num_devices);
    sim_state *s = erg__calloc(1, sizeof *s);
    sim_dev *devs = erg__calloc((size_t)num_devices, sizeof *devs);
    if (!s || !devs) {
        erg__free(s);
        erg__free(devs);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    s->info = info;
    s->devs = devs;
    double now = erg__now_s();
    for (int i = 0; i < num_devices; i++) {
        for (int k = 0; k < 4; k++) {
            st = erg_sim_model_work(model ? model : "gpt3-xl", num_devices, 0, i, (erg_instr_kind)k,
                                    &devs[i].work[k], err);
            if (st) {
                for (int j = 0; j < s->n; j++)
                    pthread_mutex_destroy(&devs[j].mu);
                erg__free(devs);
                erg__free(s);
                return st;
            }
        }
        pthread_mutex_init(&devs[i].mu, NULL);
        devs[i].limit_mw = (uint32_t)lround(info->power_cap_w * 1000.0);
        devs[i].last_s = now;
        /* Start the counter at a large value, as a real driver's would be. */
        devs[i].energy_mj = 1e9 + 1e6 * i;
        s->n = i + 1;
    }
    char spec[128];
    snprintf(spec, sizeof spec, "sim:%s:%s:%d", info->name, model ? model : "gpt3-xl", num_devices);
    char *spec_copy = erg__strdup(spec);
    st = spec_copy ? erg__gpu_alloc(&erg__gpu_sim_backend, num_devices, s, out, err)
                   : erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (st) {
        erg__free(spec_copy);
        erg_gpu tmp = {.impl = s};
        sim_close(&tmp);
        return st;
    }
    (*out)->spec = spec_copy;
    return ERG_OK;
}

erg_status erg_gpu_sim_set_activity(erg_gpu *g, int dev, bool busy, erg_instr_kind kind,
                                    double *time_s, erg_error *err)
{
    if (!g || g->ops != &erg__gpu_sim_backend)
        return erg_error_set(err, ERG_ENOTSUP, "activity can only be set on the simulated GPU");
    if (dev < 0 || dev >= g->count)
        return erg_error_set(err, ERG_EINVAL, "GPU %d does not exist", dev);
    if (busy && (unsigned)kind > ERG_BACKWARD_WEIGHT)
        return erg_error_set(err, ERG_EINVAL,
                             "instruction kind %d is not forward, backward, backward_input or "
                             "backward_weight",
                             (int)kind);
    sim_dev *d = dev_of(g, dev);
    pthread_mutex_lock(&d->mu);
    integrate(info_of(g), d);
    d->busy = busy;
    d->kind = busy ? kind : ERG_FORWARD;
    double t = 0;
    double p_w = power_now_w(info_of(g), d, &t);
    if (busy) {
        d->acct_instructions++;
        d->acct_time_s += t;
        d->acct_energy_j += p_w * t;
        d->acct_last_freq_mhz = clock_now_mhz(info_of(g), d);
    }
    pthread_mutex_unlock(&d->mu);
    if (time_s)
        *time_s = t;
    return ERG_OK;
}

erg_status erg_gpu_sim_account(erg_gpu *g, int dev, uint64_t *instructions, double *busy_time_s,
                               double *busy_energy_j, int *last_freq_mhz, erg_error *err)
{
    if (!g || g->ops != &erg__gpu_sim_backend)
        return erg_error_set(err, ERG_ENOTSUP,
                             "only the simulated GPU accounts simulated time and energy");
    if (dev < 0 || dev >= g->count)
        return erg_error_set(err, ERG_EINVAL, "GPU %d does not exist", dev);
    sim_dev *d = dev_of(g, dev);
    pthread_mutex_lock(&d->mu);
    if (instructions)
        *instructions = d->acct_instructions;
    if (busy_time_s)
        *busy_time_s = d->acct_time_s;
    if (busy_energy_j)
        *busy_energy_j = d->acct_energy_j;
    if (last_freq_mhz)
        *last_freq_mhz = d->acct_last_freq_mhz;
    pthread_mutex_unlock(&d->mu);
    return ERG_OK;
}
