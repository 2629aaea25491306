/* durable.c: the one writer of whole files (erg__write_file_ex): a temp file renamed over the
 * path, optionally made durable (fsync of the file before the rename, of the directory after)
 * and private (0600, no symlink followed, one fixed temp name), or written in place. Plans,
 * profiles, frontiers, the server's dumps and ergond's lease state all go through it. */
#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* All of data to fd; false with errno set (0 for a write that wrote nothing). */
static bool write_all(int fd, const char *data, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return false;
        }
        off += (size_t)w;
    }
    return true;
}

/* fsync the directory holding path: the rename into it is durable once it is synced. */
static erg_status sync_dir(const char *path, erg_error *err)
{
    char *dir = erg__dirname_dup(path);
    if (!dir)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    erg_status st = ERG_OK;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd) != 0)
            st = erg_error_set(err, ERG_EIO, "%s: fsync of the directory failed: %s", dir,
                               strerror(errno));
        close(dfd);
    }
    erg__free(dir);
    return st;
}

erg_status erg__write_file_ex(const char *path, const char *data, size_t len, unsigned flags,
                              erg_error *err)
{
    bool in_place = flags & ERG__WRITE_IN_PLACE, priv = flags & ERG__WRITE_PRIVATE,
         durable = flags & ERG__WRITE_DURABLE;
    char *tmp = NULL;
    /* a path that is no regular file (/dev/stdout, a pipe) is written where it is: a temp file
     * cannot be renamed over it. Nor over a name in /dev or /proc, whatever it stands for: a
     * shell's redirection makes /dev/stdout a regular file, and a rename would replace the
     * system's /dev/stdout (or fail in /proc, /dev/fd). */
    struct stat sb;
    if (!in_place && !priv &&
        ((stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) || !strncmp(path, "/dev/", 5) ||
         !strncmp(path, "/proc/", 6)))
        in_place = true;
    if (!in_place) {
        size_t plen = strlen(path) + 32;
        if (!(tmp = erg__malloc(plen)))
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        if (priv)
            snprintf(tmp, plen, "%s.tmp", path);
        else
            snprintf(tmp, plen, "%s.tmp%ld", path, (long)getpid());
    }
    const char *target = in_place ? path : tmp;
    int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (priv ? O_NOFOLLOW : 0),
                  priv ? 0600 : 0666);
    if (fd < 0) {
        erg_status st = erg_error_set(err, ERG_EIO, "%s: cannot create: %s", path, strerror(errno));
        erg__free(tmp);
        return st;
    }
    bool ok = write_all(fd, data, len);
    erg_status st = ERG_OK;
    if (ok && durable && fsync(fd) != 0)
        st = erg_error_set(err, ERG_EIO, "%s: fsync failed: %s", path, strerror(errno));
    if (close(fd) != 0)
        ok = false;
    if (!st && (!ok || (!in_place && rename(tmp, path) != 0)))
        st = erg_error_set(err, ERG_EIO, "%s: write failed: %s", path, strerror(errno));
    if (st) {
        if (!in_place)
            unlink(tmp);
        erg__free(tmp);
        return st;
    }
    erg__free(tmp);
    return durable ? sync_dir(path, err) : ERG_OK;
}
