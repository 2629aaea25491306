/* cmd_emulate.c: `ergon emulate`: a plan's iteration time and energy from a profile. */
#include "cli.h"

#include "ergon/emulate.h"

#include <getopt.h>
#include <stdio.h>

static void help(FILE *f)
{
    fprintf(f, "usage: ergon emulate --profile P --plan FILE (--gpu A40|A100 | --blocking-power W)\n"
               "                     [--schedule 1f1b|gpipe|ours] [--json]\n\n"
               "Evaluate a plan with the profiled time and energy of every instruction at its\n"
               "clock (docs/envpipe.md; installed in /usr/share/doc/ergon):\n"
               "iteration time = longest path of the instruction DAG; energy = sum of\n"
               "instruction energies + blocking power x idle time of every stage.\n"
               "FILE is a freqs_pipeline_%%05d.py plan or an ergon JSON plan; the schedule of a .py\n"
               "plan is --schedule (default 1f1b), a JSON plan names its own. The plan must have\n"
               "as many stages as the profile (exit status 1 otherwise).\n");
}

int cmd_emulate(int argc, char **argv)
{
    const char *cmd = "emulate";
    static const struct option opts[] = {
        {"profile", required_argument, 0, 'p'}, {"plan", required_argument, 0, 'P'},
        {"gpu", required_argument, 0, 'g'},     {"blocking-power", required_argument, 0, 'w'},
        {"schedule", required_argument, 0, 'S'}, {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0},
    };
    const char *profile = NULL, *planf = NULL, *gpu = NULL;
    double power = -1;
    bool json = false;
    erg_schedule sched = {.kind = ERG_SCHED_1F1B};
    erg_error err = {0};
    int c;
    optind = 1;
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
        case 'S':
            if (erg_schedule_parse(optarg, &sched.kind, &err))
                return cli_usage_error(cmd, "%s", err.msg);
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            help(stdout);
            return CLI_OK;
        default:
            return cli_usage_error(cmd, "unknown option");
        }
    }
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!profile || !planf)
        return cli_usage_error(cmd, "--profile and --plan are required");
    if (!cli_blocking_power(cmd, gpu, &power))
        return CLI_USAGE;
    erg_profile *prof = NULL;
    erg_plan *plan = NULL;
    erg_dag *dag = NULL;
    int rc = CLI_OK;
    if (erg_profile_read_csv(profile, &prof, &err) || erg_plan_read(planf, &sched, &plan, &err)) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    if (erg_plan_num_stages(plan) != erg_profile_num_stages(prof)) {
        /* A plan for fewer stages would be emulated on the profile's first
         * stages only, and one for more cannot be. */
        fprintf(stderr, "ergon %s: %s: the plan has %d stages but the profile %s has %d\n", cmd,
                planf, erg_plan_num_stages(plan), profile, erg_profile_num_stages(prof));
        rc = CLI_USER_ERROR;
        goto done;
    }
    erg_schedule ps = erg_plan_schedule(plan);
    if (erg_dag_new(&ps, erg_plan_num_stages(plan), erg_plan_num_microbatches(plan), &dag, &err)) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    erg_emulation em;
    if (erg_emulate(prof, dag, plan, power, &em, NULL, NULL, &err)) {
        char where[600];
        snprintf(where, sizeof where, "%s", err.msg);
        erg_error_set(&err, err.status, "%s: %s", planf, where);
        rc = cli_report(cmd, &err);
        goto done;
    }
    if (json)
        printf("{\"time_s\": %.17g, \"energy_j\": %.17g, \"compute_energy_j\": %.17g, "
               "\"blocking_energy_j\": %.17g, \"num_stages\": %d, \"num_microbatches\": %d}\n",
               em.time_s, em.energy_j, em.compute_energy_j, em.blocking_energy_j,
               erg_plan_num_stages(plan), erg_plan_num_microbatches(plan));
    else
        printf("iteration time %.6f s, energy %.3f J (compute %.3f J, blocking %.3f J); "
               "S=%d, M=%d, %s\n",
               em.time_s, em.energy_j, em.compute_energy_j, em.blocking_energy_j,
               erg_plan_num_stages(plan), erg_plan_num_microbatches(plan),
               erg_schedule_name(ps.kind));
done:
    erg_dag_free(dag);
    erg_plan_free(plan);
    erg_profile_free(prof);
    return rc;
}
