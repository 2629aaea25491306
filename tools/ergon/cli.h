/* cli.h: shared declarations of the ergon command-line tool (not library API). */
#ifndef ERGON_CLI_H
#define ERGON_CLI_H

#include "ergon/ergon.h"

#include <stdbool.h>
#include <stdint.h>

/* Exit codes of every subcommand (documented in docs/cli.md). */
enum { CLI_OK = 0, CLI_USER_ERROR = 1, CLI_USAGE = 2 };

/* One subcommand: argv[0] is the subcommand's name. */
typedef int (*cli_cmd_fn)(int argc, char **argv);

typedef struct cli_command {
    const char *name;    /* e.g. "plan" */
    cli_cmd_fn fn;       /* entry point */
    const char *summary; /* one line for `ergon --help` */
} cli_command;

/* Print "ergon: <msg>" for a failed library call and return CLI_USER_ERROR
 * (or CLI_USAGE for ERG_EINVAL coming from option checks). */
int cli_report(const char *what, const erg_error *err);
/* Print "ergon <cmd>: <msg>" plus a hint to --help, return CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) ERG_PRINTF(2, 3);
/* Strict option value parsers that print a usage error on failure. */
bool cli_parse_int(const char *cmd, const char *opt, const char *s, long min, long max, long *out);
bool cli_parse_double(const char *cmd, const char *opt, const char *s, double min, double max,
                      double *out);

/* Resolve the blocking power from --gpu NAME (published value) or
 * --blocking-power W (power_w >= 0 when given): exactly one is needed.
 * Prints a usage error and returns false otherwise. */
bool cli_blocking_power(const char *cmd, const char *gpu, double *power_w);

/* --switch-latency S: seconds >= 0, or "default" (ERG_SWITCH_LATENCY_DEFAULT_S). */
bool cli_parse_latency(const char *cmd, const char *s, double *out);

/* A progress bar on stderr when it is a terminal (quiet otherwise);
 * usable as an erg_progress_fn with a cli_progress * as user data. */
typedef struct cli_progress {
    const char *label;
    double start_s;
    double last_draw_s;
    bool enabled;
} cli_progress;
void cli_progress_init(cli_progress *p, const char *label);
int cli_progress_cb(void *user, uint64_t done, uint64_t total);
void cli_progress_done(cli_progress *p);
double cli_now_s(void);

/* Read cost-model coefficients (see fits.c); *out has 6*S doubles. */
int cli_read_fits(const char *path, const char *case_name, int S, double **out);

/* Subcommands (one file each). */
int cmd_version(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_gpu(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_emulate(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_choose(int argc, char **argv);

/* EnvPipe, baselines, comparison and pictures (cmd_plan_envpipe.c, cmd_compare.c,
 * cmd_show.c); the plan_* ones are methods of `ergon plan`. */
int cmd_plan_envpipe(int argc, char **argv);
int cmd_plan_zeus_global(int argc, char **argv);
int cmd_plan_zeus_stage(int argc, char **argv);
int cmd_plan_uniform(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_shard(int argc, char **argv);

#endif
