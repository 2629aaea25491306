/* clock_queue.c: the client's clock queue: the lock-free ring from the training thread to the
 * clock thread, the clock thread (applies clocks, samples energy, restores on signals). */
#include "client/client_struct.h"

#include <string.h>
#include <time.h>

/*
 * THE CLOCK QUEUE
 *
 * The training thread (producer) and the clock thread (consumer) share a
 * single-producer single-consumer ring of clock requests. The producer
 * writes the slot, then publishes it with a release store of `tail`; the
 * consumer reads `tail` with acquire, reads the newest slot, releases the
 * slots by storing `head`, then makes the (slow) GPU call. Neither side ever takes a
 * lock or makes a system call, so instruction_begin costs a few loads and
 * stores. The consumer polls (sleeping 100 us between empty polls, far below
 * the 10-20 ms an NVML setter takes).
 *
 * Consecutive equal clocks are skipped on the producer side (`last_req`),
 * unless the clock thread reset the GPU behind the producer's back since (a
 * signal) or the GPU refused a change (ergond unreachable, no permission): both bump
 * `reset_gen`, so a clock asked for again after a reset or a refusal is applied.
 * Every request carries an increasing number. When the consumer finds
 * several requests pending (the GPU is slower than the instructions), it
 * applies only the newest and drops the rest: a clock meant for an
 * instruction that has already finished is worthless, and applying every
 * stale one in turn would leave the GPU ever further behind. If the ring is
 * ever full, the producer puts the request in `overflow` (one atomic 64-bit
 * slot holding number and clock, latest wins). The consumer takes the ring's
 * newest entry and the overflow slot, applies whichever has the higher
 * number, and remembers the number applied so that an older request found
 * later (left in the ring while the overflow slot held a newer one) is
 * skipped. So the GPU always ends at the clock the training loop asked for
 * last. On stop, pending requests are dropped (the client resets the GPU).
 *
 * Before the first lock after the GPU was at its defaults, the clock thread
 * tells the client's watchdog (watchdog.c) that a clock is set; signals.c
 * tells it when a signal's reset made the GPU clean again.
 */

#define ENERGY_PERIOD_S 0.002       /* NVML and the simulated GPU */
#define ENERGY_PERIOD_DAEMON_S 0.02 /* through ergond: one HTTP request per sample */

double erg__client_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void set_clock_error(erg_client *c, const erg_error *e)
{
    pthread_mutex_lock(&c->err_mu);
    if (c->clock_err.status == ERG_OK)
        c->clock_err = *e;
    pthread_mutex_unlock(&c->err_mu);
}

static void apply_clock(erg_client *c, int f)
{
    erg_error e;
    if (f > 0)
        erg__watchdog_note(c, true);
    erg_status st = f > 0 ? erg_gpu_lock_sm_clocks(c->gpu, c->dev, f, f, &e)
                          : erg_gpu_reset_sm_clocks(c->gpu, c->dev, &e);
    if (st) {
        set_clock_error(c, &e);
        /* The GPU did not take it (ergond unreachable, no permission): the producer must not
         * skip the same clock asked again as a repeat. */
        atomic_fetch_add_explicit(&c->reset_gen, 1, memory_order_release);
    } else {
        atomic_store(&c->active_clock, f > 0 ? f : 0);
        atomic_fetch_add(&c->changes, 1);
    }
}

void erg__client_sample_energy(erg_client *c)
{
    uint64_t mj;
    erg_error e;
    if (erg_gpu_energy_mj(c->gpu, c->dev, &mj, &e) != ERG_OK)
        return;
    /* Where this reading came from (the counter, or power integrated once the counter was
     * not trusted): the time-energy log records it per sample. */
    erg_gpu_energy_info info;
    int source = erg_gpu_energy_info_get(c->gpu, c->dev, &info, NULL) == ERG_OK
                     ? (int)info.source
                     : ERG__SOURCE_UNKNOWN;
    double j = (double)mj / 1000.0, t = erg__client_epoch_s(c);
    pthread_mutex_lock(&c->samples_mu);
    if (c->nsamples && c->samples[c->nsamples - 1].energy_j == j) {
        pthread_mutex_unlock(&c->samples_mu);
        return;
    }
    if (!ERG__GROW(c->samples, c->cap_samples, c->nsamples + 1, 4096)) {
        pthread_mutex_unlock(&c->samples_mu);
        return;
    }
    c->samples[c->nsamples++] = (erg__energy_sample){t, j, source};
    pthread_mutex_unlock(&c->samples_mu);
}

