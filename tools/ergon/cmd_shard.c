/* cmd_shard.c: `ergon shard analyze|profile|search|comm`: the CFP intra-operator planner. */
#include "cli.h"
#include "ergon/shard.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `ergon shard` alone or with --help: the actions (each has its own --help). */
static void overview(FILE *f)
{
    fprintf(f, "usage: ergon shard analyze --hlo FILE --mesh AxB [--members]\n"
               "       ergon shard profile --hlo FILE --mesh AxB [cost options] [--rows N]\n"
               "       ergon shard search  --hlo FILE --mesh AxB [cost options] [--method "
               "dp|ilp|both]\n"
               "                           [--time-limit S] [--out-hlo FILE] [--out-json FILE]\n"
               "       ergon shard comm    --hlo FILE --mesh AxB [cost options] [--rows N]\n"
               "       ergon shard ACTION --help    options of one action\n"
               "\n"
               "Plans intra-operator parallelism for an XLA HLO text module (CFP): ParallelBlocks\n"
               "(anchors, backward twins, communication-free propagation), repeated segments,\n"
               "per-segment strategy costs, a DP search with a memory budget (and Alpa's ILP on\n"
               "the same costs as a baseline), and the plan written back as sharding={...}.\n"
               "\n"
               "  analyze   print every ParallelBlock with its members and per-strategy plans,\n"
               "            the segments and how they map to unique ones, the strategy map\n"
               "  profile   cost every unique segment's strategy combinations (table)\n"
               "  search    search a plan; print solution vector, time, memory, TFLOP/s\n"
               "  comm      communication volume and time of each combination of the first\n"
               "            repeated segment (CFP's comm-volume experiment)\n"
               "\nSee docs/shard.md. Exit status: 0 ok, 1 input error, 2 usage error.\n");
}

/* --strategies K,K,...: one strategy index per block, in block order. */
static int given_plan(erg_shard *s, const char *list, erg_shard_plan **p)
{
    size_t n = erg_shard_num_blocks(s), i = 0;
    size_t *k = calloc(n ? n : 1, sizeof *k);
    if (!k) {
        fprintf(stderr, "ergon shard: out of memory\n");
        return CLI_USER_ERROR;
    }
    const char *c = list;
    int rc = CLI_OK;
    for (;;) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(c, &end, 10);
        if (end == c || errno || (*end && *end != ',') || *c == '-') {
            rc = cli_usage_error("shard",
                                 "--strategies expects comma-separated indices, got "
                                 "'%s' (at '%s')",
                                 list, c);
            goto out;
        }
        if (i == n) {
            rc = cli_usage_error("shard",
                                 "--strategies: the module has %zu blocks, more were "
                                 "given ('%s')",
                                 n, list);
            goto out;
        }
        k[i++] = v;
        if (!*end)
            break;
        c = end + 1;
    }
    if (i != n) {
        rc = cli_usage_error("shard",
                             "--strategies: %zu given, the module has %zu blocks "
                             "(see 'ergon shard analyze')",
                             i, n);
        goto out;
    }
    erg_error err;
    if (erg_shard_plan_given(s, k, n, p, &err))
        rc = cli_report("shard", &err);
out:
    free(k);
    return rc;
}

/* What `ergon shard ACTION` was given. */
typedef struct shard_args {
    const char *hlo, *mesh, *method, *out_hlo, *out_json, *computation, *strategies, *out_profiles;
    erg_shard_cost_options co;
    double time_limit, mem_gb; /* mem_gb < 0: the device's memory */
    long rows, twin_window, keep;
    bool members;
    int m0, m1;
} shard_args;

static int method_opt(const char *cmd, const char *v, void *user)
{
    if (strcmp(v, "dp") && strcmp(v, "ilp") && strcmp(v, "both"))
        return cli_usage_error(cmd, "--method expects dp, ilp or both, got '%s'", v);
    *(const char **)user = v;
    return CLI_OK;
}

static int compute_opt(const char *cmd, const char *v, void *user)
{
    erg_shard_compute *c = user;
    if (!strcmp(v, "model"))
        *c = ERG_SHARD_COMPUTE_MODEL;
    else if (!strcmp(v, "blas"))
        *c = ERG_SHARD_COMPUTE_BLAS;
    else if (!strcmp(v, "cublas"))
        *c = ERG_SHARD_COMPUTE_CUBLAS;
    else
        return cli_usage_error(cmd, "--compute expects model, blas or cublas, got '%s'", v);
    return CLI_OK;
}

