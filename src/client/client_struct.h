/* client_struct.h: the erg_client struct and what the client's files share (core, clock
 * queue, signals, watchdog, profiling sweep). Private to src/client/. */
#ifndef ERGON_CLIENT_STRUCT_H
#define ERGON_CLIENT_STRUCT_H

#include "client/client_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#define ERG__QCAP 1024u            /* clock requests in the ring */
#define ERG__REC_CHUNK 1024u       /* instruction records per chunk */
#define ERG__REC_MAX_CHUNKS 65536u /* chunks at most (64 Mi records) */
#define ERG__POLL_NS 100000L       /* the clock thread's sleep between empty polls */

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

    /* the clock queue (clock_queue.c) */
    struct {
        uint64_t seq; /* request number, increasing */
        int freq;     /* MHz, 0 = reset */
    } ring[ERG__QCAP];
    _Atomic size_t head, tail;
    _Atomic uint64_t overflow;  /* seq << 20 | (freq + 1); 0 = empty */
    int last_req;               /* producer-side dedupe */
    unsigned seen_reset_gen;    /* producer: reset_gen when last_req was set */
    _Atomic unsigned reset_gen; /* consumer: bumped when it resets the GPU behind the
                                   producer's back (a signal): last_req is then stale */
    uint64_t next_seq;          /* producer: number of the next request */
    uint64_t applied_seq;       /* consumer: newest request applied (or superseded) */
    _Atomic uint64_t requested;
    _Atomic int busy; /* the consumer has taken requests it has not applied yet */
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
    unsigned step_sources;           /* sources of the step energies since the last query (bits) */
    erg__instr_rec **chunks;         /* REC_MAX_CHUNKS slots, filled as needed, never moved */
    _Atomic size_t nrecs;            /* committed records (release-stored by the producer) */
    _Atomic(erg__instr_rec *) spare; /* a chunk the clock thread allocated in advance */
    erg__instr_rec *cur;             /* the open instruction's record */
    erg__instr_rec scratch;          /* where records go once the store is full */
    uint64_t dropped;                /* records not stored (store full / no memory) */
    bool mem_locked;                 /* we locked the memory clock (ERG_CLIENT_LOCK_MEMORY) */
    pthread_mutex_t samples_mu;
    erg__energy_sample *samples;
    size_t nsamples, cap_samples;
    bool sampling;

    /* receive waits: charged to the next instruction; per step (kind, wait) lists */
    bool in_recv;
    double recv_start_s, pending_wait_s;
    struct erg__wait_list {
        signed char *kind;
        double *wait_s;
        size_t n, cap;
    } waits_cur, waits_last;

    /* signals (signals.c): the last signal episode this client restored its GPU for */
    _Atomic unsigned long sig_handled;
    bool sig_registered;

    /* watchdog (watchdog.c) */
    pid_t owner_pid;     /* the process that created the client (a forked child is not it) */
    pid_t watchdog_pid;  /* -1 = none */
    int watchdog_fd;     /* our end of the control socket, -1 = none */
    bool watchdog_dirty; /* what the watchdog was last told: a clock may be set */
};

/* ---- clock_queue.c ---- */
double erg__client_mono_s(void);
static inline double erg__client_epoch_s(const erg_client *c)
{
    return erg__client_mono_s() + c->epoch_offset_s;
}
static inline erg__instr_rec *erg__client_rec_at(erg_client *c, size_t i)
{
    return &c->chunks[i / ERG__REC_CHUNK][i % ERG__REC_CHUNK];
}
/* Producer side: queue a clock change (0 = reset) unless it repeats the last one (a reset
 * behind the producer's back, reset_gen, forgets the last one). */
void erg__client_request_clock(erg_client *c, int freq_mhz);
/* The clock thread's body (arg: the client). */
void *erg__client_clock_thread(void *arg);
/* One energy counter sample into c->samples (skipped when the counter did not move). */
void erg__client_sample_energy(erg_client *c);

/* ---- client.c ---- */
/* A copy of the energy samples (erg__malloc'd). */
erg_status erg__client_copy_samples(erg_client *c, erg__energy_sample **out, size_t *n,
                                    erg_error *err);

/* ---- signals.c ---- */
/* Take part in SIGINT/SIGTERM/SIGHUP handling (installs the handlers with the first
 * client). ERG_ENOTSUP when too many clients already take part. */
erg_status erg__client_signals_register(erg_client *c, erg_error *err);
/* Leave it (uninstalls the handlers with the last client); passes on a signal that every
 * remaining client has restored for. */
void erg__client_signals_unregister(erg_client *c);
/* From the clock thread on each poll: if a signal came that this client has not restored
 * for, reset its GPU, write its logs, and when every client has, pass the signal on. */
void erg__client_signals_poll(erg_client *c);

/* ---- watchdog.c ---- */
/* Start this client's watchdog process (NVML back-end, unless ERG_CLIENT_NO_WATCHDOG) and
 * wait until it has opened the GPU library. */
erg_status erg__watchdog_start(erg_client *c, erg_error *err);
/* Tell the watchdog whether a clock may be set (dirty) or the GPU is at its defaults;
 * sends a byte only when that changes. Clock thread (or before it starts / after it
 * ended). */
void erg__watchdog_note(erg_client *c, bool dirty);
/* The client closes: `clean` (its clocks were reset) lets the watchdog exit without a
 * reset, otherwise it resets first. Waits for it to exit. */
void erg__watchdog_stop(erg_client *c, bool clean);

#endif
