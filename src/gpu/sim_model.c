/* sim_model.c: the simulated GPU: a DVFS time/power model, its GPU table and model zoo. */
#include "core/internal.h"
#include "ergon/gpu.h"

#include <math.h>
#include <string.h>
#include <strings.h>

/*
 * THE DVFS MODEL (docs/sim-gpu.md has the long version and the calibration)
 *
 * An instruction is `gflop` of arithmetic and `mem_gb` of DRAM traffic that
 * does not overlap with it. With the SM clock f (MHz):
 *
 *   t_c(f) = gflop / (tflops_at_max * 1000 * f / f_max)      compute part ~ 1/f
 *   t_m    = mem_gb / mem_bandwidth_gbs                       memory part, constant
 *   t(f)   = t_c(f) + t_m
 *
 * Power is static + dynamic. Dynamic power of the SM array is C V^2 f; the
 * voltage is flat up to a knee clock and then rises linearly by
 * `voltage_rise` (relative) up to f_max:
 *
 *   v(f)     = 1                                  f <= f_knee
 *            = 1 + rise * (f - f_knee) / (f_max - f_knee)   above
 *   p_dyn(f) = dynamic_power_w * (f / f_max) * (v(f) / v(f_max))^2
 *   P(f)     = static_power_w + (t_c p_dyn(f) + t_m memory_power_w) / t(f)
 *
 * So energy E = P t = static * t(f) + t_c p_dyn(f) + t_m * memory_power:
 * below the knee the dynamic energy per instruction is constant and the
 * static energy grows as the clock falls, above it the V^2 term grows; the
 * minimum (the "energy valley") sits a little above the knee.
 *
 * POWER CAP. When P(f) exceeds the board limit the real GPU lowers its clock
 * until it draws the limit; we do the same: bisect the effective clock
 * f_eff < f with P(f_eff) = cap and report t(f_eff) and the cap. This is
 * what makes the top of the A40's range flat (its 300 W limit binds above
 * ~1450 MHz in the real profiles).
 *
 * LIMITATIONS. No temperature, no noise, one memory clock, no overlap of
 * memory and compute, no clock-change latency. Parameters of A100 and A40
 * were fitted to tests/data/published/perseus-sosp24 (stage 0 forward/backward of
 * gpt3-175b); H100 and V100 are extrapolated from public specifications.
 */

static const erg_sim_gpu_info gpus[] = {
    {"a100", "NVIDIA A100-SXM4-40GB", 210, 1410, 15, 855, 1215, 60.2, 474.0, 269.0, 480.0, 83.64,
     1098.0, 0.284, 156.0, 1800.0, true},
    {"a40", "NVIDIA A40", 210, 1740, 15, 855, 7251, 64.0, 477.0, 223.0, 300.0, 70.38, 1133.0, 0.687,
     114.0, 200.0, true},
    {"h100", "NVIDIA H100 80GB HBM3", 345, 1980, 15, 1005, 2619, 90.0, 760.0, 300.0, 700.0, 110.0,
     1400.0, 0.35, 400.0, 2600.0, false},
    {"v100", "Tesla V100-SXM2-32GB", 135, 1530, 15, 765, 877, 40.0, 300.0, 120.0, 300.0, 55.0,
     1050.0, 0.35, 60.0, 700.0, false},
};

/* A dense transformer: per-layer work from the usual formulas
 * (forward FLOPs per layer = 24 b s h^2 + 4 b s^2 h; LM head 2 b s h V). */
typedef struct sim_model {
    const char *name;
    int layers;     /* Transformer blocks. */
    int hidden;     /* Hidden size h. */
    int seq_len;    /* Sequence length s. */
    int vocab;      /* Vocabulary V (LM head on the last stage). */
    int microbatch; /* Default microbatch size b. */
} sim_model;

static const sim_model models[] = {
    {"gpt3-xl", 24, 2048, 2048, 50257, 4},    {"gpt3-2.7b", 32, 2560, 2048, 50257, 4},
    {"gpt3-6.7b", 32, 4096, 2048, 50257, 2},  {"bloom-3b", 30, 2560, 2048, 250880, 4},
    {"bert-large", 24, 1024, 512, 30522, 16},
};

size_t erg_sim_gpu_count(void)
{
    return ERG__ARRAY_LEN(gpus);
}

const erg_sim_gpu_info *erg_sim_gpu_at(size_t i)
{
    return i < ERG__ARRAY_LEN(gpus) ? &gpus[i] : NULL;
}

