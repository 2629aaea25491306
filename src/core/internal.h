/* internal.h: helpers shared by libergon's modules; no API promise. */
#ifndef ERGON_CORE_INTERNAL_H
#define ERGON_CORE_INTERNAL_H

#include "ergon/ergon.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- allocation: every allocation in the library goes through these ---- */
void *erg__malloc(size_t size);
void *erg__calloc(size_t count, size_t size);
void *erg__realloc(void *ptr, size_t size);
/* realloc of count*size with overflow check. */
void *erg__reallocarray(void *ptr, size_t count, size_t size);
void erg__free(void *ptr);
char *erg__strdup(const char *s);
/* The directory that holds `path` ("/" for "/x", "." for "x"), newly allocated; NULL when out
 * of memory. */
char *erg__dirname_dup(const char *path);
char *erg__strndup(const char *s, size_t n);
/* Test hook: make the n-th allocation from now fail (0 = never). */
void erg__alloc_fail_after(long n);

/* ---- growable arrays ---- */
/* The capacity an array of capacity cap grows to so that it holds `need`
 * elements: cap itself when it already does, otherwise the larger of twice
 * cap, `first` (the first allocation) and need. 0 when that would overflow
 * (a count the caller then cannot allocate). */
size_t erg__grow_cap(size_t cap, size_t need, size_t first);
/* Room for `need` elements of `size` bytes in the array *(T **)arrp of
 * capacity *cap, growing it by erg__grow_cap: *arrp and *cap change only on
 * success; false when out of memory (both untouched, the caller reports).
 * Use ERG__GROW, which checks the element size against the pointer. */
bool erg__grow_slow(void *arrp, size_t *cap, size_t need, size_t size, size_t first);
/* The common case (room already) inline: array pushes in parsers' loops stay a compare. */
static inline bool erg__grow(void *arrp, size_t *cap, size_t need, size_t size, size_t first)
{
    return need <= *cap || erg__grow_slow(arrp, cap, need, size, first);
}
#define ERG__GROW(arr, cap, need, first) erg__grow(&(arr), &(cap), (need), sizeof *(arr), (first))

/* ---- names: case-insensitive tables for the values a user spells ---- */
typedef struct erg__name {
    const char *name;
    int value;
} erg__name;
/* The value of `name` (ASCII case-insensitive) in table[0..n); false when
 * absent or name is NULL (the caller's error names the choices). Several
 * names may give one value (aliases). */
bool erg__name_lookup(const erg__name *table, size_t n, const char *name, int *value);
/* The first name of `value`, or NULL. */
const char *erg__name_of(const erg__name *table, size_t n, int value);
#define ERG__NAMES(table) (table), sizeof(table) / sizeof((table)[0])

/* ---- growable byte buffer with a size cap ---- */
typedef struct erg__buf {
    char *data; /* NUL-terminated contents (may be NULL when empty). */
    size_t len; /* Bytes used, without the terminator. */
    size_t cap; /* Bytes allocated. */
} erg__buf;
erg_status erg__buf_append(erg__buf *b, const char *s, size_t n);
erg_status erg__buf_printf(erg__buf *b, const char *fmt, ...) ERG_PRINTF(2, 3);
void erg__buf_free(erg__buf *b);

/* Read a whole file (at most max_bytes) into a NUL-terminated buffer. */
erg_status erg__read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                          erg_error *err);
/* The same, for a path that must name a regular file: opened without
 * blocking (a FIFO would wait for a writer forever), anything but a regular
 * file is an error naming what it is. */
erg_status erg__read_regular_file(const char *path, size_t max_bytes, char **out, size_t *len,
                                  erg_error *err);
/* durable.c: write a whole file. By default atomically: a temp file (path.tmpPID, mode 0666
 * less the umask) renamed over path; readers see the old or the new file, never half. */
enum {
    /* Write path itself (create or truncate): for many small files in a fresh output
     * directory, where a temp file + rename per file costs more than the write. */
    ERG__WRITE_IN_PLACE = 1,
    /* Survive a crash: fsync the temp file before the rename and the directory after. */
    ERG__WRITE_DURABLE = 2,
    /* A file one process owns (a daemon's state): mode 0600, symlinks not followed, one
     * fixed temp name (path.tmp) that a crash cannot multiply. */
    ERG__WRITE_PRIVATE = 4,
};
erg_status erg__write_file_ex(const char *path, const char *data, size_t len, unsigned flags,
                              erg_error *err);
/* Atomic (temp file + rename). */
static inline erg_status erg__write_file(const char *path, const char *data, size_t len,
                                         erg_error *err)
{
    return erg__write_file_ex(path, data, len, 0, err);
}
/* In place (ERG__WRITE_IN_PLACE). */
static inline erg_status erg__write_file_direct(const char *path, const char *data, size_t len,
                                                erg_error *err)
{
    return erg__write_file_ex(path, data, len, ERG__WRITE_IN_PLACE, err);
}
/* mkdir -p; ok if it exists. */
erg_status erg__mkdir_p(const char *path, erg_error *err);

