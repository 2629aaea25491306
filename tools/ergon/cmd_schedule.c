/* cmd_schedule.c: `ergon schedule`: print or write a schedule's per-rank order. */
#include "cli.h"

#include "ergon/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_help schedule_help = {
    "usage: ergon schedule NAME --ranks P [--chunks V] --microbatches M\n"
    "                      [--format text|torch-csv] [-o FILE]\n"
    "       ergon schedule --schedule-file FILE.csv [--format text|torch-csv] [-o FILE]\n",
    "Print (or write to FILE) each rank's instruction order of a pipeline schedule.\n"
    "NAME: gpipe, 1f1b, ours (one stage per rank), interleaved-1f1b, looped-bfs,\n"
    "interleaved-zb (chunks V >= 1, default 2; loop placement: stage s on rank s mod P),\n"
    "zbv, dualpipev (V = 2, V-shape placement: rank r holds stages r and 2P-1-r).\n"
    "The orders equal those of PyTorch's torch.distributed.pipelining schedule classes\n"
    "(1f1b is lowtime's synchronous 1F1B, see docs/schedules.md), and so do the refusals.\n",
    NULL};

static int format_opt(const char *cmd, const char *value, void *torch_csv)
{
    if (strcmp(value, "text") && strcmp(value, "torch-csv"))
        return cli_usage_error(cmd, "--format must be text or torch-csv, not '%s'", value);
    *(int *)torch_csv = !strcmp(value, "torch-csv");
    return CLI_OK;
}

int cmd_schedule(int argc, char **argv)
{
    const char *cmd = "schedule";
    long P = 0, V = 0, M = 0;
    int torch_csv = 0;
    const char *outp = NULL, *file = NULL;
    erg_error err = {0};
    const cli_opt opts[] = {
        {.name = "ranks",
         .alias = "stages",
         .kind = CLI_OPT_LONG,
         .arg = "P",
         .dest = &P,
         .min = 1,
         .max = CLI_MAX_STAGES,
         .help = "ranks (pipeline stages; --stages is the same)"},
        CLI_OPT_L("chunks", "V", &V, 1, 64, "chunks (virtual stages) per rank"),
        CLI_OPT_L("microbatches", "M", &M, 1, 1 << 20, "microbatches per iteration"),
        CLI_OPT_CALL("format", "text|torch-csv", format_opt, &torch_csv,
                     "text: one line per rank, its instructions in run order\n"
                     "(default); torch-csv: PyTorch's compute_only CSV (_dump_csv):\n"
                     "one row per rank, cells 0F0, 2I1, 2W1, 1B0,\n"
                     "(0F7;7B3)OVERLAP_F_B, empty = idle"),
        CLI_OPT_S("schedule-file", "F", &file,
                  "read (and check) a compute_only CSV instead of generating"),
        {.name = "output",
         .short_name = 'o',
         .kind = CLI_OPT_STR,
         .arg = "FILE",
         .dest = &outp,
         .help = "write to FILE instead of standard output"},
        CLI_OPTS_END,
    };
    int first = 0, rc = cli_opts_parse(cmd, argc, argv, opts, &schedule_help, &first);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    erg_order *o = NULL;
    if (file) {
        if (first < argc)
            return cli_usage_error(cmd, "give either NAME or --schedule-file, not both");
        if (erg_order_read_csv(file, &o, &err))
            return cli_report(cmd, &err);
    } else {
        if (first + 1 != argc)
            return cli_usage_error(cmd, "expected one schedule NAME");
        if (!P || !M)
            return cli_usage_error(cmd, "--ranks and --microbatches are required");
        erg_schedule s = {.kind = ERG_SCHED_1F1B};
        if (erg_schedule_parse(argv[first], &s.kind, &err))
            return cli_usage_error(cmd, "%s", err.msg);
        s.chunks = (int)V;
        if (erg_order_new(&s, (int)P, (int)M, &o, &err))
            return cli_report(cmd, &err);
    }
    char *text = NULL;
    if (outp ? erg_order_write(o, torch_csv, outp, &err)
             : erg_order_format(o, torch_csv, &text, &err))
        rc = cli_report(cmd, &err);
    else if (text)
        fputs(text, stdout);
    erg_free(text);
    erg_order_free(o);
    return rc;
}
