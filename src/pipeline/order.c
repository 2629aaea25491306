/* order.c: per-rank instruction orders: building and validating them,
 * PyTorch's compute_only CSV (read and write), a readable text form. */
#include "core/internal.h"
#include "pipeline/order_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define ERG_MAX_ORDER_INSTRS (1 << 24)
#define ERG_MAX_CSV_BYTES ((size_t)256 << 20)

void erg_order_free(erg_order *o)
{
    if (!o)
        return;
    erg__free(o->stage_rank);
    erg__free(o->off);
    erg__free(o->instrs);
    erg__free(o->soff);
    erg__free(o->steps);
    erg__free(o->cell);
    erg__free(o->line);
    erg__free(o->name);
    erg__free(o);
}

static const char kind_letter[] = {'F', 'B', 'I', 'W'};

erg_instr *erg_instr_array_new(size_t n)
{
    return n ? erg__calloc(n, sizeof(erg_instr)) : NULL;
}

void erg_instr_get(const erg_instr *instrs, size_t i, int out[ERG_INSTR_NUM_FIELDS])
{
    const erg_instr *in = &instrs[i];
    out[0] = (int)in->kind;
    out[1] = in->stage;
    out[2] = in->microbatch;
    out[3] = (int)in->kind2;
    out[4] = in->stage2;
    out[5] = in->microbatch2;
}

void erg_instr_format(erg_instr in, char *buf, size_t size)
{
    if (!buf || !size)
        return;
    if (in.microbatch < 0) {
        buf[0] = 0;
        return;
    }
    if (in.kind == ERG_OVERLAP_F_B) {
        char k2 = (unsigned)in.kind2 < 4 ? kind_letter[in.kind2] : '?';
        snprintf(buf, size, "(%dF%d;%d%c%d)OVERLAP_F_B", in.stage, in.microbatch, in.stage2, k2,
                 in.microbatch2);
        return;
    }
    char k = (unsigned)in.kind < 4 ? kind_letter[in.kind] : '?';
    snprintf(buf, size, "%d%c%d", in.stage, k, in.microbatch);
}

/* Where an instruction is, for messages: "name:line:cell (text)". */
static void where(const char *name, const int *lines, int rank, int cell, erg_instr in, char *buf,
                  size_t size)
{
    char t[64];
    erg_instr_format(in, t, sizeof t);
    snprintf(buf, size, "%s:%d:%d (%s)", name && *name ? name : "schedule",
             lines ? lines[rank] : rank + 1, cell, t);
}

