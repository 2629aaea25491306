/* cmd_plan.c: `ergon plan METHOD ...`: the Perseus frontier (and the
 * registered baseline planners). */
#include "cli.h"
#include "envpipe_common.h"

#include "ergon/emulate.h"
#include "ergon/envpipe.h"
#include "ergon/baselines.h"
#include "ergon/planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "r0,r1,...": the ours schedule's extra warm-up forwards, one per stage. */
static int cli_parse_warmup(const char *cmd, const char *list, long S, long M, erg_schedule *sc)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    long n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), n++) {
        long v;
        if (n >= S || n >= ERG_SCHED_MAX_STAGES)
            return cli_usage_error(cmd, "--extra-warmup: %ld values or more for %ld stages", n + 1,
                                   S);
        if (!cli_parse_int(cmd, "--extra-warmup", tok, 0, M, &v))
            return CLI_USAGE;
        sc->extra_warmup[n] = (int)v;
    }
    if (n != S)
        return cli_usage_error(cmd,
                               "--extra-warmup: %ld values for %ld stages (one per stage, "
                               "e.g. 2,1,0 for 3 stages)",
                               n, S);
    return CLI_OK;
}

/* EnvPipe's own r_s for this profile (the plan `ergon plan envpipe` makes with the same GPU and
 * blocking power; compare's perseus-ours row plans on the same schedule). */
static int envpipe_warmup(const char *cmd, const char *profile, long S, long M, const char *gpu,
                          double power_w, erg_schedule *sc)
{
    ecli_setup es = {.profile_path = profile,
                     .S = S,
                     .M = M,
                     .gpu = gpu,
                     .power_w = power_w,
                     .have_power = true};
    int rc = ecli_setup_load(cmd, &es, true);
    if (rc) {
        ecli_setup_free(&es);
        return rc;
    }
    erg_envpipe_opts eo;
    erg_envpipe_opts_init(&eo);
    eo.blocking_power_w = power_w;
    eo.gpu = es.spec;
    erg_plan *plan = NULL;
    erg_envpipe_info ki;
    erg_error err = {0};
    if (M < S) {
        ecli_setup_free(&es);
        return cli_usage_error(cmd,
                               "--schedule ours needs at least as many microbatches as "
                               "stages (%ld < %ld)",
                               M, S);
    }
    if (erg_plan_envpipe(es.profile, (int)S, (int)M, &eo, &plan, &ki, &err)) {
        ecli_setup_free(&es);
        return cli_report(cmd, &err);
    }
    erg_plan_free(plan);
    ecli_setup_free(&es);
    for (long s = 0; s < S && s < ERG_SCHED_MAX_STAGES; s++)
        sc->extra_warmup[s] = ki.extra_warmup[s];
    return CLI_OK;
}

/* One run of `plan perseus`: its options, what it read and what it made. */
typedef struct perseus_run {
    const char *cmd, *profile, *out, *gpu, *formats, *extra_warmup, *fits, *fits_case;
    long S, M, max_plans;
    bool quiet, force, per_plan_files;
    double power_w, lock_wait_s;
    erg_perseus_opts o;
    erg_emulate_opts post;
    cli_sched cs;
    int what;
    double *fitv;
    erg_profile *prof;
    erg_frontier *f;
    erg_dag *dag;
    erg_emulation em_max;
    bool allmax_added;
    erg_switch_aware_stats sws;
    size_t removed;
    double t_plan, t1;
    erg_error err;
} perseus_run;

static void perseus_run_free(perseus_run *r)
{
    erg_frontier_free(r->f);
    erg_dag_free(r->dag);
    erg_profile_free(r->prof);
    free(r->fitv);
    cli_sched_free(&r->cs);
}

static int latency_opt(const char *cmd, const char *value, void *dest)
{
    return cli_parse_latency(cmd, value, dest) ? CLI_OK : CLI_USAGE;
}

