/* gpu.h: GPUs: a simulated DVFS model and the back-ends that read and set clocks. */
#ifndef ERGON_GPU_H
#define ERGON_GPU_H

#include "ergon/ergon.h"
#include "ergon/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* The simulated GPU: a DVFS model (docs/sim-gpu.md).                        */
/* ------------------------------------------------------------------------ */

/* Parameters of one simulated GPU kind. All powers are board powers in W. */
typedef struct erg_sim_gpu_info {
    const char *name;         /* "a100", "a40", "h100", "v100". */
    const char *full_name;    /* Marketing name, e.g. "NVIDIA A100-SXM4-40GB". */
    int min_freq_mhz;         /* Lowest supported SM clock. */
    int max_freq_mhz;         /* Highest supported SM clock. */
    int step_mhz;             /* Distance between supported clocks. */
    int profile_min_freq_mhz; /* Lowest clock `ergon profile sim` writes by default. */
    int mem_freq_mhz;         /* The (single) supported memory clock. */
    double static_power_w;    /* Power drawn whatever the activity (leakage, fans, HBM). */
    double dynamic_power_w;   /* Extra power of a fully busy SM array at max clock. */
    double memory_power_w;    /* Extra power while memory-bound (clock independent). */
    double power_cap_w;       /* Board power limit: above it the GPU throttles. */
    double blocking_power_w;  /* Power while blocked on P2P communication. */
    double knee_freq_mhz;     /* Voltage is flat below this clock and rises above it. */
    double voltage_rise;      /* Relative voltage increase from the knee to max clock. */
    double tflops_at_max;     /* Effective bf16 throughput at max clock, TFLOP/s. */
    double mem_bandwidth_gbs; /* Effective memory bandwidth, GB/s. */
    bool calibrated;          /* Fitted against real profiles (A100, A40) or extrapolated. */
} erg_sim_gpu_info;

/* Number of simulated GPU kinds, and the i-th one (NULL when out of range).
 * The pointer is to a static table: never free it. */
ERG_API size_t erg_sim_gpu_count(void);
ERG_API const erg_sim_gpu_info *erg_sim_gpu_at(size_t i);
/* Look a GPU kind up by name (case insensitive; "a100-sxm", "a100_sxm" are
 * A100). ERG_ENOTFOUND with the list of known names otherwise. */
ERG_API erg_status erg_sim_gpu_find(const char *name, const erg_sim_gpu_info **out, erg_error *err);

/* Number of built-in models and the name of the i-th (NULL when out of range):
 * "gpt3-xl", "gpt3-2.7b", "gpt3-6.7b", "bloom-3b", "bert-large". */
ERG_API size_t erg_sim_model_count(void);
ERG_API const char *erg_sim_model_name(size_t i);

/* The work of one instruction of a partitioned model: floating-point work and
 * memory traffic for one microbatch. */
typedef struct erg_sim_work {
    double gflop;  /* Floating-point work, GFLOP. */
    double mem_gb; /* DRAM traffic that does not overlap with compute, GB. */
} erg_sim_work;

/* Work of (stage, kind) when `model` is split into num_stages stages with
 * (kind: forward, backward, or the backward_input / backward_weight halves)
 * microbatches of microbatch_size sequences (0 = the model's default).
 * Layers are spread evenly; the last stage also runs the LM head (heavier),
 * the first the embedding. ERG_ENOTFOUND for an unknown model, ERG_EINVAL
 * when num_stages exceeds the number of layers or an index is out of range. */
ERG_API erg_status erg_sim_model_work(const char *model, int num_stages, int microbatch_size,
                                      int stage, erg_instr_kind kind, erg_sim_work *out,
                                      erg_error *err);

/* Evaluate the DVFS model: time and average power of `work` run with the SM
 * clock locked at freq_mhz (any value in [min, max]; the power cap may make
 * the effective clock lower). Pure function, thread-safe. */
ERG_API erg_status erg_sim_eval(const erg_sim_gpu_info *gpu, const erg_sim_work *work,
                                double freq_mhz, double *time_s, double *power_w, erg_error *err);

