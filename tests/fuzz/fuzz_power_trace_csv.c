/* fuzz_power_trace_csv.c: the power-trace CSV reader (erg_power_trace_parse_csv) on arbitrary
 * bytes. A trace it accepts formats to a CSV that reads back and formats to the same text
 * (what the writer writes, the reader reads): the harness traps when it does not. */
#include "ergon/emulate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    erg_power_trace *tr = NULL, *back = NULL;
    erg_error err;
    if (erg_power_trace_parse_csv((const char *)data, size, "fuzz.csv", &tr, &err) != ERG_OK)
        return 0;
    char *a = NULL, *b = NULL;
    if (erg_power_trace_format_csv(tr, &a, &err) == ERG_OK) {
        if (erg_power_trace_parse_csv(a, strlen(a), "again.csv", &back, &err) != ERG_OK)
            __builtin_trap(); /* the reader refuses what the writer wrote */
        if (erg_power_trace_format_csv(back, &b, &err) == ERG_OK && strcmp(a, b) != 0)
            __builtin_trap(); /* it read something else */
    }
    erg_free(b);
    erg_free(a);
    erg_power_trace_free(back);
    erg_power_trace_free(tr);
    return 0;
}
