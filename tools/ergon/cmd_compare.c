/* cmd_compare.c: `ergon compare`: every planning method on one profile, side by side. */
#include "cli.h"
#include "envpipe_common.h"

#include "ergon/emulate.h"
#include "ergon/planner.h"
#include "ergon/baselines.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_help compare_help = {
    "usage: ergon compare --profile P --microbatches M (--gpu G | --blocking-power W)\n"
    "                     [--stages S] [--format text|csv|json] [-o FILE] [options]\n",
    "Plan one pipeline with every method and print one table. Every plan is evaluated\n"
    "the same way: profiled time and energy of each instruction, the longest path as the\n"
    "iteration time, idle time at blocking power (docs/envpipe.md, also in "
    "/usr/share/doc/ergon).\n\n"
    "methods (rows):\n"
    "  all-max                    every instruction at the stage's highest clock (1F1B)\n"
    "  envpipe                    EnvPipe: envelope, ours schedule, balanced reconfig\n"
    "  envpipe-greedy             the same with greedy reconfiguration\n"
    "  envpipe-perseus-emulation  Perseus's emulation of EnvPipe (unit 0.1 ms)\n"
    "  zeus-global                one clock for every GPU (Zeus cost, eta 0.5)\n"
    "  zeus-stage                 one clock per stage (Zeus cost)\n"
    "  uniform                    every stage at its energy-valley clock\n"
    "  perseus                    the Perseus frontier (1F1B) at the all-max time\n"
    "  perseus-ours               the Perseus frontier on EnvPipe's ours schedule at the\n"
    "                             all-max time (a method no published system has)\n\n"
    "columns: time_s, energy_j, saving_pct (energy saved vs all-max), slowdown_pct\n"
    "(time vs all-max), then the Perseus frontier read at the same iteration time as the\n"
    "method: the plan Perseus picks for that deadline (least estimated energy among plans\n"
    "whose estimated time fits), evaluated like every row: perseus_energy_j,\n"
    "perseus_saving_pct, and the same for the ours-schedule frontier: ours_energy_j,\n"
    "ours_saving_pct ('-' when the frontier has no plan that fast). The planner rounds\n"
    "times down to --unit-time, so a picked plan's evaluated time can be slightly longer\n"
    "than the deadline; the perseus rows show it.\n",
    "exit status: 0 success, 1 bad input, 2 usage error.\n"};

#define MAX_ROWS 20

typedef struct row {
    char method[48];
    double t, e;
    double fe, fo; /* frontier energies at the same time (NAN = none) */
    double tt, te; /* with --switch-latency/--transfer-time (NAN = not asked) */
} row;

/* The row's plan evaluated with the fidelity options (switch latency, transfer). */
static erg_status eval_true(const erg_profile *p, const erg_plan *plan, const erg_emulate_opts *fo,
                            row *r, erg_error *err)
{
    r->tt = r->te = NAN;
    if (!fo)
        return ERG_OK;
    erg_schedule ps = erg_plan_schedule(plan);
    erg_dag *dag = NULL;
    erg_emulation em;
    erg_status st =
        erg_dag_new(&ps, erg_plan_num_stages(plan), erg_plan_num_microbatches(plan), &dag, err);
    if (!st)
        st = erg_emulate_ex(p, dag, plan, fo, &em, NULL, NULL, err);
    erg_dag_free(dag);
    if (!st) {
        r->tt = em.time_s;
        r->te = em.energy_j;
    }
    return st;
}

/* A frontier with every plan evaluated with the profile. */
typedef struct evfront {
    erg_frontier *f;
    size_t n;
    double *t, *e;
} evfront;

