/* frontier_pack.c: every plan of a frontier in one compact text file,
 * plans.ergon (docs/formats.md): the first plan's clocks in full, then per
 * plan its time, energy and the clocks that changed since the plan before.
 * A frontier of 131,689 plans (S=8, M=96) takes tens of MB instead of two
 * files per plan (1.9 GB). */
#include "core/internal.h"
#include "planner/frontier_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PACK_MAGIC "ergon-plans"
#define PACK_MAX_BYTES (1ull << 32)

/* Whether plans of this schedule name chunks and a backward split (as the
 * JSON plan does: every schedule but the one-chunk F/B ones). */
static bool long_schedule(const erg_schedule *sc)
{
    return erg_schedule_chunks(sc) != 1 || sc->kind == ERG_SCHED_FILE;
}

static erg_status header(erg__buf *b, const erg_frontier *f, size_t nplans)
{
    const erg_schedule *sc = erg__frontier_schedule(f);
    const int *off = erg__frontier_rank_offsets(f);
    const erg_order *ord = erg__frontier_order(f);
    int S = erg_frontier_num_stages(f), M = erg_frontier_num_microbatches(f);
    char x[40];
    erg_status st = erg__buf_printf(b, "%s 1\nschedule %s\nnum_stages %d\nnum_microbatches %d\n",
                                    PACK_MAGIC, erg_schedule_name(sc->kind), S, M);
    if (!st && long_schedule(sc))
        st = erg__buf_printf(b, "num_chunks %d\nbackward_split %s\n", erg_schedule_chunks(sc),
                             erg__fmt_double_py(erg_schedule_backward_split(sc), x, sizeof x));
    if (!st)
        st = erg__buf_append(b, "instructions", 12);
    for (int r = 0; r < S && !st; r++)
        st = erg__buf_printf(b, " %d", off[r + 1] - off[r]);
    if (!st)
        st = erg__buf_printf(b, "\nnum_plans %zu\n", nplans);
    if (!st && sc->max_inflight)
        st = erg__buf_printf(b, "max_inflight %d\n", sc->max_inflight);
    bool ew = false;
    for (int s = 0; s < S && s < ERG_SCHED_MAX_STAGES; s++)
        ew |= sc->extra_warmup[s] != 0;
    if (!st && ew) {
        st = erg__buf_append(b, "extra_warmup", 12);
        for (int s = 0; s < S && s < ERG_SCHED_MAX_STAGES && !st; s++)
            st = erg__buf_printf(b, " %d", sc->extra_warmup[s]);
        if (!st)
            st = erg__buf_append(b, "\n", 1);
    }
    /* a schedule file's order is the plans' own (the JSON plan's "order"
     * lists): one line per rank, PyTorch's action names */
    for (int r = 0; r < S && !st && sc->kind == ERG_SCHED_FILE; r++) {
        const erg_instr *v;
        int nr = ord ? erg_order_rank(ord, r, &v) : 0;
        st = erg__buf_printf(b, "order %d", r);
        for (int j = 0; j < nr && !st; j++) {
            char nm[80];
            erg_instr_format(v[j], nm, sizeof nm);
            st = erg__buf_printf(b, " %s", nm);
        }
        if (!st)
            st = erg__buf_append(b, "\n", 1);
    }
    /* the frontier's (a sample's: its source's), so that a reader can tell it from another
     * run's frontier-info.csv (frontier_dir.c); last, so the lines above keep their numbers */
    char fp[ERG_FRONTIER_FINGERPRINT_LEN];
    if (!st && erg_frontier_fingerprint(f, fp) && fp[0])
        st = erg__buf_printf(b, "frontier_fingerprint %s\n", fp);
    /* the last plan is the all-max fallback, not a point of the planner's frontier */
    if (!st && erg_frontier_has_fallback(f))
        st = erg__buf_append(b, "fallback all_max\n", 17);
    return st;
}

