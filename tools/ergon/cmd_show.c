/* cmd_show.c: `ergon show plan|frontier|power`: pictures of a plan's timeline, of time-energy
 * frontiers and of a plan's power over an iteration. */
#include "cli.h"
#include "envpipe_common.h"

#include "ergon/emulate.h"
#include "ergon/planner.h"
#include "ergon/plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void show_help(FILE *f)
{
    fprintf(
        f,
        "usage: ergon show plan --profile P --plan FILE (--gpu G | --blocking-power W)\n"
        "                       [--color clock|power] [--schedule S | --schedule-file F]\n"
        "                       [--chunks V] [--backward-split X] -o OUT\n"
        "       ergon show frontier [--frontier CSV_OR_DIR]... [--compare CSV] -o OUT\n"
        "       ergon show power --profile P --plan FILE (--gpu G | --blocking-power W) -o OUT\n\n"
        "Draw pictures with cairo; the format follows OUT's extension: .png, .svg or .pdf.\n\n"
        "show plan: the plan's pipeline timeline, emulated with the profile's times: one row\n"
        "  per stage (rank), each instruction a box labelled F<m>/B<m> (for multi-chunk and\n"
        "  zero-bubble schedules PyTorch's action names: <stage>F<m>, <stage>I<m>,\n"
        "  <stage>W<m>, an overlapped F and B as sF<m>;sB<n>) and coloured by SM clock\n"
        "  (or average power with --color power), idle time grey, the critical path as a\n"
        "  dark line, a time axis and a colour legend.\n"
        "  --plan FILE          ergon plan JSON or freqs_pipeline_%%05d.py file\n"
        "  --schedule S         schedule of a .py plan (1f1b default; any of 'ergon schedule')\n"
        "  --schedule-file F    the torch compute_only CSV of a .py plan's schedule\n"
        "  --chunks V           chunks per rank of a .py plan's schedule\n"
        "  --backward-split X   I/W share of backward where the profile has no I/W rows\n"
        "  --profile P          the stage profile the plan is evaluated with\n"
        "  --gpu NAME           A40 or A100: their blocking power, or\n"
        "  --blocking-power W   power while idle or blocked\n"
        "  --force              draw a plan that records another profile, blocking power or\n"
        "                       schedule than these (refused otherwise, naming both)\n\n"
        "show power: the plan's power over one iteration (docs/fleet.md): the job's power\n"
        "  and the parts its computing and its waiting GPUs draw, as steps over the\n"
        "  iteration, the average dashed; the options of show plan (but --color).\n\n"
        "show frontier: iteration time against energy.\n"
        "  --frontier X         a frontier.csv (time,energy per plan) or a directory holding\n"
        "                       one; drawn as a line through its non-dominated plans (the\n"
        "                       dominated ones dashed); repeat for several, optionally NAME=X\n"
        "  --compare CSV        the CSV of 'ergon compare --format csv': every method as a\n"
        "                       marked point (columns method,time_s,energy_j); refused\n"
        "                       (exit 1) when its blocking_power_w differs from a frontier\n"
        "                       directory's (frontier-info.csv)\n"
        "  A frontier directory with its profile (plan perseus) is drawn from the plans'\n"
        "  profiled values, titled with ranks, microbatches, schedule and blocking power;\n"
        "  a bare frontier.csv from the planner's estimates, labelled so.\n"
        "  --point NAME=T,E     one more marked point (repeatable)\n\n"
        "common:\n"
        "  -o, --out OUT        the picture to write (.png, .svg, .pdf)\n"
        "  --title TEXT         picture title\n"
        "  --width PX           width in pixels/points (default 1200 plan, 1000 frontier)\n"
        "  -h, --help           this help\n"
        "\nexit status: 0 success, 1 bad input, 2 usage error.\n");
}

/* A growable list of points read from a CSV file with two named columns. */
typedef struct pts {
    erg_plot_point *v;
    size_t n, cap;
    char **names; /* per point (compare CSV), may be NULL */
} pts;

