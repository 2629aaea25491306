/* test_sparse.c: sparse adaptive profiling (erg_sparse_*), its plan check and
 * the measurement-stability helper (erg_stable_measure). By design, in the ASan build the
 * published-profile cases run one profile instead of four and no M=96 plan check (time;
 * docs/testing.md, "Skips"). */
#include "tap.h"

#include "ergon/gpu.h"
#include "ergon/emulate.h"
#include "ergon/sparse.h"

#include <stdint.h>
#include <unistd.h>

/* Replay a full profile as the measurement source, counting calls. */
typedef struct replay {
    const erg_profile *full;
    int calls;
    int fail_at; /* fail on this call (1-based), 0 = never */
} replay;

static erg_status replay_measure(void *user, int stage, erg_instr_kind kind, int freq_mhz,
                                 erg_profile_point *out, erg_error *err)
{
    replay *r = user;
    if (++r->calls == r->fail_at)
        return erg_error_set(err, ERG_EIO, "measurement %d failed", r->calls);
    return erg_profile_lookup(r->full, stage, kind, freq_mhz, out, err);
}

static int clocks_of(const erg_profile *p, int *f)
{
    size_t n = erg_profile_num_points(p, 0, ERG_FORWARD);
    const erg_profile_point *v = erg_profile_points(p, 0, ERG_FORWARD);
    for (size_t i = 0; i < n; i++)
        f[i] = v[i].freq_mhz;
    return (int)n;
}

/* Sparse replay of `full` (S stages) with default options; *pred gets the
 * predicted profile. */
static erg_sparse *run_sparse(const erg_profile *full, int S, erg_profile **pred)
{
    erg_error err;
    int f[512];
    int n = clocks_of(full, f);
    erg_sparse *sp;
    ASSERT_OK(erg_sparse_new(S, f, (size_t)n, NULL, &sp, &err));
    replay r = {full, 0, 0};
    int rounds = 0;
    ASSERT_OK(erg_sparse_run(sp, replay_measure, &r, &rounds, &err));
    ASSERT_EQ_INT(r.calls, erg_sparse_num_measured(sp));
    ASSERT(rounds >= 2);
    ASSERT(erg_sparse_done(sp));
    if (pred)
        ASSERT_OK(erg_sparse_predict(sp, pred, &err));
    return sp;
}

/* The simulated GPUs are smooth profiles the procedure was not developed on. */
TEST(sparse_predicts_simulated_gpus_within_tolerance)
{
    const char *gpus[] = {"a100", "a40", "h100", "v100"};
    for (size_t g = 0; g < 4; g++) {
        erg_error err;
        erg_profile *full, *pred;
        ASSERT_OK(erg_sim_profile(gpus[g], "gpt3-2.7b", 4, 0, 0, &full, &err));
        erg_sparse *sp = run_sparse(full, 4, &pred);
        ASSERT_MSG(erg_sparse_num_measured(sp) * 6 <= erg_sparse_num_full(sp),
                   "%s: measured %d of %d", gpus[g], erg_sparse_num_measured(sp),
                   erg_sparse_num_full(sp));
        double worst_t = 0, worst_e = 0;
        for (int s = 0; s < 4; s++)
            for (int k = 0; k < 2; k++) {
                size_t n = erg_profile_num_points(full, s, (erg_instr_kind)k);
                const erg_profile_point *v = erg_profile_points(full, s, (erg_instr_kind)k);
                for (size_t i = 0; i < n; i++) {
                    erg_profile_point q;
                    ASSERT_OK(
                        erg_profile_lookup(pred, s, (erg_instr_kind)k, v[i].freq_mhz, &q, &err));
                    if (erg_sparse_is_measured(sp, s, (erg_instr_kind)k, v[i].freq_mhz)) {
                        ASSERT_NEAR(q.time_s, v[i].time_s, 0);
                        ASSERT_NEAR(q.energy_j, v[i].energy_j, 0);
                    }
                    double dt = fabs(q.time_s / v[i].time_s - 1);
                    double de = fabs(q.energy_j / v[i].energy_j - 1);
                    worst_t = dt > worst_t ? dt : worst_t;
                    worst_e = de > worst_e ? de : worst_e;
                }
            }
        printf("# %s: %d of %d points, worst time error %.3f%%, energy %.3f%%\n", gpus[g],
               erg_sparse_num_measured(sp), erg_sparse_num_full(sp), 100 * worst_t, 100 * worst_e);
        /* the noise margin is 0.2 %, the model is exact up to interpolation */
        ASSERT_MSG(worst_t < 0.01 && worst_e < 0.02, "%s: time %.4f energy %.4f", gpus[g], worst_t,
                   worst_e);
        /* plans chosen on the prediction, run on the simulated profile */
        erg_sparse_check ck[3];
        ASSERT_OK(erg_sparse_check_plans(full, pred, 4, 8, 80, 0.0001, ck, &err));
        for (int t = 0; t < 3; t++) {
            printf("#   target %d: %.4f s %.3f J vs %.4f s %.3f J\n", t, ck[t].pred_time_s,
                   ck[t].pred_energy_j, ck[t].ref_time_s, ck[t].ref_energy_j);
            ASSERT_MSG(ck[t].pred_energy_j <= ck[t].ref_energy_j * 1.005,
                       "%s target %d: %.3f J vs %.3f J", gpus[g], t, ck[t].pred_energy_j,
                       ck[t].ref_energy_j);
            ASSERT(ck[t].pred_time_s <= ck[t].deadline_s * (1 + 1e-12));
        }
        erg_profile_free(pred);
        erg_profile_free(full);
        erg_sparse_free(sp);
    }
}

