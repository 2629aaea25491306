/* cmd_gpu.c: `ergon gpu`: inspect GPUs and set clocks through any back-end (sim, NVML, ergond). */
#include "cli.h"
#include "ergon/gpu.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage_gpu(FILE *f)
{
    fprintf(f,
            "usage: ergon gpu list   [--gpu SPEC]\n"
            "       ergon gpu clocks [--gpu SPEC] [--device N]\n"
            "       ergon gpu energy [--gpu SPEC] [--device N]\n"
            "       ergon gpu lock   [--gpu SPEC] [--device N] --clock MHZ [--hold]\n"
            "       ergon gpu reset  [--gpu SPEC] [--device N]\n"
            "\n"
            "list    devices with name, energy counter (mJ) and power (mW)\n"
            "clocks  supported SM clocks (MHz, descending) of one device\n"
            "energy  the cumulative energy counter (mJ) of one device\n"
            "lock    lock the SM clock of one device at MHZ (must be supported); with --hold,\n"
            "        stay alive until a signal and reset the clock then\n"
            "reset   reset SM and memory clocks and the power limit of one device\n"
            "\n"
            "  --gpu SPEC    back-end: nvml (default; $ERGON_NVML_LIBRARY overrides the\n"
            "                library), nvml:LIBRARY, sim:GPU[:MODEL[:N]], daemon:SOCKET (ergond)\n"
            "  --device N    device index (default 0)\n"
            "\n"
            "exit status: 0 success, 1 GPU error (named: permission, unsupported clock...), 2 usage.\n");
}

static volatile sig_atomic_t got_signal;
static void on_signal(int sig)
{
    got_signal = sig;
}

int cmd_gpu(int argc, char **argv)
{
    if (argc < 2) {
        usage_gpu(stderr);
        return CLI_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        usage_gpu(stdout);
        return CLI_OK;
    }
    if (strcmp(sub, "list") && strcmp(sub, "clocks") && strcmp(sub, "energy") &&
        strcmp(sub, "lock") && strcmp(sub, "reset"))
        return cli_usage_error("gpu", "unknown subcommand '%s'", sub);
    const char *spec = "nvml";
    long dev = 0, clock = 0;
    bool hold = false;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage_gpu(stdout);
            return CLI_OK;
        }
        if (!strcmp(a, "--hold")) {
            hold = true;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return cli_usage_error("gpu", "%s needs a value", a);
        i++;
        if (!strcmp(a, "--gpu"))
            spec = v;
        else if (!strcmp(a, "--device")) {
            if (!cli_parse_int("gpu", a, v, 0, 1023, &dev))
                return CLI_USAGE;
        } else if (!strcmp(a, "--clock")) {
            if (!cli_parse_int("gpu", a, v, 1, 100000, &clock))
                return CLI_USAGE;
        } else
            return cli_usage_error("gpu", "unknown option '%s'", a);
    }
    if (!strcmp(sub, "lock") && !clock)
        return cli_usage_error("gpu", "lock needs --clock MHZ");
    erg_error err;
    erg_gpu *g = NULL;
    if (erg_gpu_open(spec, &g, &err))
        return cli_report("gpu", &err);
    int rc = CLI_OK;
    if (!strcmp(sub, "list")) {
        for (int i = 0; i < erg_gpu_count(g); i++) {
            char name[128];
            uint64_t mj = 0;
            uint32_t mw = 0;
            if (erg_gpu_name(g, i, name, sizeof name, &err) ||
                erg_gpu_energy_mj(g, i, &mj, &err) || erg_gpu_power_mw(g, i, &mw, &err)) {
                rc = cli_report("gpu", &err);
                break;
            }
            printf("%d\t%s\t%" PRIu64 " mJ\t%" PRIu32 " mW\n", i, name, mj, mw);
        }
    } else if (!strcmp(sub, "clocks")) {
        int *c = NULL;
        size_t n = 0;
        if (erg_gpu_sm_clocks(g, (int)dev, &c, &n, &err))
            rc = cli_report("gpu", &err);
        for (size_t i = 0; i < n; i++)
            printf("%d\n", c[i]);
        erg_free(c);
    } else if (!strcmp(sub, "energy")) {
        uint64_t mj;
        if (erg_gpu_energy_mj(g, (int)dev, &mj, &err))
            rc = cli_report("gpu", &err);
        else
            printf("%" PRIu64 "\n", mj);
    } else if (!strcmp(sub, "lock")) {
        /* With --hold, a signal that arrives at any point after the lock
         * (even before it is answered) must reset the clock: block the
         * signals first, and wait for them with sigsuspend (no lost wake-up). */
        sigset_t block, old;
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigaddset(&block, SIGTERM);
        sigaddset(&block, SIGHUP);
        if (hold) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_signal;
            sigaction(SIGINT, &sa, NULL);
            sigaction(SIGTERM, &sa, NULL);
            sigaction(SIGHUP, &sa, NULL);
            sigprocmask(SIG_BLOCK, &block, &old);
        }
        if (erg_gpu_lock_sm_clocks(g, (int)dev, (int)clock, (int)clock, &err))
            rc = cli_report("gpu", &err);
        else if (hold) {
            printf("locked GPU %ld at %ld MHz; holding until a signal\n", dev, clock);
            fflush(stdout);
            sigset_t wait = old;
            sigdelset(&wait, SIGINT);
            sigdelset(&wait, SIGTERM);
            sigdelset(&wait, SIGHUP);
            while (!got_signal)
                sigsuspend(&wait);
            if (erg_gpu_reset_sm_clocks(g, (int)dev, &err))
                rc = cli_report("gpu", &err);
        }
        if (hold)
            sigprocmask(SIG_SETMASK, &old, NULL);
    } else {
        if (erg_gpu_restore(g, (int)dev, &err))
            rc = cli_report("gpu", &err);
    }
    erg_gpu_close(g);
    return rc;
}