static bool pts_add(pts *p, double t, double e, const char *name)
{
    if (p->n == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 64;
        erg_plot_point *nv = realloc(p->v, nc * sizeof *nv);
        char **nn = realloc(p->names, nc * sizeof *nn);
        if (!nv || !nn) {
            free(nv ? nv : p->v);
            free(nn ? nn : p->names);
            p->v = NULL;
            p->names = NULL;
            return false;
        }
        p->v = nv;
        p->names = nn;
        p->cap = nc;
    }
    p->v[p->n] = (erg_plot_point){t, e};
    p->names[p->n] = name ? strdup(name) : NULL;
    p->n++;
    return true;
}

static void pts_free(pts *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->names[i]);
    free(p->v);
    free(p->names);
}

static int split_csv(char *line, char **f, int max)
{
    int n = 0;
    char *s = line;
    for (;;) {
        char *c = strchr(s, ',');
        if (c)
            *c = '\0';
        while (*s == ' ')
            s++;
        size_t l = strlen(s);
        while (l && (s[l - 1] == ' ' || s[l - 1] == '\r' || s[l - 1] == '\n'))
            s[--l] = '\0';
        if (n < max)
            f[n++] = s;
        if (!c)
            break;
        s = c + 1;
    }
    return n;
}

static bool parse_num(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v))
        return false;
    *out = v;
    return true;
}

/* Read columns tcol/ecol (and an optional name column) of a CSV. */
static int read_points(const char *path, const char *tcol, const char *ecol, const char *ncol,
                       pts *out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "ergon show: cannot open %s: %s\n", path, strerror(errno));
        return CLI_USER_ERROR;
    }
    char line[4096];
    char *fl[64];
    int ti = -1, ei = -1, ni = -1, nf = 0;
    long ln = 0;
    int rc = CLI_OK;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (line[0] == '\n' || line[0] == '\r' || line[0] == '#')
            continue;
        int n = split_csv(line, fl, 64);
        if (ti < 0) {
            nf = n;
            for (int i = 0; i < n; i++) {
                if (!strcmp(fl[i], tcol))
                    ti = i;
                if (!strcmp(fl[i], ecol))
                    ei = i;
                if (ncol && !strcmp(fl[i], ncol))
                    ni = i;
            }
            if (ti < 0 || ei < 0 || (ncol && ni < 0)) {
                fprintf(stderr, "ergon show: %s:%ld: the header needs columns %s,%s%s%s\n", path,
                        ln, tcol, ecol, ncol ? "," : "", ncol ? ncol : "");
                rc = CLI_USER_ERROR;
                break;
            }
            continue;
        }
        double t, e;
        if (n != nf || !parse_num(fl[ti], &t) || !parse_num(fl[ei], &e)) {
            fprintf(stderr, "ergon show: %s:%ld: expected %d fields with numeric %s and %s\n", path,
                    ln, nf, tcol, ecol);
            rc = CLI_USER_ERROR;
            break;
        }
        if (!pts_add(out, t, e, ni >= 0 ? fl[ni] : NULL)) {
            fprintf(stderr, "ergon show: out of memory\n");
            rc = CLI_USER_ERROR;
            break;
        }
    }
    if (rc == CLI_OK && ti < 0) {
        fprintf(stderr, "ergon show: %s is empty\n", path);
        rc = CLI_USER_ERROR;
    }
    if (rc == CLI_OK && out->n == 0) {
        fprintf(stderr, "ergon show: %s has no rows\n", path);
        rc = CLI_USER_ERROR;
    }
    fclose(f);
    return rc;
}

/* The blocking_power_w column of a compare CSV (its first row): 1 and *w if
 * there is one, 0 if not. */
/* The value of KEY in DIR/frontier-info.csv (key,value rows), or "" when absent. */
static void info_value(const char *dir, const char *key, char *out, size_t n)
{
    char path[4200], line[512];
    snprintf(path, sizeof path, "%s/frontier-info.csv", dir);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ',') {
            snprintf(out, n, "%s", line + kl + 1);
            out[strcspn(out, "\r\n")] = '\0';
            break;
        }
    fclose(f);
}

static int cmp_time(const void *a, const void *b)
{
    const erg_plot_point *x = a, *y = b;
    if (x->time_s != y->time_s)
        return x->time_s < y->time_s ? -1 : 1;
    return (x->energy_j > y->energy_j) - (x->energy_j < y->energy_j);
}

