/* server_internal.h: private types shared by the control-plane server's files. */
#ifndef ERGON_SERVER_INTERNAL_H
#define ERGON_SERVER_INTERNAL_H

#include "core/internal.h"
#include "ergon/profile.h"
#include "ergon/server.h"

#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>

/* ---- Perseus wire enums ---- */
enum {
    SRV_I_LOAD,
    SRV_I_FORWARD,
    SRV_I_BACKWARD,
    SRV_I_P2P,
    SRV_I_CC,
    SRV_I_STEP,
    SRV_I_LOW,
    SRV_I_HIGH,
    SRV_I_OTHER,
    SRV_I_PURE_BACKWARD,
    /* ergon's zero-bubble / DualPipeV instruction kinds, by erg_instr_kind_name
     * (appended: the Perseus codes above keep their values). */
    SRV_I_BACKWARD_INPUT,
    SRV_I_BACKWARD_WEIGHT,
    SRV_I_OVERLAP_F_B,
    SRV_NUM_INSTR
};
extern const char *const erg__srv_instr_names[SRV_NUM_INSTR];
int erg__srv_instr_code(const char *name); /* -1 when unknown */
/* Whether an instruction is one a plan gives a clock: forward, backward,
 * backward_input, backward_weight, overlap_f_b. */
int erg__srv_instr_is_compute(int code);

enum { SRV_MODE_FREQUENCY = 0, SRV_MODE_POWER = 1, SRV_MODE_ANY = -1 };
const char *erg__srv_mode_name(int mode);
/* The integer field k of a request object, within [lo, hi]; false with the
 * reason ("field k is missing", "... must be an integer", "... out of range")
 * in why. Shared by the wire protocols. */
bool erg__srv_json_get_int(const json_t *o, const char *k, long lo, long hi, long *out, char *why,
                           size_t wn);

/* ---- JobInfo records (docs/http-api.md, "Job record") ----
 * A registration body is at most SRV_JOBINFO_MAX_BYTES (413 before it is parsed, so a
 * registration never parses more), and the fields ergon does not use are kept in the job
 * record only up to SRV_JOBINFO_UNKNOWN_MAX_BYTES of compact JSON in all: a job holds a
 * bounded record in memory and in SQLite whatever its client sent. */
#define SRV_JOBINFO_MAX_BYTES 65536
#define SRV_JOBINFO_UNKNOWN_MAX_BYTES 4096
/* Copy into rec the fields of in that rec lacks and that are not named in skip (NULL-ended,
 * may be NULL), in order, while their compact JSON (key and value) stays within
 * SRV_JOBINFO_UNKNOWN_MAX_BYTES in all. Returns how many were dropped; their names, quoted
 * and with their sizes, go to dropped (truncated to dn). */
int erg__srv_jobinfo_add_unknown(json_t *rec, const json_t *in, const char *const *skip,
                                 char *dropped, size_t dn);

/* ---- Python-compatible JSON text (json.dumps defaults: ", " and ": ",
 * floats as repr(), ensure_ascii) ---- */
erg_status erg__srv_json_py(const json_t *v, erg__buf *out);
/* Maximum nesting depth of a JSON text (strings skipped); for cheap
 * rejection before parsing. */
int erg__srv_json_depth(const char *s, size_t len);

/* ---- a measurement of one window by one rank or (aggregated) stage ---- */
typedef struct srv_series {
    int n_iters;   /* Iterations with samples. */
    int *n_occ;    /* Samples per iteration. */
    double **vals; /* vals[i][k]. */
} srv_series;

typedef struct srv_result {
    int n_iters;
    double *iter_time_s;
    double *iter_energy_j;
    srv_series time_bd[SRV_NUM_INSTR];
    srv_series energy_bd[SRV_NUM_INSTR];
    /* ergon /v1 extension "wait_breakdown": per instruction kind, per
     * iteration, the time the rank waited in the receive before each
     * occurrence (s); empty when the client sent none (EnvPipe scheduler). */
    srv_series wait_bd[SRV_NUM_INSTR];
} srv_result;

/* Validate a ProfilingResult object (already normalised) into r. */
erg_status erg__srv_result_from_json(const json_t *obj, srv_result *r, erg_error *err);
void erg__srv_result_free(srv_result *r);
erg_status erg__srv_result_copy(const srv_result *in, srv_result *out);
/* 3D aggregation: max of times and waits, sum of energies, element-wise over the common shape. */
erg_status erg__srv_result_aggregate(const srv_result *const *in, int n, srv_result *out,
                                     erg_error *err);
