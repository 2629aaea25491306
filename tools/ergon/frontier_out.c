/* frontier_out.c: the size of the frontier directory `plan perseus` wrote, for its summary
 * (the library writes it: erg_frontier_save_dir). */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
