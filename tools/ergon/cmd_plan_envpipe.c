/* cmd_plan_envpipe.c: `ergon plan envpipe|zeus-global|zeus-stage|uniform`: EnvPipe and the
 * baselines. */
#include "cli.h"
#include "envpipe_common.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMMON_HELP                                                                                \
    "  --profile P          stage profile CSV (stage,instruction,frequency,time,energy)\n"         \
    "  --stages S           pipeline stages (default: all of the profile's)\n"                     \
    "  --microbatches M     microbatches per iteration (required)\n"                               \
    "  --gpu NAME           GPU model: sets the blocking power for A40 (70.38 W) and A100\n"       \
    "                       (83.64 W) and selects its row of the clock table (v100, rtx3090,\n"    \
    "                       a100, a6000, a40, h100; other GPUs use the profile's clocks)\n"        \
    "  --blocking-power W   power drawn while idle or blocked on communication\n"                  \
    "  --gpu-table FILE     GPU clock table (default: $ERGON_GPU_TABLE or data/gpus.csv)\n"        \
    "  --out FILE           write the plan: FILE.py = freqs_pipeline literal, else ergon JSON\n"   \
    "  --quiet              no summary on stdout\n"                                                \
    "  -h, --help           this help\n"

static void envpipe_help(FILE *f)
{
    fprintf(
        f, "usage: ergon plan envpipe --profile P --microbatches M (--gpu G | --blocking-power W)\n"
           "                          [--type T] [--schedule S] [--reconfig R] [options]\n\n"
           "Plan per-instruction SM clocks with EnvPipe (USENIX ATC'23) on the emulated pipeline:\n"
           "profile each stage's energy valley, slow the units inside the outer envelope (F0, the\n"
           "last microbatch's B and the whole last stage stay at max), reorder warm-up forwards\n"
           "('ours'), then raise clocks on the critical path until it is the envelope. The plan\n"
           "is evaluated with profiled times and energies (idle time at blocking power).\n\n"
           "  --type T             baseline | uniform | envelope (default envelope)\n"
           "  --schedule S         1f1b | ours (default ours; 1f1b for perseus-emulation)\n"
           "  --reconfig R         default | greedy | balanced (default balanced)\n"
           "  --variant V          envpipe (default) | perseus-emulation: Perseus's emulation of\n"
           "                       EnvPipe (slowest Pareto clocks, +15 MHz steps on one critical\n"
           "                       path, CPM on quantised times; the published comparisons)\n"
           "  --step MHZ           clock step of a raise (default: the GPU's granularity, 30 MHz,\n"
           "                       x3 for greedy; 15 MHz for perseus-emulation)\n"
           "  --max-inflight N     memory cap: at most N forwards in flight per stage (ours)\n"
           "  --unit-time S        perseus-emulation: quantisation unit (default 0.001 s)\n"
           "  --finish-limit N     stop after N+1 iterations without change (default 10)\n"
           "  --max-iterations N   hard cap on reconfiguration iterations (default 10000)\n"
           "  --threshold-scale X  use EnvPipe's measured-wait rule for the critical path\n"
           "                       instead of CPM: a unit whose receive wait is below X times\n"
           "                       the smallest last-stage wait was not held up (EnvPipe: 4)\n"
           "  --transfer-time S    P2P transfer time added to every receive wait (with\n"
           "                       --threshold-scale; default 0)\n"
           "  --from-plan FILE     with --waits: one measured reconfiguration step on this\n"
           "                       plan (JSON; what EnvPipe does after a real iteration)\n"
           "  --waits CSV          measured receive waits: stage,instruction,microbatch,wait_ms\n"
           "                       (one row per instruction); the threshold is\n"
           "                       --threshold-scale (default 4) x the smallest non-zero\n"
           "                       last-stage wait\n"
           "  --print-iterations   print every iteration's plan in EnvPipe's format\n"
           "                       (Stage 0 | [F0 1980 0.0] F1 1260 0.0 ...: clock MHz and wait\n"
           "                       ms; brackets = critical path)\n" COMMON_HELP
           "\nexit status: 0 success, 1 bad input (e.g. a clock missing from the profile,\n"
           "M < S with ours), 2 usage error.\n");
}

