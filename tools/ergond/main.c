/* main.c: ergond, the privileged GPU clock daemon: options, logging to stderr, signals. */
#include "ergon/daemon.h"
#include "ergon/gpu.h"

#include <errno.h>
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
            names[level < 0 ? 0 : level > 2 ? 2 : level], msg);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ergond --socket PATH --config FILE [--gpu SPEC] [--socket-mode MODE]\n"
            "              [--lock-file PATH] [--state-dir DIR]\n"
            "\n"
            "The privileged GPU clock daemon: serves zeusd-compatible HTTP on a Unix socket\n"
            "so unprivileged training processes can lock clocks and set power limits.\n"
            "Writes are authorised per GPU from the peer's uid/gid (SO_PEERCRED) against\n"
            "the allow list in FILE; root is always allowed. Whatever a process changed is\n"
            "reset when it exits (pidfd lease) and when ergond stops. See docs/ergond.md.\n"
            "\n"
            "  --socket PATH       Unix socket to create (e.g. /run/ergond/ergond.sock)\n"
            "  --config FILE       allow list: lines 'allow GPUS PRINCIPAL...' where GPUS is\n"
            "                      '*' or ids like 0,1 and PRINCIPAL is user:NAME, uid:N,\n"
            "                      group:NAME or gid:N; '#' starts a comment\n"
            "  --gpu SPEC          GPU back-end: nvml (default), nvml:LIBRARY, sim:GPU[:MODEL[:N]]\n"
            "  --socket-mode MODE  octal permissions of the socket (default 0666: anyone may\n"
            "                      connect and read; only allowed peers may write)\n"
            "  --lock-file PATH    admin switch: while PATH exists, every write is refused\n"
            "                      (503); reads still work\n"
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
    const char *state_dir = "/var/lib/ergond";
    unsigned long mode = 0666;
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
        else if (!strcmp(a, "--state-dir")) {
            if (!*v) {
                fprintf(stderr, "ergond: --state-dir needs a directory\n");
                return 2;
            }
            state_dir = v;
        }
        else if (!strcmp(a, "--socket-mode")) {
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
    erg_error err;
    erg_gpu *gpu = NULL;
    if (erg_gpu_open(spec, &gpu, &err)) {
        fprintf(stderr, "ergond: %s\n", err.msg);
        return 1;
    }
    if (erg_daemon_new(sock, (unsigned)mode, config, gpu, log_stderr, NULL, &the_daemon, &err)) {
        fprintf(stderr, "ergond: %s\n", err.msg);
        erg_gpu_close(gpu);
        return 1;
    }
    if ((lock_file && erg_daemon_set_lock_file(the_daemon, lock_file, &err)) ||
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
