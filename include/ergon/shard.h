/* shard.h: the intra-operator parallelism planner (CFP): HLO text in, ParallelBlocks and
 * repeated segments, per-block strategy costs, a DP (and an ILP baseline) search, and the
 * plan written back as sharding={...} annotations. See docs/shard.md. */
#ifndef ERGON_SHARD_H
#define ERGON_SHARD_H

#include "ergon/ergon.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- HLO text modules ---------------------------------------------------------------- */

/* A parsed HLO module (opaque). It keeps a copy of the text for re-emission. */
typedef struct erg_hlo_module erg_hlo_module;

/* Parse HLO text (`len` bytes, need not be NUL-terminated). `filename` is used in
 * messages only ("f.hlo:12:7: expected ')'..."). On success *out owns the module. EPARSE
 * with the line for malformed text, unknown opcodes, dots whose dimension numbers or result
 * shape do not fit their operands, get-tuple-elements outside their tuple, and cycles. */
ERG_API erg_status erg_hlo_parse(const char *text, size_t len, const char *filename,
                                 erg_hlo_module **out, erg_error *err);
/* Read and parse a file (at most 256 MiB). */
ERG_API erg_status erg_hlo_load(const char *path, erg_hlo_module **out, erg_error *err);
/* NULL is a no-op. */
ERG_API void erg_hlo_free(erg_hlo_module *m);
/* The name after `HloModule`. */
ERG_API const char *erg_hlo_name(const erg_hlo_module *m);
ERG_API size_t erg_hlo_num_computations(const erg_hlo_module *m);
/* Instructions in all computations. */
ERG_API size_t erg_hlo_num_instructions(const erg_hlo_module *m);
/* Instructions in all computations whose opcode is `opcode` ("dot"). */
ERG_API size_t erg_hlo_count_opcode(const erg_hlo_module *m, const char *opcode);

/* ---- analysis: ParallelBlocks and segments ------------------------------------------- */

/* The analysis of one module on one logical device mesh (m0 x m1), and everything the
 * later passes add to it (costs, plans). Opaque. */
typedef struct erg_shard erg_shard;

/* Build the operator graph of the ENTRY computation, the ParallelBlocks (anchors, backward
 * twins, propagation, merge points), their strategies on the mesh, and the repeated
 * segments. mesh0, mesh1 >= 1 and mesh0*mesh1 >= 2. The module must outlive *out.
 * EINVAL (with the line) for an already partitioned module (collectives over device groups,
 * partition-id, or num_partitions > 1 without any sharding annotation); ENOTFOUND when
 * nothing can be sharded (no dot, or no strategy divides the dims). A 1-D mesh whose size
 * divides no dim is analysed as a 2-D mesh of the same devices (docs/shard.md). */
ERG_API erg_status erg_shard_analyze(const erg_hlo_module *m, int mesh0, int mesh1, erg_shard **out,
                                     erg_error *err);
/* The same for any computation of the module (NULL = ENTRY). For the body of a `while`
 * (scanned layers), the trip count comes from backend_config known_trip_count or the loop
 * condition's compare with a constant; every iteration uses the same plan and times are
 * multiplied by the trip count (memory is per iteration). ENOTFOUND for an unknown name. */
ERG_API erg_status erg_shard_analyze_computation(const erg_hlo_module *m, const char *computation,
                                                 int mesh0, int mesh1, erg_shard **out,
                                                 erg_error *err);

/* Default of erg_shard_analyze_options.twin_window. */
#define ERG_SHARD_TWIN_WINDOW 64

/* Options of erg_shard_analyze_opts; erg_shard_analyze_options_init sets the defaults. */
typedef struct erg_shard_analyze_options {
    const char *computation; /* NULL: ENTRY (as erg_shard_analyze_computation) */
    /* Candidate dots one backward-twin search examines (1 to 1000000; default
     * ERG_SHARD_TWIN_WINDOW); it also reads at most 64 times as many users. A search that
     * reaches the bound stops without a twin; the report says how many did. Keeps the
     * analysis near-linear when one tensor is read by thousands of dots. */
    int twin_window;
    /* Called with (instructions done, instructions) during the analysis; may be NULL.
     * Non-zero cancels (ERG_ECANCELED). */
    erg_progress_fn progress;
    void *user;
} erg_shard_analyze_options;

