/* cmd_plan_envpipe.c: `ergon plan envpipe|zeus-global|zeus-stage|uniform|power-limit`: EnvPipe and
 * the baselines. */
#include "cli.h"
#include "ergon/baselines.h"
#include "envpipe_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Options of one planning command. */
typedef struct popts {
    ecli_setup s;
    const char *out;
    bool quiet, print, schedule_set;
    const char *from_plan, *waits;
    erg_envpipe_opts eo;
    erg_baseline_opts bo;
    cli_sched cs;                       /* baselines: --schedule-file, --chunks, --backward-split */
    long step, inflight, finish, maxit; /* -1: not given */
} popts;

static int type_opt(const char *cmd, const char *v, void *p)
{
    erg_error err = {0};
    return erg_envpipe_type_parse(v, &((popts *)p)->eo.type, &err)
               ? cli_usage_error(cmd, "%s", err.msg)
               : CLI_OK;
}

static int reconfig_opt(const char *cmd, const char *v, void *p)
{
    erg_error err = {0};
    return erg_envpipe_reconfig_parse(v, &((popts *)p)->eo.reconfig, &err)
               ? cli_usage_error(cmd, "%s", err.msg)
               : CLI_OK;
}

static int variant_opt(const char *cmd, const char *v, void *p)
{
    erg_error err = {0};
    return erg_envpipe_variant_parse(v, &((popts *)p)->eo.variant, &err)
               ? cli_usage_error(cmd, "%s", err.msg)
               : CLI_OK;
}

/* --schedule: 1f1b or ours for EnvPipe, any but ours for the baselines */
static int envpipe_sched_opt(const char *cmd, const char *v, void *user)
{
    popts *p = user;
    erg_error err = {0};
    if (erg_schedule_parse(v, &p->eo.schedule, &err))
        return cli_usage_error(cmd, "%s", err.msg);
    p->bo.schedule.kind = p->eo.schedule;
    p->cs.sched.kind = p->eo.schedule;
    p->schedule_set = true;
    return CLI_OK;
}

static int baseline_sched_opt(const char *cmd, const char *v, void *user)
{
    popts *p = user;
    int rc = envpipe_sched_opt(cmd, v, user);
    if (!rc && p->eo.schedule == ERG_SCHED_ENVPIPE)
        return cli_usage_error(cmd, "--schedule ours needs EnvPipe's warm-up counts: use "
                                    "'ergon plan envpipe'");
    return rc;
}

static int no_sched_file(const char *cmd, const char *v, void *opt)
{
    (void)v;
    return cli_usage_error(cmd,
                           "%s: EnvPipe is defined only for the 1f1b and ours schedules "
                           "(docs/schedules.md)",
                           (const char *)opt);
}

#define PLAN_COMMON_OPTS(p)                                                                        \
    CLI_OPT_S("profile", "P", &(p)->s.profile_path,                                                \
              "stage profile CSV (stage,instruction,frequency,time,energy)"),                      \
        CLI_OPT_STAGES(&(p)->s.S, "pipeline stages (default: all of the profile's)"),              \
        CLI_OPT_L("microbatches", "M", &(p)->s.M, 1, 100000,                                       \
                  "microbatches per iteration (required)"),                                        \
        CLI_OPT_S("gpu", "NAME", &(p)->s.gpu,                                                      \
                  "GPU model: sets the blocking power for A40 (70.38 W) and A100\n"                \
                  "(83.64 W) and selects its row of the clock table (v100, rtx3090,\n"             \
                  "a100, a6000, a40, h100; other GPUs use the profile's clocks)"),                 \
        CLI_OPT_D("blocking-power", "W", &(p)->s.power_w, 0, 1e5,                                  \
                  "power drawn while idle or blocked on communication"),                           \
        CLI_OPT_S("gpu-table", "FILE", &(p)->s.gpu_table,                                          \
                  "GPU clock table (default: $ERGON_GPU_TABLE or data/gpus.csv)"),                 \
        CLI_OPT_S("out", "FILE", &(p)->out,                                                        \
                  "write the plan: FILE.py = freqs_pipeline literal, else ergon JSON"),            \
        CLI_OPT_B("quiet", &(p)->quiet, "no summary on stdout")

