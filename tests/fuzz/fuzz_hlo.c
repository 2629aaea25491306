/* fuzz_hlo.c: the HLO text parser, and the analysis of what parses, on arbitrary bytes. */
#include "ergon/shard.h"

#include <stdint.h>

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
        erg_shard_free(s);
    }
    /* A computation named "body" (the seed corpus's while body): trip counts, loop reports. */
    if (erg_shard_analyze_computation(m, "body", 2, 2, &s, &err) == ERG_OK) {
        char *t = NULL;
        if (erg_shard_report(s, false, &t, &err) == ERG_OK)
            erg_free(t);
        erg_shard_free(s);
    }
    erg_hlo_free(m);
    return 0;
}
