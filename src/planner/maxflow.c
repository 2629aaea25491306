/* maxflow.c: Dinic's max-flow with integer capacities and reusable storage.
 *
 * The frontier planner runs one or two max flows per plan (tens of thousands
 * per frontier) on the critical sub-DAG, so nothing here allocates after
 * erg__flow_init. Capacities are integers (the planner works in micro-joules,
 * where the reference rounds every bound to a multiple of 1e-6), which makes
 * the flow exact: the set of nodes reachable from the source after any
 * maximum flow is the source side of the unique minimal minimum cut.
 *
 * HOW IT WORKS: a BFS from s assigns levels over arcs with residual capacity;
 * an iterative DFS then pushes blocking flow along level-increasing arcs,
 * advancing each node's current-arc pointer past saturated arcs. Repeat
 * until t is unreachable. */
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
    f->iter = erg__malloc(sizeof(int) * (size_t)max_nodes);
    /* one spare: the branch-free BFS writes past the last node it enqueues */
    f->queue = erg__malloc(sizeof(int) * (size_t)(max_nodes + 1));
    f->stack = erg__malloc(sizeof(int) * (size_t)(max_nodes + 1));
    f->next = erg__malloc(sizeof(int) * (size_t)max_arcs);
    f->to = erg__malloc(sizeof(int) * (size_t)max_arcs);
    f->res = erg__malloc(sizeof(int64_t) * (size_t)max_arcs);
    if (!f->head || !f->level || !f->iter || !f->queue || !f->stack || !f->next || !f->to ||
        !f->res) {
        erg__flow_free(f);
        return -1;
    }
    return 0;
}

void erg__flow_free(erg__flow *f)
{
    erg__free(f->head);
    erg__free(f->level);
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
    memset(f->head, 0xff, sizeof(int) * (size_t)nodes);
}

static bool bfs(erg__flow *f, int s, int t)
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
    return level[t] >= 0;
}

int64_t erg__flow_max(erg__flow *f, int s, int t)
{
    int64_t total = 0;
    if (s == t)
        return 0;
    int *level = f->level, *iter = f->iter, *stack = f->stack;
    const int *head = f->head, *next = f->next, *to = f->to;
    int64_t *res = f->res;
    while (bfs(f, s, t)) {
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
                /* Resume from the tail of the first saturated arc. */
                depth = cut;
                u = depth ? to[stack[depth - 1]] : s;
                continue;
            }
            int a = iter[u];
            int lu = level[u] + 1;
            for (; a >= 0; a = next[a]) {
                int v = to[a];
                if (res[a] > 0 && level[v] == lu)
                    break;
            }
            iter[u] = a;
            if (a >= 0) {
                stack[depth++] = a;
                u = to[a];
            } else {
                /* Dead end: retreat and skip the arc that led here. */
                level[u] = -1;
                if (depth == 0)
                    break;
                depth--;
                u = depth ? to[stack[depth - 1]] : s;
                iter[u] = next[iter[u]];
            }
        }
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
