/* maxflow.h: integer max-flow (Dinic) on a reusable arc list; planner-private. */
#ifndef ERGON_MAXFLOW_H
#define ERGON_MAXFLOW_H

#include <stdbool.h>
#include <stdint.h>

/* A flow network with arcs stored in pairs (arc a, reverse a^1). All arrays
 * are allocated once for the largest graph and reused: resetting costs
 * O(nodes), adding an arc O(1). */
typedef struct erg__flow {
    int nodes, arcs;           /* in use */
    int max_nodes, max_arcs;   /* allocated */
    int *head;                 /* [max_nodes] first arc out of a node, -1 = none */
    int *next;                 /* [max_arcs] next arc out of the same node */
    int *to;                   /* [max_arcs] head node of the arc */
    int64_t *res;              /* [max_arcs] residual capacity */
    int *level, *iter, *queue; /* [max_nodes] the last forward search (levels from the
                                  source, the nodes it reached) and the DFS's current arcs */
    int *dist;                 /* [max_nodes] distances to the sink (Dinic's phases) */
    int *stack;                /* [max_nodes + 1] DFS path (arcs); the backward search's queue */
    int nreach;                /* nodes the last search reached: queue[0 .. nreach - 1] */
    /* The augmenting paths of the last max flow that found any (cleared by a reset) as arc
     * lists, path k = paths[path_off[k] .. path_off[k + 1]), k < npaths: the first
     * ERG__FLOW_PATHS of them while they fit in 8 arcs per node. */
    int *paths, *path_off, npaths, paths_len;
    int *path_cut; /* [ERG__FLOW_PATHS] index in paths[] of the arc each path saturated first */
} erg__flow;

#define ERG__FLOW_PATHS 64 /* augmenting paths recorded per max flow */
int erg__flow_init(erg__flow *f, int max_nodes, int max_arcs);
void erg__flow_free(erg__flow *f);
void erg__flow_reset(erg__flow *f, int nodes);
/* Add u->v with capacity cap; returns the arc index (its reverse is idx^1).
 * Inline: the planner adds thousands of arcs per plan. */
static inline int erg__flow_add(erg__flow *f, int u, int v, int64_t cap)
{
    int a = f->arcs;
    int *to = f->to, *next = f->next, *head = f->head;
    int64_t *res = f->res;
    to[a] = v;
    res[a] = cap;
    next[a] = head[u];
    head[u] = a;
    to[a + 1] = u;
    res[a + 1] = 0;
    next[a + 1] = head[v];
    head[v] = a + 1;
    f->arcs = a + 2;
    return a;
}
/* Maximum flow from s to t on the current residual capacities (added to any
 * flow already there); returns the amount pushed. */
int64_t erg__flow_max(erg__flow *f, int s, int t);
/* erg__flow_max, except that when no augmenting path exists to begin with it returns -1 at
 * once and leaves level[], queue[] and nreach as the caller's last search left them (one
 * backward search instead of that and a forward one). */
int64_t erg__flow_max_if_path(erg__flow *f, int s, int t);
/* Push along every augmenting path the last max flow recorded that is still one: a chain of
 * arcs from s to t, each a persistent arc (index < lim, active[index / 2] set) with residual
 * capacity, as much as it carries. Returns the amount pushed (0: nothing changed). The
 * recorded arcs may come from another network: a list that is not such a chain is skipped. */
int64_t erg__flow_replay(erg__flow *f, int s, int t, const unsigned char *active, int lim);
/* Right after erg__flow_max(f, s, t): mark[v] = 1 for the nodes reachable
 * from s through arcs with residual > 0, i.e. erg__flow_reachable(f, s, 1,
 * mark), read off the last (failed) search of the max flow instead of a new
 * one. */
void erg__flow_source_side(const erg__flow *f, unsigned char *mark);
/* mark[v] = 1 for nodes reachable from s through arcs with residual >= min_res. */
void erg__flow_reachable(erg__flow *f, int s, int64_t min_res, unsigned char *mark);

#endif
