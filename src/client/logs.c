/* logs.c: client logs (instructions-<rank>.csv, time-energy-<rank>.csv) to a stage profile. */
#include "client/client_internal.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_MAX_BYTES ((size_t)1 << 30)

const char *erg__source_set_word(unsigned set)
{
    if (!(set & ~1u))
        return "";
    if (set & (set - 1))
        return "mixed";
    for (int k = 0; k < 8; k++)
        if (set == erg__source_bit(k))
            return erg_energy_source_name((erg_energy_source)k);
    return "mixed";
}

bool erg__source_parse(const char *word, int *source)
{
    /* What the client writes: a reading comes from a counter, integrated power or the
     * model ("none" has no reading to log). */
    static const erg_energy_source known[] = {ERG_ENERGY_COUNTER, ERG_ENERGY_INTEGRATED,
                                              ERG_ENERGY_MODEL};
    if (!*word) { /* the writer's word when the GPU could not say */
        *source = ERG__SOURCE_UNKNOWN;
        return true;
    }
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (!strcmp(word, erg_energy_source_name(known[k]))) {
            *source = (int)known[k];
            return true;
        }
    return false;
}

erg_status erg__energy_between(const erg__energy_sample *s, size_t n, double t0, double t1,
                               double *energy_j, unsigned *sources)
{
    if (n < 2 || t0 < s[0].time_s || t1 > s[n - 1].time_s || t1 < t0)
        return ERG_EINVAL;
    /* E(t) by binary search + linear interpolation. */
    double e[2];
    double ts[2] = {t0, t1};
    size_t first = 0, last = 0; /* the samples whose increases make up the result */
    for (int k = 0; k < 2; k++) {
        size_t lo = 0, hi = n - 1;
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            if (s[mid].time_s <= ts[k])
                lo = mid;
            else
                hi = mid;
        }
        double dt = s[hi].time_s - s[lo].time_s;
        double w = dt > 0 ? (ts[k] - s[lo].time_s) / dt : 0;
        if (w < 0)
            w = 0;
        if (w > 1)
            w = 1;
        e[k] = s[lo].energy_j + w * (s[hi].energy_j - s[lo].energy_j);
        if (k == 0)
            first = w < 1 ? hi : hi + 1; /* t0 at hi exactly: hi's increase is before it */
        else
            last = w > 0 ? hi : lo;
    }
    *energy_j = e[1] - e[0];
    if (sources)
        for (size_t i = first; i <= last && i < n; i++)
            *sources |= erg__source_bit(s[i].source);
    return ERG_OK;
}

typedef struct group {
    int kind, freq;
    size_t count, seen;
    double time_sum, energy_sum;
    size_t used;
} group;

static int cmp_group(const void *a, const void *b)
{
    const group *x = a, *y = b;
    if (x->freq != y->freq)
        return (x->freq < y->freq) - (x->freq > y->freq);
    return x->kind - y->kind;
}

