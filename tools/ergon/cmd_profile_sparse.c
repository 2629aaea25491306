/* cmd_profile_sparse.c: `ergon profile sparse`: sparse adaptive profiling,
 * replayed from a full profile (docs/sparse-profiling.md). */
#include "cli.h"

#include "ergon/emulate.h"
#include "ergon/sparse.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_help sparse_help = {
    "usage: ergon profile sparse --replay FULL.csv [--budget N] [--patience N]\n"
    "                            [--stages S] -o PRED.csv [--verbose]\n"
    "                            [--check M[,M...] (--gpu G | --blocking-power W)\n"
    "                             [--unit-time S]]\n",
    "Sparse adaptive profiling (docs/sparse-profiling.md): per (stage, instruction)\n"
    "measure the highest clock, step down to the energy valley (stopping below it once\n"
    "energy rose --patience measurements in a row, Zeus's rule), then measure where the\n"
    "curve is least known, and predict every other clock (time piecewise a/f + b, power\n"
    "piecewise linear in f). With --replay the 'measurements' are looked up in FULL.csv\n"
    "(offline evaluation). Writes the full predicted profile with a sixth column\n"
    "source = measured|predicted and prints the points measured against a full sweep of\n"
    "every clock of FULL.csv.\n",
    "exit status: 0 success, 1 bad input (named), 2 usage error.\n"};

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

/* One `ergon profile sparse`: its options. */
typedef struct sparse_args {
    const char *full_path, *out, *check, *gpu;
    long budget, patience, stages, near;
    double power, unit_s, noise; /* noise -2: not given */
    bool verbose;
    long checkm[16];
    int ncheck;
} sparse_args;

static int noise_opt(const char *cmd, const char *value, void *dest)
{
    double *noise = dest;
    if (!strcmp(value, "auto")) {
        *noise = ERG_SPARSE_NOISE_AUTO;
        return CLI_OK;
    }
    char *end;
    errno = 0;
    *noise = strtod(value, &end);
    if (end == value || *end || errno || !(*noise >= 0 && *noise <= 1))
        return cli_usage_error(cmd, "--time-noise expects a number in [0, 1] or 'auto', got '%s'",
                               value);
    return CLI_OK;
}

static int sparse_parse(const char *cmd, sparse_args *a, int argc, char **argv)
{
    const cli_opt opts[] = {
        CLI_OPT_S("replay", "FULL.csv", &a->full_path,
                  "look the 'measurements' up in this full profile"),
        {.name = "output",
         .short_name = 'o',
         .kind = CLI_OPT_STR,
         .arg = "PRED.csv",
         .dest = &a->out,
         .help = "the predicted profile"},
        CLI_OPT_L("budget", "N", &a->budget, 1, 100000000,
                  "most (stage, instruction, clock) points measured in all\n"
                  "(default: a sixth of the full sweep, at least 4 per\n"
                  "(stage, instruction))"),
        CLI_OPT_L("patience", "N", &a->patience, 1, 1000,
                  "rises below the valley before going no lower (default 2)"),
        CLI_OPT_L("near-max", "N", &a->near, 0, 1000,
                  "clocks right below the maximum always measured (default 2)"),
        CLI_OPT_CALL("time-noise", "X", noise_opt, &a->noise,
                     "relative noise of a measurement (time and energy; default\n"
                     "0.002: the least margin a predicted time gets). From\n"
                     "0.005 on the measurements are fitted, not trusted point\n"
                     "by point (shared shape smoothed over neighbouring\n"
                     "clocks, each stage's level and tilt), a quarter of the\n"
                     "sweep is measured, and the points departing from the fit\n"
                     "by more than 2 standard deviations are listed: a live\n"
                     "profiler measures them again, a replay cannot.\n"
                     "--time-noise auto: estimate it from the measurements as they\narrive: "
                     "neighbouring stages' differences between consecutive\n"
                     "common clocks (the shared curve cancels), robust spread\n"
                     "(median); along each curve with one stage. An upper\n"
                     "bound (what of the curves does not cancel counts);\n"
                     "printed as 'noise X% (estimated from N points)'"),
        CLI_OPT_STAGES(&a->stages, "profile only stages 0..S-1 (default: all of FULL.csv)"),
        CLI_OPT_B("verbose", &a->verbose, "list the measured clocks of every (stage, instruction)"),
        CLI_OPT_S("check", "M,...", &a->check,
                  "also plan S stages x M microbatches (1F1B, Perseus\n"
                  "frontier, --unit-time, default 0.001 s) on FULL.csv and on\n"
                  "the prediction, choose at three targets (all-max time, 1 %\n"
                  "slower, minimum energy) and print both choices evaluated on\n"
                  "FULL.csv: energy gap and whether the target is met"),
        CLI_OPT_S("gpu", "G", &a->gpu, "with --check: A40 or A100 blocking power"),
        CLI_OPT_D("blocking-power", "W", &a->power, 0, 1e5, "with --check: the blocking power"),
        CLI_OPT_D("unit-time", "S", &a->unit_s, 1e-6, 10, "with --check: the planner's unit"),
        CLI_OPTS_END,
    };
    int rc = cli_opts_parse_all(cmd, argc, argv, opts, &sparse_help);
    if (rc)
        return rc;
    if (!a->full_path)
        return cli_usage_error(cmd, "--replay FULL.csv is required (a live GPU is profiled "
                                    "sparsely by the server's InstructionProfiler)");
    if (!a->out)
        return cli_usage_error(cmd, "-o PRED.csv is required");
    if (!a->check) {
        if (a->gpu || a->power >= 0)
            return cli_usage_error(cmd, "--gpu/--blocking-power are only used with --check");
        return CLI_OK;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", a->check);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (a->ncheck == 16)
            return cli_usage_error(cmd, "--check: at most 16 microbatch counts");
        if (!cli_parse_int(cmd, "--check", tok, 1, 100000, &a->checkm[a->ncheck]))
            return CLI_USAGE;
        a->ncheck++;
    }
    if (!a->ncheck)
        return cli_usage_error(cmd, "--check needs a microbatch count");
    return cli_blocking_power(cmd, a->gpu, &a->power) ? CLI_OK : CLI_USAGE;
}

int profile_sparse(int argc, char **argv);

int profile_sparse(int argc, char **argv)
{
    const char *cmd = "profile sparse";
    sparse_args a = {.near = -1, .power = -1, .unit_s = 0.001, .noise = -2};
    int prc = sparse_parse(cmd, &a, argc, argv);
    if (prc)
        return prc == CLI_HELP ? CLI_OK : prc;
    const char *full_path = a.full_path, *out = a.out;
    long budget = a.budget, patience = a.patience, stages = a.stages, near = a.near;
    double power = a.power, unit_s = a.unit_s, noise = a.noise;
    bool verbose = a.verbose;
    const long *checkm = a.checkm;
    int ncheck = a.ncheck;
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
