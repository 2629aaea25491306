/* plan_literal.h: the reader of Python plan literals that plan.c (kronos lists of clocks) and
 * plan_pairs.c ((instruction, clock) pairs) share. Private to src/plan/. */
#ifndef ERGON_PLAN_LITERAL_H
#define ERGON_PLAN_LITERAL_H

#include "core/internal.h"

#include <stdio.h>

/* Parse the Python literal: a list of lists of integers, with # comments,
 * whitespace and trailing commas. Nothing is evaluated. */
typedef struct pyparse {
    const char *p, *end, *name;
    long line, col;
    erg_error *err;
} pyparse;

static inline void py_skip(pyparse *ps)
{
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == '\n') {
            ps->line++;
            ps->col = 1;
            ps->p++;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            ps->p++;
            ps->col++;
        } else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n')
                ps->p++;
        } else {
            break;
        }
    }
}

static inline erg_status py_error(pyparse *ps, const char *what)
{
    char got[16] = "end of file";
    if (ps->p < ps->end) {
        unsigned char c = (unsigned char)*ps->p;
        if (c >= 32 && c < 127)
            snprintf(got, sizeof got, "'%c'", c);
        else
            snprintf(got, sizeof got, "byte 0x%02x", c);
    }
    return erg_error_set(ps->err, ERG_EPARSE, "%s:%ld:%ld: expected %s, found %s", ps->name,
                         ps->line, ps->col, what, got);
}

static inline bool py_expect(pyparse *ps, char c)
{
    py_skip(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        ps->col++;
        return true;
    }
    return false;
}

/* A pair literal (Zeus's format) rewritten as the kronos literal of the clocks of its
 * forward, backward, backward_input, backward_weight and overlap_f_b pairs (plan_pairs.c).
 * 1 = rewritten into *out (erg__free), 0 = not this format, <0 = error set. */
int erg__plan_zeus_to_kronos(const char *text, size_t len, const char *name, char **out,
                             erg_error *err);

#endif
