/* test_gpu_sim.c: the simulated GPU DVFS model against the shape of real A100/A40 profiles. */
#include "ergon/gpu.h"
#include "ergon/profile.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Features of one (stage, kind) curve, sorted by clock descending. */
typedef struct shape {
    int fmax, fmin, n;
    int valley_mhz; /* clock of minimum energy */
    double t_ratio; /* t(fmin) / t(fmax) */
    double e_ratio; /* E(fmax) / E(valley) */
    double p_max_w; /* power at fmax */
    double p_min_w; /* power at fmin */
    int min_step_mhz, max_step_mhz;
} shape;

static shape curve_shape(const erg_profile *p, int stage, erg_instr_kind kind)
{
    shape s = {0};
    size_t n = erg_profile_num_points(p, stage, kind);
    const erg_profile_point *pt = erg_profile_points(p, stage, kind);
    s.n = (int)n;
    int imax = 0, imin = 0, ival = 0;
    s.min_step_mhz = 1 << 30;
    for (size_t i = 0; i < n; i++) {
        if (pt[i].freq_mhz > pt[imax].freq_mhz)
            imax = (int)i;
        if (pt[i].freq_mhz < pt[imin].freq_mhz)
            imin = (int)i;
        if (pt[i].energy_j < pt[ival].energy_j)
            ival = (int)i;
        if (i > 0) {
            int d = abs(pt[i].freq_mhz - pt[i - 1].freq_mhz);
            if (d < s.min_step_mhz)
                s.min_step_mhz = d;
            if (d > s.max_step_mhz)
                s.max_step_mhz = d;
        }
    }
    s.fmax = pt[imax].freq_mhz;
    s.fmin = pt[imin].freq_mhz;
    s.valley_mhz = pt[ival].freq_mhz;
    s.t_ratio = pt[imin].time_s / pt[imax].time_s;
    s.e_ratio = pt[imax].energy_j / pt[ival].energy_j;
    s.p_max_w = pt[imax].energy_j / pt[imax].time_s;
    s.p_min_w = pt[imin].energy_j / pt[imin].time_s;
    return s;
}

static void check_against_real(const char *file, const char *gpu)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/published/perseus-sosp24/stage_profile/%s", ERG_TEST_DATA_DIR,
             file);
    tap_need_data(path);
    erg_error err;
    erg_profile *real = NULL, *sim = NULL;
    ASSERT_OK(erg_profile_read_csv(path, &real, &err));
    ASSERT_OK(erg_sim_profile(gpu, "gpt3-xl", 4, 0, 0, &sim, &err));
    for (int k = 0; k < 2; k++) {
        shape r = curve_shape(real, 0, (erg_instr_kind)k);
        shape s = curve_shape(sim, 0, (erg_instr_kind)k);
        /* Same clock grid: range, count, 15 MHz steps. */
        ASSERT_EQ_INT(s.fmax, r.fmax);
        ASSERT_EQ_INT(s.fmin, r.fmin);
        ASSERT_EQ_INT(s.n, r.n);
        ASSERT_EQ_INT(s.min_step_mhz, 15);
        ASSERT_EQ_INT(s.max_step_mhz, 15);
        /* An energy valley strictly inside the range, near the real one. */
        ASSERT_MSG(s.valley_mhz > s.fmin && s.valley_mhz < s.fmax, "valley %d at the edge",
                   s.valley_mhz);
        ASSERT_MSG(abs(s.valley_mhz - r.valley_mhz) <= 210, "%s %s valley %d vs real %d", gpu,
                   k ? "backward" : "forward", s.valley_mhz, r.valley_mhz);
        /* Slowdown from fmax to fmin and energy saved at the valley. */
        ASSERT_MSG(fabs(s.t_ratio / r.t_ratio - 1) < 0.25, "%s t ratio %.3f vs real %.3f", gpu,
                   s.t_ratio, r.t_ratio);
        ASSERT_MSG(fabs(s.e_ratio / r.e_ratio - 1) < 0.15, "%s E ratio %.3f vs real %.3f", gpu,
                   s.e_ratio, r.e_ratio);
        /* Plausible watts at both ends. */
        ASSERT_MSG(fabs(s.p_max_w / r.p_max_w - 1) < 0.15, "%s P(fmax) %.0f vs real %.0f", gpu,
                   s.p_max_w, r.p_max_w);
        ASSERT_MSG(fabs(s.p_min_w / r.p_min_w - 1) < 0.25, "%s P(fmin) %.0f vs real %.0f", gpu,
                   s.p_min_w, r.p_min_w);
    }
    erg_profile_free(real);
    erg_profile_free(sim);
}

TEST(a100_shape_matches_real_profile)
{
    check_against_real("gpt3-175b+a100_sxm_bf16.csv", "a100");
}

