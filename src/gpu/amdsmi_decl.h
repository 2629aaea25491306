/* amdsmi_decl.h: our own declarations of the AMD SMI calls, types and codes that ergon uses. */
/*
 * The build needs no ROCm: backend_amdsmi.c opens libamd_smi.so with dlopen and calls through
 * these declarations, written by us from AMD's amdsmi documentation and the shape of its C API
 * (include/amd_smi/amdsmi.h, as the PyPI package `amdsmi` 7.0.2 binds it with ctypes). They
 * describe amdsmi 6.4 and 7.x (ROCm 6.4, 7.0): amdsmi_power_info_t changed layout before 6.4.
 * The test lint/amdsmi_decl_check compares every code, define, struct layout and call here with
 * that binding (docs/runtime.md, "AMD SMI").
 *
 * Status codes are a 32-bit enum, handles opaque pointers. Every struct below is the natural C
 * layout of AMD's (no packing), so the library may write the whole struct into ours; we read
 * only the fields named here.
 */
#ifndef ERGON_GPU_AMDSMI_DECL_H
#define ERGON_GPU_AMDSMI_DECL_H

#include <stdbool.h>
#include <stdint.h>

typedef uint32_t erg_amdsmi_ret;
typedef void *erg_amdsmi_handle;

/* Return codes we interpret: X(NAME, VALUE). */
#define ERG_AMDSMI_CODES(X)                                                                        \
    X(AMDSMI_STATUS_SUCCESS, 0)                                                                    \
    X(AMDSMI_STATUS_INVAL, 1)                                                                      \
    X(AMDSMI_STATUS_NOT_SUPPORTED, 2)                                                              \
    X(AMDSMI_STATUS_NOT_YET_IMPLEMENTED, 3)                                                        \
    X(AMDSMI_STATUS_TIMEOUT, 8)                                                                    \
    X(AMDSMI_STATUS_NO_PERM, 10)                                                                   \
    X(AMDSMI_STATUS_INIT_ERROR, 18)                                                                \
    X(AMDSMI_STATUS_BUSY, 30)                                                                      \
    X(AMDSMI_STATUS_NOT_FOUND, 31)                                                                 \
    X(AMDSMI_STATUS_NOT_INIT, 32)                                                                  \
    X(AMDSMI_STATUS_DRIVER_NOT_LOADED, 34)                                                         \
    X(AMDSMI_STATUS_INSUFFICIENT_SIZE, 41)                                                         \
    X(AMDSMI_STATUS_NO_DRV, 51)

/* amdsmi_init flags and the clock domains we use. */
#define ERG_AMDSMI_INIT_AMD_GPUS (UINT64_C(1) << 1)
#define ERG_AMDSMI_CLK_TYPE_SYS 0 /* the graphics (GFX/SCLK) clock: the "SM clock" */
#define ERG_AMDSMI_CLK_TYPE_MEM 4
#define ERG_AMDSMI_MAX_NUM_FREQUENCIES 33
/* A value the library could not read ("N/A") is the maximum of the field's type. */
#define ERG_AMDSMI_NA_U32 UINT32_MAX

typedef struct erg_amdsmi_frequencies {
    bool has_deep_sleep;
    uint32_t num_supported;
    uint32_t current;                                   /* index into frequency[] */
    uint64_t frequency[ERG_AMDSMI_MAX_NUM_FREQUENCIES]; /* Hz */
} erg_amdsmi_frequencies;

typedef struct erg_amdsmi_power_cap_info {
    uint64_t power_cap; /* all in microwatts */
    uint64_t default_power_cap;
    uint64_t dpm_cap;
    uint64_t min_power_cap;
    uint64_t max_power_cap;
    uint64_t reserved[3];
} erg_amdsmi_power_cap_info;

typedef struct erg_amdsmi_power_info {
    uint64_t socket_power;         /* W */
    uint32_t current_socket_power; /* W; N/A on GPUs that report only the average */
    uint32_t average_socket_power; /* W; N/A on MI300 */
    uint64_t gfx_voltage;
    uint64_t soc_voltage;
    uint64_t mem_voltage;
    uint32_t power_limit;
    uint64_t reserved[18];
} erg_amdsmi_power_info;

typedef struct erg_amdsmi_asic_info {
    char market_name[256];
    uint32_t vendor_id;
    char vendor_name[256];
    uint32_t subvendor_id;
    uint64_t device_id;
    uint32_t rev_id;
    char asic_serial[256];
    uint32_t oam_id;
    uint32_t num_of_compute_units;
    uint64_t target_graphics_version;
    uint32_t subsystem_id;
    uint32_t reserved[21];
} erg_amdsmi_asic_info;

/*
 * The calls: X(FIELD, SYMBOL, REQUIRED, PARAMETERS), all returning erg_amdsmi_ret. Missing
 * required calls make the back-end unavailable; missing optional ones give ERG_ENOTSUP.
 */
#define ERG_AMDSMI_CALLS(X)                                                                        \
    X(init, amdsmi_init, 1, (uint64_t))                                                            \
    X(shut_down, amdsmi_shut_down, 1, (void))                                                      \
    X(status_string, amdsmi_status_code_to_string, 0, (erg_amdsmi_ret, const char **))             \
    X(socket_handles, amdsmi_get_socket_handles, 1, (uint32_t *, erg_amdsmi_handle *))             \
    X(processor_handles, amdsmi_get_processor_handles, 1,                                          \
      (erg_amdsmi_handle, uint32_t *, erg_amdsmi_handle *))                                        \
    X(asic_info, amdsmi_get_gpu_asic_info, 1, (erg_amdsmi_handle, erg_amdsmi_asic_info *))         \
    X(clk_freq, amdsmi_get_clk_freq, 1, (erg_amdsmi_handle, uint32_t, erg_amdsmi_frequencies *))   \
    X(set_clk_range, amdsmi_set_gpu_clk_range, 1,                                                  \
      (erg_amdsmi_handle, uint64_t, uint64_t, uint32_t))                                           \
    X(energy_count, amdsmi_get_energy_count, 1,                                                    \
      (erg_amdsmi_handle, uint64_t *, float *, uint64_t *))                                        \
    X(power_info, amdsmi_get_power_info, 1, (erg_amdsmi_handle, erg_amdsmi_power_info *))          \
    X(power_cap_info, amdsmi_get_power_cap_info, 0,                                                \
      (erg_amdsmi_handle, uint32_t, erg_amdsmi_power_cap_info *))                                  \
    X(set_power_cap, amdsmi_set_power_cap, 0, (erg_amdsmi_handle, uint32_t, uint64_t))

#endif