erg_status erg__aggregate_stage(erg_profile *p, int stage, const erg__instr_rec *recs, size_t nrecs,
                                const erg__energy_sample *samples, size_t nsamples,
                                bool drop_warmup, const char *name, unsigned *sources,
                                erg_error *err)
{
    group *g = NULL;
    size_t ng = 0, capg = 0;
    erg_status st = ERG_OK;
    /* pass 1: count per group */
    for (size_t i = 0; i < nrecs; i++) {
        const erg__instr_rec *r = &recs[i];
        if ((r->kind != ERG_FORWARD && r->kind != ERG_BACKWARD) || r->freq_start <= 0 ||
            r->freq_start != r->freq_end)
            continue;
        size_t k = 0;
        while (k < ng && !(g[k].kind == r->kind && g[k].freq == r->freq_start))
            k++;
        if (k == ng) {
            if (!ERG__GROW(g, capg, ng + 1, 64)) {
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                goto out;
            }
            g[ng++] = (group){r->kind, r->freq_start, 0, 0, 0, 0, 0};
        }
        g[k].count++;
    }
    /* pass 2: sums, skipping each group's warm-up */
    for (size_t i = 0; i < nrecs; i++) {
        const erg__instr_rec *r = &recs[i];
        if ((r->kind != ERG_FORWARD && r->kind != ERG_BACKWARD) || r->freq_start <= 0 ||
            r->freq_start != r->freq_end)
            continue;
        size_t k = 0;
        while (!(g[k].kind == r->kind && g[k].freq == r->freq_start))
            k++;
        size_t drop = drop_warmup ? g[k].count / 10 : 0;
        if (g[k].seen++ < drop)
            continue;
        double e;
        if (erg__energy_between(samples, nsamples, r->start_s, r->end_s, &e, sources) != ERG_OK) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s: %s of microbatch %d (%.6f..%.6f) is outside the energy "
                               "samples (%zu samples%s)",
                               name, erg_instr_kind_name((erg_instr_kind)r->kind), r->microbatch,
                               r->start_s, r->end_s, nsamples,
                               nsamples ? "" : ": was the energy counter readable?");
            goto out;
        }
        g[k].time_sum += r->end_s - r->start_s;
        g[k].energy_sum += e;
        g[k].used++;
    }
    if (ng > 1) /* g is NULL when no record counted: qsort(NULL, 0) is undefined */
        qsort(g, ng, sizeof *g, cmp_group);
    for (size_t k = 0; k < ng; k++) {
        if (!g[k].used)
            continue;
        erg_profile_point pt = {g[k].freq, g[k].time_sum / (double)g[k].used,
                                g[k].energy_sum / (double)g[k].used};
        if (pt.energy_j < 0)
            pt.energy_j = 0;
        if ((st = erg_profile_add(p, stage, (erg_instr_kind)g[k].kind, &pt, err)))
            goto out;
    }
out:
    erg__free(g);
    return st;
}

/* Column index by name, -1 if absent. */
static int col(const erg__csv *c, const char *name)
{
    for (size_t i = 0; i < c->nfields; i++)
        if (!strcmp(c->fields[i], name))
            return (int)i;
    return -1;
}

erg_status erg__parse_instructions(const char *text, size_t len, const char *path,
                                   erg__instr_rec **out, size_t *n, erg_error *err)
{
    erg_status st = ERG_OK;
    erg__csv c;
    erg__csv_init(&c, text, len);
    erg__instr_rec *recs = NULL;
    size_t nr = 0, cap = 0;
    int r = erg__csv_next(&c);
    if (r <= 0) {
        st = r < 0 ? erg_error_set(err, ERG_ENOMEM, "out of memory")
                   : erg_error_set(err, ERG_EPARSE, "%s: empty file", path);
        goto out;
    }
    int ci = col(&c, "instruction"), cs = col(&c, "start"), ce = col(&c, "end");
    int cm = col(&c, "microbatch"), cf0 = col(&c, "freq_start"), cf1 = col(&c, "freq_end");
    int cf = col(&c, "frequency");
    if (ci < 0 || cs < 0 || ce < 0 || ((cf0 < 0 || cf1 < 0) && cf < 0)) {
        st = erg_error_set(err, ERG_EPARSE,
                           "%s:1: header needs instruction,start,end and freq_start,freq_end "
                           "(or frequency)",
                           path);
        goto out;
    }
    size_t need = (size_t)ERG__MAX(ERG__MAX(ERG__MAX(ci, cs), ERG__MAX(ce, cm)),
                                   ERG__MAX(ERG__MAX(cf0, cf1), cf)) +
                  1;
    while ((r = erg__csv_next(&c)) > 0) {
        if (c.nfields < need) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: %zu fields, expected %zu", path, c.line,
                               c.nfields, need);
            goto out;
        }
        const char *name = c.fields[ci];
        int kind;
        if (!strcmp(name, "forward") || !strcmp(name, "forward_microstep"))
            kind = ERG_FORWARD;
        else if (!strcmp(name, "backward") || !strcmp(name, "backward_microstep"))
            kind = ERG_BACKWARD;
        else
            kind = -1;
        double t0, t1;
        long mb = -1, f0 = 0, f1 = 0;
        if (!erg__parse_double(c.fields[cs], &t0) || !erg__parse_double(c.fields[ce], &t1)) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: start/end '%s','%s' are not numbers", path,
                               c.line, c.fields[cs], c.fields[ce]);
            goto out;
        }
        if (t1 < t0) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: end %s is before start %s", path, c.line,
                               c.fields[ce], c.fields[cs]);
            goto out;
        }
        if (cm >= 0 && !erg__parse_long(c.fields[cm], &mb)) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: microbatch '%s' is not an integer", path,
                               c.line, c.fields[cm]);
            goto out;
        }
        const char *fs0 = cf0 >= 0 ? c.fields[cf0] : c.fields[cf];
        const char *fs1 = cf1 >= 0 ? c.fields[cf1] : c.fields[cf];
        if (!erg__parse_long(fs0, &f0) || !erg__parse_long(fs1, &f1) || f0 < 0 || f1 < 0 ||
            f0 > 100000 || f1 > 100000) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: clock '%s'/'%s' is not a clock in MHz",
                               path, c.line, fs0, fs1);
            goto out;
        }
        if (!ERG__GROW(recs, cap, nr + 1, 1024)) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto out;
        }
        recs[nr++] = (erg__instr_rec){kind, (int)mb, t0, t1, (int)f0, (int)f1, 0, -1};
    }
    if (r < 0)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
