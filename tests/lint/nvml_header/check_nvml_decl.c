/* check_nvml_decl.c: compiles ergon's NVML declarations (src/gpu/nvml_decl.h) against NVIDIA's
 * nvml.h. Built by tests/lint/nvml_header_check.sh with -Werror: any return code whose value or
 * any call whose prototype differs from the real header is a compile error. Never linked. */
#include <nvml.h>

#define ERG_NVML_RET nvmlReturn_t
#define ERG_NVML_DEV nvmlDevice_t
#include "gpu/nvml_decl.h"

/* The int and void * that the back-end uses in place of NVIDIA's types are the same size. */
_Static_assert(sizeof(nvmlReturn_t) == sizeof(int), "nvmlReturn_t is not int-sized");
_Static_assert(sizeof(nvmlDevice_t) == sizeof(void *), "nvmlDevice_t is not a pointer");

#define CHECK_CODE(name, value) _Static_assert((int)name == value, #name " differs from nvml.h");
ERG_NVML_CODES(CHECK_CODE)

/* Each call: a pointer of our declared type initialised with NVIDIA's function. */
#define CHECK_CALL(field, symbol, fallback, required, ret, params)                                 \
    ret(*const check_##field) params = &symbol;
ERG_NVML_CALLS(CHECK_CALL)

/* The unversioned fallbacks keep the versioned calls' prototypes (nvml.h declares them only
 * with NVML_NO_UNVERSIONED_FUNC_DEFS; the script compiles this file a second time so). */
#ifdef NVML_NO_UNVERSIONED_FUNC_DEFS
static erg_nvml_ret (*const check_init_v1)(void) = &nvmlInit;
static erg_nvml_ret (*const check_count_v1)(unsigned int *) = &nvmlDeviceGetCount;
static erg_nvml_ret (*const check_handle_v1)(unsigned int,
                                             erg_nvml_dev *) = &nvmlDeviceGetHandleByIndex;
#endif
