/* fuzz_envpipe_waits.c: the measured-waits CSV reader and one reconfiguration step on arbitrary
 * bytes. */
#include "ergon/envpipe.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    erg_schedule sc = {.kind = ERG_SCHED_ENVPIPE, .extra_warmup = {0, 1, 2, 0}};
    erg_plan *plan = NULL;
    if (erg_plan_new(&sc, 4, 4, &plan, NULL) != ERG_OK)
        return 0;
    erg_plan_fill(plan, 1260);
    double wait[32];
    int path[32], len, maxf[4] = {1980, 1980, 1980, 1980};
    bool changed;
    erg_error err;
    if (erg_envpipe_waits_parse((const char *)data, size, "fuzz.csv", plan, wait, &err) == ERG_OK)
        erg_envpipe_reconfigure_step(plan, wait, 0, 4, ERG_RECONFIG_BALANCED, 30, maxf, path, &len,
                                     &changed, &err);
    erg_plan_free(plan);
    return 0;
}
