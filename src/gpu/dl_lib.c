/* dl_lib.c: open a vendor GPU library with dlopen and resolve the calls a back-end uses. */
#include "gpu/dl_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

erg_status erg__dl_open(const erg__dl_vendor *v, const char *lib_path, const erg__dl_sym *syms,
                        size_t nsyms, void *api, void **lib, const char **loaded, erg_error *err)
{
    const char *env = getenv(v->env);
    const char *cands[2] = {NULL, NULL};
    if (lib_path && *lib_path)
        cands[0] = lib_path;
    else if (env && *env)
        cands[0] = env;
    else {
        cands[0] = v->defaults[0];
        cands[1] = v->defaults[1];
    }
    char reason[256] = "";
    void *h = NULL;
    for (int i = 0; i < 2 && cands[i] && !h; i++) {
        dlerror();
        h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
        *loaded = cands[i];
        if (!h) {
            const char *e = dlerror();
            snprintf(reason, sizeof reason, "%s", e ? e : cands[i]);
        }
    }
    if (!h)
        return erg_error_set(
            err, ERG_ENOGPU, "%s unavailable: library not found: cannot load %s%s%s (%s); %s",
            v->what, cands[0], cands[1] ? " or " : "", cands[1] ? cands[1] : "", reason, v->hint);
    for (size_t i = 0; i < nsyms; i++) {
        void *fn = NULL;
        for (int k = 0; k < 2 && !fn && syms[i].names[k]; k++) {
            dlerror();
            fn = dlsym(h, syms[i].names[k]);
            if (!fn) {
                const char *e = dlerror();
                snprintf(reason, sizeof reason, "%s", e ? e : syms[i].names[k]);
            }
        }
        if (!fn && syms[i].required) {
            dlclose(h);
            return erg_error_set(err, ERG_ENOGPU, "%s unavailable: missing symbol %s (%s)", v->what,
                                 syms[i].names[0], reason);
        }
        memcpy((char *)api + syms[i].offset, &fn, sizeof fn);
    }
    *lib = h;
    return ERG_OK;
}