erg_status erg__order_build(erg_schedule_kind kind, int P, int M, erg__steps *steps,
                            const char *name, const int *lines, erg_order **out, erg_error *err)
{
    *out = NULL;
    char w[192];
    if (P < 1)
        return erg_error_set(err, ERG_EPARSE, "%s: no ranks (an empty schedule)",
                             name && *name ? name : "schedule");
    long n = 0, ns = 0;
    int S = 0, maxmb = -1;
    for (int r = 0; r < P; r++) {
        ns += steps[r].n;
        for (int k = 0; k < steps[r].n; k++) {
            erg_instr in = steps[r].v[k];
            if (in.microbatch < 0)
                continue;
            n++;
            int parts = in.kind == ERG_OVERLAP_F_B ? 2 : 1;
            for (int p = 0; p < parts; p++) {
                int s = p ? in.stage2 : in.stage, mb = p ? in.microbatch2 : in.microbatch;
                if (s < 0 || mb < 0 || s >= (1 << 20) || mb >= (1 << 22)) {
                    where(name, lines, r, k + 1, in, w, sizeof w);
                    return erg_error_set(err, ERG_EPARSE, "%s: stage or microbatch out of range",
                                         w);
                }
                if (s + 1 > S)
                    S = s + 1;
                if (mb > maxmb)
                    maxmb = mb;
            }
        }
        if (ns > ERG_MAX_ORDER_INSTRS)
            return erg_error_set(err, ERG_EPARSE, "%s: more than %d actions",
                                 name && *name ? name : "schedule", ERG_MAX_ORDER_INSTRS);
    }
    if (M <= 0)
        M = maxmb + 1;
    if (n == 0 || M <= 0)
        return erg_error_set(err, ERG_EPARSE, "%s: no actions", name && *name ? name : "schedule");
    if (maxmb >= M)
        return erg_error_set(err, ERG_EINTERNAL, "microbatch %d >= M=%d", maxmb, M);
    if ((long long)S * M * 4 > ERG_MAX_ORDER_INSTRS * 4LL)
        return erg_error_set(err, ERG_EPARSE, "%s: %d stages x %d microbatches is too large",
                             name && *name ? name : "schedule", S, M);
    erg_order *o = erg__calloc(1, sizeof(*o));
    if (!o)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    o->kind = kind;
    o->P = P;
    o->S = S;
    o->M = M;
    o->stage_rank = erg__calloc((size_t)S, sizeof(int));
    o->off = erg__calloc((size_t)P + 1, sizeof(int));
    o->soff = erg__calloc((size_t)P + 1, sizeof(int));
    o->instrs = erg__calloc((size_t)n, sizeof(erg_instr));
    o->steps = erg__calloc((size_t)ns + 1, sizeof(erg_instr));
    o->cell = erg__calloc((size_t)n, sizeof(int));
    o->line = erg__calloc((size_t)P, sizeof(int));
    o->name = erg__strdup(name ? name : "");
    /* seen[(s*4 + kind)*M + mb]: where (position+1) each part was seen */
    int *seen = erg__calloc((size_t)S * 4 * M, sizeof(int));
    erg_status st = ERG_OK;
    if (!o->stage_rank || !o->off || !o->soff || !o->instrs || !o->steps || !o->cell || !o->line ||
        !o->name || !seen) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    for (int s = 0; s < S; s++)
        o->stage_rank[s] = -1;
    int k = 0, ks = 0;
    for (int r = 0; r < P; r++) {
        o->line[r] = lines ? lines[r] : r + 1;
        o->off[r] = k;
        o->soff[r] = ks;
        for (int c = 0; c < steps[r].n; c++) {
            erg_instr in = steps[r].v[c];
            o->steps[ks++] = in.microbatch < 0 ? ERG__IDLE : in;
            if (in.microbatch < 0)
                continue;
            int parts = in.kind == ERG_OVERLAP_F_B ? 2 : 1;
            where(name, lines, r, c + 1, in, w, sizeof w);
            if (parts == 2 && (in.kind2 != ERG_BACKWARD && in.kind2 != ERG_BACKWARD_INPUT)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s: OVERLAP_F_B must pair a forward with a backward (B or I)",
                                   w);
                goto fail;
            }
            for (int p = 0; p < parts; p++) {
                int s = p ? in.stage2 : in.stage, mb = p ? in.microbatch2 : in.microbatch;
                erg_instr_kind kd = p ? in.kind2 : parts == 2 ? ERG_FORWARD : in.kind;
                if (o->stage_rank[s] >= 0 && o->stage_rank[s] != r) {
                    st = erg_error_set(err, ERG_EPARSE, "%s: stage %d is on rank %d and rank %d", w,
                                       s, o->stage_rank[s], r);
                    goto fail;
                }
                o->stage_rank[s] = r;
                int *sv = seen + ((size_t)s * 4) * M;
                if (sv[kd * M + mb]) {
                    st = erg_error_set(err, ERG_EPARSE, "%s: repeated action (also at cell %d)", w,
                                       sv[kd * M + mb]);
                    goto fail;
                }
                if ((kd == ERG_BACKWARD || kd == ERG_BACKWARD_INPUT) &&
                    (sv[ERG_BACKWARD * M + mb] || sv[ERG_BACKWARD_INPUT * M + mb])) {
                    st = erg_error_set(err, ERG_EPARSE,
                                       "%s: a second backward of stage %d microbatch %d", w, s, mb);
                    goto fail;
                }
                if (kd == ERG_BACKWARD_WEIGHT && sv[ERG_BACKWARD * M + mb]) {
                    st = erg_error_set(err, ERG_EPARSE,
                                       "%s: W after a full backward B of the same microbatch", w);
                    goto fail;
                }
                if (kd != ERG_FORWARD && !sv[ERG_FORWARD * M + mb]) {
                    st = erg_error_set(err, ERG_EPARSE, "%s: backward before its forward %dF%d", w,
                                       s, mb);
                    goto fail;
                }
                if (kd == ERG_BACKWARD_WEIGHT && !sv[ERG_BACKWARD_INPUT * M + mb]) {
                    st = erg_error_set(err, ERG_EPARSE, "%s: W before its I %dI%d", w, s, mb);
                    goto fail;
                }
                sv[kd * M + mb] = c + 1;
            }
            o->cell[k] = c + 1;
            o->instrs[k++] = in;
        }
    }
    o->off[P] = k;
    o->soff[P] = ks;
    /* Completeness: every stage has a rank, M forwards, and for each
     * microbatch a B or an I with its W. */
    for (int s = 0; s < S; s++) {
        const char *nm = name && *name ? name : "schedule";
        if (o->stage_rank[s] < 0) {
            st = erg_error_set(err, ERG_EPARSE, "%s: stage %d has no actions (missing stage)", nm,
                               s);
            goto fail;
        }
        int *sv = seen + ((size_t)s * 4) * M;
        int r = o->stage_rank[s];
        for (int mb = 0; mb < M; mb++) {
            const char *miss = NULL;
            if (!sv[ERG_FORWARD * M + mb])
                miss = "F";
            else if (!sv[ERG_BACKWARD * M + mb] && !sv[ERG_BACKWARD_INPUT * M + mb])
                miss = "B (or I and W)";
            else if (sv[ERG_BACKWARD_INPUT * M + mb] && !sv[ERG_BACKWARD_WEIGHT * M + mb])
                miss = "W";
            if (miss) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%d: missing action: stage %d microbatch %d has no %s "
                                   "(M=%d microbatches)",
                                   nm, o->line[r], s, mb, miss, M);
                goto fail;
            }
        }
    }
    o->V = S % P == 0 ? S / P : 0;
    erg__free(seen);
    *out = o;
    return ERG_OK;
