/* cli.h: shared declarations of the ergon command-line tool (not library API). */
#ifndef ERGON_CLI_H
#define ERGON_CLI_H

#include "ergon/ergon.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes of every subcommand (documented in docs/cli.md). */
enum { CLI_OK = 0, CLI_USER_ERROR = 1, CLI_USAGE = 2 };

/* One subcommand: argv[0] is the subcommand's name. */
typedef int (*cli_cmd_fn)(int argc, char **argv);

typedef struct cli_command {
    const char *name;    /* e.g. "plan" */
    cli_cmd_fn fn;       /* entry point */
    const char *summary; /* one line for `ergon --help` */
} cli_command;

/* ---- one declarative option table per command (opts.c) ----
 * A command lists its options once; cli_opts_parse parses argv with it (getopt_long's rules:
 * options anywhere, --name=value, unique prefixes; "did you mean" for an unknown one) and
 * cli_opts_help prints --help from the same table, so the two cannot drift. */
typedef enum cli_opt_kind {
    CLI_OPT_FLAG,   /* bool *dest = true */
    CLI_OPT_STR,    /* const char **dest = the value */
    CLI_OPT_LONG,   /* long *dest: an integer in [min, max] */
    CLI_OPT_DOUBLE, /* double *dest: a number in [min, max] */
    CLI_OPT_FN,     /* fn(cmd, value, user) parses it (value NULL when arg is NULL) */
    CLI_OPT_TEXT,   /* not an option: help text printed in the option list at this place */
} cli_opt_kind;
typedef struct cli_opt {
    const char *name; /* --name; for CLI_OPT_TEXT, NULL */
    cli_opt_kind kind;
    const char *arg; /* the value's name in the help ("S"); NULL: no value (flags, some fns) */
    void *dest;
    double min, max;
    int (*fn)(const char *cmd, const char *value, void *user); /* CLI_OK or a usage error */
    void *user;
    const char *help;  /* lines (\n) printed beside and under the option */
    const char *alias; /* another name of the same option (not in the help), or NULL */
    char short_name;   /* -x as well, or 0 */
    /* The environment variables that give the option's value when it is not given (env2 when
     * env is unset), or NULL; printed in the help as [ENV, ENV2]. cli_opts_parse does not read
     * them: the command does, with the row's rules (serve: cmd_serve.c's serve_env). */
    const char *env, *env2;
} cli_opt;
/* The rows, by kind. */
#define CLI_OPT_S(n, a, d, h)                                                                      \
    {                                                                                              \
        .name = (n), .kind = CLI_OPT_STR, .arg = (a), .dest = (d), .help = (h)                     \
    }
#define CLI_OPT_B(n, d, h)                                                                         \
    {                                                                                              \
        .name = (n), .kind = CLI_OPT_FLAG, .dest = (d), .help = (h)                                \
    }
#define CLI_OPT_L(n, a, d, lo, hi, h)                                                              \
    {                                                                                              \
        .name = (n), .kind = CLI_OPT_LONG, .arg = (a), .dest = (d), .min = (lo), .max = (hi),      \
        .help = (h)                                                                                \
    }
#define CLI_OPT_D(n, a, d, lo, hi, h)                                                              \
    {                                                                                              \
        .name = (n), .kind = CLI_OPT_DOUBLE, .arg = (a), .dest = (d), .min = (lo), .max = (hi),    \
        .help = (h)                                                                                \
    }
#define CLI_OPT_CALL(n, a, f, u, h)                                                                \
    {                                                                                              \
        .name = (n), .kind = CLI_OPT_FN, .arg = (a), .fn = (f), .user = (u), .help = (h)           \
    }
#define CLI_OPT_T(text)                                                                            \
    {                                                                                              \
        .kind = CLI_OPT_TEXT, .help = (text)                                                       \
    }
/* --stages S (alias --ranks), bounded by CLI_MAX_STAGES in every command */
#define CLI_OPT_STAGES(d, h)                                                                       \
    {                                                                                              \
        .name = "stages", .kind = CLI_OPT_LONG, .arg = "S", .dest = (d), .min = 1,                 \
        .max = CLI_MAX_STAGES, .help = (h), .alias = "ranks"                                       \
    }
#define CLI_OPTS_END                                                                               \
    {                                                                                              \
        .kind = CLI_OPT_TEXT                                                                       \
    }