static void baseline_help(FILE *f, const char *name)
{
    const char *what =
        !strcmp(name, "zeus-global")
            ? "Zeus's global baseline: one SM clock for every GPU, the one with the lowest\n"
              "Zeus cost eta*E + (1-eta)*S*P_max*T over the clocks every stage has.\n"
        : !strcmp(name, "zeus-stage")
            ? "Zeus per stage: one SM clock per stage. The heaviest stage sets the pace; for\n"
              "each of its clocks, every other stage takes its lowest clock that keeps pace\n"
              "(forward + backward no slower); the lowest Zeus cost wins.\n"
            : "Uniform: every stage at the bottom of its energy valley (its iteration energy,\n"
              "idle time included, with the whole pipeline at each clock level).\n";
    fprintf(f,
            "usage: ergon plan %s --profile P --microbatches M (--gpu G | --blocking-power W)\n"
            "                  [options]\n\n%s\n",
            name, what);
    if (strcmp(name, "uniform") != 0)
        fprintf(f, "  --eta X              Zeus's energy/time knob in [0, 1] (default 0.5)\n"
                   "  --max-power W        P_max per GPU (default: the GPU table's power limit,\n"
                   "                       else the highest profiled average power)\n");
    if (!strcmp(name, "zeus-global"))
        fprintf(f, "  --power-limit-step W choose one power limit (multiples of W up to P_max)\n"
                   "                       instead of one clock: under a limit each instruction\n"
                   "                       runs at its highest clock whose average power fits\n");
    fprintf(f,
            CLI_SCHED_HELP COMMON_HELP "\nexit status: 0 success, 1 bad input, 2 usage error.\n");
}

static void print_summary(const erg_plan *plan, const ecli_setup *s)
{
    double t, e;
    erg_plan_estimate(plan, &t, &e);
    printf("method: %s\n", erg_plan_method(plan));
    printf("pipeline: %ld stages, %ld microbatches, schedule %s\n", s->S, s->M,
           erg_schedule_name(erg_plan_schedule(plan).kind));
    printf("iteration time: %.6f s\nenergy: %.3f J\n", t, e);
    printf("clock range per stage (MHz):");
    for (int st = 0; st < (int)s->S; st++) {
        const int *f = erg_plan_stage_freqs_const(plan, st);
        int lo = f[0], hi = f[0];
        for (long k = 1; k < erg_plan_stage_len(plan, st); k++) {
            lo = f[k] < lo ? f[k] : lo;
            hi = f[k] > hi ? f[k] : hi;
        }
        if (lo == hi)
            printf(" %d", lo);
        else
            printf(" %d-%d", lo, hi);
    }
    printf("\n");
}

typedef struct iter_print {
    bool on;
} iter_print;

static int print_iteration(void *user, int it, const erg_plan *plan, const char *grid)
{
    (void)plan;
    iter_print *p = user;
    if (p->on)
        printf("%d\n%s", it, grid);
    return 0;
}

enum {
    OPT_PROFILE = 256,
    OPT_STAGES,
    OPT_MB,
    OPT_GPU,
    OPT_POWER,
    OPT_TABLE,
    OPT_OUT,
    OPT_QUIET,
    OPT_TYPE,
    OPT_SCHED,
    OPT_RECONFIG,
    OPT_VARIANT,
    OPT_STEP,
    OPT_INFLIGHT,
    OPT_UNIT,
    OPT_FINISH,
    OPT_MAXIT,
    OPT_PRINT,
    OPT_ETA,
    OPT_MAXPOWER,
    OPT_THR,
    OPT_XFER,
    OPT_PLSTEP,
    OPT_FROM,
    OPT_WAITS,
};

