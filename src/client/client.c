/* client.c: the training-loop client's core: create and close, plans, the step/instruction
 * and receive hooks, sync, logs. The clock queue, signals, watchdog and profiling sweep live
 * in clock_queue.c, signals.c, watchdog.c and profiling.c. */
#include "client/client_struct.h"
#include "ergon/plan.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * RESTORE. The GPU's clocks go back to their defaults on erg_client_close; on
 * SIGINT/SIGTERM/SIGHUP (signals.c: every client's clock thread resets its
 * GPU, then the signal goes on to the program's own handler or its default
 * action); and when the process dies hard (SIGKILL, a crash): each NVML
 * client's watchdog, a separate program started by posix_spawn, sees the
 * process end through a pidfd and resets the GPU (watchdog.c). Through
 * ergond, the daemon's pidfd lease does the same.
 */

#define REC_CHUNK ERG__REC_CHUNK
#define REC_MAX_CHUNKS ERG__REC_MAX_CHUNKS
#define WAIT_CLOCK_S 10.0 /* ERG_CLIENT_WAIT_CLOCK: begin waits this long at most */

static void free_chunks(erg_client *c)
{
    for (size_t i = 0; c->chunks && i < REC_MAX_CHUNKS && c->chunks[i]; i++)
        erg__free(c->chunks[i]);
    erg__free(c->chunks);
    erg__free(atomic_exchange(&c->spare, NULL));
    erg__free(c->waits_cur.kind);
    erg__free(c->waits_cur.wait_s);
    erg__free(c->waits_last.kind);
    erg__free(c->waits_last.wait_s);
}

erg_status erg_client_new(erg_gpu *gpu, int device, int rank, const char *log_dir, unsigned flags,
                          erg_client **out, erg_error *err)
{
    if (!gpu || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_client_new: NULL argument");
    if (device < 0 || device >= erg_gpu_count(gpu))
        return erg_error_set(err, ERG_EINVAL, "GPU %d does not exist (%d on %s)", device,
                             erg_gpu_count(gpu), erg_gpu_backend_name(gpu));
    if (rank < 0)
        return erg_error_set(err, ERG_EINVAL, "rank %d is negative", rank);
    erg_client *c = erg__calloc(1, sizeof *c);
    if (!c)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    c->gpu = gpu;
    c->dev = device;
    c->rank = rank;
    c->flags = flags;
    c->last_req = -1;
    c->owner_pid = getpid();
    c->watchdog_pid = -1;
    c->watchdog_fd = -1;
    c->sampling = !(flags & ERG_CLIENT_NO_ENERGY);
    pthread_mutex_init(&c->err_mu, NULL);
    pthread_mutex_init(&c->samples_mu, NULL);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    c->epoch_offset_s = ((double)rt.tv_sec + (double)rt.tv_nsec * 1e-9) - erg__client_mono_s();
    erg_status st = ERG_OK;
    if (log_dir) {
        if (!(c->log_dir = erg__strdup(log_dir))) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto fail;
        }
        if ((st = erg__mkdir_p(log_dir, err)))
            goto fail;
    }
    c->chunks = erg__calloc(REC_MAX_CHUNKS, sizeof *c->chunks);
    if (!c->chunks || !(c->chunks[0] = erg__malloc(REC_CHUNK * sizeof(erg__instr_rec)))) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    /* The watchdog first: from here on a hard death resets what we set. */
    if ((st = erg__watchdog_start(c, err)))
        goto fail;
    if (flags & ERG_CLIENT_LOCK_MEMORY) {
        int *mem = NULL;
        size_t nm = 0;
        erg_error e;
        st = erg_gpu_mem_clocks(gpu, device, &mem, &nm, &e);
        if (!st)
            st = erg_gpu_lock_mem_clocks(gpu, device, mem[0], mem[0], &e);
        erg__free(mem);
        if (st == ERG_OK)
            c->mem_locked = true;
        else if (st != ERG_ENOTSUP) {
            if (err)
                *err = e;
            goto fail;
        }
        st = ERG_OK;
    }
    /* A first energy sample now, so that every instruction starts inside the
     * sampled range (the clock thread may be scheduled late). */
    if (c->sampling)
        erg__client_sample_energy(c);
    if ((st = erg__client_signals_register(c, err)))
        goto fail;
    int rc = pthread_create(&c->thread, NULL, erg__client_clock_thread, c);
    if (rc != 0) {
        st = erg_error_set(err, ERG_EINTERNAL, "cannot start the clock thread: %s", strerror(rc));
        goto fail;
    }
    c->thread_started = true;
    *out = c;
    return ERG_OK;
fail:
    erg__client_signals_unregister(c);
    if (c->mem_locked)
        erg_gpu_reset_mem_clocks(gpu, device, NULL);
    erg__watchdog_stop(c, !c->mem_locked);
    pthread_mutex_destroy(&c->err_mu);
    pthread_mutex_destroy(&c->samples_mu);
    free_chunks(c);
    erg__free(c->log_dir);
    erg__free(c);
    return st;
}

