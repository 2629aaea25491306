/* cmd_gpu.c: `ergon gpu`: inspect GPUs and set clocks through any back-end (sim, NVML, ergond). */
#include "cli.h"
#include "ergon/gpu.h"

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage_gpu(FILE *f)
{
    fprintf(f, "usage: ergon gpu list   [--gpu SPEC]\n"
               "       ergon gpu clocks [--gpu SPEC] [--device N]\n"
               "       ergon gpu energy [--gpu SPEC] [--device N] [--check [--seconds S]]\n"
               "       ergon gpu lock   [--gpu SPEC] [--device N] --clock MHZ [--hold]\n"
               "       ergon gpu reset  [--gpu SPEC] [--device N]\n"
               "\n"
               "list    devices with name, energy (mJ), power (mW) and where the energy comes\n"
               "        from (counter or integrated power) and what it covers (gpu, module,\n"
               "        package); '-' where a device has no reading of its own (MI250 odd die)\n"
               "clocks  supported SM clocks (MHz, descending) of one device\n"
               "energy  the cumulative energy (mJ) of one device; with --check, read the\n"
               "        hardware counter and integrate power at 10 Hz for S seconds (default\n"
               "        10) and compare the two (exit 1 when they disagree beyond 25%%, or the\n"
               "        counter stalls or goes backwards)\n"
               "lock    lock the SM clock of one device at MHZ (must be supported); with --hold,\n"
               "        stay alive until a signal and reset the clock then\n"
               "reset   reset SM and memory clocks and the power limit of one device\n"
               "\n"
               "  --gpu SPEC    back-end: nvml (default; $ERGON_NVML_LIBRARY overrides the\n"
               "                library), nvml:LIBRARY, amdsmi ($ERGON_AMDSMI_LIBRARY),\n"
               "                amdsmi:LIBRARY, auto (NVML if it opens, else amdsmi),\n"
               "                sim:GPU[:MODEL[:N]], daemon:SOCKET (ergond)\n"
               "  --device N    device index (default 0)\n"
               "\n"
               "exit status: 0 success, 1 GPU error (named: permission, unsupported clock...), 2 "
               "usage.\n");
}

static volatile sig_atomic_t got_signal;
static void on_signal(int sig)
{
    got_signal = sig;
}

