/* ergon.h: the umbrella header of libergon: version, error codes, features. */
#ifndef ERGON_ERGON_H
#define ERGON_ERGON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most ranks (pipeline stages) a schedule, a profile's planning and the frontier files
 * take (plans.ergon's num_stages, sparse profiling's stages). */
#define ERG_MAX_STAGES 4096

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ERG_BUILDING_LIB)
#define ERG_API __attribute__((visibility("default")))
#else
#define ERG_API
#endif

#if defined(__GNUC__)
#define ERG_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ERG_PRINTF(a, b)
#endif

/* Result codes. Numbers are stable: the CLI, the server and the Python binding
 * rely on them. ERG_OK is always 0. */
#define ERG_STATUS_MAP(X)                                                                          \
    X(OK, 0, "success")                                                                            \
    X(EINVAL, 1, "invalid argument")                                                               \
    X(EPARSE, 2, "malformed input")                                                                \
    X(EIO, 3, "input/output error")                                                                \
    X(ENOMEM, 4, "out of memory")                                                                  \
    X(ENOTSUP, 5, "not supported")                                                                 \
    X(ENOTFOUND, 6, "not found")                                                                   \
    X(EPERM, 7, "permission denied")                                                               \
    X(ESTATE, 8, "invalid state")                                                                  \
    X(ENUMERIC, 9, "numerical failure")                                                            \
    X(ENOGPU, 10, "GPU back-end unavailable")                                                      \
    X(ENET, 11, "network error")                                                                   \
    X(EDB, 12, "database error")                                                                   \
    X(ETIMEOUT, 13, "timed out")                                                                   \
    X(ECANCELED, 14, "canceled")                                                                   \
    X(EEXIST, 15, "already exists")                                                                \
    X(EINTERNAL, 16, "internal error")

typedef enum erg_status {
#define ERG_X_ENUM(name, num, text) ERG_##name = num,
    ERG_STATUS_MAP(ERG_X_ENUM)
#undef ERG_X_ENUM
} erg_status;

#define ERG_ERROR_MSG_LEN 512

/* Error details a caller passes to any function that can fail. May be NULL
 * when the caller only wants the code. `msg` is a full sentence that names the
 * file, line and value at fault where there is one. */
typedef struct erg_error {
    erg_status status;           /* The code last returned. */
    char msg[ERG_ERROR_MSG_LEN]; /* Human-readable detail, NUL-terminated. */
} erg_error;

/* Short English text for a code ("malformed input"); never NULL. */
ERG_API const char *erg_strerror(erg_status status);
/* The code's name without prefix ("EPARSE"); never NULL. */
ERG_API const char *erg_status_name(erg_status status);
/* Fill `err` (if not NULL) and return `status`. Thread-safe. */
ERG_API erg_status erg_error_set(erg_error *err, erg_status status, const char *fmt, ...)
    ERG_PRINTF(3, 4);
ERG_API erg_status erg_error_setv(erg_error *err, erg_status status, const char *fmt, va_list ap);
/* Reset `err` to ERG_OK with an empty message. */
ERG_API void erg_error_clear(erg_error *err);
/* For bindings (ctypes, cffi) that must not mirror the struct: the bytes to
 * allocate for one erg_error (zeroed storage is a cleared error), and its
 * code and message read through the library. */
ERG_API size_t erg_error_size(void);
ERG_API erg_status erg_error_status(const erg_error *err);
ERG_API const char *erg_error_message(const erg_error *err);

/* Version of the library, "MAJOR.MINOR.PATCH". */
ERG_API const char *erg_version(void);

/* Progress of a long computation: called with done <= total. Return non-zero
 * to cancel; the computation then returns ERG_ECANCELED. */
typedef int (*erg_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Free memory that the library handed out (strings, arrays) when a function's
 * documentation says so. NULL is a no-op. */
ERG_API void erg_free(void *ptr);

#ifdef __cplusplus
}
#endif
#endif