/* A whole stage profile from the model: every supported clock from the max
 * down to min_freq_mhz (0 = the GPU's profile_min_freq_mhz), forward and
 * backward of every stage. The caller frees *out with erg_profile_free. */
/* The same; with split_backward also backward_input and backward_weight
 * rows (the zero-bubble split, docs/sim-gpu.md). */
ERG_API erg_status erg_sim_profile_kinds(const char *gpu, const char *model, int num_stages,
                                         int microbatch_size, int min_freq_mhz, int split_backward,
                                         erg_profile **out, erg_error *err);
ERG_API erg_status erg_sim_profile(const char *gpu, const char *model, int num_stages,
                                   int microbatch_size, int min_freq_mhz, erg_profile **out,
                                   erg_error *err);

/* ------------------------------------------------------------------------ */
/* GPU back-ends: one interface over NVML, the simulated GPU and ergond.    */
/* ------------------------------------------------------------------------ */

/* An opened back-end and its devices. A handle may be used from several
 * threads as long as two threads never use the same device at once. */
typedef struct erg_gpu erg_gpu;

/* Open the simulated back-end: num_devices GPUs of kind `gpu` running
 * `model` split into num_devices stages (device i is stage i). Clocks start
 * unlocked (max); the energy counter integrates the model's power over real
 * (monotonic) time: blocking power while idle, the model's power while an
 * instruction set with erg_gpu_sim_set_activity is running. */
ERG_API erg_status erg_gpu_open_sim(const char *gpu, const char *model, int num_devices,
                                    erg_gpu **out, erg_error *err);
/* Open NVML with dlopen. lib_path NULL means $ERGON_NVML_LIBRARY if set,
 * else "libnvidia-ml.so.1", then "libnvidia-ml.so". A missing library or a
 * missing required symbol gives ERG_ENOGPU "NVML unavailable: <reason>". */
ERG_API erg_status erg_gpu_open_nvml(const char *lib_path, erg_gpu **out, erg_error *err);
/* Open the back-end that goes through a running ergond (daemon.h) at
 * socket_path: all reads and writes are requests to the daemon (its HTTP
 * protocol over the Unix socket, docs/ergond.md). Also reachable as
 * erg_gpu_open("daemon:<socket path>"). */
ERG_API erg_status erg_gpu_open_daemon(const char *socket_path, erg_gpu **out, erg_error *err);
/* Open AMD SMI with dlopen. lib_path NULL means $ERGON_AMDSMI_LIBRARY if
 * set, else "libamd_smi.so", then "/opt/rocm/lib/libamd_smi.so". ERG_ENOGPU
 * "amdsmi unavailable: <reason>" as for NVML. The SM clock is the GFX (SCLK)
 * clock; docs/runtime.md says how amdsmi's calls map to this interface. */
ERG_API erg_status erg_gpu_open_amdsmi(const char *lib_path, erg_gpu **out, erg_error *err);
/* Open a back-end from a spec string: "sim:<gpu>[:<model>[:<n>]]", "nvml",
 * "nvml:<library path>", "amdsmi", "amdsmi:<library path>",
 * "daemon:<ergond socket path>", or "auto": NVML if its library
 * opens, else amdsmi if its library opens, else ERG_ENOGPU naming both
 * reasons. */
ERG_API erg_status erg_gpu_open(const char *spec, erg_gpu **out, erg_error *err);
/* Close; NULL is a no-op. Does not reset clocks: that is the caller's
 * decision (erg_gpu_restore_all). */
ERG_API void erg_gpu_close(erg_gpu *g);

/* A spec that erg_gpu_open turns into the same back-end (for a helper
 * process): "sim:a100:gpt3-xl:2", "nvml:/path/libnvidia-ml.so.1". Owned by
 * the handle. */
ERG_API const char *erg_gpu_open_spec(const erg_gpu *g);
/* "sim", "nvml". */
ERG_API const char *erg_gpu_backend_name(const erg_gpu *g);
ERG_API int erg_gpu_count(const erg_gpu *g);
/* Device name into buf (NUL-terminated, truncated to size). */
ERG_API erg_status erg_gpu_name(erg_gpu *g, int dev, char *buf, size_t size, erg_error *err);
/* Supported SM clocks at the highest memory clock, descending, in MHz. The
 * caller frees *clocks with erg_free. */
