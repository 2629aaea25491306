/* fuzz_plan.c: the plan reader (JSON and freqs_pipeline .py literal) and the reader of
 * (instruction, clock) pair literals. */
#include "ergon/plan.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    erg_plan *p = NULL;
    erg_error err;
    if (erg_plan_parse((const char *)data, size, "fuzz", NULL, &p, &err) == ERG_OK) {
        char *s = NULL;
        if (erg_plan_format_json(p, &s, &err) == ERG_OK)
            erg_free(s);
        erg_plan_free(p);
    }
    erg_plan_pairs *pp = NULL;
    if (erg_plan_pairs_parse((const char *)data, size, "fuzz", &pp, &err) == ERG_OK) {
        long sum = 0;
        for (int s = 0; s < erg_plan_pairs_num_stages(pp); s++)
            for (int i = 0; i < erg_plan_pairs_stage_len(pp, s); i++)
                sum += erg_plan_pairs_freqs(pp, s)[i] + (long)erg_plan_pairs_name(pp, s, i)[0];
        (void)sum;
        erg_plan_pairs_free(pp);
    }
    return 0;
}