/* A command's help around its option list: usage lines, what it does, and what follows. */
typedef struct cli_help {
    const char *usage;       /* "usage: ergon choose ...\n" (may hold several lines) */
    const char *description; /* paragraphs after the usage, or NULL */
    const char *epilogue;    /* after the options (exit status, notes), or NULL */
} cli_help;
/* Parse argv[1..] with the table (argv[0] is the command). Returns CLI_OK with *first_arg the
 * index of the first operand, CLI_USAGE after printing a usage error, or CLI_HELP after
 * printing the help on stdout for -h/--help (the command then returns CLI_OK). */
enum { CLI_HELP = -1 };
int cli_opts_parse(const char *cmd, int argc, char **argv, const cli_opt *opts,
                   const cli_help *help, int *first_arg);
/* The same, refusing operands ("unexpected argument 'x'"). */
int cli_opts_parse_all(const char *cmd, int argc, char **argv, const cli_opt *opts,
                       const cli_help *help);
void cli_opts_help(FILE *f, const cli_opt *opts, const cli_help *help);
/* Does argv[1..] (up to a "--") ask for -h/--help? For a command that reads more than argv
 * before parsing (serve's environment): --help answers whatever that holds. */
bool cli_opts_wants_help(int argc, char **argv);
/* The largest --stages (--ranks) every command accepts: what the library plans and its
 * files hold (ERG_MAX_STAGES, ergon.h); a planner with a smaller limit says so itself. */
#define CLI_MAX_STAGES ERG_MAX_STAGES

/* Print "ergon: <msg>" for a failed library call and return CLI_USER_ERROR
 * (or CLI_USAGE for ERG_EINVAL coming from option checks). */
int cli_report(const char *what, const erg_error *err);
/* Print "ergon <cmd>: <msg>" plus a hint to --help, return CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) ERG_PRINTF(2, 3);
/* getopt_long's '?' (with opterr = 0): "unknown option '--x'; did you mean '--y'?" or
 * "option '--y' needs a value", from the command's option table. */
struct option;
int cli_bad_option(const char *cmd, char **argv, const struct option *opts);
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

/* Progress on stderr: a bar redrawn in place when stderr is a terminal,
 * otherwise (a log file, a pipe) one line every CLI_PROGRESS_LINE_S seconds
 * ($ERGON_PROGRESS_INTERVAL_S) once a run has taken that long; none with
 * $ERGON_NO_PROGRESS set. Usable as an erg_progress_fn with a cli_progress *
 * as user data. */
#define CLI_PROGRESS_LINE_S 5.0
/* Frontier size above which `plan perseus` and `compare` refuse unless told
 * otherwise (--max-plans, --force): 3x the largest published frontier. */
#define CLI_DEFAULT_MAX_PLANS 200000
typedef struct cli_progress {
    const char *label;
    double start_s;
    double last_draw_s;
    bool enabled;
    bool tty;
    double line_s; /* seconds between lines when not a terminal */
} cli_progress;
void cli_progress_init(cli_progress *p, const char *label);
int cli_progress_cb(void *user, uint64_t done, uint64_t total);
void cli_progress_done(cli_progress *p);
double cli_now_s(void);

/* Read cost-model coefficients (see fits.c); *out has 6*S doubles. */
int cli_read_fits(const char *path, const char *case_name, int S, double **out);

/* Schedule options shared by every command that takes --schedule NAME:
 * --schedule-file FILE.csv (PyTorch compute_only CSV), --chunks V and
 * --backward-split X (sched_opts.c). */
#include "ergon/pipeline.h"
#include "ergon/profile.h"
#include <stdio.h>
enum { CLI_OPT_SCHED_FILE = 0x1001, CLI_OPT_CHUNKS, CLI_OPT_BACKWARD_SPLIT };
/* The same four options as rows of a command's cli_opt table (cs: the command's cli_sched *);
 * CLI_SCHED_OPTS_NO_NAME without --schedule (a command that names its own schedule). */
int cli_sched_opt_name(const char *cmd, const char *value, void *cs);
int cli_sched_opt_file(const char *cmd, const char *value, void *cs);
int cli_sched_opt_chunks(const char *cmd, const char *value, void *cs);
int cli_sched_opt_split(const char *cmd, const char *value, void *cs);
#define CLI_SCHED_OPTS_NO_NAME(cs)                                                                 \
    CLI_OPT_CALL("schedule-file", "F", cli_sched_opt_file, cs,                                     \
                 "a PyTorch compute_only schedule CSV (_dump_csv) instead"),                       \
        CLI_OPT_CALL("chunks", "V", cli_sched_opt_chunks, cs,                                      \
                     "chunks (virtual stages) per rank (default 1, 2 for the\n"                    \
                     "interleaved, zbv and dualpipev schedules)"),                                 \
        CLI_OPT_CALL("backward-split", "X", cli_sched_opt_split, cs,                               \
                     "I = X*B, W = (1-X)*B where the profile has no I/W rows\n"                    \
                     "(default 0.5; stated in the output when used)")
