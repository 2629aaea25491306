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

static erg_status header(erg__buf *b, const erg_frontier *f, size_t nplans)
{
    const erg_schedule *sc = erg__frontier_schedule(f);
    int S = erg_frontier_num_stages(f), M = erg_frontier_num_microbatches(f);
    erg_status st = erg__buf_printf(b,
                                    "%s 1\nschedule %s\nnum_stages %d\nnum_microbatches %d\n"
                                    "num_plans %zu\n",
                                    PACK_MAGIC, erg_schedule_name(sc->kind), S, M, nplans);
    if (!st && sc->max_inflight) st = erg__buf_printf(b, "max_inflight %d\n", sc->max_inflight);
    bool ew = false;
    for (int s = 0; s < S && s < ERG_SCHED_MAX_STAGES; s++)
        ew |= sc->extra_warmup[s] != 0;
    if (!st && ew) {
        st = erg__buf_append(b, "extra_warmup", 12);
        for (int s = 0; s < S && s < ERG_SCHED_MAX_STAGES && !st; s++)
            st = erg__buf_printf(b, " %d", sc->extra_warmup[s]);
        if (!st) st = erg__buf_append(b, "\n", 1);
    }
    return st;
}

/* The clocks of plan k into freq, for a frontier read from plan files. */
static erg_status load_plan(const erg_frontier *f, size_t k, int *freq, int S, int M,
                            erg_error *err)
{
    erg_plan *p;
    erg_status st = erg_frontier_plan(f, k, &p, err);
    if (st) return st;
    for (int s = 0; s < S; s++)
        memcpy(freq + (size_t)s * 2 * M, erg_plan_stage_freqs_const(p, s),
               sizeof(int) * 2 * (size_t)M);
    erg_plan_free(p);
    return ERG_OK;
}

erg_status erg__frontier_write_packed(const erg_frontier *f, const char *path, size_t every,
                                      size_t *kept, size_t *bytes, erg_error *err)
{
    if (!f || !path || every < 1)
        return erg_error_set(err, ERG_EINVAL, "erg__frontier_write_packed: bad argument");
    int S = erg_frontier_num_stages(f), M = erg_frontier_num_microbatches(f);
    size_t n = (size_t)2 * S * M, np = erg_frontier_size(f);
    bool computed = erg__frontier_computed(f);
    int *cur = erg__calloc(n ? n : 1, sizeof(int)), *out = erg__calloc(n ? n : 1, sizeof(int));
    erg__buf b = {0};
    erg_status st = !cur || !out ? erg_error_set(err, ERG_ENOMEM, "out of memory") : ERG_OK;
    size_t nk = 0;
    for (size_t k = 0; k < np; k++)
        nk += k % every == 0 || k + 1 == np;
    if (!st) st = header(&b, f, nk);
    bool first = true;
    char t[40], e[40], c[40], cc[40];
    for (size_t k = 0; k < np && !st; k++) {
        bool keep = k % every == 0 || k + 1 == np;
        if (computed)
            erg__frontier_advance(f, k, cur);
        else if (keep)
            st = load_plan(f, k, cur, S, M, err);
        if (st || !keep) continue;
        erg_frontier_point pt;
        erg_frontier_get(f, k, &pt, err);
        if (first) {
            st = erg__buf_append(&b, "base", 4);
            for (size_t i = 0; i < n && !st; i++)
                st = erg__buf_printf(&b, " %d", cur[i]);
            if (!st) st = erg__buf_append(&b, "\n", 1);
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
        if (!st) st = erg__buf_append(&b, "\n", 1);
        first = false;
    }
    if (st == ERG_ENOMEM && !err->msg[0]) erg_error_set(err, st, "out of memory");
    if (!st) st = erg__write_file(path, b.data ? b.data : "", b.len, err);
    if (!st && kept) *kept = nk;
    if (!st && bytes) *bytes = b.len;
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
    if (l->p >= l->end) return NULL;
    char *s = l->p, *nl = memchr(s, '\n', (size_t)(l->end - s));
    if (nl) {
        *nl = '\0';
        l->p = nl + 1;
    } else {
        l->p = l->end;
    }
    l->line++;
    size_t len = strlen(s);
    if (len && s[len - 1] == '\r') s[len - 1] = '\0';
    return s;
}

static bool parse_int_tok(const char *s, long lo, long hi, long *out)
{
    long v;
    if (!erg__parse_long(s, &v) || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* "key value" of the header: the value after the key and one space. */
static const char *value_of(const char *ln, const char *key)
{
    size_t kl = strlen(key);
    return !strncmp(ln, key, kl) && ln[kl] == ' ' ? ln + kl + 1 : NULL;
}

erg_status erg__frontier_parse_packed(const char *text, size_t len, const char *name,
                                      const erg_schedule *hint, erg_frontier **out, erg_error *err)
{
    *out = NULL;
    char *buf = erg__malloc(len + 1);
    if (!buf) return erg_error_set(err, ERG_ENOMEM, "out of memory");
    memcpy(buf, text, len);
    buf[len] = '\0';
    lines l = {buf, buf + len, 0};
    erg_status st = ERG_OK;
    erg_frontier *f = NULL;
    int *freq = NULL;
    long S = 0, M = 0, np = -1;
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    if (hint) sc = *hint;
    bool have_sched = false;
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
            if (erg_schedule_parse(v, &sc.kind, err)) {
                st = erg_error_set(err, ERG_EPARSE, "%s:%ld: unknown schedule '%.40s'", name,
                                   l.line, v);
                goto done;
            }
            have_sched = true;
        } else if ((v = value_of(ln, "num_stages"))) {
            if (!parse_int_tok(v, 1, ERG_SCHED_MAX_STAGES * 64L, &S)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: num_stages '%.40s' is not an integer "
                                   "in [1, %d]",
                                   name, l.line, v, ERG_SCHED_MAX_STAGES * 64);
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
    size_t n = (size_t)2 * (size_t)S * (size_t)M;
    if (n > ((size_t)1 << 26) || n > len / 2) { /* base needs 2 bytes per clock */
        st = erg_error_set(err, ERG_EPARSE,
                           "%s: %ld stages x %ld microbatches: more clocks "
                           "than the file can hold",
                           name, S, M);
        goto done;
    }
    /* the plans' count bounds the memory: every plan takes a line */
    if ((size_t)np > len / 4 + 1) {
        st = erg_error_set(err, ERG_EPARSE, "%s: num_plans %ld but the file is only %zu bytes",
                           name, np, len);
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
                               "%s:%ld: base has %zu clocks, expected 2 x %ld x "
                               "%ld = %zu",
                               name, l.line, i, S, M, n);
            goto done;
        }
    }
    st = erg__frontier_new((int)S, (int)M, &sc, 0, 0, &f, err);
    if (!st) st = erg__frontier_set_initial(f, freq, err);
    long k = 0;
    while (!st && (ln = next_line(&l))) {
        if (!*ln) continue;
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
        if (!costs) pt.cost_j = pt.cost_change_j = NAN;
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
        if (!st) st = erg__frontier_end_plan(f, freq, err);
        k++;
    }
    if (!st && k != np)
        st = erg_error_set(err, ERG_EPARSE,
                           "%s: %ld plans but num_plans says %ld (a truncated "
                           "file?)",
                           name, k, np);
done:
    erg__free(buf);
    erg__free(freq);
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
    if (st) return st;
    st = erg__frontier_parse_packed(text, len, path, hint, out, err);
    erg__free(text);
    return st;
}
