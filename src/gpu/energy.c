/* energy.c: energy you can trust: each device's counter checked against integrated power. */
#include "gpu/gpu_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/*
 * Every reading of a hardware counter (NVML, amdsmi) also samples power (at most every
 * ERG_ENERGY_SAMPLE_MIN_S) and integrates it with trapezoids. The counter is replaced, for
 * that device and for the rest of the handle's life, when it
 *   - goes backwards (a driver reload, a counter that wraps early, the MI250 odd die),
 *   - stalls: unchanged for ERG_ENERGY_STALL_S while integrated power grew by at least
 *     ERG_ENERGY_STALL_MIN_J,
 *   - disagrees: over a window of at least ERG_ENERGY_WINDOW_S and ERG_ENERGY_WINDOW_MIN_J,
 *     its increase differs from integrated power by more than ERG_ENERGY_TOLERANCE,
 * or when the back-end says the counter is known to be unreliable (MI100). The reading then
 * continues from the counter's last trusted value by integration, so it never decreases, and
 * the event callback is called once with the reason. Back-ends marked energy_unchecked (the
 * model; ergond, which checks its own devices) pass through.
 */
struct erg__energy_dev {
    bool init; /* info filled from the back-end */
    erg_gpu_energy_info info;
    bool have;                /* a counter reading exists */
    uint64_t last_counter;    /* last trusted counter value, mJ */
    double out_mj;            /* integrated mode: the reading */
    bool have_p;              /* a power sample exists */
    double last_t, last_p_mw; /* last power sample */
    double first_t;           /* first power sample */
    long nsamples;
    double change_t; /* when the counter last moved */
    double integ_since_change_j;
    double win_t0, win_integ_j; /* disagreement window */
    uint64_t win_c0;
    long win_samples;
};

erg_status erg__energy_alloc(erg_gpu *g)
{
    g->energy = erg__calloc(g->count > 0 ? (size_t)g->count : 1, sizeof *g->energy);
    if (!g->energy)
        return ERG_ENOMEM;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    int rc = pthread_mutex_init(&g->energy_mu, &a);
    pthread_mutexattr_destroy(&a);
    if (rc) {
        erg__free(g->energy);
        g->energy = NULL;
        return ERG_ENOMEM;
    }
    return ERG_OK;
}

void erg__energy_free(erg_gpu *g)
{
    if (g->energy)
        pthread_mutex_destroy(&g->energy_mu);
    erg__free(g->energy);
    g->energy = NULL;
}

static const erg__name energy_source_names[] = {
    {"counter", ERG_ENERGY_COUNTER},
    {"integrated", ERG_ENERGY_INTEGRATED},
    {"model", ERG_ENERGY_MODEL},
    {"none", ERG_ENERGY_NONE},
};

const char *erg_energy_source_name(erg_energy_source s)
{
    const char *n = erg__name_of(ERG__NAMES(energy_source_names), (int)s);
    return n ? n : "unknown";
}

erg_energy_source erg__energy_source_parse(const char *name)
{
    int v = ERG_ENERGY_COUNTER;
    if (name)
        erg__name_lookup(ERG__NAMES(energy_source_names), name, &v);
    return (erg_energy_source)v;
}

void erg_gpu_set_energy_event(erg_gpu *g, erg_gpu_energy_event_fn fn, void *user)
{
    if (!g)
        return;
    g->energy_event = fn;
    g->energy_event_user = user;
}

static void fill_info(erg_gpu *g, int dev, erg__energy_dev *d)
{
    if (d->init)
        return;
    memset(&d->info, 0, sizeof d->info);
    d->info.source = ERG_ENERGY_COUNTER;
    snprintf(d->info.scope, sizeof d->info.scope, "gpu");
    if (g->ops->energy_caps)
        g->ops->energy_caps(g, dev, &d->info);
    if (d->info.source == ERG_ENERGY_COUNTER && d->info.reason[0]) {
        /* Known to be unreliable: integrated from the start. */
        d->info.source = ERG_ENERGY_INTEGRATED;
        d->info.replaced = 1;
    }
    d->init = true;
}

