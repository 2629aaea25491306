/* nvml_decl.h: our own declarations of the NVML calls and return codes that ergon uses. */
/*
 * The build needs no CUDA toolkit: backend_nvml.c opens libnvidia-ml with dlopen and calls
 * through these declarations. They are written by us, from NVIDIA's documentation, in one
 * place, and tests/lint/nvml_header/check_nvml_decl.c compiles every one of them against the real
 * nvml.h where one exists (test lint/nvml_header_check): a prototype or code that differs from
 * NVIDIA's fails that test.
 *
 * nvmlReturn_t is an int-sized enum and nvmlDevice_t an opaque pointer; we call them int and
 * void *. The check defines ERG_NVML_RET and ERG_NVML_DEV as NVIDIA's types before including
 * this file, so that each function pointer type must be exactly the header's.
 */
#ifndef ERGON_GPU_NVML_DECL_H
#define ERGON_GPU_NVML_DECL_H

#ifndef ERG_NVML_RET
#define ERG_NVML_RET int
#endif
#ifndef ERG_NVML_DEV
#define ERG_NVML_DEV void *
#endif
typedef ERG_NVML_RET erg_nvml_ret;
typedef ERG_NVML_DEV erg_nvml_dev;

/* Return codes we interpret: X(NAME, VALUE). */
#define ERG_NVML_CODES(X)                                                                          \
    X(NVML_SUCCESS, 0)                                                                             \
    X(NVML_ERROR_UNINITIALIZED, 1)                                                                 \
    X(NVML_ERROR_INVALID_ARGUMENT, 2)                                                              \
    X(NVML_ERROR_NOT_SUPPORTED, 3)                                                                 \
    X(NVML_ERROR_NO_PERMISSION, 4)                                                                 \
    X(NVML_ERROR_NOT_FOUND, 6)                                                                     \
    X(NVML_ERROR_INSUFFICIENT_SIZE, 7)                                                             \
    X(NVML_ERROR_DRIVER_NOT_LOADED, 9)                                                             \
    X(NVML_ERROR_TIMEOUT, 10)                                                                      \
    X(NVML_ERROR_GPU_IS_LOST, 15)

/*
 * The calls: X(FIELD, SYMBOL, FALLBACK, REQUIRED, RETURN, PARAMETERS). SYMBOL is looked up
 * first, then FALLBACK (a string or NULL: the unversioned name older drivers export). Missing
 * required calls make the back-end unavailable; missing optional ones give ERG_ENOTSUP.
 */
#define ERG_NVML_CALLS(X)                                                                          \
    X(init, nvmlInit_v2, "nvmlInit", 1, erg_nvml_ret, (void))                                      \
    X(shutdown, nvmlShutdown, NULL, 1, erg_nvml_ret, (void))                                       \
    X(error_string, nvmlErrorString, NULL, 1, const char *, (erg_nvml_ret))                        \
    X(get_count, nvmlDeviceGetCount_v2, "nvmlDeviceGetCount", 1, erg_nvml_ret, (unsigned int *))   \
    X(get_handle, nvmlDeviceGetHandleByIndex_v2, "nvmlDeviceGetHandleByIndex", 1, erg_nvml_ret,    \
      (unsigned int, erg_nvml_dev *))                                                              \
    X(get_name, nvmlDeviceGetName, NULL, 1, erg_nvml_ret, (erg_nvml_dev, char *, unsigned int))    \
    X(mem_clocks, nvmlDeviceGetSupportedMemoryClocks, NULL, 1, erg_nvml_ret,                       \
      (erg_nvml_dev, unsigned int *, unsigned int *))                                              \
    X(sm_clocks, nvmlDeviceGetSupportedGraphicsClocks, NULL, 1, erg_nvml_ret,                      \
      (erg_nvml_dev, unsigned int, unsigned int *, unsigned int *))                                \
    X(set_locked, nvmlDeviceSetGpuLockedClocks, NULL, 1, erg_nvml_ret,                             \
      (erg_nvml_dev, unsigned int, unsigned int))                                                  \
    X(reset_locked, nvmlDeviceResetGpuLockedClocks, NULL, 1, erg_nvml_ret, (erg_nvml_dev))         \
    X(energy, nvmlDeviceGetTotalEnergyConsumption, NULL, 1, erg_nvml_ret,                          \
      (erg_nvml_dev, unsigned long long *))                                                        \
    X(power, nvmlDeviceGetPowerUsage, NULL, 1, erg_nvml_ret, (erg_nvml_dev, unsigned int *))       \
    X(set_mem_locked, nvmlDeviceSetMemoryLockedClocks, NULL, 0, erg_nvml_ret,                      \
      (erg_nvml_dev, unsigned int, unsigned int))                                                  \
    X(reset_mem_locked, nvmlDeviceResetMemoryLockedClocks, NULL, 0, erg_nvml_ret, (erg_nvml_dev))  \
    X(limit_constraints, nvmlDeviceGetPowerManagementLimitConstraints, NULL, 0, erg_nvml_ret,      \
      (erg_nvml_dev, unsigned int *, unsigned int *))                                              \
    X(limit_default, nvmlDeviceGetPowerManagementDefaultLimit, NULL, 0, erg_nvml_ret,              \
      (erg_nvml_dev, unsigned int *))                                                              \
    X(limit_get, nvmlDeviceGetPowerManagementLimit, NULL, 0, erg_nvml_ret,                         \
      (erg_nvml_dev, unsigned int *))                                                              \
    X(limit_set, nvmlDeviceSetPowerManagementLimit, NULL, 0, erg_nvml_ret,                         \
      (erg_nvml_dev, unsigned int))

#endif