static const cli_help envpipe_help = {
    "usage: ergon plan envpipe --profile P --microbatches M (--gpu G | --blocking-power W)\n"
    "                          [--type T] [--schedule S] [--reconfig R] [options]\n",
    "Plan per-instruction SM clocks with EnvPipe (USENIX ATC'23) on the emulated pipeline:\n"
    "profile each stage's energy valley, slow the units inside the outer envelope (F0, the\n"
    "last microbatch's B and the whole last stage stay at max), reorder warm-up forwards\n"
    "('ours'), then raise clocks on the critical path until it is the envelope. The plan\n"
    "is evaluated with profiled times and energies (idle time at blocking power).\n",
    "exit status: 0 success, 1 bad input (e.g. a clock missing from the profile,\n"
    "M < S with ours), 2 usage error.\n"};

static int parse_envpipe(const char *cmd, int argc, char **argv, popts *p)
{
    const cli_opt opts[] = {
        CLI_OPT_CALL("type", "T", type_opt, p, "baseline | uniform | envelope (default envelope)"),
        CLI_OPT_CALL("schedule", "S", envpipe_sched_opt, p,
                     "1f1b | ours (default ours; 1f1b for perseus-emulation)"),
        CLI_OPT_CALL("reconfig", "R", reconfig_opt, p,
                     "default | greedy | balanced (default balanced)"),
        CLI_OPT_CALL("variant", "V", variant_opt, p,
                     "envpipe (default) | perseus-emulation: Perseus's emulation of\n"
                     "EnvPipe (slowest Pareto clocks, +15 MHz steps on one critical\n"
                     "path, CPM on quantised times; the published comparisons)"),
        CLI_OPT_L("step", "MHZ", &p->step, 1, 10000,
                  "clock step of a raise (default: the GPU's granularity, 30 MHz,\n"
                  "x3 for greedy; 15 MHz for perseus-emulation)"),
        CLI_OPT_L("max-inflight", "N", &p->inflight, 1, 100000,
                  "memory cap: at most N forwards in flight per stage (ours)"),
        CLI_OPT_D("unit-time", "S", &p->eo.unit_s, 1e-9, 1e3,
                  "perseus-emulation: quantisation unit (default 0.001 s)"),
        CLI_OPT_L("finish-limit", "N", &p->finish, 0, 1000000,
                  "stop after N+1 iterations without change (default 10)"),
        CLI_OPT_L("max-iterations", "N", &p->maxit, 1, 10000000,
                  "hard cap on reconfiguration iterations (default 10000)"),
        CLI_OPT_D("threshold-scale", "X", &p->eo.threshold_scale, 1e-6, 1e6,
                  "use EnvPipe's measured-wait rule for the critical path\n"
                  "instead of CPM: a unit whose receive wait is below X times\n"
                  "the smallest last-stage wait was not held up (EnvPipe: 4)"),
        CLI_OPT_D("transfer-time", "S", &p->eo.transfer_s, 0, 1e3,
                  "P2P transfer time added to every receive wait (with\n"
                  "--threshold-scale; default 0)"),
        CLI_OPT_S("from-plan", "FILE", &p->from_plan,
                  "with --waits: one measured reconfiguration step on this\n"
                  "plan (JSON; what EnvPipe does after a real iteration)"),
        CLI_OPT_S("waits", "CSV", &p->waits,
                  "measured receive waits: stage,instruction,microbatch,wait_ms\n"
                  "(one row per instruction); the threshold is\n"
                  "--threshold-scale (default 4) x the smallest non-zero\n"
                  "last-stage wait"),
        CLI_OPT_B("print-iterations", &p->print,
                  "print every iteration's plan in EnvPipe's format\n"
                  "(Stage 0 | [F0 1980 0.0] F1 1260 0.0 ...: clock MHz and wait\n"
                  "ms; brackets = critical path)"),
        CLI_OPT_CALL("schedule-file", "F", no_sched_file, "--schedule-file", "not for EnvPipe"),
        CLI_OPT_CALL("chunks", "V", no_sched_file, "--chunks", "not for EnvPipe"),
        CLI_OPT_CALL("backward-split", "X", no_sched_file, "--backward-split", "not for EnvPipe"),
        PLAN_COMMON_OPTS(p),
        CLI_OPTS_END,
    };
    return cli_opts_parse_all(cmd, argc, argv, opts, &envpipe_help);
}