/* The rows every action has, and the cost rows of profile, comm and search. */
#define SHARD_COMMON_OPTS(sh)                                                                      \
    CLI_OPT_T("options:\n"),                                                                       \
        CLI_OPT_S("hlo", "FILE", &(sh)->hlo,                                                       \
                  "HLO text module (required); an already partitioned module\n"                    \
                  "(collectives over device groups, or num_partitions > 1 without\n"               \
                  "sharding annotations) is refused: give the single-device one"),                 \
        CLI_OPT_S("mesh", "AxB", &(sh)->mesh,                                                      \
                  "logical device mesh, e.g. 1x4, 2x2, 3x2 (required)"),                           \
        CLI_OPT_S("computation", "NAME", &(sh)->computation,                                       \
                  "analyse this computation instead of ENTRY, e.g. a while body\n"                 \
                  "(scanned layers: one plan for all iterations, times x trip\n"                   \
                  "count from known_trip_count or the loop condition)"),                           \
        CLI_OPT_L("twin-window", "N", &(sh)->twin_window, 1, 1000000,                              \
                  "candidate dots one backward-twin search examines (default\n"                    \
                  "64; it also reads at most 64 x N users): keeps the analysis\n"                  \
                  "near-linear when a tensor is read by thousands of dots; the\n"                  \
                  "report says when a search stopped at the window")
#define SHARD_COST_OPTS(sh)                                                                        \
    CLI_OPT_T("cost options:\n"),                                                                  \
        CLI_OPT_S("device", "NAME", &(sh)->co.device,                                              \
                  "row of the device table: a100-nvlink (default), a100-pcie,\nh100, v100"),       \
        CLI_OPT_S("devices", "FILE", &(sh)->co.devices_path,                                       \
                  "device table CSV (default: built in; data/shard_devices.csv)"),                 \
        CLI_OPT_CALL("compute", "MODE", compute_opt, &(sh)->co.compute,                            \
                     "model (roofline, default) | blas (time local GEMMs with\n"                   \
                     "OpenBLAS) | cublas (cuBLAS loaded at run time; fails if absent)"),           \
        CLI_OPT_S("cache", "FILE", &(sh)->co.cache_path,                                           \
                  "measured GEMM cache (CSV batch,m,n,k,time_s), read and updated"),               \
        CLI_OPT_S("profiles", "FILE", &(sh)->co.profiles_path,                                     \
                  "imported table segment,strategies,time_s,memory_bytes\n"                        \
                  "(strategies: indices joined by '-'); overrides modelled rows"),                 \
        CLI_OPT_B("profiles-only", &(sh)->co.profiles_only,                                        \
                  "with --profiles: only the combinations the file lists are\n"                    \
                  "candidates (measured costs, e.g. tools/shard_measure.py; every\n"               \
                  "unique segment needs a row)"),                                                  \
        CLI_OPT_D("mem-gb", "X", &(sh)->mem_gb, 1e-9, 1e9,                                         \
                  "memory budget per device in GB (default: the device's)"),                       \
        CLI_OPT_D("optimizer-factor", "X", &(sh)->co.optimizer_factor, 1, 100,                     \
                  "bytes kept per weight byte (default 4: weight, grad, Adam)"),                   \
        CLI_OPT_L("keep", "N", &(sh)->keep, 1, 4096,                                               \
                  "combinations listed per segment by `profile` and kept by the\n"                 \
                  "fallback chain DP (default 64; the exact DP keeps every\n"                      \
                  "combination not dominated in time and memory)")

static const char shard_exit[] = "Exit status: 0 ok, 1 input error, 2 usage error.\n";
static const cli_help analyze_help = {
    "usage: ergon shard analyze --hlo FILE --mesh AxB [--computation NAME] [--members]\n",
    "Prints every ParallelBlock (anchor, strategies, the dots' specs per strategy),\n"
    "custom-call classes, all-reduces merged by reassociation, multi-block values,\n"
    "the segments and the unique segment each maps to, and the strategy map.\n",
    shard_exit};
static const cli_help profile_help = {
    "usage: ergon shard profile --hlo FILE --mesh AxB [--computation NAME] [cost options]\n"
    "                         [--rows N] [--out-profiles FILE]\n",
    "Costs every unique segment's strategy combinations: total, compute,\n"
    "intrinsic collectives, resharding, bytes moved and memory per device.\n",
    shard_exit};