erg_status erg_sim_gpu_find(const char *name, const erg_sim_gpu_info **out, erg_error *err)
{
    if (!name || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_sim_gpu_find: NULL argument");
    char norm[32];
    size_t n = 0;
    for (const char *p = name; *p && n + 1 < sizeof norm; p++)
        norm[n++] = *p;
    norm[n] = '\0';
    /* "a100-sxm", "A100_SXM4" and the like name the A100. */
    char *cut = strpbrk(norm, "-_ ");
    if (cut && !strncasecmp(norm, "a100", 4))
        *cut = '\0';
    for (size_t i = 0; i < ERG__ARRAY_LEN(gpus); i++)
        if (!strcasecmp(norm, gpus[i].name)) {
            *out = &gpus[i];
            return ERG_OK;
        }
    return erg_error_set(err, ERG_ENOTFOUND,
                         "unknown simulated GPU '%s' (known: a100, a40, h100, v100)", name);
}

size_t erg_sim_model_count(void)
{
    return ERG__ARRAY_LEN(models);
}

const char *erg_sim_model_name(size_t i)
{
    return i < ERG__ARRAY_LEN(models) ? models[i].name : NULL;
}

static const sim_model *find_model(const char *name)
{
    for (size_t i = 0; name && i < ERG__ARRAY_LEN(models); i++)
        if (!strcasecmp(name, models[i].name))
            return &models[i];
    return NULL;
}

erg_status erg_sim_model_work(const char *model, int num_stages, int microbatch_size, int stage,
                              erg_instr_kind kind, erg_sim_work *out, erg_error *err)
{
    const sim_model *m = find_model(model);
    if (!m)
        return erg_error_set(err, ERG_ENOTFOUND,
                             "unknown model '%s' (known: gpt3-xl, gpt3-2.7b, gpt3-6.7b, "
                             "bloom-3b, bert-large)",
                             model ? model : "(null)");
    if (num_stages < 1 || num_stages > m->layers)
        return erg_error_set(err, ERG_EINVAL, "model %s has %d layers: %d stages is out of [1, %d]",
                             m->name, m->layers, num_stages, m->layers);
    if (stage < 0 || stage >= num_stages)
        return erg_error_set(err, ERG_EINVAL, "stage %d is out of [0, %d]", stage, num_stages - 1);
    if ((unsigned)kind > ERG_BACKWARD_WEIGHT)
        return erg_error_set(err, ERG_EINVAL,
                             "instruction kind %d is not forward, backward, backward_input or "
                             "backward_weight",
                             (int)kind);
    if (microbatch_size < 0 || microbatch_size > 4096)
        return erg_error_set(err, ERG_EINVAL, "microbatch size %d is out of [0, 4096]",
                             microbatch_size);
    double b = microbatch_size ? microbatch_size : m->microbatch;
    double h = m->hidden, s = m->seq_len, v = m->vocab;
    int layers = m->layers / num_stages + (stage < m->layers % num_stages ? 1 : 0);
    double flop = layers * (24.0 * b * s * h * h + 4.0 * b * s * s * h);
    /* bf16 weights (12 h^2 parameters) read once, ~20 activations of b s h
     * elements written and read outside the fused matmuls. */
    double bytes = layers * (24.0 * h * h + 40.0 * b * s * h);
    if (stage == 0)
        bytes += 2.0 * (v * h + b * s * h); /* embedding lookup */
    if (stage == num_stages - 1) {
        flop += 2.0 * b * s * h * v;              /* LM head */
        bytes += 2.0 * (v * h + 2.0 * b * s * v); /* its weights, logits and softmax */
    }
    double factor = kind == ERG_BACKWARD ? 2.0 : 1.0;
    out->gflop = factor * flop * 1e-9;
    out->mem_gb = factor * bytes * 1e-9;
    if (kind == ERG_BACKWARD_INPUT || kind == ERG_BACKWARD_WEIGHT) {
        /* Zero-bubble split (docs/sim-gpu.md): every matmul Y = X W has an
         * input gradient dX = dY W^T and a weight gradient dW = X^T dY of
         * the forward's FLOPs each; the attention score products (no
         * weights) have only input gradients, twice their forward FLOPs.
         * Each part moves the forward's memory traffic. I + W = B. */
        double attn = layers * 4.0 * b * s * s * h;
        double wflop = flop - attn;
        out->gflop = (kind == ERG_BACKWARD_INPUT ? wflop + 2 * attn : wflop) * 1e-9;
        out->mem_gb = bytes * 1e-9;
    }
    return ERG_OK;
}

/* Power and time at an exact clock, ignoring the cap. */
static void eval_at(const erg_sim_gpu_info *g, const erg_sim_work *w, double f, double *t,
                    double *p)
{
    double fmax = g->max_freq_mhz;
    double v = 1.0;
    if (f > g->knee_freq_mhz)
        v = 1.0 + g->voltage_rise * (f - g->knee_freq_mhz) / (fmax - g->knee_freq_mhz);
    double vmax = 1.0 + g->voltage_rise;
    double pdyn = g->dynamic_power_w * (f / fmax) * (v / vmax) * (v / vmax);
    double tc = w->gflop / (g->tflops_at_max * 1000.0 * f / fmax);
    double tm = w->mem_gb / g->mem_bandwidth_gbs;
    *t = tc + tm;
    *p = *t > 0 ? g->static_power_w + (tc * pdyn + tm * g->memory_power_w) / *t : g->static_power_w;
}

erg_status erg_sim_eval(const erg_sim_gpu_info *gpu, const erg_sim_work *work, double freq_mhz,
                        double *time_s, double *power_w, erg_error *err)
{
    if (!gpu || !work || !time_s || !power_w)
        return erg_error_set(err, ERG_EINVAL, "erg_sim_eval: NULL argument");
    if (!(freq_mhz >= gpu->min_freq_mhz && freq_mhz <= gpu->max_freq_mhz))
        return erg_error_set(err, ERG_EINVAL, "clock %g MHz is outside %s's range [%d, %d]",
                             freq_mhz, gpu->name, gpu->min_freq_mhz, gpu->max_freq_mhz);
    if (!(work->gflop >= 0) || !(work->mem_gb >= 0) || !isfinite(work->gflop) ||
        !isfinite(work->mem_gb))
        return erg_error_set(err, ERG_EINVAL, "work must be finite and non-negative");
    double t, p;
    eval_at(gpu, work, freq_mhz, &t, &p);
    if (p > gpu->power_cap_w) {
        /* Throttle: the highest clock below freq_mhz whose power fits. */
        double lo = gpu->min_freq_mhz, hi = freq_mhz;
        for (int i = 0; i < 60; i++) {
            double mid = 0.5 * (lo + hi), tm, pm;
            eval_at(gpu, work, mid, &tm, &pm);
            if (pm > gpu->power_cap_w)
                hi = mid;
            else
                lo = mid;
        }
        eval_at(gpu, work, lo, &t, &p);
    }
    *time_s = t;
    *power_w = p;
    return ERG_OK;
}

erg_status erg_sim_profile(const char *gpu, const char *model, int num_stages, int microbatch_size,
                           int min_freq_mhz, erg_profile **out, erg_error *err)
{
    return erg_sim_profile_kinds(gpu, model, num_stages, microbatch_size, min_freq_mhz, 0, out,
                                 err);
}

erg_status erg_sim_profile_kinds(const char *gpu, const char *model, int num_stages,
                                 int microbatch_size, int min_freq_mhz, int split_backward,
                                 erg_profile **out, erg_error *err)
{
    const erg_sim_gpu_info *g;
    erg_status st = erg_sim_gpu_find(gpu, &g, err);
    if (st)
        return st;
    erg_sim_work w;
    st = erg_sim_model_work(model, num_stages, microbatch_size, 0, ERG_FORWARD, &w, err);
    if (st)
        return st;
    int fmin = min_freq_mhz ? min_freq_mhz : g->profile_min_freq_mhz;
    if (fmin < g->min_freq_mhz || fmin > g->max_freq_mhz)
        return erg_error_set(err, ERG_EINVAL, "minimum clock %d MHz is outside %s's range [%d, %d]",
                             fmin, g->name, g->min_freq_mhz, g->max_freq_mhz);
    erg_profile *p = NULL;
    st = erg_profile_new(&p, err);
    if (st)
        return st;
    int nk = split_backward ? 4 : 2;
    for (int s = 0; s < num_stages; s++) {
        erg_sim_work work[4];
        for (int k = 0; k < nk; k++) {
            st = erg_sim_model_work(model, num_stages, microbatch_size, s, (erg_instr_kind)k,
                                    &work[k], err);
            if (st)
                goto fail;
        }
        for (int f = g->max_freq_mhz; f >= fmin; f -= g->step_mhz)
            for (int k = 0; k < nk; k++) {
                double t, pw;
                st = erg_sim_eval(g, &work[k], f, &t, &pw, err);
                if (st)
                    goto fail;
                erg_profile_point pt = {f, t, t * pw};
                st = erg_profile_add(p, s, (erg_instr_kind)k, &pt, err);
                if (st)
                    goto fail;
            }
    }
    *out = p;
    return ERG_OK;
fail:
    erg_profile_free(p);
    return st;
}

uint64_t erg_counter_delta(uint64_t before, uint64_t after, unsigned bits)
{
    if (bits == 0 || bits >= 64)
        return after - before; /* unsigned arithmetic wraps modulo 2^64 */
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    before &= mask;
    after &= mask;
    if (after >= before)
        return after - before;
    return (mask - before) + after + 1;
}
