/* dl_lib.h: a vendor library opened with dlopen and its symbol table resolved (NVML, amdsmi). */
#ifndef ERGON_GPU_DL_LIB_H
#define ERGON_GPU_DL_LIB_H

#include "core/internal.h"

/* One call of the library: where its pointer goes in the back-end's API struct, its names
 * (the versioned one first; names[1] may be NULL) and whether the back-end needs it (a
 * missing optional call leaves a NULL pointer: the back-end answers ERG_ENOTSUP). */
typedef struct erg__dl_sym {
    size_t offset;
    const char *names[2];
    bool required;
} erg__dl_sym;

/* The vendor library the back-end knows. */
typedef struct erg__dl_vendor {
    const char *what;        /* "NVML", "amdsmi": the start of messages */
    const char *env;         /* the variable naming the library, "ERGON_NVML_LIBRARY" */
    const char *defaults[2]; /* tried in order without a path or the variable (NULL ends) */
    const char *hint;        /* what to do when none loads */
} erg__dl_vendor;

/* Open the library: lib_path if given, else $env, else the defaults, the first that loads;
 * then resolve syms into api (a struct of function pointers). *lib gets the handle and
 * *loaded the name that loaded. ERG_ENOGPU when none loads ("<what> unavailable: library not
 * found: cannot load A or B (dlerror); <hint>") or a required call is missing ("<what>
 * unavailable: missing symbol NAME (dlerror)", the library closed again). */
erg_status erg__dl_open(const erg__dl_vendor *v, const char *lib_path, const erg__dl_sym *syms,
                        size_t nsyms, void *api, void **lib, const char **loaded, erg_error *err);

#endif