static const cli_help comm_help = {
    "usage: ergon shard comm --hlo FILE --mesh AxB [--computation NAME] [cost options]\n"
    "                         [--rows N]\n",
    "Communication volume and time of each combination of the first repeated\n"
    "segment (CFP's comm-volume experiment).\n",
    shard_exit};
static const cli_help search_help = {
    "usage: ergon shard search --hlo FILE --mesh AxB [--computation NAME] [cost options]\n"
    "                          [--method dp|ilp|both] [--time-limit S]\n"
    "                          [--strategies K,K,...] [--out-hlo FILE] [--out-json FILE]\n",
    "Searches a plan (one strategy per block) and prints the solution vector, the\n"
    "modelled iteration time, memory per device and TFLOP/s. When no plan fits the\n"
    "memory budget it says what the smallest plan needs.\n",
    shard_exit};

/* ACTION's table (argv[0]; its options argv[1..]): CLI_HELP after --help. */
static int shard_parse_table(int argc, char **argv, const char *cmd, shard_args *sh)
{
    const cli_opt analyze[] = {
        SHARD_COMMON_OPTS(sh),
        CLI_OPT_B("members", &sh->members,
                  "list every member of every block with its spec under each\n"
                  "strategy (default: the dots and a summary)"),
        CLI_OPTS_END,
    };
    const cli_opt profile[] = {
        SHARD_COMMON_OPTS(sh),
        SHARD_COST_OPTS(sh),
        CLI_OPT_L("rows", "N", &sh->rows, 1, 1000000, "rows per table (default 20)"),
        CLI_OPT_S("out-profiles", "FILE", &sh->out_profiles,
                  "write every unique segment's kept combinations\n"
                  "as the CSV --profiles reads (segment,strategies,time_s,\n"
                  "memory_bytes; modelled): the candidates to measure\n"
                  "(tools/shard_measure.py times them with XLA on CPU\n"
                  "devices and writes the file --profiles reads)"),
        CLI_OPTS_END,
    };
    const cli_opt comm[] = {
        SHARD_COMMON_OPTS(sh),
        SHARD_COST_OPTS(sh),
        CLI_OPT_L("rows", "N", &sh->rows, 1, 1000000, "rows per table (default 20)"),
        CLI_OPTS_END,
    };
    const cli_opt search[] = {
        SHARD_COMMON_OPTS(sh),
        SHARD_COST_OPTS(sh),
        CLI_OPT_T("search options:\n"),
        CLI_OPT_CALL("method", "M", method_opt, &sh->method,
                     "dp (default), ilp, or both: DP and block ILP (prints the gap)\n"
                     "plus Alpa's per-operator ILP on the same costs"),
        CLI_OPT_D("time-limit", "S", &sh->time_limit, 0.001, 86400,
                  "ILP time limit in seconds (default 600); an ILP that finds\n"
                  "no plan in time says so (no objective, no speed ratio)"),
        CLI_OPT_S("strategies", "LIST", &sh->strategies,
                  "no search: cost and write the plan with these strategies,\n"
                  "one index per block in block order (PB 0, PB 1, ...),\n"
                  "comma-separated (a baseline, or a variant to measure)"),
        CLI_OPT_S("out-hlo", "FILE", &sh->out_hlo, "write the module with sharding annotations"),
        CLI_OPT_S("out-json", "FILE", &sh->out_json, "write the plan as JSON"),
        CLI_OPTS_END,
    };
    const char *sub = argv[0];
    bool is_search = !strcmp(sub, "search"), is_analyze = !strcmp(sub, "analyze");
    const cli_opt *t = is_search              ? search
                       : is_analyze           ? analyze
                       : !strcmp(sub, "comm") ? comm
                                              : profile;
    const cli_help *h = is_search    ? &search_help
                        : is_analyze ? &analyze_help
                        : t == comm  ? &comm_help
                                     : &profile_help;
    return cli_opts_parse_all(cmd, argc, argv, t, h);
}