#define CLI_SCHED_OPTS(cs)                                                                         \
    CLI_OPT_CALL("schedule", "NAME", cli_sched_opt_name, cs,                                       \
                 "1f1b (default), gpipe, ours, interleaved-1f1b, looped-bfs,\n"                    \
                 "interleaved-zb, zbv, dualpipev (docs/schedules.md)"),                            \
        CLI_SCHED_OPTS_NO_NAME(cs)
typedef struct cli_sched {
    erg_schedule sched;
    erg_order *file_order; /* owned, --schedule-file */
    const char *file;
    bool split_set;
    bool name_set; /* --schedule given */
} cli_sched;
void cli_sched_init(cli_sched *cs);
/* Handle --schedule (c == 'S' by convention, pass it as is_name) and the
 * CLI_OPT_* options; returns CLI_OK or prints a usage error. */
int cli_sched_option(const char *cmd, int is_name, int c, const char *arg, cli_sched *cs);
/* After option parsing: load the file; S and M (may be NULL) get the file's
 * ranks and microbatches when 0, and must agree with it otherwise. */
int cli_sched_finish(const char *cmd, cli_sched *cs, long *S, long *M);
void cli_sched_free(cli_sched *cs);
/* Whether the schedule runs I/W parts the profile lacks (so the split was
 * used), and a line saying so on f. */
bool cli_sched_split_used(const cli_sched *cs, const erg_profile *prof, long S, long M);
void cli_sched_split_note(FILE *f, const cli_sched *cs, const erg_profile *prof, long S, long M);

/* The one baseline of user-facing savings (baseline.c): all-max clocks
 * evaluated with the profile. A frontier directory written by `plan perseus`
 * holds frontier-info.csv and profile.csv; have is false for one without. */
#include "ergon/emulate.h"
#include "ergon/planner.h"
/* The library's all-max baseline (erg_frontier_baseline in emulate.h). */
typedef erg_frontier_baseline cli_baseline;
void cli_baseline_init(cli_baseline *b);
void cli_baseline_free(cli_baseline *b);
int cli_baseline_set(cli_baseline *b, erg_profile *prof, erg_dag *dag, double power_w,
                     const erg_emulation *all_max);
/* 1 and *power_w when DIR/frontier-info.csv names the blocking power. */
int cli_baseline_read_power(const char *dir, double *power_w);
int cli_baseline_open(const char *dir, const erg_frontier *f, cli_baseline *b, erg_error *err);
/* The minimum-energy plan whose time fits deadline_s: by the planner's
 * estimate, then (with a baseline) stepping to faster plans until the
 * profiled time fits; *em is the profiled evaluation (only with a baseline). */
erg_status cli_baseline_pick(const cli_baseline *b, const erg_frontier *f, double deadline_s,
                             size_t *k, erg_emulation *em, erg_error *err);

/* The regular files and bytes in a directory (frontier_out.c: `plan perseus`'s summary). */
void cli_dir_usage(const char *dir, size_t *files, double *bytes);

/* Subcommands (one file each). */
int cmd_version(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_gpu(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_emulate(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_fleet(int argc, char **argv);
int cmd_fleet_simulate(int argc, char **argv);
int cmd_choose(int argc, char **argv);
int cmd_schedule(int argc, char **argv);

/* EnvPipe, baselines, comparison and pictures (cmd_plan_envpipe.c, cmd_compare.c,
 * cmd_show.c); the plan_* ones are methods of `ergon plan`. */
int cmd_plan_envpipe(int argc, char **argv);
int cmd_plan_zeus_global(int argc, char **argv);
int cmd_plan_zeus_stage(int argc, char **argv);
int cmd_plan_uniform(int argc, char **argv);
int cmd_plan_power_limit(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_shard(int argc, char **argv);

/* Provenance of plans (provenance.c): stamp a plan with the profile's fingerprint, the
 * blocking power and the clock table (NULL: the profile's clocks); check a plan read with a
 * profile (power_w < 0: not checked; asked: the --schedule given, NULL when none) and refuse a
 * mismatch, naming both sides, unless force. */
int cli_plan_stamp(const char *cmd, erg_plan *plan, const erg_profile *prof, double power_w,
                   const char *clock_table);
int cli_plan_check(const char *cmd, const char *plan_path, const erg_plan *plan,
                   const erg_profile *prof, const char *profile_path, double power_w,
                   const erg_schedule_kind *asked, bool force);

#endif