static void replace(erg_gpu *g, int dev, erg__energy_dev *d, const char *reason)
{
    d->info.source = ERG_ENERGY_INTEGRATED;
    d->info.replaced = 1;
    snprintf(d->info.reason, sizeof d->info.reason, "%s", reason);
    d->out_mj = (double)d->last_counter;
    if (g->energy_event) {
        char msg[320];
        snprintf(msg, sizeof msg,
                 "GPU %d: energy counter not trusted: %s; integrating power from now on", dev,
                 reason);
        g->energy_event(g->energy_event_user, dev, msg);
    }
}

/* Sample power if due; returns the energy integrated since the previous sample, J (0 when no
 * sample was taken or none could be). */
static double sample_power(erg_gpu *g, int dev, erg__energy_dev *d, double t, bool *sampled)
{
    *sampled = false;
    /* While checking a counter, power at most every ERG_ENERGY_SAMPLE_MIN_S; once power is
     * the reading, at every reading (a reading that did not move would look stalled). */
    if (d->have_p && d->info.source == ERG_ENERGY_COUNTER &&
        t - d->last_t < ERG_ENERGY_SAMPLE_MIN_S)
        return 0.0;
    uint32_t mw = 0;
    if (g->ops->power_mw(g, dev, &mw, NULL) != ERG_OK)
        return 0.0;
    *sampled = true;
    double e_j = 0.0;
    if (d->have_p)
        e_j = (d->last_p_mw + (double)mw) / 2.0 * (t - d->last_t) / 1000.0;
    else
        d->first_t = t;
    d->have_p = true;
    d->last_t = t;
    d->last_p_mw = mw;
    d->nsamples++;
    if (d->nsamples > 1)
        d->info.interval_s = (t - d->first_t) / (double)(d->nsamples - 1);
    return e_j;
}

static erg_status energy_read_locked(erg_gpu *g, int dev, uint64_t *mj, erg_error *err);

erg_status erg__energy_read(erg_gpu *g, int dev, uint64_t *mj, erg_error *err)
{
    if (g->ops->energy_unchecked || !g->energy)
        return g->ops->energy_mj(g, dev, mj, err);
    pthread_mutex_lock(&g->energy_mu);
    erg_status st = energy_read_locked(g, dev, mj, err);
    pthread_mutex_unlock(&g->energy_mu);
    return st;
}

