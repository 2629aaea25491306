/* shard_internal.h: ParallelBlocks, specs, costs and plans shared by src/shard/ files. */
#ifndef ERGON_SHARD_INTERNAL_H
#define ERGON_SHARD_INTERNAL_H

#include "shard/hlo.h"

/* A sharding spec: for each tensor dim the mesh axes it is split over:
 * SP_R (replicated), 0, 1, or SP_BOTH (split over both axes, "S01"). */
#define SP_R ((int8_t)-1)
#define SP_BOTH ((int8_t)2)
typedef struct spec {
    int8_t d[HLO_MAX_RANK];
} spec;

/* A collective a member needs under one strategy (its own, "intrinsic" communication). */
enum { COLL_AR = 0, COLL_AG = 1, COLL_A2A = 2 };
typedef struct coll {
    int kind;     /* COLL_* */
    int axis;     /* 0, 1 or SP_BOTH */
    double bytes; /* see cost.c for what the bytes mean per kind */
} coll;

/* Per instruction of the entry computation. */
typedef struct node {
    int pb;   /* owning ParallelBlock or -1 */
    int slot; /* member index inside the block */
    int nusers;
    int *users;    /* instruction indices */
    int topo;      /* position in topological order */
    bool sink;     /* tuple / ROOT: takes any spec without cost */
    bool boundary; /* custom-call/gather/...: needs replicated operands */
    bool weight;   /* parameter reached from an anchor's rhs chain */
    bool is_anchor, is_twin, is_dotmember;
    int8_t cc;        /* custom-calls: CC_* class (analyze.c), else CC_NONE */
    int8_t attn_head; /* CC_ATTENTION: the head dim of the rank-4 operands, or -1 */
} node;

/* Custom-call classes (docs/shard.md, Analysis: how specs propagate through custom calls):
 *  CC_ELEMENTWISE  known per-element targets (Gelu, Relu, Silu, TransferWithStaticRing,
 *                  Sharding...): identity on every dim;
 *  CC_SAMESHAPE    unknown target whose array operands all have the output's shape
 *                  (opaque, same shape): assumed per-element, identity on every dim;
 *  CC_LASTDIM      softmax-like (Softmax, LayerNorm, RmsNorm targets): identity on every
 *                  dim but the last, which it reduces over (a split there is gathered);
 *  CC_ATTENTION    fused attention (cuDNN fmha, TransformerEngine, flash attention): rank-3/4
 *                  Q, K, V; splits on the batch and head dims pass, others are gathered;
 *  CC_OPAQUE       anything else: a replicated boundary. */
enum { CC_NONE = 0, CC_ELEMENTWISE, CC_SAMESHAPE, CC_LASTDIM, CC_ATTENTION, CC_OPAQUE };

/* Member data: for each strategy k, the output spec, the spec each operand must arrive in,
 * and the intrinsic collectives. */
typedef struct member {
    int ins;
    spec *out;   /* [K] */
    spec *req;   /* [nops*K], operand j under k at req[j*K+k] */
    coll *colls; /* [ncolls] */
    int *coll_k; /* strategy of each collective */
    int ncolls;
    size_t capcolls;
    const char *role; /* "anchor", "twin", "dot", "follow", "merge", "adopt" */
    double *cost_s;   /* [K] own compute + collectives + gathers for replicated consumers */
    double *mem_b;    /* [K] own memory per device */
} member;

typedef struct pblock {
    int id;     /* creation order, stable */
    bool alive; /* false after being merged into another block */
    int anchor; /* instruction index */
    int K;
    char **names; /* [K] strategy names */
    int nmem;
    size_t capmem;
    member *mem;
    /* costs (filled by erg_shard_profile) */
    double *time_s;     /* [K] compute + intrinsic comm + intra-block resharding */
    double *comm_s;     /* [K] communication part of time_s */
    double *intr_s;     /* [K] intrinsic collectives part of comm_s (rest: resharding) */
    double *comm_bytes; /* [K] */
    double *mem_bytes;  /* [K] per device */
    double *flops;      /* [K] total FLOPs (whole model, not per device) */
    uint64_t hash;
} pblock;

