/* maxflow.c: Dinic's max-flow with integer capacities and reusable storage.
 *
 * The frontier planner runs one or two max flows per plan (tens of thousands
 * per frontier) on the critical sub-DAG, so nothing here allocates after
 * erg__flow_init. Capacities are integers (the planner works in micro-joules,
 * where the reference rounds every bound to a multiple of 1e-6), which makes
 * the flow exact: the set of nodes reachable from the source after any
 * maximum flow is the source side of the unique minimal minimum cut.
 *
 * HOW IT WORKS: a breadth-first search backward from t gives every node its
 * distance to t over arcs with residual capacity (stopping once s has one); an
 * iterative DFS from s then pushes blocking flow along arcs whose head is one
 * step nearer t, advancing each node's current-arc pointer past saturated arcs.
 * Repeat until the backward search no longer reaches s; one forward search from
 * s then labels the source side the caller reads. Distances to t rather than
 * levels from s: every node the DFS enters can reach t when the phase starts,
 * so it meets few dead ends, where levels from s label the whole reachable set,
 * most of which leads nowhere (gpt3-175b A40 M = 12: 166 dead ends per phase
 * against about 6 augmenting paths); and the backward search that finds no
 * path is short (few nodes still reach t after a maximum flow), shorter than
 * the forward one that reaches t. */
#include "planner/maxflow.h"
#include "core/internal.h"

#include <string.h>

int erg__flow_init(erg__flow *f, int max_nodes, int max_arcs)
{
    memset(f, 0, sizeof(*f));
    f->max_nodes = max_nodes;
    f->max_arcs = max_arcs;
    f->head = erg__malloc(sizeof(int) * (size_t)max_nodes);
    f->level = erg__malloc(sizeof(int) * (size_t)max_nodes);
    f->dist = erg__malloc(sizeof(int) * (size_t)max_nodes);
    f->paths = erg__malloc(sizeof(int) * 8 * (size_t)max_nodes);
    f->path_off = erg__malloc(sizeof(int) * (ERG__FLOW_PATHS + 1));
    f->path_cut = erg__malloc(sizeof(int) * ERG__FLOW_PATHS);
    f->iter = erg__malloc(sizeof(int) * (size_t)max_nodes);
    /* one spare: the branch-free BFS writes past the last node it enqueues */
    f->queue = erg__malloc(sizeof(int) * (size_t)(max_nodes + 1));
    f->stack = erg__malloc(sizeof(int) * (size_t)(max_nodes + 1));
    f->next = erg__malloc(sizeof(int) * (size_t)max_arcs);
    f->to = erg__malloc(sizeof(int) * (size_t)max_arcs);
    f->res = erg__malloc(sizeof(int64_t) * (size_t)max_arcs);
    if (!f->head || !f->level || !f->dist || !f->paths || !f->path_off || !f->path_cut ||
        !f->iter || !f->queue || !f->stack || !f->next || !f->to || !f->res) {
        erg__flow_free(f);
        return -1;
    }
    return 0;
}

void erg__flow_free(erg__flow *f)
{
    erg__free(f->head);
    erg__free(f->level);
    erg__free(f->dist);
    erg__free(f->paths);
    erg__free(f->path_off);
    erg__free(f->path_cut);
    erg__free(f->iter);
    erg__free(f->queue);
    erg__free(f->stack);
    erg__free(f->next);
    erg__free(f->to);
    erg__free(f->res);
    memset(f, 0, sizeof(*f));
}

void erg__flow_reset(erg__flow *f, int nodes)
{
    f->nodes = nodes;
    f->arcs = 0;
    f->npaths = 0; /* arcs of another network */
    memset(f->head, 0xff, sizeof(int) * (size_t)nodes);
}

/* Levels from s over arcs with residual capacity: the reachable set, left in
 * queue[0 .. nreach - 1]. */
static void bfs(erg__flow *f, int s)
{
    int *level = f->level, *queue = f->queue;
    const int *head = f->head, *next = f->next, *to = f->to;
    const int64_t *res = f->res;
    memset(level, 0xff, sizeof(int) * (size_t)f->nodes);
    int qh = 0, qt = 0;
    level[s] = 0;
    queue[qt++] = s;
    while (qh < qt) {
        int u = queue[qh++];
        int lu = level[u] + 1;
        /* Branch-free: whether an arc opens a new node is unpredictable. */
        for (int a = head[u]; a >= 0; a = next[a]) {
            int v = to[a];
            int lv = level[v];
            int take = (res[a] > 0) & (lv < 0);
            level[v] = take ? lu : lv;
            queue[qt] = v;
            qt += take;
        }
    }
    f->nreach = qt;
}

/* Distances to t (in dist[]) over arcs with residual capacity, searched backward from t:
 * the arcs into a node are the reverses of its own. Stops once s has its distance: every
 * node nearer t than s is labelled by then, and the DFS needs no other. Its queue is the
 * DFS's stack, so level[] and queue[] keep the last forward search. */