/* ---- numbers ---- */
/* Python's float floor division a // b (CPython's float_floor_div rule). */
double erg__floordiv_py(double a, double b);
/* Shortest round-trip repr of a double, formatted like Python's repr()
 * ("0.1", "3.456", "8.726700000000001", "1e-07", "10000.0", "inf").
 * buf must hold at least 32 bytes. Returns buf. */
char *erg__fmt_double_py(double v, char *buf, size_t size);
/* The same digits by the big-integer paths alone, without the 64-bit one (tests compare). */
char *erg__fmt_double_py_exact(double v, char *buf, size_t size);
/* snprintf(buf, size, "%.17g", v), byte for byte, without printf's multi-precision cost where
 * v's magnitude allows (about 0.01 to 2^53). buf must hold at least 32 bytes. Returns buf. */
char *erg__fmt_double_g17(double v, char *buf, size_t size);
/* Strict parsers: the whole token must be a finite decimal number (no
 * hexadecimal, no inf/nan); an underflow such as 1e-320 reads as the nearest
 * double (subnormal or 0) and is left to the caller's range checks. */
bool erg__parse_double(const char *s, double *out);
bool erg__parse_long(const char *s, long *out);

/* ---- CSV: a tokenizer over an in-memory text, tracking line numbers ---- */
typedef struct erg__csv {
    const char *p, *end; /* Remaining text. */
    long line;           /* 1-based number of the line last returned. */
    char *fields_buf;    /* Copy of the current line, split in place. */
    size_t fields_cap;
    char **fields; /* Pointers into fields_buf. */
    size_t nfields, fields_alloc;
} erg__csv;
void erg__csv_init(erg__csv *c, const char *text, size_t len);
/* Next non-empty line split at commas (fields trimmed of spaces and CR).
 * Returns 1 with a line, 0 at the end, negative on allocation failure.
 * Quoted fields are supported without embedded newlines. */
int erg__csv_next(erg__csv *c);
void erg__csv_free(erg__csv *c);

#define ERG__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define ERG__MIN(a, b) ((a) < (b) ? (a) : (b))
#define ERG__MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- libraries that only some commands need, loaded on first use (lazylib.c) ----
 *
 * libergon links what every command uses (jansson, cminpack, SQLite, libm, libdl, pthreads).
 * The HTTP stack (libcurl, libmicrohttpd and through them GnuTLS, OpenSSL, Kerberos, LDAP...),
 * cairo (X11, fontconfig, freetype, pixman...), GLPK and OpenBLAS are loaded with dlopen by the
 * module that calls them, the first time it is asked to (a server started, a client created, a
 * picture drawn, an ILP solved, a GEMM timed). A process that only plans -- `ergon plan`, the
 * Python binding's planner -- then maps 8 libraries instead of 63, which was a sixth of the
 * CPU time of a small plan (docs/benchmarks.md, "Libraries loaded on first use").
 *
 * The declarations are the libraries' own headers: a module lists the functions it calls,
 * ERG__LAZY_LIB makes one pointer per function typed from the header's declaration
 * (__typeof__), and the module redirects the names to those pointers with #defines, so its code
 * reads as before. The soname (e.g. libcurl.so.4) is the one the build found, read from the
 * library at configure time (CMakeLists.txt), so the ABI is the one the headers describe.
 *
 * Usage, in one .c file:
 *   #define CURL_FUNCS(X) X(curl_easy_init) X(curl_easy_cleanup)
 *   ERG__LAZY_LIB(curl_lib, ERG_SONAME_CURL, "the server client", CURL_FUNCS)
 *   #define curl_easy_init (*lz_curl_easy_init)
 *   ...
 *   erg_status st = erg__lazylib_load(&curl_lib, err); // at every entry point, before any call
 */
typedef struct erg__lazylib {
    const char *soname;       /* what dlopen opens, e.g. "libcurl.so.4" */
    const char *what;         /* who needs it, for the message: "the server's HTTP client" */
    const char *const *names; /* the functions, NULL-terminated */
    void **const *slots;      /* where each goes (the module's pointers), in names' order */
    int loaded;               /* atomic: 1 once every function is resolved */
} erg__lazylib;

/* Open l->soname (once per process; it stays loaded) and resolve every function. Thread-safe;
 * after the first success a single atomic load. ERG_ENOTSUP with the library, what needs it
 * and dlerror()'s reason when the library or a function is missing (then nothing is resolved
 * and a later call tries again). */
erg_status erg__lazylib_load(erg__lazylib *l, erg_error *err);

#define ERG__LAZY_SLOT(fn) static __typeof__(fn) *lz_##fn;
#define ERG__LAZY_NAME(fn) #fn,
#define ERG__LAZY_ADDR(fn) (void **)&lz_##fn,
/* The pointers lz_<fn> of every fn in LIST, and the erg__lazylib `var` that fills them. */
#define ERG__LAZY_LIB(var, soname, what, LIST)                                                     \
    LIST(ERG__LAZY_SLOT)                                                                           \
    static const char *const var##_names[] = {LIST(ERG__LAZY_NAME) NULL};                          \
    static void **const var##_slots[] = {LIST(ERG__LAZY_ADDR) NULL};                               \
    static erg__lazylib var = {soname, what, var##_names, var##_slots, 0};

#endif
