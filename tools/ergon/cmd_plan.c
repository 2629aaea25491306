/* cmd_plan.c: `ergon plan METHOD ...`: the Perseus frontier (and the
 * registered baseline planners). */
#include "cli.h"
#include "envpipe_common.h"

#include "ergon/emulate.h"
#include "ergon/envpipe.h"
#include "ergon/planner.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void plan_perseus_help(FILE *f)
{
    fprintf(
        f,
        "usage: ergon plan perseus --profile P --stages S --microbatches M --out DIR\n"
        "                          (--gpu A40|A100 | --blocking-power W) [options]\n"
        "       ergon plan perseus --profile P --schedule-file F.csv --out DIR ...\n\n"
        "Compute the whole iteration-time/energy frontier of per-instruction clock plans\n"
        "(Perseus, Phillips-Dessouky min-cut crashing), from the slowest plan to the fastest,\n"
        "one time unit apart.\n\n"
        "  --profile P          stage profile CSV (stage,instruction,frequency,time,energy)\n"
        "  --stages S           pipeline stages = ranks (GPUs) P; the profile's first S\n"
        "                       stages are used (--ranks is the same option); with\n"
        "                       --chunks V each rank's profile is split evenly over its\n"
        "                       V chunks, or a profile with P*V stages gives each chunk\n"
        "  --microbatches M     microbatches per iteration\n"
        "  --out DIR            output directory (created; the files of an earlier\n"
        "                       frontier in it are replaced, other files are kept):\n"
        "                         frontier.csv            time,energy per plan (published format)\n"
        "                         plans.ergon             every plan in one compact file\n"
        "                                                 (docs/formats.md); read by choose,\n"
        "                                                 sample, show and serve's Frontier\n"
        "                         profile.csv, frontier-info.csv   the profile and blocking\n"
        "                                                 power used: the all-max baseline of\n"
        "                                                 'ergon choose' and of the summary\n"
        "                       and with --per-plan-files (or --formats):\n"
        "                         freqs_pipeline_%%05d.py  plan files: lists of clocks "
        "(perseus-py;\n"
        "                                                 read by Perseus's PointSolution and\n"
        "                                                 Merak) or of (\"forward\"|\"backward\",\n"
        "                                                 clock) tuples (zeus-py; read by Zeus\n"
        "                                                 PFO's PointSolution); ergon reads both\n"
        "                         plan_%%05d.json          ergon plan files (docs/formats.md)\n"
        "  --per-plan-files     also one .py and one .json file per plan (as\n"
        "                       --formats csv,packed,perseus-py,json)\n"
        "  --gpu NAME           A40 (70.38 W) or A100 (83.64 W) blocking power\n"
        "  --blocking-power W   power drawn while blocked on communication, for other GPUs\n"
        "  --unit-time S        quantisation unit in seconds (default 0.001); the frontier\n"
        "                       has about (slowest - fastest iteration) / S plans\n"
        "  --max-plans N        refuse, before planning and with the estimate, when the\n"
        "                       frontier would hold more than N plans (default %d)\n"
        "  --force              no plan limit (as --max-plans 0)\n" CLI_SCHED_HELP
        "  --extra-warmup LIST  with --schedule ours (EnvPipe's schedule: 1F1B with extra\n"
        "                       warm-up forwards): comma list of r_s, one per stage (the\n"
        "                       last is 0); default: EnvPipe's own r_s for this profile\n"
        "                       (as 'ergon plan envpipe' and compare's perseus-ours row)\n"
        "  --noise-factor X     soft Pareto filter factor (default 0.95)\n"
        "  --always-use-noise-factor   use the soft filter straight away\n"
        "  --fits FILE          use these cost-model coefficients instead of fitting (CSV\n"
        "                       with stage,instruction,a,b,c; e.g. a reference run's fits)\n"
        "  --fits-case NAME     rows of --fits whose 'case' column is NAME\n"
        "  --formats LIST       comma list of csv, packed, perseus-py (alias py), zeus-py,\n"
        "                       json (default csv,packed; perseus-py and zeus-py exclude\n"
        "                       each other: same file names)\n"
        "  --quiet              no summary on stdout\n"
        "  --switch-latency S   plan for a clock-switch latency of S seconds ('default' =\n"
        "                       10 ms; docs/emulate.md): every plan and variants that keep a\n"
        "                       rank's clock where a change buys little or request it earlier\n"
        "                       where it would delay a critical instruction are emulated with\n"
        "                       that latency and the Pareto-optimal ones form the frontier,\n"
        "                       with their emulated time and energy (choose and serve then\n"
        "                       evaluate with it too). 0 (the default): the Perseus frontier\n"
        "  --transfer-time S    every cross-rank edge (P2P send) takes S seconds: planned\n"
        "                       as a fixed-duration dependency (rounded to --unit-time)\n"
        "                       and included in the post-check\n"
        "  --lock-wait S        wait up to S seconds (default 60) for another process\n"
        "                       writing or reading DIR; its writers take DIR's lock, so\n"
        "                       the files of two runs never mix\n"
        "  -h, --help           this help\n\n"
        "Progress goes to stderr: a bar on a terminal, otherwise one line every %.0f s once\n"
        "a run takes that long ($ERGON_PROGRESS_INTERVAL_S: other seconds;\n"
        "$ERGON_NO_PROGRESS=1: none).\n"
        "exit status: 0 success, 1 bad input or no plan (named), 2 usage error.\n",
        CLI_DEFAULT_MAX_PLANS, CLI_PROGRESS_LINE_S);
}

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