/* A resharding edge between two live blocks: cost[ka*Kb + kb]. */
typedef struct pedge {
    int a, b;       /* block indices in erg_shard.order */
    double *cost_s; /* [Ka*Kb] */
    double *bytes;  /* [Ka*Kb] */
} pedge;

typedef struct segment {
    int first, n; /* in order[] */
    int unique;   /* unique segment id (index of the first occurrence segment) */
    /* combinations (filled by profiling) */
    long ncombo; /* product of Ks */
    int nkeep;
    long *keep; /* kept combination indices */
    double *keep_time, *keep_mem;
    bool imported; /* times from --profiles */
    /* The imported rows of its combinations, sorted by combination: what the search uses
     * minus the modelled cost, so that a plan is evaluated on the search's own figures
     * (erg__shard_eval_used); imp_only: --profiles-only, an unlisted combination is none. */
    int nimp;
    struct seg_import *imp;
    bool imp_only;
    /* Exact DP tables (search.c, docs/shard.md Search): the blocks of this segment that have a
     * resharding edge to a block of another segment ("interface"), and per assignment of
     * their strategies ("key", mixed radix, first block most significant) the combinations
     * that are not dominated: ent[koff[y] .. koff[y+1]) sorted by memory ascending with time
     * strictly decreasing (one entry, the fastest, when memory cannot bind). */
    int nifc;
    int *ifc; /* positions in order[] */
    long nkeys;
    long *koff; /* [nkeys + 1] */
    struct dp_entry *ent;
    /* The transition into this segment: frontier before it (prev) and after it (fr) are the
     * blocks of earlier segments (and of this one) with an edge to a later segment. State x
     * of prev and key y give the new state xpart[x] + ypart[y]; cross[x * nkeys + y] is the
     * resharding between the prev blocks and this segment. */
    int nfr;
    int *fr;
    long nstate, nprev;
    long *xpart, *ypart;
    double *cross;
    /* Tables owned by an earlier occurrence of the same unique segment (not freed here):
     * keys (koff, ent) when its combinations cost the same, the transition (xpart, ypart,
     * cross) when its frontier and edges are the same relative to the segment. This keeps
     * the DP tables per unique segment, not per layer. */
    bool shared_keys, shared_trans;
    /* DP workspace when memory cannot bind: best time per state and its argmins. */
    double *val;
    long *argx, *argy;
} segment;

typedef struct dp_entry {
    double t, m; /* segment combination time (s) and memory per device (bytes) */
    long c;      /* combination index */
} dp_entry;

/* Two sibling dots in different blocks whose partial sums are added (analyze.c,
 * reassociate): under strategies (ka, kb) with axa[ka] == axb[kb] >= 0 (or SP_BOTH) and equal
 * bytes, one all-reduce is saved (cost.c lowers the edge between their blocks). */
typedef struct rpair {
    int a, b;    /* the dot instructions */
    int8_t *axa; /* [K of a's block] all-reduce axis or -1 */
    double *ba;  /* [K] its bytes */
    int8_t *axb;
    double *bb;
    bool unused;
} rpair;

typedef struct shard_ve shard_ve; /* ve.c */

typedef struct device_params {
    char name[64];
    double peak_flops, eff, mem_bw, mem_bytes;
    double alpha[2], beta[2]; /* s, s/byte per mesh axis */
} device_params;