static const cli_help perseus_help = {
    "usage: ergon plan perseus --profile P --stages S --microbatches M --out DIR\n"
    "                          (--gpu A40|A100 | --blocking-power W) [options]\n"
    "       ergon plan perseus --profile P --schedule-file F.csv --out DIR ...\n",
    "Compute the whole iteration-time/energy frontier of per-instruction clock plans\n"
    "(Perseus, Phillips-Dessouky min-cut crashing), from the slowest plan to the fastest,\n"
    "one time unit apart.\n",
    "Progress goes to stderr: a bar on a terminal, otherwise one line every 5 s once\n"
    "a run takes that long ($ERGON_PROGRESS_INTERVAL_S: other seconds;\n"
    "$ERGON_NO_PROGRESS=1: none).\n"
    "exit status: 0 success, 1 bad input or no plan (named), 2 usage error.\n"};

static int perseus_parse(perseus_run *r, int argc, char **argv)
{
    const cli_opt opts[] = {
        CLI_OPT_S("profile", "P", &r->profile,
                  "stage profile CSV (stage,instruction,frequency,time,energy)"),
        CLI_OPT_STAGES(&r->S, "pipeline stages = ranks (GPUs) P; the profile's first S\n"
                              "stages are used (--ranks is the same option); with\n"
                              "--chunks V each rank's profile is split evenly over its\n"
                              "V chunks, or a profile with P*V stages gives each chunk"),
        CLI_OPT_L("microbatches", "M", &r->M, 1, 100000, "microbatches per iteration"),
        CLI_OPT_S("out", "DIR", &r->out,
                  "output directory (created; the files of an earlier\n"
                  "frontier in it are replaced, other files are kept):\n"
                  "  frontier.csv            time,energy per plan: the planner's\n"
                  "                          frontier (published format)\n"
                  "  plans.ergon             every plan in one compact file\n"
                  "                          (docs/formats.md), and the all-max\n"
                  "                          fallback; read by choose, sample,\n"
                  "                          show and serve's Frontier\n"
                  "  profile.csv, frontier-info.csv   the profile and blocking\n"
                  "                          power used: the all-max baseline of\n"
                  "                          'ergon choose' and of the summary\n"
                  "and with --per-plan-files (or --formats):\n"
                  "  freqs_pipeline_%05d.py  plan files: lists of clocks (perseus-py;\n"
                  "                          read by Perseus's PointSolution and\n"
                  "                          Merak) or of (\"forward\"|\"backward\",\n"
                  "                          clock) tuples (zeus-py; read by Zeus\n"
                  "                          PFO's PointSolution); ergon reads both\n"
                  "  plan_%05d.json          ergon plan files (docs/formats.md)"),
        CLI_OPT_B("per-plan-files", &r->per_plan_files,
                  "also one .py and one .json file per plan (as\n"
                  "--formats csv,packed,perseus-py,json)"),
        CLI_OPT_S("gpu", "NAME", &r->gpu, "A40 (70.38 W) or A100 (83.64 W) blocking power"),
        CLI_OPT_D("blocking-power", "W", &r->power_w, 0, 1e5,
                  "power drawn while blocked on communication, for other GPUs"),
        CLI_OPT_D("unit-time", "S", &r->o.unit_s, 1e-9, 1e3,
                  "quantisation unit in seconds (default 0.001); the frontier\n"
                  "has about (slowest - fastest iteration) / S plans"),
        CLI_OPT_L("max-plans", "N", &r->max_plans, 0, 1000000000000L,
                  "refuse, before planning and with the estimate, when the\n"
                  "frontier would hold more than N plans (default 200000)"),
        CLI_OPT_B("force", &r->force, "no plan limit (as --max-plans 0)"),
        CLI_SCHED_OPTS(&r->cs),
        CLI_OPT_S("extra-warmup", "LIST", &r->extra_warmup,
                  "with --schedule ours (EnvPipe's schedule: 1F1B with extra\n"
                  "warm-up forwards): comma list of r_s, one per stage (the\n"
                  "last is 0); default: EnvPipe's own r_s for this profile\n"
                  "(as 'ergon plan envpipe' and compare's perseus-ours row)"),
        CLI_OPT_D("noise-factor", "X", &r->o.noise_factor, 1e-9, 1,
                  "soft Pareto filter factor (default 0.95)"),
        CLI_OPT_B("always-use-noise-factor", &r->o.always_use_noise_factor,
                  "use the soft filter straight away"),
        CLI_OPT_S("fits", "FILE", &r->fits,
                  "use these cost-model coefficients instead of fitting (CSV\n"
                  "with stage,instruction,a,b,c; e.g. a reference run's fits)"),
        CLI_OPT_S("fits-case", "NAME", &r->fits_case, "rows of --fits whose 'case' column is NAME"),
        CLI_OPT_S("formats", "LIST", &r->formats,
                  "comma list of csv, packed, perseus-py (alias py), zeus-py,\n"
                  "json (default csv,packed; perseus-py and zeus-py exclude\n"
                  "each other: same file names)"),
        CLI_OPT_B("quiet", &r->quiet, "no summary on stdout"),
        CLI_OPT_CALL("switch-latency", "S", latency_opt, &r->post.switch_latency_s,
                     "plan for a clock-switch latency of S seconds ('default' =\n"
                     "10 ms; docs/emulate.md): every plan and variants that keep a\n"
                     "rank's clock where a change buys little or request it earlier\n"
                     "where it would delay a critical instruction are emulated with\n"
                     "that latency and the Pareto-optimal ones form the frontier,\n"
                     "with their emulated time and energy (choose and serve then\n"
                     "evaluate with it too). 0 (the default): the Perseus frontier"),
        CLI_OPT_D("transfer-time", "S", &r->post.transfer_time_s, 0, 1e6,
                  "every cross-rank edge (P2P send) takes S seconds: planned\n"
                  "as a fixed-duration dependency (rounded to --unit-time)\n"
                  "and included in the post-check"),
        CLI_OPT_D("lock-wait", "S", &r->lock_wait_s, 0, 1e6,
                  "wait up to S seconds (default 60) for another process\n"
                  "writing or reading DIR; its writers take DIR's lock, so\n"
                  "the files of two runs never mix"),
        CLI_OPTS_END,
    };
    return cli_opts_parse_all(r->cmd, argc, argv, opts, &perseus_help);
}