/* A synthetic valley: energy falls to 1200 MHz and rises below it. The
 * procedure measures the maximum first, stops going down (Zeus's rule) well
 * before the bottom, and never asks for a clock twice. */
TEST(sparse_descends_to_valley_and_stops_below_it)
{
    erg_error err;
    erg_profile *full;
    ASSERT_OK(erg_profile_new(&full, &err));
    int f[61];
    for (int i = 0; i < 61; i++) {
        f[i] = 600 + 15 * i; /* 600..1500 */
        double t = 1.0 / f[i] * 1000 + 0.2;
        double p = 100 + 200 * pow(f[i] / 1500.0, 3);
        erg_profile_point pt = {f[i], t, p * t};
        ASSERT_OK(erg_profile_add(full, 0, ERG_FORWARD, &pt, &err));
        pt.time_s *= 2;
        pt.energy_j *= 2;
        ASSERT_OK(erg_profile_add(full, 0, ERG_BACKWARD, &pt, &err));
    }
    erg_sparse *sp;
    erg_sparse_opts o;
    erg_sparse_opts_init(&o);
    o.budget = 40;
    ASSERT_OK(erg_sparse_new(1, f, 61, &o, &sp, &err));
    ASSERT_EQ_INT(erg_sparse_next(sp, 0, ERG_FORWARD), 1500);
    ASSERT_EQ_INT(erg_sparse_next(sp, 0, ERG_FORWARD), 1500); /* pure */
    replay r = {full, 0, 0};
    ASSERT_OK(erg_sparse_run(sp, replay_measure, &r, NULL, &err));
    ASSERT(erg_sparse_num_measured(sp) <= 40);
    /* where is the valley of the synthetic curve, and the lowest clock asked */
    int valley = 0;
    double emin = INFINITY;
    for (int i = 0; i < 61; i++) {
        erg_profile_point pt;
        ASSERT_OK(erg_profile_lookup(full, 0, ERG_FORWARD, f[i], &pt, &err));
        if (pt.energy_j < emin)
            emin = pt.energy_j, valley = f[i];
    }
    int lowest = 100000;
    for (int i = 0; i < 61; i++)
        if (erg_sparse_is_measured(sp, 0, ERG_FORWARD, f[i]) && f[i] < lowest)
            lowest = f[i];
    printf("# valley %d MHz, lowest measured %d MHz, %d points\n", valley, lowest,
           erg_sparse_num_measured(sp));
    ASSERT(lowest < valley);
    ASSERT_MSG(lowest > 600, "went to the bottom (%d MHz) though energy kept rising", lowest);
    ASSERT(erg_sparse_is_measured(sp, 0, ERG_FORWARD, 1500));
    erg_sparse_free(sp);
    erg_profile_free(full);
}

TEST(sparse_csv_has_source_column_and_reads_back)
{
    erg_error err;
    erg_profile *full, *pred, *back;
    ASSERT_OK(erg_sim_profile("a100", "gpt3-xl", 2, 0, 0, &full, &err));
    erg_sparse *sp = run_sparse(full, 2, &pred);
    char path[] = "/tmp/ergon_sparse_XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    close(fd);
    ASSERT_OK(erg_sparse_write_csv(sp, path, &err));
    ASSERT_OK(erg_profile_read_csv(path, &back, &err));
    FILE *fp = fopen(path, "r");
    char line[256];
    ASSERT(fgets(line, sizeof line, fp));
    ASSERT_STR_EQ(line, "stage,instruction,frequency,time,energy,source\n");
    int measured = 0, predicted = 0;
    while (fgets(line, sizeof line, fp)) {
        measured += strstr(line, ",measured\n") != NULL;
        predicted += strstr(line, ",predicted\n") != NULL;
    }
    fclose(fp);
    unlink(path);
    ASSERT_EQ_INT(measured, erg_sparse_num_measured(sp));
    ASSERT_EQ_INT(measured + predicted, erg_sparse_num_full(sp));
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 2; k++) {
            size_t n = erg_profile_num_points(pred, s, (erg_instr_kind)k);
            ASSERT_EQ_INT(erg_profile_num_points(back, s, (erg_instr_kind)k), n);
            const erg_profile_point *v = erg_profile_points(pred, s, (erg_instr_kind)k);
            for (size_t i = 0; i < n; i++) {
                erg_profile_point q;
                ASSERT_OK(erg_profile_lookup(back, s, (erg_instr_kind)k, v[i].freq_mhz, &q, &err));
                ASSERT_NEAR(q.time_s, v[i].time_s, 0);
                ASSERT_NEAR(q.energy_j, v[i].energy_j, 0);
            }
        }
    erg_profile_free(back);
    erg_profile_free(pred);
    erg_profile_free(full);
    erg_sparse_free(sp);
}

