/* client.h: the run-time client a training loop calls: per-instruction clocks, measurement, logs.
 */
#ifndef ERGON_CLIENT_H
#define ERGON_CLIENT_H

#include "ergon/ergon.h"
#include "ergon/gpu.h"
#include "ergon/plan.h"
#include "ergon/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One training rank's client: applies a plan's clocks on one GPU while the
 * training loop runs, measures, writes logs, and restores the GPU.
 *
 * Threads: the training thread calls the step/instruction hooks; a clock
 * thread owned by the client receives clock changes through a lock-free
 * single-producer queue and makes the (slow) GPU calls, and samples the
 * energy counter. The instruction hooks never touch the GPU; the step hooks
 * read the energy counter once each (a fast NVML read, or a request to
 * ergond through the daemon back-end). All hooks of one client must be
 * called from one thread at a time. */
typedef struct erg_client erg_client;

/* Flags of erg_client_new. */
#define ERG_CLIENT_NO_SIGNALS 1u /* Do not install SIGINT/SIGTERM/SIGHUP handlers. */
#define ERG_CLIENT_NO_WATCHDOG                                                                     \
    2u                          /* Do not start the ergon-watchdog program that restores           \
                                   clocks if the process dies hard (SIGKILL, crash). */
#define ERG_CLIENT_NO_ENERGY 4u /* Do not sample the energy counter. */
#define ERG_CLIENT_LOCK_MEMORY                                                                     \
    8u /* Lock the memory clock at its maximum while the client                                    \
          lives, as Perseus does in frequency mode (ignored                                        \
          where the GPU cannot, e.g. before Ampere); it is                                         \
          reset with the SM clock. */
#define ERG_CLIENT_WAIT_CLOCK                                                                      \
    16u /* erg_client_instruction_begin returns once the instruction's clock is in effect          \
           (it waits, up to 10 s, for the clock thread as erg_client_sync does): the               \
           instruction then runs at its clock from its first moment, and the log records           \
           that clock (freq_run). For the simulated GPU and tests; on a real GPU it stalls         \
           the training thread for every clock change (10-20 ms through NVML). */

/* Create a client for device `device` of `gpu` (borrowed: it must outlive
 * the client) as pipeline rank `rank` (= stage). log_dir (may be NULL)
 * receives instructions-<rank>.csv and time-energy-<rank>.csv at
 * erg_client_close / erg_client_flush_logs.
 * Unless flags say otherwise, installs SIGINT/SIGTERM/SIGHUP handlers that reset
 * the clocks and then pass the signal on to the handler the program had before
 * (Python's KeyboardInterrupt) or to the default action; and starts the
 * ergon-watchdog program (found through $ERGON_WATCHDOG, next to libergon, the
 * install path, then PATH), which resets the GPU when this process dies without
 * closing the client (NVML back-end only: the simulated GPU dies with the
 * process, ergond's lease covers the daemon back-end). A watchdog that cannot
 * start is an error: ERG_ENOTFOUND (no program), ERG_ENOGPU, ERG_ETIMEOUT (it did
 * not open the GPU library within 30 s). docs/runtime.md, "Restoring the GPU". */
ERG_API erg_status erg_client_new(erg_gpu *gpu, int device, int rank, const char *log_dir,
                                  unsigned flags, erg_client **out, erg_error *err);

/* Use stage `stage` of `plan` (copied): instruction (kind, microbatch) runs
 * at the plan's clock. Fails if a planned clock is not supported. */
ERG_API erg_status erg_client_set_plan(erg_client *c, const erg_plan *plan, int stage,
                                       erg_error *err);
/* Read a plan file (JSON or freqs_pipeline .py, see plan.h) and use it. */
ERG_API erg_status erg_client_load_plan(erg_client *c, const char *path, int stage, erg_error *err);
/* Run every instruction at one clock (0 = leave the clocks alone). Used by
 * profiling mode. Requests the clock at once. */
ERG_API erg_status erg_client_set_uniform_clock(erg_client *c, int freq_mhz, erg_error *err);

/* Training-loop hooks. ERG_EINVAL for a microbatch outside the plan,
 * ERG_ESTATE for calls out of order (begin without end). */
ERG_API erg_status erg_client_step_begin(erg_client *c);
/* Ends the iteration; time_s / energy_j (may be NULL) receive its wall time
 * and GPU energy. */
ERG_API erg_status erg_client_step_end(erg_client *c, double *time_s, double *energy_j);
/* Where the energies of the steps ended since the last reset came from: "counter" (the
 * GPU's energy counter), "integrated" (power integrated by ergon, the counter not trusted),
 * "model" (the simulated GPU), "mixed" (steps differ) or "" (no step energy). reset starts
 * a new set (a server window: erg_srv_result_set_energy_source takes the word). A static
 * string. */