static int eval_frontier(const char *cmd, const erg_profile *p, int S, int M, double power_w,
                         double unit_s, uint64_t max_plans, const erg_schedule *sched,
                         const char *dir, evfront *out)
{
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    o.blocking_power_w = power_w;
    o.unit_s = unit_s;
    o.max_plans = max_plans;
    o.schedule = *sched;
    cli_progress prog;
    cli_progress_init(&prog, sched->kind == ERG_SCHED_1F1B ? "frontier 1f1b" : "frontier ours");
    o.progress = cli_progress_cb;
    o.progress_user = &prog;
    erg_frontier *f = NULL;
    erg_error err = {0};
    erg_dag *dag = NULL;
    int rc = CLI_OK;
    if (erg_plan_perseus(p, S, M, &o, &f, &err) || erg_dag_new(sched, S, M, &dag, &err)) {
        cli_progress_done(&prog);
        erg_frontier_free(f);
        fprintf(stderr,
                "ergon %s: the Perseus frontier on %s failed: %s\n(use --no-frontier to "
                "compare the other methods%s)\n",
                cmd, erg_schedule_name(sched->kind), err.msg,
                strstr(err.msg, "more than the limit of")
                    ? "; or a larger --unit-time, or --max-plans N / --force"
                    : "");
        return CLI_USER_ERROR;
    }
    cli_progress_done(&prog);
    /* as `plan perseus`: the frontier always holds a plan no slower than all-max clocks */
    {
        erg_plan *am = NULL;
        erg_emulation em_max;
        erg_frontier_baseline bl;
        erg_frontier_baseline_init(&bl);
        erg_status st = erg_plan_all_max(p, S, M, sched, power_w, &am, &err);
        if (!st)
            st = erg_emulate(p, dag, am, power_w, &em_max, NULL, NULL, &err);
        if (!st) {
            bl.have = true;
            bl.prof = (erg_profile *)p;
            bl.dag = dag;
            bl.power_w = power_w;
            bl.all_max = em_max;
            st = erg_frontier_baseline_complete(&bl, f, am, NULL, &err);
        }
        erg_plan_free(am);
        if (st) {
            rc = cli_report(cmd, &err);
            goto done;
        }
    }
    if (dir && erg_frontier_write_dir(f, dir, ERG_FRONTIER_CSV, NULL, NULL, &err)) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    out->n = erg_frontier_size(f);
    out->t = calloc(out->n ? out->n : 1, sizeof(double));
    out->e = calloc(out->n ? out->n : 1, sizeof(double));
    if (!out->t || !out->e) {
        fprintf(stderr, "ergon %s: out of memory\n", cmd);
        rc = CLI_USER_ERROR;
        goto done;
    }
    for (size_t i = 0; i < out->n; i++) {
        erg_plan *plan = NULL;
        erg_emulation em;
        if (erg_frontier_plan(f, i, &plan, &err) ||
            erg_emulate(p, dag, plan, power_w, &em, NULL, NULL, &err)) {
            erg_plan_free(plan);
            rc = cli_report(cmd, &err);
            goto done;
        }
        out->t[i] = em.time_s;
        out->e[i] = em.energy_j;
        erg_plan_free(plan);
    }
done:
    erg_dag_free(dag);
    if (rc)
        erg_frontier_free(f);
    else
        out->f = f;
    return rc;
}

/* Plan k's profiled values, from the evaluated frontier. */
static erg_status front_eval(void *user, size_t k, erg_emulation *em, erg_error *err)
{
    const evfront *f = user;
    (void)err;
    memset(em, 0, sizeof *em);
    em->time_s = f->t[k];
    em->energy_j = f->e[k];
    return ERG_OK;
}

/* The plan Perseus picks for deadline t: erg_frontier_pick, the one selection that `choose`,
 * `plan perseus`'s summary and the server's Frontier scheduler make (the planner's choice,
 * then faster plans until the profiled time fits); -1 when no plan is that fast. */
static long front_pick(const evfront *f, double t)
{
    size_t idx;
    erg_emulation em;
    if (!f->f || erg_frontier_pick(f->f, t, front_eval, (void *)f, &idx, &em, NULL) != ERG_OK)
        return -1;
    return (long)idx;
}

