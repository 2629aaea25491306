/* opts.c: every command's options from one declarative table (cli_opt, cli.h): parsed with
 * getopt_long's rules and printed as the command's --help. */
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HELP_COL 23   /* the column option help starts at: "  --name ARG" padded */
#define HELP_WIDTH 99 /* an [ENV] that would end a line past this column goes under it */

static size_t count(const cli_opt *t)
{
    size_t n = 0;
    while (t[n].name || t[n].help)
        n++;
    return n;
}

/* getopt_long's table: each option (and its alias) with val = 0x100 + its row; --help. */
static struct option *long_options(const cli_opt *t, size_t n)
{
    struct option *lo = calloc(2 * n + 2, sizeof *lo);
    if (!lo)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!t[i].name)
            continue;
        int has = t[i].kind == CLI_OPT_FLAG || (t[i].kind == CLI_OPT_FN && !t[i].arg)
                      ? no_argument
                      : required_argument;
        lo[k++] = (struct option){t[i].name, has, NULL, 0x100 + (int)i};
        if (t[i].alias)
            lo[k++] = (struct option){t[i].alias, has, NULL, 0x100 + (int)i};
    }
    lo[k++] = (struct option){"help", no_argument, NULL, 'h'};
    return lo;
}

static int apply(const char *cmd, const cli_opt *o, const char *value)
{
    char name[80];
    snprintf(name, sizeof name, "--%s", o->name);
    switch (o->kind) {
    case CLI_OPT_FLAG:
        *(bool *)o->dest = true;
        return CLI_OK;
    case CLI_OPT_STR:
        *(const char **)o->dest = value;
        return CLI_OK;
    case CLI_OPT_LONG:
        return cli_parse_int(cmd, name, value, (long)o->min, (long)o->max, o->dest) ? CLI_OK
                                                                                    : CLI_USAGE;
    case CLI_OPT_DOUBLE:
        return cli_parse_double(cmd, name, value, o->min, o->max, o->dest) ? CLI_OK : CLI_USAGE;
    case CLI_OPT_FN:
        return o->fn(cmd, value, o->user);
    case CLI_OPT_TEXT:
        break;
    }
    return cli_usage_error(cmd, "unknown option '%s'", name);
}

int cli_opts_parse(const char *cmd, int argc, char **argv, const cli_opt *opts,
                   const cli_help *help, int *first_arg)
{
    size_t n = count(opts);
    struct option *lo = long_options(opts, n);
    if (!lo) {
        fprintf(stderr, "ergon %s: out of memory\n", cmd);
        return CLI_USER_ERROR;
    }
    char shorts[64] = "h";
    size_t ns = 1;
    for (size_t i = 0; i < n && ns + 3 < sizeof shorts; i++)
        if (opts[i].short_name) {
            shorts[ns++] = opts[i].short_name;
            if (opts[i].kind != CLI_OPT_FLAG && (opts[i].kind != CLI_OPT_FN || opts[i].arg))
                shorts[ns++] = ':';
        }
    shorts[ns] = '\0';
    int c, rc = CLI_OK;
    optind = 1;
    opterr = 0;
    while (rc == CLI_OK && (c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        size_t row = n;
        for (size_t i = 0; i < n && c > 0 && c < 0x100; i++)
            if (opts[i].short_name == c)
                row = i;
        if (c >= 0x100 && (size_t)(c - 0x100) < n)
            row = (size_t)(c - 0x100);
        if (c == 'h' && row == n) {
            cli_opts_help(stdout, opts, help);
            rc = CLI_HELP;
        } else if (row < n) {
            rc = apply(cmd, &opts[row], optarg);
        } else if (c == ':' || (c == '?' && optopt > 0 && optopt < 0x100 && optopt != '?' &&
                                strchr(shorts, optopt) && strchr(shorts, optopt)[1] == ':')) {
            rc = cli_usage_error(cmd, "option '-%c' needs a value", optopt);
        } else {
            rc = cli_bad_option(cmd, argv, lo);
        }
    }
    free(lo);
    if (first_arg)
        *first_arg = optind;
    return rc;
}

int cli_opts_parse_all(const char *cmd, int argc, char **argv, const cli_opt *opts,
                       const cli_help *help)
{
    int first = 0, rc = cli_opts_parse(cmd, argc, argv, opts, help, &first);
    if (rc == CLI_OK && first < argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[first]);
    return rc;
}

/* One option's help: "  --name ARG" then its lines, the first beside it (on its own line when
 * the name is too long), the others under it at HELP_COL; the last ends in [ENV, ENV2]. */
static void option_help(FILE *f, const cli_opt *o)
{
    char left[96], sh[8] = "";
    if (o->short_name)
        snprintf(sh, sizeof sh, "-%c, ", o->short_name);
    snprintf(left, sizeof left, "  %s--%s%s%s", sh, o->name, o->arg ? " " : "",
             o->arg ? o->arg : "");
    const char *h = o->help ? o->help : "";
    int pad = HELP_COL - (int)strlen(left);
    fprintf(f, "%s%*s", left, pad > 1 ? pad : 3, "");
    for (;;) {
        const char *nl = strchr(h, '\n');
        bool last = !nl || !nl[1];
        int len = (int)(nl ? nl - h : (long)strlen(h));
        fprintf(f, "%.*s", len, h);
        if (last && o->env) {
            size_t w = strlen(o->env) + (o->env2 ? strlen(o->env2) + 2 : 0) + 3;
            if (HELP_COL + len + (int)w > HELP_WIDTH) /* the bracket on a line of its own */
                fprintf(f, "\n%*s", HELP_COL - 1, "");
            fprintf(f, " [%s%s%s]", o->env, o->env2 ? ", " : "", o->env2 ? o->env2 : "");
        }
        fputc('\n', f);
        if (last)
            break;
        h = nl + 1;
        fprintf(f, "%*s", HELP_COL, "");
    }
}

void cli_opts_help(FILE *f, const cli_opt *opts, const cli_help *help)
{
    fputs(help->usage, f);
    if (help->description)
        fprintf(f, "\n%s", help->description);
    fputc('\n', f);
    for (const cli_opt *o = opts; o->name || o->help; o++) {
        if (o->kind == CLI_OPT_TEXT)
            fputs(o->help, f);
        else
            option_help(f, o);
    }
    fprintf(f, "  -h, --help           this help\n");
    if (help->epilogue)
        fprintf(f, "\n%s", help->epilogue);
}

bool cli_opts_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return true;
    return false;
}