/* The options of ACTION argv[0] and their checks together; CLI_HELP after --help. */
static int shard_parse(int argc, char **argv, const char *cmd, shard_args *sh)
{
    int rc = shard_parse_table(argc, argv, cmd, sh);
    if (rc)
        return rc;
    const char *sub = argv[0];
    if (sh->mem_gb >= 0)
        sh->co.mem_budget_bytes = sh->mem_gb * 1e9;
    sh->co.keep = (int)sh->keep;
    if (!sh->hlo)
        return cli_usage_error(cmd, "--hlo FILE is required");
    if (sh->co.profiles_only && !sh->co.profiles_path)
        return cli_usage_error(cmd, "--profiles-only needs --profiles FILE");
    if (sh->co.profiles_only && !strcmp(sub, "search") && strcmp(sh->method, "dp") &&
        !sh->strategies)
        return cli_usage_error(cmd, "--profiles-only: measured costs are per segment "
                                    "combination, which only the DP searches (--method dp)");
    if (!sh->mesh)
        return cli_usage_error(cmd, "--mesh AxB is required");
    char tail;
    if (sscanf(sh->mesh, "%dx%d%c", &sh->m0, &sh->m1, &tail) != 2 || sh->m0 < 1 || sh->m1 < 1 ||
        (long long)sh->m0 * sh->m1 < 2)
        return cli_usage_error(cmd,
                               "--mesh expects AxB (two whole numbers >= 1, at least 2 "
                               "devices, e.g. 2x4), got '%s'",
                               sh->mesh);
    if (sh->m0 > 1024 || sh->m1 > 1024)
        return cli_usage_error(cmd,
                               "--mesh %s: each side is at most 1024 devices (got %d x "
                               "%d)",
                               sh->mesh, sh->m0, sh->m1);
    return CLI_OK;
}

/* search both: the ILP's plan beside the DP's, and the per-operator ILP (*q: the ILP's plan). */
static int compare_ilp(erg_shard *s, const erg_shard_plan *p, erg_shard_plan **q, double time_limit)
{
    erg_error err;
    /* An ILP that finds no plan within its limit prints no objective and no ratio. */
    erg_status qst = erg_shard_search(s, ERG_SHARD_ILP, time_limit, q, &err);
    if (qst == ERG_ETIMEOUT) {
        printf("\nILP (GLPK): no plan found within the time limit of %g s\n", time_limit);
    } else if (qst) {
        return cli_report("shard", &err);
    } else {
        double td = erg_shard_plan_time_s(p), ti = erg_shard_plan_time_s(*q);
        bool lim = erg_shard_plan_timed_out(*q);
        printf("\nILP (GLPK): iteration time %.6f ms, memory %.3f MB, search %.6f s%s\n", ti * 1e3,
               erg_shard_plan_memory_bytes(*q) / 1e6, erg_shard_plan_search_s(*q),
               lim ? " (time limit hit: best found, not proven optimal)" : "");
        printf("gap DP - ILP: %.6f ms (%.4f%%)", (td - ti) * 1e3,
               ti > 0 ? (td - ti) / ti * 100 : 0);
        if (erg_shard_plan_search_s(p) > 0)
            printf("; DP search %.1fx %s", erg_shard_plan_search_s(*q) / erg_shard_plan_search_s(p),
                   lim ? "faster than the ILP's time limit" : "faster");
        printf("\n");
    }
    double obj, secs, uni; /* uni: ties make it noisy, not printed */
    bool lim;
    size_t nvar = 0;
    if (erg_shard_search_ops_ilp(s, time_limit, &obj, &secs, &lim, &uni, &nvar, &err)) {
        return cli_report("shard", &err);
    }
    if (!isfinite(obj))
        printf("per-operator ILP (Alpa granularity, GLPK, %zu variables): no plan found "
               "within the time limit of %g s\n",
               nvar, time_limit);
    else {
        /* the objectives first: on the same costs, which plan is better and by how much */
        double td = erg_shard_plan_time_s(p);
        char cmpw[160];
        if (td > 0 && fabs(obj - td) > 1e-9 * td)
            snprintf(cmpw, sizeof cmpw, "%.1f%% %s than the DP's %.6f ms on the same costs",
                     fabs(td - obj) / td * 100, obj < td ? "better" : "worse", td * 1e3);
        else
            snprintf(cmpw, sizeof cmpw, "the same as the DP's on the same costs");
        printf("per-operator ILP (Alpa granularity, GLPK, %zu variables): objective %.6f ms, "
               "%s; search %.3f s%s; DP search %.0fx faster%s\n",
               nvar, obj * 1e3, cmpw, secs,
               lim ? " (time limit hit: best found, not proven optimal)" : "",
               erg_shard_plan_search_s(p) > 0 ? secs / erg_shard_plan_search_s(p) : 0,
               lim ? " than its time limit" : "");
    }
    return CLI_OK;
}

