/* order_internal.h: the per-rank order layout, shared by the generators,
 * the CSV reader and the DAG builder. */
#ifndef ERGON_ORDER_INTERNAL_H
#define ERGON_ORDER_INTERNAL_H

#include "ergon/pipeline.h"

struct erg_order {
    erg_schedule_kind kind;
    int P, V, S, M;
    int *stage_rank;   /* [S] */
    int *off;          /* [P+1] into instrs */
    erg_instr *instrs; /* instructions, rank by rank */
    int *soff;         /* [P+1] into steps */
    erg_instr *steps;  /* steps incl. idle ones (microbatch -1) */
    int *cell;         /* [n] 1-based step (CSV cell) of each instruction */
    int *line;         /* [P] 1-based source line of each rank (CSV), or rank+1 */
    char *name;        /* source name for messages ("" for generated) */
};

/* A growable list of steps for one rank. */
typedef struct erg__steps {
    erg_instr *v;
    int n, cap;
} erg__steps;
int erg__steps_push(erg__steps *s, erg_instr in);
void erg__steps_free(erg__steps *s);
#define ERG__IDLE ((erg_instr){ERG_FORWARD, -1, -1, ERG_FORWARD, -1, -1})

/* Build and validate an order from per-rank steps (steps[r] for r < P). M is
 * the microbatch count (0: inferred); name/lines (may be NULL) for messages.
 * Takes nothing over from steps. */
erg_status erg__order_build(erg_schedule_kind kind, int P, int M, erg__steps *steps,
                            const char *name, const int *lines, erg_order **out, erg_error *err);

/* Generators (generators.c): fill steps[0..P-1]. */
erg_status erg__generate(const erg_schedule *sched, int P, int V, int M, erg__steps *steps,
                         erg_error *err);

#endif