/* The clocks of plan k into freq, for a frontier read from plan files. */
static erg_status load_plan(const erg_frontier *f, size_t k, int *freq, erg_error *err)
{
    erg_plan *p;
    erg_status st = erg_frontier_plan(f, k, &p, err);
    if (st)
        return st;
    const int *off = erg__frontier_rank_offsets(f);
    for (int r = 0; r < erg_frontier_num_stages(f); r++) {
        if (erg_plan_stage_len(p, r) != off[r + 1] - off[r]) {
            erg_plan_free(p);
            return erg_error_set(err, ERG_EINVAL, "plan %zu: rank %d has %d clocks, plan 0 has %d",
                                 k, r, erg_plan_stage_len(p, r), off[r + 1] - off[r]);
        }
        memcpy(freq + off[r], erg_plan_stage_freqs_const(p, r),
               sizeof(int) * (size_t)(off[r + 1] - off[r]));
    }
    erg_plan_free(p);
    return ERG_OK;
}

/* Clocks of one plan: every rank's instructions. */
static size_t np_instrs(const erg_frontier *f)
{
    const int *off = erg__frontier_rank_offsets(f);
    return off ? (size_t)off[erg_frontier_num_stages(f)] : 0;
}

erg_status erg__frontier_write_packed(const erg_frontier *f, const char *path, size_t every,
                                      size_t *kept, size_t *bytes, erg_error *err)
{
    if (!f || !path || every < 1)
        return erg_error_set(err, ERG_EINVAL, "erg__frontier_write_packed: bad argument");
    size_t n = np_instrs(f), np = erg_frontier_size(f);
    bool computed = erg__frontier_computed(f);
    int *cur = erg__calloc(n ? n : 1, sizeof(int)), *out = erg__calloc(n ? n : 1, sizeof(int));
    erg__buf b = {0};
    erg_status st = !cur || !out ? erg_error_set(err, ERG_ENOMEM, "out of memory") : ERG_OK;
    /* every `every`-th plan and the planner's last, and the all-max fallback */
    size_t nk = 0, planned = erg_frontier_num_planned(f);
#define KEEP(k) ((k) >= planned || (k) % every == 0 || (k) + 1 == planned)
    for (size_t k = 0; k < np; k++)
        nk += KEEP(k);
    if (!st)
        st = header(&b, f, nk);
    bool first = true;
    char t[40], e[40], c[40], cc[40];
    for (size_t k = 0; k < np && !st; k++) {
        bool keep = KEEP(k);
        if (computed)
            erg__frontier_advance(f, k, cur);
        else if (keep)
            st = load_plan(f, k, cur, err);
        if (st || !keep)
            continue;
        erg_frontier_point pt;
        erg_frontier_get(f, k, &pt, err);
        if (first) {
            st = erg__buf_append(&b, "base", 4);
            for (size_t i = 0; i < n && !st; i++)
                st = erg__buf_printf(&b, " %d", cur[i]);
            if (!st)
                st = erg__buf_append(&b, "\n", 1);
            memcpy(out, cur, sizeof(int) * n);
        }
        if (!st)
            st = erg__buf_printf(&b, "%s %s", erg__fmt_double_py(pt.time_s, t, sizeof t),
                                 erg__fmt_double_py(pt.energy_j, e, sizeof e));
        /* cost and cost change are NaN for plans read from files */
        if (!st && isfinite(pt.cost_j) && isfinite(pt.cost_change_j))
            st = erg__buf_printf(&b, " %s %s", erg__fmt_double_py(pt.cost_j, c, sizeof c),
                                 erg__fmt_double_py(pt.cost_change_j, cc, sizeof cc));
        else if (!st)
            st = erg__buf_append(&b, " - -", 4);
        for (size_t i = 0; i < n && !st && !first; i++)
            if (cur[i] != out[i]) {
                st = erg__buf_printf(&b, " %zu:%d", i, cur[i]);
                out[i] = cur[i];
            }
        if (!st)
            st = erg__buf_append(&b, "\n", 1);
        first = false;
    }
#undef KEEP
    if (st == ERG_ENOMEM && !err->msg[0])
        erg_error_set(err, st, "out of memory");
    if (!st)
        st = erg__write_file(path, b.data ? b.data : "", b.len, err);
    if (!st && kept)
        *kept = nk;
    if (!st && bytes)
        *bytes = b.len;
    erg__buf_free(&b);
    erg__free(cur);
    erg__free(out);
    return st;
}

/* ---- reading ---- */

typedef struct lines {
    char *p, *end;
    long line;
} lines;

