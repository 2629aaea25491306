/* cmd_emulate.c: `ergon emulate`: a plan's iteration time and energy from a profile. */
#include "cli.h"

#include "ergon/emulate.h"

#include <stdio.h>

static const cli_help emulate_help = {
    "usage: ergon emulate --profile P --plan FILE (--gpu A40|A100 | --blocking-power W)\n"
    "                     [--schedule NAME | --schedule-file F.csv] [--chunks V]\n"
    "                     [--backward-split X] [--p2p-time S] [--json]\n"
    "                     [--switch-latency S|default] [--transfer-time S |\n"
    "                      --transfer-bytes B --link-bandwidth B_PER_S [--link-latency S]]\n"
    "                     [--power] [--power-window S] [--power-trace FILE.csv]\n",
    "Evaluate a plan with the profiled time and energy of every instruction at its\n"
    "clock (docs/envpipe.md; installed in /usr/share/doc/ergon):\n"
    "iteration time = longest path of the instruction DAG; energy = sum of\n"
    "instruction energies + blocking power x idle time of every stage.\n"
    "FILE is a freqs_pipeline_%05d.py plan or an ergon JSON plan; the schedule of a .py\n"
    "plan is --schedule (default 1f1b), a JSON plan names its own (and its split;\n"
    "--backward-split overrides it). The plan must have as many ranks as the profile\n"
    "has stages, or ranks x chunks of them (exit status 1 otherwise). A plan that\n"
    "records where it came from (choose --out, plan envpipe --out) is refused with a\n"
    "profile, blocking power or --schedule other than its own, naming both\n"
    "(--force: emulate anyway, with a warning).\n",
    NULL};

/* One `ergon emulate`: its options. */
typedef struct emulate_args {
    const char *profile, *planf, *gpu;
    double power, p2p;
    bool json, force, power_on;
    double power_window_s; /* 0: not given (1 s) */
    const char *trace_path;
    cli_sched cs;
    erg_emulate_opts eo;
} emulate_args;

static int latency_opt(const char *cmd, const char *value, void *dest)
{
    return cli_parse_latency(cmd, value, dest) ? CLI_OK : CLI_USAGE;
}

static int emulate_parse(const char *cmd, emulate_args *a, int argc, char **argv)
{
    erg_emulate_opts *eo = &a->eo;
    const cli_opt opts[] = {
        CLI_OPT_S("profile", "P", &a->profile, "stage profile CSV"),
        CLI_OPT_S("plan", "FILE", &a->planf, "the plan (.py or ergon JSON)"),
        CLI_OPT_S("gpu", "NAME", &a->gpu, "A40 (70.38 W) or A100 (83.64 W) blocking power"),
        CLI_OPT_D("blocking-power", "W", &a->power, 0, 1e5,
                  "power drawn while blocked on communication, for other GPUs"),
        CLI_SCHED_OPTS(&a->cs),
        CLI_OPT_D("p2p-time", "S", &a->p2p, 0, 1e3,
                  "time every cross-rank dependency adds (P2P transfer,\n"
                  "seconds; default 0: communication is free, as in the\n"
                  "planner; docs/schedules.md)"),
        CLI_OPT_B("json", &a->json, "print one JSON object"),
        CLI_OPT_B("force", &a->force, "emulate a plan made for another profile, power or schedule"),
        CLI_OPT_T("\nFidelity options (docs/emulate.md; all 0 by default, which is the published\n"
                  "evaluation of Perseus's lowtime):\n"),
        CLI_OPT_CALL("switch-latency", "S", latency_opt, &eo->switch_latency_s,
                     "a clock request takes effect S seconds after the\n"
                     "instruction that needs it starts; until then the GPU\n"
                     "runs at its previous clock (the first instruction's\n"
                     "previous one is the last: iterations repeat);\n"
                     "'default' = 10 ms (docs/emulate.md)"),
        CLI_OPT_D("transfer-time", "S", &eo->transfer_time_s, 0, 1e6, "the same as --p2p-time S"),
        CLI_OPT_D("transfer-bytes", "B", &eo->transfer_bytes, 0, 1e18,
                  "or: transfer time = B / bandwidth + latency"),
        CLI_OPT_D("link-bandwidth", "B_PER_S", &eo->link_bandwidth_bps, 1, 1e18,
                  "the link's bandwidth (with --transfer-bytes)"),
        CLI_OPT_D("link-latency", "S", &eo->link_latency_s, 0, 1e6,
                  "the link's latency (with --transfer-bytes)"),
        CLI_OPT_T("\nPower (docs/fleet.md):\n"),
        CLI_OPT_B("power", &a->power_on,
                  "also the plan's power over an iteration: average, peak,\n"
                  "trough, swing and fastest ramp over --power-window"),
        CLI_OPT_D("power-window", "S", &a->power_window_s, 1e-9, 1e9,
                  "the window of the swing and the ramp (default 1 s);\n"
                  "implies --power"),
        CLI_OPT_S("power-trace", "FILE", &a->trace_path,
                  "write the power trace (a row per step: the job, compute,\n"
                  "blocking, each GPU) as CSV; implies --power"),
        CLI_OPTS_END,
    };
    int rc = cli_opts_parse_all(cmd, argc, argv, opts, &emulate_help);
    if (rc)
        return rc;
    if (!a->profile || !a->planf)
        return cli_usage_error(cmd, "--profile and --plan are required");
    if (!cli_blocking_power(cmd, a->gpu, &a->power))
        return CLI_USAGE;
    if ((eo->transfer_time_s > 0) + (eo->transfer_bytes > 0) + (a->p2p > 0) > 1)
        return cli_usage_error(cmd, "give one of --p2p-time, --transfer-time, --transfer-bytes");
    if (eo->transfer_bytes > 0 && !(eo->link_bandwidth_bps > 0))
        return cli_usage_error(cmd, "--transfer-bytes needs --link-bandwidth");
    if ((eo->link_bandwidth_bps > 0 || eo->link_latency_s > 0) && !(eo->transfer_bytes > 0))
        return cli_usage_error(cmd, "--link-bandwidth/--link-latency need --transfer-bytes");
    eo->blocking_power_w = a->power;
    if (a->power_window_s > 0 || a->trace_path)
        a->power_on = true;
    if (!(a->power_window_s > 0))
        a->power_window_s = 1.0;
    return cli_sched_finish(cmd, &a->cs, NULL, NULL);
}