static double front_at(const evfront *f, double t)
{
    long i = front_pick(f, t);
    return i < 0 ? NAN : f->e[i];
}

static void fmt_num(char *buf, size_t size, double v, int dec)
{
    if (isnan(v))
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, "%.*f", dec, v);
}

/* A JSON string literal (quotes, backslashes and control characters escaped). */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void print_table(FILE *f, const char *fmt, const row *r, int n, const ecli_setup *s,
                        bool frontier, double split, const erg_emulate_opts *fo)
{
    double t0 = r[0].t, e0 = r[0].e;
    double tt0 = r[0].tt, te0 = r[0].te;
    if (!strcmp(fmt, "json")) {
        fprintf(f, "{\"profile\": ");
        json_str(f, s->profile_path);
        if (split > 0)
            fprintf(f, ", \"backward_split\": %.17g", split);
        fprintf(f,
                ", \"num_stages\": %ld, \"num_microbatches\": %ld, "
                "\"blocking_power_w\": %.17g, \"methods\": [\n",
                s->S, s->M, s->power_w);
        for (int i = 0; i < n; i++) {
            fprintf(f,
                    "  {\"method\": \"%s\", \"time_s\": %.17g, \"energy_j\": %.17g, "
                    "\"saving_pct\": %.17g, \"slowdown_pct\": %.17g",
                    r[i].method, r[i].t, r[i].e, 100 * (1 - r[i].e / e0), 100 * (r[i].t / t0 - 1));
            if (frontier) {
                if (isnan(r[i].fe))
                    fprintf(f, ", \"perseus_energy_j\": null, \"perseus_saving_pct\": null");
                else
                    fprintf(f, ", \"perseus_energy_j\": %.17g, \"perseus_saving_pct\": %.17g",
                            r[i].fe, 100 * (1 - r[i].fe / e0));
                if (isnan(r[i].fo))
                    fprintf(f, ", \"ours_energy_j\": null, \"ours_saving_pct\": null");
                else
                    fprintf(f, ", \"ours_energy_j\": %.17g, \"ours_saving_pct\": %.17g", r[i].fo,
                            100 * (1 - r[i].fo / e0));
            }
            if (fo)
                fprintf(f,
                        ", \"true_time_s\": %.17g, \"true_energy_j\": %.17g, "
                        "\"true_saving_pct\": %.17g, \"true_slowdown_pct\": %.17g",
                        r[i].tt, r[i].te, 100 * (1 - r[i].te / te0), 100 * (r[i].tt / tt0 - 1));
            fprintf(f, "}%s\n", i + 1 < n ? "," : "");
        }
        fprintf(f, "]");
        if (fo)
            fprintf(f, ", \"switch_latency_s\": %.17g, \"transfer_time_s\": %.17g",
                    fo->switch_latency_s, erg_emulate_opts_transfer_s(fo));
        fprintf(f, "}\n");
        return;
    }
    bool csv = !strcmp(fmt, "csv");
    if (csv)
        fprintf(f, "method,time_s,energy_j,saving_pct,slowdown_pct%s%s,blocking_power_w\n",
                frontier ? ",perseus_energy_j,perseus_saving_pct,ours_energy_j,ours_saving_pct"
                         : "",
                fo ? ",true_time_s,true_energy_j,true_saving_pct,true_slowdown_pct" : "");
    else {
        fprintf(f, "profile %s, S=%ld, M=%ld, blocking power %g W\n", s->profile_path, s->S, s->M,
                s->power_w);
        fprintf(f, "%-26s %10s %13s %8s %9s", "method", "time_s", "energy_j", "saving%",
                "slowdown%");
        if (frontier)
            fprintf(f, " %13s %8s %13s %8s", "perseus_j", "saving%", "ours_j", "saving%");
        if (fo)
            fprintf(f, " %10s %8s %9s", "true_s", "tsaving%", "tslowdn%");
        fprintf(f, "\n");
    }
    for (int i = 0; i < n; i++) {
        char a[32], b[32], c[32], d[32];
        double sv = 100 * (1 - r[i].e / e0), sl = 100 * (r[i].t / t0 - 1);
        fmt_num(a, sizeof a, r[i].fe, csv ? 6 : 1);
        fmt_num(b, sizeof b, 100 * (1 - r[i].fe / e0), 2);
        fmt_num(c, sizeof c, r[i].fo, csv ? 6 : 1);
        fmt_num(d, sizeof d, 100 * (1 - r[i].fo / e0), 2);
        if (csv) {
            fprintf(f, "%s,%.6f,%.6f,%.4f,%.4f", r[i].method, r[i].t, r[i].e, sv, sl);
            if (frontier)
                fprintf(f, ",%s,%s,%s,%s", isnan(r[i].fe) ? "" : a, isnan(r[i].fe) ? "" : b,
                        isnan(r[i].fo) ? "" : c, isnan(r[i].fo) ? "" : d);
            fprintf(f, ",%.17g", s->power_w);
        } else {
            fprintf(f, "%-26s %10.4f %13.1f %8.2f %9.2f", r[i].method, r[i].t, r[i].e, sv, sl);
            if (frontier)
                fprintf(f, " %13s %8s %13s %8s", a, b, c, d);
        }
        if (fo) {
            double tsv = 100 * (1 - r[i].te / te0), tsl = 100 * (r[i].tt / tt0 - 1);
            if (csv)
                fprintf(f, ",%.6f,%.6f,%.4f,%.4f", r[i].tt, r[i].te, tsv, tsl);
            else
                fprintf(f, " %10.4f %8.2f %9.2f", r[i].tt, tsv, tsl);
        }
        fprintf(f, "\n");
    }
    if (fo && !csv)
        fprintf(f,
                "true_*: every plan re-evaluated with a clock-switch latency of %g s and %g s "
                "per cross-stage transfer (ergon emulate --help); savings against all-max "
                "evaluated the same way\n",
                fo->switch_latency_s, erg_emulate_opts_transfer_s(fo));
}