/* The frontier of DIR by the profiled values (as choose and compare evaluate plans): up to
 * SHOW_EVAL_PLANS plans evenly spaced (the first and the last included) emulated with DIR's
 * profile, then the points no other point beats in both time and energy. 1 = done (*out, the
 * all-max point and a title), 0 = DIR has no baseline (the caller draws the estimates),
 * -1 = an error, reported (CLI_USER_ERROR is 1, which read as "done" and exited 0). */
#define SHOW_EVAL_PLANS 2000
static int eval_failed(const char *cmd, const erg_error *err)
{
    cli_report(cmd, err);
    return -1;
}
static int evaluated_frontier(const char *cmd, const char *dir, pts *out, erg_plot_point *allmax,
                              char *title, size_t tn)
{
    erg_error err = {0};
    erg_frontier *f = NULL;
    erg_status st = erg_frontier_read_dir(dir, NULL, &f, &err);
    if (st == ERG_ENOTFOUND)
        return 0; /* a frontier.csv without plans: draw its points as they are */
    if (st)
        return eval_failed(cmd, &err);
    erg_frontier_baseline bl;
    if (erg_frontier_baseline_open(dir, f, &bl, &err)) {
        erg_frontier_free(f);
        return eval_failed(cmd, &err);
    }
    if (!bl.have) {
        erg_frontier_free(f);
        return 0;
    }
    size_t n = erg_frontier_size(f), step = n > SHOW_EVAL_PLANS ? n / SHOW_EVAL_PLANS : 1;
    pts all = {0};
    int rc = 1;
    for (size_t k = 0; k < n && rc == 1; k = (k + step < n || k == n - 1) ? k + step : n - 1) {
        erg_plan *p = NULL;
        erg_emulation em;
        if (erg_frontier_plan(f, k, &p, &err) ||
            erg_emulate(bl.prof, bl.dag, p, bl.power_w, &em, NULL, NULL, &err))
            rc = eval_failed(cmd, &err);
        else if (!pts_add(&all, em.time_s, em.energy_j, NULL))
            rc = eval_failed(cmd, &(erg_error){ERG_ENOMEM, "out of memory"});
        erg_plan_free(p);
        if (k == n - 1)
            break;
    }
    if (rc == 1) {
        qsort(all.v, all.n, sizeof *all.v, cmp_time);
        double best = INFINITY;
        for (size_t i = 0; i < all.n && rc == 1; i++)
            if (all.v[i].energy_j < best) {
                best = all.v[i].energy_j;
                if (!pts_add(out, all.v[i].time_s, all.v[i].energy_j, NULL))
                    rc = eval_failed(cmd, &(erg_error){ERG_ENOMEM, "out of memory"});
            }
        *allmax = (erg_plot_point){bl.all_max.time_s, bl.all_max.energy_j};
        char sched[64], S[32], M[32], unit[64], src[256];
        info_value(dir, "source_profile", src, sizeof src);
        info_value(dir, "schedule", sched, sizeof sched);
        info_value(dir, "num_stages", S, sizeof S);
        info_value(dir, "num_microbatches", M, sizeof M);
        info_value(dir, "unit_time_s", unit, sizeof unit);
        double bw;
        const char *gpu = "";
        double a40, a100;
        bw = bl.power_w;
        if (!erg_blocking_power_w("A40", &a40, NULL) && fabs(bw - a40) < 1e-9)
            gpu = ", A40";
        else if (!erg_blocking_power_w("A100", &a100, NULL) && fabs(bw - a100) < 1e-9)
            gpu = ", A100";
        size_t dl = strlen(dir);
        while (dl > 1 && dir[dl - 1] == '/')
            dl--;
        const char *base = dir;
        for (size_t i = 0; i + 1 < dl; i++)
            if (dir[i] == '/')
                base = dir + i + 1;
        snprintf(title, tn,
                 "%s%s%.*s: %s ranks, %s microbatches, %s, %g W blocking%s (profiled "
                 "values)",
                 src, src[0] ? " in " : "", (int)(dl - (size_t)(base - dir)), base, S[0] ? S : "?",
                 M[0] ? M : "?", sched[0] ? sched : "?", bw, gpu);
    }
    pts_free(&all);
    erg_frontier_baseline_free(&bl);
    erg_frontier_free(f);
    return rc;
}

