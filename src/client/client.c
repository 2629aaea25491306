/* client.c: the training-loop client: hooks, the clock thread, restore on exit/signals/death. */
#include "client/client_internal.h"
#include "ergon/plan.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
 * Consecutive equal clocks are skipped on the producer side (`last_req`).
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
 * RESTORE. Normal path: erg_client_close resets the SM (and memory) clocks.
 * Signals: the handler only stores the signal number; every clock thread
 * sees it within 100 us, resets its GPU, marks itself done, and the last one
 * re-raises the signal with the default action. Hard death: a watchdog child
 * (forked at creation, before our thread starts) waits for EOF on a pipe
 * whose write end only the client process holds; EOF without the "clean
 * close" byte means the process died, and the child reopens the back-end
 * from its spec and resets the GPU. LIMITATION: forking from a process that
 * already has other threads is only safe because the child execs nothing
 * and touches only its own fresh state; the daemon lease (ergond) is the
 * robust alternative.
 */

#define QCAP 1024u
#define REC_CHUNK 1024u
#define REC_MAX_CHUNKS 65536u
#define POLL_NS 100000L
#define ENERGY_PERIOD_S 0.002        /* NVML and the simulated GPU */
#define ENERGY_PERIOD_DAEMON_S 0.02  /* through ergond: one HTTP request per sample */

struct erg_client {
    erg_gpu *gpu;
    int dev, rank;
    char *log_dir;
    unsigned flags;

    /* plan: clocks[(chunk * 4 + kind) * M + microbatch]; chunk = position of
     * the pipeline stage among this rank's stages (ascending), kind F/B/I/W */
    int *clocks;
    int num_mb, num_chunks;
    int uniform_clock;

    /* queue */
    struct {
        uint64_t seq;     /* request number, increasing */
        int freq;         /* MHz, 0 = reset */
    } ring[QCAP];
    _Atomic size_t head, tail;
    _Atomic uint64_t overflow; /* seq << 20 | (freq + 1); 0 = empty */
    int last_req;         /* producer-side dedupe */
    uint64_t next_seq;    /* producer: number of the next request */
    uint64_t applied_seq; /* consumer: newest request applied (or superseded) */
    _Atomic uint64_t requested;
    _Atomic int busy;     /* the consumer has taken requests it has not applied yet */
    _Atomic int active_clock;
    _Atomic uint64_t changes;
    _Atomic uint64_t coalesced; /* requests superseded before they were applied */
    _Atomic int stop;
    pthread_t thread;
    bool thread_started;

    /* clock thread error */
    pthread_mutex_t err_mu;
    erg_error clock_err;

    /* measurement */
    double epoch_offset_s; /* realtime - monotonic at creation */
    bool in_step, in_instr;
    double step_start_s;
    uint64_t step_energy_mj;
    erg__instr_rec **chunks;      /* REC_MAX_CHUNKS slots, filled as needed, never moved */
    _Atomic size_t nrecs;         /* committed records (release-stored by the producer) */
    _Atomic(erg__instr_rec *) spare; /* a chunk the clock thread allocated in advance */
    erg__instr_rec *cur;          /* the open instruction's record */
    erg__instr_rec scratch;       /* where records go once the store is full */
    uint64_t dropped;             /* records not stored (store full / no memory) */
    bool mem_locked;              /* we locked the memory clock (ERG_CLIENT_LOCK_MEMORY) */
    pthread_mutex_t samples_mu;
    erg__energy_sample *samples;
    size_t nsamples, cap_samples;
    bool sampling;

    /* receive waits: charged to the next instruction; per step (kind, wait) lists */
    bool in_recv;
    double recv_start_s, pending_wait_s;
    struct wait_list {
        signed char *kind;
        double *wait_s;
        size_t n, cap;
    } waits_cur, waits_last;

    /* watchdog */
    pid_t watchdog;
    int watchdog_fd;
    _Atomic int restored_by_signal;
};