TEST(sparse_rejects_bad_input)
{
    erg_error err;
    erg_sparse *sp;
    int f[] = {1000, 900, 900, 800};
    ASSERT_EQ_INT(erg_sparse_new(0, f, 4, NULL, &sp, &err), ERG_EINVAL);
    ASSERT_EQ_INT(erg_sparse_new(1, f, 1, NULL, &sp, &err), ERG_EINVAL);
    int neg[] = {1000, -5};
    ASSERT_EQ_INT(erg_sparse_new(1, neg, 2, NULL, &sp, &err), ERG_EINVAL);
    erg_sparse_opts o;
    erg_sparse_opts_init(&o);
    o.budget = 1; /* less than one point per (stage, instruction) */
    ASSERT_EQ_INT(erg_sparse_new(1, f, 4, &o, &sp, &err), ERG_EINVAL);
    ASSERT_OK(erg_sparse_new(1, f, 4, NULL, &sp, &err));
    erg_profile *p;
    ASSERT_EQ_INT(erg_sparse_predict(sp, &p, &err), ERG_ESTATE);
    erg_profile_point pt = {950, 1, 1};
    ASSERT_EQ_INT(erg_sparse_report(sp, 0, ERG_FORWARD, &pt, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "950 MHz");
    pt.freq_mhz = 900;
    pt.time_s = NAN;
    ASSERT_EQ_INT(erg_sparse_report(sp, 0, ERG_FORWARD, &pt, &err), ERG_EINVAL);
    pt.time_s = 1;
    ASSERT_OK(erg_sparse_report(sp, 0, ERG_FORWARD, &pt, &err));
    ASSERT_EQ_INT(erg_sparse_report(sp, 0, ERG_FORWARD, &pt, &err), ERG_EEXIST);
    ASSERT_EQ_INT(erg_sparse_report(sp, 3, ERG_FORWARD, &pt, &err), ERG_EINVAL);
    ASSERT_EQ_INT(erg_sparse_next(sp, 5, ERG_FORWARD), 0);
    /* a failing measurement stops the run with its error */
    erg_profile *full;
    ASSERT_OK(erg_sim_profile("a100", "gpt3-xl", 1, 0, 0, &full, &err));
    int fc[512];
    int n = clocks_of(full, fc);
    erg_sparse *sp2;
    ASSERT_OK(erg_sparse_new(1, fc, (size_t)n, NULL, &sp2, &err));
    replay r = {full, 0, 3};
    ASSERT_EQ_INT(erg_sparse_run(sp2, replay_measure, &r, NULL, &err), ERG_EIO);
    ASSERT_CONTAINS(err.msg, "measurement 3 failed");
    erg_sparse_free(sp2);
    erg_profile_free(full);
    erg_sparse_free(sp);
}

/* Stages 0-2 are replicas (the same numbers, as in a profile that measured
 * one stage and copied it), stage 3 departs smoothly from them, and the
 * curve has clock-to-clock jags no interpolation can predict. Once the
 * maximum and the clock below it show which stages are replicas, the group
 * measures one pooled curve with their three budgets: no clock twice, so it
 * covers three times as many clocks as one stage would, and a clock one
 * replica measured is exact on the others (no margin). Before pooling the
 * budgets, every replica measured the near-maximum clocks itself and their
 * descents collided: the group covered fewer distinct clocks. */
TEST(sparse_pools_replica_stages)
{
    erg_error err;
    erg_profile *full, *pred;
    ASSERT_OK(erg_profile_new(&full, &err));
    int f[61];
    for (int i = 0; i < 61; i++) {
        f[i] = 600 + 15 * i;
        double jag = 1 + 0.01 * ((i * 7) % 5 - 2) / 2.0; /* -1..+1 % */
        for (int s = 0; s < 4; s++) {
            double dev = s == 3 ? 1 + 0.02 * (1500 - f[i]) / 900.0 : 1;
            double t = (1.0 / f[i] * 1000 + 0.2) * jag * dev;
            double p = 100 + 200 * pow(f[i] / 1500.0, 3);
            for (int k = 0; k < 2; k++) {
                erg_profile_point pt = {f[i], t * (k + 1), p * t * (k + 1)};
                ASSERT_OK(erg_profile_add(full, s, (erg_instr_kind)k, &pt, &err));
            }
        }
    }
    erg_sparse_opts o;
    erg_sparse_opts_init(&o);
    o.budget = 80; /* 10 per (stage, instruction) */
    erg_sparse *sp;
    ASSERT_OK(erg_sparse_new(4, f, 61, &o, &sp, &err));
    replay r = {full, 0, 0};
    ASSERT_OK(erg_sparse_run(sp, replay_measure, &r, NULL, &err));
    ASSERT_OK(erg_sparse_predict(sp, &pred, &err));
    int pooled = 0, own3 = 0, distinct = 0;
    for (int i = 0; i < 61; i++) {
        bool m[4];
        for (int s = 0; s < 4; s++)
            m[s] = erg_sparse_is_measured(sp, s, ERG_BACKWARD, f[i]);
        distinct += m[0] || m[1] || m[2];
        own3 += m[3];
        /* the maximum and the clock below it, which every stage measures
         * before the replicas are known, aside: no clock twice */
        if (i < 59)
            ASSERT_MSG(m[0] + m[1] + m[2] <= 1, "%d MHz measured by %d replicas", f[i],
                       m[0] + m[1] + m[2]);
        if (m[0] || !(m[1] || m[2]))
            continue;
        erg_profile_point q, t;
        ASSERT_OK(erg_profile_lookup(pred, 0, ERG_BACKWARD, f[i], &q, &err));
        ASSERT_OK(erg_profile_lookup(full, 0, ERG_BACKWARD, f[i], &t, &err));
        ASSERT_MSG(q.time_s == t.time_s && q.energy_j == t.energy_j,
                   "%d MHz measured on a replica: predicted %.6g s %.6g J, real %.6g s %.6g J",
                   f[i], q.time_s, q.energy_j, t.time_s, t.energy_j);
        pooled++;
    }
    printf("# the replicas measured %d distinct clocks, %d of them on stage 0's twins; "
           "stage 3 %d\n",
           distinct, pooled, own3);
    /* 30 points of budget, 2 x 2 spent on detection twice */
    ASSERT_EQ_INT(distinct, 26);
    ASSERT(pooled >= 15);
    ASSERT_EQ_INT(own3, 10);
    erg_profile_free(pred);
    erg_sparse_free(sp);
    erg_profile_free(full);
}

/* ---- the four published profiles ---- */

/* Predicted energies carry the uncertainty margin (energy_margin, default 1): every
 * predicted point's energy (not measured by its stage or a replica stage) is at least
 * (1 + time_noise) times what the same prediction gives with energy_margin 0, measured
 * points are unchanged, and times do not depend on it. Without
 * the margin, plans chose predicted clocks on the jagged A40 curve that were dearer than
 * predicted (bloom A40 M = 96: +0.66 % and +0.73 %, docs/sparse-profiling.md). */
TEST(sparse_predicted_energy_carries_margin)
{
    erg_profile *full = NULL;
    erg_error err;
    ASSERT_OK(erg_sim_profile("a40", "gpt3-2.7b", 4, 0, 0, &full, &err));
    int f[512];
    int n = clocks_of(full, f);
    erg_profile *pred[2] = {NULL, NULL};
    erg_sparse *sps[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        erg_sparse_opts o;
        erg_sparse_opts_init(&o);
        ASSERT(o.energy_margin == 1.0);
        if (k == 0)
            o.energy_margin = 0;
        ASSERT_OK(erg_sparse_new(4, f, (size_t)n, &o, &sps[k], &err));
        replay r = {full, 0, 0};
        ASSERT_OK(erg_sparse_run(sps[k], replay_measure, &r, NULL, &err));
        ASSERT_OK(erg_sparse_predict(sps[k], &pred[k], &err));
    }
    int npred = 0;
    for (int s = 0; s < 4; s++)
        for (int kind = 0; kind < 2; kind++)
            for (int x = 0; x < n; x++) {
                erg_profile_point a, b;
                ASSERT_OK(erg_profile_lookup(pred[0], s, (erg_instr_kind)kind, f[x], &a, &err));
                ASSERT_OK(erg_profile_lookup(pred[1], s, (erg_instr_kind)kind, f[x], &b, &err));
                ASSERT(a.time_s == b.time_s);
                if (erg_sparse_is_measured(sps[1], s, (erg_instr_kind)kind, f[x])) {
                    ASSERT(a.energy_j == b.energy_j);
                } else if (b.energy_j != a.energy_j) {
                    /* (a clock a replica stage measured is exact: no margin) */
                    ASSERT(b.energy_j >= a.energy_j * (1 + 0.002) * (1 - 1e-12));
                    npred++;
                }
            }
    ASSERT(npred > 2 * n); /* most of the 4 x 2 x n points are predicted */
    erg_sparse_opts o;
    erg_sparse_opts_init(&o);
    o.energy_margin = -1;
    erg_sparse *bad = NULL;
    ASSERT_EQ_INT(erg_sparse_new(4, f, (size_t)n, &o, &bad, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "energy margin -1");
    for (int k = 0; k < 2; k++) {
        erg_profile_free(pred[k]);
        erg_sparse_free(sps[k]);
    }
    erg_profile_free(full);
}

/* Must-show of issue 12: at most a sixth of the sweep, and plans chosen on the
 * prediction within 0.5 % of the energy of plans chosen on the real profile,
 * never slower than the target, at M = 12 and 96 on all four profiles. M = 12
 * at the unit 0.1 ms of docs/results.md; M = 96 at 1 ms (0.1 ms takes ~60 s a
 * profile; docs/results.md has it): ~45 s in Release. Before replica groups
 * pooled their budgets, M = 96 at 1 ms reached +1.1 % (GPT-3 A100 all-max).
 * Under ASan (4-10x slower) one profile, M = 12 only. */
TEST(sparse_plans_on_published_profiles)
{
    const char *dir = ERG_TEST_DATA_DIR "/published/perseus-sosp24/stage_profile";
    tap_need_data(dir);
    const char *names[] = {"gpt3-175b+a100_sxm", "bloom+a100_sxm", "gpt3-175b+a40", "bloom+a40"};
    const int Ms[] = {12, 96};
    const double units[] = {0.0001, 0.001};
    int bad = 0;
    /* under ASan (4-10x slower) one profile covers the code */
    for (int i = 0; i < (getenv("ERGON_SANITIZED") ? 1 : 4); i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s_bf16.csv", dir, names[i]);
        erg_error err;
        erg_profile *full, *pred;
        ASSERT_OK(erg_profile_read_csv(path, &full, &err));
        erg_sparse *sp = run_sparse(full, 8, &pred);
        ASSERT_MSG(erg_sparse_num_measured(sp) * 6 <= erg_sparse_num_full(sp),
                   "%s: measured %d of %d", names[i], erg_sparse_num_measured(sp),
                   erg_sparse_num_full(sp));
        double power = strstr(names[i], "a40") ? 70.38 : 83.64;
        for (int m = 0; m < 2; m++) {
            if (Ms[m] == 96 && getenv("ERGON_SANITIZED")) {
                printf("# %s M=96 skipped under a sanitizer (time)\n", names[i]);
                continue;
            }
            erg_sparse_check ck[3];
            ASSERT_OK(erg_sparse_check_plans(full, pred, 8, Ms[m], power, units[m], ck, &err));
            for (int t = 0; t < 3; t++) {
                double gap = 100 * (ck[t].pred_energy_j / ck[t].ref_energy_j - 1);
                bool late = ck[t].pred_time_s > ck[t].deadline_s * (1 + 1e-12);
                fprintf(stderr, "# %s M=%d target %d: %d/%d points, energy %+.3f%%%s\n", names[i],
                        Ms[m], t, erg_sparse_num_measured(sp), erg_sparse_num_full(sp), gap,
                        late ? " LATE" : "");
                if (gap > 0.5 || late)
                    bad++;
            }
        }
        erg_profile_free(pred);
        erg_profile_free(full);
        erg_sparse_free(sp);
    }
    ASSERT_EQ_INT(bad, 0);
}

/* The noise estimated (ERG_SPARSE_NOISE_AUTO) on the four published
 * profiles with no noise added: the estimate (an upper bound: the curves'
 * own jags count) stays near or below ERG_SPARSE_NOISY, and the plans
 * chosen on the prediction (M = 12, 0.1 ms) are within 0.5 % of the full
 * sweep's and on time. Where it stays below 0.5 % a sixth is measured. */
TEST(sparse_estimates_noise_on_published_profiles)
{
    const char *dir = ERG_TEST_DATA_DIR "/published/perseus-sosp24/stage_profile";
    tap_need_data(dir);
    const char *names[] = {"gpt3-175b+a100_sxm", "bloom+a100_sxm", "gpt3-175b+a40", "bloom+a40"};
    int bad = 0;
    for (int i = 0; i < (getenv("ERGON_SANITIZED") ? 1 : 4); i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s_bf16.csv", dir, names[i]);
        erg_error err;
        erg_profile *full, *pred;
        ASSERT_OK(erg_profile_read_csv(path, &full, &err));
        int f[512];
        int n = clocks_of(full, f);
        erg_sparse_opts o;
        erg_sparse_opts_init(&o);
        o.time_noise = ERG_SPARSE_NOISE_AUTO;
        o.remeasure = false;
        erg_sparse *sp;
        ASSERT_OK(erg_sparse_new(8, f, (size_t)n, &o, &sp, &err));
        replay r = {full, 0, 0};
        ASSERT_OK(erg_sparse_run(sp, replay_measure, &r, NULL, &err));
        ASSERT_OK(erg_sparse_predict(sp, &pred, &err));
        double est;
        int pts;
        double used = erg_sparse_noise(sp, &est, &pts);
        double frac = (double)erg_sparse_num_measured(sp) / erg_sparse_num_full(sp);
        fprintf(stderr,
                "# %s: noise estimated %.3f%% from %d points (in use %.3f%%), %.3f of the sweep\n",
                names[i], 100 * est, pts, 100 * used, frac);
        ASSERT(pts >= 8);
        ASSERT_MSG(est < ERG_SPARSE_NOISY, "%s: estimate %g on a noise-free profile", names[i],
                   est);
        ASSERT(frac <= (used < ERG_SPARSE_NOISY ? 1.0 / 6 : 0.25) + 1e-9);
        double power = strstr(names[i], "a40") ? 70.38 : 83.64;
        erg_sparse_check ck[3];
        ASSERT_OK(erg_sparse_check_plans(full, pred, 8, 12, power, 0.0001, ck, &err));
        for (int t = 0; t < 3; t++) {
            double gap = 100 * (ck[t].pred_energy_j / ck[t].ref_energy_j - 1);
            bool late = ck[t].pred_time_s > ck[t].deadline_s * (1 + 1e-12);
            fprintf(stderr, "# %s M=12 target %d (noise estimated): energy %+.3f%%%s\n", names[i],
                    t, gap, late ? " LATE" : "");
            bad += gap > 0.5 || late;
        }
        erg_profile_free(pred);
        erg_profile_free(full);
        erg_sparse_free(sp);
    }
    ASSERT_EQ_INT(bad, 0);
}

/* ---- under measurement noise ---- */

/* A fixed, portable PRNG (splitmix64) and normal deviates by Box-Muller. */
typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_normal(rng *r)
{
    double u1 = ((rng_next(r) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (rng_next(r) >> 11) / 9007199254740992.0;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The noise-free profile measured with independent relative noise sigma on
 * every time and energy. With `first` (a noisy sweep of it), the first
 * measurement of a point is the sweep's (the sparse profiler measures a subset
 * of the same noisy world), a repeat a fresh draw. */
typedef struct noisy {
    const erg_profile *truth, *first;
    double sigma;
    rng r;
    int calls;
    erg_sparse *sp;
} noisy;

static erg_status noisy_measure(void *user, int stage, erg_instr_kind kind, int freq_mhz,
                                erg_profile_point *out, erg_error *err)
{
    noisy *q = user;
    q->calls++;
    if (q->first && !erg_sparse_is_measured(q->sp, stage, kind, freq_mhz))
        return erg_profile_lookup(q->first, stage, kind, freq_mhz, out, err);
    erg_status st = erg_profile_lookup(q->truth, stage, kind, freq_mhz, out, err);
    if (st)
        return st;
    out->time_s *= 1 + q->sigma * rng_normal(&q->r);
    out->energy_j *= 1 + q->sigma * rng_normal(&q->r);
    return ERG_OK;
}

/* A full sweep of `truth` with one noisy draw per point. */
static erg_profile *noisy_sweep(const erg_profile *truth, int S, double sigma, uint64_t seed)
{
    erg_error err;
    erg_profile *p;
    ASSERT_OK(erg_profile_new(&p, &err));
    noisy q = {truth, NULL, sigma, {seed}, 0, NULL};
    for (int s = 0; s < S; s++)
        for (int k = 0; k < 2; k++) {
            size_t n = erg_profile_num_points(truth, s, (erg_instr_kind)k);
            const erg_profile_point *v = erg_profile_points(truth, s, (erg_instr_kind)k);
            for (size_t i = 0; i < n; i++) {
                erg_profile_point pt;
                ASSERT_OK(noisy_measure(&q, s, (erg_instr_kind)k, v[i].freq_mhz, &pt, &err));
                ASSERT_OK(erg_profile_add(p, s, (erg_instr_kind)k, &pt, &err));
            }
        }
    return p;
}

/* Issue 26: every point of the four published profiles measured with
 * independent noise of 1 % and 2 % (time and energy; the sparse profiler's
 * first measurement of a point is the noisy sweep's, a repeat a fresh draw;
 * fixed seeds). Plans chosen on the sparse profile and on the full noisy
 * sweep, each against its own all-max time (x 1, x 1.01, no deadline), both
 * evaluated on the noise-free profile. A cell passes when the sparse plan's
 * energy is within 0.5 % of the full sweep's, or -- time targets, where the
 * later plan is also the cheaper -- its loss against the best plan as fast as
 * itself is within 0.5 points of the full sweep plan's; and when it is no
 * later on the truth than the full sweep's plan (or the target) by more than
 * sigma / 4. At most a quarter of the sweep measured. M = 12 at 1 ms. Over
 * other draws (ERGON_NOISE_SEED_SET) 92-94 % of the cells pass, not all
 * (docs/sparse-profiling.md, "Under measurement noise"). */
TEST(sparse_plans_under_noise)
{
    const char *dir = ERG_TEST_DATA_DIR "/published/perseus-sosp24/stage_profile";
    tap_need_data(dir);
    const char *names[] = {"gpt3-175b+a100_sxm", "bloom+a100_sxm", "gpt3-175b+a40", "bloom+a40"};
    const double sigmas[] = {0.01, 0.02};
    int bad = 0;
    double worst_gap = -INFINITY, worst_late = 0, worst_frac = 0;
    /* declared noise, then estimated (ERG_SPARSE_NOISE_AUTO): the estimate
     * within a factor 1.5 of the truth, and the same cells pass */
    /* under a sanitizer (time) one profile each way: GPT-3 A100 declared,
     * GPT-3 A40 estimated */
    bool sanitized = getenv("ERGON_SANITIZED") != NULL;
    for (int run = 0; run < 8; run += sanitized ? 6 : 1) {
        int mode = run / 4, i = run % 4;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s_bf16.csv", dir, names[i]);
        erg_error err;
        erg_profile *truth;
        ASSERT_OK(erg_profile_read_csv(path, &truth, &err));
        int f[512];
        int n = clocks_of(truth, f);
        double power = strstr(names[i], "a40") ? 70.38 : 83.64;
        for (int j = 0; j < 2; j++) {
            double sigma = sigmas[j];
            /* ERGON_NOISE_SEED_SET=k draws another set (docs: the table over
             * sets 0-7); the test uses set 0 */
            const char *set = getenv("ERGON_NOISE_SEED_SET");
            uint64_t seed = 1000 * (uint64_t)(i + 1) + (uint64_t)j +
                            (set ? 100000 * (uint64_t)strtoul(set, NULL, 10) : 0);
            erg_profile *ref = noisy_sweep(truth, 8, sigma, seed);
            erg_sparse_opts o;
            erg_sparse_opts_init(&o);
            o.time_noise = mode ? ERG_SPARSE_NOISE_AUTO : sigma;
            erg_sparse *sp;
            ASSERT_OK(erg_sparse_new(8, f, (size_t)n, &o, &sp, &err));
            noisy q = {truth, ref, sigma, {seed ^ 0x5eed5eedull}, 0, sp};
            ASSERT_OK(erg_sparse_run(sp, noisy_measure, &q, NULL, &err));
            ASSERT_EQ_INT(q.calls, erg_sparse_num_measured(sp));
            double est;
            int pts;
            double used = erg_sparse_noise(sp, &est, &pts);
            if (mode) {
                fprintf(stderr, "# %s sigma %.0f%%: noise estimated %.3f%% from %d points\n",
                        names[i], 100 * sigma, 100 * est, pts);
                ASSERT_MSG(est >= sigma / 1.5 && est <= sigma * 1.5, "%s: noise %g estimated as %g",
                           names[i], sigma, est);
                ASSERT_NEAR(used, est, 1e-15);
            } else
                ASSERT_NEAR(used, sigma, 0);
            erg_profile *pred;
            ASSERT_OK(erg_sparse_predict(sp, &pred, &err));
            double frac = (double)erg_sparse_num_measured(sp) / erg_sparse_num_full(sp);
            if (frac > 0.25)
                bad++;
            worst_frac = frac > worst_frac ? frac : worst_frac;
            erg_sparse_check ck[3];
            ASSERT_OK(
                erg_sparse_check_plans_noisy(truth, ref, pred, 8, 12, power, 0.001, ck, &err));
            for (int t = 0; t < 3; t++) {
                double gap = 100 * (ck[t].pred_energy_j / ck[t].ref_energy_j - 1);
                double late = 100 * (ck[t].pred_time_s / ck[t].deadline_s - 1);
                double rlate = 100 * (ck[t].ref_time_s / ck[t].deadline_s - 1);
                /* each plan's loss against the best plan (chosen on the
                 * truth) as fast as itself: plans that differ in time are
                 * compared on it */
                double loss = 100 * (ck[t].pred_energy_j / ck[t].best_energy_at_pred_time_j - 1);
                double rloss = 100 * (ck[t].ref_energy_j / ck[t].best_energy_at_ref_time_j - 1);
                bool over = late > (rlate > 0 ? rlate : 0) + 100 * sigma / 4;
                bool dear = gap > 0.5 && (t == 2 || loss > rloss + 0.5);
                fprintf(stderr,
                        "# %s sigma %.0f%% target %d: %d/%d points, energy %+.3f%%, time %+.3f%% "
                        "vs target; full noisy sweep's plan %+.3f%%; loss vs the best as fast "
                        "%.3f%% (full sweep's %.3f%%)%s%s%s\n",
                        names[i], 100 * sigma, t, erg_sparse_num_measured(sp),
                        erg_sparse_num_full(sp), gap, late, rlate, loss, rloss,
                        dear ? " ENERGY" : "", over ? " LATE" : "", mode ? " (auto)" : "");
                bad += dear || over;
                worst_gap = gap > worst_gap ? gap : worst_gap;
                worst_late = late > worst_late ? late : worst_late;
            }
            erg_profile_free(pred);
            erg_sparse_free(sp);
            erg_profile_free(ref);
        }
        erg_profile_free(truth);
    }
    fprintf(stderr, "# worst: energy %+.3f%%, late %.3f%%, fraction %.3f\n", worst_gap, worst_late,
            worst_frac);
    ASSERT_EQ_INT(bad, 0);
}

/* Under noise the profiler measures again the points that depart from its
 * fit (at most a quarter of the sweep in all; a repeat is averaged into its
 * point); with remeasure off (a replay) it measures nothing twice and lists
 * those points instead. Without noise a repeat is refused. */
TEST(sparse_remeasures_where_the_fit_is_uncertain)
{
    erg_error err;
    erg_profile *truth;
    ASSERT_OK(erg_sim_profile("a100", "gpt3-2.7b", 4, 0, 0, &truth, &err));
    int f[512];
    int n = clocks_of(truth, f);
    int repeats[2] = {0, 0}, listed[2] = {0, 0};
    for (int mode = 0; mode < 2; mode++) {
        erg_sparse_opts o;
        erg_sparse_opts_init(&o);
        o.time_noise = 0.02;
        o.remeasure = mode == 0;
        erg_sparse *sp;
        ASSERT_OK(erg_sparse_new(4, f, (size_t)n, &o, &sp, &err));
        noisy q = {truth, NULL, 0.02, {42}, 0, sp};
        ASSERT_OK(erg_sparse_run(sp, noisy_measure, &q, NULL, &err));
        ASSERT_EQ_INT(q.calls, erg_sparse_num_measured(sp));
        ASSERT(erg_sparse_num_measured(sp) * 4 <= erg_sparse_num_full(sp));
        for (int s = 0; s < 4; s++)
            for (int k = 0; k < 2; k++) {
                int u[512];
                int m = erg_sparse_uncertain(sp, s, (erg_instr_kind)k, u, 512);
                listed[mode] += m;
                for (int i = 0; i < m; i++)
                    ASSERT(erg_sparse_is_measured(sp, s, (erg_instr_kind)k, u[i]));
                for (int x = 0; x < n; x++)
                    repeats[mode] += erg_sparse_num_samples(sp, s, (erg_instr_kind)k, f[x]) > 1;
            }
        erg_sparse_free(sp);
    }
    printf("# remeasure on: %d points measured more than once, %d still departing; off: %d, "
           "%d listed\n",
           repeats[0], listed[0], repeats[1], listed[1]);
    ASSERT(repeats[0] > 0);
    ASSERT_EQ_INT(repeats[1], 0);
    ASSERT(listed[1] > 0);
    /* without noise a clock is measured once */
    erg_sparse *sp;
    ASSERT_OK(erg_sparse_new(1, f, (size_t)n, NULL, &sp, &err));
    erg_profile_point pt;
    ASSERT_OK(erg_profile_lookup(truth, 0, ERG_FORWARD, f[0], &pt, &err));
    ASSERT_OK(erg_sparse_report(sp, 0, ERG_FORWARD, &pt, &err));
    ASSERT_EQ_INT(erg_sparse_report(sp, 0, ERG_FORWARD, &pt, &err), ERG_EEXIST);
    ASSERT_EQ_INT(erg_sparse_num_samples(sp, 0, ERG_FORWARD, f[0]), 1);
    ASSERT_EQ_INT(erg_sparse_uncertain(sp, 0, ERG_FORWARD, NULL, 0), 0);
    /* the noise level may be set while only the maximum clock is measured
     * (the server: from the samples of its maximum-clock window) */
    double est;
    int pts;
    ASSERT_NEAR(erg_sparse_noise(sp, &est, &pts), 0.002, 0);
    ASSERT(isnan(est) && pts == 0);
    ASSERT_EQ_INT(erg_sparse_set_noise(sp, 1.5, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "1.5");
    ASSERT_EQ_INT(erg_sparse_set_noise(sp, NAN, &err), ERG_EINVAL);
    ASSERT_OK(erg_sparse_set_noise(sp, 0.01, &err));
    ASSERT_NEAR(erg_sparse_noise(sp, NULL, NULL), 0.01, 0);
    ASSERT_OK(erg_sparse_report(sp, 0, ERG_FORWARD, &pt, &err)); /* a repeat: now noisy */
    ASSERT_EQ_INT(erg_sparse_num_samples(sp, 0, ERG_FORWARD, f[0]), 2);
    ASSERT_OK(erg_sparse_set_noise(sp, ERG_SPARSE_NOISE_AUTO, &err));
    ASSERT_OK(erg_profile_lookup(truth, 0, ERG_FORWARD, f[1], &pt, &err));
    ASSERT_OK(erg_sparse_report(sp, 0, ERG_FORWARD, &pt, &err));
    ASSERT_EQ_INT(erg_sparse_set_noise(sp, 0.01, &err), ERG_ESTATE);
    ASSERT_CONTAINS(err.msg, "below the maximum");
    erg_sparse_free(sp);
    /* estimated on one stage: along the curve (no other stage to compare) */
    erg_sparse_opts o;
    erg_sparse_opts_init(&o);
    o.time_noise = -1;
    o.remeasure = false;
    ASSERT_OK(erg_sparse_new(1, f, (size_t)n, &o, &sp, &err));
    noisy q = {truth, NULL, 0.02, {7}, 0, sp};
    ASSERT_OK(erg_sparse_run(sp, noisy_measure, &q, NULL, &err));
    double used = erg_sparse_noise(sp, &est, &pts);
    printf("# one stage, 2 %% noise: estimated %.3f %% from %d points\n", 100 * est, pts);
    ASSERT(pts >= 8 && est > 0.02 / 1.5 && est < 0.02 * 1.5 && used == est);
    erg_sparse_free(sp);
    o.time_noise = NAN;
    ASSERT_EQ_INT(erg_sparse_new(1, f, (size_t)n, &o, &sp, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "time noise nan");
    erg_profile_free(truth);
}

/* ---- measurement stability ---- */

typedef struct seq {
    const double *t, *e;
    int n, i;
} seq;

static erg_status seq_sample(void *user, double *t, double *e, erg_error *err)
{
    seq *q = user;
    if (q->i >= q->n)
        return erg_error_set(err, ERG_ESTATE, "sampler ran dry after %d samples", q->n);
    *t = q->t[q->i];
    *e = q->e[q->i];
    q->i++;
    return ERG_OK;
}

TEST(stable_measure_warmup_ci_and_outliers)
{
    erg_error err;
    erg_stable_opts o;
    erg_stable_opts_init(&o);
    /* warm-up sample (cold: 2x) is dropped; constant samples stop at min_samples */
    double t1[] = {2, 1, 1, 1, 1, 1}, e1[] = {20, 10, 10, 10, 10, 10};
    seq q = {t1, e1, 6, 0};
    erg_stable_result r;
    ASSERT_OK(erg_stable_measure(seq_sample, &q, &o, &r, &err));
    ASSERT_EQ_INT(q.i, 1 + 3);
    ASSERT(r.converged);
    ASSERT_NEAR(r.time_s, 1, 0);
    ASSERT_NEAR(r.energy_j, 10, 0);
    /* noisy samples: more are taken until the 95 % CI is within 1 % */
    double t2[40], e2[40];
    for (int i = 0; i < 40; i++) {
        t2[i] = 1 + 0.01 * ((i * 7) % 5 - 2); /* -2..+2 % */
        e2[i] = 10;
    }
    seq q2 = {t2, e2, 40, 0};
    o.max_samples = 30;
    ASSERT_OK(erg_stable_measure(seq_sample, &q2, &o, &r, &err));
    ASSERT(r.converged);
    ASSERT(r.samples > 3 && r.samples < 30);
    ASSERT_NEAR(r.time_s, 1, 0.01);
    /* a spike is dropped by EnvPipe's filter (mean of values within one sd) */
    double v[] = {1, 1, 1, 1, 1, 5};
    int dropped;
    ASSERT_NEAR(erg_mean_without_outliers(v, 6, &dropped), 1, 1e-12);
    ASSERT_EQ_INT(dropped, 1);
    double same[] = {3, 3, 3, 3, 3};
    ASSERT_NEAR(erg_mean_without_outliers(same, 5, &dropped), 3, 0); /* not NaN */
    double few[] = {1, 2, 9};
    ASSERT_NEAR(erg_mean_without_outliers(few, 3, &dropped), 4, 1e-12);
    /* never converging: stops at max_samples, says so */
    double t3[40], e3[40];
    for (int i = 0; i < 40; i++) {
        t3[i] = i % 2 ? 2 : 1;
        e3[i] = 10;
    }
    seq q3 = {t3, e3, 40, 0};
    o.max_samples = 8;
    ASSERT_OK(erg_stable_measure(seq_sample, &q3, &o, &r, &err));
    ASSERT(!r.converged);
    ASSERT_EQ_INT(r.samples, 8);
    /* sampler errors and bad options */
    seq q4 = {t1, e1, 2, 0};
    erg_stable_opts_init(&o);
    ASSERT_EQ_INT(erg_stable_measure(seq_sample, &q4, &o, &r, &err), ERG_ESTATE);
    o.min_samples = 0;
    ASSERT_EQ_INT(erg_stable_measure(seq_sample, &q4, &o, &r, &err), ERG_EINVAL);
}

TAP_MAIN(TEST_ENTRY(sparse_predicts_simulated_gpus_within_tolerance),
         TEST_ENTRY(sparse_descends_to_valley_and_stops_below_it),
         TEST_ENTRY(sparse_csv_has_source_column_and_reads_back),
         TEST_ENTRY(sparse_rejects_bad_input), TEST_ENTRY(sparse_pools_replica_stages),
         TEST_ENTRY(sparse_predicted_energy_carries_margin),
         TEST_ENTRY(sparse_plans_on_published_profiles),
         TEST_ENTRY(sparse_estimates_noise_on_published_profiles),
         TEST_ENTRY(sparse_plans_under_noise),
         TEST_ENTRY(sparse_remeasures_where_the_fit_is_uncertain),
         TEST_ENTRY(stable_measure_warmup_ci_and_outliers))