/* After the options: the schedule, the blocking power, EnvPipe's warm-up, the formats, the
 * fits and the profile. */
static int perseus_prepare(perseus_run *r)
{
    const char *cmd = r->cmd;
    int rc = cli_sched_finish(cmd, &r->cs, &r->S, &r->M);
    if (rc)
        return rc;
    r->o.schedule = r->cs.sched;
    r->o.transfer_time_s = r->post.transfer_time_s;
    r->o.max_plans = r->force ? 0 : (uint64_t)r->max_plans;
    r->o.blocking_power_w = r->power_w;
    if (!r->profile || !r->S || !r->M || !r->out)
        return cli_usage_error(cmd, "--profile, --stages, --microbatches and --out are required");
    if (!cli_blocking_power(cmd, r->gpu, &r->o.blocking_power_w))
        return CLI_USAGE;
    if (r->extra_warmup && r->o.schedule.kind != ERG_SCHED_ENVPIPE)
        return cli_usage_error(cmd, "--extra-warmup applies to --schedule ours only");
    if (r->o.schedule.kind == ERG_SCHED_ENVPIPE &&
        (rc = r->extra_warmup ? cli_parse_warmup(cmd, r->extra_warmup, r->S, r->M, &r->o.schedule)
                              : envpipe_warmup(cmd, r->profile, r->S, r->M, r->gpu,
                                               r->o.blocking_power_w, &r->o.schedule)))
        return rc;
    if (r->per_plan_files)
        r->formats = "csv,packed,py,json";
    if (erg_frontier_formats_parse(r->formats, &r->what, &r->err))
        return cli_usage_error(cmd, "--formats: %s", r->err.msg);
    if (r->fits && (rc = cli_read_fits(r->fits, r->fits_case, (int)r->S, &r->fitv)))
        return rc;
    r->o.fits = r->fitv;
    if (erg_profile_read_csv(r->profile, &r->prof, &r->err))
        return cli_report(cmd, &r->err);
    /* fewer ranks than the profile has stages: plan the first ones, and say so */
    int ps = erg_profile_num_stages(r->prof), V = erg_schedule_chunks(&r->o.schedule);
    if (ps > r->S * V && ps != r->S)
        fprintf(stderr,
                "ergon %s: note: %s has %d stages; planning its first %ld (--stages %ld%s): "
                "the frontier's profile.csv holds those (emulate its plans with it)\n",
                cmd, r->profile, ps, r->S * V, r->S, V > 1 ? " x --chunks" : "");
    return CLI_OK;
}

