/* ve.c: exact block-level search by variable elimination, for block graphs whose
 * cross-segment edges make the segment frontier DP too large (docs/shard.md, Search). */
#include "shard/shard_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * When the costs are additive (roofline model or measured GEMMs, no imported segment
 * profiles) and memory cannot bind, the plan time is
 *     sum_b time[b][k_b] + sum_(a,b) edge[a,b][k_a][k_b]
 * i.e. a pairwise min-sum problem over the block graph. Variable elimination solves it
 * exactly: blocks are eliminated one at a time; eliminating v combines every factor whose
 * scope holds v into one table over their other blocks (min over k_v), remembering the
 * argmin; back-substitution in reverse order recovers the strategies. The cost is the sum,
 * over eliminations, of the product of the K of the combined scope, so the order matters:
 * greedy "min weight" (the smallest product first) keeps BERT-base on 1x8, whose forward
 * attention blocks are tied to backward blocks a dozen segments later (a segment frontier
 * of 3^80 states), at about 8,000 table entries in all. The order, the scopes, the index
 * strides and every table are laid out once when the costs are built (erg__shard_ve_prepare);
 * a search only runs the min-sum loops over them, without allocation.
 */

#define VE_MAX_SCOPE 16
#define VE_MAX_TABLE (1L << 16)
#define VE_MAX_TOTAL (1L << 22)
#define VE_MAX_IN 128
#define VE_MAX_BLOCKS 4096

typedef struct ve_factor {
    int n;                  /* scope size */
    int vars[VE_MAX_SCOPE]; /* block positions, mixed radix, first most significant */
    const double *tab;      /* input factors: block times or edge costs; else own */
    double *own;
    bool alive;
} ve_factor;

typedef struct ve_step {
    int v; /* block eliminated */
    int nin;
    int *in;   /* factors combined */
    int out;   /* factor produced (scope: the union minus v) */
    long size; /* entries of out */
    long *st;  /* [nin * (nscope + 1)]: stride of each out-scope var, then of v */
    long *sv;  /* [nin] stride of v in each input */
    long *sq;  /* [nscope * nin] stride of out-scope var q in input j at sq[q*nin + j] */
    int *rad;  /* [nscope] K of each out-scope var */
    long *inl; /* [nin] the inputs again, inside ve->ints (after compaction) */
    int Kv;
    unsigned char *arg; /* [size] argmin k_v */
} ve_step;

struct shard_ve {
    int nf;
    size_t capf;
    ve_factor *f;
    int nsteps;
    ve_step *steps;
    double work;
    /* After prepare, every table and index array lives in these two blocks (in the order a
     * search reads them), so that a search walks contiguous memory. */
    double *tabs;
    long *ints;
    int *fold; /* [N] edge factor that holds block b's own time, or -1 */
};

void erg__shard_ve_free(erg_shard *s)
{
    shard_ve *ve = s->ve;
    if (!ve)
        return;
    for (int i = 0; !ve->tabs && i < ve->nf; i++)
        erg__free(ve->f[i].own);
    for (int i = 0; i < ve->nsteps; i++) {
        erg__free(ve->steps[i].in);
        erg__free(ve->steps[i].st);
        if (!ve->ints) {
            erg__free(ve->steps[i].sv);
            erg__free(ve->steps[i].sq);
        }
        erg__free(ve->steps[i].rad);
        erg__free(ve->steps[i].arg);
    }
    erg__free(ve->f);
    erg__free(ve->steps);
    erg__free(ve->tabs);
    erg__free(ve->ints);
    erg__free(ve->fold);
    erg__free(ve);
    s->ve = NULL;
}

static int K_of(const erg_shard *s, int b)
{
    return s->pbs[s->order[b]].K;
}
static int a_word(int b)
{
    return b / 64;
}
static uint64_t a_bit(int b)
{
    return (uint64_t)1 << (b % 64);
}

static ve_factor *add_factor(shard_ve *ve)
{
    if (!ERG__GROW(ve->f, ve->capf, ve->nf + 1, 64))
        return NULL;
    ve_factor *f = &ve->f[ve->nf++];
    memset(f, 0, sizeof *f);
    f->alive = true;
    return f;
}

/* Elimination graph: adjacency bitsets (blocks sharing a factor) and, per block, the
 * product of the K of its block and its neighbours (the size of its elimination table). */
typedef struct ve_graph {
    int n, words;
    uint64_t *adj; /* [n * words] */
    double *weight;
} ve_graph;

static void graph_weight(const erg_shard *s, ve_graph *G, int v)
{
    double w = K_of(s, v);
    int deg = 0;
    const uint64_t *row = G->adj + (size_t)v * G->words;
    for (int x = 0; x < G->words; x++)
        for (uint64_t bits = row[x]; bits; bits &= bits - 1) {
            int u = x * 64 + __builtin_ctzll(bits);
            w *= K_of(s, u);
            deg++;
        }
    G->weight[v] = deg > VE_MAX_SCOPE ? INFINITY : w;
}

