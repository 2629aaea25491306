/* main.c: the ergon command-line tool: dispatch to one subcommand. */
#include "cli.h"

#include "ergon/profile.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const cli_command commands[] = {
    {"profile", cmd_profile, "make stage profiles (simulated GPU, client logs, sparse)"},
    {"schedule", cmd_schedule,
     "print or write a pipeline schedule's per-rank order (text, torch CSV)"},
    {"plan", cmd_plan, "compute plans: the Perseus frontier, EnvPipe, Zeus baselines"},
    {"emulate", cmd_emulate, "iteration time and energy of a plan, from a profile"},
    {"choose", cmd_choose, "the minimum-energy plan for a deadline or a slowdown"},
    {"sample", cmd_sample, "keep every N-th plan of a frontier directory"},
    {"compare", cmd_compare, "every planning method on one profile, side by side"},
    {"show", cmd_show, "draw a plan's timeline or a time-energy frontier (PNG/SVG/PDF)"},
    {"gpu", cmd_gpu, "inspect GPUs, lock/reset clocks (sim, NVML, ergond)"},
    {"shard", cmd_shard, "intra-operator parallelism planner (CFP): HLO in, sharding out"},
    {"version", cmd_version, "print the version"},
    {"serve", cmd_serve, "run the control-plane server (Perseus protocol + /v1 API)"},
    {"fleet", cmd_fleet, "a server's fleet: its power cap, the jobs' weights, their plans"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: ergon <command> [options]   (ergon <command> --help for details)\n\n"
               "ergon plans and runs energy-efficient pipeline-parallel training.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nexit status: 0 success, 1 error in the input or the environment, 2 usage "
               "error.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_OK;
    }
    if (!strcmp(argv[1], "--version"))
        return cmd_version(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "ergon: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}

int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("ergon %s\n", erg_version());
    return CLI_OK;
}

int cli_report(const char *what, const erg_error *err)
{
    if (what && *what)
        fprintf(stderr, "ergon %s: %s\n", what, err->msg[0] ? err->msg : erg_strerror(err->status));
    else
        fprintf(stderr, "ergon: %s\n", err->msg[0] ? err->msg : erg_strerror(err->status));
    return CLI_USER_ERROR;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "ergon %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'ergon %s --help')\n", cmd);
    return CLI_USAGE;
}

bool cli_parse_int(const char *cmd, const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || *end || errno || v < min || v > max) {
        cli_usage_error(cmd, "%s expects an integer in [%ld, %ld], got '%s'", opt, min, max,
                        s ? s : "");
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_double(const char *cmd, const char *opt, const char *s, double min, double max,
                      double *out)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || end == s || *end || errno || !isfinite(v) || v < min || v > max) {
        cli_usage_error(cmd, "%s expects a number in [%g, %g], got '%s'", opt, min, max,
                        s ? s : "");
        return false;
    }
    *out = v;
    return true;
}

bool cli_blocking_power(const char *cmd, const char *gpu, double *power_w)
{
    erg_error err = {0};
    if (gpu && *power_w >= 0) {
        cli_usage_error(cmd, "give either --gpu or --blocking-power, not both");
        return false;
    }
    if (gpu && erg_blocking_power_w(gpu, power_w, &err)) {
        cli_usage_error(cmd, "%s", err.msg);
        return false;
    }
    if (*power_w < 0) {
        cli_usage_error(cmd, "the blocking power is needed: --gpu A40|A100 or --blocking-power W");
        return false;
    }
    return true;
}

double cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The progress line's clock: called once per plan (tens of thousands per frontier), where the
 * coarse clock (a few milliseconds' resolution, against lines 0.1 s or seconds apart) costs a
 * memory read instead of a time-stamp read; the same clock as start_s. */
static double progress_now_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts))
        return cli_now_s();
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_init(cli_progress *p, const char *label)
{
    p->label = label;
    p->start_s = progress_now_s();
    p->last_draw_s = 0;
    p->tty = isatty(STDERR_FILENO);
    p->enabled = !getenv("ERGON_NO_PROGRESS");
    p->line_s = CLI_PROGRESS_LINE_S;
    const char *iv = getenv("ERGON_PROGRESS_INTERVAL_S");
    char *end;
    double v = iv ? strtod(iv, &end) : 0;
    if (iv && end != iv && !*end && v > 0 && v <= 3600)
        p->line_s = v;
}

int cli_progress_cb(void *user, uint64_t done, uint64_t total)
{
    cli_progress *p = user;
    if (!p || !p->enabled)
        return 0;
    double now = progress_now_s();
    double frac = total ? (double)done / (double)total : 0.0;
    if (frac > 1)
        frac = 1;
    if (!p->tty) {
        /* One line every few seconds, and none for a short run. */
        double since = now - (p->last_draw_s > 0 ? p->last_draw_s : p->start_s);
        if (done >= total || since < p->line_s)
            return 0;
        p->last_draw_s = now;
        double el = now - p->start_s;
        int ll = (int)strlen(p->label);
        while (ll > 0 && p->label[ll - 1] == ' ')
            ll--;
        fprintf(stderr, "ergon: %.*s: %llu/%llu (%.1f%%), %.1f s elapsed, ~%.0f s left\n", ll,
                p->label, (unsigned long long)done, (unsigned long long)total, frac * 100, el,
                frac > 0 ? el / frac - el : 0.0);
        fflush(stderr);
        return 0;
    }
    if (done < total && now - p->last_draw_s < 0.1)
        return 0;
    p->last_draw_s = now;
    int width = 30, fill = (int)(frac * width);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    double el = now - p->start_s;
    double eta = frac > 0 ? el / frac - el : 0;
    fprintf(stderr, "\r%s [%s] %5.1f%% %llu/%llu  %.1fs elapsed, ~%.0fs left ", p->label, bar,
            frac * 100, (unsigned long long)done, (unsigned long long)total, el, eta);
    fflush(stderr);
    return 0;
}

void cli_progress_done(cli_progress *p)
{
    if (p->enabled && p->tty)
        fprintf(stderr, "\n");
}

/* Edit distance between a and b (short strings; capped at 63 characters). */
static int edit_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63)
        la = 63;
    if (lb > 63)
        lb = 63;
    int d[64][64];
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

int cli_bad_option(const char *cmd, char **argv, const struct option *opts)
{
    const char *a = optind > 0 ? argv[optind - 1] : "";
    if (!a)
        a = "";
    /* a known option whose value is missing, or a flag given one (--flag=x) */
    if (optopt)
        for (const struct option *o = opts; o && o->name; o++) {
            if (o->val == optopt && o->has_arg == required_argument)
                return cli_usage_error(cmd, "option '--%s' needs a value", o->name);
            if (o->val == optopt && o->has_arg == no_argument && strchr(a, '='))
                return cli_usage_error(cmd, "option '--%s' takes no value", o->name);
        }
    const char *name = a;
    while (*name == '-')
        name++;
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(name, "="), name);
    const char *best = NULL;
    int bd = 1 << 30;
    for (const struct option *o = opts; word[0] && o && o->name; o++) {
        int d = edit_distance(word, o->name);
        /* a prefix of a longer name ("--micro") counts as close */
        if (!strncmp(o->name, word, strlen(word)))
            d = d < 1 ? d : 1;
        if (d < bd) {
            bd = d;
            best = o->name;
        }
    }
    int len = (int)strlen(word);
    if (best && bd <= (len < 6 ? 2 : 3))
        return cli_usage_error(cmd, "unknown option '%s'; did you mean '--%s'?", a, best);
    return cli_usage_error(cmd, "unknown option '%s'", a);
}