/* The next line, NUL-terminated in place (NULL at the end). */
static char *next_line(lines *l)
{
    if (l->p >= l->end)
        return NULL;
    char *s = l->p, *nl = memchr(s, '\n', (size_t)(l->end - s));
    if (nl) {
        *nl = '\0';
        l->p = nl + 1;
    } else {
        l->p = l->end;
    }
    l->line++;
    size_t len = strlen(s);
    if (len && s[len - 1] == '\r')
        s[len - 1] = '\0';
    return s;
}

static bool parse_int_tok(const char *s, long lo, long hi, long *out)
{
    long v;
    if (!erg__parse_long(s, &v) || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* "key value" of the header: the value after the key and one space. */
static const char *value_of(const char *ln, const char *key)
{
    size_t kl = strlen(key);
    return !strncmp(ln, key, kl) && ln[kl] == ' ' ? ln + kl + 1 : NULL;
}

/* A schedule file's order from the header's "order R ACTION..." lines: a
 * torch CSV whose row r is rank r and whose line numbers are the file's
 * (other lines become comments), so the order reader's file:line:cell
 * messages point into plans.ergon. */
typedef struct order_lines {
    erg__buf csv;
    long lines; /* lines of csv so far */
    long ranks; /* order lines so far */
} order_lines;

static erg_status add_order_line(order_lines *ol, const char *v, long line, const char *name,
                                 erg_error *err)
{
    long r;
    const char *sp = strchr(v, ' ');
    char num[24];
    size_t nl = sp ? (size_t)(sp - v) : strlen(v);
    if (nl >= sizeof num)
        nl = sizeof num - 1;
    memcpy(num, v, nl);
    num[nl] = '\0';
    if (!parse_int_tok(num, 0, 1L << 20, &r) || r != ol->ranks)
        return erg_error_set(err, ERG_EPARSE,
                             "%s:%ld: expected 'order %ld ACTION...' (one line per rank, rank 0 "
                             "first), got 'order %.40s'",
                             name, line, ol->ranks, v);
    if (strchr(v, ','))
        return erg_error_set(err, ERG_EPARSE,
                             "%s:%ld: order %ld: actions are separated by spaces, not commas", name,
                             line, r);
    erg_status st = ERG_OK;
    for (; ol->lines + 1 < line && !st; ol->lines++)
        st = erg__buf_append(&ol->csv, "#\n", 2);
    bool first = true;
    for (const char *p = sp; p && *p && !st;) {
        while (*p == ' ')
            p++;
        const char *e = strchr(p, ' ');
        size_t tl = e ? (size_t)(e - p) : strlen(p);
        if (tl) {
            if (!first)
                st = erg__buf_append(&ol->csv, ",", 1);
            if (!st)
                st = erg__buf_append(&ol->csv, p, tl);
            first = false;
        }
        p = e;
    }
    if (!st)
        st = erg__buf_append(&ol->csv, "\n", 1);
    ol->lines++;
    ol->ranks++;
    return st ? erg_error_set(err, ERG_ENOMEM, "out of memory") : ERG_OK;
}

erg_status erg__frontier_parse_packed(const char *text, size_t len, const char *name,
                                      const erg_schedule *hint, erg_frontier **out, erg_error *err)
{
    *out = NULL;
    char *buf = erg__malloc(len + 1);
    if (!buf)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    memcpy(buf, text, len);
    buf[len] = '\0';
    lines l = {buf, buf + len, 0};
    erg_status st = ERG_OK;
    erg_frontier *f = NULL;
    erg_order *order = NULL;
    order_lines ol = {{0}, 0, 0};
    int *freq = NULL, *counts = NULL;
    long S = 0, M = 0, np = -1, V = 0, ncounts = -1, counts_line = 0;
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    if (hint)
        sc = *hint;
    sc.order = NULL;
    sc.chunks = 0;
    sc.backward_split = 0;
    bool have_sched = false;
    char fp[ERG_FRONTIER_FINGERPRINT_LEN] = ""; /* none: older ergon */
    bool fallback = false;
    char *ln = next_line(&l);
    if (!ln || strcmp(ln, PACK_MAGIC " 1")) {
        st =
            erg_error_set(err, ERG_EPARSE, "%s:1: expected '%s 1' (an ergon plans file, version 1)",
                          name, PACK_MAGIC);
        goto done;
    }
    /* header lines up to "base" */
    while ((ln = next_line(&l))) {
        const char *v;
        if ((v = value_of(ln, "schedule"))) {
            if (!strcmp(v, "file")) {
                sc.kind = ERG_SCHED_FILE;
            } else if (erg_schedule_parse(v, &sc.kind, err)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: unknown schedule '%.40s' (1f1b, gpipe, ours, "
                                   "interleaved-1f1b, looped-bfs, interleaved-zb, zbv, dualpipev "
                                   "or file)",
                                   name, l.line, v);
                goto done;
            }
            have_sched = true;
        } else if ((v = value_of(ln, "num_stages"))) {
            if (!parse_int_tok(v, 1, (long)ERG_MAX_STAGES, &S)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: num_stages '%.40s' is not an integer "
                                   "in [1, %d]",
                                   name, l.line, v, ERG_MAX_STAGES);
                goto done;
            }
        } else if ((v = value_of(ln, "num_microbatches"))) {
            if (!parse_int_tok(v, 1, 65536, &M)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: num_microbatches '%.40s' is not an "
                                   "integer in [1, 65536]",
                                   name, l.line, v);
                goto done;
            }
        } else if ((v = value_of(ln, "num_chunks"))) {
            if (!parse_int_tok(v, 1, 64, &V)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: num_chunks '%.40s' is not an integer in [1, 64]", name,
                                   l.line, v);
                goto done;
            }
        } else if ((v = value_of(ln, "backward_split"))) {
            double x;
            if (!erg__parse_double(v, &x) || !(x > 0 && x < 1)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: backward_split '%.40s' is not a number in (0, 1)", name,
                                   l.line, v);
                goto done;
            }
            sc.backward_split = x;
        } else if ((v = value_of(ln, "instructions"))) {
            /* each rank's instruction count: checked against the order */
            erg__free(counts);
            counts = erg__malloc(sizeof(int) * (strlen(v) / 2 + 1));
            if (!counts) {
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                goto done;
            }
            ncounts = 0;
            counts_line = l.line;
            char *save = NULL;
            for (char *tok = strtok_r((char *)v, " ", &save); tok;
                 tok = strtok_r(NULL, " ", &save)) {
                long c;
                if (!parse_int_tok(tok, 1, INT_MAX / 2, &c)) {
                    st = erg_error_set(err, ERG_EPARSE,
                                       "%s:%ld: instructions: '%.40s' is not a positive "
                                       "integer",
                                       name, l.line, tok);
                    goto done;
                }
                counts[ncounts++] = (int)c;
            }
        } else if ((v = value_of(ln, "num_plans"))) {
            if (!parse_int_tok(v, 1, 1000000000L, &np)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: num_plans '%.40s' is not an integer "
                                   "in [1, 1e9]",
                                   name, l.line, v);
                goto done;
            }
        } else if ((v = value_of(ln, "max_inflight"))) {
            long mi;
            if (!parse_int_tok(v, 0, 65536, &mi)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: max_inflight '%.40s' is not an "
                                   "integer in [0, 65536]",
                                   name, l.line, v);
                goto done;
            }
            sc.max_inflight = (int)mi;
        } else if ((v = value_of(ln, "extra_warmup"))) {
            char *save = NULL, *tok;
            int s = 0;
            for (tok = strtok_r((char *)v, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
                long r;
                if (s >= ERG_SCHED_MAX_STAGES || !parse_int_tok(tok, 0, 65536, &r)) {
                    st = erg_error_set(err, ERG_EPARSE,
                                       "%s:%ld: extra_warmup: at most %d "
                                       "integers in [0, 65536], got '%.40s'",
                                       name, l.line, ERG_SCHED_MAX_STAGES, tok);
                    goto done;
                }
                sc.extra_warmup[s++] = (int)r;
            }
        } else if ((v = value_of(ln, "order"))) {
            if ((st = add_order_line(&ol, v, l.line, name, err)))
                goto done;
        } else if ((v = value_of(ln, "frontier_fingerprint"))) {
            if (strlen(v) != ERG_FRONTIER_FINGERPRINT_LEN - 1 || strncmp(v, "fnv1a64:", 8) ||
                strspn(v + 8, "0123456789abcdef") != 16) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: frontier_fingerprint '%.40s': expected fnv1a64: and "
                                   "16 hex digits",
                                   name, l.line, v);
                goto done;
            }
            snprintf(fp, sizeof fp, "%s", v);
        } else if ((v = value_of(ln, "fallback"))) {
            if (strcmp(v, "all_max")) {
                st = erg_error_set(err, ERG_EPARSE, "%s:%ld: fallback '%.40s': expected all_max",
                                   name, l.line, v);
                goto done;
            }
            fallback = true;
        } else if (!strncmp(ln, "base", 4) && (ln[4] == ' ' || !ln[4])) {
            break;
        } else {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: unknown header line '%.40s'", name, l.line,
                               ln);
            goto done;
        }
    }
    if (!ln || !have_sched || !S || !M || np < 0) {
        st = erg_error_set(err, ERG_EPARSE,
                           "%s:%ld: the header needs schedule, num_stages, "
                           "num_microbatches and num_plans before 'base'",
                           name, l.line);
        goto done;
    }
    long base_line = l.line;
    if ((sc.kind == ERG_SCHED_FILE) != (ol.ranks > 0)) {
        st = erg_error_set(err, ERG_EPARSE,
                           sc.kind == ERG_SCHED_FILE
                               ? "%s:%ld: schedule file needs its order: one line 'order R "
                                 "ACTION...' per rank before 'base'"
                               : "%s:%ld: 'order' lines belong to schedule file only",
                           name, base_line);
        goto done;
    }
    if (sc.kind == ERG_SCHED_FILE) {
        if (ol.ranks != S) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: %ld order lines for num_stages %ld ranks",
                               name, base_line, ol.ranks, S);
            goto done;
        }
        st = erg_order_parse_csv(ol.csv.data ? ol.csv.data : "", ol.csv.len, name, &order, err);
        if (st)
            goto done;
        sc.order = order;
        if (V && V != erg_schedule_chunks(&sc)) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s: num_chunks %ld but the order has %d chunks per rank", name, V,
                               erg_schedule_chunks(&sc));
            goto done;
        }
    } else {
        sc.chunks = (int)V;
    }
    /* Every (stage, microbatch) has at least one instruction of its own or
     * shared (an F/B overlap) and base needs 2 bytes per clock: refuse sizes
     * the file cannot hold before building the schedule's order. */
    if ((size_t)S * (size_t)M * (size_t)erg_schedule_chunks(&sc) > len / 2) {
        st = erg_error_set(err, ERG_EPARSE,
                           "%s: %ld ranks x %d chunks x %ld microbatches: more clocks than the "
                           "file can hold",
                           name, S, erg_schedule_chunks(&sc), M);
        goto done;
    }
    /* the plans' count bounds the memory: every plan takes a line */
    if ((size_t)np > len / 4 + 1) {
        st = erg_error_set(err, ERG_EPARSE, "%s: num_plans %ld but the file is only %zu bytes",
                           name, np, len);
        goto done;
    }
    st = erg__frontier_new((int)S, (int)M, &sc, 0, 0, &f, err);
    if (st) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        st = erg_error_set(err, ERG_EPARSE, "%s: the header's schedule: %s", name, m);
        goto done;
    }
    erg__frontier_set_stored_fingerprint(f, fp);
    const int *off = erg__frontier_rank_offsets(f);
    size_t n = (size_t)off[S];
    if (ncounts >= 0) {
        bool same = ncounts == S;
        for (long r = 0; r < S && same; r++)
            same = counts[r] == off[r + 1] - off[r];
        if (!same) {
            long r = 0;
            while (r < S && r < ncounts && counts[r] == off[r + 1] - off[r])
                r++;
            st = erg_error_set(
                err, ERG_EPARSE,
                "%s:%ld: instructions: %ld counts for %ld ranks, or rank %ld: %d in the file but "
                "%d in the schedule %s (%d chunks, %ld microbatches)",
                name, counts_line, ncounts, S, r, r < ncounts ? counts[r] : 0,
                r < S ? off[r + 1] - off[r] : 0, erg_schedule_name(sc.kind),
                erg_schedule_chunks(&sc), M);
            goto done;
        }
    }
    if (n > len / 2) {
        st = erg_error_set(err, ERG_EPARSE, "%s: %zu clocks per plan: more than the file can hold",
                           name, n);
        goto done;
    }
    freq = erg__malloc(n * sizeof(int));
    if (!freq) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto done;
    }
    {
        char *save = NULL, *tok = strtok_r(ln + 4, " ", &save);
        size_t i = 0;
        for (; tok; tok = strtok_r(NULL, " ", &save)) {
            long v;
            if (i >= n || !parse_int_tok(tok, 1, 1000000, &v)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: base: expected %zu clocks in MHz "
                                   "(integers in [1, 1000000]), got '%.40s' at position %zu",
                                   name, l.line, n, tok, i);
                goto done;
            }
            freq[i++] = (int)v;
        }
        if (i != n) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: base has %zu clocks, expected %zu (every rank's "
                               "instructions: %s, %ld ranks, %ld microbatches)",
                               name, l.line, i, n, erg_schedule_name(sc.kind), S, M);
            goto done;
        }
    }
    st = erg__frontier_set_initial(f, freq, err);
    long k = 0;
    while (!st && (ln = next_line(&l))) {
        if (!*ln)
            continue;
        if (k >= np) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: more plans than num_plans %ld", name,
                               l.line, np);
            break;
        }
        char *save = NULL;
        char *tt = strtok_r(ln, " ", &save), *te = strtok_r(NULL, " ", &save);
        char *tc = strtok_r(NULL, " ", &save), *tcc = strtok_r(NULL, " ", &save);
        erg_frontier_point pt = {0};
        pt.quant_time = -1;
        bool costs = tc && tcc && strcmp(tc, "-");
        if (!tt || !te || !tc || !tcc || !erg__parse_double(tt, &pt.time_s) ||
            !erg__parse_double(te, &pt.energy_j) || !(pt.time_s > 0) || !(pt.time_s < 1e9) ||
            !(fabs(pt.energy_j) < 1e15) ||
            (costs &&
             (!erg__parse_double(tc, &pt.cost_j) || !erg__parse_double(tcc, &pt.cost_change_j))) ||
            (!costs && strcmp(tcc ? tcc : "", "-"))) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: plan %ld: expected 'TIME ENERGY COST "
                               "COST_CHANGE [INDEX:MHZ]...' with a positive time",
                               name, l.line, k);
            break;
        }
        if (!costs)
            pt.cost_j = pt.cost_change_j = NAN;
        st = erg__frontier_begin_plan(f, &pt, err);
        for (char *tok = strtok_r(NULL, " ", &save); tok && !st; tok = strtok_r(NULL, " ", &save)) {
            char *colon = strchr(tok, ':');
            long id, v;
            if (k == 0 || !colon || (*colon = '\0', !parse_int_tok(tok, 0, (long)n - 1, &id)) ||
                !parse_int_tok(colon + 1, 1, 1000000, &v)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: plan %ld: a change must be "
                                   "INDEX:MHZ with INDEX in [0, %zu) and MHZ in [1, 1000000]%s",
                                   name, l.line, k, n,
                                   k == 0 ? " (plan 0 has none: it is base)" : "");
                break;
            }
            freq[id] = (int)v;
            st = erg__frontier_add_change(f, (int)id, (int)v, err);
        }
        if (!st)
            st = erg__frontier_end_plan(f, freq, err);
        k++;
    }
    if (!st && fallback && np < 2)
        st = erg_error_set(err, ERG_EPARSE,
                           "%s: the all-max fallback needs a planned plan before it", name);
    if (!st && fallback)
        erg__frontier_set_fallback(f);
    if (!st && k != np)
        st = erg_error_set(err, ERG_EPARSE,
                           "%s: %ld plans but num_plans says %ld (a truncated "
                           "file?)",
                           name, k, np);
done:
    erg__free(buf);
    erg__free(freq);
    erg__free(counts);
    erg__buf_free(&ol.csv);
    erg_order_free(order);
    if (st) {
        erg_frontier_free(f);
        return st;
    }
    *out = f;
    return ERG_OK;
}

erg_status erg__frontier_read_packed(const char *path, const erg_schedule *hint, erg_frontier **out,
                                     erg_error *err)
{
    char *text;
    size_t len;
    erg_status st = erg__read_regular_file(path, (size_t)PACK_MAX_BYTES, &text, &len, err);
    if (st)
        return st;
    st = erg__frontier_parse_packed(text, len, path, hint, out, err);
    erg__free(text);
    return st;
}