static void graph_link(ve_graph *G, int a, int b)
{
    if (a == b)
        return;
    G->adj[(size_t)a * G->words + a_word(b)] |= a_bit(b);
    G->adj[(size_t)b * G->words + a_word(a)] |= a_bit(a);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* (Re)load the input tables from the costs: block b's table is time + lambda * memory (a
 * Lagrangian weight for the memory budget; 0 = time only), folded into edge fold[b] when it
 * has one; edge tables are the resharding costs. Needs ve->tabs (compact). */
static void load_inputs(const erg_shard *s, shard_ve *ve, double lambda)
{
    int N = s->norder;
    for (int b = 0; b < N; b++) {
        const pblock *p = &s->pbs[s->order[b]];
        double *t = (double *)ve->f[b].tab;
        for (int k = 0; k < p->K; k++)
            t[k] = p->time_s[k] + lambda * p->mem_bytes[k];
    }
    for (int e = 0; e < s->nedges; e++) {
        ve_factor *E = &ve->f[N + e];
        size_t KK = (size_t)K_of(s, E->vars[0]) * (size_t)K_of(s, E->vars[1]);
        memcpy((double *)E->tab, s->edges[e].cost_s, KK * sizeof(double));
    }
    for (int b = 0; b < N; b++) {
        if (ve->fold[b] < 0)
            continue;
        ve_factor *E = &ve->f[ve->fold[b]];
        double *t = (double *)E->tab;
        int Kb = K_of(s, E->vars[1]);
        for (int ka = 0; ka < K_of(s, E->vars[0]); ka++)
            for (int kb = 0; kb < Kb; kb++)
                t[ka * Kb + kb] += ve->f[b].tab[E->vars[0] == b ? ka : kb];
    }
}

void erg__shard_ve_set_lambda(const erg_shard *s, double lambda)
{
    load_inputs(s, s->ve, lambda);
}

/* Copy the input tables, the produced tables and the per-step index arrays into two
 * contiguous blocks (ve->tabs, ve->ints) and free the scattered copies. Input factors then
 * hold a copy of the costs, so prepare runs again whenever costs change. */
static int compact(const erg_shard *s, shard_ve *ve)
{
    int N = s->norder;
    size_t nd = 0, nl = 0;
    /* Each block's own time (unary factor i < N) is added into the table of one edge that
     * holds the block (factors N..N+nedges-1), when there is one, so that the search sums
     * one table fewer per entry; fold[i] is that edge factor, or -1. */
    int *fold = erg__malloc((size_t)(ve->nf + 1) * sizeof(int));
    if (!fold)
        return -1;
    for (int i = 0; i < ve->nf; i++)
        fold[i] = -1;
    for (int e = 0; e < s->nedges; e++)
        for (int q = 0; q < 2; q++) {
            int b = ve->f[N + e].vars[q];
            if (fold[b] < 0)
                fold[b] = N + e;
        }
    for (int i = 0; i < ve->nf; i++) {
        const ve_factor *f = &ve->f[i];
        long size = 1;
        for (int q = 0; q < f->n; q++)
            size *= K_of(s, f->vars[q]);
        nd += (size_t)size;
    }
    for (int i = 0; i < ve->nsteps; i++) {
        const ve_step *S = &ve->steps[i];
        int n = ve->f[S->out].n;
        nl += (size_t)S->nin * (size_t)(n + 1) + (size_t)n + (size_t)S->nin;
    }
    ve->tabs = erg__malloc((nd + 1) * sizeof(double));
    ve->ints = erg__malloc((nl + 1) * sizeof(long));
    if (!ve->tabs || !ve->ints) {
        erg__free(ve->tabs);
        erg__free(ve->ints);
        ve->tabs = NULL;
        ve->ints = NULL;
        erg__free(fold);
        return -1;
    }
    size_t at = 0, al = 0;
    for (int i = 0; i < ve->nf; i++) {
        ve_factor *f = &ve->f[i];
        long size = 1;
        for (int q = 0; q < f->n; q++)
            size *= K_of(s, f->vars[q]);
        memcpy(ve->tabs + at, f->tab, (size_t)size * sizeof(double));
        f->tab = ve->tabs + at;
        at += (size_t)size;
    }
    ve->fold = fold;
    load_inputs(s, ve, 0);
    for (int i = 0; i < ve->nf; i++) {
        erg__free(ve->f[i].own);
        ve->f[i].own = NULL;
    }
    for (int i = 0; i < ve->nsteps; i++) {
        ve_step *S = &ve->steps[i];
        int n = ve->f[S->out].n;
        ve->f[S->out].own = (double *)ve->f[S->out].tab; /* inside ve->tabs: not freed */
        int nin = 0;
        for (int j = 0; j < S->nin; j++)
            nin += !(S->in[j] < N && fold[S->in[j]] >= 0);
        long *sv = ve->ints + al, *sq = sv + nin, *in = sq + (size_t)n * nin;
        int jj = 0;
        for (int j = 0; j < S->nin; j++) {
            if (S->in[j] < N && fold[S->in[j]] >= 0)
                continue;
            sv[jj] = S->sv[j];
            for (int q = 0; q < n; q++)
                sq[(size_t)q * nin + jj] = S->sq[(size_t)q * S->nin + j];
            in[jj] = S->in[j];
            jj++;
        }
        al += (size_t)nin * (size_t)(n + 1) + (size_t)nin;
        erg__free(S->sv);
        erg__free(S->sq);
        S->sv = sv;
        S->sq = sq;
        S->inl = in;
        S->nin = nin;
    }
    (void)nl;
    return 0;
}

