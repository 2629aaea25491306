/* sched_opts.c: --schedule, --schedule-file, --chunks and --backward-split,
 * shared by the commands that plan or evaluate a schedule. */
#include "cli.h"

#include <string.h>
#include <strings.h>

void cli_sched_init(cli_sched *cs)
{
    memset(cs, 0, sizeof *cs);
    cs->sched.kind = ERG_SCHED_1F1B;
}

int cli_sched_option(const char *cmd, int is_name, int c, const char *arg, cli_sched *cs)
{
    erg_error err = {0};
    long v;
    double x;
    if (is_name) {
        if (arg && !strcasecmp(arg, "envpipe"))
            return cli_usage_error(cmd, "--schedule envpipe: the schedule is called 'ours' "
                                        "(EnvPipe's 1F1B with extra warm-up forwards); EnvPipe's "
                                        "own plan is 'ergon plan envpipe'");
        if (erg_schedule_parse(arg, &cs->sched.kind, &err))
            return cli_usage_error(cmd, "%s", err.msg);
        return CLI_OK;
    }
    switch (c) {
    case CLI_OPT_SCHED_FILE:
        cs->file = arg;
        return CLI_OK;
    case CLI_OPT_CHUNKS:
        if (!cli_parse_int(cmd, "--chunks", arg, 1, 64, &v))
            return CLI_USAGE;
        cs->sched.chunks = (int)v;
        return CLI_OK;
    case CLI_OPT_BACKWARD_SPLIT:
        if (!cli_parse_double(cmd, "--backward-split", arg, 1e-9, 1 - 1e-9, &x))
            return CLI_USAGE;
        cs->sched.backward_split = x;
        cs->split_set = true;
        return CLI_OK;
    }
    return cli_usage_error(cmd, "unknown option");
}

int cli_sched_opt_name(const char *cmd, const char *value, void *cs)
{
    ((cli_sched *)cs)->name_set = true;
    return cli_sched_option(cmd, 1, 'S', value, cs);
}

int cli_sched_opt_file(const char *cmd, const char *value, void *cs)
{
    return cli_sched_option(cmd, 0, CLI_OPT_SCHED_FILE, value, cs);
}

int cli_sched_opt_chunks(const char *cmd, const char *value, void *cs)
{
    return cli_sched_option(cmd, 0, CLI_OPT_CHUNKS, value, cs);
}

int cli_sched_opt_split(const char *cmd, const char *value, void *cs)
{
    return cli_sched_option(cmd, 0, CLI_OPT_BACKWARD_SPLIT, value, cs);
}

int cli_sched_finish(const char *cmd, cli_sched *cs, long *S, long *M)
{
    erg_error err = {0};
    if (!cs->file)
        return CLI_OK;
    if (cs->sched.chunks)
        return cli_usage_error(cmd, "--chunks does not apply to --schedule-file (the file "
                                    "places the stages)");
    if (erg_order_read_csv(cs->file, &cs->file_order, &err))
        return cli_report(cmd, &err);
    double split = cs->sched.backward_split;
    cs->sched =
        (erg_schedule){.kind = ERG_SCHED_FILE, .order = cs->file_order, .backward_split = split};
    int P = erg_order_num_ranks(cs->file_order), FM = erg_order_num_microbatches(cs->file_order);
    if (S && *S && *S != P)
        return cli_usage_error(cmd, "%s has %d ranks, not %ld", cs->file, P, *S);
    if (M && *M && *M != FM)
        return cli_usage_error(cmd, "%s has %d microbatches, not %ld", cs->file, FM, *M);
    if (S)
        *S = P;
    if (M)
        *M = FM;
    return CLI_OK;
}

void cli_sched_free(cli_sched *cs)
{
    erg_order_free(cs->file_order);
    cs->file_order = NULL;
}

bool cli_sched_split_used(const cli_sched *cs, const erg_profile *prof, long S, long M)
{
    erg_order *o = NULL;
    erg_error err;
    if (erg_order_new(&cs->sched, cs->sched.kind == ERG_SCHED_FILE ? 0 : (int)S,
                      cs->sched.kind == ERG_SCHED_FILE ? 0 : (int)M, &o, &err))
        return false;
    bool used = false;
    for (int r = 0; r < erg_order_num_ranks(o) && !used; r++) {
        const erg_instr *v;
        int n = erg_order_rank(o, r, &v);
        for (int k = 0; k < n && !used; k++) {
            erg_instr_kind kd = v[k].kind == ERG_OVERLAP_F_B ? v[k].kind2 : v[k].kind;
            if ((kd == ERG_BACKWARD_INPUT || kd == ERG_BACKWARD_WEIGHT) &&
                erg_profile_num_points(prof, r, kd) == 0)
                used = true;
        }
    }
    erg_order_free(o);
    return used;
}

void cli_sched_split_note(FILE *f, const cli_sched *cs, const erg_profile *prof, long S, long M)
{
    if (cli_sched_split_used(cs, prof, S, M))
        fprintf(f,
                "I/W costs derived from the backward rows with --backward-split %g "
                "(I = %g x B, W = %g x B)%s\n",
                erg_schedule_backward_split(&cs->sched), erg_schedule_backward_split(&cs->sched),
                1 - erg_schedule_backward_split(&cs->sched), cs->split_set ? "" : " (default)");
}
