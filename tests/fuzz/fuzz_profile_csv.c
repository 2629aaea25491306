/* fuzz_profile_csv.c: the stage-profile CSV reader on arbitrary bytes. */
#include "ergon/profile.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    erg_profile *p = NULL;
    erg_error err;
    if (erg_profile_parse_csv((const char *)data, size, "fuzz.csv", &p, &err) == ERG_OK)
        erg_profile_free(p);
    return 0;
}