static int compare_power(const char *path, double *w)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[4096];
    char *fl[64];
    int col = -1, found = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        int n = split_csv(line, fl, 64);
        if (col < 0) {
            for (int i = 0; i < n; i++)
                if (!strcmp(fl[i], "blocking_power_w"))
                    col = i;
            if (col < 0)
                break;
            continue;
        }
        found = col < n && parse_num(fl[col], w);
        break;
    }
    fclose(f);
    return found;
}

#define MAX_SERIES 32

/* show power: the plan's power trace (emulate.h) drawn by plot.h. */
static erg_status show_power(const ecli_setup *s, const erg_plan *plan, const erg_plot_opts *po,
                             const char *out, erg_error *err)
{
    erg_schedule ps = erg_plan_schedule(plan);
    erg_dag *dag = NULL;
    erg_power_trace *tr = NULL;
    erg_emulate_opts eo;
    erg_emulate_opts_init(&eo);
    eo.blocking_power_w = s->power_w;
    erg_status st =
        erg_dag_new(&ps, erg_plan_num_stages(plan), erg_plan_num_microbatches(plan), &dag, err);
    if (!st)
        st = erg_power_trace_new(s->profile, dag, plan, &eo, &tr, err);
    if (!st)
        st = erg_plot_power(tr, po, out, err);
    erg_power_trace_free(tr);
    erg_dag_free(dag);
    return st;
}

/* What `ergon show` was given. */
typedef struct show_args {
    ecli_setup s;
    bool force, sched_given, power; /* power: show power */
    erg_plot_opts po;
    cli_sched cs;
    const char *plan_path, *out, *compare;
    const char *frontiers[MAX_SERIES];
    const char *points[MAX_SERIES];
    int nfront, npoints;
} show_args;

static int show_plan(const char *cmd, show_args *a)
{
    erg_error err = {0};
    int rc = CLI_OK;
    if (!a->plan_path)
        return cli_usage_error(cmd, "--plan is required");
    a->s.no_table = true;
    rc = cli_sched_finish(cmd, &a->cs, NULL, NULL);
    if (!rc)
        rc = ecli_setup_load(cmd, &a->s, false);
    erg_plan *plan = NULL;
    if (!rc && erg_plan_read(a->plan_path, &a->cs.sched, &plan, &err))
        rc = cli_report(cmd, &err);
    /* the plan's own profile, blocking power and schedule (provenance.c) */
    if (!rc) {
        erg_schedule_kind asked = a->cs.sched.kind;
        rc = cli_plan_check(cmd, a->plan_path, plan, a->s.profile, a->s.profile_path,
                            a->s.have_power || a->s.gpu ? a->s.power_w : -1,
                            a->sched_given ? &asked : NULL, a->force);
    }
    if (!rc && erg_plan_num_stages(plan) > erg_profile_num_stages(a->s.profile)) {
        fprintf(stderr, "ergon show: the plan has %d stages, the profile %d\n",
                erg_plan_num_stages(plan), erg_profile_num_stages(a->s.profile));
        rc = CLI_USER_ERROR;
    }
    if (!rc &&
        (a->power ? show_power(&a->s, plan, &a->po, a->out, &err)
                  : erg_plot_timeline(a->s.profile, plan, a->s.power_w, &a->po, a->out, &err)))
        rc = cli_report(cmd, &err);
    if (!rc) {
        cli_sched local = a->cs;
        local.sched = erg_plan_schedule(plan);
        cli_sched_split_note(stdout, &local, a->s.profile, erg_plan_num_stages(plan),
                             erg_plan_num_microbatches(plan));
    }
    erg_plan_free(plan);
    ecli_setup_free(&a->s);
    cli_sched_free(&a->cs);
    return rc;
}