static bool bfs_to_sink(erg__flow *f, int s, int t)
{
    int *dist = f->dist, *queue = f->stack;
    const int *head = f->head, *next = f->next, *to = f->to;
    const int64_t *res = f->res;
    memset(dist, 0xff, sizeof(int) * (size_t)f->nodes);
    int qh = 0, qt = 0;
    dist[t] = 0;
    queue[qt++] = t;
    while (qh < qt) {
        int v = queue[qh++];
        int dv = dist[v] + 1;
        for (int a = head[v]; a >= 0; a = next[a]) {
            int u = to[a]; /* a: v -> u, a ^ 1: u -> v */
            if (dist[u] < 0 && res[a ^ 1] > 0) {
                dist[u] = dv;
                if (u == s)
                    return true;
                queue[qt++] = u;
            }
        }
    }
    return false;
}

static int64_t flow_max(erg__flow *f, int s, int t, bool none_keeps)
{
    int64_t total = 0;
    if (s == t)
        return 0;
    int *dist = f->dist, *iter = f->iter, *stack = f->stack;
    const int *head = f->head, *next = f->next, *to = f->to;
    int64_t *res = f->res;
    bool recorded = false; /* the paths of an earlier max flow stay until this one finds one */
    for (;;) {
        if (!bfs_to_sink(f, s, t)) {
            if (none_keeps && total == 0)
                return -1; /* no augmenting path at all: level[], queue[] untouched */
            bfs(f, s);     /* the source side, for the caller */
            return total;
        }
        memcpy(iter, head, sizeof(int) * (size_t)f->nodes);
        /* Iterative DFS: stack holds the arcs of the current path. */
        int depth = 0, u = s;
        for (;;) {
            if (u == t) {
                int64_t push = INT64_MAX;
                for (int i = 0; i < depth; i++)
                    if (res[stack[i]] < push)
                        push = res[stack[i]];
                int cut = depth;
                for (int i = 0; i < depth; i++) {
                    int a = stack[i];
                    res[a] -= push;
                    res[a ^ 1] += push;
                    if (res[a] == 0 && cut == depth)
                        cut = i;
                }
                total += push;
                if (!recorded) {
                    f->npaths = f->paths_len = 0;
                    f->path_off[0] = 0;
                    recorded = true;
                }
                if (f->npaths < ERG__FLOW_PATHS && f->paths_len + depth <= 8 * f->max_nodes) {
                    memcpy(f->paths + f->paths_len, stack, sizeof(int) * (size_t)depth);
                    f->paths_len += depth;
                    f->path_cut[f->npaths] = f->path_off[f->npaths] + (cut < depth ? cut : 0);
                    f->path_off[++f->npaths] = f->paths_len;
                }
                /* Resume from the tail of the first saturated arc. */
                depth = cut;
                u = depth ? to[stack[depth - 1]] : s;
                continue;
            }
            int a = iter[u];
            int du = dist[u] - 1;
            for (; a >= 0; a = next[a]) {
                int v = to[a];
                if (res[a] > 0 && dist[v] == du)
                    break;
            }
            iter[u] = a;
            if (a >= 0) {
                stack[depth++] = a;
                u = to[a];
            } else {
                /* Dead end (its arcs toward t saturated in this phase): retreat and skip
                 * the arc that led here. */
                dist[u] = -1;
                if (depth == 0)
                    break;
                depth--;
                u = depth ? to[stack[depth - 1]] : s;
                iter[u] = next[iter[u]];
            }
        }
    }
}

int64_t erg__flow_max(erg__flow *f, int s, int t)
{
    return flow_max(f, s, t, false);
}

int64_t erg__flow_max_if_path(erg__flow *f, int s, int t)
{
    return flow_max(f, s, t, true);
}

int64_t erg__flow_replay(erg__flow *f, int s, int t, const unsigned char *active, int lim)
{
    const int *to = f->to, *p = f->paths;
    int64_t *res = f->res, total = 0;
    for (int k = 0; k < f->npaths; k++) {
        const int lo = f->path_off[k], hi = f->path_off[k + 1], c = p[f->path_cut[k]];
        /* the arc it saturated first: still saturated (the usual case) means no replay */
        if (c < 0 || c >= lim || !active[c >> 1] || res[c] <= 0)
            continue;
        int64_t push = INT64_MAX;
        int at = s;
        for (int i = lo; i < hi && push > 0; i++) {
            int a = p[i];
            if (a < 0 || a >= lim || !active[a >> 1] || to[a ^ 1] != at)
                push = 0;
            else if (res[a] < push)
                push = res[a];
            at = to[a];
        }
        if (push <= 0 || at != t)
            continue;
        for (int i = lo; i < hi; i++) {
            res[p[i]] -= push;
            res[p[i] ^ 1] += push;
        }
        total += push;
    }
    return total;
}

void erg__flow_source_side(const erg__flow *f, unsigned char *mark)
{
    const int *level = f->level;
    for (int v = 0; v < f->nodes; v++)
        mark[v] = level[v] >= 0;
}

void erg__flow_reachable(erg__flow *f, int s, int64_t min_res, unsigned char *mark)
{
    int *queue = f->queue;
    const int *head = f->head, *next = f->next, *to = f->to;
    const int64_t *res = f->res;
    memset(mark, 0, (size_t)f->nodes);
    int qh = 0, qt = 0;
    mark[s] = 1;
    queue[qt++] = s;
    while (qh < qt) {
        int u = queue[qh++];
        for (int a = head[u]; a >= 0; a = next[a]) {
            int v = to[a];
            if (!mark[v] && res[a] >= min_res) {
                mark[v] = 1;
                queue[qt++] = v;
            }
        }
    }
}
