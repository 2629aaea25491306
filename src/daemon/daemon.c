/* daemon.c: the ergond object -- building it (the config file read under StrictModes and
 * parsed, the Unix socket created with its mode, a stale socket replaced but never a live
 * daemon's), its options (the administrator's lock file, the socket's group, connections per
 * uid; the state directory is leases.c's), its log, and freeing it. Owns: the erg_daemon
 * allocation, the socket file and the stop pipe. Trusts: the caller (ergond's main, run by
 * root) for paths and modes; the config file and the lock file's directory only when
 * StrictModes (state.c) says no one but root or ergond can change them.
 * The rest lives by concern: loop.c (the poll loop, connections), endpoints.c (requests),
 * leases.c (leases, their state file, recovery), config.c (the allow list), http.c (HTTP),
 * state.c (the state file's format, process identity, StrictModes). */
#include "daemon/daemon_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* ---- the log ---- */

void erg__dlog(erg_daemon *d, int level, const char *fmt, ...)
{
    if (!d->log)
        return;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    d->log(d->log_user, level, msg);
}

/* ---- construction ---- */

static erg_status daemon_alloc(const char *cfg_text, size_t cfg_len, const char *cfg_name,
                               erg_gpu *gpu, erg_daemon **out, erg_error *err)
{
    if (!gpu)
        return erg_error_set(err, ERG_EINVAL, "ergond needs a GPU back-end");
    if (erg_gpu_count(gpu) > 64)
        return erg_error_set(err, ERG_ENOTSUP, "ergond handles at most 64 GPUs");
    erg_daemon *d = erg__calloc(1, sizeof *d);
    if (!d)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    d->gpu = gpu;
    d->listen_fd = -1;
    d->conns_per_uid = DEFAULT_CONNS_PER_UID;
    d->stop_pipe[0] = d->stop_pipe[1] = -1;
    erg_status st = erg__config_parse(cfg_text, cfg_len, cfg_name, &d->cfg, err);
    if (st) {
        erg__free(d);
        return st;
    }
    *out = d;
    return ERG_OK;
}

erg_status erg__daemon_new_detached(const char *config_text, erg_gpu *gpu, erg_daemon **out,
                                    erg_error *err)
{
    return daemon_alloc(config_text, strlen(config_text), "config", gpu, out, err);
}

