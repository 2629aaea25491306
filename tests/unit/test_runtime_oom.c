/* test_runtime_oom.c: every allocation failure in the run-time parsers/builders ends cleanly. */
#include "client/client_internal.h"
#include "core/internal.h"
#include "daemon/daemon_internal.h"
#include "ergon/client.h"
#include "ergon/gpu.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Run `body` failing the 1st, 2nd, ... allocation until it succeeds;
 * each failing run must return ERG_ENOMEM (ASan checks for leaks). */
#define FOR_EACH_ALLOC_FAILURE(okvar, body)                                                        \
    for (long n_ = 1; n_ < 100000; n_++) {                                                         \
        erg__alloc_fail_after(n_);                                                                 \
        erg_status okvar = (body);                                                                 \
        erg__alloc_fail_after(0);                                                                  \
        if (okvar == ERG_OK)                                                                       \
            break;                                                                                 \
        ASSERT_MSG(okvar == ERG_ENOMEM, "allocation %ld: status %d", n_, (int)okvar);              \
    }

static erg_status sim_profile_once(void)
{
    erg_profile *p = NULL;
    erg_status st = erg_sim_profile("a40", "gpt3-xl", 4, 0, 1500, &p, NULL);
    erg_profile_free(p);
    return st;
}

static erg_status sim_open_once(void)
{
    erg_gpu *g = NULL;
    erg_status st = erg_gpu_open("sim:a100:bloom-3b:3", &g, NULL);
    if (!st) {
        int *c = NULL;
        size_t n = 0;
        st = erg_gpu_sm_clocks(g, 2, &c, &n, NULL);
        erg_free(c);
    }
    erg_gpu_close(g);
    return st;
}

static char logdir[64];

static erg_status logs_once(void)
{
    erg_profile *p = NULL;
    erg_status st = erg_profile_from_logs(logdir, 0, &p, NULL);
    erg_profile_free(p);
    return st;
}

static erg_status config_once(void)
{
    const char *t = "allow 0,1 uid:3 gid:4\nallow * uid:9\n";
    erg__config c;
    erg_status st = erg__config_parse(t, strlen(t), "c", &c, NULL);
    if (!st)
        erg__config_free(&c);
    return st;
}

TEST(sim_profile_survives_allocation_failures)
{
    FOR_EACH_ALLOC_FAILURE(st, sim_profile_once());
}

TEST(sim_backend_survives_allocation_failures)
{
    FOR_EACH_ALLOC_FAILURE(st, sim_open_once());
}

TEST(profile_logs_survive_allocation_failures)
{
    snprintf(logdir, sizeof logdir, "/tmp/ergon-test-oom-XXXXXX");
    ASSERT(mkdtemp(logdir));
    char path[128];
    snprintf(path, sizeof path, "%s/instructions-0.csv", logdir);
    FILE *f = fopen(path, "w");
    fprintf(f, "instruction,microbatch,start,end,freq_start,freq_end\n"
               "forward,0,1,2,1410,1410\nbackward,0,2,4,1410,1410\n"
               "forward,0,5,7,1200,1200\nbackward,0,7,10,1200,1200\n");
    fclose(f);
    snprintf(path, sizeof path, "%s/time-energy-0.csv", logdir);
    f = fopen(path, "w");
    fprintf(f, "time,energy\n0,0\n11,1100\n");
    fclose(f);
    FOR_EACH_ALLOC_FAILURE(st, logs_once());
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", logdir);
    ASSERT(system(cmd) == 0);
}

TEST(daemon_config_survives_allocation_failures)
{
    FOR_EACH_ALLOC_FAILURE(st, config_once());
}

TAP_MAIN(TEST_ENTRY(sim_profile_survives_allocation_failures),
         TEST_ENTRY(sim_backend_survives_allocation_failures),
         TEST_ENTRY(profile_logs_survive_allocation_failures),
         TEST_ENTRY(daemon_config_survives_allocation_failures))