fail:
    erg__free(seen);
    erg_order_free(o);
    return st;
}

erg_status erg_order_new(const erg_schedule *sched, int P, int M, erg_order **out, erg_error *err)
{
    *out = NULL;
    if (!sched)
        return erg_error_set(err, ERG_EINVAL, "NULL schedule");
    if (sched->kind == ERG_SCHED_FILE) {
        const erg_order *src = sched->order;
        if (!src)
            return erg_error_set(err, ERG_EINVAL, "a file schedule without an order");
        if ((P && P != src->P) || (M && M != src->M))
            return erg_error_set(err, ERG_EINVAL,
                                 "the schedule file %s has %d ranks and %d microbatches, not "
                                 "%d and %d",
                                 src->name, src->P, src->M, P, M);
        erg__steps *st = erg__calloc((size_t)src->P, sizeof(erg__steps));
        if (!st)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        erg_status s = ERG_OK;
        for (int r = 0; r < src->P && !s; r++)
            for (int k = src->soff[r]; k < src->soff[r + 1]; k++)
                if (erg__steps_push(&st[r], src->steps[k])) {
                    s = erg_error_set(err, ERG_ENOMEM, "out of memory");
                    break;
                }
        if (!s)
            s = erg__order_build(ERG_SCHED_FILE, src->P, src->M, st, src->name, src->line, out,
                                 err);
        for (int r = 0; r < src->P; r++)
            erg__steps_free(&st[r]);
        erg__free(st);
        return s;
    }
    int V = erg_schedule_chunks(sched);
    if (P < 1 || M < 1 || V < 1 || (long long)P * V * M * 3 > ERG_MAX_ORDER_INSTRS)
        return erg_error_set(err, ERG_EINVAL,
                             "pipeline size out of range: P=%d ranks, V=%d chunks, M=%d "
                             "microbatches",
                             P, V, M);
    erg__steps *st = erg__calloc((size_t)P, sizeof(erg__steps));
    if (!st)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    erg_status s = erg__generate(sched, P, V, M, st, err);
    if (!s) {
        s = erg__order_build(sched->kind, P, M, st, erg_schedule_name(sched->kind), NULL, out, err);
        if (!s && (*out)->S != P * V) {
            int got = (*out)->S;
            erg_order_free(*out);
            *out = NULL;
            s = erg_error_set(err, ERG_EINTERNAL, "schedule %s gave %d stages, not P*V = %d",
                              erg_schedule_name(sched->kind), got, P * V);
        }
        if (!s)
            (*out)->V = V;
    }
    for (int r = 0; r < P; r++)
        erg__steps_free(&st[r]);
    erg__free(st);
    return s;
}