/* `ergon gpu energy --check`: the raw counter against power integrated at 10 Hz. */
static int energy_check(erg_gpu *g, int dev, double seconds)
{
    erg_error err;
    char name[128];
    uint64_t c0, c1 = 0, prev;
    uint32_t p0, p1;
    erg_gpu_energy_info info;
    if (erg_gpu_name(g, dev, name, sizeof name, &err) ||
        erg_gpu_energy_counter_mj(g, dev, &c0, &err) || erg_gpu_power_mw(g, dev, &p0, &err) ||
        erg_gpu_energy_info_get(g, dev, &info, &err))
        return cli_report("gpu", &err);
    fprintf(stderr, "ergon gpu energy --check: GPU %d (%s), %.1f s at 10 Hz...\n", dev, name,
            seconds);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double t0 = (double)ts.tv_sec + ts.tv_nsec * 1e-9, t = t0, tprev = t0, integ_j = 0;
    double stall_since = t0, stall_j = 0, longest_stall_s = 0;
    bool backwards = false;
    long samples = 1;
    prev = c0;
    while (t - t0 < seconds) {
        struct timespec nap = {0, 100000000};
        nanosleep(&nap, NULL);
        if (erg_gpu_energy_counter_mj(g, dev, &c1, &err) || erg_gpu_power_mw(g, dev, &p1, &err))
            return cli_report("gpu", &err);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
        double e = ((double)p0 + (double)p1) / 2.0 * (t - tprev) / 1000.0;
        integ_j += e;
        samples++;
        if (c1 < prev)
            backwards = true;
        if (c1 == prev) {
            stall_j += e;
            if (stall_j >= ERG_ENERGY_STALL_MIN_J && t - stall_since > longest_stall_s)
                longest_stall_s = t - stall_since;
        } else {
            stall_since = t;
            stall_j = 0;
        }
        prev = c1;
        p0 = p1;
        tprev = t;
    }
    double counter_j = c1 >= c0 ? (double)(c1 - c0) / 1000.0 : -(double)(c0 - c1) / 1000.0;
    double rel = integ_j > 0 ? (counter_j - integ_j) / integ_j : 0.0;
    printf("GPU %d\t%s\n", dev, name);
    printf("seconds\t%.2f\n", t - t0);
    printf("power samples\t%ld (%.1f Hz)\n", samples, (samples - 1) / (t - t0));
    printf("counter\t%.3f J (resolution %g mJ, scope %s)\n", counter_j, info.resolution_mj,
           info.scope);
    printf("integrated\t%.3f J\n", integ_j);
    printf("difference\t%+.1f%% (tolerance %.0f%%)\n", rel * 100.0, ERG_ENERGY_TOLERANCE * 100.0);
    const char *verdict = backwards                               ? "counter went backwards"
                          : longest_stall_s >= ERG_ENERGY_STALL_S ? "counter stalled"
                          : fabs(rel) > ERG_ENERGY_TOLERANCE
                              ? "counter and integrated power disagree"
                              : NULL;
    printf("verdict\t%s\n", verdict ? verdict : "agree");
    if (verdict) {
        fprintf(stderr, "ergon gpu: GPU %d: %s; ergon replaces its counter by integrated power\n",
                dev, verdict);
        return CLI_USER_ERROR;
    }
    return CLI_OK;
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
    bool hold = false, check = false;
    double seconds = 10.0;
    static const cli_help help = {
        "usage: ergon gpu list   [--gpu SPEC]\n"
        "       ergon gpu clocks [--gpu SPEC] [--device N]\n"
        "       ergon gpu energy [--gpu SPEC] [--device N] [--check [--seconds S]]\n"
        "       ergon gpu lock   [--gpu SPEC] [--device N] --clock MHZ [--hold]\n"
        "       ergon gpu reset  [--gpu SPEC] [--device N]\n",
        "list, clocks, energy, lock, reset: see 'ergon gpu --help'.\n",
        "exit status: 0 success, 1 GPU error (named: permission, unsupported clock...), 2 "
        "usage.\n"};
    const cli_opt opts[] = {
        CLI_OPT_S("gpu", "SPEC", &spec,
                  "back-end: nvml (default; $ERGON_NVML_LIBRARY overrides the\n"
                  "library), nvml:LIBRARY, amdsmi ($ERGON_AMDSMI_LIBRARY),\n"
                  "amdsmi:LIBRARY, auto (NVML if it opens, else amdsmi),\n"
                  "sim:GPU[:MODEL[:N]], daemon:SOCKET (ergond)"),
        CLI_OPT_L("device", "N", &dev, 0, 1023, "device index (default 0)"),
        CLI_OPT_L("clock", "MHZ", &clock, 1, 100000, "lock: the SM clock"),
        CLI_OPT_B("hold", &hold, "lock: stay alive until a signal and reset the clock then"),
        CLI_OPT_B("check", &check, "energy: compare the counter with integrated power"),
        CLI_OPT_D("seconds", "S", &seconds, 0.2, 86400.0, "energy --check: seconds (default 10)"),
        CLI_OPTS_END,
    };
    int prc = cli_opts_parse_all("gpu", argc - 1, argv + 1, opts, &help);
    if (prc)
        return prc == CLI_HELP ? CLI_OK : prc;
    if (check && strcmp(sub, "energy"))
        return cli_usage_error("gpu", "--check goes with 'ergon gpu energy'");
    if (!strcmp(sub, "lock") && !clock)
        return cli_usage_error("gpu", "lock needs --clock MHZ");
    erg_error err;
    erg_gpu *g = NULL;
    if (erg_gpu_open(spec, &g, &err))
        return cli_report("gpu", &err);
    int rc = CLI_OK;
    if (!strcmp(sub, "list")) {
        for (int i = 0; i < erg_gpu_count(g); i++) {
            char name[128], es[32] = "-", ps[32] = "-";
            uint64_t mj = 0;
            uint32_t mw = 0;
            erg_gpu_energy_info info;
            erg_status st = erg_gpu_name(g, i, name, sizeof name, &err);
            if (!st && !(st = erg_gpu_energy_mj(g, i, &mj, &err)))
                snprintf(es, sizeof es, "%" PRIu64 " mJ", mj);
            if (st == ERG_ENOTSUP)
                st = ERG_OK;
            if (!st && !(st = erg_gpu_power_mw(g, i, &mw, &err)))
                snprintf(ps, sizeof ps, "%" PRIu32 " mW", mw);
            if (st == ERG_ENOTSUP)
                st = ERG_OK;
            if (!st)
                st = erg_gpu_energy_info_get(g, i, &info, &err);
            if (st) {
                rc = cli_report("gpu", &err);
                break;
            }
            printf("%d\t%s\t%s\t%s\tenergy: %s (%s)\n", i, name, es, ps,
                   erg_energy_source_name(info.source), info.scope);
        }
    } else if (!strcmp(sub, "clocks")) {
        int *c = NULL;
        size_t n = 0;
        if (erg_gpu_sm_clocks(g, (int)dev, &c, &n, &err))
            rc = cli_report("gpu", &err);
        for (size_t i = 0; i < n; i++)
            printf("%d\n", c[i]);
        erg_free(c);
    } else if (!strcmp(sub, "energy") && check) {
        rc = energy_check(g, (int)dev, seconds);
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
