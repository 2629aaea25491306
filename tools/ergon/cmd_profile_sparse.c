/* cmd_profile_sparse.c: `ergon profile sparse`: sparse adaptive profiling,
 * replayed from a full profile (docs/sparse-profiling.md). */
#include "cli.h"

#include "ergon/emulate.h"
#include "ergon/sparse.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void usage_profile_sparse(FILE *f);

void usage_profile_sparse(FILE *f)
{
    fprintf(f, "usage: ergon profile sparse --replay FULL.csv [--budget N] [--patience N]\n"
               "                            [--stages S] -o PRED.csv [--verbose]\n"
               "                            [--check M[,M...] (--gpu G | --blocking-power W)\n"
               "                             [--unit-time S]]\n"
               "\n"
               "sparse  Sparse adaptive profiling (docs/sparse-profiling.md): per (stage,\n"
               "      instruction) measure the highest clock, step down to the energy valley\n"
               "      (stopping below it once energy rose --patience measurements in a row,\n"
               "      Zeus's rule), then measure where the curve is least known, and predict\n"
               "      every other clock (time piecewise a/f + b, power piecewise linear in f).\n"
               "      With --replay the 'measurements' are looked up in FULL.csv (offline\n"
               "      evaluation). Writes the full predicted profile with a sixth column\n"
               "      source = measured|predicted and prints the points measured against a\n"
               "      full sweep of every clock of FULL.csv.\n"
               "      --budget N      most (stage, instruction, clock) points measured in all\n"
               "                      (default: a sixth of the full sweep, at least 4 per\n"
               "                      (stage, instruction))\n"
               "      --patience N    rises below the valley before going no lower (default 2)\n"
               "      --near-max N    clocks right below the maximum always measured (default 2)\n"
               "      --time-noise X  relative noise of a measurement (time and energy; default\n"
               "                      0.002: the least margin a predicted time gets). From\n"
               "                      0.005 on the measurements are fitted, not trusted point\n"
               "                      by point (shared shape smoothed over neighbouring\n"
               "                      clocks, each stage's level and tilt), a quarter of the\n"
               "                      sweep is measured, and the points departing from the fit\n"
               "                      by more than 2 standard deviations are listed: a live\n"
               "                      profiler measures them again, a replay cannot\n"
               "      --time-noise auto  estimate it from the measurements as they arrive:\n"
               "                      neighbouring stages' differences between consecutive\n"
               "                      common clocks (the shared curve cancels), robust spread\n"
               "                      (median); along each curve with one stage. An upper\n"
               "                      bound (what of the curves does not cancel counts);\n"
               "                      printed as 'noise X%% (estimated from N points)'\n"
               "      --stages S      profile only stages 0..S-1 (default: all of FULL.csv)\n"
               "      --verbose       list the measured clocks of every (stage, instruction)\n"
               "      --check M,...   also plan S stages x M microbatches (1F1B, Perseus\n"
               "                      frontier, --unit-time, default 0.001 s) on FULL.csv and on\n"
               "                      the prediction, choose at three targets (all-max time, 1 %%\n"
               "                      slower, minimum energy) and print both choices evaluated on\n"
               "                      FULL.csv: energy gap and whether the target is met\n"
               "\n"
               "exit status: 0 success, 1 bad input (named), 2 usage error.\n");
}

typedef struct replay {
    const erg_profile *full;
} replay;

static erg_status replay_measure(void *user, int stage, erg_instr_kind kind, int freq_mhz,
                                 erg_profile_point *out, erg_error *err)
{
    const replay *r = user;
    return erg_profile_lookup(r->full, stage, kind, freq_mhz, out, err);
}

/* The clocks every (stage, instruction) of p has, ascending; *n gets the count. */
static int *common_clocks(const erg_profile *p, int S, size_t *n, char *bad, size_t badlen)
{
    size_t n0 = erg_profile_num_points(p, 0, ERG_FORWARD);
    const erg_profile_point *v0 = erg_profile_points(p, 0, ERG_FORWARD);
    int *f = calloc(n0 ? n0 : 1, sizeof(int));
    if (!f)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n0; i++)
        f[k++] = v0[i].freq_mhz;
    for (int s = 0; s < S; s++)
        for (int kind = 0; kind < 2; kind++) {
            size_t m = erg_profile_num_points(p, s, (erg_instr_kind)kind);
            if (m != k) {
                snprintf(bad, badlen, "stage %d %s has %zu clocks, stage 0 forward %zu", s,
                         erg_instr_kind_name((erg_instr_kind)kind), m, k);
                free(f);
                return NULL;
            }
            for (size_t i = 0; i < k; i++) {
                erg_profile_point pt;
                if (erg_profile_lookup(p, s, (erg_instr_kind)kind, f[i], &pt, NULL)) {
                    snprintf(bad, badlen, "stage %d %s has no %d MHz row", s,
                             erg_instr_kind_name((erg_instr_kind)kind), f[i]);
                    free(f);
                    return NULL;
                }
            }
        }
    *n = k;
    return f;
}