static erg_status check_clock_supported(erg_client *c, int f, erg_error *err)
{
    int *clocks = NULL;
    size_t n = 0;
    erg_status st = erg_gpu_sm_clocks(c->gpu, c->dev, &clocks, &n, err);
    if (st)
        return st;
    bool ok = false;
    for (size_t i = 0; i < n; i++)
        ok |= clocks[i] == f;
    int lo = n ? clocks[n - 1] : 0, hi = n ? clocks[0] : 0;
    erg__free(clocks);
    if (!ok)
        return erg_error_set(err, ERG_EINVAL,
                             "clock %d MHz is not supported by GPU %d (supported %d..%d MHz)", f,
                             c->dev, lo, hi);
    return ERG_OK;
}

erg_status erg_client_set_plan(erg_client *c, const erg_plan *plan, int stage, erg_error *err)
{
    if (!c || !plan)
        return erg_error_set(err, ERG_EINVAL, "erg_client_set_plan: NULL argument");
    if (c->in_step)
        return erg_error_set(err, ERG_ESTATE, "cannot change the plan inside an iteration");
    int S = erg_plan_num_stages(plan), M = erg_plan_num_microbatches(plan);
    if (stage < 0 || stage >= S)
        return erg_error_set(err, ERG_EINVAL, "stage %d is not in the plan's [0, %d]", stage,
                             S - 1);
    /* This rank's pipeline stages (its chunks), ascending, from its order. */
    const erg_instr *v;
    int n = erg_order_rank(erg_plan_order(plan), stage, &v);
    int chunk_stage[64], V = 0;
    const int *fr = erg_plan_stage_freqs_const(plan, stage);
    for (int k = 0; k < n; k++)
        for (int p = 0; p < (v[k].kind == ERG_OVERLAP_F_B ? 2 : 1); p++) {
            int st = p ? v[k].stage2 : v[k].stage, seen = 0;
            for (int i = 0; i < V; i++)
                seen |= chunk_stage[i] == st;
            if (!seen) {
                if (V == 64)
                    return erg_error_set(err, ERG_EINVAL, "more than 64 chunks on rank %d", stage);
                int i = V++;
                while (i > 0 && chunk_stage[i - 1] > st) {
                    chunk_stage[i] = chunk_stage[i - 1];
                    i--;
                }
                chunk_stage[i] = st;
            }
        }
    if (V == 0)
        V = 1, chunk_stage[0] = stage;
    int *clocks = erg__calloc((size_t)V * 4 * (size_t)M, sizeof *clocks);
    if (!clocks)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (int k = 0; k < n; k++) {
        int f = fr[k];
        erg_status st = f > 0 ? check_clock_supported(c, f, err) : ERG_OK;
        if (st) {
            erg__free(clocks);
            return st;
        }
        for (int p = 0; p < (v[k].kind == ERG_OVERLAP_F_B ? 2 : 1); p++) {
            int sg = p ? v[k].stage2 : v[k].stage, ch = 0;
            erg_instr_kind kd = p                              ? v[k].kind2
                                : v[k].kind == ERG_OVERLAP_F_B ? ERG_FORWARD
                                                               : v[k].kind;
            int mb = p ? v[k].microbatch2 : v[k].microbatch;
            while (ch < V && chunk_stage[ch] != sg)
                ch++;
            if ((unsigned)kd < 4 && mb >= 0 && mb < M)
                clocks[((size_t)ch * 4 + kd) * M + mb] = f;
        }
    }
    erg__free(c->clocks);
    c->clocks = clocks;
    c->num_mb = M;
    c->num_chunks = V;
    c->uniform_clock = 0;
    return ERG_OK;
}