/* A plan for fewer stages would be emulated on the profile's first stages only, and one for
 * more cannot be. A chunked schedule takes a profile of its ranks (split over the chunks) or of
 * every stage. */
static int check_stages(const char *cmd, const emulate_args *a, const erg_plan *plan,
                        const erg_profile *prof, const erg_schedule *ps)
{
    int pr = erg_plan_num_stages(plan), ns = erg_profile_num_stages(prof);
    int v = erg_schedule_chunks(ps);
    if (ns == pr || ns == pr * v)
        return CLI_OK;
    if (v > 1)
        fprintf(stderr,
                "ergon %s: %s: the plan has %d ranks x %d chunks but the profile %s has "
                "%d stages (expected %d or %d)\n",
                cmd, a->planf, pr, v, a->profile, ns, pr, pr * v);
    else
        fprintf(stderr, "ergon %s: %s: the plan has %d stages but the profile %s has %d\n", cmd,
                a->planf, pr, a->profile, ns);
    return CLI_USER_ERROR;
}

/* The plan's power statistics, and its trace written to trace_path when given. */
static erg_status emulate_power(const erg_profile *prof, const erg_dag *dag, const erg_plan *plan,
                                const erg_emulate_opts *eo, double window_s, const char *trace_path,
                                erg_power_stats *pw, erg_error *err)
{
    erg_power_trace *tr = NULL;
    erg_status st = erg_power_trace_new(prof, dag, plan, eo, &tr, err);
    if (!st)
        st = erg_power_trace_stats(tr, window_s, pw, err);
    if (!st && trace_path)
        st = erg_power_trace_write_csv(tr, trace_path, err);
    erg_power_trace_free(tr);
    return st;
}

int cmd_emulate(int argc, char **argv)
{
    const char *cmd = "emulate";
    emulate_args a = {.power = -1};
    erg_emulate_opts_init(&a.eo);
    cli_sched_init(&a.cs);
    erg_error err = {0};
    int prc = emulate_parse(cmd, &a, argc, argv);
    if (prc) {
        cli_sched_free(&a.cs);
        return prc == CLI_HELP ? CLI_OK : prc;
    }
    erg_emulate_opts eo = a.eo;
    cli_sched cs = a.cs;
    const char *profile = a.profile, *planf = a.planf;
    double power = a.power, p2p = a.p2p;
    bool json = a.json;
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
        rc = cli_plan_check(cmd, planf, plan, prof, profile, power, cs.name_set ? &asked : NULL,
                            a.force);
        if (rc)
            goto done;
    }
    erg_schedule ps = erg_plan_schedule(plan);
    if ((rc = check_stages(cmd, &a, plan, prof, &ps)))
        goto done;
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
    if (a.power_on &&
        emulate_power(prof, dag, plan, &eo, a.power_window_s, a.trace_path, &pw, &err)) {
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
        if (a.power_on)
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
        if (a.power_on)
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