/* ---- signal handling: a registry of live clients ---- */
#define MAX_CLIENTS 64
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static erg_client *registry[MAX_CLIENTS];
static volatile sig_atomic_t pending_signal = 0;
static int handlers_installed = 0;
static struct sigaction old_actions[3];
static const int restore_signals[3] = {SIGINT, SIGTERM, SIGHUP};

static void on_signal(int sig)
{
    pending_signal = sig;
}

static void install_handlers(void)
{
    if (handlers_installed++)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++)
        sigaction(restore_signals[i], &sa, &old_actions[i]);
}

static void uninstall_handlers(void)
{
    if (handlers_installed == 0 || --handlers_installed)
        return;
    for (int i = 0; i < 3; i++)
        sigaction(restore_signals[i], &old_actions[i], NULL);
}

static void register_client(erg_client *c)
{
    pthread_mutex_lock(&reg_mu);
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (!registry[i]) {
            registry[i] = c;
            break;
        }
    install_handlers();
    pthread_mutex_unlock(&reg_mu);
}

static void unregister_client(erg_client *c)
{
    pthread_mutex_lock(&reg_mu);
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (registry[i] == c)
            registry[i] = NULL;
    uninstall_handlers();
    pthread_mutex_unlock(&reg_mu);
}

/* Called by a clock thread after it restored its GPU for a signal. */
static void maybe_reraise(int sig)
{
    pthread_mutex_lock(&reg_mu);
    bool all = true;
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (registry[i] && !(registry[i]->flags & ERG_CLIENT_NO_SIGNALS) &&
            !atomic_load(&registry[i]->restored_by_signal))
            all = false;
    if (all) {
        /* Tell the watchdogs the GPUs are already clean, then die of the
         * signal as the process would have without us. */
        for (int i = 0; i < MAX_CLIENTS; i++)
            if (registry[i] && registry[i]->watchdog_fd >= 0) {
                ssize_t w = write(registry[i]->watchdog_fd, "q", 1);
                (void)w;
            }
        for (int i = 0; i < 3; i++)
            if (restore_signals[i] == sig)
                sigaction(sig, &old_actions[i], NULL);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        struct sigaction cur;
        sigaction(sig, NULL, &cur);
        if (cur.sa_handler == on_signal)
            sigaction(sig, &dfl, NULL);
        pthread_mutex_unlock(&reg_mu);
        kill(getpid(), sig);
        return;
    }
    pthread_mutex_unlock(&reg_mu);
}

/* ---- helpers ---- */

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double epoch_s(const erg_client *c)
{
    return mono_s() + c->epoch_offset_s;
}

static erg__instr_rec *rec_at(erg_client *c, size_t i)
{
    return &c->chunks[i / REC_CHUNK][i % REC_CHUNK];
}

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
    erg_status st = f > 0 ? erg_gpu_lock_sm_clocks(c->gpu, c->dev, f, f, &e)
                          : erg_gpu_reset_sm_clocks(c->gpu, c->dev, &e);
    if (st)
        set_clock_error(c, &e);
    else {
        atomic_store(&c->active_clock, f > 0 ? f : 0);
        atomic_fetch_add(&c->changes, 1);
    }
}

static void sample_energy(erg_client *c)
{
    uint64_t mj;
    erg_error e;
    if (erg_gpu_energy_mj(c->gpu, c->dev, &mj, &e) != ERG_OK)
        return;
    double j = (double)mj / 1000.0, t = epoch_s(c);
    pthread_mutex_lock(&c->samples_mu);
    if (c->nsamples && c->samples[c->nsamples - 1].energy_j == j) {
        pthread_mutex_unlock(&c->samples_mu);
        return;
    }
    if (c->nsamples == c->cap_samples) {
        size_t nc = c->cap_samples ? 2 * c->cap_samples : 4096;
        erg__energy_sample *ns = erg__reallocarray(c->samples, nc, sizeof *ns);
        if (!ns) {
            pthread_mutex_unlock(&c->samples_mu);
            return;
        }
        c->samples = ns;
        c->cap_samples = nc;
    }
    c->samples[c->nsamples++] = (erg__energy_sample){t, j};
    pthread_mutex_unlock(&c->samples_mu);
}