static const struct option common_opts[] = {
    {"profile", required_argument, 0, OPT_PROFILE},
    {"stages", required_argument, 0, OPT_STAGES},
    {"microbatches", required_argument, 0, OPT_MB},
    {"gpu", required_argument, 0, OPT_GPU},
    {"blocking-power", required_argument, 0, OPT_POWER},
    {"gpu-table", required_argument, 0, OPT_TABLE},
    {"out", required_argument, 0, OPT_OUT},
    {"quiet", no_argument, 0, OPT_QUIET},
    {"type", required_argument, 0, OPT_TYPE},
    {"schedule", required_argument, 0, OPT_SCHED},
    {"reconfig", required_argument, 0, OPT_RECONFIG},
    {"variant", required_argument, 0, OPT_VARIANT},
    {"step", required_argument, 0, OPT_STEP},
    {"max-inflight", required_argument, 0, OPT_INFLIGHT},
    {"unit-time", required_argument, 0, OPT_UNIT},
    {"finish-limit", required_argument, 0, OPT_FINISH},
    {"max-iterations", required_argument, 0, OPT_MAXIT},
    {"print-iterations", no_argument, 0, OPT_PRINT},
    {"threshold-scale", required_argument, 0, OPT_THR},
    {"transfer-time", required_argument, 0, OPT_XFER},
    {"eta", required_argument, 0, OPT_ETA},
    {"max-power", required_argument, 0, OPT_MAXPOWER},
    {"power-limit-step", required_argument, 0, OPT_PLSTEP},
    {"from-plan", required_argument, 0, OPT_FROM},
    {"waits", required_argument, 0, OPT_WAITS},
    CLI_SCHED_LONGOPTS,
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* Options of one planning command; which ones a method accepts is checked
 * after parsing. */
typedef struct popts {
    ecli_setup s;
    const char *out;
    bool quiet, print, schedule_set;
    const char *from_plan, *waits;
    erg_envpipe_opts eo;
    erg_baseline_opts bo;
    cli_sched cs; /* baselines: --schedule-file, --chunks, --backward-split */
} popts;

/* The options of `plan envpipe` alone (opt: the option as given, for messages). */
static int envpipe_option(const char *cmd, int c, const char *opt, const char *arg, popts *p,
                          bool envpipe)
{
    erg_error err = {0};
    long v;
    if (!envpipe)
        return cli_usage_error(cmd, "%s is an option of 'ergon plan envpipe'", opt);
    if (c == OPT_TYPE && erg_envpipe_type_parse(arg, &p->eo.type, &err))
        return cli_usage_error(cmd, "%s", err.msg);
    if (c == OPT_RECONFIG && erg_envpipe_reconfig_parse(arg, &p->eo.reconfig, &err))
        return cli_usage_error(cmd, "%s", err.msg);
    if (c == OPT_VARIANT && erg_envpipe_variant_parse(arg, &p->eo.variant, &err))
        return cli_usage_error(cmd, "%s", err.msg);
    if (c == OPT_STEP) {
        if (!cli_parse_int(cmd, "--step", arg, 1, 10000, &v))
            return CLI_USAGE;
        p->eo.reconfig_step_mhz = (int)v;
    }
    if (c == OPT_INFLIGHT) {
        if (!cli_parse_int(cmd, "--max-inflight", arg, 1, 100000, &v))
            return CLI_USAGE;
        p->eo.max_inflight = (int)v;
    }
    if (c == OPT_UNIT && !cli_parse_double(cmd, "--unit-time", arg, 1e-9, 1e3, &p->eo.unit_s))
        return CLI_USAGE;
    if (c == OPT_FINISH) {
        if (!cli_parse_int(cmd, "--finish-limit", arg, 0, 1000000, &v))
            return CLI_USAGE;
        p->eo.finish_limit = (int)v;
    }
    if (c == OPT_MAXIT) {
        if (!cli_parse_int(cmd, "--max-iterations", arg, 1, 10000000, &v))
            return CLI_USAGE;
        p->eo.max_iterations = (int)v;
    }
    if (c == OPT_PRINT)
        p->print = true;
    if (c == OPT_FROM)
        p->from_plan = arg;
    if (c == OPT_WAITS)
        p->waits = arg;
    if (c == OPT_THR &&
        !cli_parse_double(cmd, "--threshold-scale", arg, 1e-6, 1e6, &p->eo.threshold_scale))
        return CLI_USAGE;
    if (c == OPT_XFER && !cli_parse_double(cmd, "--transfer-time", arg, 0, 1e3, &p->eo.transfer_s))
        return CLI_USAGE;
    return CLI_OK;
}

static int parse(const char *cmd, int argc, char **argv, popts *p, bool envpipe,
                 void (*help)(FILE *, const char *), const char *name)
{
    erg_error err = {0};
    int c;
    memset(p, 0, sizeof *p);
    erg_envpipe_opts_init(&p->eo);
    erg_baseline_opts_init(&p->bo);
    cli_sched_init(&p->cs);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", common_opts, NULL)) != -1) {
        switch (c) {
        case OPT_PROFILE:
            p->s.profile_path = optarg;
            break;
        case OPT_STAGES:
            if (!cli_parse_int(cmd, "--stages", optarg, 1, CLI_MAX_STAGES, &p->s.S))
                return CLI_USAGE;
            break;
        case OPT_MB:
            if (!cli_parse_int(cmd, "--microbatches", optarg, 1, 100000, &p->s.M))
                return CLI_USAGE;
            break;
        case OPT_GPU:
            p->s.gpu = optarg;
            break;
        case OPT_POWER:
            if (!cli_parse_double(cmd, "--blocking-power", optarg, 0, 1e5, &p->s.power_w))
                return CLI_USAGE;
            p->s.have_power = true;
            break;
        case OPT_TABLE:
            p->s.gpu_table = optarg;
            break;
        case OPT_OUT:
            p->out = optarg;
            break;
        case OPT_QUIET:
            p->quiet = true;
            break;
        case CLI_OPT_SCHED_FILE:
        case CLI_OPT_CHUNKS:
        case CLI_OPT_BACKWARD_SPLIT: {
            if (envpipe)
                return cli_usage_error(cmd,
                                       "%s: EnvPipe is defined only for the 1f1b and ours "
                                       "schedules (docs/schedules.md)",
                                       argv[optind - 1]);
            int r = cli_sched_option(cmd, 0, c, optarg, &p->cs);
            if (r)
                return r;
            p->schedule_set = true;
            break;
        }
        case OPT_SCHED:
            if (erg_schedule_parse(optarg, &p->eo.schedule, &err))
                return cli_usage_error(cmd, "%s", err.msg);
            p->bo.schedule.kind = p->eo.schedule;
            p->cs.sched.kind = p->eo.schedule;
            p->schedule_set = true;
            if (!envpipe && p->eo.schedule == ERG_SCHED_ENVPIPE)
                return cli_usage_error(cmd, "--schedule ours needs EnvPipe's warm-up counts: use "
                                            "'ergon plan envpipe'");
            break;
        case OPT_TYPE:
        case OPT_RECONFIG:
        case OPT_VARIANT:
        case OPT_STEP:
        case OPT_INFLIGHT:
        case OPT_UNIT:
        case OPT_FINISH:
        case OPT_MAXIT:
        case OPT_PRINT:
        case OPT_THR:
        case OPT_XFER:
        case OPT_FROM:
        case OPT_WAITS: {
            int r = envpipe_option(cmd, c, argv[optind - 1], optarg, p, envpipe);
            if (r)
                return r;
            break;
        }
        case OPT_PLSTEP:
            if (strcmp(name, "zeus-global") != 0)
                return cli_usage_error(cmd, "--power-limit-step is an option of zeus-global");
            if (!cli_parse_double(cmd, "--power-limit-step", optarg, 1, 1e5,
                                  &p->bo.power_limit_step_w))
                return CLI_USAGE;
            break;
        case OPT_ETA:
        case OPT_MAXPOWER:
            if (envpipe || !strcmp(name, "uniform"))
                return cli_usage_error(cmd, "%s is an option of the Zeus baselines",
                                       argv[optind - 1]);
            if (c == OPT_ETA && !cli_parse_double(cmd, "--eta", optarg, 0, 1, &p->bo.eta))
                return CLI_USAGE;
            if (c == OPT_MAXPOWER &&
                !cli_parse_double(cmd, "--max-power", optarg, 1e-3, 1e6, &p->bo.max_power_w))
                return CLI_USAGE;
            break;
        case 'h':
            help(stdout, name);
            return -1;
        default:
            return cli_bad_option(cmd, argv, common_opts);
        }
    }
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (p->eo.variant == ERG_ENVPIPE_PERSEUS_EMULATION && !p->schedule_set)
        p->eo.schedule = ERG_SCHED_1F1B; /* what Perseus's emulation runs */
    if (!p->from_plan != !p->waits)
        return cli_usage_error(cmd, "--from-plan and --waits go together");
    if (!envpipe) {
        int r = cli_sched_finish(cmd, &p->cs, &p->s.S, &p->s.M);
        if (r)
            return r;
        p->bo.schedule = p->cs.sched;
    }
    return ecli_setup_load(cmd, &p->s, !p->waits);
}

