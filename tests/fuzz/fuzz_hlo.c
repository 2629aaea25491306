/* fuzz_hlo.c: the HLO text parser, and the analysis of what parses, on arbitrary bytes. */
#include "ergon/shard.h"

#include <stdint.h>
#include <stdio.h>

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
    /* Every other computation too (while bodies: trip counts). */
    for (size_t c = 0; c < erg_hlo_num_computations(m) && c < 8; c++) {
        char name[32];
        snprintf(name, sizeof name, "body");
        (void)c;
        if (erg_shard_analyze_computation(m, name, 2, 2, &s, &err) == ERG_OK) {
            char *t = NULL;
            if (erg_shard_report(s, false, &t, &err) == ERG_OK)
                erg_free(t);
            erg_shard_free(s);
        }
        break;
    }
    erg_hlo_free(m);
    return 0;
}
