/* cmd_emulate.c: `ergon emulate`: a plan's iteration time and energy from a profile. */
#include "cli.h"

#include "ergon/emulate.h"

#include <getopt.h>
#include <stdio.h>

static void help(FILE *f)
{
    fprintf(
        f,
        "usage: ergon emulate --profile P --plan FILE (--gpu A40|A100 | --blocking-power W)\n"
        "                     [--schedule NAME | --schedule-file F.csv] [--chunks V]\n"
        "                     [--backward-split X] [--p2p-time S] [--json]\n"
        "                     [--switch-latency S|default] [--transfer-time S |\n"
        "                      --transfer-bytes B --link-bandwidth B_PER_S [--link-latency S]]\n"
        "                     [--power] [--power-window S] [--power-trace FILE.csv]\n\n"
        "Evaluate a plan with the profiled time and energy of every instruction at its\n"
        "clock (docs/envpipe.md; installed in /usr/share/doc/ergon):\n"
        "iteration time = longest path of the instruction DAG; energy = sum of\n"
        "instruction energies + blocking power x idle time of every stage.\n"
        "FILE is a freqs_pipeline_%%05d.py plan or an ergon JSON plan; the schedule of a .py\n"
        "plan is --schedule (default 1f1b), a JSON plan names its own (and its split;\n"
        "--backward-split overrides it). The plan must have as many ranks as the profile\n"
        "has stages, or ranks x chunks of them (exit status 1 otherwise). A plan that\n"
        "records where it came from (choose --out, plan envpipe --out) is refused with a\n"
        "profile, blocking power or --schedule other than its own, naming both\n"
        "(--force: emulate anyway, with a warning).\n\n" CLI_SCHED_HELP
        "  --p2p-time S         time every cross-rank dependency adds (P2P transfer,\n"
        "                       seconds; default 0: communication is free, as in the\n"
        "                       planner; docs/schedules.md)\n\n"
        "Fidelity options (docs/emulate.md; all 0 by default, which is the published\n"
        "evaluation of Perseus's lowtime):\n"
        "  --switch-latency S   a clock request takes effect S seconds after the\n"
        "                       instruction that needs it starts; until then the GPU\n"
        "                       runs at its previous clock (the first instruction's\n"
        "                       previous one is the last: iterations repeat);\n"
        "                       'default' = %.0f ms (docs/emulate.md)\n"
        "  --transfer-time S    the same as --p2p-time S\n"
        "  --transfer-bytes B, --link-bandwidth B_PER_S, --link-latency S\n"
        "                       or: transfer time = B / bandwidth + latency\n\n"
        "Power (docs/fleet.md):\n"
        "  --power              also the plan's power over an iteration: average, peak,\n"
        "                       trough, swing and fastest ramp over --power-window\n"
        "  --power-window S     the window of the swing and the ramp (default 1 s)\n"
        "  --power-trace FILE   write the power trace (a row per step: the job, compute,\n"
        "                       blocking, each GPU) as CSV; implies --power\n",
        ERG_SWITCH_LATENCY_DEFAULT_S * 1e3);
}

/* The plan's power statistics, and its trace written to trace_path when given. */
static erg_status emulate_power(const erg_profile *prof, const erg_dag *dag, const erg_plan *plan,
                                const erg_emulate_opts *eo, double window_s, const char *trace_path,
                                erg_power_stats *pw, erg_error *err)
{
    erg_power_trace *tr = NULL;
    char *csv = NULL;
    erg_status st = erg_power_trace_new(prof, dag, plan, eo, &tr, err);
    if (!st)
        st = erg_power_trace_stats(tr, window_s, pw, err);
    if (!st && trace_path) {
        st = erg_power_trace_format_csv(tr, &csv, err);
        FILE *f = st ? NULL : fopen(trace_path, "w");
        bool ok = f && fputs(csv, f) >= 0;
        if (f && fclose(f))
            ok = false;
        if (!st && !ok)
            st = erg_error_set(err, ERG_EIO, "cannot write the power trace to %s", trace_path);
    }
    erg_free(csv);
    erg_power_trace_free(tr);
    return st;
}