/* Mean of the samples of iterations [drop, n) of one series; NAN when empty. */
double erg__srv_series_mean(const srv_series *s, int drop);
double erg__srv_mean(const double *v, int from, int to);

/* ---- schedulers (sched.c dispatches to a file per family: sched_ops.h) ---- */
typedef struct srv_sched_ctx {
    int num_stages;
    int *n_instrs; /* Per stage: length of its pipe_schedule. */
    int **instrs;  /* Per stage: instruction codes. */
    int *states;   /* Supported power states, descending. */
    int n_states;
    int mode;               /* SRV_MODE_FREQUENCY / SRV_MODE_POWER. */
    char *job_dir;          /* Dump directory of the job, or NULL when not dumping. */
    char *profile_csv_name; /* InstructionProfiler's CSV file name. */
    /* Writes a file of the job's dump directory (the server defers it when the
     * disk refuses; it never fails the job). NULL: written directly. */
    erg_status (*write_file)(void *user, const char *name, const char *data, size_t len,
                             erg_error *err);
    void *write_user;
} srv_sched_ctx;

typedef struct srv_sched srv_sched;

typedef struct srv_sched_class {
    const char *name;
    int fixed_mode; /* SRV_MODE_ANY when knob-agnostic. */
    bool targets;   /* Takes straggler targets (erg__srv_sched_set_target). */
} srv_sched_class;

/* Look up a scheduler class by name (NULL when unknown). */
const srv_sched_class *erg__srv_sched_find(const char *name);
/* Check the arguments of a scheduler before any job exists (names, types,
 * files that must exist). */
erg_status erg__srv_sched_check_args(const char *name, const json_t *args, erg_error *err);
erg_status erg__srv_sched_new(const char *name, const json_t *args, const srv_sched_ctx *ctx,
                              srv_sched **out, erg_error *err);
void erg__srv_sched_free(srv_sched *s);
/* The schedule of the next window: per stage one power state per
 * instruction (arrays owned by the scheduler until the next call), or
 * *done = true when the scheduler has finished. */
erg_status erg__srv_sched_next(srv_sched *s, int ***per_stage, bool *done, erg_error *err);
/* Results of the window last returned by erg__srv_sched_next, one per stage. */
erg_status erg__srv_sched_observe(srv_sched *s, const srv_result *per_stage, erg_error *err);
/* Whether v is one of the job's power states. */
bool erg__srv_state_supported(const srv_sched_ctx *c, int v);
/* Warm-up iterations dropped from a window of n: max(1, floor(n * ratio)). */
int erg__srv_drop_of(int n, double ratio);
/* Mean power (energy / time) of iterations [drop, n) of r; NAN when none. */
double erg__srv_iter_power(const srv_result *r, int drop);

/* Frontier: set the straggler target (kind 0 none, 1 slowdown, 2 deadline_s). */
void erg__srv_sched_set_target(srv_sched *s, int kind, double value);
/* Frontier: the plan index used by the last schedule (-1 when none). */
long erg__srv_sched_choice(const srv_sched *s);
/* Plan -> per-instruction expansion (docs/http-api.md, Schedulers). */
erg_status erg__srv_expand(const int *plan, int n_plan, const int *instrs, int n_instrs, int *out,
                           erg_error *err);

/* Parse a plan file in either literal format (kronos: lists of ints; master:
 * lists of ("forward"|"backward", int) pairs) or our JSON: per stage the
 * clocks of its compute instructions in order. */
erg_status erg__srv_plan_load(const char *path, int ***stages, int **lens, int *n_stages,
                              erg_error *err);
void erg__srv_plan_stages_free(int **stages, int *lens, int n);

/* A plan as (instruction name, clock) pairs per stage: the Zeus format as
 * written, or a kronos/JSON plan whose stages' forward/backward names come
 * from the 1F1B order of its stage and microbatch counts. */
typedef struct srv_plan_pairs {
    int n_stages;
    int *lens;     /* pairs per stage */
    char ***names; /* names[s][i] */
    int **freqs;   /* freqs[s][i] */
} srv_plan_pairs;
erg_status erg__srv_plan_load_pairs(const char *path, int hint_stages, srv_plan_pairs *out,
                                    erg_error *err);
void erg__srv_plan_pairs_free(srv_plan_pairs *p);

#endif