static void *clock_thread(void *arg)
{
    erg_client *c = arg;
    double next_sample = 0;
    double period = strcmp(erg_gpu_backend_name(c->gpu), "daemon") ? ENERGY_PERIOD_S
                                                                  : ENERGY_PERIOD_DAEMON_S;
    for (;;) {
        bool worked = false;
        atomic_store(&c->busy, 1);
        size_t h = atomic_load_explicit(&c->head, memory_order_relaxed);
        size_t t = atomic_load_explicit(&c->tail, memory_order_acquire);
        uint64_t ov = atomic_exchange(&c->overflow, 0);
        if (h != t || ov) {
            /* Coalesce: apply only the newest request we can see (by its
             * number, whether it came through the ring or the overflow
             * slot), and never one older than what was already applied. */
            uint64_t best_seq = 0;
            int best_f = 0;
            if (h != t) {
                best_seq = c->ring[(t - 1) % QCAP].seq;
                best_f = c->ring[(t - 1) % QCAP].freq;
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
        int sig = pending_signal;
        if (sig && !(c->flags & ERG_CLIENT_NO_SIGNALS) && !atomic_load(&c->restored_by_signal)) {
            erg_error e;
            erg_gpu_reset_sm_clocks(c->gpu, c->dev, &e);
            if (c->mem_locked)
                erg_gpu_reset_mem_clocks(c->gpu, c->dev, &e);
            atomic_store(&c->active_clock, 0);
            atomic_store(&c->restored_by_signal, 1);
            if (c->log_dir)
                erg_client_flush_logs(c, &e);
            maybe_reraise(sig);
        }
        if (!atomic_load_explicit(&c->spare, memory_order_relaxed)) {
            erg__instr_rec *fresh = erg__malloc(REC_CHUNK * sizeof *fresh);
            if (fresh) {
                memset(fresh, 0, REC_CHUNK * sizeof *fresh); /* fault the pages in here */
                erg__instr_rec *expect = NULL;
                if (!atomic_compare_exchange_strong(&c->spare, &expect, fresh))
                    erg__free(fresh);
            }
        }
        if (c->sampling) {
            double now = mono_s();
            if (now >= next_sample) {
                sample_energy(c);
                next_sample = now + period;
            }
        }
        if (atomic_load(&c->stop) &&
            atomic_load(&c->head) == atomic_load(&c->tail) && !atomic_load(&c->overflow))
            break;
        if (!worked) {
            struct timespec ts = {0, POLL_NS};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

/* Producer side: queue a clock change (0 = reset) unless it repeats. */
static void request_clock(erg_client *c, int f)
{
    if (f == c->last_req)
        return;
    c->last_req = f;
    atomic_fetch_add_explicit(&c->requested, 1, memory_order_relaxed);
    uint64_t seq = ++c->next_seq;
    size_t t = atomic_load_explicit(&c->tail, memory_order_relaxed);
    size_t h = atomic_load_explicit(&c->head, memory_order_acquire);
    if (t - h >= QCAP) {
        /* Ring full: the overflow slot keeps the newest request. */
        atomic_store(&c->overflow, seq << 20 | (uint64_t)(f + 1));
        return;
    }
    c->ring[t % QCAP].seq = seq;
    c->ring[t % QCAP].freq = f;
    atomic_store_explicit(&c->tail, t + 1, memory_order_release);
}

/* ---- watchdog ---- */

static void watchdog_main(int fd, const char *spec, int dev, bool mem)
{
    /* Only our pipe end stays open; wait for the parent to go away. */
    char b = 0;
    ssize_t r;
    do
        r = read(fd, &b, 1);
    while (r < 0 && errno == EINTR);
    if (r == 1 && b == 'q')
        _exit(0);
    erg_gpu *g = NULL;
    if (erg_gpu_open(spec, &g, NULL) == ERG_OK) {
        erg_gpu_reset_sm_clocks(g, dev, NULL);
        if (mem)
            erg_gpu_reset_mem_clocks(g, dev, NULL);
        erg_gpu_close(g);
    }
    _exit(0);
}

static void start_watchdog(erg_client *c)
{
    c->watchdog = -1;
    c->watchdog_fd = -1;
    if ((c->flags & ERG_CLIENT_NO_WATCHDOG) || (strcmp(erg_gpu_backend_name(c->gpu), "nvml") &&
                                                strcmp(erg_gpu_backend_name(c->gpu), "amdsmi")))
        return;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return;
    char spec[4200];
    snprintf(spec, sizeof spec, "%s", erg_gpu_open_spec(c->gpu));
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        close(fds[1]);
        setsid(); /* survive a terminal's SIGINT/SIGHUP aimed at the job */
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        watchdog_main(fds[0], spec, c->dev, c->mem_locked);
    }
    close(fds[0]);
    c->watchdog = pid;
    c->watchdog_fd = fds[1];
}

static void stop_watchdog(erg_client *c)
{
    if (c->watchdog_fd >= 0) {
        ssize_t w = write(c->watchdog_fd, "q", 1);
        (void)w;
        close(c->watchdog_fd);
        c->watchdog_fd = -1;
    }
    if (c->watchdog > 0) {
        int status;
        while (waitpid(c->watchdog, &status, 0) < 0 && errno == EINTR)
            ;
        c->watchdog = -1;
    }
}

/* ---- public API ---- */

erg_status erg_client_new(erg_gpu *gpu, int device, int rank, const char *log_dir,
                          unsigned flags, erg_client **out, erg_error *err)
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
    c->watchdog = -1;
    c->watchdog_fd = -1;
    c->sampling = !(flags & ERG_CLIENT_NO_ENERGY);
    pthread_mutex_init(&c->err_mu, NULL);
    pthread_mutex_init(&c->samples_mu, NULL);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    c->epoch_offset_s = ((double)rt.tv_sec + (double)rt.tv_nsec * 1e-9) - mono_s();
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
        sample_energy(c);
    start_watchdog(c);
    if (pthread_create(&c->thread, NULL, clock_thread, c) != 0) {
        st = erg_error_set(err, ERG_EINTERNAL, "cannot start the clock thread: %s",
                           strerror(errno));
        goto fail;
    }
    c->thread_started = true;
    if (!(flags & ERG_CLIENT_NO_SIGNALS))
        register_client(c);
    else {
        pthread_mutex_lock(&reg_mu);
        for (int i = 0; i < MAX_CLIENTS; i++)
            if (!registry[i]) {
                registry[i] = c;
                break;
            }
        pthread_mutex_unlock(&reg_mu);
    }
    *out = c;
    return ERG_OK;
fail:
    stop_watchdog(c);
    if (c->mem_locked)
        erg_gpu_reset_mem_clocks(gpu, device, NULL);
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
            erg_instr_kind kd = p ? v[k].kind2 : v[k].kind == ERG_OVERLAP_F_B ? ERG_FORWARD
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
        request_clock(c, freq_mhz);
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
    c->step_start_s = mono_s();
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
    double t = mono_s() - c->step_start_s;
    struct wait_list tmp = c->waits_last; /* the step's waits become the last step's */
    c->waits_last = c->waits_cur;
    c->waits_cur = tmp;
    c->waits_cur.n = 0;
    c->in_recv = false;
    c->pending_wait_s = 0;
    uint64_t mj = 0;
    double e = NAN;
    if (erg_gpu_energy_mj(c->gpu, c->dev, &mj, NULL) == ERG_OK && c->step_energy_mj)
        e = (double)erg_counter_delta(c->step_energy_mj, mj, 64) / 1000.0;
    if (time_s)
        *time_s = t;
    if (energy_j)
        *energy_j = e;
    return ERG_OK;
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
        request_clock(c, f);
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
    struct wait_list *wl = &c->waits_cur;
    if (wl->n == wl->cap) {
        size_t cap = wl->cap ? wl->cap * 2 : 64;
        signed char *k2 = erg__reallocarray(wl->kind, cap, 1);
        if (k2)
            wl->kind = k2;
        double *w2 = k2 ? erg__reallocarray(wl->wait_s, cap, sizeof(double)) : NULL;
        if (w2) {
            wl->wait_s = w2;
            wl->cap = cap;
        }
    }
    if (wl->n < wl->cap) {
        wl->kind[wl->n] = (signed char)kind;
        wl->wait_s[wl->n++] = c->pending_wait_s;
    }
    c->pending_wait_s = 0;
    c->cur = r;
    r->kind = (int)kind;
    r->microbatch = microbatch;
    r->freq_start = atomic_load_explicit(&c->active_clock, memory_order_relaxed);
    r->start_s = epoch_s(c);
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
    r->end_s = epoch_s(c);
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
    c->recv_start_s = mono_s();
    return ERG_OK;
}

erg_status erg_client_recv_end(erg_client *c, double *wait_s)
{
    if (!c)
        return ERG_EINVAL;
    if (!c->in_recv)
        return ERG_ESTATE;
    c->in_recv = false;
    double w = mono_s() - c->recv_start_s;
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
    const struct wait_list *wl = &c->waits_last;
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
    double end = mono_s() + timeout_s;
    /* Order matters: the consumer raises `busy` before it moves `head`. */
    while (atomic_load(&c->head) != atomic_load(&c->tail) || atomic_load(&c->overflow) ||
           atomic_load(&c->busy)) {
        if (mono_s() > end)
            return erg_error_set(err, ERG_ETIMEOUT,
                                 "GPU %d: clock changes still pending after %.3f s", c->dev,
                                 timeout_s);
        struct timespec ts = {0, POLL_NS};
        nanosleep(&ts, NULL);
    }
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
static erg_status copy_samples(erg_client *c, erg__energy_sample **out, size_t *n, erg_error *err)
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
        sample_energy(c);
    erg__buf b = {0};
    erg_status st = erg__buf_printf(&b, "instruction,microbatch,start,end,freq_start,freq_end\n");
    for (size_t i = 0; !st && i < nrecs; i++) {
        const erg__instr_rec *r = rec_at(c, i);
        st = erg__buf_printf(&b, "%s,%d,%.6f,%.6f,%d,%d\n",
                             erg_instr_kind_name((erg_instr_kind)r->kind), r->microbatch,
                             r->start_s, r->end_s, r->freq_start, r->freq_end);
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
    if ((st = copy_samples(c, &s, &n, err)))
        return st;
    erg__buf e = {0};
    st = erg__buf_printf(&e, "time,energy\n");
    for (size_t i = 0; !st && i < n; i++)
        st = erg__buf_printf(&e, "%.6f,%.3f\n", s[i].time_s, s[i].energy_j);
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
    if (c->thread_started) {
        atomic_store(&c->stop, 1);
        pthread_join(c->thread, NULL);
    }
    if (c->sampling)
        sample_energy(c); /* a last sample covers the last instruction */
    first = erg_client_clock_error(c, err);
    erg_error e;
    erg_status st = erg_gpu_reset_sm_clocks(c->gpu, c->dev, &e);
    if (st && !first) {
        first = st;
        if (err)
            *err = e;
    }
    if (c->mem_locked && (st = erg_gpu_reset_mem_clocks(c->gpu, c->dev, &e)) && !first) {
        first = st;
        if (err)
            *err = e;
    }
    st = erg_client_flush_logs(c, &e);
    if (st && !first) {
        first = st;
        if (err)
            *err = e;
    }
    stop_watchdog(c);
    if (!(c->flags & ERG_CLIENT_NO_SIGNALS))
        unregister_client(c);
    else {
        pthread_mutex_lock(&reg_mu);
        for (int i = 0; i < MAX_CLIENTS; i++)
            if (registry[i] == c)
                registry[i] = NULL;
        pthread_mutex_unlock(&reg_mu);
    }
    pthread_mutex_destroy(&c->err_mu);
    pthread_mutex_destroy(&c->samples_mu);
    erg__free(c->clocks);
    free_chunks(c);
    erg__free(c->samples);
    erg__free(c->log_dir);
    erg__free(c);
    return first;
}

/* ---- profiling mode ---- */

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
        return erg_error_set(err, ERG_EINVAL, "iterations per clock %d not in [1, 100000]",
                             iters);
    if (!(blocking_s >= 0 && blocking_s <= 3600))
        return erg_error_set(err, ERG_EINVAL, "blocking measurement %g s not in [0, 3600]",
                             blocking_s);
    if (c->in_step)
        return erg_error_set(err, ERG_ESTATE, "profiling must start outside an iteration");
    if (!c->sampling)
        return erg_error_set(err, ERG_ESTATE, "profiling needs energy sampling (client created "
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
        st = erg_error_set(err, ERG_EINVAL, "no supported clock at or above %d MHz",
                           min_freq_mhz);
        goto out;
    }
    if ((st = erg_profile_new(&p, err)))
        goto out;
    /* Early stop: energy of an iteration went up five times in a row once
     * past the first third of the clock list (control-plane-spec 2.4). */
    double prev_e = NAN;
    int ups = 0;
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
        sample_energy(c);
        size_t ns = 0;
        erg__free(samples);
        samples = NULL;
        if ((st = copy_samples(c, &samples, &ns, err)))
            goto out;
        /* No warm-up drop inside the window: the window's warm-up ran above. */
        size_t nrec = atomic_load(&c->nrecs) - first_rec;
        erg__instr_rec *recs = erg__malloc((nrec ? nrec : 1) * sizeof *recs);
        if (!recs) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto out;
        }
        for (size_t k = 0; k < nrec; k++) {
            recs[k] = *rec_at(c, first_rec + k);
            if (recs[k].freq_start != clocks[i] || recs[k].freq_end != clocks[i])
                recs[k].freq_start = 0; /* not at the swept clock: excluded */
        }
        st = erg__aggregate_stage(p, stage, recs, nrec, samples, ns, false, "profiling", err);
        erg__free(recs);
        if (st)
            goto out;
        double e_mean = ecount ? esum / ecount : NAN;
        bool stop = erg__profile_early_stop(&ups, prev_e, e_mean, i, nuse);
        prev_e = e_mean;
        if (stop)
            break;
    }
    if ((st = erg_client_set_uniform_clock(c, 0, err)))
        goto out;
    request_clock(c, 0);
    if ((st = erg_client_sync(c, 30.0, err)))
        goto out;
    if (blocking_power_w)
        *blocking_power_w = NAN;
    if (blocking_s > 0) {
        erg_gpu_sim_set_activity(c->gpu, c->dev, false, ERG_FORWARD, NULL, NULL);
        uint64_t e0, e1;
        if ((st = erg_gpu_energy_mj(c->gpu, c->dev, &e0, err)))
            goto out;
        double t0 = mono_s();
        struct timespec ts = {(time_t)blocking_s,
                              (long)((blocking_s - floor(blocking_s)) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        if ((st = erg_gpu_energy_mj(c->gpu, c->dev, &e1, err)))
            goto out;
        double dt = mono_s() - t0;
        if (blocking_power_w && dt > 0)
            *blocking_power_w = (double)erg_counter_delta(e0, e1, 64) / 1000.0 / dt;
    }
    *out = p;
    p = NULL;
    goto out;
fn_failed:
    if (err && err->status != st)
        erg_error_set(err, st, "profiling: the iteration callback failed: %s",
                      erg_strerror(st));
out:
    erg__free(samples);
    erg__free(clocks);
    erg_profile_free(p);
    return st;
}