/* What `ergon compare` was given. */
typedef struct compare_args {
    ecli_setup s;
    cli_sched cs;
    bool other; /* --schedule or --schedule-file: a schedule besides 1F1B and ours */
    double unit_s;
    long max_plans;
    bool frontier, ablation, fidelity, no_frontier, force;
    erg_emulate_opts fo;
    const char *fdir, *format, *out;
} compare_args;

static int latency_opt(const char *cmd, const char *value, void *user)
{
    compare_args *ca = user;
    ca->fidelity = true;
    return cli_parse_latency(cmd, value, &ca->fo.switch_latency_s) ? CLI_OK : CLI_USAGE;
}

static int transfer_opt(const char *cmd, const char *value, void *user)
{
    compare_args *ca = user;
    ca->fidelity = true;
    return cli_parse_double(cmd, "--transfer-time", value, 0, 1e6, &ca->fo.transfer_time_s)
               ? CLI_OK
               : CLI_USAGE;
}

static int format_opt(const char *cmd, const char *value, void *format)
{
    if (strcmp(value, "text") && strcmp(value, "csv") && strcmp(value, "json"))
        return cli_usage_error(cmd, "--format expects text, csv or json, got '%s'", value);
    *(const char **)format = value;
    return CLI_OK;
}

static int compare_parse(const char *cmd, compare_args *ca, int argc, char **argv)
{
    ecli_setup *s = &ca->s;
    s->power_w = -1;
    const cli_opt opts[] = {
        CLI_OPT_S("profile", "P", &s->profile_path, "stage profile CSV"),
        CLI_OPT_STAGES(&s->S, "pipeline stages (default: all of the profile's)"),
        CLI_OPT_L("microbatches", "M", &s->M, 1, 100000, "microbatches per iteration"),
        CLI_OPT_S("gpu", "NAME", &s->gpu,
                  "blocking power (A40, A100) and clock-table row (see 'ergon plan\n"
                  "envpipe --help')"),
        CLI_OPT_D("blocking-power", "W", &s->power_w, 0, 1e5, "power while idle or blocked"),
        CLI_OPT_S("gpu-table", "FILE", &s->gpu_table, "GPU clock table (default data/gpus.csv)"),
        CLI_OPT_D("unit-time", "S", &ca->unit_s, 1e-6, 10,
                  "Perseus frontier quantisation unit (default 0.001 s)"),
        CLI_OPT_L("max-plans", "N", &ca->max_plans, 0, 1000000000000L,
                  "refuse a frontier of more than N plans (estimated before\n"
                  "planning; default 200000)"),
        CLI_OPT_B("force", &ca->force, "no plan limit (as --max-plans 0)"),
        CLI_OPT_B("no-frontier", &ca->no_frontier, "skip the Perseus frontiers (fast)"),
        CLI_OPT_B("ablation", &ca->ablation,
                  "add EnvPipe's ablation rows (its Figure 10):\n"
                  "envpipe-uniform-1f1b (uniform, 1f1b, default) and\n"
                  "envpipe-no-reconfig (envelope, ours, default)"),
        CLI_OPT_S("frontier-dir", "DIR", &ca->fdir,
                  "also write both frontiers as DIR/1f1b/ and DIR/ours/ (CSV)"),
        CLI_OPT_CALL("schedule", "NAME", cli_sched_opt_name, &ca->cs,
                     "also plan another schedule (docs/schedules.md) and add its\n"
                     "rows: all-max-NAME, zeus-global-NAME, zeus-stage-NAME,\n"
                     "uniform-NAME and perseus-NAME (its frontier at the 1F1B\n"
                     "all-max time); saving and slowdown stay relative to 1F1B\n"
                     "all-max"),
        CLI_SCHED_OPTS_NO_NAME(&ca->cs),
        CLI_OPT_CALL("switch-latency", "S", latency_opt, ca,
                     "also evaluate every row's plan with a clock-switch latency\n"
                     "of S seconds ('default' = the published figure, see\n"
                     "ergon emulate --help): columns true_s, tsaving%, tslowdn%\n"
                     "(true_time_s, true_energy_j, true_saving_pct,\n"
                     "true_slowdown_pct in csv/json), against all-max evaluated\n"
                     "the same way"),
        CLI_OPT_CALL("transfer-time", "S", transfer_opt, ca,
                     "the same with S seconds on every cross-stage transfer"),
        CLI_OPT_CALL("format", "F", format_opt, &ca->format, "text (default), csv or json"),
        {.name = "out",
         .short_name = 'o',
         .kind = CLI_OPT_STR,
         .arg = "FILE",
         .dest = &ca->out,
         .help = "write the table to FILE instead of stdout"},
        CLI_OPTS_END,
    };
    int rc = cli_opts_parse_all(cmd, argc, argv, opts, &compare_help);
    if (rc)
        return rc;
    s->have_power = s->power_w >= 0;
    if (!s->have_power)
        s->power_w = 0;
    if (ca->force)
        ca->max_plans = 0;
    ca->frontier = !ca->no_frontier;
    ca->other = ca->cs.name_set || ca->cs.file;
    if (ca->fdir && !ca->frontier)
        return cli_usage_error(cmd, "--frontier-dir and --no-frontier contradict each other");
    return cli_sched_finish(cmd, &ca->cs, &s->S, &s->M);
}

