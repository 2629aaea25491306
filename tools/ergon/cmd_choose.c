/* cmd_choose.c: `ergon choose`: the minimum-energy plan that meets a deadline. */
#include "cli.h"

#include "ergon/emulate.h"
#include "ergon/planner.h"

#include <stdio.h>
#include <string.h>

static const cli_help choose_help = {
    "usage: ergon choose --frontier DIR (--deadline S | --slowdown X) [--out FILE] [--json]\n",
    "Choose the minimum-energy plan of a frontier directory (or its frontier.csv)\n"
    "whose iteration time fits: at most S seconds, or at most X times the time at\n"
    "all-max clocks (a straggler pipeline X times slower sets the pace; 1.01 = 1%\n"
    "slowdown). --deadline and --slowdown exclude each other.\n\n"
    "The baseline is all-max clocks evaluated with the profile (the profile.csv and\n"
    "frontier-info.csv that 'ergon plan perseus' writes into DIR), the same as the\n"
    "plan summary's: the plan is picked by the planner's estimate, then moved to\n"
    "faster plans until its profiled time fits. Prints the plan's index, its\n"
    "profiled time and energy with the change against all-max clocks, the planner's\n"
    "estimate, and its file. A directory without those two files (e.g. Perseus's\n"
    "own output) is measured against the fastest plan's estimate, as stated.\n",
    NULL};

/* The least-energy plan within limit_s whose swing meets the bound (emulate.h). */
static erg_status pick_swing(const cli_baseline *bl, const erg_frontier *f, double limit_s,
                             double window, double max_swing, bool floor_ok, erg_swing_pick *sp,
                             erg_error *err)
{
    erg_emulate_opts eo;
    erg_emulate_opts_init(&eo);
    eo.blocking_power_w = bl->power_w;
    eo.switch_latency_s = bl->switch_latency_s;
    eo.transfer_time_s = bl->transfer_time_s;
    return erg_frontier_pick_swing(bl->prof, bl->dag, f, &eo, limit_s, window, max_swing, floor_ok,
                                   sp, err);
}

/* The plan's average, peak and trough power (emulate.h) into the plan (written with it). */
static erg_status stamp_power(const cli_baseline *bl, erg_plan *p, erg_error *err)
{
    erg_emulate_opts eo;
    erg_emulate_opts_init(&eo);
    eo.blocking_power_w = bl->power_w;
    eo.switch_latency_s = bl->switch_latency_s;
    eo.transfer_time_s = bl->transfer_time_s;
    erg_power_trace *tr = NULL;
    erg_power_stats ps;
    erg_status st = erg_power_trace_new(bl->prof, bl->dag, p, &eo, &tr, err);
    if (!st)
        st = erg_power_trace_stats(tr, erg_power_trace_period(tr), &ps, err);
    if (!st)
        erg_plan_set_power(p, ps.avg_w, ps.peak_w, ps.trough_w);
    erg_power_trace_free(tr);
    return st;
}

/* DIR, or DIR/frontier.csv's directory (accepted as `show` does), in buf. */
static const char *choose_dir(const char *dir, char *buf, size_t n)
{
    size_t l = strlen(dir);
    while (l > 1 && dir[l - 1] == '/')
        l--;
    if (l >= 12 && !strncmp(dir + l - 12, "frontier.csv", 12) && (l == 12 || dir[l - 13] == '/')) {
        l = l == 12 ? 0 : l - 13;
        while (l > 1 && dir[l - 1] == '/')
            l--;
    }
    snprintf(buf, n, "%.*s", l ? (int)l : 1, l ? dir : ".");
    return buf;
}

/* --out: plan k of f as an ergon JSON plan (a .py plan if out ends in .py), stamped with the
 * profile, blocking power and clocks it was planned with, and the power it draws. */
static int choose_write(const char *cmd, const cli_baseline *bl, const erg_frontier *f, size_t k,
                        const char *out)
{
    erg_error err = {0};
    erg_plan *p = NULL;
    size_t ol = strlen(out);
    bool py = ol > 3 && !strcmp(out + ol - 3, ".py");
    if (erg_frontier_plan(f, k, &p, &err))
        return cli_report(cmd, &err);
    int rc = CLI_OK;
    if (bl->have && (rc = cli_plan_stamp(cmd, p, bl->prof, bl->power_w, NULL))) {
        erg_plan_free(p);
        return rc;
    }
    if ((bl->have && stamp_power(bl, p, &err)) ||
        (py ? erg_plan_write_py(p, NULL, out, &err) : erg_plan_write_json(p, out, &err)))
        rc = cli_report(cmd, &err);
    erg_plan_free(p);
    return rc;
}