int cmd_emulate(int argc, char **argv)
{
    const char *cmd = "emulate";
    static const struct option opts[] = {
        {"profile", required_argument, 0, 'p'},
        {"plan", required_argument, 0, 'P'},
        {"gpu", required_argument, 0, 'g'},
        {"blocking-power", required_argument, 0, 'w'},
        {"schedule", required_argument, 0, 'S'},
        {"json", no_argument, 0, 'j'},
        CLI_SCHED_LONGOPTS,
        {"p2p-time", required_argument, 0, 'T'},
        {"help", no_argument, 0, 'h'},
        {"switch-latency", required_argument, 0, 'L'},
        {"transfer-time", required_argument, 0, 'x'},
        {"transfer-bytes", required_argument, 0, 'B'},
        {"link-bandwidth", required_argument, 0, 'W'},
        {"link-latency", required_argument, 0, 'l'},
        {"force", no_argument, 0, 'F'},
        {"power", no_argument, 0, 'o'},
        {"power-window", required_argument, 0, 'O'},
        {"power-trace", required_argument, 0, 'R'},
        {0, 0, 0, 0},
    };
    erg_emulate_opts eo;
    erg_emulate_opts_init(&eo);
    const char *profile = NULL, *planf = NULL, *gpu = NULL;
    double power = -1;
    bool json = false, force = false, sched_given = false, power_on = false;
    double power_window_s = 1.0;
    const char *trace_path = NULL;
    cli_sched cs;
    cli_sched_init(&cs);
    double p2p = 0;
    erg_error err = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            profile = optarg;
            break;
        case 'P':
            planf = optarg;
            break;
        case 'g':
            gpu = optarg;
            break;
        case 'w':
            if (!cli_parse_double(cmd, "--blocking-power", optarg, 0, 1e5, &power))
                return CLI_USAGE;
            break;
        case 'F':
            force = true;
            break;
        case 'o':
            power_on = true;
            break;
        case 'O':
            if (!cli_parse_double(cmd, "--power-window", optarg, 1e-9, 1e9, &power_window_s))
                return CLI_USAGE;
            power_on = true;
            break;
        case 'R':
            trace_path = optarg;
            power_on = true;
            break;
        case 'S':
        case CLI_OPT_SCHED_FILE:
        case CLI_OPT_CHUNKS:
        case CLI_OPT_BACKWARD_SPLIT: {
            sched_given = sched_given || c == 'S';
            int r = cli_sched_option(cmd, c == 'S', c, optarg, &cs);
            if (r)
                return r;
            break;
        }
        case 'T':
            if (!cli_parse_double(cmd, "--p2p-time", optarg, 0, 1e3, &p2p))
                return CLI_USAGE;
            break;
        case 'j':
            json = true;
            break;
        case 'L':
            if (!cli_parse_latency(cmd, optarg, &eo.switch_latency_s))
                return CLI_USAGE;
            break;
        case 'x':
            if (!cli_parse_double(cmd, "--transfer-time", optarg, 0, 1e6, &eo.transfer_time_s))
                return CLI_USAGE;
            break;
        case 'B':
            if (!cli_parse_double(cmd, "--transfer-bytes", optarg, 0, 1e18, &eo.transfer_bytes))
                return CLI_USAGE;
            break;
        case 'W':
            if (!cli_parse_double(cmd, "--link-bandwidth", optarg, 1, 1e18, &eo.link_bandwidth_bps))
                return CLI_USAGE;
            break;
        case 'l':
            if (!cli_parse_double(cmd, "--link-latency", optarg, 0, 1e6, &eo.link_latency_s))
                return CLI_USAGE;
            break;
        case 'h':
            help(stdout);
            return CLI_OK;
        default:
            return cli_bad_option(cmd, argv, opts);
        }
    }
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!profile || !planf)
        return cli_usage_error(cmd, "--profile and --plan are required");
    if (!cli_blocking_power(cmd, gpu, &power))
        return CLI_USAGE;
    if ((eo.transfer_time_s > 0) + (eo.transfer_bytes > 0) + (p2p > 0) > 1)
        return cli_usage_error(cmd, "give one of --p2p-time, --transfer-time, --transfer-bytes");
    if (eo.transfer_bytes > 0 && !(eo.link_bandwidth_bps > 0))
        return cli_usage_error(cmd, "--transfer-bytes needs --link-bandwidth");
    if ((eo.link_bandwidth_bps > 0 || eo.link_latency_s > 0) && !(eo.transfer_bytes > 0))
        return cli_usage_error(cmd, "--link-bandwidth/--link-latency need --transfer-bytes");
    eo.blocking_power_w = power;
    {
        int r = cli_sched_finish(cmd, &cs, NULL, NULL);
        if (r) {
            cli_sched_free(&cs);
            return r;
        }
    }
    erg_profile *prof = NULL;
    erg_plan *plan = NULL;
    erg_dag *dag = NULL;
    int rc = CLI_OK;
    if (erg_profile_read_csv(profile, &prof, &err) ||
        erg_plan_read(planf, &cs.sched, &plan, &err)) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    {
        erg_schedule_kind asked = cs.sched.kind;
        rc = cli_plan_check(cmd, planf, plan, prof, profile, power, sched_given ? &asked : NULL,
                            force);
        if (rc)
            goto done;
    }
    erg_schedule ps = erg_plan_schedule(plan);
    {
        /* A plan for fewer stages would be emulated on the profile's first
         * stages only, and one for more cannot be. A chunked schedule takes a
         * profile of its ranks (split over the chunks) or of every stage. */
        int pr = erg_plan_num_stages(plan), ns = erg_profile_num_stages(prof);
        int v = erg_schedule_chunks(&ps);
        if (ns != pr && ns != pr * v) {
            if (v > 1)
                fprintf(stderr,
                        "ergon %s: %s: the plan has %d ranks x %d chunks but the profile %s has "
                        "%d stages (expected %d or %d)\n",
                        cmd, planf, pr, v, profile, ns, pr, pr * v);
            else
                fprintf(stderr, "ergon %s: %s: the plan has %d stages but the profile %s has %d\n",
                        cmd, planf, pr, profile, ns);
            rc = CLI_USER_ERROR;
            goto done;
        }
    }
    if (cs.split_set)
        ps.backward_split = cs.sched.backward_split;
    ps.p2p_time_s = p2p;
    if (erg_dag_new(&ps, erg_plan_num_stages(plan), erg_plan_num_microbatches(plan), &dag, &err)) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    erg_emulation em;
    if (erg_emulate_ex(prof, dag, plan, &eo, &em, NULL, NULL, &err)) {
        char where[600];
        snprintf(where, sizeof where, "%s", err.msg);
        erg_error_set(&err, err.status, "%s: %s", planf, where);
        rc = cli_report(cmd, &err);
        goto done;
    }
    erg_power_stats pw;
    if (power_on && emulate_power(prof, dag, plan, &eo, power_window_s, trace_path, &pw, &err)) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    if (json) {
        cli_sched local = cs;
        local.sched = ps;
        char extra[96] = "";
        if (cli_sched_split_used(&local, prof, erg_plan_num_stages(plan),
                                 erg_plan_num_microbatches(plan)))
            snprintf(extra, sizeof extra, ", \"backward_split\": %.17g",
                     erg_schedule_backward_split(&ps));
        printf("{\"time_s\": %.17g, \"energy_j\": %.17g, \"compute_energy_j\": %.17g, "
               "\"blocking_energy_j\": %.17g, \"num_stages\": %d, \"num_microbatches\": %d, "
               "\"schedule\": \"%s\"%s, \"switch_latency_s\": %.17g, \"num_switches\": %d, "
               "\"transfer_time_s\": %.17g",
               em.time_s, em.energy_j, em.compute_energy_j, em.blocking_energy_j,
               erg_plan_num_stages(plan), erg_plan_num_microbatches(plan),
               erg_schedule_name(ps.kind), extra, eo.switch_latency_s, em.num_switches,
               em.transfer_time_s);
        if (power_on)
            printf(", \"power\": {\"avg_w\": %.17g, \"peak_w\": %.17g, \"trough_w\": %.17g, "
                   "\"window_s\": %.17g, \"swing_w\": %.17g, \"ramp_w_per_s\": %.17g}",
                   pw.avg_w, pw.peak_w, pw.trough_w, pw.window_s, pw.swing_w, pw.ramp_w_per_s);
        printf("}\n");
    } else {
        printf("iteration time %.6f s, energy %.3f J (compute %.3f J, blocking %.3f J); "
               "S=%d, M=%d, %s\n",
               em.time_s, em.energy_j, em.compute_energy_j, em.blocking_energy_j,
               erg_plan_num_stages(plan), erg_plan_num_microbatches(plan),
               erg_schedule_name(ps.kind));
        cli_sched local = cs;
        local.sched = ps;
        cli_sched_split_note(stdout, &local, prof, erg_plan_num_stages(plan),
                             erg_plan_num_microbatches(plan));
        if (eo.switch_latency_s > 0 || em.transfer_time_s > 0)
            printf("%d clock switches taking effect %.4f s after their request: iteration "
                   "%+.4f s against no latency; transfer %.6f s per cross-rank edge\n",
                   em.num_switches, eo.switch_latency_s, em.switch_time_s, em.transfer_time_s);
        if (power_on)
            printf("power: average %.1f W, peak %.1f W, trough %.1f W; over %g s: swing %.1f W, "
                   "fastest ramp %.1f W/s\n",
                   pw.avg_w, pw.peak_w, pw.trough_w, pw.window_s, pw.swing_w, pw.ramp_w_per_s);
    }
done:
    erg_dag_free(dag);
    erg_plan_free(plan);
    erg_profile_free(prof);
    cli_sched_free(&cs);
    return rc;
}