out:
    erg__csv_free(&c);
    if (st) {
        erg__free(recs);
        return st;
    }
    *out = recs;
    *n = nr;
    return ERG_OK;
}

erg_status erg__parse_energy(const char *text, size_t len, const char *path,
                             erg__energy_sample **out, size_t *n, erg_error *err)
{
    erg_status st = ERG_OK;
    erg__csv c;
    erg__csv_init(&c, text, len);
    erg__energy_sample *s = NULL;
    size_t ns = 0, cap = 0;
    int r = erg__csv_next(&c);
    int ct = r > 0 ? col(&c, "time") : -1, ce = r > 0 ? col(&c, "energy") : -1;
    int cs = r > 0 ? col(&c, "energy_source") : -1; /* optional: logs before it lack it */
    if (r < 0) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto out;
    }
    if (ct < 0 || ce < 0) {
        st = erg_error_set(err, ERG_EPARSE, "%s:1: header needs the columns time,energy", path);
        goto out;
    }
    size_t need = (size_t)ERG__MAX(ERG__MAX(ct, ce), cs) + 1;
    while ((r = erg__csv_next(&c)) > 0) {
        double t, e;
        if (c.nfields < need || !erg__parse_double(c.fields[ct], &t) ||
            !erg__parse_double(c.fields[ce], &e)) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: expected two numbers time,energy%s", path,
                               c.line, cs >= 0 ? " and an energy_source" : "");
            goto out;
        }
        int src = ERG__SOURCE_UNKNOWN;
        if (cs >= 0 && !erg__source_parse(c.fields[cs], &src)) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: energy_source '%.40s' is not counter, integrated or "
                               "model",
                               path, c.line, c.fields[cs]);
            goto out;
        }
        if (ns && (t < s[ns - 1].time_s || e < s[ns - 1].energy_j)) {
            st =
                erg_error_set(err, ERG_EPARSE, "%s:%ld: time and energy must not decrease (%s, %s)",
                              path, c.line, c.fields[ct], c.fields[ce]);
            goto out;
        }
        if (!ERG__GROW(s, cap, ns + 1, 1024)) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto out;
        }
        s[ns++] = (erg__energy_sample){t, e, src};
    }
    if (r < 0)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
out:
    erg__csv_free(&c);
    if (st) {
        erg__free(s);
        return st;
    }
    *out = s;
    *n = ns;
    return ERG_OK;
}

static erg_status read_instructions(const char *path, erg__instr_rec **out, size_t *n,
                                    erg_error *err)
{
    char *text = NULL;
    size_t len = 0;
    erg_status st = erg__read_regular_file(path, LOG_MAX_BYTES, &text, &len, err);
    if (st)
        return st;
    st = erg__parse_instructions(text, len, path, out, n, err);
    erg__free(text);
    return st;
}

static erg_status read_energy(const char *path, erg__energy_sample **out, size_t *n, erg_error *err)
{
    char *text = NULL;
    size_t len = 0;
    erg_status st = erg__read_regular_file(path, LOG_MAX_BYTES, &text, &len, err);
    if (st)
        return st;
    st = erg__parse_energy(text, len, path, out, n, err);
    erg__free(text);
    return st;
}

