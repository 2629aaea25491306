/* frontier_out.c: the output directory of `plan perseus`: old plans are
 * replaced, never mixed with new ones, and the size written is reported. */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool frontier_file(const char *name)
{
    size_t l = strlen(name);
    if (!strcmp(name, "frontier.csv") || !strcmp(name, "plans.ergon") ||
        !strcmp(name, "profile.csv") || !strcmp(name, "frontier-info.csv"))
        return true;
    if (!strncmp(name, "freqs_pipeline_", 15) && l > 18 && !strcmp(name + l - 3, ".py"))
        return true;
    return !strncmp(name, "plan_", 5) && l > 10 && !strcmp(name + l - 5, ".json");
}

int cli_frontier_clean(const char *dir, size_t *removed, erg_error *err)
{
    *removed = 0;
    DIR *d = opendir(dir);
    if (!d)
        return CLI_OK; /* created later */
    struct dirent *e;
    char path[4096];
    int rc = CLI_OK;
    while ((e = readdir(d))) {
        if (!frontier_file(e->d_name))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) && errno != ENOENT) {
            erg_error_set(err, ERG_EIO, "%s: cannot remove the old plan file: %s", path,
                          strerror(errno));
            rc = CLI_USER_ERROR;
            break;
        }
        ++*removed;
    }
    closedir(d);
    return rc;
}

void cli_dir_usage(const char *dir, size_t *files, double *bytes)
{
    *files = 0;
    *bytes = 0;
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[4096];
    struct stat sb;
    while ((e = readdir(d))) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            ++*files;
            *bytes += (double)sb.st_size;
        }
    }
    closedir(d);
}
