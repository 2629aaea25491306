/* plan_pairs.c: plan literals of (instruction name, clock) pairs per stage -- Zeus PFO's format,
 * also Perseus's master branch and ergon's zeus-py output: read as written
 * (erg_plan_pairs_parse) and, for erg_plan_parse, rewritten as the kronos literal of the
 * clocks they plan. */
#include "core/internal.h"
#include "ergon/plan.h"
#include "plan/plan_literal.h"

#include <string.h>

struct erg_plan_pairs {
    int S;
    int *lens;    /* pairs per stage */
    int *off;     /* [S + 1] first pair of each stage */
    int *freqs;   /* clocks, stage by stage */
    char **names; /* their instruction names */
};

void erg_plan_pairs_free(erg_plan_pairs *p)
{
    if (!p)
        return;
    if (p->names)
        for (int i = 0; i < p->off[p->S]; i++)
            erg__free(p->names[i]);
    erg__free(p->names);
    erg__free(p->freqs);
    erg__free(p->lens);
    erg__free(p->off);
    erg__free(p);
}

int erg_plan_pairs_num_stages(const erg_plan_pairs *p)
{
    return p ? p->S : 0;
}

int erg_plan_pairs_stage_len(const erg_plan_pairs *p, int stage)
{
    return p && stage >= 0 && stage < p->S ? p->lens[stage] : 0;
}

const int *erg_plan_pairs_freqs(const erg_plan_pairs *p, int stage)
{
    return p && stage >= 0 && stage < p->S ? p->freqs + p->off[stage] : NULL;
}

const char *erg_plan_pairs_name(const erg_plan_pairs *p, int stage, int i)
{
    return p && stage >= 0 && stage < p->S && i >= 0 && i < p->lens[stage]
               ? p->names[p->off[stage] + i]
               : NULL;
}

/* The instruction names a plan gives clocks (ergon's kind names: zeus-py plans of
 * zero-bubble and DualPipeV schedules carry I, W and overlapped steps). */
static bool pair_is_compute(const char *s)
{
    return !strcmp(s, "forward") || !strcmp(s, "backward") || !strcmp(s, "backward_input") ||
           !strcmp(s, "backward_weight") || !strcmp(s, "overlap_f_b");
}

/* Zeus PFO's plan literal -- per stage a list of ("forward"|"backward", clock) tuples (or
 * lists), single or double quotes, # comments, trailing commas; ergon also writes
 * backward_input, backward_weight and overlap_f_b for the new schedules -- read pair by
 * pair. 1 = parsed into *out, 0 = not this format, <0 = error set. */
