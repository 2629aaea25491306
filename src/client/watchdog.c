/* watchdog.c: the client's side of its watchdog: find the ergon-watchdog executable, spawn it
 * (posix_spawn: nothing but exec after the fork), tell it clean/dirty/quit, reap it. */
#include "client/client_struct.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * THE WATCHDOG
 *
 * Each NVML client has its own watchdog: a separate program (ergon-watchdog,
 * tools/ergon-watchdog) started with posix_spawn, so that between fork and
 * exec only async-signal-safe steps run (glibc's posix_spawn: a vfork-like
 * clone, the file actions, exec). Nothing of our process (a lock another
 * thread held, a copy of a pipe) lives on in it: it opens the GPU library
 * itself from the back-end's spec and waits.
 *
 * It learns of the trainer's death from a pidfd of the trainer that it
 * inherits (pidfd_open of our own pid, Linux >= 5.3): readable when the whole
 * process has exited, whoever else holds what. Where pidfd_open is missing
 * (older kernel, a seccomp filter) it gets our pid and polls getppid() every
 * 50 ms: it is our child, so it is reparented exactly when the process (not
 * one thread: PR_SET_PDEATHSIG would fire when the spawning *thread* exits)
 * is gone. No pipe's EOF is involved: a DataLoader worker forked later keeps
 * copies of our descriptors, and that no longer matters.
 *
 * Messages go over a socketpair (sent with MSG_NOSIGNAL: a dead watchdog
 * never raises SIGPIPE in the trainer), each client to its own watchdog only:
 * 'd' a clock may be set (sent by the clock thread before the first lock
 * after the GPU was clean), 'c' this client reset its GPU (a signal), 'q' the
 * client closed and reset its GPU: exit, 'r' the client closed but its reset
 * failed: try it, then exit. On the trainer's death the watchdog reads what
 * is left on the socket and resets the SM clock (and the memory clock with
 * --memory) unless the last word was 'c'. Before the client is returned, the
 * watchdog has written "ok" (the GPU library opened) or the reason it could
 * not, which erg_client_new returns.
 */

#define START_TIMEOUT_S                                                                            \
    30.0                   /* for the watchdog to open the GPU library (nvmlInit can take          \
                              seconds on a node without persistence mode) */
#define STOP_TIMEOUT_S 5.0 /* for it to exit after 'q' before it is killed */

#ifndef ERG_WATCHDOG_INSTALL_PATH
#define ERG_WATCHDOG_INSTALL_PATH ""
#endif

/* The directory libergon was loaded from, canonical and absolute, resolved while it was
 * being loaded (a constructor): dladdr gives the name the library was opened by, which is
 * relative when it was ERGON_LIBRARY=./libergon.so.0 or found through LD_LIBRARY_PATH=., and
 * a relative name means the current directory *now*, which a process changes at will. ""
 * when it cannot be known (then the watchdog is looked for elsewhere). */
static char lib_dir[PATH_MAX];

__attribute__((constructor)) static void remember_lib_dir(void)
{
    Dl_info info;
    char real[PATH_MAX];
    if (!dladdr((void *)erg_client_new, &info) || !info.dli_fname || !strchr(info.dli_fname, '/') ||
        !realpath(info.dli_fname, real) || real[0] != '/')
        return;
    *strrchr(real, '/') = '\0';
    snprintf(lib_dir, sizeof lib_dir, "%s", real[0] ? real : "/");
}

