/* hlo_query.c: questions the planner asks of a parsed HLO module's text: a loop body's trip
 * count, a collective's largest replica group, whether the module is already partitioned. */
#include "shard/hlo.h"

#include <string.h>

/* Trip count of the while loop whose body is computation `ci`: backend_config
 * "known_trip_count":{"n":"N"}, else the loop condition's compare(i, constant(N)),
 * direction=LT; 0 when `ci` is no loop body or the count is unknown. *loop names the
 * while instruction (or NULL). */
long erg__hlo_trip_count(const erg_hlo_module *m, int ci, const char **loop)
{
    *loop = NULL;
    for (int c = 0; c < m->ncomps; c++)
        for (int i = 0; i < m->comps[c].n; i++) {
            const hlo_instr *in = &m->comps[c].ins[i];
            if (in->op != HLO_OP_WHILE)
                continue;
            char *body = erg__hlo_attr_str(m, in, "body");
            bool match = body && erg__hlo_find_comp(m, body) == ci;
            erg__free(body);
            if (!match)
                continue;
            *loop = in->name;
            const hlo_attr *a = erg__hlo_find_attr(in, "backend_config");
            if (a) {
                const char *t = m->text + a->off, *e = t + a->len;
                const char *k = NULL;
                for (const char *q = t; q + 16 <= e; q++)
                    if (!memcmp(q, "known_trip_count", 16)) {
                        k = q + 16;
                        break;
                    }
                while (k && k < e && *k != '"' && !(*k >= '0' && *k <= '9'))
                    k++;
                /* skip {"n":" */
                while (k && k < e && !(*k >= '0' && *k <= '9'))
                    k++;
                if (k && k < e) {
                    long v = 0;
                    while (k < e && *k >= '0' && *k <= '9' && v < 1000000000)
                        v = v * 10 + (*k++ - '0');
                    if (v > 0)
                        return v;
                }
            }
            char *cond = erg__hlo_attr_str(m, in, "condition");
            int cc = cond ? erg__hlo_find_comp(m, cond) : -1;
            erg__free(cond);
            if (cc < 0)
                return 0;
            const hlo_comp *C = &m->comps[cc];
            for (int j = 0; j < C->n; j++) {
                const hlo_instr *cmp = &C->ins[j];
                char *dir = erg__hlo_attr_str(m, cmp, "direction");
                bool lt = dir && !strcmp(dir, "LT");
                erg__free(dir);
                if (strcmp(cmp->opcode, "compare") || !lt || cmp->nops != 2)
                    continue;
                const hlo_instr *k2 = &C->ins[cmp->ops[1]];
                if (k2->op == HLO_OP_CONSTANT && k2->lit_len > 0 && k2->lit_len < 20) {
                    char buf[24];
                    memcpy(buf, m->text + k2->lit_off, k2->lit_len);
                    buf[k2->lit_len] = '\0';
                    long v;
                    if (erg__parse_long(buf, &v) && v > 0)
                        return v;
                }
            }
            return 0;
        }
    return 0;
}

/* Largest replica group of a collective: {{0,1},{2,3}} -> 2, [2,4]<=[8] -> 4, {} (all
 * devices) or a missing attribute -> -1. */
static long largest_group(const erg_hlo_module *m, const hlo_instr *in)
{
    const hlo_attr *a = erg__hlo_find_attr(in, "replica_groups");
    if (!a)
        a = erg__hlo_find_attr(in, "source_target_pairs");
    if (!a)
        return -1;
    const char *t = m->text + a->off, *e = t + a->len;
    if (a->len && *t == '[') {
        /* iota form [groups,size]<=[n]: the last dim before ']' is the group size */
        const char *r = memchr(t, ']', (size_t)(e - t));
        long v = 0;
        const char *q = r;
        while (q && q > t && q[-1] >= '0' && q[-1] <= '9')
            q--;
        for (; q && q < r; q++)
            v = v * 10 + (*q - '0');
        return v > 0 ? v : -1;
    }
    long best = 0, cur = 0;
    int depth = 0;
    bool any = false;
    for (const char *q = t; q < e; q++) {
        if (*q == '{') {
            depth++;
            if (depth == 2)
                cur = 0, any = false;
        } else if (*q == '}') {
            if (depth == 2 && any)
                best = ERG__MAX(best, cur + 1);
            depth--;
        } else if (depth == 2 && *q == ',') {
            cur++;
        } else if (depth == 2 && *q >= '0' && *q <= '9') {
            any = true;
        }
    }
    return best > 0 ? best : -1;
}

/* Collectives already present mean the module was partitioned (per-device
 * shapes); planning it again would re-annotate per-device tensors. */
erg_status erg__hlo_check_unpartitioned(const erg_hlo_module *m, erg_error *err)
{
    bool annotated = false;
    for (int c = 0; c < m->ncomps; c++)
        for (int i = 0; i < m->comps[c].n; i++) {
            const hlo_instr *in = &m->comps[c].ins[i];
            annotated |= erg__hlo_find_attr(in, "sharding") != NULL;
            bool is_coll = in->op == HLO_OP_COLLECTIVE ||
                           !strcmp(in->opcode, "cross-replica-sum") ||
                           !strcmp(in->opcode, "collective-permute-start") ||
                           !strcmp(in->opcode, "collective-broadcast") ||
                           !strcmp(in->opcode, "ragged-all-to-all");
            bool ids = !strcmp(in->opcode, "partition-id") || !strcmp(in->opcode, "replica-id");
            long g = is_coll ? largest_group(m, in) : 0;
            /* A collective whose groups each hold one device is a no-op; any other one
             * (explicit groups, or {} meaning all devices) says the module is partitioned
             * or data-parallel already. */
            bool real = is_coll && g != 1;
            if (real || ids) {
                long line, col;
                erg__hlo_line_col(m, in->start, &line, &col);
                return erg_error_set(
                    err, ERG_EINVAL,
                    "%s:%ld: the module is already partitioned: '%s' is %s%s%s "
                    "(num_partitions=%ld); "
                    "ergon shard plans the single-device module before SPMD partitioning (its "
                    "shapes are whole tensors): give it that module instead",
                    m->filename, line, in->name, is_coll ? "a collective " : "a ", in->opcode,
                    is_coll && g > 1 ? " over device groups" : "", m->num_partitions);
            }
        }
    if (m->num_partitions > 1 && !annotated)
        return erg_error_set(err, ERG_EINVAL,
                             "%s: the module declares num_partitions=%ld but carries no "
                             "sharding annotation: it looks already partitioned (per-device "
                             "shapes); ergon shard plans the single-device module before SPMD "
                             "partitioning: give it that module instead",
                             m->filename, m->num_partitions);
    return ERG_OK;
}
