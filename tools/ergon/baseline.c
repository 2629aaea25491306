/* baseline.c: the one baseline of every user-facing saving: all-max clocks
 * evaluated with the profile (emulated with the profiled values), shared by
 * `plan perseus`'s summary, `choose` and `show` so that they agree.
 *
 * `plan perseus --out DIR` writes DIR/frontier-info.csv (key,value rows:
 * schedule, ranks, chunks, pipeline stages, backward split, microbatches,
 * blocking power, unit, all-max time and energy, the profile's and the frontier's fingerprints)
 * and DIR/profile.csv (the profile it planned with);
 * `choose` reads them back. A frontier directory without them (older ergon, Perseus's own output)
 * falls back to the fastest plan's estimate, and says so. */
#include "cli.h"

#include "ergon/emulate.h"
#include "ergon/envpipe.h"
#include "ergon/planner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_baseline_init(cli_baseline *b)
{
    erg_frontier_baseline_init(b);
}

void cli_baseline_free(cli_baseline *b)
{
    erg_frontier_baseline_free(b);
}

/* The all-max baseline from an already read profile and DAG (not owned). */
int cli_baseline_set(cli_baseline *b, erg_profile *prof, erg_dag *dag, double power_w,
                     const erg_emulation *all_max)
{
    b->prof = prof;
    b->dag = dag;
    b->power_w = power_w;
    b->all_max = *all_max;
    b->have = true;
    b->own = false;
    return CLI_OK;
}

static void join(char *out, size_t n, const char *dir, const char *name)
{
    size_t l = strlen(dir);
    while (l > 1 && dir[l - 1] == '/')
        l--;
    snprintf(out, n, "%.*s/%s", (int)l, dir, name);
}

int cli_baseline_write(const char *dir, const erg_profile *prof, const erg_schedule *sched, int S,
                       int M, double power_w, double unit_s, const erg_emulation *all_max,
                       const char *frontier_fp, erg_error *err)
{
    char path[4096];
    join(path, sizeof path, dir, "profile.csv");
    /* only the stages planned (--stages S of a larger profile: its first S, or S x chunks), so
     * that choose, show and emulate evaluate the plans on the profile they were made with */
    int ps = erg_profile_num_stages(prof), V = erg_schedule_chunks(sched);
    int used = ps >= S * V ? S * V : S;
    erg_profile *cut = NULL;
    if (used < ps) {
        if (erg_profile_new(&cut, err))
            return CLI_USER_ERROR;
        for (int st = 0; st < used; st++)
            for (int k = 0; k < ERG_NUM_INSTR_KINDS; k++) {
                size_t n = erg_profile_num_points(prof, st, (erg_instr_kind)k);
                const erg_profile_point *v = erg_profile_points(prof, st, (erg_instr_kind)k);
                for (size_t i = 0; i < n; i++)
                    if (erg_profile_add(cut, st, (erg_instr_kind)k, &v[i], err)) {
                        erg_profile_free(cut);
                        return CLI_USER_ERROR;
                    }
            }
        prof = cut;
    }
    erg_status wst = erg_profile_write_csv(prof, path, err);
    char prof_fp[ERG_PROFILE_FINGERPRINT_LEN];
    erg_profile_fingerprint(prof, prof_fp);
    erg_profile_free(cut);
    if (wst)
        return CLI_USER_ERROR;
    join(path, sizeof path, dir, "frontier-info.csv");
    FILE *fp = fopen(path, "w");
    if (!fp) {
        erg_error_set(err, ERG_EIO, "%s: cannot create the file", path);
        return CLI_USER_ERROR;
    }
    /* the schedule as the plans name it: kind, chunks per rank, and the
     * backward split that derived I/W costs (docs/formats.md) */
    fprintf(fp,
            "key,value\nformat,ergon-frontier-info\nversion,1\nschedule,%s\nnum_stages,%d\n"
            "num_chunks,%d\nnum_pipeline_stages,%d\nbackward_split,%.17g\n"
            "num_microbatches,%d\nblocking_power_w,%.17g\nunit_time_s,%.17g\n"
            "all_max_time_s,%.17g\nall_max_energy_j,%.17g\nprofile,profile.csv\n"
            "profile_fingerprint,%s\n",
            erg_schedule_name(sched->kind), S, erg_schedule_chunks(sched),
            S * erg_schedule_chunks(sched), erg_schedule_backward_split(sched), M, power_w, unit_s,
            all_max->time_s, all_max->energy_j, prof_fp);
    /* the frontier plans.ergon carries (erg_frontier_fingerprint): the files are one run's */
    if (frontier_fp && frontier_fp[0])
        fprintf(fp, "frontier_fingerprint,%s\n", frontier_fp);
    if (fclose(fp)) {
        erg_error_set(err, ERG_EIO, "%s: cannot write the file", path);
        return CLI_USER_ERROR;
    }
    return CLI_OK;
}

int cli_baseline_write_switch(const char *dir, double switch_latency_s, double transfer_time_s,
                              erg_error *err)
{
    char path[4096];
    join(path, sizeof path, dir, "frontier-info.csv");
    FILE *fp = fopen(path, "a");
    if (!fp) {
        erg_error_set(err, ERG_EIO, "%s: cannot open the file", path);
        return CLI_USER_ERROR;
    }
    fprintf(fp, "switch_latency_s,%.17g\ntransfer_time_s,%.17g\n", switch_latency_s,
            transfer_time_s);
    if (fclose(fp)) {
        erg_error_set(err, ERG_EIO, "%s: cannot write the file", path);
        return CLI_USER_ERROR;
    }
    return CLI_OK;
}

int cli_baseline_copy(const char *from_dir, const char *to_dir, erg_error *err)
{
    static const char *const names[] = {"frontier-info.csv", "profile.csv"};
    char from[4096], to[4096];
    join(from, sizeof from, from_dir, names[0]);
    FILE *probe = fopen(from, "r");
    if (!probe)
        return CLI_OK;
    fclose(probe);
    for (int i = 0; i < 2; i++) {
        join(from, sizeof from, from_dir, names[i]);
        join(to, sizeof to, to_dir, names[i]);
        FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
        bool ok = in && out;
        char buf[65536];
        size_t n;
        while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
            ok = fwrite(buf, 1, n, out) == n;
        ok = ok && !ferror(in);
        if (in)
            fclose(in);
        if (out && fclose(out))
            ok = false;
        if (!ok) {
            erg_error_set(err, ERG_EIO, "cannot copy %s to %s", from, to);
            return CLI_USER_ERROR;
        }
    }
    return CLI_OK;
}

int cli_baseline_read_power(const char *dir, double *power_w)
{
    return erg_frontier_info_power(dir, power_w) ? 1 : 0;
}

int cli_baseline_open(const char *dir, const erg_frontier *f, cli_baseline *b, erg_error *err)
{
    return erg_frontier_baseline_open(dir, f, b, err) ? CLI_USER_ERROR : CLI_OK;
}

erg_status cli_baseline_pick(const cli_baseline *b, const erg_frontier *f, double deadline_s,
                             size_t *k, erg_emulation *em, erg_error *err)
{
    return erg_frontier_baseline_pick(b, f, deadline_s, k, em, err);
}
