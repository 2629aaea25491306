/* main.c: ergond, the privileged GPU clock daemon: options, logging to stderr, signals. */
#include "ergon/daemon.h"
#include "ergon/gpu.h"

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static erg_daemon *the_daemon;

static void on_signal(int sig)
{
    (void)sig;
    erg_daemon_stop(the_daemon);
}

static void log_stderr(void *user, int level, const char *msg)
{
    (void)user;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    static const char *const names[] = {"info", "warning", "error"};
    fprintf(stderr, "%s.%03ldZ ergond %s: %s\n", when, ts.tv_nsec / 1000000,
            names[level < 0   ? 0
                  : level > 2 ? 2
                              : level],
            msg);
}

/* A device whose energy counter ergon stopped trusting: said once, as a warning. */
static void on_energy_event(void *user, int dev, const char *msg)
{
    (void)dev;
    log_stderr(user, 1, msg);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ergond --socket PATH --config FILE [--gpu SPEC] [--socket-mode MODE]\n"
            "              [--socket-group GROUP] [--max-conns-per-uid N] [--lock-file PATH]\n"
            "              [--state-dir DIR]\n"
            "\n"
            "The privileged GPU clock daemon: serves zeusd-compatible HTTP on a Unix socket\n"
            "so unprivileged training processes can lock clocks and set power limits.\n"
            "Writes are authorised per GPU from the peer's uid/gid (SO_PEERCRED) against\n"
            "the allow list in FILE; root is always allowed. Whatever a process changed is\n"
            "reset when it exits (pidfd lease, kept across restarts of ergond in\n"
            "--state-dir) and when ergond stops. One non-root uid may hold at most\n"
            "--max-conns-per-uid connections. See docs/ergond.md (security model).\n"
            "\n"
            "  --socket PATH       Unix socket to create (e.g. /run/ergond/ergond.sock)\n"
            "  --config FILE       allow list: lines 'allow GPUS PRINCIPAL...' where GPUS is\n"
            "                      '*' or ids like 0,1 and PRINCIPAL is user:NAME, uid:N,\n"
            "                      group:NAME or gid:N; '#' starts a comment. Like sshd's\n"
            "                      StrictModes, FILE and every directory above it must be\n"
            "                      owned by root (or ergond's user) and not writable by\n"
            "                      group or others (sticky dirs like /tmp excepted)\n"
            "  --gpu SPEC          GPU back-end: nvml (default), nvml:LIBRARY, amdsmi,\n"
            "                      amdsmi:LIBRARY, auto (NVML, else amdsmi), sim:GPU[:MODEL[:N]]\n"
            "  --socket-mode MODE  octal permissions of the socket (default 0660: root and\n"
            "                      the socket's group may connect and read; only allowed\n"
            "                      peers may write; 0666 lets every local user read)\n"
            "  --socket-group GROUP  group owning the socket (name or gid; default 'ergon'.\n"
            "                      If the default group does not exist, ergond says so and\n"
            "                      the socket stays in its own group (root): only root can\n"
            "                      connect. A named group that does not exist is an error)\n"
            "  --max-conns-per-uid N  connections one non-root uid may hold at once\n"
            "                      (default 8, 1..56); 8 of the 64 slots stay for root\n"
            "  --lock-file PATH    admin switch: while PATH exists, every write is refused\n"
            "                      (503); reads still work. Its directory is checked like\n"
            "                      FILE's\n"
            "  --state-dir DIR     where leases are persisted (default /var/lib/ergond;\n"
            "                      created 0700): a restarted ergond re-adopts live holders\n"
            "                      and resets what dead ones held; with no state there it\n"
            "                      resets every GPU at start-up\n"
            "\n"
            "Logs go to stderr. SIGTERM/SIGINT stop it cleanly.\n"
            "exit status: 0 stopped cleanly, 1 start-up or runtime error, 2 usage error.\n");
}