int erg_order_num_ranks(const erg_order *o)
{
    return o->P;
}
int erg_order_num_stages(const erg_order *o)
{
    return o->S;
}
int erg_order_num_microbatches(const erg_order *o)
{
    return o->M;
}
erg_schedule_kind erg_order_kind(const erg_order *o)
{
    return o->kind;
}
int erg_order_stage_rank(const erg_order *o, int stage)
{
    return stage < 0 || stage >= o->S ? -1 : o->stage_rank[stage];
}
int erg_order_rank(const erg_order *o, int rank, const erg_instr **instrs)
{
    if (rank < 0 || rank >= o->P) {
        *instrs = NULL;
        return 0;
    }
    *instrs = o->instrs + o->off[rank];
    return o->off[rank + 1] - o->off[rank];
}
int erg_order_rank_steps(const erg_order *o, int rank, const erg_instr **steps)
{
    if (rank < 0 || rank >= o->P) {
        *steps = NULL;
        return 0;
    }
    *steps = o->steps + o->soff[rank];
    return o->soff[rank + 1] - o->soff[rank];
}

erg_status erg_order_format(const erg_order *o, int torch_csv, char **out, erg_error *err)
{
    erg__buf b = {0};
    char t[96];
    erg_status st = ERG_OK;
    *out = NULL;
    if (!torch_csv)
        st = erg__buf_printf(&b, "# schedule %s: P=%d ranks, S=%d stages, M=%d microbatches\n",
                             erg_schedule_name(o->kind), o->P, o->S, o->M);
    for (int r = 0; r < o->P && !st; r++) {
        if (!torch_csv)
            st = erg__buf_printf(&b, "rank %d:", r);
        const erg_instr *v;
        int n = torch_csv ? erg_order_rank_steps(o, r, &v) : erg_order_rank(o, r, &v);
        for (int k = 0; k < n && !st; k++) {
            erg_instr_format(v[k], t, sizeof t);
            st = erg__buf_printf(&b, torch_csv ? (k ? ",%s" : "%s") : " %s", t);
        }
        if (!st)
            st = erg__buf_append(&b, "\n", 1);
    }
    if (st) {
        erg__buf_free(&b);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    if (!b.data) {
        b.data = erg__strdup("");
        if (!b.data)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    *out = b.data;
    return ERG_OK;
}

erg_status erg_order_write(const erg_order *o, int torch_csv, const char *path, erg_error *err)
{
    if (!o || !path)
        return erg_error_set(err, ERG_EINVAL, "erg_order_write: NULL argument");
    char *text = NULL;
    erg_status st = erg_order_format(o, torch_csv, &text, err);
    if (!st)
        st = erg__write_file(path, text, strlen(text), err);
    erg__free(text);
    return st;
}

/* ---- the compute_only CSV reader ---- */

/* Parse "<stage><F|B|I|W><microbatch>" (whole cell). 0 ok, -1 not of this
 * form, -2 a non-compute action (SEND_F, RECV_B, UNSHARD, ...). */
static int parse_simple(const char *s, int *stage, erg_instr_kind *kind, int *mb)
{
    const char *p = s;
    if (!isdigit((unsigned char)*p))
        return -1;
    long v = 0;
    while (isdigit((unsigned char)*p)) {
        v = v * 10 + (*p++ - '0');
        if (v > 1000000)
            return -1;
    }
    static const char *noncompute[] = {"UNSHARD", "RESHARD", "REDUCE_GRAD", "SEND_F",
                                       "RECV_F",  "SEND_B",  "RECV_B"};
    for (size_t i = 0; i < ERG__ARRAY_LEN(noncompute); i++)
        if (!strncmp(p, noncompute[i], strlen(noncompute[i])))
            return -2;
    const char *kp = strchr("FBIW", *p);
    if (!*p || !kp)
        return -1;
    *kind = (erg_instr_kind)(kp - "FBIW");
    p++;
    if (!isdigit((unsigned char)*p))
        return -1;
    long m = 0;
    while (isdigit((unsigned char)*p)) {
        m = m * 10 + (*p++ - '0');
        if (m > 10000000)
            return -1;
    }
    if (*p)
        return -1;
    *stage = (int)v;
    *mb = (int)m;
    return 0;
}

static erg_status parse_cell(const char *cell, const char *name, long line, int col, erg_instr *out,
                             erg_error *err)
{
    if (!*cell) {
        *out = ERG__IDLE;
        return ERG_OK;
    }
    int s, m, rc;
    erg_instr_kind k;
    if (cell[0] == '(') {
        const char *close = strchr(cell, ')');
        const char *semi = strchr(cell, ';');
        if (!close || strcmp(close + 1, "OVERLAP_F_B"))
            return erg_error_set(err, ERG_EPARSE,
                                 "%s:%ld:%d: unknown action '%s' (a group must end in "
                                 ")OVERLAP_F_B)",
                                 name, line, col, cell);
        if (!semi || semi > close)
            return erg_error_set(err, ERG_EPARSE,
                                 "%s:%ld:%d: OVERLAP_F_B needs two actions '(aFm;bBn)', got '%s'",
                                 name, line, col, cell);
        char a[64], b[64];
        size_t la = (size_t)(semi - cell - 1), lb = (size_t)(close - semi - 1);
        if (la >= sizeof a || lb >= sizeof b)
            return erg_error_set(err, ERG_EPARSE, "%s:%ld:%d: unknown action '%.60s...'", name,
                                 line, col, cell);
        memcpy(a, cell + 1, la);
        a[la] = 0;
        memcpy(b, semi + 1, lb);
        b[lb] = 0;
        int s2, m2;
        erg_instr_kind k2;
        if (parse_simple(a, &s, &k, &m) || parse_simple(b, &s2, &k2, &m2))
            return erg_error_set(err, ERG_EPARSE, "%s:%ld:%d: unknown action in '%s'", name, line,
                                 col, cell);
        /* PyTorch writes (F;B); accept either order, store forward first. */
        if (k2 == ERG_FORWARD && k != ERG_FORWARD) {
            int ts = s, tm = m;
            erg_instr_kind tk = k;
            s = s2, m = m2, k = k2;
            s2 = ts, m2 = tm, k2 = tk;
        }
        if (k != ERG_FORWARD || (k2 != ERG_BACKWARD && k2 != ERG_BACKWARD_INPUT))
            return erg_error_set(err, ERG_EPARSE,
                                 "%s:%ld:%d: OVERLAP_F_B must pair a forward with a backward (B "
                                 "or I), got '%s'",
                                 name, line, col, cell);
        *out = (erg_instr){ERG_OVERLAP_F_B, m, s, k2, s2, m2};
        return ERG_OK;
    }
    rc = parse_simple(cell, &s, &k, &m);
    if (rc == -2)
        return erg_error_set(err, ERG_EPARSE,
                             "%s:%ld:%d: '%s' is not a compute action (a compute_only CSV "
                             "holds F, B, I, W and OVERLAP_F_B only)",
                             name, line, col, cell);
    if (rc)
        return erg_error_set(err, ERG_EPARSE,
                             "%s:%ld:%d: unknown action '%s' (expected e.g. 0F0, 2I1, 2W1, 1B0 "
                             "or (0F7;7B3)OVERLAP_F_B)",
                             name, line, col, cell);
    *out = (erg_instr){k, m, s, ERG_FORWARD, -1, -1};
    return ERG_OK;
}

erg_status erg_order_parse_csv(const char *text, size_t len, const char *name, erg_order **out,
                               erg_error *err)
{
    *out = NULL;
    if (!name)
        name = "schedule";
    erg__csv c;
    erg__csv_init(&c, text, len);
    erg__steps *rows = NULL;
    int *lines = NULL, nrows = 0, cap = 0;
    erg_status st = ERG_OK;
    int rc;
    while ((rc = erg__csv_next(&c)) > 0) {
        /* A leading '#' line is a comment (ergon writes none; tools may). */
        if (c.nfields >= 1 && c.fields[0][0] == '#')
            continue;
        if (nrows == cap) {
            size_t nc = erg__grow_cap((size_t)cap, (size_t)nrows + 1, 8);
            if (nc > 65536) {
                st = erg_error_set(err, ERG_EPARSE, "%s:%ld: more than 65536 ranks", name, c.line);
                goto done;
            }
            erg__steps *nr = erg__reallocarray(rows, nc, sizeof(*rows));
            if (!nr)
                goto oom;
            rows = nr;
            int *nl = erg__reallocarray(lines, nc, sizeof(int));
            if (!nl)
                goto oom;
            lines = nl;
            memset(rows + cap, 0, sizeof(*rows) * (nc - (size_t)cap));
            cap = (int)nc;
        }
        lines[nrows] = (int)c.line;
        erg__steps *row = &rows[nrows++];
        for (size_t f = 0; f < c.nfields; f++) {
            erg_instr in;
            st = parse_cell(c.fields[f], name, c.line, (int)f + 1, &in, err);
            if (st)
                goto done;
            if (erg__steps_push(row, in))
                goto oom;
        }
    }
    if (rc < 0)
        goto oom;
    if (nrows == 0) {
        st = erg_error_set(err, ERG_EPARSE, "%s: empty schedule (no rank rows)", name);
        goto done;
    }
    st = erg__order_build(ERG_SCHED_FILE, nrows, 0, rows, name, lines, out, err);
    if (!st) {
        /* Deadlock check: the DAG builder reports a cycle with its actions. */
        erg_dag *d = NULL;
        st = erg_dag_new_from_order(*out, &d, err);
        erg_dag_free(d);
        if (st) {
            erg_order_free(*out);
            *out = NULL;
        }
    }
    goto done;
oom:
    st = erg_error_set(err, ERG_ENOMEM, "out of memory reading %s", name);
done:
    for (int r = 0; r < nrows; r++)
        erg__steps_free(&rows[r]);
    erg__free(rows);
    erg__free(lines);
    erg__csv_free(&c);
    return st;
}

erg_status erg_order_read_csv(const char *path, erg_order **out, erg_error *err)
{
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    erg_status st = erg__read_file(path, ERG_MAX_CSV_BYTES, &text, &len, err);
    if (st)
        return st;
    st = erg_order_parse_csv(text, len, path, out, err);
    erg__free(text);
    return st;
}
