/* fuzz_frontier_pack.c: the packed frontier reader (plans.ergon, docs/formats.md). */
#include "planner/frontier_internal.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    erg_frontier *f = NULL;
    erg_error err;
    if (erg__frontier_parse_packed((const char *)data, size, "fuzz", NULL, &f, &err) == ERG_OK) {
        size_t n = erg_frontier_size(f);
        erg_plan *p = NULL;
        if (n && erg_frontier_plan(f, n - 1, &p, &err) == ERG_OK)
            erg_plan_free(p);
        erg_frontier_free(f);
    }
    return 0;
}