erg_status erg_daemon_new(const char *socket_path, unsigned socket_mode, const char *config_path,
                          erg_gpu *gpu, erg_daemon_log_fn log, void *log_user, erg_daemon **out,
                          erg_error *err)
{
    if (!socket_path || !config_path || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_daemon_new: NULL argument");
    if (socket_mode > 0777)
        return erg_error_set(err, ERG_EINVAL, "socket mode %o is not a permission mode",
                             socket_mode);
    struct sockaddr_un addr;
    if (strlen(socket_path) >= sizeof addr.sun_path)
        return erg_error_set(err, ERG_EINVAL, "socket path '%s' is too long", socket_path);
    char *text = NULL;
    size_t len = 0;
    /* StrictModes: a config another user can change could grant itself GPU access. */
    erg_status st = erg__read_secure_file(config_path, "config file", 1 << 20, &text, &len, err);
    if (st)
        return st;
    erg_daemon *d = NULL;
    st = daemon_alloc(text, len, config_path, gpu, &d, err);
    erg__free(text);
    if (st)
        return st;
    d->log = log;
    d->log_user = log_user;
    if (pipe2(d->stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        st = erg_error_set(err, ERG_EIO, "pipe: %s", strerror(errno));
        goto fail;
    }
    d->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (d->listen_fd < 0) {
        st = erg_error_set(err, ERG_EIO, "socket: %s", strerror(errno));
        goto fail;
    }
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, socket_path, strlen(socket_path) + 1);
    /* A socket file that nobody answers on is stale: remove it. */
    struct stat sb;
    if (lstat(socket_path, &sb) == 0) {
        if (!S_ISSOCK(sb.st_mode)) {
            st = erg_error_set(err, ERG_EEXIST, "%s exists and is not a socket", socket_path);
            goto fail;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int live = probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof addr) == 0;
        if (probe >= 0)
            close(probe);
        if (live) {
            st = erg_error_set(err, ERG_EEXIST, "another daemon answers on %s", socket_path);
            goto fail;
        }
        unlink(socket_path);
    }
    mode_t old = umask(0177);
    int rc = bind(d->listen_fd, (struct sockaddr *)&addr, sizeof addr);
    umask(old);
    if (rc != 0) {
        st = erg_error_set(err, ERG_EIO, "bind %s: %s", socket_path, strerror(errno));
        goto fail;
    }
    if (!(d->socket_path = erg__strdup(socket_path))) {
        unlink(socket_path);
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    if (chmod(socket_path, socket_mode) != 0 || listen(d->listen_fd, 64) != 0) {
        st = erg_error_set(err, ERG_EIO, "%s: %s", socket_path, strerror(errno));
        goto fail;
    }
    *out = d;
    return ERG_OK;
fail:
    erg_daemon_free(d);
    return st;
}

erg_status erg_daemon_set_lock_file(erg_daemon *d, const char *path, erg_error *err)
{
    if (!d)
        return erg_error_set(err, ERG_EINVAL, "NULL daemon");
    char *copy = NULL;
    if (path && !(copy = erg__strdup(path)))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (copy) {
        /* Whoever can create or remove the file there controls writes. */
        char *slash = strrchr(copy, '/');
        erg_status st;
        if (!slash)
            st = erg__check_secure_dirs(".", "lock file", path, err);
        else if (slash == copy)
            st = erg__check_secure_dirs("/", "lock file", path, err);
        else {
            *slash = '\0';
            st = erg__check_secure_dirs(copy, "lock file", path, err);
            *slash = '/';
        }
        if (st) {
            erg__free(copy);
            return st;
        }
    }
    erg__free(d->lock_file);
    d->lock_file = copy;
    return ERG_OK;
}

erg_status erg_daemon_set_socket_group(erg_daemon *d, unsigned gid, erg_error *err)
{
    if (!d || !d->socket_path)
        return erg_error_set(err, ERG_EINVAL, "erg_daemon_set_socket_group: no socket");
    if (lchown(d->socket_path, (uid_t)-1, (gid_t)gid) != 0)
        return erg_error_set(err, ERG_EIO, "cannot give socket %s to gid %u: %s", d->socket_path,
                             gid, strerror(errno));
    return ERG_OK;
}

erg_status erg_daemon_set_conn_limit(erg_daemon *d, int per_uid, erg_error *err)
{
    if (!d)
        return erg_error_set(err, ERG_EINVAL, "NULL daemon");
    if (per_uid < 1 || per_uid > MAX_CONNS - ROOT_RESERVED)
        return erg_error_set(err, ERG_EINVAL, "connections per uid must be in [1, %d], got %d",
                             MAX_CONNS - ROOT_RESERVED, per_uid);
    d->conns_per_uid = per_uid;
    return ERG_OK;
}

void erg_daemon_free(erg_daemon *d)
{
    if (!d)
        return;
    for (int i = 0; i < MAX_CONNS; i++)
        erg__conn_close(d, i);
    for (int i = 0; i < MAX_LEASES; i++)
        if (d->leases[i].used && d->leases[i].pidfd >= 0)
            close(d->leases[i].pidfd);
    if (d->listen_fd >= 0) {
        close(d->listen_fd);
        if (d->socket_path)
            unlink(d->socket_path);
    }
    for (int i = 0; i < 2; i++)
        if (d->stop_pipe[i] >= 0)
            close(d->stop_pipe[i]);
    erg__free(d->socket_path);
    erg__free(d->lock_file);
    erg__free(d->state_path);
    erg__config_free(&d->cfg);
    erg__free(d);
}