ERG_API void erg_shard_analyze_options_init(erg_shard_analyze_options *o);
/* erg_shard_analyze_computation with options (NULL: the defaults). */
ERG_API erg_status erg_shard_analyze_opts(const erg_hlo_module *m, int mesh0, int mesh1,
                                          const erg_shard_analyze_options *o, erg_shard **out,
                                          erg_error *err);
ERG_API void erg_shard_free(erg_shard *s);
/* Counts. */
ERG_API size_t erg_shard_num_blocks(const erg_shard *s);
ERG_API size_t erg_shard_num_segments(const erg_shard *s);
ERG_API size_t erg_shard_num_unique_segments(const erg_shard *s);
/* Block b: number of strategies, of members, the anchor's instruction name, strategy name. */
ERG_API size_t erg_shard_block_num_strategies(const erg_shard *s, size_t b);
ERG_API size_t erg_shard_block_num_members(const erg_shard *s, size_t b);
ERG_API const char *erg_shard_block_anchor(const erg_shard *s, size_t b);
ERG_API const char *erg_shard_strategy_name(const erg_shard *s, size_t b, size_t k);
/* Index of the block that owns instruction `name` of the entry computation, or -1. */
ERG_API long erg_shard_block_of(const erg_shard *s, const char *name);
/* Segment i: first block index and block count; its unique segment id. */
ERG_API void erg_shard_segment(const erg_shard *s, size_t i, size_t *first_block,
                               size_t *num_blocks, size_t *unique_id);
/* The analysis report (blocks, their dots' per-strategy plans, merge points, multi-block
 * values, segments, strategy map). With all_members, every member of every block is listed
 * with its role and its spec under each strategy. *text is freed with erg_free. */
ERG_API erg_status erg_shard_report(const erg_shard *s, bool all_members, char **text,
                                    erg_error *err);

/* ---- costs ----------------------------------------------------------------------------- */

typedef enum erg_shard_compute {
    ERG_SHARD_COMPUTE_MODEL = 0,  /* roofline with the device's peak FLOP/s and bandwidth */
    ERG_SHARD_COMPUTE_BLAS = 1,   /* time each local dot shape with CBLAS sgemm on the CPU */
    ERG_SHARD_COMPUTE_CUBLAS = 2, /* time with cuBLAS, loaded at run time (ENOGPU if absent) */
} erg_shard_compute;

typedef struct erg_shard_cost_options {
    const char *devices_path; /* device/cluster table (CSV); NULL = the built-in table */
    const char *device;       /* row name, e.g. "a100-nvlink" (default) */
    erg_shard_compute compute;
    const char *cache_path;    /* measured compute cache (CSV); NULL = no cache */
    const char *profiles_path; /* imported per-segment table (CSV); NULL = none */
    double mem_budget_bytes;   /* per device; 0 = the device's memory */
    double optimizer_factor;   /* bytes kept per weight byte (weight+grad+Adam: 4) */
    int keep;                  /* combinations per segment listed by the profile report and
                                * kept by the fallback chain DP (0 = 64); the exact DP keeps
                                * every combination not dominated in (time, memory) */
    bool profiles_only;        /* with profiles_path: a combination without a row is not a
                                * candidate (measured costs only; every unique segment must
                                * have a row), instead of keeping its modelled time */
} erg_shard_cost_options;

ERG_API void erg_shard_cost_options_init(erg_shard_cost_options *o);
/* Cost every block strategy and every segment combination. Calls progress (may be NULL)
 * during measurement. */
ERG_API erg_status erg_shard_profile(erg_shard *s, const erg_shard_cost_options *o,
                                     erg_progress_fn progress, void *user, erg_error *err);
/* Per unique segment and combination: compute, communication, memory (text table). */
ERG_API erg_status erg_shard_profile_report(const erg_shard *s, size_t max_rows, char **text,
                                            erg_error *err);
/* The kept combinations of every unique segment (the report's rows: the `keep` fastest,
 * then the `keep` smallest) as the CSV that profiles_path reads back: header
 * segment,strategies,time_s,memory_bytes; time per iteration (a loop body's trip count
 * divided out). The list of candidates a measuring tool times (tools/shard_measure.py). */