erg_status erg_client_load_plan(erg_client *c, const char *path, int stage, erg_error *err)
{
    erg_plan *plan = NULL;
    erg_status st = erg_plan_read(path, NULL, &plan, err);
    if (st)
        return st;
    st = erg_client_set_plan(c, plan, stage, err);
    erg_plan_free(plan);
    return st;
}

erg_status erg_client_set_uniform_clock(erg_client *c, int freq_mhz, erg_error *err)
{
    if (!c)
        return erg_error_set(err, ERG_EINVAL, "NULL client");
    if (freq_mhz < 0)
        return erg_error_set(err, ERG_EINVAL, "clock %d MHz is negative", freq_mhz);
    if (freq_mhz > 0) {
        erg_status st = check_clock_supported(c, freq_mhz, err);
        if (st)
            return st;
    }
    erg__free(c->clocks);
    c->clocks = NULL;
    c->num_mb = 0;
    c->num_chunks = 0;
    c->uniform_clock = freq_mhz;
    if (freq_mhz > 0)
        erg__client_request_clock(c, freq_mhz);
    return ERG_OK;
}

erg_status erg_client_step_begin(erg_client *c)
{
    if (!c)
        return ERG_EINVAL;
    if (c->in_step)
        return ERG_ESTATE;
    c->in_step = true;
    c->waits_cur.n = 0;
    c->step_start_s = erg__client_mono_s();
    uint64_t mj = 0;
    if (erg_gpu_energy_mj(c->gpu, c->dev, &mj, NULL) != ERG_OK)
        mj = 0;
    c->step_energy_mj = mj;
    return ERG_OK;
}

erg_status erg_client_step_end(erg_client *c, double *time_s, double *energy_j)
{
    if (!c)
        return ERG_EINVAL;
    if (!c->in_step || c->in_instr)
        return ERG_ESTATE;
    c->in_step = false;
    double t = erg__client_mono_s() - c->step_start_s;
    struct erg__wait_list tmp = c->waits_last; /* the step's waits become the last step's */
    c->waits_last = c->waits_cur;
    c->waits_cur = tmp;
    c->waits_cur.n = 0;
    c->in_recv = false;
    c->pending_wait_s = 0;
    uint64_t mj = 0;
    double e = NAN;
    if (erg_gpu_energy_mj(c->gpu, c->dev, &mj, NULL) == ERG_OK && c->step_energy_mj) {
        e = (double)erg_counter_delta(c->step_energy_mj, mj, 64) / 1000.0;
        /* The step's energy is measured the way its last reading was (the counter, or
         * integration that also covers what a stalled counter missed). */
        erg_gpu_energy_info info;
        c->step_sources |= erg_gpu_energy_info_get(c->gpu, c->dev, &info, NULL) == ERG_OK
                               ? erg__source_bit((int)info.source)
                               : erg__source_bit(ERG__SOURCE_UNKNOWN);
    }
    if (time_s)
        *time_s = t;
    if (energy_j)
        *energy_j = e;
    return ERG_OK;
}

const char *erg_client_energy_source(erg_client *c, bool reset)
{
    if (!c)
        return "";
    const char *w = erg__source_set_word(c->step_sources);
    if (reset)
        c->step_sources = 0;
    return w;
}

/* True when every clock requested so far has been handled by the clock thread (applied,
 * refused or superseded). Order matters: the consumer raises `busy` before it moves `head`. */
static bool clocks_settled(erg_client *c)
{
    return atomic_load(&c->head) == atomic_load(&c->tail) && !atomic_load(&c->overflow) &&
           !atomic_load(&c->busy);
}