static bool is_exe(const char *path)
{
    struct stat st;
    return path[0] && stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static void append(char *buf, size_t size, size_t *used, const char *path)
{
    size_t n = strlen(path);
    if (*used + n + 3 > size)
        return;
    memcpy(buf + *used, path, n);
    memcpy(buf + *used + n, ", ", 3);
    *used += n + 2;
}

/* The executable, always an absolute path: $ERGON_WATCHDOG (which must be absolute); next to
 * libergon (LIBDIR/ergon/ergon-watchdog as installed, LIBDIR/ergon-watchdog in a build tree;
 * LIBDIR as resolved at load, lib_dir); the install path compiled in; the absolute entries of
 * PATH. Nothing is looked for relative to the current directory. */
static erg_status find_watchdog(char *out, size_t size, erg_error *err)
{
    const char *env = getenv("ERGON_WATCHDOG");
    if (env && *env) {
        if (env[0] != '/')
            return erg_error_set(err, ERG_EINVAL,
                                 "ERGON_WATCHDOG=%s must be an absolute path (a relative one "
                                 "would be looked up in whatever the current directory is when "
                                 "a client starts)",
                                 env);
        if (!is_exe(env))
            return erg_error_set(err, ERG_ENOTFOUND, "ERGON_WATCHDOG=%s is not an executable file",
                                 env);
        snprintf(out, size, "%s", env);
        return ERG_OK;
    }
    char tried[1500] = "";
    size_t used = 0;
#define TRY(...)                                                                                   \
    do {                                                                                           \
        int n_ = snprintf(out, size, __VA_ARGS__);                                                 \
        if (n_ > 0 && (size_t)n_ < size && is_exe(out))                                            \
            return ERG_OK;                                                                         \
        append(tried, sizeof tried, &used, out);                                                   \
    } while (0)
    if (lib_dir[0]) {
        TRY("%s/ergon/ergon-watchdog", lib_dir);
        TRY("%s/ergon-watchdog", lib_dir);
    }
    if (ERG_WATCHDOG_INSTALL_PATH[0] == '/')
        TRY("%s", ERG_WATCHDOG_INSTALL_PATH);
    const char *path = getenv("PATH");
    for (const char *p = path; p && *p;) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && len < PATH_MAX && p[0] == '/') { /* "", "." or "bin": the cwd's */
            int n = snprintf(out, size, "%.*s/ergon-watchdog", (int)len, p);
            if (n > 0 && (size_t)n < size && is_exe(out))
                return ERG_OK;
        }
        p = e ? e + 1 : p + len;
    }
#undef TRY
    return erg_error_set(err, ERG_ENOTFOUND,
                         "cannot find the ergon-watchdog program that restores the GPU if this "
                         "process dies (tried %sthe absolute entries of the PATH): install "
                         "it with libergon, set ERGON_WATCHDOG to its absolute path, or create "
                         "the client with "
                         "ERG_CLIENT_NO_WATCHDOG (a hard death then leaves the clock set)",
                         tried);
}

static int pidfd_of_self(void)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, getpid(), 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

/* A descriptor above the ones the child gets (3..5), close-on-exec. */
static int high_fd(int fd)
{
    if (fd < 0)
        return -1;
    int h = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    return h;
}