/* The Perseus frontiers (1F1B, ours, the other schedule): each row's frontier energies at its
 * time, and the plans Perseus picks for the all-max time as rows. */
static int frontier_rows(const char *cmd, const ecli_setup *s, const compare_args *ca,
                         const cli_sched *cs, const erg_schedule *ours, const char *oname,
                         const erg_emulate_opts *fop, row *r, int *np)
{
    int S = (int)s->S, M = (int)s->M, n = *np, rc = CLI_OK;
    erg_error err = {0};
    evfront f1 = {0}, fo_ = {0};
    erg_schedule one = {.kind = ERG_SCHED_1F1B};
    char d1[4096], d2[4096];
    if (ca->fdir) {
        snprintf(d1, sizeof d1, "%s/1f1b", ca->fdir);
        snprintf(d2, sizeof d2, "%s/ours", ca->fdir);
    }
    rc = eval_frontier(cmd, s->profile, S, M, s->power_w, ca->unit_s, (uint64_t)ca->max_plans, &one,
                       ca->fdir ? d1 : NULL, &f1);
    if (!rc && M >= S)
        rc = eval_frontier(cmd, s->profile, S, M, s->power_w, ca->unit_s, (uint64_t)ca->max_plans,
                           ours, ca->fdir ? d2 : NULL, &fo_);
    evfront fx = {0};
    if (!rc && ca->other) {
        char d3[4096];
        if (ca->fdir)
            snprintf(d3, sizeof d3, "%s/%s", ca->fdir, oname);
        rc = eval_frontier(cmd, s->profile, S, M, s->power_w, ca->unit_s, (uint64_t)ca->max_plans,
                           &cs->sched, ca->fdir ? d3 : NULL, &fx);
    }
    if (!rc) {
        for (int i = 0; i < n; i++) {
            r[i].fe = front_at(&f1, r[i].t);
            r[i].fo = front_at(&fo_, r[i].t);
        }
        /* the plans Perseus picks for the all-max time, as rows */
        for (int k = 0; k < 2; k++) {
            const evfront *ef = k ? &fo_ : &f1;
            long i = front_pick(ef, r[0].t);
            if (i < 0)
                continue;
            snprintf(r[n].method, sizeof r[n].method, k ? "perseus-ours" : "perseus");
            r[n].t = ef->t[i];
            r[n].e = ef->e[i];
            r[n].fe = front_at(&f1, r[0].t);
            r[n].fo = front_at(&fo_, r[0].t);
            r[n].tt = r[n].te = NAN;
            if (fop) {
                erg_plan *fp = NULL;
                if (erg_frontier_plan(ef->f, (size_t)i, &fp, &err) ||
                    eval_true(s->profile, fp, fop, &r[n], &err)) {
                    erg_plan_free(fp);
                    rc = cli_report(cmd, &err);
                    break;
                }
                erg_plan_free(fp);
            }
            n++;
        }
        long i = ca->other ? front_pick(&fx, r[0].t) : -1;
        if (i >= 0) {
            snprintf(r[n].method, sizeof r[n].method, "perseus-%s", oname);
            r[n].t = fx.t[i];
            r[n].e = fx.e[i];
            r[n].fe = front_at(&f1, r[0].t);
            r[n].fo = front_at(&fo_, r[0].t);
            r[n].tt = r[n].te = NAN;
            if (fop) {
                erg_plan *fp = NULL;
                if (erg_frontier_plan(fx.f, (size_t)i, &fp, &err) ||
                    eval_true(s->profile, fp, fop, &r[n], &err)) {
                    erg_plan_free(fp);
                    rc = cli_report(cmd, &err);
                }
                erg_plan_free(fp);
            }
            n++;
        }
    }
    free(fx.t);
    free(fx.e);
    erg_frontier_free(fx.f);
    free(f1.t);
    free(f1.e);
    free(fo_.t);
    free(fo_.e);
    erg_frontier_free(f1.f);
    erg_frontier_free(fo_.f);
    *np = n;
    return rc;
}