/* Wait up to timeout_s until clocks_settled; false on time-out. */
static bool wait_settled(erg_client *c, double timeout_s)
{
    double end = erg__client_mono_s() + timeout_s;
    while (!clocks_settled(c)) {
        if (erg__client_mono_s() > end)
            return false;
        struct timespec ts = {0, ERG__POLL_NS};
        nanosleep(&ts, NULL);
    }
    return true;
}

erg_status erg_client_instruction_begin(erg_client *c, erg_instr_kind kind, int microbatch)
{
    return erg_client_instruction_begin_chunk(c, kind, 0, microbatch);
}

erg_status erg_client_instruction_begin_chunk(erg_client *c, erg_instr_kind kind, int chunk,
                                              int microbatch)
{
    if (!c)
        return ERG_EINVAL;
    if (c->in_instr)
        return ERG_ESTATE;
    if ((unsigned)kind > ERG_BACKWARD_WEIGHT || microbatch < 0 || chunk < 0 ||
        (c->clocks && (microbatch >= c->num_mb || chunk >= c->num_chunks)))
        return ERG_EINVAL;
    int f = c->clocks ? c->clocks[((size_t)chunk * 4 + kind) * c->num_mb + microbatch]
                      : c->uniform_clock;
    if (f > 0)
        erg__client_request_clock(c, f);
    size_t idx = atomic_load_explicit(&c->nrecs, memory_order_relaxed);
    size_t ch = idx / REC_CHUNK;
    erg__instr_rec *r = &c->scratch;
    if (ch < REC_MAX_CHUNKS) {
        if (!c->chunks[ch]) {
            /* Normally the clock thread has a chunk ready; malloc only if not. */
            erg__instr_rec *fresh = atomic_exchange(&c->spare, NULL);
            if (!fresh)
                fresh = erg__malloc(REC_CHUNK * sizeof *fresh);
            c->chunks[ch] = fresh;
        }
        if (c->chunks[ch])
            r = &c->chunks[ch][idx % REC_CHUNK];
    }
    /* the receive wait before it (a failed allocation loses the wait, never the hook) */
    struct erg__wait_list *wl = &c->waits_cur;
    if (wl->n == wl->cap) { /* two arrays, one capacity: it grows when both have */
        size_t cap_k = wl->cap, cap_w = wl->cap;
        if (ERG__GROW(wl->kind, cap_k, wl->n + 1, 64) &&
            ERG__GROW(wl->wait_s, cap_w, wl->n + 1, 64))
            wl->cap = cap_k;
    }
    if (wl->n < wl->cap) {
        wl->kind[wl->n] = (signed char)kind;
        wl->wait_s[wl->n++] = c->pending_wait_s;
    }
    c->pending_wait_s = 0;
    c->cur = r;
    r->kind = (int)kind;
    r->microbatch = microbatch;
    r->chunk = chunk;
    r->freq_start = atomic_load_explicit(&c->active_clock, memory_order_relaxed);
    /* The clock it runs at: known now when nothing is pending (its clock repeats one already
     * applied), after the wait with ERG_CLIENT_WAIT_CLOCK, else at a sync before end. */
    if ((c->flags & ERG_CLIENT_WAIT_CLOCK) ? wait_settled(c, WAIT_CLOCK_S) : clocks_settled(c))
        r->freq_run = atomic_load(&c->active_clock);
    else
        r->freq_run = -1;
    r->start_s = erg__client_epoch_s(c);
    c->in_instr = true;
    return ERG_OK;
}

erg_status erg_client_instruction_end(erg_client *c, erg_instr_kind kind, int microbatch)
{
    return erg_client_instruction_end_chunk(c, kind, 0, microbatch);
}

erg_status erg_client_instruction_end_chunk(erg_client *c, erg_instr_kind kind, int chunk,
                                            int microbatch)
{
    (void)chunk; /* the record holds kind and microbatch (client logs profile F/B only) */
    if (!c)
        return ERG_EINVAL;
    if (!c->in_instr)
        return ERG_ESTATE;
    erg__instr_rec *r = c->cur;
    if (r->kind != (int)kind || r->microbatch != microbatch)
        return ERG_ESTATE;
    r->end_s = erg__client_epoch_s(c);
    r->freq_end = atomic_load_explicit(&c->active_clock, memory_order_relaxed);
    if (r == &c->scratch)
        c->dropped++;
    else /* publish: the log writer may read it from the clock thread */
        atomic_store_explicit(&c->nrecs, atomic_load_explicit(&c->nrecs, memory_order_relaxed) + 1,
                              memory_order_release);
    c->in_instr = false;
    return ERG_OK;
}