static int plan_perseus(int argc, char **argv)
{
    const char *cmd = "plan perseus";
    static const struct option opts[] = {
        {"profile", required_argument, 0, 'p'},
        {"stages", required_argument, 0, 's'},
        {"ranks", required_argument, 0, 's'},
        {"microbatches", required_argument, 0, 'm'},
        {"out", required_argument, 0, 'o'},
        CLI_SCHED_LONGOPTS,
        {"gpu", required_argument, 0, 'g'},
        {"blocking-power", required_argument, 0, 'w'},
        {"unit-time", required_argument, 0, 'u'},
        {"schedule", required_argument, 0, 'S'},
        {"extra-warmup", required_argument, 0, 'E'},
        {"noise-factor", required_argument, 0, 'n'},
        {"always-use-noise-factor", no_argument, 0, 'A'},
        {"formats", required_argument, 0, 'F'},
        {"quiet", no_argument, 0, 'q'},
        {"fits", required_argument, 0, 'f'},
        {"fits-case", required_argument, 0, 'C'},
        {"max-plans", required_argument, 0, 'X'},
        {"force", no_argument, 0, 'Y'},
        {"per-plan-files", no_argument, 0, 'P'},
        {"help", no_argument, 0, 'h'},
        {"switch-latency", required_argument, 0, 'L'},
        {"transfer-time", required_argument, 0, 'x'},
        {"lock-wait", required_argument, 0, 'K'},
        {0, 0, 0, 0},
    };
    erg_emulate_opts post;
    erg_emulate_opts_init(&post);
    const char *fits = NULL, *fits_case = NULL;
    const char *profile = NULL, *out = NULL, *gpu = NULL, *formats = "csv,packed";
    const char *extra_warmup = NULL;
    long S = 0, M = 0;
    bool quiet = false, have_power = false;
    double lock_wait_s = ERG_FRONTIER_DIR_LOCK_WAIT_S;
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    cli_sched cs;
    cli_sched_init(&cs);
    o.max_plans = CLI_DEFAULT_MAX_PLANS;
    erg_error err = {0};
    int c;
    long max_plans;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            profile = optarg;
            break;
        case 'X':
            if (!cli_parse_int(cmd, "--max-plans", optarg, 0, 1000000000000L, &max_plans))
                return CLI_USAGE;
            o.max_plans = (uint64_t)max_plans;
            break;
        case 'Y':
            o.max_plans = 0;
            break;
        case 'P':
            formats = "csv,packed,py,json";
            break;
        case 's':
            if (!cli_parse_int(cmd, "--stages", optarg, 1, 4096, &S))
                return CLI_USAGE;
            break;
        case 'm':
            if (!cli_parse_int(cmd, "--microbatches", optarg, 1, 100000, &M))
                return CLI_USAGE;
            break;
        case 'o':
            out = optarg;
            break;
        case 'g':
            gpu = optarg;
            break;
        case 'w':
            if (!cli_parse_double(cmd, "--blocking-power", optarg, 0, 1e5, &o.blocking_power_w))
                return CLI_USAGE;
            have_power = true;
            break;
        case 'u':
            if (!cli_parse_double(cmd, "--unit-time", optarg, 1e-9, 1e3, &o.unit_s))
                return CLI_USAGE;
            break;
        case 'S':
        case CLI_OPT_SCHED_FILE:
        case CLI_OPT_CHUNKS:
        case CLI_OPT_BACKWARD_SPLIT: {
            int rc = cli_sched_option(cmd, c == 'S', c, optarg, &cs);
            if (rc)
                return rc;
            break;
        }
        case 'E':
            extra_warmup = optarg;
            break;
        case 'n':
            if (!cli_parse_double(cmd, "--noise-factor", optarg, 1e-9, 1, &o.noise_factor))
                return CLI_USAGE;
            break;
        case 'A':
            o.always_use_noise_factor = true;
            break;
        case 'F':
            formats = optarg;
            break;
        case 'q':
            quiet = true;
            break;
        case 'f':
            fits = optarg;
            break;
        case 'L':
            if (!cli_parse_latency(cmd, optarg, &post.switch_latency_s))
                return CLI_USAGE;
            break;
        case 'x':
            if (!cli_parse_double(cmd, "--transfer-time", optarg, 0, 1e6, &post.transfer_time_s))
                return CLI_USAGE;
            o.transfer_time_s = post.transfer_time_s;
            break;
        case 'C':
            fits_case = optarg;
            break;
        case 'K':
            if (!cli_parse_double(cmd, "--lock-wait", optarg, 0, 1e6, &lock_wait_s))
                return CLI_USAGE;
            break;
        case 'h':
            plan_perseus_help(stdout);
            return CLI_OK;
        default:
            return cli_bad_option(cmd, argv, opts);
        }
    }
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    {
        int rc = cli_sched_finish(cmd, &cs, &S, &M);
        if (rc) {
            cli_sched_free(&cs);
            return rc;
        }
    }
    o.schedule = cs.sched;
    if (!profile || !S || !M || !out) {
        cli_sched_free(&cs);
        return cli_usage_error(cmd, "--profile, --stages, --microbatches and --out are required");
    }
    if (!have_power)
        o.blocking_power_w = -1;
    if (!cli_blocking_power(cmd, gpu, &o.blocking_power_w)) {
        cli_sched_free(&cs);
        return CLI_USAGE;
    }
    if (extra_warmup && o.schedule.kind != ERG_SCHED_ENVPIPE) {
        cli_sched_free(&cs);
        return cli_usage_error(cmd, "--extra-warmup applies to --schedule ours only");
    }
    if (o.schedule.kind == ERG_SCHED_ENVPIPE) {
        int rc = extra_warmup
                     ? cli_parse_warmup(cmd, extra_warmup, S, M, &o.schedule)
                     : envpipe_warmup(cmd, profile, S, M, gpu, o.blocking_power_w, &o.schedule);
        if (rc) {
            cli_sched_free(&cs);
            return rc;
        }
    }
    int what = 0;
    if (erg_frontier_formats_parse(formats, &what, &err)) {
        cli_sched_free(&cs);
        return cli_usage_error(cmd, "--formats: %s", err.msg);
    }
    double *fitv = NULL;
    if (fits) {
        int rc = cli_read_fits(fits, fits_case, (int)S, &fitv);
        if (rc) {
            cli_sched_free(&cs);
            return rc;
        }
        o.fits = fitv;
    }
    erg_profile *prof;
    erg_plan *allmax = NULL;
    bool allmax_added = false;
    erg_emulation em_max = {0};
    if (erg_profile_read_csv(profile, &prof, &err)) {
        free(fitv);
        cli_sched_free(&cs);
        return cli_report(cmd, &err);
    }
    {
        /* fewer ranks than the profile has stages: plan the first ones, and say so */
        int ps = erg_profile_num_stages(prof), V = erg_schedule_chunks(&o.schedule);
        if (ps > S * V && ps != S)
            fprintf(stderr,
                    "ergon %s: note: %s has %d stages; planning its first %ld (--stages %ld%s): "
                    "the frontier's profile.csv holds those (emulate its plans with it)\n",
                    cmd, profile, ps, S * V, S, V > 1 ? " x --chunks" : "");
    }
    cli_progress pr;
    cli_progress_init(&pr, "planning");
    o.progress = cli_progress_cb;
    o.progress_user = &pr;
    double t0 = cli_now_s();
    erg_frontier *f = NULL;
    erg_status st = erg_plan_perseus(prof, (int)S, (int)M, &o, &f, &err);
    cli_progress_done(&pr);
    if (st == ERG_EINVAL && o.max_plans && strstr(err.msg, "more than the limit of")) {
        char m[sizeof err.msg];
        snprintf(m, sizeof m, "%s", err.msg);
        erg_error_set(&err, st,
                      "%s; use a larger --unit-time, or --max-plans N / --force to "
                      "plan them anyway",
                      m);
    }
    erg_dag *dag = NULL;
    /* the frontier always answers a slowdown of 1.0 (a deadline of the all-max time) */
    if (!st && erg_frontier_size(f))
        st = erg_frontier_complete_all_max(f, prof, o.blocking_power_w, 0, 0, &allmax_added,
                                           &em_max, &err);
    if (!st)
        st = erg_dag_new(&o.schedule, (int)S, (int)M, &dag, &err);
    /* switch-aware: the frontier honest at the switch latency (docs/emulate.md) */
    erg_switch_aware_stats sws = {0};
    if (!st && post.switch_latency_s > 0) {
        erg_frontier *g = NULL;
        post.blocking_power_w = o.blocking_power_w;
        cli_progress_init(&pr, "switches");
        st = erg_frontier_switch_aware(prof, f, &post, o.unit_s, cli_progress_cb, &pr, &g, &sws,
                                       &err);
        cli_progress_done(&pr);
        if (!st) {
            erg_frontier_free(f);
            f = g;
            st = erg_frontier_complete_all_max(f, prof, o.blocking_power_w, post.switch_latency_s,
                                               post.transfer_time_s, &allmax_added, NULL, &err);
        }
    }
    double t_plan = cli_now_s() - t0;
    size_t removed = 0;
    double t1 = cli_now_s();
    if (!st) {
        erg_frontier_dir_opts dopt;
        erg_frontier_dir_opts_init(&dopt);
        dopt.formats = what;
        dopt.source_profile = profile;
        dopt.switch_latency_s = post.switch_latency_s;
        dopt.transfer_time_s = post.transfer_time_s;
        dopt.lock_wait_s = lock_wait_s;
        dopt.progress = cli_progress_cb;
        dopt.progress_user = &pr;
        cli_progress_init(&pr, "writing ");
        st = erg_frontier_save_dir(f, prof, o.blocking_power_w, out, &dopt, &removed, &err);
        cli_progress_done(&pr);
    }
    size_t n = st ? 0 : erg_frontier_size(f);
    if (st) {
        erg_frontier_free(f);
        erg_dag_free(dag);
        erg_profile_free(prof);
        free(fitv);
        cli_sched_free(&cs);
        return cli_report(cmd, &err);
    }
    if (!quiet && erg_schedule_chunks(&o.schedule) * (long)S != 0 &&
        o.schedule.kind != ERG_SCHED_1F1B)
        printf("schedule %s: %ld ranks, %d pipeline stages, %ld microbatches\n",
               o.schedule.kind == ERG_SCHED_FILE ? cs.file : erg_schedule_name(o.schedule.kind), S,
               erg_dag_num_pipeline_stages(dag), M);
    if (!quiet)
        cli_sched_split_note(stdout, &cs, prof, S, M);
    if (!quiet && n) {
        erg_frontier_point a, b;
        erg_frontier_get(f, 0, &a, &err);
        erg_frontier_get(f, n - 1, &b, &err);
        size_t ol = strlen(out);
        while (ol > 1 && out[ol - 1] == '/')
            ol--;
        size_t nfiles;
        double bytes;
        cli_dir_usage(out, &nfiles, &bytes);
        printf("%zu plans in %.2f s (plus %.2f s writing %.3g MB in %zu files to %.*s/)\n", n,
               t_plan, cli_now_s() - t1, bytes / 1e6, nfiles, (int)ol, out);
        if (removed)
            printf("replaced %zu files of an earlier frontier in %.*s/\n", removed, (int)ol, out);
        printf("slowest plan:             %.6g s, %.6g J (planner estimate)\n"
               "fastest plan:             %.6g s, %.6g J (planner estimate)\n",
               a.time_s, a.energy_j, b.time_s, b.energy_j);
        printf("all-max clocks:           %.6g s, %.6g J (profiled values; the baseline)\n",
               em_max.time_s, em_max.energy_j);
        if (allmax_added && post.switch_latency_s > 0)
            printf("plan %zu is all-max clocks: every planned plan near the all-max time runs "
                   "slower than all-max clocks with the switch latency, so all-max clocks were "
                   "added as the fastest plan\n",
                   n - 1);
        else if (allmax_added)
            printf("plan %zu is all-max clocks: the planner's fastest plan runs slower than "
                   "all-max clocks by the profiled values (its times are quantised to %g s), so "
                   "all-max clocks were added as the fastest plan\n",
                   n - 1, o.unit_s);
        cli_baseline bl;
        cli_baseline_init(&bl);
        cli_baseline_set(&bl, prof, dag, o.blocking_power_w, &em_max);
        bl.switch_latency_s = post.switch_latency_s;
        bl.transfer_time_s = post.switch_latency_s > 0 ? post.transfer_time_s : 0;
        if (post.switch_latency_s > 0)
            printf("switch-aware at %g s per clock switch: %zu of %zu planned plans and their "
                   "variants (%zu) emulated, %zu on the frontier, %zu of them with merged "
                   "clocks (times and energies below and in frontier.csv are emulated with that "
                   "latency)\n",
                   post.switch_latency_s, sws.plans_evaluated, sws.plans_in, sws.candidates,
                   sws.plans_out, sws.plans_merged);
        const char *label[3] = {"minimum-energy plan", "at the all-max time", "within 1% slowdown"};
        const double limit[3] = {1e300, em_max.time_s, 1.01 * em_max.time_s};
        for (int i = 0; i < 3; i++) {
            size_t k;
            erg_emulation em;
            /* the same choice as `ergon choose --deadline` / `--slowdown 1.01` */
            if (cli_baseline_pick(&bl, f, limit[i], &k, &em, &err)) {
                printf("%-25s %s\n", label[i], err.msg);
                continue;
            }
            printf("%-25s plan %zu: %.6g s (%+.2f%%), %.6g J (%+.2f%% vs all-max; %s)\n", label[i],
                   k, em.time_s, 100 * (em.time_s / em_max.time_s - 1), em.energy_j,
                   100 * (em.energy_j / em_max.energy_j - 1),
                   post.switch_latency_s > 0 ? "emulated with the switch latency"
                                             : "profiled values");
            /* post-check with clock-switch latency and P2P transfers */
            erg_plan *p = NULL;
            erg_emulation ex, exm;
            post.blocking_power_w = o.blocking_power_w;
            if ((post.switch_latency_s > 0 || post.transfer_time_s > 0) &&
                !erg_frontier_plan(f, k, &p, &err) &&
                !erg_emulate_ex(prof, dag, p, &post, &ex, NULL, NULL, &err) &&
                !erg_plan_all_max(prof, (int)S, (int)M, &o.schedule, o.blocking_power_w, &allmax,
                                  &err)) {
                if (!erg_emulate_ex(prof, dag, allmax, &post, &exm, NULL, NULL, &err))
                    printf("%-25s   true time with switch latency %g s and transfer %g s: "
                           "%.6g s (%+.2f%% vs all-max %.6g s), %.6g J (%+.2f%%); %d clock "
                           "switches\n",
                           "", post.switch_latency_s, post.transfer_time_s, ex.time_s,
                           100 * (ex.time_s / exm.time_s - 1), exm.time_s, ex.energy_j,
                           100 * (ex.energy_j / exm.energy_j - 1), ex.num_switches);
                erg_plan_free(allmax);
                allmax = NULL;
            }
            erg_plan_free(p);
        }
    }
    if (n == 1 && !quiet)
        printf("one plan only: the pipeline cannot be made faster than its slowest state (a "
               "profile whose clocks do not differ in time, or a --unit-time of %g s coarser "
               "than the clock steps)\n",
               o.unit_s);
    erg_frontier_free(f);
    erg_dag_free(dag);
    erg_profile_free(prof);
    free(fitv);
    cli_sched_free(&cs);
    if (n == 0) { /* the planner always emits the slowest plan; never exit 0 with none */
        fprintf(stderr,
                "ergon %s: no plan: the pipeline cannot be made faster than its slowest "
                "state\n",
                cmd);
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
