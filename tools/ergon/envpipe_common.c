/* envpipe_common.c: option helpers shared by the EnvPipe/baseline, compare and show subcommands. */
#include "envpipe_common.h"
#include "ergon/gpu_table.h"
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *ecli_default_gpu_table(void)
{
    static char buf[PATH_MAX + 64];
    const char *env = getenv("ERGON_GPU_TABLE");
    if (env && *env)
        return env;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    static const char *const rel[] = {"/../data/gpus.csv", "/../share/ergon/gpus.csv",
                                      "/../../data/gpus.csv"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", exe, rel[i]);
        if (access(buf, R_OK) == 0)
            return buf;
    }
    return NULL;
}

int ecli_setup_load(const char *cmd, ecli_setup *s, bool need_m)
{
    erg_error err = {0};
    if (!s->profile_path)
        return cli_usage_error(cmd, "--profile is required");
    if (need_m && !s->M)
        return cli_usage_error(cmd, "--microbatches is required");
    if (!s->have_power) {
        if (!s->gpu)
            return cli_usage_error(cmd, "the blocking power is needed: --gpu A40|A100 or "
                                        "--blocking-power W");
        if (erg_blocking_power_w(s->gpu, &s->power_w, &err))
            return cli_usage_error(cmd, "%s; give --blocking-power W for this GPU", err.msg);
    }
    if (erg_profile_read_csv(s->profile_path, &s->profile, &err))
        return cli_report(cmd, &err);
    int ps = erg_profile_num_stages(s->profile);
    if (!s->S)
        s->S = ps;
    if (s->S > ps) {
        fprintf(stderr, "ergon %s: %s has %d stages, --stages asks for %ld\n", cmd, s->profile_path,
                ps, s->S);
        return CLI_USER_ERROR;
    }
    if (s->no_table)
        return CLI_OK;
    const char *tp = s->gpu_table ? s->gpu_table : ecli_default_gpu_table();
    if (s->gpu && !tp)
        fprintf(stderr,
                "ergon %s: note: no GPU clock table found (--gpu-table or "
                "$ERGON_GPU_TABLE); using the profile's clocks\n",
                cmd);
    if (s->gpu && tp) {
        if (erg_gpu_table_read(tp, &s->table, &s->table_n, &err))
            return cli_report(cmd, &err);
        if (erg_gpu_table_find(s->table, s->table_n, s->gpu, &s->spec, &err))
            fprintf(stderr, "ergon %s: note: %s; using the profile's clocks\n", cmd, err.msg);
        /* a profile measured on another GPU: its clocks go above this GPU's highest */
        int top = 0;
        for (int st = 0; s->spec && st < erg_profile_num_stages(s->profile); st++)
            for (int k = 0; k < ERG_NUM_INSTR_KINDS; k++) {
                size_t n = erg_profile_num_points(s->profile, st, (erg_instr_kind)k);
                const erg_profile_point *v = erg_profile_points(s->profile, st, (erg_instr_kind)k);
                for (size_t i = 0; i < n; i++)
                    if (v[i].freq_mhz > top)
                        top = v[i].freq_mhz;
            }
        if (s->spec && top > s->spec->filter_max_mhz) {
            fprintf(stderr,
                    "ergon %s: %s has clocks up to %d MHz, above the %s's highest (%d MHz, "
                    "data/gpus.csv): a profile from another GPU? Give that GPU's --gpu, or "
                    "--blocking-power W without --gpu to use the profile's own clocks\n",
                    cmd, s->profile_path, top, s->gpu, s->spec->filter_max_mhz);
            return CLI_USER_ERROR;
        }
    } else if (s->gpu_table) {
        fprintf(stderr, "ergon %s: note: --gpu-table without --gpu has no effect\n", cmd);
    }
    return CLI_OK;
}

void ecli_setup_free(ecli_setup *s)
{
    erg_profile_free(s->profile);
    erg_free(s->table);
    s->profile = NULL;
    s->table = NULL;
}

int ecli_write_plan(const char *cmd, const erg_plan *plan, const char *path)
{
    erg_error err = {0};
    size_t n = strlen(path);
    erg_status st = n > 3 && !strcmp(path + n - 3, ".py")
                        ? erg_plan_write_py(plan, NULL, path, &err)
                        : erg_plan_write_json(plan, path, &err);
    if (st)
        return cli_report(cmd, &err);
    return CLI_OK;
}