erg_status erg_client_recv_begin(erg_client *c)
{
    if (!c)
        return ERG_EINVAL;
    if (c->in_recv)
        return ERG_ESTATE;
    c->in_recv = true;
    c->recv_start_s = erg__client_mono_s();
    return ERG_OK;
}

erg_status erg_client_recv_end(erg_client *c, double *wait_s)
{
    if (!c)
        return ERG_EINVAL;
    if (!c->in_recv)
        return ERG_ESTATE;
    c->in_recv = false;
    double w = erg__client_mono_s() - c->recv_start_s;
    if (w < 0)
        w = 0;
    c->pending_wait_s += w;
    if (wait_s)
        *wait_s = w;
    return ERG_OK;
}

erg_status erg_client_add_wait(erg_client *c, double wait_s)
{
    if (!c || !(wait_s >= 0) || !isfinite(wait_s))
        return ERG_EINVAL;
    c->pending_wait_s += wait_s;
    return ERG_OK;
}

erg_status erg_client_step_waits(const erg_client *c, erg_instr_kind kind, double *wait_s,
                                 size_t cap, size_t *n)
{
    if (!c || !n || (unsigned)kind > ERG_OVERLAP_F_B || (cap && !wait_s))
        return ERG_EINVAL;
    size_t k = 0;
    const struct erg__wait_list *wl = &c->waits_last;
    for (size_t i = 0; i < wl->n; i++)
        if (wl->kind[i] == (signed char)kind) {
            if (k < cap)
                wait_s[k] = wl->wait_s[i];
            k++;
        }
    *n = k;
    return ERG_OK;
}

erg_status erg_client_sync(erg_client *c, double timeout_s, erg_error *err)
{
    if (!c)
        return erg_error_set(err, ERG_EINVAL, "NULL client");
    if (!wait_settled(c, timeout_s))
        return erg_error_set(err, ERG_ETIMEOUT, "GPU %d: clock changes still pending after %.3f s",
                             c->dev, timeout_s);
    /* Inside an instruction (the hooks' thread): the first sync that sees its clock request
     * handled records the clock it runs at from here on. */
    if (c->in_instr && c->cur->freq_run < 0)
        c->cur->freq_run = atomic_load(&c->active_clock);
    return erg_client_clock_error(c, err);
}

int erg_client_active_clock(const erg_client *c)
{
    return c ? atomic_load(&((erg_client *)c)->active_clock) : 0;
}

uint64_t erg_client_clock_changes(const erg_client *c)
{
    return c ? atomic_load(&((erg_client *)c)->changes) : 0;
}

erg_status erg_client_clock_error(const erg_client *c, erg_error *err)
{
    if (!c)
        return erg_error_set(err, ERG_EINVAL, "NULL client");
    erg_client *m = (erg_client *)c;
    pthread_mutex_lock(&m->err_mu);
    erg_error e = m->clock_err;
    pthread_mutex_unlock(&m->err_mu);
    if (e.status && err)
        *err = e;
    return e.status;
}

/* Samples snapshot for aggregation / logs (caller frees). */
erg_status erg__client_copy_samples(erg_client *c, erg__energy_sample **out, size_t *n,
                                    erg_error *err)
{
    pthread_mutex_lock(&c->samples_mu);
    size_t k = c->nsamples;
    erg__energy_sample *s = erg__malloc((k ? k : 1) * sizeof *s);
    if (s && k)
        memcpy(s, c->samples, k * sizeof *s);
    pthread_mutex_unlock(&c->samples_mu);
    if (!s)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    *out = s;
    *n = k;
    return ERG_OK;
}

