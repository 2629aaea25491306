/* fuzz_plan.c: the plan reader (JSON and freqs_pipeline .py literal). */
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
    return 0;
}