static void reap(pid_t pid, double timeout_s)
{
    double end = erg__client_mono_s() + timeout_s;
    for (;;) {
        pid_t r = waitpid(pid, NULL, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return; /* reaped, or not ours to reap (SIGCHLD ignored, reaped elsewhere) */
        if (erg__client_mono_s() > end) {
            kill(pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
            return;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Read the watchdog's first line ("ok" or why it cannot run). */
static erg_status await_ready(erg_client *c, const char *exe, int fd, pid_t pid, erg_error *err)
{
    char line[ERG_ERROR_MSG_LEN];
    size_t n = 0;
    double end = erg__client_mono_s() + START_TIMEOUT_S;
    for (;;) {
        double left = end - erg__client_mono_s();
        if (left <= 0)
            return erg_error_set(err, ERG_ETIMEOUT,
                                 "the GPU %d watchdog (pid %d) did not open %s within %.0f s",
                                 c->dev, (int)pid, erg_gpu_open_spec(c->gpu), START_TIMEOUT_S);
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        ssize_t k = recv(fd, line + n, sizeof line - 1 - n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            line[n] = '\0';
            return erg_error_set(
                err, ERG_EINTERNAL,
                "the GPU %d watchdog %s ended before it opened the GPU library%s%s "
                "(its own message, if any, is on stderr)",
                c->dev, exe, n ? ": " : "", line);
        }
        n += (size_t)k;
        line[n] = '\0';
        char *nl = strchr(line, '\n');
        if (nl || n == sizeof line - 1) {
            if (nl)
                *nl = '\0';
            if (!strcmp(line, "ok"))
                return ERG_OK;
            return erg_error_set(err, ERG_ENOGPU, "the GPU %d watchdog cannot run: %s", c->dev,
                                 line);
        }
    }
}

erg_status erg__watchdog_start(erg_client *c, erg_error *err)
{
    c->owner_pid = getpid();
    c->watchdog_pid = -1;
    c->watchdog_fd = -1;
    c->watchdog_dirty = true; /* what the watchdog assumes at start */
    if ((c->flags & ERG_CLIENT_NO_WATCHDOG) || (strcmp(erg_gpu_backend_name(c->gpu), "nvml") &&
                                                strcmp(erg_gpu_backend_name(c->gpu), "amdsmi")))
        return ERG_OK;
    char exe[PATH_MAX + 32];
    erg_status st = find_watchdog(exe, sizeof exe, err);
    if (st)
        return st;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return erg_error_set(err, ERG_EIO, "watchdog: socketpair: %s", strerror(errno));
    int mine = sv[0], theirs = high_fd(sv[1]);
    int pidfd = high_fd(pidfd_of_self());
    char dev[16], parent[24], ctl_fd[4] = "3", pid_fd[4] = "4";
    snprintf(dev, sizeof dev, "%d", c->dev);
    snprintf(parent, sizeof parent, "%d", (int)getpid());
    char *argv[16];
    int a = 0;
    argv[a++] = exe;
    argv[a++] = "--gpu";
    argv[a++] = (char *)erg_gpu_open_spec(c->gpu);
    argv[a++] = "--device";
    argv[a++] = dev;
    argv[a++] = "--control-fd";
    argv[a++] = ctl_fd;
    argv[a++] = "--parent";
    argv[a++] = parent;
    if (pidfd >= 0) {
        argv[a++] = "--pidfd";
        argv[a++] = pid_fd;
    }
    if (c->flags & ERG_CLIENT_LOCK_MEMORY)
        argv[a++] = "--memory";
    argv[a] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    bool fa_ok = false, at_ok = false;
    pid_t pid = -1;
    int rc = theirs < 0 ? errno : 0;
    if (!rc && !(rc = posix_spawn_file_actions_init(&fa)))
        fa_ok = true;
    if (!rc && !(rc = posix_spawnattr_init(&at)))
        at_ok = true;
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (!rc)
        rc = posix_spawn_file_actions_adddup2(&fa, theirs, 3);
    if (!rc && pidfd >= 0)
        rc = posix_spawn_file_actions_adddup2(&fa, pidfd, 4);
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGHUP);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGCHLD);
    if (!rc)
        rc = posix_spawnattr_setsigmask(&at, &none);
    if (!rc)
        rc = posix_spawnattr_setsigdefault(&at, &dfl);
    short fl = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
#ifdef POSIX_SPAWN_SETSID
    fl |= POSIX_SPAWN_SETSID; /* out of the terminal's process group: Ctrl-C is not for it */
#endif
    if (!rc)
        rc = posix_spawnattr_setflags(&at, fl);
    extern char **environ;
    if (!rc)
        rc = posix_spawn(&pid, exe, &fa, &at, argv, environ);
    if (fa_ok)
        posix_spawn_file_actions_destroy(&fa);
    if (at_ok)
        posix_spawnattr_destroy(&at);
    if (theirs >= 0)
        close(theirs);
    if (pidfd >= 0)
        close(pidfd);
    if (rc) {
        close(mine);
        return erg_error_set(err, ERG_EINTERNAL, "cannot start the watchdog %s: %s", exe,
                             strerror(rc));
    }
    st = await_ready(c, exe, mine, pid, err);
    if (st) {
        close(mine);
        kill(pid, SIGKILL);
        reap(pid, STOP_TIMEOUT_S);
        return st;
    }
    c->watchdog_pid = pid;
    c->watchdog_fd = mine;
    return ERG_OK;
}

static void send_byte(erg_client *c, char b)
{
    if (c->watchdog_fd < 0 || getpid() != c->owner_pid)
        return;
    ssize_t r;
    do
        r = send(c->watchdog_fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
}

void erg__watchdog_note(erg_client *c, bool dirty)
{
    if (c->watchdog_dirty == dirty)
        return;
    c->watchdog_dirty = dirty;
    send_byte(c, dirty ? 'd' : 'c');
}

void erg__watchdog_stop(erg_client *c, bool clean)
{
    bool owner = getpid() == c->owner_pid;
    if (c->watchdog_fd >= 0) {
        send_byte(c, clean ? 'q' : 'r');
        close(c->watchdog_fd);
        c->watchdog_fd = -1;
    }
    if (c->watchdog_pid > 0 && owner)
        reap(c->watchdog_pid, STOP_TIMEOUT_S);
    c->watchdog_pid = -1;
}