/* The table (--format) on stdout or in --out FILE, and the notes under it. */
static int compare_report(const compare_args *ca, const row *r, int n, const ecli_setup *s,
                          const cli_sched *cs, const erg_envpipe_info *info,
                          const erg_emulate_opts *fop)
{
    const char *format = ca->format, *out = ca->out;
    bool frontier = ca->frontier, other = ca->other;
    int S = (int)s->S, M = (int)s->M;
    FILE *f = stdout;
    if (out && !(f = fopen(out, "w"))) {
        fprintf(stderr, "ergon compare: cannot write %s\n", out);
        return CLI_USER_ERROR;
    }
    print_table(f, format, r, n, s, frontier,
                other && cli_sched_split_used(cs, s->profile, S, M)
                    ? erg_schedule_backward_split(&cs->sched)
                    : 0,
                fop);
    if (!strcmp(format, "text") && M >= S) {
        fprintf(f, "EnvPipe ours schedule: extra warm-up forwards r =");
        for (int st = 0; st < S; st++)
            fprintf(f, " %d", info->extra_warmup[st]);
        fprintf(f, "\n");
    }
    if (!strcmp(format, "text") && other)
        cli_sched_split_note(f, cs, s->profile, S, M);
    if (out)
        fclose(f);
    return CLI_OK;
}