ERG_API const char *erg_client_energy_source(erg_client *c, bool reset);
ERG_API erg_status erg_client_instruction_begin(erg_client *c, erg_instr_kind kind, int microbatch);
ERG_API erg_status erg_client_instruction_end(erg_client *c, erg_instr_kind kind, int microbatch);
/* The same for multi-chunk and zero-bubble schedules: kind F, B, I or W (an
 * OVERLAP_F_B step calls begin/end for each of its parts, which share one
 * clock), chunk = the position of the pipeline stage among this rank's
 * stages in ascending order (PyTorch's local stage order: loop placement
 * stage rank + P*chunk; V shape: stage r is chunk 0, 2P-1-r chunk 1). The
 * plain hooks are chunk 0. The logs keep kind and microbatch; profiles from
 * logs use only F and B records. */
ERG_API erg_status erg_client_instruction_begin_chunk(erg_client *c, erg_instr_kind kind, int chunk,
                                                      int microbatch);
ERG_API erg_status erg_client_instruction_end_chunk(erg_client *c, erg_instr_kind kind, int chunk,
                                                    int microbatch);

/* Receive waits (EnvPipe's measurement, docs/envpipe.md, from the host clock): call
 * erg_client_recv_begin right before a blocking receive and erg_client_recv_end right
 * after it (the data has arrived); the time between them (*wait_s, may be NULL) is
 * charged to the NEXT instruction this client begins, the one that consumes the data.
 * Several receives before one instruction add up; a receive pending at step_end is
 * dropped. erg_client_add_wait charges a wait measured another way (CUDA events) the same
 * way. ERG_ESTATE for recv_begin twice or recv_end without begin; ERG_EINVAL for a
 * negative or non-finite wait. Cheap: no system call besides the clock read. */
ERG_API erg_status erg_client_recv_begin(erg_client *c);
ERG_API erg_status erg_client_recv_end(erg_client *c, double *wait_s);
ERG_API erg_status erg_client_add_wait(erg_client *c, double wait_s);
/* The receive waits of the last finished step (step_begin .. step_end): the wait charged
 * to each instruction of `kind`, in the order they began (0 for one without a receive).
 * Writes at most cap values to wait_s (may be NULL when cap is 0); *n gets the count,
 * which may exceed cap. These are the "wait_breakdown" series of a server result
 * (server_client.h erg_srv_result_add_wait). */
ERG_API erg_status erg_client_step_waits(const erg_client *c, erg_instr_kind kind, double *wait_s,
                                         size_t cap, size_t *n);

/* Wait (up to timeout_s) until every requested clock has been applied.
 * ERG_ETIMEOUT otherwise. Returns the clock thread's first error if it had
 * one (for example ERG_EPERM without privilege). Called from the hooks' thread
 * between instruction_begin and _end, the first sync that does not time out records
 * the clock then in effect as the clock the instruction ran at (the log's freq_run). */
ERG_API erg_status erg_client_sync(erg_client *c, double timeout_s, erg_error *err);
/* The SM clock the clock thread last applied (0 = none / reset). */
ERG_API int erg_client_active_clock(const erg_client *c);
/* Number of clock changes sent to the GPU so far. */
ERG_API uint64_t erg_client_clock_changes(const erg_client *c);
/* First error of the clock thread (ERG_OK if none), with its message. */
ERG_API erg_status erg_client_clock_error(const erg_client *c, erg_error *err);

/* Write the logs now (they are rewritten on each call). */
ERG_API erg_status erg_client_flush_logs(erg_client *c, erg_error *err);
/* Stop the clock thread, reset the GPU's clocks, write the logs, free.
 * NULL is a no-op. Returns the first error (the client is freed anyway). */
ERG_API erg_status erg_client_close(erg_client *c, erg_error *err);

/* Turn a log directory written by clients (instructions-<rank>.csv +
 * time-energy-<rank>.csv for ranks 0..S-1) into a stage profile: per
 * (stage, instruction, clock) the mean time and energy, energy from the
 * piecewise-linear cumulative energy curve. Only records whose clock was the
 * same at their start and end count, labelled with that clock; the first
 * 10% (rounded down) of each group are dropped as warm-up. num_stages 0 =
 * every rank found. Errors name the file and line. */
ERG_API erg_status erg_profile_from_logs(const char *dir, int num_stages, erg_profile **out,
                                         erg_error *err);

/* Profiling mode (docs/runtime.md): sweep the SM clock from
 * the highest supported down to min_freq_mhz, running `iters` iterations at
 * each through `run_iteration` (which calls the hooks of `c`), stop early once
 * iteration energy went up five times in a row past the first third of the
 * clocks (and always at min_freq_mhz), then measure the blocking power: the
 * mean power over blocking_s seconds while the training thread sleeps, with
 * the clocks reset (on the simulated GPU the device is marked blocked; on a
 * real one the caller should run this while its peer holds a P2P receive
 * or the GPU is otherwise idle; blocking_s 0 skips it, *blocking_power_w is
 * then NAN). The first iteration at each clock is a warm-up and is not
 * measured. The result is this rank's profile (stage `stage`); the clocks are
 * reset afterwards. */
typedef erg_status (*erg_iteration_fn)(void *user, erg_client *c);
ERG_API erg_status erg_client_profile(erg_client *c, int stage, int min_freq_mhz, int iters,
                                      erg_iteration_fn run_iteration, void *user, double blocking_s,
                                      erg_profile **out, double *blocking_power_w, erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