static void envpipe_help2(FILE *f, const char *name)
{
    (void)name;
    envpipe_help(f);
}

/* --from-plan + --waits: one measured reconfiguration step (docs/envpipe.md). */
static int measured_step(const char *cmd, popts *p)
{
    erg_error err = {0};
    erg_schedule hint = {.kind = p->schedule_set ? p->eo.schedule : ERG_SCHED_1F1B};
    erg_plan *plan = NULL;
    double *wait = NULL;
    int *path = NULL, rc = CLI_OK;
    if (erg_plan_read(p->from_plan, &hint, &plan, &err))
        return cli_report(cmd, &err);
    int S = erg_plan_num_stages(plan), M = erg_plan_num_microbatches(plan);
    int maxf[ERG_SCHED_MAX_STAGES];
    if (S > ERG_SCHED_MAX_STAGES || S != p->s.S) {
        if (p->s.S != erg_profile_num_stages(p->s.profile))
            fprintf(stderr, "ergon %s: %s: the plan has %d stages but --stages is %ld\n", cmd,
                    p->from_plan, S, p->s.S);
        else
            fprintf(stderr, "ergon %s: %s: the plan has %d stages but the profile %s has %d\n", cmd,
                    p->from_plan, S, p->s.profile_path, erg_profile_num_stages(p->s.profile));
        erg_plan_free(plan);
        return CLI_USER_ERROR;
    }
    wait = calloc((size_t)2 * S * M, sizeof(double));
    path = calloc((size_t)2 * S * M, sizeof(int));
    if (!wait || !path) {
        fprintf(stderr, "ergon %s: out of memory\n", cmd);
        rc = CLI_USER_ERROR;
        goto done;
    }
    if (erg_envpipe_waits_read(p->waits, plan, wait, &err) ||
        erg_envpipe_max_clocks(p->s.profile, S, p->s.spec, maxf, &err)) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    int gran = p->s.spec ? p->s.spec->reconfig_step_mhz : 30;
    int step = p->eo.reconfig_step_mhz > 0             ? p->eo.reconfig_step_mhz
               : p->eo.reconfig == ERG_RECONFIG_GREEDY ? 3 * gran
                                                       : gran;
    double scale = p->eo.threshold_scale > 0 ? p->eo.threshold_scale : 4;
    int len = 0;
    bool changed = false;
    if (erg_envpipe_reconfigure_step(plan, wait, 0, scale, p->eo.reconfig, step, maxf, path, &len,
                                     &changed, &err)) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    if (!p->quiet) {
        char *grid = NULL;
        if (erg_envpipe_format_grid(plan, wait, path, len, &grid, &err)) {
            rc = cli_report(cmd, &err);
            goto done;
        }
        printf("%s%s\n", grid,
               changed ? "changed: clocks on the critical path were raised"
                       : "unchanged: the critical path is the outer envelope or already at max");
        erg_free(grid);
    }
    if (p->out)
        rc = cli_plan_stamp(cmd, plan, p->s.profile, p->s.power_w,
                            p->s.spec ? p->s.spec->name : NULL);
    if (p->out && !rc)
        rc = ecli_write_plan(cmd, plan, p->out);
done:
    free(wait);
    free(path);
    erg_plan_free(plan);
    return rc;
}

