/* gpu_table.h: the GPU clock table (data/gpus.csv): each GPU model's clock filter, steps and
 * power limit, which EnvPipe and the baselines read (planner/gpus.c). */
#ifndef ERGON_GPU_TABLE_H
#define ERGON_GPU_TABLE_H

#include "ergon/ergon.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One GPU model's clock constants (data/gpus.csv; docs/envpipe.md, GPU clock table). */
typedef struct erg_gpu_spec {
    char name[32];      /* Lower-case name, e.g. "a100". */
    int filter_max_mhz; /* EnvPipe keeps clocks f with min <= f <= max ... */
    int filter_min_mhz;
    int profile_step_mhz;  /* ... and f a multiple of this step (90). */
    int reconfig_step_mhz; /* Reconfiguration granularity (30). */
    double max_power_w;    /* Board power limit: Zeus's P_max. */
} erg_gpu_spec;

/* Parse the CSV table (header gpu,filter_max_mhz,filter_min_mhz,profile_step_mhz,
 * reconfig_step_mhz,max_power_w; lines starting with '#' are comments). *out
 * is released with erg_free. ERG_EPARSE names the file, line and value. */
ERG_API erg_status erg_gpu_table_parse(const char *text, size_t len, const char *name,
                                       erg_gpu_spec **out, size_t *count, erg_error *err);
ERG_API erg_status erg_gpu_table_read(const char *path, erg_gpu_spec **out, size_t *count,
                                      erg_error *err);
/* Find a GPU by name, case-insensitively; "a100-sxm", "A100_SXM" and
 * "a100-pcie" fall back to "a100". ERG_ENOTFOUND lists the known names. */
ERG_API erg_status erg_gpu_table_find(const erg_gpu_spec *table, size_t count, const char *gpu,
                                      const erg_gpu_spec **out, erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
