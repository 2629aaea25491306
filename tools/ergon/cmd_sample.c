/* cmd_sample.c: `ergon sample DIR OUT -n N`: keep every N-th plan of a frontier. */
#include "cli.h"

#include "ergon/planner.h"

#include <getopt.h>
#include <stdio.h>

int cmd_sample(int argc, char **argv)
{
    const char *cmd = "sample";
    static const struct option opts[] = {
        {"every", required_argument, 0, 'n'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    long every = 50;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (!cli_parse_int(cmd, "-n", optarg, 1, 1L << 40, &every))
                return CLI_USAGE;
            break;
        case 'h':
            printf("usage: ergon sample DIR OUT [-n N]\n\n"
                   "Copy every N-th plan (default 50) and the last one of the frontier directory\n"
                   "DIR (written by 'ergon plan perseus') into the new directory OUT, with a\n"
                   "frontier.csv of the kept rows (the all-max fallback and the baseline,\n"
                   "frontier-info.csv and profile.csv, go with them). Consecutive plans are one "
                   "time unit apart, so\n"
                   "N is the sampling distance in units (N = 300 at 1 ms: plans 0.3 s apart).\n");
            return CLI_OK;
        default:
            return cli_bad_option(cmd, argv, opts);
        }
    }
    if (argc - optind != 2)
        return cli_usage_error(cmd, "expected DIR and OUT");
    erg_error err = {0};
    size_t kept, total;
    if (erg_frontier_sample_dir(argv[optind], argv[optind + 1], (size_t)every, &kept, &total, &err))
        return cli_report(cmd, &err);
    printf("Sampled %zu frequency assignments out of %zu into %s\n", kept, total, argv[optind + 1]);
    return CLI_OK;
}
