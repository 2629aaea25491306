/* cmd_choose.c: `ergon choose`: the minimum-energy plan that meets a deadline. */
#include "cli.h"

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

int cmd_choose(int argc, char **argv)
{
    const char *cmd = "choose";
    const char *dir = NULL, *out = NULL;
    double deadline = 0, slowdown = 0;
    bool json = false;
    const cli_opt opts[] = {
        CLI_OPT_S("frontier", "DIR", &dir, "a frontier directory (or its frontier.csv)"),
        CLI_OPT_D("deadline", "S", &deadline, 1e-9, 1e12, "iteration time at most S seconds"),
        CLI_OPT_D("slowdown", "X", &slowdown, 1, 1e6,
                  "at most X times the time at all-max clocks (1.01 = 1%)"),
        CLI_OPT_S("out", "FILE", &out,
                  "write the plan as an ergon JSON plan (a .py plan if FILE\n"
                  "ends in .py)"),
        CLI_OPT_B("json", &json, "print the same as one JSON object"),
        CLI_OPTS_END,
    };
    int rc0 = cli_opts_parse_all(cmd, argc, argv, opts, &choose_help);
    if (rc0)
        return rc0 == CLI_HELP ? CLI_OK : rc0;
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
    /* Accept DIR/frontier.csv as `show` does. */
    char dirbuf[4096];
    {
        size_t l = strlen(dir);
        while (l > 1 && dir[l - 1] == '/')
            l--;
        if (l >= 12 && !strncmp(dir + l - 12, "frontier.csv", 12) &&
            (l == 12 || dir[l - 13] == '/')) {
            l = l == 12 ? 0 : l - 13;
            while (l > 1 && dir[l - 1] == '/')
                l--;
        }
        snprintf(dirbuf, sizeof dirbuf, "%.*s", l ? (int)l : 1, l ? dir : ".");
        dir = dirbuf;
    }
    erg_error err = {0};
    erg_frontier *f;
    if (erg_frontier_read_dir(dir, NULL, &f, &err))
        return cli_report(cmd, &err);
    cli_baseline bl;
    if (cli_baseline_open(dir, f, &bl, &err)) {
        erg_frontier_free(f);
        return cli_report(cmd, &err);
    }
    size_t k;
    erg_frontier_point pt, fast;
    erg_frontier_get(f, erg_frontier_size(f) - 1, &fast, &err);
    /* The baseline of --slowdown: all-max clocks evaluated with the profile;
     * without one (a directory from elsewhere), the fastest plan's estimate. */
    double base_s = bl.have ? bl.all_max.time_s : fast.time_s;
    double limit_s = deadline > 0 ? deadline : slowdown * base_s;
    erg_emulation em = {0};
    erg_status st = cli_baseline_pick(&bl, f, limit_s, &k, &em, &err);
    int rc = CLI_OK;
    if (st) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    erg_frontier_get(f, k, &pt, &err);
    if (out) {
        erg_plan *p = NULL;
        size_t ol = strlen(out);
        bool py = ol > 3 && !strcmp(out + ol - 3, ".py");
        if (erg_frontier_plan(f, k, &p, &err)) {
            rc = cli_report(cmd, &err);
            goto done;
        }
        /* the plan records the profile, blocking power and clocks it was planned with */
        if (bl.have && (rc = cli_plan_stamp(cmd, p, bl.prof, bl.power_w, NULL))) {
            erg_plan_free(p);
            goto done;
        }
        if (py ? erg_plan_write_py(p, NULL, out, &err) : erg_plan_write_json(p, out, &err)) {
            erg_plan_free(p);
            rc = cli_report(cmd, &err);
            goto done;
        }
        erg_plan_free(p);
    }
    const char *file = erg_frontier_plan_path(f, k);
    char packed[4200];
    if (!file) { /* every plan in DIR/plans.ergon */
        snprintf(packed, sizeof packed, "%s/plans.ergon (plan %zu)", dir, k);
        file = packed;
    }
    if (json) {
        printf("{\"index\": %zu, \"estimate_time_s\": %.17g, \"estimate_energy_j\": %.17g, "
               "\"file\": \"%s\", \"fastest_estimate_time_s\": %.17g, "
               "\"fastest_estimate_energy_j\": %.17g",
               k, pt.time_s, pt.energy_j, file ? file : "", fast.time_s, fast.energy_j);
        if (bl.have)
            printf(", \"time_s\": %.17g, \"energy_j\": %.17g, \"all_max_time_s\": %.17g, "
                   "\"all_max_energy_j\": %.17g, \"energy_saving_vs_all_max\": %.17g",
                   em.time_s, em.energy_j, bl.all_max.time_s, bl.all_max.energy_j,
                   1 - em.energy_j / bl.all_max.energy_j);
        printf("}\n");
    } else if (bl.have) {
        char how[96] = "profiled values";
        if (bl.switch_latency_s > 0) /* a switch-aware frontier (docs/emulate.md) */
            snprintf(how, sizeof how, "emulated with a %g s clock-switch latency",
                     bl.switch_latency_s);
        printf("plan %zu: %.6g s, %.6g J (%s; %+.2f%% time, %+.2f%% energy vs "
               "all-max clocks: %.6g s, %.6g J)\n"
               "planner estimate: %.6g s, %.6g J\n",
               k, em.time_s, em.energy_j, how, 100 * (em.time_s / bl.all_max.time_s - 1),
               100 * (em.energy_j / bl.all_max.energy_j - 1), bl.all_max.time_s,
               bl.all_max.energy_j, pt.time_s, pt.energy_j);
        if (file)
            printf("file: %s\n", file);
    } else {
        printf("plan %zu: %.6g s, %.6g J (planner estimates; %+.2f%% time, %+.2f%% energy vs "
               "the fastest plan's estimate: %s has no frontier-info.csv and profile.csv, so "
               "no all-max baseline)\n",
               k, pt.time_s, pt.energy_j, 100 * (pt.time_s / fast.time_s - 1),
               100 * (pt.energy_j / fast.energy_j - 1), dir);
        if (file)
            printf("file: %s\n", file);
    }
done:
    cli_baseline_free(&bl);
    erg_frontier_free(f);
    return rc;
}