/* The rank of a log file name "instructions-<rank>.csv" (decimal digits, no
 * sign, no leading zero): the rank, capped at LONG_MAX, or -1 for other names. */
static long log_rank(const char *name)
{
    static const char pre[] = "instructions-";
    if (strncmp(name, pre, sizeof pre - 1))
        return -1;
    const char *p = name + sizeof pre - 1, *q = p;
    long rank = 0;
    while (*q >= '0' && *q <= '9') {
        int dgt = *q - '0';
        rank = rank > (LONG_MAX - dgt) / 10 ? LONG_MAX : rank * 10 + dgt;
        q++;
    }
    if (q == p || (q - p > 1 && *p == '0') || strcmp(q, ".csv"))
        return -1;
    return rank;
}

/* Every rank of DIR's instructions-<rank>.csv files: they must be 0..R-1
 * without gaps (R <= 4096); *num_stages = R. Reads names only, opens no file. */
static erg_status ranks_in_dir(const char *dir, int *num_stages, erg_error *err)
{
    enum { MAX_RANKS = 4096 };
    DIR *d = opendir(dir);
    if (!d)
        return erg_error_set(err, ERG_EIO, "%s: cannot open the log directory", dir);
    unsigned char seen[MAX_RANKS] = {0};
    long found = 0, max_rank = -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        long rank = log_rank(de->d_name);
        if (rank < 0)
            continue;
        found++;
        if (rank > max_rank)
            max_rank = rank;
        if (rank < MAX_RANKS)
            seen[rank] = 1;
    }
    closedir(d);
    if (found == 0)
        return erg_error_set(err, ERG_ENOTFOUND, "%s: no instructions-<rank>.csv files", dir);
    long missing = 0;
    while (missing < MAX_RANKS && missing <= max_rank && seen[missing])
        missing++;
    if (max_rank >= MAX_RANKS || found != max_rank + 1)
        return erg_error_set(err, ERG_EPARSE,
                             "%s: ranks are not 0..%ld (one instructions-<rank>.csv per stage, "
                             "ranks 0..R-1 without gaps): found %ld files, rank %ld is missing%s",
                             dir, max_rank, found, missing,
                             max_rank >= MAX_RANKS ? " (at most 4096 ranks)" : "");
    *num_stages = (int)max_rank + 1;
    return ERG_OK;
}

erg_status erg_profile_from_logs(const char *dir, int num_stages, erg_profile **out, erg_error *err)
{
    if (!dir || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_profile_from_logs: NULL argument");
    if (num_stages < 0 || num_stages > 4096)
        return erg_error_set(err, ERG_EINVAL, "stage count %d is not in [0, 4096]", num_stages);
    if (num_stages == 0) {
        erg_status sst = ranks_in_dir(dir, &num_stages, err);
        if (sst)
            return sst;
    }
    erg_profile *p = NULL;
    erg_status st = erg_profile_new(&p, err);
    if (st)
        return st;
    unsigned sources = 0;
    for (int s = 0; s < num_stages; s++) {
        char ip[4200], ep[4200];
        snprintf(ip, sizeof ip, "%s/instructions-%d.csv", dir, s);
        snprintf(ep, sizeof ep, "%s/time-energy-%d.csv", dir, s);
        erg__instr_rec *recs = NULL;
        erg__energy_sample *samples = NULL;
        size_t nr = 0, ns = 0;
        if ((st = read_instructions(ip, &recs, &nr, err)))
            goto fail;
        if ((st = read_energy(ep, &samples, &ns, err))) {
            erg__free(recs);
            goto fail;
        }
        st = erg__aggregate_stage(p, s, recs, nr, samples, ns, true, ip, &sources, err);
        erg__free(recs);
        erg__free(samples);
        if (st)
            goto fail;
    }
    if ((st = erg_profile_validate(p, err)) ||
        (st = erg_profile_set_energy_source(p, erg__source_set_word(sources), err)))
        goto fail;
    *out = p;
    return ERG_OK;
fail:
    erg_profile_free(p);
    return st;
}