static int show_frontier(const char *cmd, show_args *a)
{
    erg_error err = {0};
    int rc = CLI_OK;
    if (!a->nfront && !a->compare && !a->npoints)
        return cli_usage_error(cmd, "give --frontier, --compare or --point");
    pts data[MAX_SERIES];
    erg_plot_point allmax_pt[MAX_SERIES];
    bool have_allmax[MAX_SERIES] = {false};
    static char titles[MAX_SERIES][512];
    erg_plot_series ser[3 * MAX_SERIES + 3];
    char names[MAX_SERIES][256];
    memset(data, 0, sizeof data);
    size_t ns = 0;
    int nd = 0;
    for (int i = 0; i < a->nfront && !rc; i++) {
        const char *arg = a->frontiers[i], *eq = strchr(arg, '=');
        char file[4096];
        snprintf(names[nd], sizeof names[nd], "Perseus frontier (planner estimates)");
        if (eq) {
            snprintf(names[nd], sizeof names[nd], "%.*s", (int)(eq - arg), arg);
            arg = eq + 1;
        }
        size_t l = strlen(arg);
        if (l > 4 && !strcmp(arg + l - 4, ".csv"))
            snprintf(file, sizeof file, "%s", arg);
        else
            snprintf(file, sizeof file, "%s/frontier.csv", arg);
        rc = read_points(file, "time", "energy", NULL, &data[nd]);
        if (rc) {
            pts_free(&data[nd]); /* the rows read before the bad one */
            break;
        }
        /* With the profile it was planned with, draw what the plans really take (the values
         * choose, a->compare and the markers use), not the planner'a->s quantised estimates. */
        {
            char dir[4096];
            snprintf(dir, sizeof dir, "%s", file);
            char *slash = strrchr(dir, '/');
            if (slash)
                *slash = '\0';
            else
                snprintf(dir, sizeof dir, ".");
            pts ev = {0};
            int r =
                evaluated_frontier(cmd, dir, &ev, &allmax_pt[nd], titles[nd], sizeof titles[nd]);
            if (r == 1) {
                pts_free(&data[nd]);
                data[nd] = ev;
                if (!eq)
                    snprintf(names[nd], sizeof names[nd], "Perseus frontier (profiled values)");
                have_allmax[nd] = true;
            } else {
                pts_free(&ev);
                if (r) {
                    rc = CLI_USER_ERROR;
                    pts_free(&data[nd]);
                    break;
                }
            }
        }
        ser[ns++] = (erg_plot_series){names[nd], data[nd].v, data[nd].n, true};
        nd++;
    }
    /* the all-max point of the (first) frontier, unless the comparison has one */
    for (int i = 0; i < nd && !rc && !a->compare; i++)
        if (have_allmax[i]) {
            ser[ns++] = (erg_plot_series){"all-max clocks", &allmax_pt[i], 1, false};
            break;
        }
    if (!a->po.title && nd >= 1 && have_allmax[0])
        a->po.title = titles[0];
    /* A comparison is only meaningful at the frontier'a->s blocking power. */
    double cmp_w = 0;
    bool have_cmp_w = a->compare && compare_power(a->compare, &cmp_w);
    if (!rc && a->compare && !have_cmp_w)
        fprintf(stderr,
                "ergon show: warning: %s does not name its blocking power (no "
                "blocking_power_w column: an older 'ergon compare'); it cannot be checked "
                "against the frontier's\n",
                a->compare);
    for (int i = 0; i < a->nfront && !rc && have_cmp_w; i++) {
        const char *arg =
            strchr(a->frontiers[i], '=') ? strchr(a->frontiers[i], '=') + 1 : a->frontiers[i];
        char dir[4096];
        size_t l = strlen(arg);
        snprintf(dir, sizeof dir, "%s", arg);
        if (l > 4 && !strcmp(arg + l - 4, ".csv")) {
            char *slash = strrchr(dir, '/');
            if (slash)
                *slash = '\0';
            else
                snprintf(dir, sizeof dir, ".");
        }
        double fw;
        if (cli_baseline_read_power(dir, &fw) && fabs(fw - cmp_w) > 1e-9 * fmax(1, fabs(fw))) {
            fprintf(stderr,
                    "ergon show: %s was computed with a blocking power of %g W, the frontier %s "
                    "with %g W (%s/frontier-info.csv): their energies are not comparable; run "
                    "'ergon compare' again with --blocking-power %g (or the matching --gpu)\n",
                    a->compare, cmp_w, arg, fw, dir, fw);
            rc = CLI_USER_ERROR;
        }
    }
    pts cmp = {0};
    if (!rc && a->compare) {
        rc = read_points(a->compare, "time_s", "energy_j", "method", &cmp);
        /* one marked series per method, in file order */
        for (size_t i = 0; !rc && i < cmp.n && ns < MAX_SERIES + MAX_SERIES / 2; i++)
            ser[ns++] = (erg_plot_series){cmp.names[i], &cmp.v[i], 1, false};
    }
    erg_plot_point extra[MAX_SERIES];
    char extra_names[MAX_SERIES][128];
    for (int i = 0; !rc && i < a->npoints; i++) {
        const char *eq = strchr(a->points[i], '=');
        char te[128];
        char *comma;
        if (!eq || (size_t)(eq - a->points[i]) >= sizeof extra_names[i]) {
            rc = cli_usage_error(cmd, "--point expects NAME=TIME,ENERGY, got '%s'", a->points[i]);
            break;
        }
        snprintf(extra_names[i], sizeof extra_names[i], "%.*s", (int)(eq - a->points[i]),
                 a->points[i]);
        snprintf(te, sizeof te, "%s", eq + 1);
        comma = strchr(te, ',');
        if (comma)
            *comma = '\0';
        if (!comma || !parse_num(te, &extra[i].time_s) ||
            !parse_num(comma + 1, &extra[i].energy_j)) {
            rc = cli_usage_error(cmd, "--point expects NAME=TIME,ENERGY, got '%s'", a->points[i]);
            break;
        }
        ser[ns++] = (erg_plot_series){extra_names[i], &extra[i], 1, false};
    }
    if (!rc && erg_plot_frontier(ser, ns, &a->po, a->out, &err))
        rc = cli_report(cmd, &err);
    for (int i = 0; i < nd; i++)
        pts_free(&data[i]);
    pts_free(&cmp);
    return rc;
}

