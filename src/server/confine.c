/* confine.c: scheduler arguments that arrive over the network may name files only inside the
 * directories the operator allowed with --plans-dir (resolved with realpath, so neither ".."
 * nor a symbolic link leads out); start-up arguments are the operator's and are not confined. */
#include "server/server_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Does this scheduler argument name a file or directory? The known ones
 * (PointSolution's solution_path, Frontier's frontier_dir) and, so that a
 * future scheduler is confined by default, any *_path, *_dir or *_file. */
static bool names_a_file(const char *key)
{
    static const char *const suffixes[] = {"_path", "_dir", "_file", "_csv"};
    size_t n = strlen(key);
    if (!strcmp(key, "solution_path") || !strcmp(key, "frontier_dir"))
        return true;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t m = strlen(suffixes[i]);
        if (n >= m && !strcmp(key + n - m, suffixes[i]))
            return true;
    }
    return false;
}

static bool inside(const char *resolved, const char *dir)
{
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/')
        return true;
    return !strncmp(resolved, dir, n) && (resolved[n] == 0 || resolved[n] == '/');
}

/* The resolved path of value inside one of the allowed directories (malloc'd) or NULL. */
static char *resolve(erg_server *srv, const char *value)
{
    for (size_t i = 0; i < srv->n_plans_dirs; i++) {
        erg__buf cand = {0};
        if (value[0] == '/' ? erg__buf_printf(&cand, "%s", value)
                            : erg__buf_printf(&cand, "%s/%s", srv->plans_dirs[i], value))
            return NULL;
        char *real = realpath(cand.data, NULL);
        erg__buf_free(&cand);
        if (!real)
            continue;
        for (size_t k = 0; k < srv->n_plans_dirs; k++)
            if (inside(real, srv->plans_dirs[k]))
                return real;
        free(real);
    }
    return NULL;
}

erg_status erg__srv_confine_sched_args(erg_server *srv, const json_t *args, json_t **out, char *why,
                                       size_t wn)
{
    *out = json_deep_copy(args);
    if (!*out) {
        snprintf(why, wn, "out of memory");
        return ERG_ENOMEM;
    }
    const char *key;
    json_t *val;
    json_object_foreach(*out, key, val)
    {
        if (!names_a_file(key) || !json_is_string(val))
            continue; /* wrong types are the scheduler's argument check's to report */
        if (srv->n_plans_dirs == 0) {
            snprintf(why, wn,
                     "scheduler argument %.64s names a file: this server takes no file names from "
                     "clients (its operator can allow plan directories with --plans-dir)",
                     key);
            goto refuse;
        }
        /* One answer for "missing" and "outside", so that clients cannot probe
         * which files exist on the server. */
        char *real = resolve(srv, json_string_value(val));
        if (!real) {
            snprintf(why, wn,
                     "scheduler argument %.64s must name an existing file or directory inside "
                     "the server's --plans-dir directories",
                     key);
            goto refuse;
        }
        json_object_set_new(*out, key, json_string(real));
        free(real);
    }
    return ERG_OK;
refuse:
    json_decref(*out);
    *out = NULL;
    return ERG_EPERM;
}

erg_status erg__srv_plans_dirs_init(erg_server *srv, const char *const *dirs, size_t n,
                                    erg_error *err)
{
    srv->plans_dirs = n ? erg__calloc(n, sizeof(char *)) : NULL;
    if (n && !srv->plans_dirs)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *d = dirs[i] ? dirs[i] : "";
        char *real = realpath(d, NULL);
        struct stat sb;
        if (!real || stat(real, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            erg_status st =
                erg_error_set(err, ERG_EINVAL, "--plans-dir '%.200s' is not a directory%s%s", d,
                              real ? "" : ": ", real ? "" : strerror(errno));
            free(real);
            return st;
        }
        srv->plans_dirs[srv->n_plans_dirs] = erg__strdup(real);
        free(real);
        if (!srv->plans_dirs[srv->n_plans_dirs])
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        srv->n_plans_dirs++;
    }
    return ERG_OK;
}

void erg__srv_plans_dirs_free(erg_server *srv)
{
    for (size_t i = 0; i < srv->n_plans_dirs; i++)
        erg__free(srv->plans_dirs[i]);
    erg__free(srv->plans_dirs);
    srv->plans_dirs = NULL;
    srv->n_plans_dirs = 0;
}
