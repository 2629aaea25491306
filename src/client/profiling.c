/* profiling.c: the client's profiling sweep (erg_client_profile): every clock from the highest
 * down, a warm-up and N measured iterations each, early stop, then the blocking power. */
#include "client/client_struct.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

bool erg__profile_early_stop(int *ups, double prev, double e, size_t i, size_t n)
{
    if (isfinite(prev) && isfinite(e) && e > prev)
        (*ups)++;
    else
        *ups = 0;
    /* "past the first third" of the whole clock list, as the reference does */
    return *ups >= 5 && (i + 1) * 3 >= n;
}

erg_status erg_client_profile(erg_client *c, int stage, int min_freq_mhz, int iters,
                              erg_iteration_fn run_iteration, void *user, double blocking_s,
                              erg_profile **out, double *blocking_power_w, erg_error *err)
{
    if (!c || !run_iteration || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_client_profile: NULL argument");
    if (iters < 1 || iters > 100000)
        return erg_error_set(err, ERG_EINVAL, "iterations per clock %d not in [1, 100000]", iters);
    if (!(blocking_s >= 0 && blocking_s <= 3600))
        return erg_error_set(err, ERG_EINVAL, "blocking measurement %g s not in [0, 3600]",
                             blocking_s);
    if (c->in_step)
        return erg_error_set(err, ERG_ESTATE, "profiling must start outside an iteration");
    if (!c->sampling)
        return erg_error_set(err, ERG_ESTATE,
                             "profiling needs energy sampling (client created "
                             "with ERG_CLIENT_NO_ENERGY)");
    int *clocks = NULL;
    size_t n = 0;
    erg_status st = erg_gpu_sm_clocks(c->gpu, c->dev, &clocks, &n, err);
    if (st)
        return st;
    size_t nuse = 0;
    while (nuse < n && clocks[nuse] >= min_freq_mhz)
        nuse++;
    erg_profile *p = NULL;
    erg__energy_sample *samples = NULL;
    if (nuse == 0) {
        st = erg_error_set(err, ERG_EINVAL, "no supported clock at or above %d MHz", min_freq_mhz);
        goto out;
    }
    if ((st = erg_profile_new(&p, err)))
        goto out;
    /* Early stop: energy of an iteration went up five times in a row once
     * past the first third of the clock list, as the reference profiler does. */
    double prev_e = NAN;
    int ups = 0;
    unsigned sources = 0; /* where the rows' energies came from */
    for (size_t i = 0; i < nuse; i++) {
        if ((st = erg_client_set_uniform_clock(c, clocks[i], err)))
            goto out;
        if ((st = erg_client_sync(c, 30.0, err)))
            goto out;
        /* one warm-up iteration, not measured */
        if ((st = run_iteration(user, c)))
            goto fn_failed;
        size_t first_rec = atomic_load(&c->nrecs);
        double esum = 0;
        int ecount = 0;
        for (int it = 0; it < iters; it++) {
            double t = 0, e = NAN;
            if ((st = erg_client_step_begin(c)))
                goto fn_failed;
            if ((st = run_iteration(user, c)))
                goto fn_failed;
            if ((st = erg_client_step_end(c, &t, &e)))
                goto fn_failed;
            if (isfinite(e)) {
                esum += e;
                ecount++;
            }
        }
        erg__client_sample_energy(c);
        size_t ns = 0;
        erg__free(samples);
        samples = NULL;
        if ((st = erg__client_copy_samples(c, &samples, &ns, err)))
            goto out;
        /* No warm-up drop inside the window: the window's warm-up ran above. */
        size_t nrec = atomic_load(&c->nrecs) - first_rec;
        erg__instr_rec *recs = erg__malloc((nrec ? nrec : 1) * sizeof *recs);
        if (!recs) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto out;
        }
        for (size_t k = 0; k < nrec; k++) {
            recs[k] = *erg__client_rec_at(c, first_rec + k);
            if (recs[k].freq_start != clocks[i] || recs[k].freq_end != clocks[i])
                recs[k].freq_start = 0; /* not at the swept clock: excluded */
        }
        st = erg__aggregate_stage(p, stage, recs, nrec, samples, ns, false, "profiling", &sources,
                                  err);
        erg__free(recs);
        if (st)
            goto out;
        double e_mean = ecount ? esum / ecount : NAN;
        bool stop = erg__profile_early_stop(&ups, prev_e, e_mean, i, nuse);
        prev_e = e_mean;
        if (stop)
            break;
    }
    if ((st = erg_profile_set_energy_source(p, erg__source_set_word(sources), err)) ||
        (st = erg_client_set_uniform_clock(c, 0, err)))
        goto out;
    erg__client_request_clock(c, 0);
    if ((st = erg_client_sync(c, 30.0, err)))
        goto out;
    if (blocking_power_w)
        *blocking_power_w = NAN;
    if (blocking_s > 0) {
        erg_gpu_sim_set_activity(c->gpu, c->dev, false, ERG_FORWARD, NULL, NULL);
        uint64_t e0, e1;
        if ((st = erg_gpu_energy_mj(c->gpu, c->dev, &e0, err)))
            goto out;
        double t0 = erg__client_mono_s();
        struct timespec ts = {(time_t)blocking_s, (long)((blocking_s - floor(blocking_s)) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        if ((st = erg_gpu_energy_mj(c->gpu, c->dev, &e1, err)))
            goto out;
        double dt = erg__client_mono_s() - t0;
        if (blocking_power_w && dt > 0)
            *blocking_power_w = (double)erg_counter_delta(e0, e1, 64) / 1000.0 / dt;
    }
    *out = p;
    p = NULL;
    goto out;
fn_failed:
    if (err && err->status != st)
        erg_error_set(err, st, "profiling: the iteration callback failed: %s", erg_strerror(st));
out:
    erg__free(samples);
    erg__free(clocks);
    erg_profile_free(p);
    return st;
}