/* The frontier, completed with the all-max fallback (so that a deadline of the all-max time,
 * a slowdown of 1.0, always has a plan), switch-aware when asked (docs/emulate.md). */
static erg_status perseus_frontier(perseus_run *r)
{
    erg_error *err = &r->err;
    cli_progress pr;
    cli_progress_init(&pr, "planning");
    r->o.progress = cli_progress_cb;
    r->o.progress_user = &pr;
    double t0 = cli_now_s();
    erg_status st = erg_plan_perseus(r->prof, (int)r->S, (int)r->M, &r->o, &r->f, err);
    cli_progress_done(&pr);
    if (st == ERG_EINVAL && r->o.max_plans && strstr(err->msg, "more than the limit of")) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        erg_error_set(err, st,
                      "%s; use a larger --unit-time, or --max-plans N / --force to "
                      "plan them anyway",
                      m);
    }
    double pw = r->o.blocking_power_w;
    if (!st && erg_frontier_size(r->f))
        st = erg_frontier_complete_all_max(r->f, r->prof, pw, 0, 0, &r->allmax_added, &r->em_max,
                                           err);
    if (!st)
        st = erg_dag_new(&r->o.schedule, (int)r->S, (int)r->M, &r->dag, err);
    if (!st && r->post.switch_latency_s > 0) {
        erg_frontier *g = NULL;
        r->post.blocking_power_w = pw;
        cli_progress_init(&pr, "switches");
        st = erg_frontier_switch_aware(r->prof, r->f, &r->post, r->o.unit_s, cli_progress_cb, &pr,
                                       &g, &r->sws, err);
        cli_progress_done(&pr);
        if (!st) {
            erg_frontier_free(r->f);
            r->f = g;
            st =
                erg_frontier_complete_all_max(r->f, r->prof, pw, r->post.switch_latency_s,
                                              r->post.transfer_time_s, &r->allmax_added, NULL, err);
        }
    }
    r->t_plan = cli_now_s() - t0;
    return st;
}

/* The frontier directory, written by the library (erg_frontier_save_dir). */
static erg_status perseus_write(perseus_run *r)
{
    erg_frontier_dir_opts d;
    erg_frontier_dir_opts_init(&d);
    d.formats = r->what;
    d.source_profile = r->profile;
    d.switch_latency_s = r->post.switch_latency_s;
    d.transfer_time_s = r->post.transfer_time_s;
    d.lock_wait_s = r->lock_wait_s;
    cli_progress pr;
    d.progress = cli_progress_cb;
    d.progress_user = &pr;
    r->t1 = cli_now_s();
    cli_progress_init(&pr, "writing ");
    erg_status st = erg_frontier_save_dir(r->f, r->prof, r->o.blocking_power_w, r->out, &d,
                                          &r->removed, &r->err);
    cli_progress_done(&pr);
    return st;
}