int cmd_shard(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        overview(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "analyze") && strcmp(sub, "profile") && strcmp(sub, "search") &&
        strcmp(sub, "comm"))
        return cli_usage_error("shard", "unknown action '%s' (analyze, profile, search, comm)",
                               sub);
    shard_args sa = {.method = "dp",
                     .time_limit = 600,
                     .mem_gb = -1,
                     .rows = 20,
                     .twin_window = ERG_SHARD_TWIN_WINDOW};
    erg_shard_cost_options_init(&sa.co);
    sa.keep = sa.co.keep;
    char cmd[32];
    snprintf(cmd, sizeof cmd, "shard %s", sub);
    int prc = shard_parse(argc - 1, argv + 1, cmd, &sa);
    if (prc)
        return prc == CLI_HELP ? CLI_OK : prc;
    const char *hlo = sa.hlo, *method = sa.method, *out_hlo = sa.out_hlo, *out_json = sa.out_json,
               *computation = sa.computation, *strategies = sa.strategies,
               *out_profiles = sa.out_profiles;
    erg_shard_cost_options co = sa.co;
    double time_limit = sa.time_limit;
    long rows = sa.rows, twin_window = sa.twin_window;
    bool members = sa.members;
    int m0 = sa.m0, m1 = sa.m1;
    erg_error err;
    erg_hlo_module *m = NULL;
    erg_shard *s = NULL;
    erg_shard_plan *p = NULL, *q = NULL;
    char *text = NULL;
    int rc = CLI_OK;
    double t0 = cli_now_s();
    if (erg_hlo_load(hlo, &m, &err)) {
        rc = cli_report("shard", &err);
        goto out;
    }
    double t_parse = cli_now_s() - t0;
    t0 = cli_now_s();
    {
        /* progress on stderr for a long analysis (none for a short one) */
        cli_progress apr;
        cli_progress_init(&apr, "analyze");
        erg_shard_analyze_options ao;
        erg_shard_analyze_options_init(&ao);
        ao.computation = computation;
        ao.twin_window = (int)twin_window;
        ao.progress = cli_progress_cb;
        ao.user = &apr;
        erg_status ast = erg_shard_analyze_opts(m, m0, m1, &ao, &s, &err);
        cli_progress_done(&apr);
        if (ast) {
            rc = cli_report("shard", &err);
            goto out;
        }
    }
    double t_an = cli_now_s() - t0;
    if (!strcmp(sub, "analyze")) {
        if (erg_shard_report(s, members, &text, &err)) {
            rc = cli_report("shard", &err);
            goto out;
        }
        fputs(text, stdout);
        fprintf(stderr, "parse %.3f s, analysis %.3f s\n", t_parse, t_an);
        goto out;
    }
    cli_progress pr;
    cli_progress_init(&pr, "profile");
    if (erg_shard_profile(s, &co, cli_progress_cb, &pr, &err)) {
        cli_progress_done(&pr);
        rc = cli_report("shard", &err);
        goto out;
    }
    cli_progress_done(&pr);
    if (!strcmp(sub, "profile") || !strcmp(sub, "comm")) {
        erg_status st = !strcmp(sub, "profile")
                            ? erg_shard_profile_report(s, (size_t)rows, &text, &err)
                            : erg_shard_comm_report(s, (size_t)rows, &text, &err);
        if (st) {
            rc = cli_report("shard", &err);
            goto out;
        }
        fputs(text, stdout);
        if (out_profiles && erg_shard_write(s, NULL, ERG_SHARD_OUT_PROFILES, out_profiles, &err))
            rc = cli_report("shard", &err);
        goto out;
    }
    bool both = !strcmp(method, "both");
    erg_shard_method first = !strcmp(method, "ilp") ? ERG_SHARD_ILP : ERG_SHARD_DP;
    if (strategies) {
        both = false;
        if ((rc = given_plan(s, strategies, &p)))
            goto out;
    } else if (erg_shard_search(s, first, time_limit, &p, &err)) {
        rc = cli_report("shard", &err);
        goto out;
    }
    if (erg_shard_plan_describe(s, p, &text, &err)) {
        rc = cli_report("shard", &err);
        goto out;
    }
    fputs(text, stdout);
    erg_free(text);
    text = NULL;
    if (both && (rc = compare_ilp(s, p, &q, time_limit)))
        goto out;
    if ((out_hlo && erg_shard_write(s, p, ERG_SHARD_OUT_HLO, out_hlo, &err)) ||
        (out_json && erg_shard_write(s, p, ERG_SHARD_OUT_JSON, out_json, &err)))
        rc = cli_report("shard", &err);
out:
    erg_free(text);
    erg_shard_plan_free(p);
    erg_shard_plan_free(q);
    erg_shard_free(s);
    erg_hlo_free(m);
    return rc;
}