/* What choose picked: the plan's index, estimate, emulation, swing pick and file. */
typedef struct choose_result {
    const char *dir, *file;
    size_t k;
    erg_frontier_point pt, fast;
    erg_emulation em;
    erg_swing_pick sp;
    double window, max_swing; /* max_swing < 0: no bound */
} choose_result;

static void choose_print_json(const cli_baseline *bl, const choose_result *r)
{
    const erg_swing_pick *sp = &r->sp;
    printf("{\"index\": %zu, \"estimate_time_s\": %.17g, \"estimate_energy_j\": %.17g, "
           "\"file\": \"%s\", \"fastest_estimate_time_s\": %.17g, "
           "\"fastest_estimate_energy_j\": %.17g",
           r->k, r->pt.time_s, r->pt.energy_j, r->file ? r->file : "", r->fast.time_s,
           r->fast.energy_j);
    if (r->max_swing >= 0)
        printf(", \"power\": {\"avg_w\": %.17g, \"peak_w\": %.17g, \"trough_w\": %.17g, "
               "\"window_s\": %.17g, \"swing_w\": %.17g, \"ramp_w_per_s\": %.17g, "
               "\"max_swing_w\": %.17g, \"floor_w\": %.17g, \"floor_energy_j\": %.17g}",
               sp->power.avg_w, sp->power.peak_w, sp->power.trough_w, sp->power.window_s,
               sp->power.swing_w, sp->power.ramp_w_per_s, r->max_swing, sp->floor_w,
               sp->floor_energy_j);
    if (bl->have)
        printf(", \"time_s\": %.17g, \"energy_j\": %.17g, \"all_max_time_s\": %.17g, "
               "\"all_max_energy_j\": %.17g, \"energy_saving_vs_all_max\": %.17g",
               r->em.time_s, r->em.energy_j, bl->all_max.time_s, bl->all_max.energy_j,
               1 - r->em.energy_j / bl->all_max.energy_j);
    printf("}\n");
}

static void choose_print(const cli_baseline *bl, const choose_result *r)
{
    const erg_swing_pick *sp = &r->sp;
    if (!bl->have) {
        printf("plan %zu: %.6g s, %.6g J (planner estimates; %+.2f%% time, %+.2f%% energy vs "
               "the fastest plan's estimate: %s has no frontier-info.csv and profile.csv, so "
               "no all-max baseline)\n",
               r->k, r->pt.time_s, r->pt.energy_j, 100 * (r->pt.time_s / r->fast.time_s - 1),
               100 * (r->pt.energy_j / r->fast.energy_j - 1), r->dir);
        if (r->file)
            printf("file: %s\n", r->file);
        return;
    }
    char how[96] = "profiled values";
    if (bl->switch_latency_s > 0) /* a switch-aware frontier (docs/emulate.md) */
        snprintf(how, sizeof how, "emulated with a %g s clock-switch latency",
                 bl->switch_latency_s);
    printf("plan %zu: %.6g s, %.6g J (%s; %+.2f%% time, %+.2f%% energy vs "
           "all-max clocks: %.6g s, %.6g J)\n"
           "planner estimate: %.6g s, %.6g J\n",
           r->k, r->em.time_s, r->em.energy_j, how, 100 * (r->em.time_s / bl->all_max.time_s - 1),
           100 * (r->em.energy_j / bl->all_max.energy_j - 1), bl->all_max.time_s,
           bl->all_max.energy_j, r->pt.time_s, r->pt.energy_j);
    if (r->file)
        printf("file: %s\n", r->file);
    if (r->max_swing >= 0)
        printf("power: swing %.1f W over %g s (bound %g W), average %.1f W, peak %.1f W, "
               "trough %.1f W; floor %.1f W per GPU (%+.1f J per iteration)\n",
               sp->power.swing_w, r->window, r->max_swing, sp->power.avg_w, sp->power.peak_w,
               sp->power.trough_w, sp->floor_w, sp->floor_energy_j);
}