int cmd_compare(int argc, char **argv)
{
    const char *cmd = "compare";
    compare_args ca = {
        .unit_s = 0.001, .max_plans = CLI_DEFAULT_MAX_PLANS, .frontier = true, .format = "text"};
    cli_sched_init(&ca.cs);
    erg_emulate_opts_init(&ca.fo);
    int prc = compare_parse(cmd, &ca, argc, argv);
    if (prc) {
        cli_sched_free(&ca.cs);
        return prc == CLI_HELP ? CLI_OK : prc;
    }
    ecli_setup s = ca.s;
    cli_sched cs = ca.cs;
    bool other = ca.other, frontier = ca.frontier, ablation = ca.ablation, fidelity = ca.fidelity;
    erg_emulate_opts fo = ca.fo;
    int rc = ecli_setup_load(cmd, &s, true);
    if (rc) {
        ecli_setup_free(&s);
        cli_sched_free(&cs);
        return rc;
    }
    const char *oname = cs.sched.kind == ERG_SCHED_FILE ? "file" : erg_schedule_name(cs.sched.kind);
    int S = (int)s.S, M = (int)s.M;
    fo.blocking_power_w = s.power_w;
    const erg_emulate_opts *fop = fidelity ? &fo : NULL;
    row r[MAX_ROWS];
    int n = 0;
    erg_error err = {0};
    erg_plan *plan = NULL;
    erg_envpipe_info info;
    memset(&info, 0, sizeof info);
    erg_schedule ours = {.kind = ERG_SCHED_ENVPIPE};
    /* all-max */
    if (erg_plan_all_max(s.profile, S, M, NULL, s.power_w, &plan, &err))
        goto fail;
    snprintf(r[n].method, sizeof r[n].method, "all-max");
    erg_plan_estimate(plan, &r[n].t, &r[n].e);
    if (eval_true(s.profile, plan, fop, &r[n], &err))
        goto fail;
    n++;
    erg_plan_free(plan);
    plan = NULL;
    /* EnvPipe: balanced, greedy (real), Perseus's emulation; with --ablation
     * also EnvPipe's Figure 10 steps: uniform/1f1b and envelope/ours/default */
    for (int k = 0; k < (ablation ? 5 : 3); k++) {
        erg_envpipe_opts eo;
        erg_envpipe_opts_init(&eo);
        eo.blocking_power_w = s.power_w;
        eo.gpu = s.spec;
        if (k == 1)
            eo.reconfig = ERG_RECONFIG_GREEDY;
        if (k == 2) {
            eo.variant = ERG_ENVPIPE_PERSEUS_EMULATION;
            eo.schedule = ERG_SCHED_1F1B;
            eo.unit_s = 0.0001;
        }
        if (k == 3) {
            eo.type = ERG_ENVPIPE_UNIFORM;
            eo.schedule = ERG_SCHED_1F1B;
            eo.reconfig = ERG_RECONFIG_DEFAULT;
        }
        if (k == 4)
            eo.reconfig = ERG_RECONFIG_DEFAULT;
        if (M < S && eo.schedule == ERG_SCHED_ENVPIPE)
            continue; /* ours needs M >= S */
        erg_envpipe_info ki;
        if (erg_plan_envpipe(s.profile, S, M, &eo, &plan, &ki, &err))
            goto fail;
        if (k == 0) {
            info = ki;
            for (int st = 0; st < S; st++)
                ours.extra_warmup[st] = ki.extra_warmup[st];
        }
        static const char *const enames[] = {"envpipe", "envpipe-greedy",
                                             "envpipe-perseus-emulation", "envpipe-uniform-1f1b",
                                             "envpipe-no-reconfig"};
        snprintf(r[n].method, sizeof r[n].method, "%s", enames[k]);
        erg_plan_estimate(plan, &r[n].t, &r[n].e);
        if (eval_true(s.profile, plan, fop, &r[n], &err))
            goto fail;
        n++;
        erg_plan_free(plan);
        plan = NULL;
    }
    static const char *const bnames[] = {"zeus-global", "zeus-stage", "uniform"};
    erg_status (*const bfn[])(const erg_profile *, int, int, const erg_baseline_opts *, erg_plan **,
                              erg_error *) = {erg_plan_zeus_global, erg_plan_zeus_stage,
                                              erg_plan_uniform};
    for (int k = 0; k < 3; k++) {
        erg_baseline_opts bo;
        erg_baseline_opts_init(&bo);
        bo.blocking_power_w = s.power_w;
        bo.gpu = s.spec;
        if (bfn[k](s.profile, S, M, &bo, &plan, &err))
            goto fail;
        snprintf(r[n].method, sizeof r[n].method, "%s", bnames[k]);
        erg_plan_estimate(plan, &r[n].t, &r[n].e);
        if (eval_true(s.profile, plan, fop, &r[n], &err))
            goto fail;
        n++;
        erg_plan_free(plan);
        plan = NULL;
    }
    /* the other schedule: all-max and the baselines on it */
    for (int k = 0; other && k < 4; k++) {
        erg_baseline_opts bo;
        erg_baseline_opts_init(&bo);
        bo.blocking_power_w = s.power_w;
        bo.gpu = s.spec;
        bo.schedule = cs.sched;
        erg_status bst = k == 0
                             ? erg_plan_all_max(s.profile, S, M, &cs.sched, s.power_w, &plan, &err)
                             : bfn[k - 1](s.profile, S, M, &bo, &plan, &err);
        if (bst)
            goto fail;
        snprintf(r[n].method, sizeof r[n].method, "%s-%s", k ? bnames[k - 1] : "all-max", oname);
        erg_plan_estimate(plan, &r[n].t, &r[n].e);
        if (eval_true(s.profile, plan, fop, &r[n], &err))
            goto fail;
        n++;
        erg_plan_free(plan);
        plan = NULL;
    }
    for (int i = 0; i < n; i++)
        r[i].fe = r[i].fo = NAN;
    if (frontier && (rc = frontier_rows(cmd, &s, &ca, &cs, &ours, oname, fop, r, &n))) {
        ecli_setup_free(&s);
        cli_sched_free(&cs);
        return rc;
    }
    rc = compare_report(&ca, r, n, &s, &cs, &info, fop);
    ecli_setup_free(&s);
    cli_sched_free(&cs);
    return rc;
fail:
    erg_plan_free(plan);
    ecli_setup_free(&s);
    cli_sched_free(&cs);
    return cli_report(cmd, &err);
}
