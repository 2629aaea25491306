/* lazylib.c: libraries loaded on first use (core/internal.h says which and why). */
#include "core/internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

/* One lock for every library: loading happens once per library per process. dlerror() is
 * per thread in glibc but not promised so elsewhere; under the lock it is ours. */
static pthread_mutex_t lazy_mu = PTHREAD_MUTEX_INITIALIZER;

erg_status erg__lazylib_load(erg__lazylib *l, erg_error *err)
{
    if (__atomic_load_n(&l->loaded, __ATOMIC_ACQUIRE))
        return ERG_OK;
    erg_status st = ERG_OK;
    pthread_mutex_lock(&lazy_mu);
    if (!l->loaded) {
        /* RTLD_LOCAL: its symbols serve only our pointers. Never closed: its threads and
         * atexit handlers (OpenBLAS, GnuTLS) may outlive any caller. */
        void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *why = dlerror();
            st = erg_error_set(err, ERG_ENOTSUP,
                               "%s needs the shared library %s, which could not be loaded: %s "
                               "(install the Debian package that provides it)",
                               l->what, l->soname, why ? why : "unknown reason");
        } else {
            size_t i = 0;
            for (; l->names[i]; i++) {
                void *p = dlsym(h, l->names[i]);
                if (!p)
                    break;
                *l->slots[i] = p;
            }
            if (l->names[i])
                st = erg_error_set(err, ERG_ENOTSUP,
                                   "%s needs %s from %s, which this copy of the library lacks "
                                   "(an older version?)",
                                   l->what, l->names[i], l->soname);
            else
                __atomic_store_n(&l->loaded, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&lazy_mu);
    return st;
}