/* The summary's plan for one target, and its true time with switch latency and transfers. */
static void perseus_summary_pick(perseus_run *r, const cli_baseline *bl, const char *label,
                                 double limit)
{
    size_t k;
    erg_emulation em, ex, exm;
    erg_error *err = &r->err;
    /* the same choice as `ergon choose --deadline` / `--slowdown 1.01` */
    if (cli_baseline_pick(bl, r->f, limit, &k, &em, err)) {
        printf("%-25s %s\n", label, err->msg);
        return;
    }
    const erg_emulation *m = &r->em_max;
    printf("%-25s plan %zu: %.6g s (%+.2f%%), %.6g J (%+.2f%% vs all-max; %s)\n", label, k,
           em.time_s, 100 * (em.time_s / m->time_s - 1), em.energy_j,
           100 * (em.energy_j / m->energy_j - 1),
           r->post.switch_latency_s > 0 ? "emulated with the switch latency" : "profiled values");
    if (!(r->post.switch_latency_s > 0 || r->post.transfer_time_s > 0))
        return;
    /* post-check with clock-switch latency and P2P transfers */
    erg_plan *p = NULL, *allmax = NULL;
    r->post.blocking_power_w = r->o.blocking_power_w;
    if (!erg_frontier_plan(r->f, k, &p, err) &&
        !erg_emulate_ex(r->prof, r->dag, p, &r->post, &ex, NULL, NULL, err) &&
        !erg_plan_all_max(r->prof, (int)r->S, (int)r->M, &r->o.schedule, r->o.blocking_power_w,
                          &allmax, err) &&
        !erg_emulate_ex(r->prof, r->dag, allmax, &r->post, &exm, NULL, NULL, err))
        printf("%-25s   true time with switch latency %g s and transfer %g s: "
               "%.6g s (%+.2f%% vs all-max %.6g s), %.6g J (%+.2f%%); %d clock "
               "switches\n",
               "", r->post.switch_latency_s, r->post.transfer_time_s, ex.time_s,
               100 * (ex.time_s / exm.time_s - 1), exm.time_s, ex.energy_j,
               100 * (ex.energy_j / exm.energy_j - 1), ex.num_switches);
    erg_plan_free(allmax);
    erg_plan_free(p);
}

static void perseus_summary(perseus_run *r, size_t n)
{
    erg_frontier_point a, b;
    erg_frontier_get(r->f, 0, &a, &r->err);
    erg_frontier_get(r->f, n - 1, &b, &r->err);
    size_t ol = strlen(r->out), nfiles;
    while (ol > 1 && r->out[ol - 1] == '/')
        ol--;
    double bytes;
    cli_dir_usage(r->out, &nfiles, &bytes);
    printf("%zu plans in %.2f s (plus %.2f s writing %.3g MB in %zu files to %.*s/)\n", n,
           r->t_plan, cli_now_s() - r->t1, bytes / 1e6, nfiles, (int)ol, r->out);
    if (r->removed)
        printf("replaced %zu files of an earlier frontier in %.*s/\n", r->removed, (int)ol, r->out);
    printf("slowest plan:             %.6g s, %.6g J (planner estimate)\n"
           "fastest plan:             %.6g s, %.6g J (planner estimate)\n",
           a.time_s, a.energy_j, b.time_s, b.energy_j);
    printf("all-max clocks:           %.6g s, %.6g J (profiled values; the baseline)\n",
           r->em_max.time_s, r->em_max.energy_j);
    double L = r->post.switch_latency_s;
    if (r->allmax_added && L > 0)
        printf("plan %zu is all-max clocks: every planned plan near the all-max time runs "
               "slower than all-max clocks with the switch latency, so all-max clocks were "
               "added as the fastest plan\n",
               n - 1);
    else if (r->allmax_added)
        printf("plan %zu is all-max clocks: the planner's fastest plan runs slower than "
               "all-max clocks by the profiled values (its times are quantised to %g s), so "
               "all-max clocks were added as the fastest plan\n",
               n - 1, r->o.unit_s);
    cli_baseline bl;
    cli_baseline_init(&bl);
    cli_baseline_set(&bl, r->prof, r->dag, r->o.blocking_power_w, &r->em_max);
    bl.switch_latency_s = L;
    bl.transfer_time_s = L > 0 ? r->post.transfer_time_s : 0;
    if (L > 0)
        printf("switch-aware at %g s per clock switch: %zu of %zu planned plans and their "
               "variants (%zu) emulated, %zu on the frontier, %zu of them with merged "
               "clocks (times and energies below and in frontier.csv are emulated with that "
               "latency)\n",
               L, r->sws.plans_evaluated, r->sws.plans_in, r->sws.candidates, r->sws.plans_out,
               r->sws.plans_merged);
    perseus_summary_pick(r, &bl, "minimum-energy plan", 1e300);
    perseus_summary_pick(r, &bl, "at the all-max time", r->em_max.time_s);
    perseus_summary_pick(r, &bl, "within 1% slowdown", 1.01 * r->em_max.time_s);
}

