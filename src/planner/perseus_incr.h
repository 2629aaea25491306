/* perseus_incr.h: the incremental crashing step's state, shared by its flow network and arc
 * scan (perseus_incr.c) and its CPM (perseus_incr_cpm.c); planner-private. */
#ifndef ERGON_PLANNER_PERSEUS_INCR_H
#define ERGON_PLANNER_PERSEUS_INCR_H

#include "planner/perseus_crash.h"

#include <stdint.h>

/* The per-arc arrays are the crash state's arc lists (cs->arc_u, ..., sized for every
 * possible arc), indexed by ordinal here: the full pass's lists are only written by the
 * fallback, which swaps in arrays of its own, so the incremental step needs no more memory
 * than the full pass. */
typedef struct erg__crash_inc {
    int nord;              /* n + E + 2n possible arcs */
    int *au, *av;          /* [nord] endpoints (flow nodes) of each possible arc (cs->arc_u, _v) */
    int *akey;             /* [nord] key into prev_flow (cs->arc_key) */
    unsigned char *active; /* [nord] in the network now */
    int64_t *alb, *aub;    /* [nord] bounds of the active arcs (cs->arc_lb, _ub) */
    int64_t *im;           /* [2n + 4] imbalance of the real arcs' flow (cs->im) */
    int *touched;          /* nodes whose imbalance may be non-zero */
    unsigned char *tflag;
    int ntouched;
    /* CPM over a window of the topological order and what it moves (cpm_window) */
    int *pos; /* [n] position of each instruction in g.topo */
    long *td; /* [n] T - lf + d: the longest path from an instruction's start to the end (its
               * tail plus its own duration: what a predecessor's test adds to its finish) */
    /* cs->es and td are stored less an offset per block of 2^ERG__CPM_BLK topological positions: a
     * step shifts every start after its window, and every tail before it, by the same dT
     * (but a few), which costs a block's offset, not a pass (es_at, td_at) */
    long *eoff, *toff; /* [nblk] */
    int nblk;
    int flat;   /* every offset is 0 (the last step recomputed the whole span: cpm_window) */
    long *des;  /* [n] scratch: the change of es (whole span: from kmin on; window: in it) */
    long *dtd;  /* [n] scratch: the change of td in the window */
    long shift; /* the dT presumed for the next step (the last step's) */
    /* The arc scan after a step visits only the instructions whose arcs may change (cpm_window
     * marks them, scan_arcs clears the marks): see cpm_window. */
    unsigned char *dirty; /* [n + 8], the last 8 always 0 */
    int all;              /* the next scan visits every instruction (the presumed dT was not) */
    /* by topological position k: mpp = the smallest position among the predecessors of the
     * instruction at k (-1 if none), msp = the largest among its successors (n if none), each
     * in a segment tree (leaves at [P + k]) that finds the positions crossing a window */
    int P, *mppt, *mspt; /* [2P] */
    uint64_t *pend;      /* [n / 64 + 1] positions whose start or tail must be recomputed */
    int *sinks, nsinks;  /* the instructions without successors: T is the latest of their ends */
    /* The cut kept (docs/planner.md): cut_valid = the flow's level marks (>= 0) are exactly
     * the nodes reachable from the source in the residual graph, as the last max flow's
     * final search left them; moved = a patch since then may have taken a node out of that
     * set; front = the unreached heads of residual arcs that patches opened from a reached
     * node (nfront > nfront_max: too many, treated as moved). */
    int cut_valid, moved;
    int last_hit; /* the last step that could keep the cut found an augmenting path */
    int *front, nfront, nfront_max;
    unsigned char *inr; /* [2n + 4] scratch of extend_cut: reached by it */
} erg__crash_inc;

#define ERG__CPM_BLK 5 /* 32 positions share an offset (log2) */

/* The earliest start and the tail (td) of instruction u. */
static inline long es_at(const erg__crash_inc *in, const long *es, int u)
{
    return es[u] + in->eoff[in->pos[u] >> ERG__CPM_BLK];
}

static inline long td_at(const erg__crash_inc *in, int u)
{
    return in->td[u] + in->toff[in->pos[u] >> ERG__CPM_BLK];
}

/* perseus_incr_cpm.c: the CPM fields of cs->inc (pos ... dtd) from the full CPM's cs->es, lf
 * and T (-1 = out of memory; erg__incr_cpm_free frees what was allocated); */
int erg__incr_cpm_init(crash_state *cs);
void erg__incr_cpm_free(erg__crash_inc *in);
/* every offset folded into cs->es and td (flat; for code that reads them directly); */
void erg__incr_flatten(crash_state *cs);
/* erg__crash_cpm after a step that moved only cs->shorten and cs->lengthen: es, td and T, and
 * the marks of the instructions whose arcs the scan must visit (dirty; in->all: every one). */
void erg__incr_cpm(crash_state *cs);

#endif
