/* sched_ops.h: what the server's scheduler files share (private to sched*.c): the scheduler
 * object, the ops table every scheduler class fills, and the helpers the families use.
 *
 * sched.c is the dispatcher: the class table (name, mode, ops), the argument checks and
 * erg__srv_sched_new/next/observe/free, which call through the ops. One file per family:
 *   sched_fixed.c     AllMax, TwoFrequencies, PointSolution and Zeus's PointSolution
 *   sched_profiler.c  InstructionProfiler (Perseus's and Zeus's); its sparse mode is
 *                     sched_sparse.c
 *   sched_zeus.c      the Zeus baselines: ZeusGlobalPowerLimit, ZeusLocalPowerState
 *   sched_frontier.c  Frontier: the Perseus frontier's plan for a slowdown or deadline
 *   sched_envpipe.c   EnvPipe online
 *
 * Every scheduler works on STAGES, never on ranks: the server groups a job's ranks by pp_rank
 * (the "3D wrapper" of the reference), hands one aggregated result per stage to observe (max of
 * times, sum of energies) and copies stage s's schedule to every rank with pp_rank == s. For
 * pure pipeline parallelism a stage is exactly one rank, so this is the reference's plain
 * behaviour.
 *
 * The reference's generator schedulers become explicit state machines: each next call fills
 * the schedule of the next window (or says "done", the [profiling-done] ending), each observe
 * receives that window's results. Schedulers are deterministic functions of their arguments
 * and the results they observed, which is what makes crash recovery a replay (see jobs.h). */
#ifndef ERGON_SERVER_SCHED_OPS_H
#define ERGON_SERVER_SCHED_OPS_H

#include "server/server_internal.h"

/* An argument a scheduler accepts: name, type ('i' int, 'd' number, 's' string, 'b' bool),
 * required. */
typedef struct srv_sched_arg {
    const char *name;
    char type;
    bool required;
} srv_sched_arg;

typedef struct srv_sched_ops {
    const srv_sched_arg *args; /* The arguments it takes (names and types checked by sched.c). */
    size_t n_args;
    /* Values of the arguments and files they name, before any job exists (may be NULL). */
    erg_status (*check)(const json_t *args, erg_error *err);
    /* Build the family's state (s->state) for s->ctx; s->out is allocated. */
    erg_status (*init)(srv_sched *s, const json_t *args, erg_error *err);
    /* Fill s->out with the schedule of window s->step, or set *done. */
    erg_status (*next)(srv_sched *s, bool *done, erg_error *err);
    /* Results of the window last handed out (s->step - 1), one per stage. */
    erg_status (*observe)(srv_sched *s, const srv_result *per_stage, erg_error *err);
    void (*free)(void *state);
    /* Straggler target (kind 1 slowdown, 2 deadline_s); NULL when the class takes none. */
    void (*set_target)(srv_sched *s, int kind, double value);
} srv_sched_ops;

struct srv_sched {
    const srv_sched_ops *ops;
    const srv_sched_ctx *ctx;
    int **out;   /* Per-stage output buffers (n_instrs + 1 each). */
    long step;   /* Windows handed out so far. */
    bool done;   /* Finished: every later next says done. */
    long choice; /* Frontier: the plan index of the last window (-1). */
    void *state; /* The family's. */
};

/* The ops of every class (sched.c's table names them). */
extern const srv_sched_ops erg__srv_sched_allmax, erg__srv_sched_twofreq, erg__srv_sched_point,
    erg__srv_sched_zeus_point, erg__srv_sched_profiler, erg__srv_sched_zeus_profiler,
    erg__srv_sched_zeus_global, erg__srv_sched_zeus_local, erg__srv_sched_frontier,
    erg__srv_sched_envpipe;

/* ---- helpers ---- */
static inline double srv_arg_d(const json_t *args, const char *k, double dflt)
{
    const json_t *v = json_object_get(args, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static inline long srv_arg_i(const json_t *args, const char *k, long dflt)
{
    const json_t *v = json_object_get(args, k);
    return json_is_integer(v) ? (long)json_integer_value(v) : dflt;
}

static inline const char *srv_arg_s(const json_t *args, const char *k, const char *dflt)
{
    const json_t *v = json_object_get(args, k);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

bool erg__srv_is_dir(const char *path);
bool erg__srv_is_file(const char *path);
/* Every instruction of every stage at clock v. */
void erg__srv_sched_uniform(srv_sched *s, int v);
/* The job's highest power state. */
static inline int srv_sched_max_state(const srv_sched *s)
{
    return s->ctx->states[0];
}
/* Write a file of the job's dump directory (nothing when not dumping; through
 * ctx->write_file when set). */
erg_status erg__srv_sched_write_file(const srv_sched_ctx *c, const char *name, const char *data,
                                     size_t len, erg_error *err);

/* ---- the InstructionProfiler's sparse mode (sched_sparse.c; EnvPipe uses it too) ---- */
typedef struct srv_sparse_prof srv_sparse_prof;
/* Arguments that only sparse profiling takes, and their ranges. */
erg_status erg__srv_sparse_prof_check_args(const json_t *args, erg_error *err);
erg_status erg__srv_sparse_prof_new(const srv_sched_ctx *ctx, const json_t *args, int min_state,
                                    double ratio, bool energy_from_iters, srv_sparse_prof **out,
                                    erg_error *err);
void erg__srv_sparse_prof_free(srv_sparse_prof *p);
/* Fill out[stage][instruction] with the next window's clocks, or *done. */
void erg__srv_sparse_prof_next(srv_sparse_prof *p, int **out, bool *done);
/* Results of the window last handed out. */
erg_status erg__srv_sparse_prof_observe(srv_sparse_prof *p, const srv_result *r, erg_error *err);
/* Whether every (stage, instruction) has its maximum clock measured (the
 * prediction below needs it). */
bool erg__srv_sparse_prof_ready(const srv_sparse_prof *p);
/* The predicted full profile as CSV with the `source` column (erg_free). */
erg_status erg__srv_sparse_prof_csv(const srv_sparse_prof *p, char **text, size_t *len,
                                    erg_error *err);
erg_status erg__srv_sparse_prof_profile(const srv_sparse_prof *p, erg_profile **out,
                                        erg_error *err);
/* A JSON summary: points measured against the full sweep, windows. */
erg_status erg__srv_sparse_prof_summary(const srv_sparse_prof *p, erg__buf *out);

#endif