enum {
    O_REPLAY = 256,
    O_BUDGET,
    O_PATIENCE,
    O_STAGES,
    O_CHECK,
    O_GPU,
    O_POWER,
    O_UNIT,
    O_VERBOSE,
    O_NEAR,
    O_NOISE
};

int profile_sparse(int argc, char **argv);

int profile_sparse(int argc, char **argv)
{
    const char *cmd = "profile sparse";
    static const struct option opts[] = {
        {"replay", required_argument, 0, O_REPLAY},
        {"budget", required_argument, 0, O_BUDGET},
        {"patience", required_argument, 0, O_PATIENCE},
        {"stages", required_argument, 0, O_STAGES},
        {"check", required_argument, 0, O_CHECK},
        {"gpu", required_argument, 0, O_GPU},
        {"blocking-power", required_argument, 0, O_POWER},
        {"unit-time", required_argument, 0, O_UNIT},
        {"verbose", no_argument, 0, O_VERBOSE},
        {"near-max", required_argument, 0, O_NEAR},
        {"time-noise", required_argument, 0, O_NOISE},
        {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *full_path = NULL, *out = NULL, *check = NULL, *gpu = NULL;
    long budget = 0, patience = 0, stages = 0, near = -1;
    double power = -1, unit_s = 0.001, noise = -2; /* -2: not given */
    bool verbose = false;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        switch (c) {
        case O_REPLAY:
            full_path = optarg;
            break;
        case O_BUDGET:
            if (!cli_parse_int(cmd, "--budget", optarg, 1, 100000000, &budget))
                return CLI_USAGE;
            break;
        case O_PATIENCE:
            if (!cli_parse_int(cmd, "--patience", optarg, 1, 1000, &patience))
                return CLI_USAGE;
            break;
        case O_STAGES:
            if (!cli_parse_int(cmd, "--stages", optarg, 1, 4096, &stages))
                return CLI_USAGE;
            break;
        case O_CHECK:
            check = optarg;
            break;
        case O_GPU:
            gpu = optarg;
            break;
        case O_POWER:
            if (!cli_parse_double(cmd, "--blocking-power", optarg, 0, 1e5, &power))
                return CLI_USAGE;
            break;
        case O_UNIT:
            if (!cli_parse_double(cmd, "--unit-time", optarg, 1e-6, 10, &unit_s))
                return CLI_USAGE;
            break;
        case O_VERBOSE:
            verbose = true;
            break;
        case O_NEAR:
            if (!cli_parse_int(cmd, "--near-max", optarg, 0, 1000, &near))
                return CLI_USAGE;
            break;
        case O_NOISE:
            if (!strcmp(optarg, "auto")) {
                noise = ERG_SPARSE_NOISE_AUTO;
                break;
            }
            {
                char *end;
                errno = 0;
                noise = strtod(optarg, &end);
                if (end == optarg || *end || errno || !(noise >= 0 && noise <= 1))
                    return cli_usage_error(cmd,
                                           "--time-noise expects a number in [0, 1] or 'auto', "
                                           "got '%s'",
                                           optarg);
            }
            break;
        case 'o':
            out = optarg;
            break;
        case 'h':
            usage_profile_sparse(stdout);
            return CLI_OK;
        default:
            return cli_bad_option(cmd, argv, opts);
        }
    }
    if (optind < argc)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!full_path)
        return cli_usage_error(cmd, "--replay FULL.csv is required (a live GPU is profiled "
                                    "sparsely by the server's InstructionProfiler)");
    if (!out)
        return cli_usage_error(cmd, "-o PRED.csv is required");
    long checkm[16];
    int ncheck = 0;
    if (check) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", check);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (ncheck == 16)
                return cli_usage_error(cmd, "--check: at most 16 microbatch counts");
            if (!cli_parse_int(cmd, "--check", tok, 1, 100000, &checkm[ncheck]))
                return CLI_USAGE;
            ncheck++;
        }
        if (!ncheck)
            return cli_usage_error(cmd, "--check needs a microbatch count");
        if (!cli_blocking_power(cmd, gpu, &power))
            return CLI_USAGE;
    } else if (gpu || power >= 0)
        return cli_usage_error(cmd, "--gpu/--blocking-power are only used with --check");
    erg_error err = {0};
    erg_profile *full = NULL, *pred = NULL;
    erg_sparse *sp = NULL;
    int *freqs = NULL;
    int rc = CLI_OK;
    if (erg_profile_read_csv(full_path, &full, &err)) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    int S = erg_profile_num_stages(full);
    if (stages) {
        if (stages > S) {
            rc = cli_usage_error(cmd, "--stages %ld: %s has %d stages", stages, full_path, S);
            goto done;
        }
        S = (int)stages;
    }
    size_t nf = 0;
    char bad[200] = "out of memory";
    if (!(freqs = common_clocks(full, S, &nf, bad, sizeof bad))) {
        fprintf(stderr,
                "ergon %s: %s: every (stage, instruction) must have the same clocks "
                "to replay a sweep: %s\n",
                cmd, full_path, bad);
        rc = CLI_USER_ERROR;
        goto done;
    }
    erg_sparse_opts so;
    erg_sparse_opts_init(&so);
    so.budget = (int)budget;
    if (patience)
        so.patience = (int)patience;
    if (near >= 0)
        so.near_max = (int)near;
    if (noise > -2)
        so.time_noise = noise; /* a number, or ERG_SPARSE_NOISE_AUTO */
    so.remeasure = false;      /* a repeat of a replayed point reads the same number */
    replay r = {full};
    int rounds = 0;
    if (erg_sparse_new(S, freqs, nf, &so, &sp, &err) ||
        erg_sparse_run(sp, replay_measure, &r, &rounds, &err) ||
        erg_sparse_write_csv(sp, out, &err) || erg_sparse_predict(sp, &pred, &err)) {
        rc = cli_report(cmd, &err);
        goto done;
    }
    int meas = erg_sparse_num_measured(sp), tot = erg_sparse_num_full(sp);
    printf("measured %d of %d (stage, instruction, clock) points (%.1f%% of a full sweep, "
           "1/%.1f) in %d rounds\n",
           meas, tot, 100.0 * meas / tot, (double)tot / meas, rounds);
    if (verbose)
        for (int s = 0; s < S; s++)
            for (int k = 0; k < 2; k++) {
                printf("  stage %d %-8s:", s, erg_instr_kind_name((erg_instr_kind)k));
                for (size_t i = nf; i-- > 0;)
                    if (erg_sparse_is_measured(sp, s, (erg_instr_kind)k, freqs[i]))
                        printf(" %d", freqs[i]);
                printf("\n");
            }
    double est = NAN;
    int est_pts = 0;
    double level = erg_sparse_noise(sp, &est, &est_pts);
    if (so.time_noise < 0) {
        if (isnan(est) || est_pts < 8)
            printf("noise not estimated (%d points; the default %.2f%% used)\n", est_pts,
                   100 * level);
        else
            printf("noise %.2f%% (estimated from %d points)%s\n", 100 * est, est_pts,
                   level >= ERG_SPARSE_NOISY ? ""
                   : level > est             ? ": below 0.50%, every measured point trusted "
                                               "(margins from the default 0.20%)"
                                             : ": below 0.50%, every measured point trusted");
    }
    if (level >= ERG_SPARSE_NOISY) {
        int total = 0;
        int *list = calloc(nf, sizeof(int));
        if (!list) {
            fprintf(stderr, "ergon %s: out of memory\n", cmd);
            rc = CLI_USER_ERROR;
            goto done;
        }
        for (int s = 0; s < S; s++)
            for (int k = 0; k < 2; k++)
                total += erg_sparse_uncertain(sp, s, (erg_instr_kind)k, NULL, 0);
        printf("noise %.2f%%: fitted; %d measured points depart from the fit by more than 2 "
               "standard deviations (a live profiler measures them again)\n",
               100 * level, total);
        for (int s = 0; s < S; s++)
            for (int k = 0; k < 2; k++) {
                int m = erg_sparse_uncertain(sp, s, (erg_instr_kind)k, list, (int)nf);
                if (!m)
                    continue;
                printf("  would measure again stage %d %-8s:", s,
                       erg_instr_kind_name((erg_instr_kind)k));
                for (int i = 0; i < m && i < (int)nf; i++)
                    printf(" %d", list[i]);
                printf("\n");
            }
        free(list);
    }
    for (int i = 0; i < ncheck; i++) {
        erg_sparse_check ck[3];
        if (erg_sparse_check_plans(full, pred, S, (int)checkm[i], power, unit_s, ck, &err)) {
            rc = cli_report(cmd, &err);
            goto done;
        }
        static const char *const tname[] = {"all-max time", "1% slowdown", "min energy"};
        for (int k = 0; k < 3; k++) {
            double gap = 100 * (ck[k].pred_energy_j / ck[k].ref_energy_j - 1);
            bool late = ck[k].pred_time_s > ck[k].deadline_s * (1 + 1e-12);
            char over[64] = "";
            if (late)
                snprintf(over, sizeof over, " SLOWER THAN TARGET by %.3f%%",
                         100 * (ck[k].pred_time_s / ck[k].deadline_s - 1));
            printf("check M=%ld %-12s: real-profile plan %.4f s %.2f J, predicted-profile plan "
                   "%.4f s %.2f J (%+.3f%%)%s\n",
                   checkm[i], tname[k], ck[k].ref_time_s, ck[k].ref_energy_j, ck[k].pred_time_s,
                   ck[k].pred_energy_j, gap, over);
        }
    }
done:
    free(freqs);
    erg_sparse_free(sp);
    erg_profile_free(pred);
    erg_profile_free(full);
    return rc;
}