static int parse_baseline(const char *cmd, int argc, char **argv, popts *p, const char *name)
{
    bool limit = !strcmp(name, "power-limit");
    bool zeus = strcmp(name, "uniform") != 0 && !limit, global = !strcmp(name, "zeus-global");
    const char *what =
        global  ? "Zeus's global baseline: one SM clock for every GPU, the one with the lowest\n"
                  "Zeus cost eta*E + (1-eta)*S*P_max*T over the clocks every stage has.\n"
        : limit ? "Per-GPU power limit (nvidia-smi -pl): every GPU capped at --limit W; each\n"
                  "instruction runs at its highest clock whose profiled average power (energy /\n"
                  "time) fits, the lowest clock when none does (docs/fleet.md).\n"
        : zeus  ? "Zeus per stage: one SM clock per stage. The heaviest stage sets the pace; for\n"
                  "each of its clocks, every other stage takes its lowest clock that keeps pace\n"
                  "(forward + backward no slower); the lowest Zeus cost wins.\n"
                : "Uniform: every stage at the bottom of its energy valley (its iteration "
                  "energy,\nidle time included, with the whole pipeline at each clock level).\n";
    char usage[256];
    snprintf(usage, sizeof usage,
             "usage: ergon plan %s --profile P --microbatches M (--gpu G | --blocking-power W)\n"
             "                  [options]\n",
             name);
    const cli_help help = {usage, what, "exit status: 0 success, 1 bad input, 2 usage error.\n"};
    const cli_opt zeus_rows[] = {
        CLI_OPT_D("eta", "X", &p->bo.eta, 0, 1, "Zeus's energy/time knob in [0, 1] (default 0.5)"),
        CLI_OPT_D("max-power", "W", &p->bo.max_power_w, 1e-3, 1e6,
                  "P_max per GPU (default: the GPU table's power limit,\n"
                  "else the highest profiled average power)"),
        CLI_OPT_D("power-limit-step", "W", &p->bo.power_limit_step_w, 1, 1e5,
                  "choose one power limit (multiples of W up to P_max)\n"
                  "instead of one clock: under a limit each instruction\n"
                  "runs at its highest clock whose average power fits"),
        CLI_OPT_D("limit", "W", &p->bo.power_limit_w, 1e-3, 1e6,
                  "the per-GPU power limit in watts (required)"),
    };
    const cli_opt opts[] = {
        zeus ? zeus_rows[0] : (cli_opt)CLI_OPT_T(""),
        zeus ? zeus_rows[1] : (cli_opt)CLI_OPT_T(""),
        global ? zeus_rows[2] : (cli_opt)CLI_OPT_T(""),
        limit ? zeus_rows[3] : (cli_opt)CLI_OPT_T(""),
        CLI_OPT_CALL("schedule", "NAME", baseline_sched_opt, p,
                     "1f1b (default), gpipe, interleaved-1f1b, looped-bfs,\n"
                     "interleaved-zb, zbv, dualpipev (docs/schedules.md)"),
        CLI_SCHED_OPTS_NO_NAME(&p->cs),
        PLAN_COMMON_OPTS(p),
        CLI_OPTS_END,
    };
    return cli_opts_parse_all(cmd, argc, argv, opts, &help);
}

static int parse(const char *cmd, int argc, char **argv, popts *p, bool envpipe, const char *name)
{
    memset(p, 0, sizeof *p);
    erg_envpipe_opts_init(&p->eo);
    erg_baseline_opts_init(&p->bo);
    cli_sched_init(&p->cs);
    p->s.power_w = -1;
    p->step = p->inflight = p->finish = p->maxit = -1;
    int rc = envpipe ? parse_envpipe(cmd, argc, argv, p) : parse_baseline(cmd, argc, argv, p, name);
    if (rc)
        return rc;
    p->s.have_power = p->s.power_w >= 0;
    if (!p->s.have_power)
        p->s.power_w = 0;
    if (p->step >= 0)
        p->eo.reconfig_step_mhz = (int)p->step;
    if (p->inflight >= 0)
        p->eo.max_inflight = (int)p->inflight;
    if (p->finish >= 0)
        p->eo.finish_limit = (int)p->finish;
    if (p->maxit >= 0)
        p->eo.max_iterations = (int)p->maxit;
    if (p->cs.file || p->cs.sched.chunks || p->cs.split_set)
        p->schedule_set = true;
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
    int rc = parse(cmd, argc, argv, &p, true, "envpipe");
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
    int rc = parse(cmd, argc, argv, &p, false, name);
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

int cmd_plan_power_limit(int argc, char **argv)
{
    return run_baseline(argc, argv, "power-limit", erg_plan_power_limit);
}

int cmd_plan_uniform(int argc, char **argv)
{
    return run_baseline(argc, argv, "uniform", erg_plan_uniform);
}