ERG_API erg_status erg_gpu_sm_clocks(erg_gpu *g, int dev, int **clocks, size_t *n, erg_error *err);
/* Supported memory clocks, descending, MHz; free with erg_free. */
ERG_API erg_status erg_gpu_mem_clocks(erg_gpu *g, int dev, int **clocks, size_t *n, erg_error *err);
/* Lock the SM clock to [min_mhz, max_mhz]; min_mhz <= max_mhz, both
 * supported (ERG_EINVAL otherwise, checked before any driver call). Needs
 * privilege on real GPUs: ERG_EPERM with the driver's text. */
ERG_API erg_status erg_gpu_lock_sm_clocks(erg_gpu *g, int dev, int min_mhz, int max_mhz,
                                          erg_error *err);
ERG_API erg_status erg_gpu_reset_sm_clocks(erg_gpu *g, int dev, erg_error *err);
/* Memory clock lock/reset. ERG_ENOTSUP on GPUs without it (pre-Ampere). */
ERG_API erg_status erg_gpu_lock_mem_clocks(erg_gpu *g, int dev, int min_mhz, int max_mhz,
                                           erg_error *err);
ERG_API erg_status erg_gpu_reset_mem_clocks(erg_gpu *g, int dev, erg_error *err);
/* Power limit constraints, default and current values, in mW. */
ERG_API erg_status erg_gpu_power_limits(erg_gpu *g, int dev, uint32_t *min_mw, uint32_t *max_mw,
                                        uint32_t *default_mw, uint32_t *current_mw, erg_error *err);
/* Set the power limit (within the constraints, ERG_EINVAL otherwise). */
ERG_API erg_status erg_gpu_set_power_limit(erg_gpu *g, int dev, uint32_t limit_mw, erg_error *err);
/* Restore the default power limit. */
ERG_API erg_status erg_gpu_reset_power_limit(erg_gpu *g, int dev, erg_error *err);
/* Cumulative energy, mJ: the hardware counter while it can be trusted;
 * once it goes backwards, stalls or disagrees with integrated power (see
 * erg_gpu_energy_info), the reading continues from its last trusted value by
 * integrating power. Never decreases. ERG_ENOTSUP where the device has no
 * energy reading of its own (the second die of an MI250). */
ERG_API erg_status erg_gpu_energy_mj(erg_gpu *g, int dev, uint64_t *energy_mj, erg_error *err);

/* Where a device's energy comes from. */
typedef enum erg_energy_source {
    ERG_ENERGY_COUNTER = 0,    /* the driver's hardware energy counter */
    ERG_ENERGY_INTEGRATED = 1, /* power integrated by ergon (trapezoids between samples) */
    ERG_ENERGY_MODEL = 2,      /* the simulated GPU's DVFS model */
    ERG_ENERGY_NONE = 3,       /* no reading of its own (MI250 odd die) */
} erg_energy_source;
/* "counter", "integrated", "model", "none". */
ERG_API const char *erg_energy_source_name(erg_energy_source s);
/* The name of device dev's current source ("" for a bad handle or device): for bindings
 * that want the word without the struct. */
ERG_API const char *erg_gpu_energy_source(erg_gpu *g, int dev);

/* Thresholds of the energy check: a counter that does not move for
 * ERG_ENERGY_STALL_S seconds while integrated power says at least
 * ERG_ENERGY_STALL_MIN_J joules were drawn is stalled; over a window of at
 * least ERG_ENERGY_WINDOW_S seconds and ERG_ENERGY_WINDOW_MIN_J joules, a
 * counter whose increase differs from integrated power by more than
 * ERG_ENERGY_TOLERANCE (relative) disagrees. */
