/* fuzz_hlo.c: the HLO text parser, and the analysis, costs and DP search of what parses, on
 * arbitrary bytes. */
#include "ergon/shard.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    erg_hlo_module *m = NULL;
    erg_error err;
    if (erg_hlo_parse((const char *)data, size, "fuzz.hlo", &m, &err) != ERG_OK)
        return 0;
    erg_shard *s = NULL;
    if (erg_shard_analyze(m, 1, 2, &s, &err) == ERG_OK) {
        char *t = NULL;
        if (erg_shard_report(s, true, &t, &err) == ERG_OK)
            erg_free(t);
        /* Costs and the DP (frontier, elimination or chain), small graphs only; a tight
         * budget as well, so that the memory dimension is exercised. */
        erg_shard_cost_options o;
        erg_shard_cost_options_init(&o);
        erg_shard_plan *p = NULL;
        for (int pass = 0; pass < 2 && erg_shard_num_blocks(s) <= 32; pass++) {
            o.mem_budget_bytes = pass ? 1e6 : 0;
            if (erg_shard_profile(s, &o, NULL, NULL, &err) == ERG_OK &&
                erg_shard_search(s, ERG_SHARD_DP, 1, &p, &err) == ERG_OK) {
                /* The annotated module (custom-call tuples, weights) must re-read as the same
                 * module: erg_shard_annotate checks it (EINTERNAL when it does not), and so does
                 * this harness, independently, for the parse. */
                char *a = NULL;
                erg_hlo_module *m2 = NULL;
                erg_status ast = erg_shard_annotate(s, p, &a, &err);
                if (ast == ERG_EINTERNAL)
                    __builtin_trap();
                if (ast == ERG_OK) {
                    if (erg_hlo_parse(a, strlen(a), "annotated.hlo", &m2, &err) != ERG_OK)
                        __builtin_trap();
                    erg_hlo_free(m2);
                    erg_free(a);
                }
                erg_shard_plan_free(p);
            }
            p = NULL;
        }
        erg_shard_free(s);
    }
    /* A computation named "body" (the seed corpus's while body): trip counts, loop reports,
     * loop-carried costs and the body's parameter/ROOT shardings. */
    if (erg_shard_analyze_computation(m, "body", 2, 2, &s, &err) == ERG_OK) {
        char *t = NULL;
        if (erg_shard_report(s, false, &t, &err) == ERG_OK)
            erg_free(t);
        erg_shard_cost_options o;
        erg_shard_cost_options_init(&o);
        erg_shard_plan *p = NULL;
        if (erg_shard_num_blocks(s) <= 32 && erg_shard_profile(s, &o, NULL, NULL, &err) == ERG_OK &&
            erg_shard_search(s, ERG_SHARD_DP, 1, &p, &err) == ERG_OK) {
            erg_status ast = erg_shard_annotate(s, p, &t, &err);
            if (ast == ERG_EINTERNAL) /* the loop's annotated module must re-read */
                __builtin_trap();
            if (ast == ERG_OK)
                erg_free(t);
            erg_shard_plan_free(p);
        }
        erg_shard_free(s);
    }
    /* A 3x2 mesh: the one-axis strategies of 2-D meshes. */
    if (erg_shard_analyze(m, 3, 2, &s, &err) == ERG_OK)
        erg_shard_free(s);
    erg_hlo_free(m);
    return 0;
}