struct erg_shard {
    const erg_hlo_module *m;
    const hlo_comp *c;
    long trips;       /* loop body: iterations (costs are multiplied), else 1 */
    const char *loop; /* the while instruction whose body this is, or NULL */
    int mesh[2];
    int mesh_req[2]; /* the mesh asked for: differs when a 1-D mesh is viewed as 2-D */
    int n;           /* instructions in the entry computation */
    node *nodes;
    int *topo; /* instruction indices in topological order */
    int npb;
    size_t cappb;
    pblock *pbs; /* all created blocks */
    int norder;
    int *order;  /* live blocks in creation order (indices into pbs) */
    int *pos_of; /* pbs index -> position in order (or -1) */
    int nedges;
    size_t capedges;
    pedge *edges;
    int nseg;
    size_t capseg;
    segment *segs;
    int nuniq;
    int reassoc_saved; /* all-reduces removed by reassociation (summed over strategies) */
    int nrpairs;
    size_t caprpairs;
    rpair *rpairs; /* reassociation across blocks, costed on the edges */
    /* costs */
    bool profiled;
    device_params dev;
    double const_time_s; /* unowned instructions */
    double const_mem_bytes;
    double const_flops;
    bool imports; /* some segment has imported rows, or --profiles-only (erg__shard_eval_used) */
    double mem_budget;
    double opt_factor;
    char cost_source[128];
    double profile_s;
    /* exact DP (search.c): tables built, memory can bind, the transition work per search */
    bool dp_ready, dp_membind;
    double dp_work;
    double dp_prepare_s;    /* time spent building the DP tables (part of profile_s) */
    long dp_max_candidates; /* tests: Pareto entries per step before the chain fallback
                             * (0: the default, 2^21) */
    shard_ve *ve; /* block-level elimination (ve.c) when the segment frontier is too large */
    /* analysis bounds (analyze.c): candidate dots one backward-twin search examines, the
     * searches that stopped at that window, and the first anchor whose search did */
    int twin_window;
    long twin_cut;
    int twin_cut_anchor;
};

struct erg_shard_plan {
    int n;
    size_t *k; /* per position in order[] */
    double time_s, objective_s, mem_bytes, search_s, tflops;
    bool timed_out;
    int method;
    int refined;          /* block changes made by the DP's second pass */
    double lower_bound_s; /* chain fallback with elimination: Lagrangian lower bound, or 0 */
    bool exact;           /* DP: the frontier DP saw every edge (no second pass needed) */
    bool ve;              /* DP: solved by block-level elimination (segment frontier too large) */
    bool ilp_polished;    /* DP chain fallback: the block ILP (time-limited) found a better plan */
};

/* Collective time (s) on the device's mesh axis for `bytes` (meaning per kind: AR tensor
 * size per device, AG gathered size per device, A2A full size). */
double erg__shard_coll_time(const erg_shard *s, int kind, int axis, double bytes);
/* Bytes a resharding src -> dst of a tensor of `full_bytes` moves per device, and its time. */
double erg__shard_reshard(const erg_shard *s, const hlo_shape *sh, const spec *src, const spec *dst,
                          double *bytes);
int erg__shard_tiles(const erg_shard *s, const spec *sp, int rank);
void erg__shard_spec_str(const spec *sp, int rank, char *buf, size_t size);
/* segments.c: a hash per live block, then the repeated segments of the block order. */
erg_status erg__shard_block_hashes(erg_shard *s, erg_error *err);
erg_status erg__shard_find_segments(erg_shard *s, erg_error *err);
/* reassoc.c: merge the all-reduces of partial sums that are added together. */
erg_status erg__shard_reassociate(erg_shard *s, erg_error *err);
/* Whole-graph evaluation of a strategy vector (indexed by position in order[]). */
void erg__shard_eval(const erg_shard *s, const size_t *k, double *time_s, double *mem_bytes,
                     double *flops);
/* The same on the figures the DP searched: a segment whose combination has an imported row
 * (--profiles) costs that row's time and memory instead of its modelled ones, and with
 * --profiles-only one without a row takes forever (segments.c). */
void erg__shard_eval_used(const erg_shard *s, const size_t *k, double *time_s, double *mem_bytes);
/* Communication charged for a strategy vector (per position in order[]), by COLL_* kind:
 * number of collectives and bytes moved per device (cost.c). */
typedef struct shard_comm {
    double count[3], bytes[3];
} shard_comm;
void erg__shard_plan_comm(const erg_shard *s, const size_t *k, shard_comm *out);
/* Build the exact DP tables of every segment from the combination times/memories of
 * erg_shard_profile (search.c). tv/mv: per segment, arrays of ncombo values; same_as (may
 * be NULL): per segment, an earlier segment with identical tv/mv, or -1. Sets
 * s->dp_ready (false when the frontier would be too large: the search then falls back to the
 * adjacent-segment DP plus a second pass). ERG_ENOMEM on allocation failure. */
erg_status erg__shard_dp_prepare(erg_shard *s, double *const *tv, double *const *mv,
                                 const int *same_as, erg_error *err);
