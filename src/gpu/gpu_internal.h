/* gpu_internal.h: the ops table every GPU back-end implements (sim, NVML). */
#ifndef ERGON_GPU_INTERNAL_H
#define ERGON_GPU_INTERNAL_H

#include "core/internal.h"
#include "ergon/gpu.h"

#include <pthread.h>

/* One back-end. Device indices reaching these are already range-checked and
 * clock arguments already validated against the supported lists by gpu.c. */
typedef struct erg__gpu_backend {
    const char *name;
    void (*close)(erg_gpu *g);
    erg_status (*name_of)(erg_gpu *g, int dev, char *buf, size_t size, erg_error *err);
    /* Descending lists, allocated with erg__malloc. */
    erg_status (*sm_clocks)(erg_gpu *g, int dev, int **clocks, size_t *n, erg_error *err);
    erg_status (*mem_clocks)(erg_gpu *g, int dev, int **clocks, size_t *n, erg_error *err);
    erg_status (*lock_sm)(erg_gpu *g, int dev, int min_mhz, int max_mhz, erg_error *err);
    erg_status (*reset_sm)(erg_gpu *g, int dev, erg_error *err);
    erg_status (*lock_mem)(erg_gpu *g, int dev, int min_mhz, int max_mhz, erg_error *err);
    erg_status (*reset_mem)(erg_gpu *g, int dev, erg_error *err);
    erg_status (*power_limits)(erg_gpu *g, int dev, uint32_t *min_mw, uint32_t *max_mw,
                               uint32_t *default_mw, uint32_t *current_mw, erg_error *err);
    erg_status (*set_power_limit)(erg_gpu *g, int dev, uint32_t mw, erg_error *err);
    erg_status (*energy_mj)(erg_gpu *g, int dev, uint64_t *mj, erg_error *err);
    erg_status (*power_mw)(erg_gpu *g, int dev, uint32_t *mw, erg_error *err);
    /* Optional: fill source, scope, resolution_mj and (for a counter known to be
     * unreliable, which is then integrated from the start) reason. NULL: a
     * counter of scope "gpu" that gpu.c checks against integrated power. */
    void (*energy_caps)(erg_gpu *g, int dev, erg_gpu_energy_info *info);
    /* Nonzero: the reading is checked elsewhere (ergond checks its own devices;
     * the model is exact): gpu.c passes it through unchecked. */
    int energy_unchecked;
} erg__gpu_backend;

/* Per device state of the energy check (energy.c). */
typedef struct erg__energy_dev erg__energy_dev;

struct erg_gpu {
    const erg__gpu_backend *ops; /* The back-end. */
    int count;                   /* Number of devices. */
    void *impl;                  /* Back-end state. */
    char *spec;                  /* A spec that reopens the same back-end (erg_gpu_open). */
    int **sm_cache;              /* Per device: supported SM clocks (lazily filled). */
    size_t *sm_cache_n;
    int **mem_cache; /* Per device: supported memory clocks. */
    size_t *mem_cache_n;
    erg__energy_dev *energy;   /* Per device: energy check state (energy.c), lazily. */
    pthread_mutex_t energy_mu; /* Guards `energy`: a client reads energy from its clock
                                  thread and from the training thread (recursive: the
                                  event callback may ask for the info). */
    erg_gpu_energy_event_fn energy_event;
    void *energy_event_user;
};

/* energy.c: the checked energy reading behind erg_gpu_energy_mj, and cleanup. */
erg_status erg__energy_alloc(erg_gpu *g);
erg_status erg__energy_read(erg_gpu *g, int dev, uint64_t *mj, erg_error *err);
void erg__energy_free(erg_gpu *g);
/* The source erg_energy_source_name names (any case); a counter for NULL or an unknown name
 * (what an ergond too old to say reports). */
erg_energy_source erg__energy_source_parse(const char *name);

/* Allocate the common part with `count` devices (caches empty). */
erg_status erg__gpu_alloc(const erg__gpu_backend *ops, int count, void *impl, erg_gpu **out,
                          erg_error *err);

extern const erg__gpu_backend erg__gpu_sim_backend;
extern const erg__gpu_backend erg__gpu_nvml_backend;
extern const erg__gpu_backend erg__gpu_amdsmi_backend;

/* qsort comparator: ints in descending order (clock lists). */
int erg__cmp_int_desc(const void *a, const void *b);

/* Monotonic time in seconds. */
double erg__now_s(void);

#endif
