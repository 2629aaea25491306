/* main.c: ergon-watchdog, started by libergon for each NVML client: resets that client's GPU
 * clocks when the training process dies without closing the client (src/client/watchdog.c). */
#include "ergon/gpu.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define POLL_MS 50 /* how often the getppid() fallback looks */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ergon-watchdog --gpu SPEC --device N --control-fd FD --parent PID\n"
            "                      [--pidfd FD] [--memory]\n"
            "\n"
            "Started by libergon (erg_client_new) for each client on the NVML back-end, not by\n"
            "hand. It opens the GPU library from SPEC (as erg_gpu_open does), writes \"ok\" on\n"
            "the control socket, and waits. When the training process PID ends without\n"
            "closing its client, it resets the SM clock of GPU N (and with --memory the\n"
            "memory clock) unless the client's last word was that the GPU is clean.\n"
            "\n"
            "  --gpu SPEC        the client's back-end, e.g. nvml:/usr/lib/libnvidia-ml.so.1\n"
            "  --device N        the client's GPU\n"
            "  --control-fd FD   the socket from the client: 'd' a clock may be set, 'c' the\n"
            "                    GPU is clean, 'q' the client closed (exit), 'r' reset and exit\n"
            "  --parent PID      the training process (this program's parent)\n"
            "  --pidfd FD        a pidfd of PID: its end is seen at once; without it, the\n"
            "                    parent is checked every %d ms (getppid())\n"
            "  --memory          also reset the memory clock\n"
            "\n"
            "Signals INT, TERM and HUP are ignored: it outlives the job's signals long enough\n"
            "to restore the GPU, and exits when its client closes or its process has ended.\n"
            "Finding it (absolute paths only): $ERGON_WATCHDOG, next to libergon, the\n"
            "install path, PATH (docs/runtime.md).\n",
            POLL_MS);
}

static int ctl = -1;

/* Report why we cannot run: on stderr and to the client, which returns it. */
static void fail_start(const char *fmt, const char *a, const char *b)
{
    char msg[600];
    snprintf(msg, sizeof msg, fmt, a, b);
    fprintf(stderr, "ergon-watchdog: %s\n", msg);
    if (ctl >= 0) {
        char line[620];
        int n = snprintf(line, sizeof line, "%s\n", msg);
        ssize_t w = send(ctl, line, (size_t)n, MSG_NOSIGNAL);
        (void)w;
    }
    exit(2);
}

static bool parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Close every descriptor but 0-2 and the ones we use. */
static void close_others(int keep1, int keep2)
{
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536)
        max = 65536;
    int hi = keep1 > keep2 ? keep1 : keep2;
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)hi + 1, ~0U, 0) == 0)
        max = hi + 1;
#endif
    for (int fd = 3; fd < max; fd++)
        if (fd != keep1 && fd != keep2)
            close(fd);
}

/* The options; -1 to go on, else the exit status (after --help or a usage error). */
static int parse_args(int argc, char **argv, const char **spec, long *dev, long *ctl_fd,
                      long *pidfd, long *parent, bool *memory)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--memory")) {
            *memory = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "ergon-watchdog: %s needs a value\n", a);
            usage(stderr);
            return 2;
        }
        bool ok = true;
        if (!strcmp(a, "--gpu"))
            *spec = v;
        else if (!strcmp(a, "--device"))
            ok = parse_int(v, 0, 1023, dev);
        else if (!strcmp(a, "--control-fd"))
            ok = parse_int(v, 3, INT_MAX, ctl_fd);
        else if (!strcmp(a, "--pidfd"))
            ok = parse_int(v, 3, INT_MAX, pidfd);
        else if (!strcmp(a, "--parent"))
            ok = parse_int(v, 2, INT_MAX, parent);
        else {
            fprintf(stderr, "ergon-watchdog: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "ergon-watchdog: bad value '%s' for %s\n", v, a);
            return 2;
        }
        i++;
    }
    return -1;
}