TEST(a40_shape_matches_real_profile)
{
    check_against_real("gpt3-175b+a40_bf16.csv", "a40");
}

/* On the A100 (not power-capped below the top clock), time is ~1/f for the
 * compute-bound part: t(f1)/t(f2) close to f2/f1 in the upper half. */
TEST(time_scales_as_inverse_clock_at_high_clocks)
{
    const erg_sim_gpu_info *g;
    erg_error err;
    ASSERT_OK(erg_sim_gpu_find("A100-SXM", &g, &err));
    erg_sim_work w;
    ASSERT_OK(erg_sim_model_work("gpt3-2.7b", 4, 0, 1, ERG_FORWARD, &w, &err));
    double t1, p1, t2, p2;
    ASSERT_OK(erg_sim_eval(g, &w, 1350, &t1, &p1, &err));
    ASSERT_OK(erg_sim_eval(g, &w, 1125, &t2, &p2, &err));
    double ideal = 1350.0 / 1125.0;
    ASSERT_MSG(fabs(t2 / t1 - ideal) / ideal < 0.05, "t ratio %.4f vs 1/f %.4f", t2 / t1, ideal);
    ASSERT(p1 > p2);
}

TEST(power_never_exceeds_cap_and_last_stage_is_heavier)
{
    erg_error err;
    for (size_t gi = 0; gi < erg_sim_gpu_count(); gi++) {
        const erg_sim_gpu_info *g = erg_sim_gpu_at(gi);
        for (size_t mi = 0; mi < erg_sim_model_count(); mi++) {
            erg_sim_work w0, wl;
            const char *m = erg_sim_model_name(mi);
            ASSERT_OK(erg_sim_model_work(m, 4, 0, 1, ERG_BACKWARD, &w0, &err));
            ASSERT_OK(erg_sim_model_work(m, 4, 0, 3, ERG_BACKWARD, &wl, &err));
            ASSERT_MSG(wl.gflop > w0.gflop, "%s last stage not heavier", m);
            for (int f = g->min_freq_mhz; f <= g->max_freq_mhz; f += g->step_mhz) {
                double t, p;
                ASSERT_OK(erg_sim_eval(g, &w0, f, &t, &p, &err));
                ASSERT_MSG(p <= g->power_cap_w + 1e-6, "%s %s %d MHz: %.1f W", g->name, m, f, p);
                ASSERT(p > g->static_power_w && t > 0);
            }
        }
    }
}

TEST(bad_arguments_are_refused)
{
    erg_error err;
    const erg_sim_gpu_info *g;
    erg_sim_work w;
    ASSERT_EQ_INT(erg_sim_gpu_find("rtx9090", &g, &err), ERG_ENOTFOUND);
    ASSERT_CONTAINS(err.msg, "rtx9090");
    ASSERT_EQ_INT(erg_sim_model_work("gpt5", 2, 0, 0, ERG_FORWARD, &w, &err), ERG_ENOTFOUND);
    ASSERT_EQ_INT(erg_sim_model_work("gpt3-xl", 25, 0, 0, ERG_FORWARD, &w, &err), ERG_EINVAL);
    ASSERT_EQ_INT(erg_sim_model_work("gpt3-xl", 2, 0, 2, ERG_FORWARD, &w, &err), ERG_EINVAL);
    ASSERT_OK(erg_sim_gpu_find("a40", &g, &err));
    ASSERT_OK(erg_sim_model_work("gpt3-xl", 2, 0, 0, ERG_FORWARD, &w, &err));
    double t, p;
    ASSERT_EQ_INT(erg_sim_eval(g, &w, 100, &t, &p, &err), ERG_EINVAL);
    ASSERT_EQ_INT(erg_sim_eval(g, &w, 1741, &t, &p, &err), ERG_EINVAL);
    erg_profile *prof = NULL;
    ASSERT_EQ_INT(erg_sim_profile("a40", "gpt3-xl", 2, 0, 5000, &prof, &err), ERG_EINVAL);
    ASSERT(prof == NULL);
}

/* The simulated device runs I and W steps (zero-bubble schedules, the example trainer's
 * pacing) at the times `ergon profile sim --split-backward` writes; before, it refused
 * them ("instruction kind 2 is not forward/backward"). */