ERG_API erg_status erg_shard_profile_csv(const erg_shard *s, char **text, erg_error *err);
/* CFP's communication-volume experiment: per combination of the first repeated segment
 * (or the whole model when it has none): bytes moved per device and modelled time. */
ERG_API erg_status erg_shard_comm_report(const erg_shard *s, size_t max_rows, char **text,
                                         erg_error *err);

/* ---- search ---------------------------------------------------------------------------- */

typedef enum erg_shard_method {
    ERG_SHARD_DP = 0,    /* CFP: exact DP over segments with a memory dimension (see search.c) */
    ERG_SHARD_ILP = 1,   /* Alpa: ILP over blocks (GLPK) on the same costs */
    ERG_SHARD_GIVEN = 2, /* not a search: a strategy vector given (erg_shard_plan_given) */
} erg_shard_method;

typedef struct erg_shard_plan erg_shard_plan;

/* Search a plan (one strategy per block). time_limit_s bounds the ILP (0 = 600 s).
 * ERG_ENOTFOUND when nothing fits the memory budget. */
ERG_API erg_status erg_shard_search(erg_shard *s, erg_shard_method method, double time_limit_s,
                                    erg_shard_plan **out, erg_error *err);
ERG_API void erg_shard_plan_free(erg_shard_plan *p);
/* A plan from a given strategy vector (one per block, in block order; n = the number of
 * blocks), costed like a searched one: a baseline, or a variant to measure. ERG_EINVAL names
 * the block whose strategy is out of range. */
ERG_API erg_status erg_shard_plan_given(erg_shard *s, const size_t *strategies, size_t n,
                                        erg_shard_plan **out, erg_error *err);
/* Alpa's ILP at operator granularity on the same cost model: every block member picks its
 * own row of its block's plan table; every operand edge carries a resharding matrix. Gives the
 * objective (s; INFINITY when the time limit hit before any solution), the solve time, whether
 * the limit was hit, the fraction of blocks whose members all chose the same row, and the
 * number of ILP variables (may be NULL). Its optimum is <= the block optimum. */
ERG_API erg_status erg_shard_search_ops_ilp(erg_shard *s, double time_limit_s, double *objective_s,
                                            double *search_s, bool *timed_out,
                                            double *uniform_blocks, size_t *num_variables,
                                            erg_error *err);
/* Strategy of block b in the plan. */
ERG_API size_t erg_shard_plan_strategy(const erg_shard_plan *p, size_t b);
/* Modelled iteration time (s) of the plan: what the search minimised, re-evaluated on the
 * whole block graph (includes edges the DP cannot see). */
ERG_API double erg_shard_plan_time_s(const erg_shard_plan *p);
/* The search objective as the method saw it (DP: chain cost; ILP: its objective). */
ERG_API double erg_shard_plan_objective_s(const erg_shard_plan *p);
ERG_API double erg_shard_plan_memory_bytes(const erg_shard_plan *p);
ERG_API double erg_shard_plan_search_s(const erg_shard_plan *p);
/* Modelled TFLOP/s summed over devices: total FLOPs / time. */
ERG_API double erg_shard_plan_tflops(const erg_shard_plan *p);
/* True when the ILP stopped at its time limit (result may not be optimal). */
ERG_API bool erg_shard_plan_timed_out(const erg_shard_plan *p);
/* Evaluate any strategy vector (one per block) on the whole block graph. */
ERG_API erg_status erg_shard_evaluate(const erg_shard *s, const size_t *strategies, double *time_s,
                                      double *memory_bytes, erg_error *err);
/* Human-readable plan summary (solution vector, cost, memory, TFLOP/s). */
ERG_API erg_status erg_shard_plan_describe(const erg_shard *s, const erg_shard_plan *p, char **text,
                                           erg_error *err);
/* The plan as JSON. */
ERG_API erg_status erg_shard_plan_json(const erg_shard *s, const erg_shard_plan *p, char **json,
                                       erg_error *err);
/* The module text with sharding={...} on every instruction the plan decides, and
 * num_partitions on the HloModule line. */
ERG_API erg_status erg_shard_annotate(const erg_shard *s, const erg_shard_plan *p, char **text,
                                      erg_error *err);
