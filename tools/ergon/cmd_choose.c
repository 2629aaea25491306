/* cmd_choose.c: `ergon choose`: the minimum-energy plan that meets a deadline. */
#include "cli.h"

#include "ergon/planner.h"

#include <getopt.h>
#include <stdio.h>

int cmd_choose(int argc, char **argv)
{
    const char *cmd = "choose";
    static const struct option opts[] = {
        {"frontier", required_argument, 0, 'f'}, {"deadline", required_argument, 0, 'd'},
        {"slowdown", required_argument, 0, 's'}, {"out", required_argument, 0, 'o'},
        {"json", no_argument, 0, 'j'},          {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *dir = NULL, *out = NULL;
    double deadline = 0, slowdown = 0;
    bool json = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            dir = optarg;
            break;
        case 'd':
            if (!cli_parse_double(cmd, "--deadline", optarg, 1e-9, 1e12, &deadline))
                return CLI_USAGE;
            break;
        case 's':
            if (!cli_parse_double(cmd, "--slowdown", optarg, 1, 1e6, &slowdown))
                return CLI_USAGE;
            break;
        case 'o':
            out = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            printf("usage: ergon choose --frontier DIR (--deadline S | --slowdown X) [--out FILE]"
                   " [--json]\n\n"
                   "Choose the minimum-energy plan of a frontier directory whose iteration time\n"
                   "fits: at most S seconds, or at most X times the fastest plan's time (a\n"
                   "straggler pipeline X times slower sets the pace; 1.01 = 1%% slowdown).\n"
                   "Prints the plan's index, time, energy and file; --out writes it as an ergon\n"
                   "JSON plan (or a .py plan if FILE ends in .py).\n");
            return CLI_OK;
        default:
            return cli_usage_error(cmd, "unknown option");
        }
    }
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!dir || (deadline > 0) == (slowdown > 0))
        return cli_usage_error(cmd, "--frontier and one of --deadline or --slowdown are required");
    erg_error err = {0};
    erg_frontier *f;
    if (erg_frontier_read_dir(dir, NULL, &f, &err))
        return cli_report(cmd, &err);
    size_t k;
    erg_status st = deadline > 0 ? erg_frontier_choose_deadline(f, deadline, &k, &err)
                                 : erg_frontier_choose_slowdown(f, slowdown, &k, &err);
    int rc = CLI_OK;
    erg_frontier_point pt, fast, slow;
    if (st) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    erg_frontier_get(f, k, &pt, &err);
    erg_frontier_get(f, erg_frontier_size(f) - 1, &fast, &err);
    erg_frontier_get(f, 0, &slow, &err);
    if (out) {
        erg_plan *p;
        size_t ol = 0;
        while (out[ol])
            ol++;
        bool py = ol > 3 && out[ol - 3] == '.' && out[ol - 2] == 'p' && out[ol - 1] == 'y';
        if (erg_frontier_plan(f, k, &p, &err) ||
            (py ? erg_plan_write_py(p, NULL, out, &err) : erg_plan_write_json(p, out, &err))) {
            rc = cli_report(cmd, &err);
            goto done;
        }
        erg_plan_free(p);
    }
    if (json)
        printf("{\"index\": %zu, \"time_s\": %.17g, \"energy_j\": %.17g, \"file\": \"%s\", "
               "\"fastest_time_s\": %.17g, \"fastest_energy_j\": %.17g}\n",
               k, pt.time_s, pt.energy_j, erg_frontier_plan_path(f, k), fast.time_s,
               fast.energy_j);
    else
        printf("plan %zu: %.6g s, %.6g J (%+.2f%% time, %+.2f%% energy vs the fastest plan)\n"
               "file: %s\n",
               k, pt.time_s, pt.energy_j, 100 * (pt.time_s / fast.time_s - 1),
               100 * (pt.energy_j / fast.energy_j - 1), erg_frontier_plan_path(f, k));
done:
    erg_frontier_free(f);
    return rc;
}
