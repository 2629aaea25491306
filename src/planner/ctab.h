/* ctab.h: per-stage clock tables over a profile and a fast plan evaluator,
 * shared by the EnvPipe planner and the baselines (internal). */
#ifndef ERGON_PLANNER_CTAB_H
#define ERGON_PLANNER_CTAB_H

#include "core/internal.h"
#include "ergon/pipeline.h"
#include "ergon/plan.h"
#include "ergon/profile.h"

/* Points of one (stage, kind), sorted by clock ascending. */
typedef struct erg__ckind {
    int n;
    int *freq;
    double *t, *e;
} erg__ckind;

typedef struct erg__ctab {
    int S;
    const erg_profile *prof; /* borrowed: costs of I, W, OVERLAP_F_B and chunks */
    erg__ckind *k;           /* [S][2] */
    int **both;              /* [S]: clocks with forward and backward points, descending */
    int *nboth;              /* [S] */
    int *common;             /* clocks every stage has (both kinds), descending */
    int ncommon;
} erg__ctab;

erg_status erg__ctab_new(const erg_profile *p, int S, erg__ctab **out, erg_error *err);
void erg__ctab_free(erg__ctab *c);
/* Index of freq in (s, kind), or -1. */
int erg__ctab_find(const erg__ctab *c, int s, erg_instr_kind kind, int freq);

/* Evaluation of a plan with profiled values (as erg_emulate, docs/emulate.md). Arrays are
 * num_instrs long (es, dur may be NULL); stage_j is S long (may be NULL). */
typedef struct erg__eval {
    double time_s, energy_j;
} erg__eval;
erg_status erg__ctab_eval(const erg__ctab *c, const erg_dag *dag, const erg_plan *plan,
                          double power_w, double *es, double *dur, double *stage_j, erg__eval *out,
                          erg_error *err);

#endif