erg_status erg__shard_ve_prepare(erg_shard *s, erg_error *err)
{
    erg__shard_ve_free(s);
    int N = s->norder;
    shard_ve *ve = erg__calloc(1, sizeof *ve);
    bool *done = erg__calloc((size_t)N + 1, sizeof(bool));
    ve_graph G = {0};
    if (!ve || !done) {
        erg__free(ve);
        erg__free(done);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    s->ve = ve;
    if (N > VE_MAX_BLOCKS)
        goto toobig;
    ve->steps = erg__calloc((size_t)N + 1, sizeof(ve_step));
    if (!ve->steps)
        goto oom;
    for (int b = 0; b < N; b++) {
        if (K_of(s, b) > 255)
            goto toobig;
        ve_factor *f = add_factor(ve);
        if (!f)
            goto oom;
        f->n = 1;
        f->vars[0] = b;
        f->tab = s->pbs[s->order[b]].time_s;
    }
    for (int e = 0; e < s->nedges; e++) {
        ve_factor *f = add_factor(ve);
        if (!f)
            goto oom;
        f->n = 2;
        f->vars[0] = s->edges[e].a;
        f->vars[1] = s->edges[e].b;
        f->tab = s->edges[e].cost_s;
    }
    G.n = N;
    G.words = (N + 63) / 64;
    G.adj = erg__calloc((size_t)N * (size_t)G.words + 1, sizeof(uint64_t));
    G.weight = erg__malloc((size_t)(N + 1) * sizeof(double));
    if (!G.adj || !G.weight)
        goto oom;
    for (int e = 0; e < s->nedges; e++)
        graph_link(&G, s->edges[e].a, s->edges[e].b);
    for (int v = 0; v < N; v++)
        graph_weight(s, &G, v);
    double total = 0;
    for (int step = 0; step < N; step++) {
        /* Greedy min weight: the block whose elimination table is smallest. */
        int best = -1, bn = 0, bvars[VE_MAX_SCOPE];
        double bw = INFINITY;
        for (int v = 0; v < N; v++)
            if (!done[v] && G.weight[v] < bw) {
                bw = G.weight[v];
                best = v;
            }
        if (best < 0 || bw / K_of(s, best) > VE_MAX_TABLE)
            goto toobig;
        total += bw;
        if (total > VE_MAX_TOTAL)
            goto toobig;
        const uint64_t *row = G.adj + (size_t)best * G.words;
        for (int x = 0; x < G.words; x++)
            for (uint64_t bits = row[x]; bits; bits &= bits - 1)
                bvars[bn++] = x * 64 + __builtin_ctzll(bits);
        /* Eliminating best connects its neighbours and removes it from the graph. */
        for (int i = 0; i < bn; i++) {
            for (int j = i + 1; j < bn; j++)
                graph_link(&G, bvars[i], bvars[j]);
            G.adj[(size_t)bvars[i] * G.words + a_word(best)] &= ~a_bit(best);
        }
        for (int i = 0; i < bn; i++)
            graph_weight(s, &G, bvars[i]);
        qsort(bvars, (size_t)bn, sizeof(int), cmp_int);
        ve_step *S = &ve->steps[ve->nsteps++];
        S->v = best;
        S->in = erg__malloc((size_t)(ve->nf + 1) * sizeof(int));
        if (!S->in)
            goto oom;
        for (int i = 0; i < ve->nf; i++) {
            ve_factor *f = &ve->f[i];
            if (!f->alive)
                continue;
            for (int j = 0; j < f->n; j++)
                if (f->vars[j] == best) {
                    S->in[S->nin++] = i;
                    f->alive = false;
                    break;
                }
        }
        if (S->nin > VE_MAX_IN)
            goto toobig;
        ve_factor *o = add_factor(ve);
        if (!o)
            goto oom;
        S->out = (int)(o - ve->f);
        o->n = bn;
        memcpy(o->vars, bvars, sizeof bvars);
        S->size = 1;
        for (int q = 0; q < bn; q++)
            S->size *= K_of(s, bvars[q]);
        o->own = erg__malloc((size_t)S->size * sizeof(double));
        S->arg = erg__malloc((size_t)S->size);
        S->st = erg__calloc((size_t)S->nin * (size_t)(bn + 1), sizeof(long));
        if (!o->own || !S->arg || !S->st)
            goto oom;
        o->tab = o->own;
        for (int j = 0; j < S->nin; j++) {
            const ve_factor *f = &ve->f[S->in[j]];
            long stride = 1;
            for (int q = f->n - 1; q >= 0; q--) {
                int u = f->vars[q];
                long *slot = &S->st[(size_t)j * (bn + 1) + bn]; /* v */
                for (int r = 0; r < bn; r++)
                    if (bvars[r] == u)
                        slot = &S->st[(size_t)j * (bn + 1) + r];
                *slot = stride;
                stride *= K_of(s, u);
            }
        }
        S->sv = erg__malloc((size_t)S->nin * sizeof(long));
        S->sq = erg__malloc((size_t)(bn * S->nin + 1) * sizeof(long));
        S->rad = erg__malloc((size_t)(bn + 1) * sizeof(int));
        if (!S->sv || !S->sq || !S->rad)
            goto oom;
        for (int j = 0; j < S->nin; j++) {
            S->sv[j] = S->st[(size_t)j * (bn + 1) + bn];
            for (int q = 0; q < bn; q++)
                S->sq[q * S->nin + j] = S->st[(size_t)j * (bn + 1) + q];
        }
        for (int q = 0; q < bn; q++)
            S->rad[q] = K_of(s, bvars[q]);
        S->Kv = K_of(s, best);
        /* Touch the tables now, so that a search does not page-fault on them. */
        memset(o->own, 0, (size_t)S->size * sizeof(double));
        memset(S->arg, 0, (size_t)S->size);
        done[best] = true;
    }
    ve->work = total;
    if (compact(s, ve))
        goto oom;
    erg__free(done);
    erg__free(G.adj);
    erg__free(G.weight);
    return ERG_OK;
toobig:
    erg__free(done);
    erg__free(G.adj);
    erg__free(G.weight);
    erg__shard_ve_free(s);
    return ERG_OK;
oom:
    erg__free(done);
    erg__free(G.adj);
    erg__free(G.weight);
    erg__shard_ve_free(s);
    return erg_error_set(err, ERG_ENOMEM, "out of memory");
}

double erg__shard_ve_search(const erg_shard *s, size_t *k)
{
    shard_ve *ve = s->ve;
    double constant = 0;
    long idx[VE_MAX_IN];
    const double *tabs[VE_MAX_IN];
    int d[VE_MAX_SCOPE];
    for (int si = 0; si < ve->nsteps; si++) {
        const ve_step *S = &ve->steps[si];
        ve_factor *o = &ve->f[S->out];
        int n = o->n, nin = S->nin, Kv = S->Kv;
        const long *sv = S->sv, *sq = S->sq;
        const int *rad = S->rad;
        double *out = o->own;
        unsigned char *arg = S->arg;
        for (int j = 0; j < nin; j++) {
            tabs[j] = ve->f[S->inl[j]].tab;
            idx[j] = 0;
        }
        for (int q = 0; q < n; q++)
            d[q] = 0;
        for (long pos = 0; pos < S->size; pos++) {
            double best = INFINITY;
            int barg = 0;
            for (int kv = 0; kv < Kv; kv++) {
                double sum = 0;
                for (int j = 0; j < nin; j++)
                    sum += tabs[j][idx[j] + kv * sv[j]];
                if (sum < best) {
                    best = sum;
                    barg = kv;
                }
            }
            out[pos] = best;
            arg[pos] = (unsigned char)barg;
            /* next assignment of the out scope (last var fastest) */
            for (int q = n - 1; q >= 0; q--) {
                const long *st = sq + (size_t)q * nin;
                for (int j = 0; j < nin; j++)
                    idx[j] += st[j];
                if (++d[q] < rad[q])
                    break;
                for (int j = 0; j < nin; j++)
                    idx[j] -= st[j] * rad[q];
                d[q] = 0;
            }
        }
        if (n == 0)
            constant += out[0];
    }
    /* Back-substitution: each step's scope is eliminated later, so already assigned. */
    for (int si = ve->nsteps - 1; si >= 0; si--) {
        const ve_step *S = &ve->steps[si];
        const ve_factor *o = &ve->f[S->out];
        long pos = 0;
        for (int q = 0; q < o->n; q++)
            pos = pos * S->rad[q] + (long)k[o->vars[q]];
        k[S->v] = S->arg[pos];
    }
    return constant;
}