static erg_status energy_read_locked(erg_gpu *g, int dev, uint64_t *mj, erg_error *err)
{
    erg__energy_dev *d = &g->energy[dev];
    fill_info(g, dev, d);
    if (d->info.source == ERG_ENERGY_NONE)
        return g->ops->energy_mj(g, dev, mj, err);
    double t = erg__now_s();
    if (d->info.source == ERG_ENERGY_INTEGRATED) {
        if (!d->have && !d->have_p) {
            /* Start from the counter where there is one, so the value looks familiar. */
            uint64_t c = 0;
            if (g->ops->energy_mj(g, dev, &c, NULL) == ERG_OK)
                d->out_mj = (double)c;
            d->have = true;
        }
        bool sampled;
        double e_j = sample_power(g, dev, d, t, &sampled);
        if (!d->have_p)
            return erg_error_set(err, ERG_ENOTSUP,
                                 "GPU %d: energy is integrated from power, and power cannot be "
                                 "read",
                                 dev);
        d->out_mj += e_j * 1000.0;
        *mj = (uint64_t)d->out_mj;
        return ERG_OK;
    }
    uint64_t c = 0;
    erg_status st = g->ops->energy_mj(g, dev, &c, err);
    if (st)
        return st;
    bool sampled;
    double e_j = sample_power(g, dev, d, t, &sampled);
    if (!d->have) {
        d->have = true;
        d->last_counter = c;
        d->change_t = t;
        d->win_t0 = t;
        d->win_c0 = c;
        d->win_integ_j = 0;
        *mj = c;
        return ERG_OK;
    }
    d->integ_since_change_j += e_j;
    d->win_integ_j += e_j;
    char why[200] = "";
    if (c < d->last_counter) {
        snprintf(why, sizeof why, "it went backwards from %llu to %llu mJ",
                 (unsigned long long)d->last_counter, (unsigned long long)c);
    } else if (c == d->last_counter) {
        if (t - d->change_t >= ERG_ENERGY_STALL_S &&
            d->integ_since_change_j >= ERG_ENERGY_STALL_MIN_J)
            snprintf(why, sizeof why,
                     "it stalled at %llu mJ for %.1f s while integrated power drew %.1f J",
                     (unsigned long long)c, t - d->change_t, d->integ_since_change_j);
    } else {
        d->change_t = t;
        d->integ_since_change_j = 0;
    }
    if (sampled)
        d->win_samples++;
    if (!why[0] && c >= d->last_counter && sampled && t - d->win_t0 >= ERG_ENERGY_WINDOW_S &&
        d->win_integ_j >= ERG_ENERGY_WINDOW_MIN_J &&
        d->win_samples >= ERG_ENERGY_WINDOW_MIN_SAMPLES) {
        double dc_j = (double)(c - d->win_c0) / 1000.0;
        double rel = fabs(dc_j - d->win_integ_j) / d->win_integ_j;
        if (rel > ERG_ENERGY_TOLERANCE)
            snprintf(why, sizeof why,
                     "it rose %.1f J in %.1f s while integrated power drew %.1f J (%.0f%% apart, "
                     "tolerance %.0f%%)",
                     dc_j, t - d->win_t0, d->win_integ_j, rel * 100.0,
                     ERG_ENERGY_TOLERANCE * 100.0);
        d->win_t0 = t;
        d->win_c0 = c;
        d->win_integ_j = 0;
        d->win_samples = 0;
    }
    if (why[0]) {
        bool stalled = c == d->last_counter;
        replace(g, dev, d, why);
        /* A stalled counter missed what power drew while it stood still (this reading's
         * share included); otherwise count this reading's share. */
        d->out_mj += (stalled ? d->integ_since_change_j : e_j) * 1000.0;
        *mj = (uint64_t)d->out_mj;
        return ERG_OK;
    }
    d->last_counter = c;
    *mj = c;
    return ERG_OK;
}

erg_status erg_gpu_energy_info_get(erg_gpu *g, int dev, erg_gpu_energy_info *out, erg_error *err)
{
    if (!g || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_gpu_energy_info_get: NULL argument");
    if (dev < 0 || dev >= g->count)
        return erg_error_set(err, ERG_EINVAL, "GPU %d does not exist (%d device%s on %s)", dev,
                             g->count, g->count == 1 ? "" : "s", g->ops->name);
    if (g->ops->energy_unchecked || !g->energy) {
        memset(out, 0, sizeof *out);
        out->source = ERG_ENERGY_COUNTER;
        snprintf(out->scope, sizeof out->scope, "gpu");
        if (g->ops->energy_caps)
            g->ops->energy_caps(g, dev, out);
        return ERG_OK;
    }
    erg__energy_dev *d = &g->energy[dev];
    pthread_mutex_lock(&g->energy_mu);
    fill_info(g, dev, d);
    *out = d->info;
    pthread_mutex_unlock(&g->energy_mu);
    if (g->ops->energy_caps) { /* the resolution may be known only after a reading */
        erg_gpu_energy_info now;
        memset(&now, 0, sizeof now);
        g->ops->energy_caps(g, dev, &now);
        out->resolution_mj = now.resolution_mj;
    }
    return ERG_OK;
}

erg_status erg_gpu_energy_counter_mj(erg_gpu *g, int dev, uint64_t *mj, erg_error *err)
{
    if (!g || !mj)
        return erg_error_set(err, ERG_EINVAL, "erg_gpu_energy_counter_mj: NULL argument");
    if (dev < 0 || dev >= g->count)
        return erg_error_set(err, ERG_EINVAL, "GPU %d does not exist (%d device%s on %s)", dev,
                             g->count, g->count == 1 ? "" : "s", g->ops->name);
    return g->ops->energy_mj(g, dev, mj, err);
}

const char *erg_gpu_energy_source(erg_gpu *g, int dev)
{
    erg_gpu_energy_info info;
    if (erg_gpu_energy_info_get(g, dev, &info, NULL) != ERG_OK)
        return "";
    return erg_energy_source_name(info.source);
}
