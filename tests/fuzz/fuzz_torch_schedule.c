/* fuzz_torch_schedule.c: the torch compute_only schedule CSV reader on
 * arbitrary bytes; what it accepts must build a DAG and format back. */
#include "ergon/pipeline.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    erg_order *o = NULL;
    erg_error err;
    if (size > (1 << 16))
        return 0;
    if (erg_order_parse_csv((const char *)data, size, "fuzz.csv", &o, &err) == ERG_OK) {
        erg_dag *d = NULL;
        if (erg_dag_new_from_order(o, &d, &err) != ERG_OK)
            abort(); /* accepted orders are acyclic */
        erg_dag_free(d);
        char *t = NULL;
        if (erg_order_format(o, 1, &t, &err) == ERG_OK)
            erg_free(t);
        erg_order_free(o);
    }
    return 0;
}