erg_status erg_client_flush_logs(erg_client *c, erg_error *err)
{
    if (!c)
        return erg_error_set(err, ERG_EINVAL, "NULL client");
    if (!c->log_dir)
        return ERG_OK;
    /* Records first, then a sample: every record written ends before it. */
    size_t nrecs = atomic_load_explicit(&c->nrecs, memory_order_acquire);
    if (c->sampling)
        erg__client_sample_energy(c);
    erg__buf b = {0};
    /* chunk and freq_run (docs/runtime.md, "Logs"): readers before them take the first six
     * columns; an empty freq_run is a clock not seen in effect before the instruction ended. */
    erg_status st = erg__buf_printf(
        &b, "instruction,microbatch,start,end,freq_start,freq_end,chunk,freq_run\n");
    for (size_t i = 0; !st && i < nrecs; i++) {
        const erg__instr_rec *r = erg__client_rec_at(c, i);
        char run[16] = "";
        if (r->freq_run >= 0)
            snprintf(run, sizeof run, "%d", r->freq_run);
        st = erg__buf_printf(&b, "%s,%d,%.6f,%.6f,%d,%d,%d,%s\n",
                             erg_instr_kind_name((erg_instr_kind)r->kind), r->microbatch,
                             r->start_s, r->end_s, r->freq_start, r->freq_end, r->chunk, run);
    }
    char path[4200];
    if (!st) {
        snprintf(path, sizeof path, "%s/instructions-%d.csv", c->log_dir, c->rank);
        st = erg__write_file(path, b.data ? b.data : "", b.len, err);
    } else
        erg_error_set(err, st, "out of memory writing logs");
    erg__buf_free(&b);
    if (st)
        return st;
    erg__energy_sample *s = NULL;
    size_t n = 0;
    if ((st = erg__client_copy_samples(c, &s, &n, err)))
        return st;
    erg__buf e = {0};
    /* energy_source: where each reading came from (docs/runtime.md); readers before it take
     * the first two columns. */
    st = erg__buf_printf(&e, "time,energy,energy_source\n");
    for (size_t i = 0; !st && i < n; i++)
        st = erg__buf_printf(
            &e, "%.6f,%.3f,%s\n", s[i].time_s, s[i].energy_j,
            s[i].source >= 0 ? erg_energy_source_name((erg_energy_source)s[i].source) : "");
    erg__free(s);
    if (!st) {
        snprintf(path, sizeof path, "%s/time-energy-%d.csv", c->log_dir, c->rank);
        st = erg__write_file(path, e.data ? e.data : "", e.len, err);
    } else
        erg_error_set(err, st, "out of memory writing logs");
    erg__buf_free(&e);
    return st;
}

erg_status erg_client_close(erg_client *c, erg_error *err)
{
    if (!c)
        return ERG_OK;
    erg_status first = ERG_OK;
    if (getpid() != c->owner_pid) {
        /* A forked child's copy (a DataLoader worker): the clock thread, the GPU and the
         * watchdog are the parent's. Only free the memory. */
        erg__watchdog_stop(c, true);
        erg__client_signals_unregister(c);
        goto free;
    }
    if (c->thread_started) {
        atomic_store(&c->stop, 1);
        pthread_join(c->thread, NULL);
    }
    if (c->sampling)
        erg__client_sample_energy(c); /* a last sample covers the last instruction */
    first = erg_client_clock_error(c, err);
    erg_error e;
    erg_status st = erg_gpu_reset_sm_clocks(c->gpu, c->dev, &e);
    bool clean = st == ERG_OK;
    if (st && !first) {
        first = st;
        if (err)
            *err = e;
    }
    if (c->mem_locked && (st = erg_gpu_reset_mem_clocks(c->gpu, c->dev, &e))) {
        clean = false;
        if (!first) {
            first = st;
            if (err)
                *err = e;
        }
    }
    /* Clean: the watchdog exits; otherwise it tries the reset itself first. */
    erg__watchdog_stop(c, clean);
    st = erg_client_flush_logs(c, &e);
    if (st && !first) {
        first = st;
        if (err)
            *err = e;
    }
    erg__client_signals_unregister(c);
free:
    pthread_mutex_destroy(&c->err_mu);
    pthread_mutex_destroy(&c->samples_mu);
    erg__free(c->clocks);
    free_chunks(c);
    erg__free(c->samples);
    erg__free(c->log_dir);
    erg__free(c);
    return first;
}
