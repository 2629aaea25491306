/* envpipe_common.h: option helpers shared by the EnvPipe/baseline, compare and show subcommands. */
#ifndef ERGON_ENVPIPE_COMMON_H
#define ERGON_ENVPIPE_COMMON_H

#include "ergon/envpipe.h"

#include <stdbool.h>

/* What the planning subcommands share: a profile, S, M, the GPU and its
 * blocking power and clock table. */
typedef struct ecli_setup {
    const char *profile_path;
    long S, M;
    const char *gpu;       /* --gpu NAME (may be NULL) */
    const char *gpu_table; /* --gpu-table FILE (may be NULL) */
    double power_w;
    bool have_power;
    erg_profile *profile;
    erg_gpu_spec *table;
    size_t table_n;
    const erg_gpu_spec *spec; /* the GPU's row, NULL when unknown */
    bool no_table;            /* do not look up the clock table (pictures) */
} ecli_setup;

/* Load the profile, default S to the profile's stages, resolve the blocking
 * power (--blocking-power, else --gpu a40|a100) and the GPU's clock table
 * row. Returns CLI_OK or the exit code after printing the error. */
int ecli_setup_load(const char *cmd, ecli_setup *s, bool need_m);
void ecli_setup_free(ecli_setup *s);
/* Write a plan: .py = freqs_pipeline literal, anything else JSON. */
int ecli_write_plan(const char *cmd, const erg_plan *plan, const char *path);
/* The default location of data/gpus.csv (ERGON_GPU_TABLE, else next to the
 * binary's source tree or install prefix); NULL if none exists. */
const char *ecli_default_gpu_table(void);

#endif
