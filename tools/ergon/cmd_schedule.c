/* cmd_schedule.c: `ergon schedule`: print or write a schedule's per-rank order. */
#include "cli.h"

#include "ergon/pipeline.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(
        f,
        "usage: ergon schedule NAME --ranks P [--chunks V] --microbatches M\n"
        "                      [--format text|torch-csv] [-o FILE]\n"
        "       ergon schedule --schedule-file FILE.csv [--format text|torch-csv] [-o FILE]\n\n"
        "Print (or write to FILE) each rank's instruction order of a pipeline schedule.\n"
        "NAME: gpipe, 1f1b, ours (one stage per rank), interleaved-1f1b, looped-bfs,\n"
        "interleaved-zb (chunks V >= 1, default 2; loop placement: stage s on rank s mod P),\n"
        "zbv, dualpipev (V = 2, V-shape placement: rank r holds stages r and 2P-1-r).\n"
        "The orders equal those of PyTorch's torch.distributed.pipelining schedule classes\n"
        "(1f1b is lowtime's synchronous 1F1B, see docs/schedules.md), and so do the refusals.\n\n"
        "  --format text       one line per rank: its instructions in run order (default)\n"
        "  --format torch-csv  PyTorch's compute_only CSV (_dump_csv): one row per rank,\n"
        "                      cells 0F0, 2I1, 2W1, 1B0, (0F7;7B3)OVERLAP_F_B, empty = idle\n"
        "  --schedule-file F   read (and check) a compute_only CSV instead of generating\n"
        "  -o FILE             write to FILE instead of standard output\n");
}

int cmd_schedule(int argc, char **argv)
{
    const char *cmd = "schedule";
    static const struct option opts[] = {
        {"ranks", required_argument, 0, 'r'},
        {"chunks", required_argument, 0, 'c'},
        {"microbatches", required_argument, 0, 'm'},
        {"format", required_argument, 0, 'f'},
        {"output", required_argument, 0, 'o'},
        {"schedule-file", required_argument, 0, 'F'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    long P = 0, V = 0, M = 0;
    int torch_csv = 0;
    const char *outp = NULL, *file = NULL;
    erg_error err = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            if (!cli_parse_int(cmd, "--ranks", optarg, 1, 4096, &P))
                return CLI_USAGE;
            break;
        case 'c':
            if (!cli_parse_int(cmd, "--chunks", optarg, 1, 64, &V))
                return CLI_USAGE;
            break;
        case 'm':
            if (!cli_parse_int(cmd, "--microbatches", optarg, 1, 1 << 20, &M))
                return CLI_USAGE;
            break;
        case 'f':
            if (!strcmp(optarg, "text"))
                torch_csv = 0;
            else if (!strcmp(optarg, "torch-csv"))
                torch_csv = 1;
            else
                return cli_usage_error(cmd, "--format must be text or torch-csv, not '%s'", optarg);
            break;
        case 'o':
            outp = optarg;
            break;
        case 'F':
            file = optarg;
            break;
        case 'h':
            help(stdout);
            return CLI_OK;
        default:
            return cli_bad_option(cmd, argv, opts);
        }
    }
    erg_order *o = NULL;
    if (file) {
        if (optind < argc)
            return cli_usage_error(cmd, "give either NAME or --schedule-file, not both");
        if (erg_order_read_csv(file, &o, &err))
            return cli_report(cmd, &err);
    } else {
        if (optind + 1 != argc)
            return cli_usage_error(cmd, "expected one schedule NAME");
        if (!P || !M)
            return cli_usage_error(cmd, "--ranks and --microbatches are required");
        erg_schedule s = {.kind = ERG_SCHED_1F1B};
        if (erg_schedule_parse(argv[optind], &s.kind, &err))
            return cli_usage_error(cmd, "%s", err.msg);
        s.chunks = (int)V;
        if (erg_order_new(&s, (int)P, (int)M, &o, &err))
            return cli_report(cmd, &err);
    }
    char *text = NULL;
    int rc = CLI_OK;
    if (erg_order_format(o, torch_csv, &text, &err)) {
        rc = cli_report(cmd, &err);
    } else if (outp) {
        FILE *f = fopen(outp, "w");
        int bad = !f;
        if (f) {
            bad |= fputs(text, f) < 0;
            bad |= fclose(f) != 0;
        }
        if (bad) {
            fprintf(stderr, "ergon schedule: cannot write %s\n", outp);
            rc = CLI_USER_ERROR;
        }
    } else {
        fputs(text, stdout);
    }
    erg_free(text);
    erg_order_free(o);
    return rc;
}
