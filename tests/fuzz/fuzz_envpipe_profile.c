/* fuzz_envpipe_profile.c: the EnvPipe planners and baselines on arbitrary profiles (no crash, no
 * hang). */
#include "ergon/envpipe.h"
#include "ergon/baselines.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    erg_profile *p = NULL;
    erg_error err;
    if (erg_profile_parse_csv((const char *)data, size, "fuzz.csv", &p, &err) != ERG_OK)
        return 0;
    int S = erg_profile_num_stages(p);
    if (S >= 1 && S <= 4) {
        for (int variant = 0; variant < 2; variant++)
            for (int sched = 0; sched < 2; sched++) {
                erg_envpipe_opts o;
                erg_envpipe_opts_init(&o);
                o.blocking_power_w = 50;
                o.variant = (erg_envpipe_variant)variant;
                o.schedule = sched ? ERG_SCHED_ENVPIPE : ERG_SCHED_1F1B;
                o.max_iterations = 2000;
                erg_plan *plan = NULL;
                if (erg_plan_envpipe(p, S, S + 1, &o, &plan, NULL, &err) == ERG_OK)
                    erg_plan_free(plan);
            }
        erg_baseline_opts bo;
        erg_baseline_opts_init(&bo);
        bo.blocking_power_w = 50;
        erg_plan *plan = NULL;
        if (erg_plan_zeus_global(p, S, S, &bo, &plan, &err) == ERG_OK)
            erg_plan_free(plan);
        if (erg_plan_zeus_stage(p, S, S, &bo, &plan, &err) == ERG_OK)
            erg_plan_free(plan);
        if (erg_plan_uniform(p, S, S, &bo, &plan, &err) == ERG_OK)
            erg_plan_free(plan);
    }
    erg_profile_free(p);
    return 0;
}