int main(int argc, char **argv)
{
    const char *sock = NULL, *config = NULL, *spec = "nvml", *lock_file = NULL;
    const char *state_dir = "/var/lib/ergond", *group = NULL;
    long per_uid = 0;
    unsigned long mode = 0660;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "ergond: %s needs a value (see ergond --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--socket"))
            sock = v;
        else if (!strcmp(a, "--config"))
            config = v;
        else if (!strcmp(a, "--gpu"))
            spec = v;
        else if (!strcmp(a, "--lock-file"))
            lock_file = v;
        else if (!strcmp(a, "--socket-group")) {
            if (!*v) {
                fprintf(stderr, "ergond: --socket-group needs a group name or gid\n");
                return 2;
            }
            group = v;
        } else if (!strcmp(a, "--max-conns-per-uid")) {
            char *end;
            errno = 0;
            per_uid = strtol(v, &end, 10);
            if (errno || !*v || *end || per_uid < 1 || per_uid > 56) {
                fprintf(stderr,
                        "ergond: --max-conns-per-uid expects an integer in [1, 56], got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--state-dir")) {
            if (!*v) {
                fprintf(stderr, "ergond: --state-dir needs a directory\n");
                return 2;
            }
            state_dir = v;
        } else if (!strcmp(a, "--socket-mode")) {
            char *end;
            errno = 0;
            mode = strtoul(v, &end, 8);
            if (errno || !*v || *end || mode > 0777) {
                fprintf(stderr, "ergond: --socket-mode expects an octal mode like 0660, got '%s'\n",
                        v);
                return 2;
            }
        } else {
            fprintf(stderr, "ergond: unknown option '%s' (see ergond --help)\n", a);
            return 2;
        }
    }
    if (!sock || !config) {
        fprintf(stderr, "ergond: --socket and --config are required (see ergond --help)\n");
        return 2;
    }
    /* The socket's group: resolved before anything is created. */
    long gid = -1;
    {
        const char *name = group ? group : "ergon";
        struct group gr, *res = NULL;
        char gbuf[8192];
        char *end;
        errno = 0;
        long num = strtol(name, &end, 10);
        if (!errno && *name && !*end && num >= 0 && num < 0x7fffffffL)
            gid = num;
        else if (getgrnam_r(name, &gr, gbuf, sizeof gbuf, &res) == 0 && res)
            gid = (long)res->gr_gid;
        else if (group) {
            fprintf(stderr, "ergond: --socket-group: group '%s' does not exist\n", group);
            return 1;
        } else
            log_stderr(NULL, 1,
                       "group 'ergon' does not exist: the socket stays in ergond's own group, so "
                       "only root can connect. Create it (groupadd --system ergon) and add the "
                       "users who may talk to ergond, or pass --socket-group GROUP or "
                       "--socket-mode 0666");
    }
    erg_error err;
    erg_gpu *gpu = NULL;
    if (erg_gpu_open(spec, &gpu, &err)) {
        fprintf(stderr, "ergond: %s\n", err.msg);
        return 1;
    }
    erg_gpu_set_energy_event(gpu, on_energy_event, NULL);
    if (erg_daemon_new(sock, (unsigned)mode, config, gpu, log_stderr, NULL, &the_daemon, &err)) {
        fprintf(stderr, "ergond: %s\n", err.msg);
        erg_gpu_close(gpu);
        return 1;
    }
    if ((gid >= 0 && erg_daemon_set_socket_group(the_daemon, (unsigned)gid, &err)) ||
        (per_uid && erg_daemon_set_conn_limit(the_daemon, (int)per_uid, &err)) ||
        (lock_file && erg_daemon_set_lock_file(the_daemon, lock_file, &err)) ||
        erg_daemon_set_state_dir(the_daemon, state_dir, &err)) {
        fprintf(stderr, "ergond: %s\n", err.msg);
        erg_daemon_free(the_daemon);
        erg_gpu_close(gpu);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    erg_status st = erg_daemon_run(the_daemon, &err);
    if (st)
        fprintf(stderr, "ergond: %s\n", err.msg);
    erg_daemon_free(the_daemon);
    erg_gpu_close(gpu);
    return st ? 1 : 0;
}