void erg__shard_dp_free(erg_shard *s);
/* search_ilp.c: Alpa's block ILP (GLPK) within limit_s into p; the DP's second pass (changes
 * one block at a time while the whole-graph time drops; returns the number of changes); the
 * Lagrangian fallback when the frontier is too large and memory binds. */
erg_status erg__shard_search_ilp(erg_shard *s, erg_shard_plan *p, double limit_s, erg_error *err);
int erg__shard_refine(const erg_shard *s, erg_shard_plan *p);
erg_status erg__shard_lagrange(erg_shard *s, erg_shard_plan *p, erg_error *err);
/* Block-level variable elimination (ve.c): exact for additive costs when memory cannot
 * bind. prepare leaves s->ve NULL when the elimination tables would be too large. search
 * writes the strategies into k (per position in order[]) and returns the part of the time
 * it cannot attribute to a block (the sum of the constant factors). */
erg_status erg__shard_ve_prepare(erg_shard *s, erg_error *err);
void erg__shard_ve_free(erg_shard *s);
double erg__shard_ve_search(const erg_shard *s, size_t *k);
/* Reload the elimination's block tables as time + lambda * memory (0 restores time only). */
void erg__shard_ve_set_lambda(const erg_shard *s, double lambda);
/* Recompute every segment's combination table from the current block and edge costs
 * (no imported profiles) and the DP tables; for tests that change costs by hand. */
erg_status erg__shard_segments_rebuild(erg_shard *s, int keep, erg_error *err);
/* While body (s->loop): the instruction whose spec the body parameter's tuple element e
 * takes (the ROOT tuple's operand e), or -1 (cost.c). */
int erg__shard_loop_producer(const erg_shard *s, int e);
/* The spec instruction `ins` of the analysed computation has under plan p (its block's
 * strategy), or NULL when no live block owns it (emit.c). */
const spec *erg__shard_plan_spec(const erg_shard *s, const erg_shard_plan *p, int ins);
/* Spec of an emitted sharding string (the inverse of the emitter); false if not ours. */
bool erg__shard_parse_sharding(const erg_shard *s, const char *text, size_t len, int rank,
                               spec *out);
/* Convolution dim_labels: idx = {lhs b, lhs f, rhs i, rhs o, out b, out f}; false for
 * missing labels or grouped convolutions. */
bool erg__shard_conv_labels(const erg_hlo_module *m, const hlo_instr *in, int lrank, int rrank,
                            int orank, int idx[6]);
erg_status erg__shard_load_devices(const char *path, const char *name, device_params *out,
                                   erg_error *err);

/* ---- measured GEMM timing (cost_gemm.c): BLAS on the CPU, cuBLAS at run time ---- */

typedef struct gemm_key {
    int64_t b, m, n, k;
    double time_s;
} gemm_key;

typedef struct timer_ctx {
    gemm_key *tab;
    int n;
    size_t cap;
    erg_shard_compute mode;
    /* cuBLAS */
    void *hcudart, *hcublas, *handle;
    int (*cudaMalloc)(void **, size_t);
    int (*cudaFree)(void *);
    int (*cudaDeviceSynchronize)(void);
    int (*cublasCreate)(void **);
    int (*cublasDestroy)(void *);
    int (*cublasSgemm)(void *, int, int, int, int, int, const float *, const float *, int,
                       const float *, int, const float *, float *, int);
} timer_ctx;

/* Monotonic clock in seconds (cost_gemm.c; also search timings). */
double erg__shard_now_s(void);
/* Load libcudart/libcublas by dlopen and create a handle; ERG_ENOGPU when unavailable. */
erg_status erg__shard_cublas_open(timer_ctx *t, erg_error *err);
void erg__shard_cublas_close(timer_ctx *t);
/* Measured time of a (b x) m x n x k GEMM, from the table or timed now and added to it. */
erg_status erg__shard_time_gemm(timer_ctx *t, int64_t b, int64_t m, int64_t n, int64_t k,
                                double *out, erg_error *err);
/* The GEMM time cache, CSV batch,m,n,k,time_s (a missing file is an empty cache). */
erg_status erg__shard_gemm_cache_load(timer_ctx *t, const char *path, erg_error *err);
erg_status erg__shard_gemm_cache_save(timer_ctx *t, const char *path, erg_error *err);

/* ---- segment combination tables (segments.c), built from the block and edge costs ---- */