static int parse_pairs(const char *text, size_t len, const char *name, erg_plan_pairs **out,
                       erg_error *err)
{
    pyparse ps = {text, text + len, name, 1, 1, err};
    if (!py_expect(&ps, '[') || !py_expect(&ps, '['))
        return 0;
    py_skip(&ps);
    if (ps.p >= ps.end || (*ps.p != '(' && *ps.p != '['))
        return 0;
    ps = (pyparse){text, text + len, name, 1, 1, err};
    erg_plan_pairs *pp = erg__calloc(1, sizeof *pp);
    size_t fcap = 0, ncap = 0, lcap = 0, ocap = 1, n = 0;
    erg_status st = pp && (pp->off = erg__calloc(1, sizeof(int))) ? ERG_OK : ERG_ENOMEM;
    if (!st)
        py_expect(&ps, '[');
    for (int stage = 0; !st; stage++) {
        if (py_expect(&ps, ']'))
            break;
        if (!py_expect(&ps, '[')) {
            st = py_error(&ps, "'[' opening a stage's (instruction, clock) pairs or ']'");
            break;
        }
        if (!ERG__GROW(pp->lens, lcap, (size_t)stage + 1, 16) ||
            !ERG__GROW(pp->off, ocap, (size_t)stage + 2, 16)) {
            st = ERG_ENOMEM;
            break;
        }
        pp->lens[stage] = 0;
        pp->S = stage + 1;
        pp->off[pp->S] = (int)n;
        for (;;) {
            if (py_expect(&ps, ']'))
                break;
            char close = py_expect(&ps, '(') ? ')' : py_expect(&ps, '[') ? ']' : 0;
            if (!close) {
                st = py_error(&ps, "'(' opening an (instruction, clock) pair");
                break;
            }
            py_skip(&ps);
            if (ps.p >= ps.end || (*ps.p != '\'' && *ps.p != '"')) {
                st = py_error(&ps, "a quoted instruction name");
                break;
            }
            char q = *ps.p++;
            const char *s0 = ps.p;
            while (ps.p < ps.end && *ps.p != q && *ps.p != '\n')
                ps.p++;
            ps.col += ps.p - s0 + 1;
            if (ps.p >= ps.end || *ps.p != q) {
                st = py_error(&ps, "the closing quote of the instruction name");
                break;
            }
            size_t sl = (size_t)(ps.p - s0);
            ps.p++;
            ps.col++;
            if (!py_expect(&ps, ',')) {
                st = py_error(&ps, "',' after the instruction name");
                break;
            }
            py_skip(&ps);
            const char *v0 = ps.p;
            long v = 0;
            while (ps.p < ps.end && *ps.p >= '0' && *ps.p <= '9' && ps.p - v0 < 9)
                v = v * 10 + (*ps.p++ - '0');
            ps.col += ps.p - v0;
            if (ps.p == v0 || (ps.p < ps.end && *ps.p >= '0' && *ps.p <= '9')) {
                st = py_error(&ps, "a clock (a non-negative integer below 10^9)");
                break;
            }
            py_expect(&ps, ',');
            if (!py_expect(&ps, close)) {
                st = py_error(&ps, close == ')' ? "')' closing the pair" : "']' closing the pair");
                break;
            }
            if (memchr(s0, '\0', sl)) {
                st = py_error(&ps, "an instruction name without NUL bytes");
                break;
            }
            if (!ERG__GROW(pp->freqs, fcap, n + 1, 256) ||
                !ERG__GROW(pp->names, ncap, n + 1, 256)) {
                st = ERG_ENOMEM;
                break;
            }
            if (!(pp->names[n] = erg__strndup(s0, sl))) {
                st = ERG_ENOMEM;
                break;
            }
            pp->freqs[n++] = (int)v;
            pp->lens[stage]++;
            pp->off[pp->S] = (int)n;
            if (!py_expect(&ps, ',') && !(py_skip(&ps), ps.p < ps.end && *ps.p == ']')) {
                st = py_error(&ps, "',' or ']' after a pair");
                break;
            }
        }
        if (!st && !py_expect(&ps, ',') && !(py_skip(&ps), ps.p < ps.end && *ps.p == ']'))
            st = py_error(&ps, "',' or ']' after a stage");
    }
    py_skip(&ps);
    if (!st && ps.p != ps.end)
        st = py_error(&ps, "only comments after the list of stages");
    if (st) {
        if (st == ERG_ENOMEM)
            erg_error_set(err, ERG_ENOMEM, "out of memory");
        erg_plan_pairs_free(pp);
        return -1;
    }
    *out = pp;
    return 1;
}

erg_status erg_plan_pairs_parse(const char *text, size_t len, const char *name,
                                erg_plan_pairs **out, erg_error *err)
{
    *out = NULL;
    if (!name)
        name = "<plan>";
    int z = parse_pairs(text, len, name, out, err);
    if (z < 0)
        return err && err->status ? err->status : ERG_EPARSE;
    if (z == 0)
        return erg_error_set(err, ERG_ENOTFOUND,
                             "%s is not a plan of (instruction, clock) pairs (it does not open "
                             "with [[( or [[[)",
                             name);
    return ERG_OK;
}

/* The pairs that get clocks, rewritten as the kronos literal of those clocks (the others are
 * not planned and are dropped), which parse_py then reads. 1 = rewritten into *out, 0 = not
 * this format, <0 = error set. */
int erg__plan_zeus_to_kronos(const char *text, size_t len, const char *name, char **out,
                             erg_error *err)
{
    erg_plan_pairs *pp = NULL;
    int z = parse_pairs(text, len, name, &pp, err);
    if (z <= 0)
        return z;
    erg__buf b = {0};
    erg_status st = erg__buf_append(&b, "[", 1);
    for (int g = 0; !st && g < pp->S; g++) {
        st = erg__buf_append(&b, g ? ",[" : "[", g ? 2 : 1);
        for (int i = 0, k = 0; !st && i < pp->lens[g]; i++)
            if (pair_is_compute(pp->names[pp->off[g] + i]))
                st = erg__buf_printf(&b, "%s%d", k++ ? "," : "", pp->freqs[pp->off[g] + i]);
        if (!st)
            st = erg__buf_append(&b, "]", 1);
    }
    if (!st)
        st = erg__buf_append(&b, "]\n", 2);
    erg_plan_pairs_free(pp);
    if (st) {
        erg__buf_free(&b);
        erg_error_set(err, ERG_ENOMEM, "out of memory");
        return -1;
    }
    *out = b.data;
    return 1;
}