/* One of the outputs above written to a file whole (a temporary file renamed over path): the
 * annotated module (erg_hlo_load reads it), the plan's JSON, or the measured profiles
 * (erg_shard_profile_csv; p may be NULL), which --profiles reads back. */
typedef enum erg_shard_output {
    ERG_SHARD_OUT_HLO,
    ERG_SHARD_OUT_JSON,
    ERG_SHARD_OUT_PROFILES,
} erg_shard_output;
ERG_API erg_status erg_shard_write(const erg_shard *s, const erg_shard_plan *p,
                                   erg_shard_output what, const char *path, erg_error *err);

/* ---- the plan per value, for a framework in the same process ------------------------
 * What a framework applies to the arguments and results of the analysed computation
 * (python/ergon/jax.py: argument i of a function lowered by jax.jit is parameter i, result
 * e is element e of the ROOT tuple). Accessors only: a binding mirrors no struct. */

/* Entry parameters (by parameter number) or outputs (ROOT tuple elements; one for a ROOT
 * that is not a tuple). */
typedef enum erg_shard_value_kind {
    ERG_SHARD_PARAMETER = 0,
    ERG_SHARD_OUTPUT = 1,
} erg_shard_value_kind;

/* Bits of a dimension's mesh axes (erg_shard_value_axes): split over mesh axis 0 (size
 * mesh0), over axis 1 (size mesh1), or both (axis 0 major: device id i*mesh1 + j). Axes of
 * size 1 are never reported. 0: the dimension is not split. */
#define ERG_SHARD_AXIS0 1u
#define ERG_SHARD_AXIS1 2u

/* The mesh the analysis plans for: the one asked for, or the 2-D view of a 1-D mesh whose
 * size divides no dim (docs/shard.md). Either pointer may be NULL. */
ERG_API void erg_shard_mesh(const erg_shard *s, int *mesh0, int *mesh1);
/* Number of parameters or outputs of the analysed computation (0 for NULL). */
ERG_API size_t erg_shard_num_values(const erg_shard *s, erg_shard_value_kind kind);
/* The HLO instruction name of parameter i (with parameter number i), or of the instruction
 * that produces output i; NULL when out of range or (an output of a ROOT that is not a tuple
 * instruction) there is none. */
ERG_API const char *erg_shard_value_name(const erg_shard *s, erg_shard_value_kind kind, size_t i);
/* Rank of value i; -1 when it is not an array (a tuple, a token) or out of range. */
ERG_API int erg_shard_value_rank(const erg_shard *s, erg_shard_value_kind kind, size_t i);
/* Position of the block that owns value i (as erg_shard_block_*), or -1. */
ERG_API long erg_shard_value_block(const erg_shard *s, erg_shard_value_kind kind, size_t i);
/* The sharding of value i under plan p, as annotate writes it: axes[d] (ERG_SHARD_AXIS*
 * bits) for each of its `rank` dims; naxes is the room in axes (>= the rank). When no dim is
 * split, why (why_size bytes, may be NULL/0) says why it stays replicated: not an array, a
 * scalar, no block owns it, no strategy of its block splits it (its dims on this mesh), or
 * its block's chosen strategy keeps it whole; otherwise why is "". EINVAL for NULL, an index
 * out of range or too little room. */
ERG_API erg_status erg_shard_value_axes(const erg_shard *s, const erg_shard_plan *p,
                                        erg_shard_value_kind kind, size_t i, unsigned *axes,
                                        size_t naxes, char *why, size_t why_size, erg_error *err);
/* Costs of block b under strategy k, as erg_shard_profile modelled them: time (compute +
 * its collectives + resharding inside the block, s; a loop body's trip count included),
 * its communication part (s) and memory per device (bytes); any pointer may be NULL.
 * ESTATE before erg_shard_profile; EINVAL for b or k out of range. */
ERG_API erg_status erg_shard_block_cost(const erg_shard *s, size_t b, size_t k, double *time_s,
                                        double *comm_s, double *memory_bytes, erg_error *err);
/* erg_shard_profile with the defaults of erg_shard_cost_options_init and the built-in
 * device table's row `device` (NULL: the default row), for callers that do not build the
 * options struct (bindings). */
ERG_API erg_status erg_shard_profile_device(erg_shard *s, const char *device, erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