int cmd_plan_envpipe(int argc, char **argv)
{
    const char *cmd = "plan envpipe";
    popts p;
    int rc = parse(cmd, argc, argv, &p, true, envpipe_help2, "envpipe");
    if (rc) {
        ecli_setup_free(&p.s);
        return rc < 0 ? CLI_OK : rc;
    }
    if (p.waits) {
        rc = measured_step(cmd, &p);
        ecli_setup_free(&p.s);
        return rc;
    }
    iter_print ip = {p.print};
    p.eo.blocking_power_w = p.s.power_w;
    p.eo.gpu = p.s.spec;
    p.eo.on_iteration = print_iteration;
    p.eo.user = &ip;
    erg_plan *plan = NULL;
    erg_envpipe_info info;
    erg_error err = {0};
    if (erg_plan_envpipe(p.s.profile, (int)p.s.S, (int)p.s.M, &p.eo, &plan, &info, &err)) {
        ecli_setup_free(&p.s);
        return cli_report(cmd, &err);
    }
    rc = CLI_OK;
    if (!p.quiet) {
        print_summary(plan, &p.s);
        if (p.eo.variant == ERG_ENVPIPE_REAL) {
            printf("EnvPipe: type %s, schedule %s, reconfig %s\n", erg_envpipe_type_name(p.eo.type),
                   erg_schedule_name(p.eo.schedule), erg_envpipe_reconfig_name(p.eo.reconfig));
            printf("max / energy-optimal clock per stage (MHz):");
            for (int s = 0; s < (int)p.s.S; s++)
                printf(" %d/%d", info.max_mhz[s], info.optimal_mhz[s]);
            printf("\nextra warm-up forwards r:");
            for (int s = 0; s < (int)p.s.S; s++)
                printf(" %d", info.extra_warmup[s]);
            printf("\n");
        }
        printf("reconfiguration iterations: %d%s\n", info.iterations,
               info.stuck ? " (stopped: the critical path left the envelope but no clock could "
                            "rise)"
                          : "");
    }
    if (p.out)
        rc = cli_plan_stamp(cmd, plan, p.s.profile, p.s.power_w, p.s.spec ? p.s.spec->name : NULL);
    if (p.out && !rc)
        rc = ecli_write_plan(cmd, plan, p.out);
    erg_plan_free(plan);
    ecli_setup_free(&p.s);
    return rc;
}