TEST(sim_device_runs_backward_input_and_weight_like_the_split_profile)
{
    erg_error err;
    erg_gpu *g = NULL;
    erg_profile *prof = NULL;
    ASSERT_OK(erg_gpu_open("sim:a100:gpt3-xl:4", &g, &err));
    ASSERT_OK(erg_sim_profile_kinds("a100", "gpt3-xl", 4, 0, 0, 1, &prof, &err));
    const int top = 1410; /* the A100's highest clock: the device starts unlocked */
    const erg_instr_kind kinds[] = {ERG_FORWARD, ERG_BACKWARD, ERG_BACKWARD_INPUT,
                                    ERG_BACKWARD_WEIGHT};
    for (int i = 0; i < 4; i++) {
        double t = 0;
        erg_profile_point pt;
        ASSERT_OK(erg_gpu_sim_set_activity(g, 1, true, kinds[i], &t, &err));
        ASSERT_OK(erg_gpu_sim_set_activity(g, 1, false, kinds[i], NULL, &err));
        ASSERT_OK(erg_profile_lookup(prof, 1, kinds[i], top, &pt, &err));
        ASSERT(t > 0);
        ASSERT(fabs(t - pt.time_s) <= 1e-6 * pt.time_s + 1e-9);
    }
    ASSERT_EQ_INT(erg_gpu_sim_set_activity(g, 1, true, ERG_OVERLAP_F_B, NULL, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "backward_weight");
    erg_profile_free(prof);
    erg_gpu_close(g);
}

/* The simulated device accounts each instruction begun at the model's time and energy at the
 * clock it had then (what `ergon profile sim` writes for that clock), however long the host
 * holds it: an instruction held 20 ms longer than another counts the same. The e2e tests
 * compare this accounting with `ergon emulate` instead of wall time (issue 38). */
TEST(sim_device_accounts_simulated_time_and_energy_at_the_clock)
{
    erg_error err;
    erg_gpu *g = NULL;
    erg_profile *prof = NULL;
    ASSERT_OK(erg_gpu_open("sim:a100:gpt3-xl:4", &g, &err));
    ASSERT_OK(erg_sim_profile_kinds("a100", "gpt3-xl", 4, 0, 855, 1, &prof, &err));
    uint64_t n = 1;
    double t = 1, e = 1;
    int f = 1;
    ASSERT_OK(erg_gpu_sim_account(g, 2, &n, &t, &e, &f, &err));
    ASSERT(n == 0 && t == 0 && e == 0 && f == 0);
    const int clocks[] = {1410, 1005, 855};
    const int hold_us[] = {0, 20000, 0};
    double want_t = 0, want_e = 0;
    for (int i = 0; i < 3; i++) {
        erg_profile_point pt;
        double t0 = t, e0 = e;
        ASSERT_OK(erg_gpu_lock_sm_clocks(g, 2, clocks[i], clocks[i], &err));
        ASSERT_OK(erg_gpu_sim_set_activity(g, 2, true, ERG_BACKWARD, NULL, &err));
        usleep((useconds_t)hold_us[i]);
        ASSERT_OK(erg_gpu_sim_set_activity(g, 2, false, ERG_FORWARD, NULL, &err));
        ASSERT_OK(erg_gpu_sim_account(g, 2, &n, &t, &e, &f, &err));
        ASSERT_OK(erg_profile_lookup(prof, 2, ERG_BACKWARD, clocks[i], &pt, &err));
        ASSERT_EQ_INT(f, clocks[i]);
        ASSERT(fabs((t - t0) - pt.time_s) <= 1e-6 * pt.time_s);
        ASSERT(fabs((e - e0) - pt.energy_j) <= 1e-6 * pt.energy_j);
        want_t += pt.time_s;
        want_e += pt.energy_j;
    }
    ASSERT(n == 3);
    ASSERT(fabs(t - want_t) <= 1e-6 * want_t);
    ASSERT(fabs(e - want_e) <= 1e-6 * want_e);
    ASSERT_OK(erg_gpu_sim_account(g, 0, &n, NULL, NULL, NULL, &err)); /* devices account apart */
    ASSERT(n == 0);
    ASSERT_EQ_INT(erg_gpu_sim_account(g, 4, &n, NULL, NULL, NULL, &err), ERG_EINVAL);
    erg_profile_free(prof);
    erg_gpu_close(g);
}

TEST(counter_delta_handles_wrap)
{
    ASSERT(erg_counter_delta(10, 25, 64) == 15);
    ASSERT(erg_counter_delta(UINT64_MAX - 4, 5, 64) == 10);
    ASSERT(erg_counter_delta(0xFFFFFFF0u, 0x10, 32) == 0x20);
    ASSERT(erg_counter_delta(100, 100, 32) == 0);
}

TAP_MAIN(TEST_ENTRY(a100_shape_matches_real_profile), TEST_ENTRY(a40_shape_matches_real_profile),
         TEST_ENTRY(time_scales_as_inverse_clock_at_high_clocks),
         TEST_ENTRY(power_never_exceeds_cap_and_last_stage_is_heavier),
         TEST_ENTRY(bad_arguments_are_refused), TEST_ENTRY(counter_delta_handles_wrap),
         TEST_ENTRY(sim_device_runs_backward_input_and_weight_like_the_split_profile),
         TEST_ENTRY(sim_device_accounts_simulated_time_and_energy_at_the_clock))