int main(int argc, char **argv)
{
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    const char *spec = NULL;
    long dev = -1, ctl_fd = -1, pidfd = -1, parent = -1;
    bool memory = false;
    int prc = parse_args(argc, argv, &spec, &dev, &ctl_fd, &pidfd, &parent, &memory);
    if (prc >= 0)
        return prc;
    if (ctl_fd >= 0) {
        int type = 0;
        socklen_t len = sizeof type;
        if (getsockopt((int)ctl_fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0)
            ctl = (int)ctl_fd;
    }
    if (ctl < 0)
        fail_start("--control-fd %s%s: not an open socket (this program is started by libergon)",
                   ctl_fd >= 0 ? argv[0] : "missing", "");
    if (!spec || dev < 0 || parent < 0)
        fail_start("%s%s", "--gpu, --device and --parent are required", "");
    if (pidfd >= 0 && fcntl((int)pidfd, F_GETFD) < 0) {
        fprintf(stderr, "ergon-watchdog: --pidfd %ld is not open: watching the parent instead\n",
                pidfd);
        pidfd = -1;
    }
    close_others(ctl, (int)pidfd);
    erg_error err;
    erg_gpu *g = NULL;
    if (erg_gpu_open(spec, &g, &err) != ERG_OK) /* (a relative library path is the trainer's) */
        fail_start("cannot open %s: %s", spec, err.msg);
    if (chdir("/") != 0) {
        /* nothing: only so as not to hold the trainer's directory */
    }
    if (dev >= erg_gpu_count(g)) {
        char d[24];
        snprintf(d, sizeof d, "%ld", dev);
        fail_start("GPU %s does not exist on %s", d, spec);
    }
    /* The trainer may have died already (before the pidfd, or we were reparented). */
    if (send(ctl, "ok\n", 3, MSG_NOSIGNAL) != 3 && errno != EPIPE)
        fprintf(stderr, "ergon-watchdog: cannot answer the client: %s\n", strerror(errno));

    bool dirty = true, quit = false, reset_now = false, ctl_open = true;
    const char *why = NULL;
    while (!why) {
        struct pollfd p[2] = {{ctl, POLLIN, 0}, {(int)pidfd, POLLIN, 0}};
        int np = pidfd >= 0 ? 2 : 1;
        int r = poll(p, (nfds_t)np, pidfd >= 0 ? -1 : POLL_MS);
        if (r < 0 && errno != EINTR) {
            why = "poll failed";
            break;
        }
        if (pidfd >= 0 && (p[1].revents & POLLNVAL))
            pidfd = -1; /* cannot happen (checked above); never spin on it */
        else if (pidfd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
            why = "ended";
        if (pidfd < 0 && getppid() != (pid_t)parent)
            why = "ended";
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            char buf[64];
            ssize_t k = recv(ctl, buf, sizeof buf, why ? MSG_DONTWAIT : 0);
            if (k == 0) {
                ctl_open = false;
                if (!why)
                    why = "closed its connection to the watchdog (exec or a closed descriptor)";
            }
            for (ssize_t j = 0; j < k; j++) {
                if (buf[j] == 'd')
                    dirty = true;
                else if (buf[j] == 'c')
                    dirty = false;
                else if (buf[j] == 'q')
                    quit = true;
                else if (buf[j] == 'r')
                    reset_now = true;
            }
            if ((quit || reset_now) && !why)
                why = "closed its client";
        }
    }
    /* Whatever the client said before it went is still on the socket. */
    while (ctl_open) {
        char buf[64];
        ssize_t k = recv(ctl, buf, sizeof buf, MSG_DONTWAIT);
        if (k <= 0)
            break;
        for (ssize_t j = 0; j < k; j++) {
            if (buf[j] == 'd')
                dirty = true;
            else if (buf[j] == 'c')
                dirty = false;
            else if (buf[j] == 'q')
                quit = true;
            else if (buf[j] == 'r')
                reset_now = true;
        }
    }
    int rc = 0;
    if (reset_now || (!quit && dirty)) {
        erg_status st = erg_gpu_reset_sm_clocks(g, (int)dev, &err);
        if (st == ERG_OK && memory) {
            st = erg_gpu_reset_mem_clocks(g, (int)dev, &err);
            if (st == ERG_ENOTSUP)
                st = ERG_OK;
        }
        if (st != ERG_OK) {
            fprintf(stderr, "ergon-watchdog: process %ld %s; cannot reset GPU %ld: %s\n", parent,
                    why, dev, err.msg);
            rc = 1;
        } else if (!reset_now) {
            fprintf(stderr,
                    "ergon-watchdog: process %ld %s without closing its client: GPU %ld clocks "
                    "reset\n",
                    parent, why, dev);
        }
    }
    erg_gpu_close(g);
    return rc;
}
