/* fuzz_gpu_table.c: the GPU clock table reader on arbitrary bytes. */
#include "ergon/envpipe.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    erg_gpu_spec *t = NULL;
    size_t n = 0;
    erg_error err;
    if (erg_gpu_table_parse((const char *)data, size, "fuzz.csv", &t, &n, &err) == ERG_OK) {
        const erg_gpu_spec *g;
        erg_gpu_table_find(t, n, "a100-sxm", &g, &err);
        erg_free(t);
    }
    return 0;
}