#define ERG_ENERGY_STALL_S 1.0
#define ERG_ENERGY_STALL_MIN_J 5.0
#define ERG_ENERGY_WINDOW_S 5.0
#define ERG_ENERGY_WINDOW_MIN_J 50.0
#define ERG_ENERGY_TOLERANCE 0.25
/* ...and the window holds at least this many power samples (fewer: too coarse to judge). */
#define ERG_ENERGY_WINDOW_MIN_SAMPLES 20
/* While a counter is checked, power is sampled at most every ERG_ENERGY_SAMPLE_MIN_S
 * seconds; once power is integrated, at every reading. */
#define ERG_ENERGY_SAMPLE_MIN_S 0.05

/* What a device's energy reading is. */
typedef struct erg_gpu_energy_info {
    erg_energy_source source; /* where erg_gpu_energy_mj's value comes from now */
    char scope[48];           /* what it covers: "gpu", "module" (GH200: GPU + CPU +
                                 memory), "package" (MI250: both dies), "none (...)" */
    double resolution_mj;     /* counter resolution (0: unknown, or not a counter) */
    double interval_s;        /* integrated: mean interval between power samples so far
                                 (0 before two samples); the rate is 1 / interval_s */
    int replaced;             /* 1 when the counter was replaced by integration */
    char reason[200];         /* why it was replaced ("" otherwise) */
} erg_gpu_energy_info;
/* The hardware counter as the driver reports it, mJ, unchecked (for
 * `ergon gpu energy --check`). */
ERG_API erg_status erg_gpu_energy_counter_mj(erg_gpu *g, int dev, uint64_t *energy_mj,
                                             erg_error *err);
ERG_API erg_status erg_gpu_energy_info_get(erg_gpu *g, int dev, erg_gpu_energy_info *out,
                                           erg_error *err);
/* Called once per device when its counter is replaced by integration, with
 * the reason (the library never prints: the caller logs it). NULL clears.
 * Called from the thread that read the energy. */
typedef void (*erg_gpu_energy_event_fn)(void *user, int dev, const char *message);
ERG_API void erg_gpu_set_energy_event(erg_gpu *g, erg_gpu_energy_event_fn fn, void *user);
/* Current power draw, mW. */
ERG_API erg_status erg_gpu_power_mw(erg_gpu *g, int dev, uint32_t *power_mw, erg_error *err);
/* Reset SM and memory clocks and the power limit of one device (what a
 * process must leave behind). Tries all three, returns the first error;
 * ERG_ENOTSUP of the memory clock reset is ignored. */
ERG_API erg_status erg_gpu_restore(erg_gpu *g, int dev, erg_error *err);

/* Simulated back-end only: what device dev runs from now on: an instruction
 * of its stage (kind ERG_FORWARD/ERG_BACKWARD) or, with busy false, nothing
 * (blocked on communication: blocking power). *time_s (may be NULL) receives
 * the time the instruction takes at the current clock. ERG_ENOTSUP on other
 * back-ends. */
ERG_API erg_status erg_gpu_sim_set_activity(erg_gpu *g, int dev, bool busy, erg_instr_kind kind,
                                            double *time_s, erg_error *err);

/* Simulated back-end only: the device's own accounting, in simulated time, of
 * the instructions begun with erg_gpu_sim_set_activity(busy = true): each
 * counts the model's time and energy at the clock (and power limit) the
 * device had when it began, however long the host then took. Independent of
 * wall time and machine load (the energy counter is not: it integrates the
 * power over real time). A run's simulated energy over T simulated seconds is
 * busy_energy_j + blocking_power_w * (T - busy_time_s) (docs/sim-gpu.md).
 * Outputs (each may be NULL): the instructions begun, the sums of their
 * simulated times and energies, and the clock the last one began at (0: none
 * yet). ERG_ENOTSUP on other back-ends. */
ERG_API erg_status erg_gpu_sim_account(erg_gpu *g, int dev, uint64_t *instructions,
                                       double *busy_time_s, double *busy_energy_j,
                                       int *last_freq_mhz, erg_error *err);

/* Energy between two readings of a counter `bits` wide (64 for NVML's
 * total energy; narrower counters wrap). Counts exactly one wrap when
 * after < before. */
ERG_API uint64_t erg_counter_delta(uint64_t before, uint64_t after, unsigned bits);

#ifdef __cplusplus
}
#endif
#endif