typedef struct shard_ci {
    long c;
    double v;
} shard_ci;

/* An imported row as a segment keeps it: its combination and the difference between the
 * row and the modelled time (times the trip count) and memory. */
typedef struct seg_import {
    long combo;
    double dt_s, dm_bytes;
} seg_import;

typedef struct shard_imported {
    int seg; /* unique segment id */
    long combo;
    double time_s, mem;
} shard_imported;

/* Strategy vector k (per position in order[]) of combination c of segment g. */
void erg__shard_seg_decode(const erg_shard *s, const segment *g, long c, size_t *k);
/* Indices of the edges with both ends inside segment g (caller frees); -1 on OOM. */
int erg__shard_seg_edges(const erg_shard *s, const segment *g, int **out);
/* Sum of block and intra-segment edge costs for combination c of segment g. */
void erg__shard_seg_cost(const erg_shard *s, const segment *g, const int *rel, int nrel,
                         const size_t *k, double *time_s, double *mem, double *comm_s,
                         double *comm_bytes, double *intr_s);
/* qsort comparator of shard_ci by v, ascending. */
int erg__shard_cmp_ci(const void *a, const void *b);
/* Imported per-segment profile rows (CSV) of erg_shard_cost_options.profiles_path. */
erg_status erg__shard_load_profiles(erg_shard *s, const char *path, shard_imported **out, int *nout,
                                    erg_error *err);
/* Every segment's combination table and the exact DP tables, from the costs and imp. */
erg_status erg__shard_segments_build(erg_shard *s, const shard_imported *imp, int nimp, int keep,
                                     bool only, erg_error *err);
/* Frees what segments_build gave segment g (its kept combinations and imported rows). */
void erg__shard_segment_free_costs(segment *g);

/* ---- analysis internals shared by analyze.c, spec.c, dots.c, propagate.c ---- */

typedef struct dotinfo {
    int nb, nc;
    int64_t lb[HLO_MAX_RANK], rb[HLO_MAX_RANK], lc[HLO_MAX_RANK], rc[HLO_MAX_RANK];
    int lrank, rrank;
    int nls, nrs;
    int ls[HLO_MAX_RANK], rs[HLO_MAX_RANK]; /* space dims */
    /* output dim of batch pair k, lhs space dim k, rhs space dim k */
    int ob[HLO_MAX_RANK], ols[HLO_MAX_RANK], ors[HLO_MAX_RANK];
} dotinfo;

typedef struct strat {
    spec l, r, o;
    int ar;
} strat;

enum { PROP_FREE = 0, PROP_PARTIAL = 1, PROP_FAIL = 2 };

spec erg__shard_spec_rep(void);
int erg__shard_axis_size(const erg_shard *s, int code);
bool erg__shard_uses_axis(int8_t code, int a);
bool erg__shard_spec_valid_for(const erg_shard *s, const hlo_shape *sh, const spec *sp);
bool erg__shard_dot_info(const erg_shard *s, int i, dotinfo *d);
bool erg__shard_dot_eval(const erg_shard *s, int i, const dotinfo *d, const spec *l, const spec *r,
                         spec *out, int *ar_axes);
bool erg__shard_same_dims(const hlo_shape *a, const hlo_shape *b);
/* Class of a custom-call (CC_*) from its target and shapes; *head: fused attention's head dim. */
int8_t erg__shard_cc_classify(const erg_hlo_module *m, const hlo_comp *c, const hlo_instr *in,
                              int8_t *head);
/* The class analyze_on stored for instruction `in` of the analysed computation. */
int8_t erg__shard_cc_of(const erg_shard *s, const hlo_instr *in);
bool erg__shard_is_dynamic_slice(const hlo_instr *in);
bool erg__shard_is_param_gte(const hlo_comp *c, const hlo_instr *in);
int erg__shard_prop_fwd(const erg_shard *s, int i, int j, const spec *op, spec *out, int *ar_axis);
spec erg__shard_prop_bwd(const erg_shard *s, int i, int j, const spec *out);
int erg__shard_enumerate_dot(const erg_shard *s, int i, const dotinfo *d, strat *out, int max);
erg_status erg__shard_strategy_name(const erg_shard *s, int i, const strat *st, char **out);

#endif