static int color_opt(const char *cmd, const char *value, void *po)
{
    erg_plot_opts *o = po;
    if (!strcmp(value, "clock"))
        o->color = ERG_PLOT_COLOR_CLOCK;
    else if (!strcmp(value, "power"))
        o->color = ERG_PLOT_COLOR_POWER;
    else
        return cli_usage_error(cmd, "--color expects clock or power, got '%s'", value);
    return CLI_OK;
}

static int frontier_opt(const char *cmd, const char *value, void *user)
{
    show_args *a = user;
    if (a->nfront == MAX_SERIES - 2)
        return cli_usage_error(cmd, "at most %d --frontier", MAX_SERIES - 2);
    a->frontiers[a->nfront++] = value;
    return CLI_OK;
}

static int point_opt(const char *cmd, const char *value, void *user)
{
    show_args *a = user;
    if (a->npoints == MAX_SERIES)
        return cli_usage_error(cmd, "at most %d --point", MAX_SERIES);
    a->points[a->npoints++] = value;
    return CLI_OK;
}

static const cli_help show_plan_help = {
    "usage: ergon show plan --profile P --plan FILE (--gpu G | --blocking-power W)\n"
    "                       [--color clock|power] [--schedule S | --schedule-file F]\n"
    "                       [--chunks V] [--backward-split X] -o OUT\n",
    "The plan's pipeline timeline, emulated with the profile's times: one row per stage\n"
    "(rank), each instruction a box labelled F<m>/B<m> (for multi-chunk and zero-bubble\n"
    "schedules PyTorch's action names: <stage>F<m>, <stage>I<m>, <stage>W<m>, an\n"
    "overlapped F and B as sF<m>;sB<n>) and coloured by SM clock (or average power with\n"
    "--color power), idle time grey, the critical path as a dark line, a time axis and a\n"
    "colour legend. The format follows OUT's extension: .png, .svg or .pdf.\n",
    "exit status: 0 success, 1 bad input, 2 usage error.\n"};

static const cli_help show_power_help = {
    "usage: ergon show power --profile P --plan FILE (--gpu G | --blocking-power W)\n"
    "                        [--schedule S | --schedule-file F] [--chunks V]\n"
    "                        [--backward-split X] -o OUT\n",
    "The plan's power over one iteration (docs/fleet.md): the job's power and the parts\n"
    "its computing and its waiting GPUs draw, as steps over the iteration, the average\n"
    "dashed (--color does not apply). The format follows OUT's extension: .png, .svg or\n"
    ".pdf.\n",
    "exit status: 0 success, 1 bad input, 2 usage error.\n"};

static const cli_help show_frontier_help = {
    "usage: ergon show frontier [--frontier CSV_OR_DIR]... [--compare CSV] -o OUT\n",
    "Iteration time against energy. A frontier directory with its profile (plan perseus)\n"
    "is drawn from the plans' profiled values, titled with ranks, microbatches, schedule\n"
    "and blocking power; a bare frontier.csv from the planner's estimates, labelled so.\n"
    "The format follows OUT's extension: .png, .svg or .pdf.\n",
    "exit status: 0 success, 1 bad input, 2 usage error.\n"};

