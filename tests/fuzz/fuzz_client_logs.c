/* fuzz_client_logs.c: the client log parsers (instructions and time-energy CSV) and aggregation. */
#include "client/client_internal.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* First half: instructions; second half: energy samples. */
    size_t half = size / 2;
    erg__instr_rec *recs = NULL;
    erg__energy_sample *samples = NULL;
    size_t nr = 0, ns = 0;
    erg_status a = erg__parse_instructions((const char *)data, half, "i.csv", &recs, &nr, NULL);
    erg_status b =
        erg__parse_energy((const char *)data + half, size - half, "e.csv", &samples, &ns, NULL);
    if (a == ERG_OK && b == ERG_OK) {
        erg_profile *p = NULL;
        if (erg_profile_new(&p, NULL) == ERG_OK) {
            unsigned sources = 0;
            erg__aggregate_stage(p, 0, recs, nr, samples, ns, true, "fuzz", &sources, NULL);
            (void)erg__source_set_word(sources);
            erg_profile_free(p);
        }
    }
    erg__free(recs);
    erg__free(samples);
    return 0;
}