int cmd_choose(int argc, char **argv)
{
    const char *cmd = "choose";
    const char *dir = NULL, *out = NULL;
    double deadline = 0, slowdown = 0, max_swing = -1, window = 1;
    bool json = false, floor_ok = false;
    const cli_opt opts[] = {
        CLI_OPT_S("frontier", "DIR", &dir, "a frontier directory (or its frontier.csv)"),
        CLI_OPT_D("deadline", "S", &deadline, 1e-9, 1e12, "iteration time at most S seconds"),
        CLI_OPT_D("slowdown", "X", &slowdown, 1, 1e6,
                  "at most X times the time at all-max clocks (1.01 = 1%)"),
        CLI_OPT_S("out", "FILE", &out,
                  "write the plan as an ergon JSON plan (a .py plan if FILE\n"
                  "ends in .py)"),
        CLI_OPT_B("json", &json, "print the same as one JSON object"),
        CLI_OPT_D("max-swing", "W", &max_swing, 0, 1e9,
                  "only plans whose power swing over --power-window S\n"
                  "(default 1 s) is at most W watts (docs/fleet.md)"),
        CLI_OPT_D("power-window", "S", &window, 1e-9, 1e9, "the window of --max-swing"),
        CLI_OPT_B("power-floor", &floor_ok,
                  "a plan may also take the least per-GPU power floor\n"
                  "that brings its swing within W (the energy it burns\n"
                  "counts)"),
        CLI_OPTS_END,
    };
    int rc0 = cli_opts_parse_all(cmd, argc, argv, opts, &choose_help);
    if (rc0)
        return rc0 == CLI_HELP ? CLI_OK : rc0;
    if (floor_ok && max_swing < 0)
        return cli_usage_error(cmd, "--power-floor goes with --max-swing");
    if (!dir)
        return cli_usage_error(cmd, "--frontier DIR is required");
    if (deadline > 0 && slowdown > 0)
        return cli_usage_error(cmd, "--deadline and --slowdown exclude each other: give one");
    if (!(deadline > 0) && !(slowdown > 0))
        return cli_usage_error(cmd, "one of --deadline S or --slowdown X is required");
    /* a factor, not a percentage: 101 is most likely "1 %" */
    if (slowdown >= 2)
        fprintf(stderr,
                "ergon %s: warning: --slowdown %g allows %gx the all-max time (+%g %%): it is "
                "a factor (for a 1 %% slowdown write 1.01)\n",
                cmd, slowdown, slowdown, 100 * (slowdown - 1));
    char dirbuf[4096];
    dir = choose_dir(dir, dirbuf, sizeof dirbuf);
    erg_error err = {0};
    erg_frontier *f;
    if (erg_frontier_read_dir(dir, NULL, &f, &err))
        return cli_report(cmd, &err);
    cli_baseline bl;
    if (cli_baseline_open(dir, f, &bl, &err)) {
        erg_frontier_free(f);
        return cli_report(cmd, &err);
    }
    choose_result r = {.dir = dir, .window = window, .max_swing = max_swing};
    erg_frontier_get(f, erg_frontier_size(f) - 1, &r.fast, &err);
    /* The baseline of --slowdown: all-max clocks evaluated with the profile;
     * without one (a directory from elsewhere), the fastest plan's estimate. */
    double base_s = bl.have ? bl.all_max.time_s : r.fast.time_s;
    double limit_s = deadline > 0 ? deadline : slowdown * base_s;
    erg_status st;
    if (max_swing >= 0 && !bl.have)
        st = erg_error_set(&err, ERG_EINVAL,
                           "%s has no profile.csv and frontier-info.csv: --max-swing needs the "
                           "profile to emulate the plans' power",
                           dir);
    else if (max_swing >= 0)
        st = pick_swing(&bl, f, limit_s, window, max_swing, floor_ok, &r.sp, &err);
    else
        st = cli_baseline_pick(&bl, f, limit_s, &r.k, &r.em, &err);
    if (!st && max_swing >= 0) {
        r.k = r.sp.index;
        r.em = r.sp.em;
    }
    int rc = CLI_OK;
    if (st) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    erg_frontier_get(f, r.k, &r.pt, &err);
    if (out && (rc = choose_write(cmd, &bl, f, r.k, out)))
        goto done;
    const char *file = erg_frontier_plan_path(f, r.k);
    char packed[4200];
    if (!file) { /* every plan in DIR/plans.ergon */
        snprintf(packed, sizeof packed, "%s/plans.ergon (plan %zu)", dir, r.k);
        file = packed;
    }
    r.file = file;
    if (json)
        choose_print_json(&bl, &r);
    else
        choose_print(&bl, &r);
done:
    cli_baseline_free(&bl);
    erg_frontier_free(f);
    return rc;
}
