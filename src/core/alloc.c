/* alloc.c: the library's allocation wrappers, with a fault-injection hook. */
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
