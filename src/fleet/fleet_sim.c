/* fleet_sim.c: the results of a simulated fleet day (`ergon fleet simulate`, docs/fleet.md, "A
 * simulated day"): its timeline as CSV and its summary as JSON. */
#include "core/internal.h"
#include "ergon/fleet.h"

#include <string.h>

erg_status erg_fleet_sim_timeline_format_csv(const erg_fleet_sim_sample *samples,
                                             size_t num_samples, char **out, erg_error *err)
{
    if (!out || (!samples && num_samples))
        return erg_error_set(err, ERG_EINVAL, "erg_fleet_sim_timeline_format_csv: NULL argument");
    erg__buf b = {0};
    erg_status st = erg__buf_printf(&b, "hour,cap_w,jobs,gpus,fleet_w,power_limit_w,"
                                        "per_gpu_limit_w,no_cap_w,fleet_mean_slowdown,"
                                        "power_limit_mean_slowdown\n");
    for (size_t i = 0; !st && i < num_samples; i++) {
        const erg_fleet_sim_sample *s = &samples[i];
        st = erg__buf_printf(&b, "%.6f,%.3f,%ld,%ld,%.3f,%.3f,%.0f,%.3f,%.6f,%.6f\n", s->time_h,
                             s->cap_w, s->jobs, s->gpus, s->fleet_w, s->power_limit_w,
                             s->per_gpu_limit_w, s->no_cap_w, s->fleet_mean_slowdown,
                             s->power_limit_mean_slowdown);
    }
    if (st) {
        erg__buf_free(&b);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    *out = b.data;
    return ERG_OK;
}

erg_status erg_fleet_sim_timeline_write_csv(const char *path, const erg_fleet_sim_sample *samples,
                                            size_t num_samples, erg_error *err)
{
    if (!path)
        return erg_error_set(err, ERG_EINVAL, "erg_fleet_sim_timeline_write_csv: NULL argument");
    char *csv = NULL;
    erg_status st = erg_fleet_sim_timeline_format_csv(samples, num_samples, &csv, err);
    if (!st)
        st = erg__write_file(path, csv, strlen(csv), err);
    erg__free(csv);
    return st;
}

static erg_status policy_json(erg__buf *b, const char *key, const erg_fleet_sim_policy *p)
{
    return erg__buf_printf(b,
                           ", \"%s\": {\"mean_slowdown\": %.9f, \"energy_j\": %.6f, \"over_h\": "
                           "%.6f, \"max_power_over_cap\": %.9f}",
                           key, p->mean_slowdown, p->energy_j, p->over_h, p->max_power_over_cap);
}

erg_status erg_fleet_sim_summary_format_json(const erg_fleet_sim_summary *s, char **out,
                                             erg_error *err)
{
    if (!s || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_fleet_sim_summary_format_json: NULL argument");
    erg__buf b = {0};
    erg_status st = erg__buf_printf(
        &b,
        "{\"jobs\": %ld, \"peak_jobs\": %ld, \"peak_gpus\": %ld, \"job_hours\": %.6f, "
        "\"events\": %zu, \"cap_min_w\": %.6f, \"cap_max_w\": %.6f, \"violations\": %ld",
        s->jobs, s->peak_jobs, s->peak_gpus, s->job_h, s->events, s->cap_min_w, s->cap_max_w,
        s->violations);
    if (!st)
        st = policy_json(&b, "fleet", &s->fleet);
    if (!st)
        st = policy_json(&b, "power_limit", &s->power_limit);
    if (!st)
        st = policy_json(&b, "no_cap", &s->no_cap);
    if (!st)
        st = erg__buf_append(&b, "}\n", 2);
    if (st) {
        erg__buf_free(&b);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    *out = b.data;
    return ERG_OK;
}

erg_status erg_fleet_sim_summary_write_json(const char *path, const erg_fleet_sim_summary *summary,
                                            erg_error *err)
{
    if (!path)
        return erg_error_set(err, ERG_EINVAL, "erg_fleet_sim_summary_write_json: NULL argument");
    char *json = NULL;
    erg_status st = erg_fleet_sim_summary_format_json(summary, &json, err);
    if (!st)
        st = erg__write_file(path, json, strlen(json), err);
    erg__free(json);
    return st;
}