static int plan_perseus(int argc, char **argv)
{
    perseus_run r = {.cmd = "plan perseus",
                     .formats = "csv,packed",
                     .max_plans = CLI_DEFAULT_MAX_PLANS,
                     .power_w = -1,
                     .lock_wait_s = ERG_FRONTIER_DIR_LOCK_WAIT_S};
    erg_perseus_opts_init(&r.o);
    erg_emulate_opts_init(&r.post);
    cli_sched_init(&r.cs);
    int rc = perseus_parse(&r, argc, argv);
    if (rc == CLI_HELP)
        return CLI_OK;
    if (!rc)
        rc = perseus_prepare(&r);
    if (!rc && (perseus_frontier(&r) || perseus_write(&r)))
        rc = cli_report(r.cmd, &r.err);
    if (rc) {
        perseus_run_free(&r);
        return rc;
    }
    size_t n = erg_frontier_size(r.f);
    if (!r.quiet && r.o.schedule.kind != ERG_SCHED_1F1B)
        printf("schedule %s: %ld ranks, %d pipeline stages, %ld microbatches\n",
               r.o.schedule.kind == ERG_SCHED_FILE ? r.cs.file
                                                   : erg_schedule_name(r.o.schedule.kind),
               r.S, erg_dag_num_pipeline_stages(r.dag), r.M);
    if (!r.quiet)
        cli_sched_split_note(stdout, &r.cs, r.prof, r.S, r.M);
    if (!r.quiet && n)
        perseus_summary(&r, n);
    if (n == 1 && !r.quiet)
        printf("one plan only: the pipeline cannot be made faster than its slowest state (a "
               "profile whose clocks do not differ in time, or a --unit-time of %g s coarser "
               "than the clock steps)\n",
               r.o.unit_s);
    perseus_run_free(&r);
    if (n == 0) { /* the planner always emits the slowest plan; never exit 0 with none */
        fprintf(stderr,
                "ergon %s: no plan: the pipeline cannot be made faster than its slowest "
                "state\n",
                r.cmd);
        return CLI_USER_ERROR;
    }
    return CLI_OK;
}

typedef struct plan_method {
    const char *name;
    cli_cmd_fn fn;
    const char *summary;
} plan_method;

static const plan_method methods[] = {
    {"perseus", plan_perseus, "the whole time-energy frontier (Perseus)"},
    {"envpipe", cmd_plan_envpipe, "EnvPipe (envelope, ours schedule, reconfiguration)"},
    {"zeus-global", cmd_plan_zeus_global, "one clock (or power limit) for every GPU (Zeus)"},
    {"zeus-stage", cmd_plan_zeus_stage, "one clock per stage (Zeus cost)"},
    {"uniform", cmd_plan_uniform, "every stage at its energy-valley clock"},
    {"power-limit", cmd_plan_power_limit, "every GPU under one power limit (nvidia-smi -pl)"},
};

static void plan_help(FILE *f)
{
    fprintf(f, "usage: ergon plan METHOD [options]   (ergon plan METHOD --help)\n\nmethods:\n");
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        fprintf(f, "  %-12s %s\n", methods[i].name, methods[i].summary);
}

int cmd_plan(int argc, char **argv)
{
    if (argc < 2) {
        plan_help(stderr);
        return CLI_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        plan_help(stdout);
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (!strcmp(argv[1], methods[i].name))
            return methods[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "ergon plan: unknown method '%s'\n", argv[1]);
    plan_help(stderr);
    return CLI_USAGE;
}