void *erg__client_clock_thread(void *arg)
{
    erg_client *c = arg;
    double next_sample = 0;
    double period =
        strcmp(erg_gpu_backend_name(c->gpu), "daemon") ? ENERGY_PERIOD_S : ENERGY_PERIOD_DAEMON_S;
    for (;;) {
        bool worked = false;
        size_t h = atomic_load_explicit(&c->head, memory_order_relaxed);
        size_t t = atomic_load_explicit(&c->tail, memory_order_acquire);
        uint64_t ov = 0;
        /* `busy` goes up only when there is work, before the work is taken (head moved, the
         * overflow slot emptied): an empty poll never makes the queue look unsettled. */
        if (h != t || atomic_load(&c->overflow)) {
            atomic_store(&c->busy, 1);
            t = atomic_load_explicit(&c->tail, memory_order_acquire);
            ov = atomic_exchange(&c->overflow, 0);
        }
        if (h != t || ov) {
            /* Coalesce: apply only the newest request we can see (by its
             * number, whether it came through the ring or the overflow
             * slot), and never one older than what was already applied. */
            uint64_t best_seq = 0;
            int best_f = 0;
            if (h != t) {
                best_seq = c->ring[(t - 1) % ERG__QCAP].seq;
                best_f = c->ring[(t - 1) % ERG__QCAP].freq;
            }
            if (ov && (ov >> 20) > best_seq) {
                best_seq = ov >> 20;
                best_f = (int)(ov & 0xFFFFF) - 1;
            }
            atomic_store_explicit(&c->head, t, memory_order_release);
            if (best_seq > c->applied_seq) {
                atomic_fetch_add(&c->coalesced, best_seq - c->applied_seq - 1);
                c->applied_seq = best_seq;
                if (!atomic_load(&c->stop))
                    apply_clock(c, best_f);
            }
            worked = true;
        }
        atomic_store(&c->busy, 0);
        erg__client_signals_poll(c);
        if (!atomic_load_explicit(&c->spare, memory_order_relaxed)) {
            erg__instr_rec *fresh = erg__malloc(ERG__REC_CHUNK * sizeof *fresh);
            if (fresh) {
                memset(fresh, 0, ERG__REC_CHUNK * sizeof *fresh); /* fault the pages in here */
                erg__instr_rec *expect = NULL;
                if (!atomic_compare_exchange_strong(&c->spare, &expect, fresh))
                    erg__free(fresh);
            }
        }
        if (c->sampling) {
            double now = erg__client_mono_s();
            if (now >= next_sample) {
                erg__client_sample_energy(c);
                next_sample = now + period;
            }
        }
        if (atomic_load(&c->stop) && atomic_load(&c->head) == atomic_load(&c->tail) &&
            !atomic_load(&c->overflow))
            break;
        if (!worked) {
            struct timespec ts = {0, ERG__POLL_NS};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

void erg__client_request_clock(erg_client *c, int f)
{
    unsigned gen = atomic_load_explicit(&c->reset_gen, memory_order_acquire);
    if (gen != c->seen_reset_gen) {
        /* The GPU was reset since last_req was set: it is no longer the GPU's clock. */
        c->seen_reset_gen = gen;
        c->last_req = -1;
    }
    if (f == c->last_req)
        return;
    c->last_req = f;
    atomic_fetch_add_explicit(&c->requested, 1, memory_order_relaxed);
    uint64_t seq = ++c->next_seq;
    size_t t = atomic_load_explicit(&c->tail, memory_order_relaxed);
    size_t h = atomic_load_explicit(&c->head, memory_order_acquire);
    if (t - h >= ERG__QCAP) {
        /* Ring full: the overflow slot keeps the newest request. */
        atomic_store(&c->overflow, seq << 20 | (uint64_t)(f + 1));
        return;
    }
    c->ring[t % ERG__QCAP].seq = seq;
    c->ring[t % ERG__QCAP].freq = f;
    atomic_store_explicit(&c->tail, t + 1, memory_order_release);
}
