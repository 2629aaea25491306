/* cmd_sample.c: `ergon sample DIR OUT -n N`: keep every N-th plan of a frontier. */
#include "cli.h"

#include "ergon/planner.h"

#include <stdio.h>

static const cli_help sample_help = {
    "usage: ergon sample DIR OUT [-n N]\n",
    "Copy every N-th plan (default 50) and the last one of the frontier directory\n"
    "DIR (written by 'ergon plan perseus') into the new directory OUT, with a\n"
    "frontier.csv of the kept rows (the all-max fallback and the baseline,\n"
    "frontier-info.csv and profile.csv, go with them). Consecutive plans are one time\n"
    "unit apart, so N is the sampling distance in units (N = 300 at 1 ms: plans 0.3 s\n"
    "apart).\n",
    NULL};

int cmd_sample(int argc, char **argv)
{
    const char *cmd = "sample";
    long every = 50;
    const cli_opt opts[] = {
        {.name = "every",
         .short_name = 'n',
         .kind = CLI_OPT_LONG,
         .arg = "N",
         .dest = &every,
         .min = 1,
         .max = (double)(1L << 40),
         .help = "keep every N-th plan (default 50)"},
        CLI_OPTS_END,
    };
    int first = 0, rc = cli_opts_parse(cmd, argc, argv, opts, &sample_help, &first);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    if (argc - first != 2)
        return cli_usage_error(cmd, "expected DIR and OUT");
    erg_error err = {0};
    size_t kept, total;
    if (erg_frontier_sample_dir(argv[first], argv[first + 1], (size_t)every, &kept, &total, &err))
        return cli_report(cmd, &err);
    printf("Sampled %zu frequency assignments out of %zu into %s\n", kept, total, argv[first + 1]);
    return CLI_OK;
}