/* The options of `show plan`, `show power` or `show frontier` (argv[0] the picture). */
static int show_parse(const char *cmd, show_args *a, int argc, char **argv, bool is_plan)
{
    long width = 0;
    a->s.power_w = -1;
    const cli_opt common[] = {
        {.name = "out",
         .short_name = 'o',
         .kind = CLI_OPT_STR,
         .arg = "OUT",
         .dest = &a->out,
         .help = "the picture to write (.png, .svg, .pdf)"},
        CLI_OPT_S("title", "TEXT", &a->po.title, "picture title"),
        CLI_OPT_L("width", "PX", &width, 200, 20000,
                  "width in pixels/points (default 1200 plan, 1000 frontier)"),
    };
    const cli_opt plan_opts[] = {
        CLI_OPT_S("plan", "FILE", &a->plan_path, "ergon plan JSON or freqs_pipeline_%05d.py file"),
        CLI_OPT_S("profile", "P", &a->s.profile_path,
                  "the stage profile the plan is evaluated with"),
        CLI_OPT_S("gpu", "NAME", &a->s.gpu, "A40 or A100: their blocking power, or"),
        CLI_OPT_D("blocking-power", "W", &a->s.power_w, 0, 1e5, "power while idle or blocked"),
        CLI_OPT_CALL("color", "clock|power", color_opt, &a->po,
                     "colour by SM clock (default) or power"),
        CLI_SCHED_OPTS(&a->cs),
        CLI_OPT_B("force", &a->force,
                  "draw a plan that records another profile, blocking power or\n"
                  "schedule than these (refused otherwise, naming both)"),
        common[0],
        common[1],
        common[2],
        CLI_OPTS_END,
    };
    const cli_opt frontier_opts[] = {
        CLI_OPT_CALL("frontier", "X", frontier_opt, a,
                     "a frontier.csv (time,energy per plan) or a directory holding\n"
                     "one; drawn as a line through its non-dominated plans (the\n"
                     "dominated ones dashed); repeat for several, optionally NAME=X"),
        CLI_OPT_S("compare", "CSV", &a->compare,
                  "the CSV of 'ergon compare --format csv': every method as a\n"
                  "marked point (columns method,time_s,energy_j); refused\n"
                  "(exit 1) when its blocking_power_w differs from a frontier\n"
                  "directory's (frontier-info.csv)"),
        CLI_OPT_CALL("point", "NAME=T,E", point_opt, a, "one more marked point (repeatable)"),
        common[0],
        common[1],
        common[2],
        CLI_OPTS_END,
    };
    int rc = cli_opts_parse_all(cmd, argc, argv, is_plan ? plan_opts : frontier_opts,
                                !is_plan   ? &show_frontier_help
                                : a->power ? &show_power_help
                                           : &show_plan_help);
    if (rc)
        return rc;
    a->po.width_px = (int)width;
    a->s.have_power = a->s.power_w >= 0;
    if (!a->s.have_power)
        a->s.power_w = 0;
    a->sched_given = a->cs.name_set;
    if (!a->out)
        return cli_usage_error(cmd, "-o OUT (.png, .svg or .pdf) is required");
    return CLI_OK;
}

int cmd_show(int argc, char **argv)
{
    const char *cmd = "show";
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        show_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    bool is_plan = !strcmp(argv[1], "plan"), is_frontier = !strcmp(argv[1], "frontier");
    bool is_power = !strcmp(argv[1], "power");
    if (!is_plan && !is_frontier && !is_power)
        return cli_usage_error(cmd, "unknown picture '%s' (use plan, frontier or power)", argv[1]);
    is_plan = is_plan || is_power; /* the same plan and profile */
    show_args sa, *a = &sa;
    memset(a, 0, sizeof *a);
    a->power = is_power;
    erg_plot_opts_init(&a->po);
    cli_sched_init(&a->cs);
    int rc = show_parse(cmd, a, argc - 1, argv + 1, is_plan);
    if (rc) {
        cli_sched_free(&a->cs);
        return rc == CLI_HELP ? CLI_OK : rc;
    }
    return is_plan ? show_plan(cmd, a) : show_frontier(cmd, a);
}
