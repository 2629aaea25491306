/* pipeline.h: pipeline schedules (per-stage instruction orders) and the
 * instruction DAG they induce, with critical-path (CPM) analysis. */
#ifndef ERGON_PIPELINE_H
#define ERGON_PIPELINE_H

#include "ergon/ergon.h"
#include "ergon/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum erg_schedule_kind {
    ERG_SCHED_1F1B = 0,  /* DeepSpeed-style synchronous 1F1B (warm-up of S-s forwards). */
    ERG_SCHED_GPIPE = 1, /* All forwards, then all backwards, microbatch order. */
    ERG_SCHED_ENVPIPE = 2, /* EnvPipe's "ours": extra warm-up forwards (envpipe-spec). */
} erg_schedule_kind;

/* A schedule: its kind plus the options some kinds take. Zero-initialise and
 * set `kind`; zero options mean the kind's defaults. */
/* Stages whose extra warm-up count an ERG_SCHED_ENVPIPE schedule can carry;
 * stages beyond this run plain 1F1B warm-up. */
#define ERG_SCHED_MAX_STAGES 64

typedef struct erg_schedule {
    erg_schedule_kind kind;
    int max_inflight; /* ERG_SCHED_ENVPIPE: cap on forwards in flight per stage
                         (activation memory); 0 = no cap. Never cuts below the
                         1F1B warm-up of S-s forwards. */
    /* ERG_SCHED_ENVPIPE: r_s, the extra warm-up forwards of stage s
     * (envpipe-spec §5.2/§5.4). Stage s runs k_s = min(M, S-s+r_s) forwards
     * before its first backward. All zero = the 1F1B order. The EnvPipe planner
     * (envpipe.h) computes them from a profile. Must give k_s >= k_{s+1}
     * (otherwise the orders deadlock) and be >= 0. */
    int extra_warmup[ERG_SCHED_MAX_STAGES];
} erg_schedule;

/* One instruction of a stage: a forward or backward of one microbatch. */
typedef struct erg_instr {
    erg_instr_kind kind;
    int microbatch; /* 0-based */
} erg_instr;

/* "1f1b", "gpipe", "ours"/"envpipe" -> kind; ERG_EINVAL otherwise. */
ERG_API erg_status erg_schedule_parse(const char *name, erg_schedule_kind *out, erg_error *err);
ERG_API const char *erg_schedule_name(erg_schedule_kind kind);

/* The execution order of `stage` (0-based) of S stages with M microbatches:
 * writes exactly 2*M instructions to out. */
ERG_API erg_status erg_schedule_stage_order(const erg_schedule *sched, int num_stages,
                                            int num_microbatches, int stage, erg_instr *out,
                                            erg_error *err);

/* The instruction DAG (activity on node). Instruction ids are
 * stage * 2M + position in the stage's order. Edges: same-stage chain,
 * F(s,m) -> F(s+1,m), B(s+1,m) -> B(s,m). Immutable once built; may be shared
 * between threads. */
typedef struct erg_dag erg_dag;

ERG_API erg_status erg_dag_new(const erg_schedule *sched, int num_stages, int num_microbatches,
                               erg_dag **out, erg_error *err);
ERG_API void erg_dag_free(erg_dag *dag);
ERG_API int erg_dag_num_stages(const erg_dag *dag);
ERG_API int erg_dag_num_microbatches(const erg_dag *dag);
/* 2 * S * M. */
ERG_API int erg_dag_num_instrs(const erg_dag *dag);
/* The instruction with this id, and its stage. */
ERG_API erg_instr erg_dag_instr(const erg_dag *dag, int id, int *stage);
/* The id of (stage, kind, microbatch), or -1 when out of range. */
ERG_API int erg_dag_instr_id(const erg_dag *dag, int stage, erg_instr_kind kind, int microbatch);
/* Successors of an instruction: same-stage next first, then the cross-stage
 * one. Returns the count; *succ points into the DAG. */
ERG_API int erg_dag_successors(const erg_dag *dag, int id, const int **succ);
ERG_API int erg_dag_predecessors(const erg_dag *dag, int id, const int **pred);
/* A topological order of all instructions (num_instrs ids). */
ERG_API const int *erg_dag_topo_order(const erg_dag *dag);

/* Critical-path analysis with real-valued durations (seconds or any unit):
 * earliest start es[i], latest finish lf[i] (each num_instrs long, may be NULL)
 * and the makespan. An instruction is critical when lf - es - dur == 0 (up to
 * rounding). */
ERG_API erg_status erg_dag_cpm(const erg_dag *dag, const double *dur, double *es, double *lf,
                               double *makespan, erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