typedef erg_status (*baseline_fn)(const erg_profile *, int, int, const erg_baseline_opts *,
                                  erg_plan **, erg_error *);

static int run_baseline(int argc, char **argv, const char *name, baseline_fn fn)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "plan %s", name);
    popts p;
    int rc = parse(cmd, argc, argv, &p, false, baseline_help, name);
    if (rc) {
        ecli_setup_free(&p.s);
        cli_sched_free(&p.cs);
        return rc < 0 ? CLI_OK : rc;
    }
    p.bo.blocking_power_w = p.s.power_w;
    p.bo.gpu = p.s.spec;
    erg_plan *plan = NULL;
    erg_error err = {0};
    if (fn(p.s.profile, (int)p.s.S, (int)p.s.M, &p.bo, &plan, &err)) {
        ecli_setup_free(&p.s);
        cli_sched_free(&p.cs);
        return cli_report(cmd, &err);
    }
    if (!p.quiet) {
        print_summary(plan, &p.s);
        cli_sched_split_note(stdout, &p.cs, p.s.profile, p.s.S, p.s.M);
    }
    if (p.out)
        rc = cli_plan_stamp(cmd, plan, p.s.profile, p.s.power_w, p.s.spec ? p.s.spec->name : NULL);
    if (p.out && !rc)
        rc = ecli_write_plan(cmd, plan, p.out);
    erg_plan_free(plan);
    ecli_setup_free(&p.s);
    cli_sched_free(&p.cs);
    return rc;
}

int cmd_plan_zeus_global(int argc, char **argv)
{
    return run_baseline(argc, argv, "zeus-global", erg_plan_zeus_global);
}

int cmd_plan_zeus_stage(int argc, char **argv)
{
    return run_baseline(argc, argv, "zeus-stage", erg_plan_zeus_stage);
}

int cmd_plan_uniform(int argc, char **argv)
{
    return run_baseline(argc, argv, "uniform", erg_plan_uniform);
}
