/* alloc.c: the library's allocation wrappers, with a fault-injection hook, and array growth. */
#include "core/internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long fail_countdown;

void erg__alloc_fail_after(long n)
{
    atomic_store(&fail_countdown, n);
}

static bool should_fail(void)
{
    long n = atomic_load(&fail_countdown);
    if (n <= 0)
        return false;
    if (atomic_fetch_sub(&fail_countdown, 1) == 1)
        return true;
    return false;
}

void *erg__malloc(size_t size)
{
    if (should_fail())
        return NULL;
    return malloc(size ? size : 1);
}

void *erg__calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *erg__realloc(void *ptr, size_t size)
{
    if (should_fail())
        return NULL;
    return realloc(ptr, size ? size : 1);
}

void *erg__reallocarray(void *ptr, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    return erg__realloc(ptr, count * size);
}

void erg__free(void *ptr)
{
    free(ptr);
}

size_t erg__grow_cap(size_t cap, size_t need, size_t first)
{
    if (need <= cap)
        return cap;
    size_t nc = cap ? (cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2) : first;
    return nc < need ? need : nc;
}

bool erg__grow_slow(void *arrp, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return true;
    size_t nc = erg__grow_cap(*cap, need, first);
    void *old;
    memcpy(&old, arrp, sizeof old); /* *arrp is a T *: object pointers share one representation */
    void *nv = erg__reallocarray(old, nc, size);
    if (!nv)
        return false;
    memcpy(arrp, &nv, sizeof nv);
    *cap = nc;
    return true;
}

char *erg__strndup(const char *s, size_t n)
{
    char *d = erg__malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *erg__strdup(const char *s)
{
    return erg__strndup(s, strlen(s));
}

char *erg__dirname_dup(const char *path)
{
    char *dir = erg__strndup(path, strlen(path) + 1); /* room for "." after an empty path */
    if (!dir)
        return NULL;
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    return dir;
}
