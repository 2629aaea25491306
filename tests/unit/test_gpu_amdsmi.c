/* test_gpu_amdsmi.c: the AMD SMI back-end against the fake libamd_smi.so (real dlopen), the
 * quirks of real AMD GPUs, and the energy check of every hardware back-end. */
#include "ergon/client.h"
#include "ergon/gpu.h"
#include "ergon/pipeline.h"
#include "ergon/plan.h"
#include "tap.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256];

static void make_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ergon-test-amdsmi-XXXXXX");
    if (!mkdtemp(tmpdir))
        TAP_FAIL("mkdtemp: %s", strerror(errno));
}

static void rm_tmp(void)
{
    if (tmpdir[0] && !tap_rm_tree(tmpdir))
        TAP_FAIL("cannot remove %s", tmpdir);
}

/* Point the loader at the fake amdsmi, its log at a fresh file; `quirk` may be NULL. */
static void use_fake_amdsmi(char *log, size_t size, const char *quirk)
{
    if (!ERG_FAKE_AMDSMI[0] || access(ERG_FAKE_AMDSMI, R_OK) != 0)
        SKIP_OR_FAIL("fake amdsmi library not built ('%s')", ERG_FAKE_AMDSMI);
    make_tmp();
    snprintf(log, size, "%s/amdsmi.log", tmpdir);
    setenv("ERGON_AMDSMI_LIBRARY", ERG_FAKE_AMDSMI, 1);
    setenv("ERGON_WATCHDOG", ERG_WATCHDOG_EXE, 1); /* a static test binary is not next to it */
    setenv("FAKE_AMDSMI_LOG", log, 1);
    setenv("FAKE_AMDSMI_DEVICES", "2", 1);
    unsetenv("FAKE_AMDSMI_DENY");
    unsetenv("FAKE_AMDSMI_STATE");
    if (quirk)
        setenv("FAKE_AMDSMI_QUIRK", quirk, 1);
    else
        unsetenv("FAKE_AMDSMI_QUIRK");
    unsetenv("FAKE_AMDSMI_QUIRK_AFTER_S");
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return calloc(1, 1);
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

TEST(amdsmi_reads_devices_clocks_power_energy)
{
    char log[512];
    use_fake_amdsmi(log, sizeof log, NULL);
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("amdsmi", &g, &err));
    ASSERT_STR_EQ(erg_gpu_backend_name(g), "amdsmi");
    ASSERT_EQ_INT(erg_gpu_count(g), 2);
    char spec[600];
    snprintf(spec, sizeof spec, "amdsmi:%s", ERG_FAKE_AMDSMI);
    ASSERT_STR_EQ(erg_gpu_open_spec(g), spec);
    char name[64];
    ASSERT_OK(erg_gpu_name(g, 1, name, sizeof name, &err));
    ASSERT_STR_EQ(name, "AMD Instinct MI210");
    /* DPM levels 500, 1000, 1700 MHz: every 25 MHz from 1700 down, and 500. */
    int *clocks = NULL;
    size_t n = 0;
    ASSERT_OK(erg_gpu_sm_clocks(g, 0, &clocks, &n, &err));
    ASSERT_EQ_INT(n, 49);
    ASSERT_EQ_INT(clocks[0], 1700);
    ASSERT_EQ_INT(clocks[1], 1675);
    ASSERT_EQ_INT(clocks[48], 500);
    erg_free(clocks);
    ASSERT_OK(erg_gpu_mem_clocks(g, 0, &clocks, &n, &err));
    ASSERT_EQ_INT(n, 1);
    ASSERT_EQ_INT(clocks[0], 1600);
    erg_free(clocks);
    uint64_t e0, e1;
    ASSERT_OK(erg_gpu_energy_mj(g, 0, &e0, &err));
    sleep_s(0.1);
    ASSERT_OK(erg_gpu_energy_mj(g, 0, &e1, &err));
    /* 300 W for 0.1 s: 30 J. */
    ASSERT_NEAR((double)(e1 - e0), 30000.0, 10000.0);
    uint32_t mw;
    ASSERT_OK(erg_gpu_power_mw(g, 0, &mw, &err));
    ASSERT_EQ_INT(mw, 300000);
    uint32_t lo, hi, def, cur;
    ASSERT_OK(erg_gpu_power_limits(g, 0, &lo, &hi, &def, &cur, &err));
    ASSERT(lo == 150000 && hi == 300000 && def == 300000 && cur == 300000);
    erg_gpu_energy_info info;
    ASSERT_OK(erg_gpu_energy_info_get(g, 0, &info, &err));
    ASSERT_EQ_INT(info.source, ERG_ENERGY_COUNTER);
    ASSERT_STR_EQ(info.scope, "gpu");
    ASSERT_NEAR(info.resolution_mj, 0.015259, 1e-6);
    ASSERT_EQ_INT(info.replaced, 0);
    ASSERT_EQ_INT(erg_gpu_name(g, 2, name, sizeof name, &err), ERG_EINVAL);
    /* Memory clocks are not locked on AMD: ENOTSUP, which restore ignores. */
    ASSERT_EQ_INT(erg_gpu_lock_mem_clocks(g, 0, 1600, 1600, &err), ERG_ENOTSUP);
    erg_gpu_close(g);
    rm_tmp();
}

TEST(amdsmi_exact_calls_lock_range_reset_power_cap)
{
    char log[512];
    use_fake_amdsmi(log, sizeof log, NULL);
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("amdsmi", &g, &err));
    /* Refused before any driver call. */
    ASSERT_EQ_INT(erg_gpu_lock_sm_clocks(g, 0, 1210, 1210, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "1210 MHz");
    ASSERT_CONTAINS(err.msg, "nearest: 1200 or 1225 MHz");
    ASSERT_EQ_INT(erg_gpu_lock_sm_clocks(g, 0, 1700, 1675, &err), ERG_EINVAL);
    ASSERT_EQ_INT(erg_gpu_set_power_limit(g, 0, 100000, &err), ERG_EINVAL);
    /* One clock: amdsmi refuses min >= max, so [f - 1, f] ([f, f + 1] at the bottom). */
    ASSERT_OK(erg_gpu_lock_sm_clocks(g, 0, 1200, 1200, &err));
    ASSERT_OK(erg_gpu_lock_sm_clocks(g, 1, 500, 500, &err));
    ASSERT_OK(erg_gpu_lock_sm_clocks(g, 1, 1000, 1500, &err));
    ASSERT_OK(erg_gpu_set_power_limit(g, 1, 200000, &err));
    /* The clock changes power: 40 + 260 * 1200 / 1700 W. */
    uint32_t mw;
    ASSERT_OK(erg_gpu_power_mw(g, 0, &mw, &err));
    ASSERT_EQ_INT(mw, 224000);
    ASSERT_OK(erg_gpu_restore(g, 0, &err));
    ASSERT_OK(erg_gpu_restore(g, 1, &err));
    erg_gpu_close(g);
    char *text = slurp(log);
    ASSERT_STR_EQ(text, "amdsmi_init = 0\n"
                        "amdsmi_set_gpu_clk_range 0 1199 1200 0 = 0\n"
                        "amdsmi_set_gpu_clk_range 1 500 501 0 = 0\n"
                        "amdsmi_set_gpu_clk_range 1 1000 1500 0 = 0\n"
                        "amdsmi_set_power_cap 1 200000000 = 0\n"
                        "amdsmi_set_gpu_clk_range 0 500 1700 0 = 0\n"
                        "amdsmi_set_power_cap 0 300000000 = 0\n"
                        "amdsmi_set_gpu_clk_range 1 500 1700 0 = 0\n"
                        "amdsmi_set_power_cap 1 300000000 = 0\n"
                        "amdsmi_shut_down = 0\n");
    free(text);
    rm_tmp();
}

TEST(amdsmi_without_permission_gives_a_clear_error)
{
    char log[512];
    use_fake_amdsmi(log, sizeof log, NULL);
    setenv("FAKE_AMDSMI_DENY", "1", 1);
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("amdsmi", &g, &err));
    ASSERT_EQ_INT(erg_gpu_lock_sm_clocks(g, 0, 1700, 1700, &err), ERG_EPERM);
    ASSERT_CONTAINS(err.msg, "amdsmi_set_gpu_clk_range");
    ASSERT_CONTAINS(err.msg, "Permission Denied");
    ASSERT_CONTAINS(err.msg, "ergond");
    erg_client *c = NULL;
    ASSERT_OK(
        erg_client_new(g, 0, 0, NULL, ERG_CLIENT_NO_SIGNALS | ERG_CLIENT_NO_WATCHDOG, &c, &err));
    ASSERT_OK(erg_client_set_uniform_clock(c, 1200, &err));
    ASSERT_EQ_INT(erg_client_sync(c, 5, &err), ERG_EPERM);
    ASSERT_CONTAINS(err.msg, "Permission Denied");
    erg_client_close(c, NULL);
    erg_gpu_close(g);
    rm_tmp();
}

TEST(amdsmi_missing_library_or_symbol_and_auto)
{
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_EQ_INT(erg_gpu_open_amdsmi("/nonexistent/libamd_smi.so", &g, &err), ERG_ENOGPU);
    ASSERT_CONTAINS(err.msg, "amdsmi unavailable");
    ASSERT(g == NULL);
    ASSERT_EQ_INT(erg_gpu_open_amdsmi("libm.so.6", &g, &err), ERG_ENOGPU);
    ASSERT_CONTAINS(err.msg, "missing symbol amdsmi_init");
    /* auto: NVML first, then amdsmi, else both reasons. */
    setenv("ERGON_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    setenv("ERGON_AMDSMI_LIBRARY", "/nonexistent/libamd_smi.so", 1);
    ASSERT_EQ_INT(erg_gpu_open("auto", &g, &err), ERG_ENOGPU);
    ASSERT_CONTAINS(err.msg, "NVML unavailable");
    ASSERT_CONTAINS(err.msg, "amdsmi unavailable");
    if (ERG_FAKE_AMDSMI[0] && access(ERG_FAKE_AMDSMI, R_OK) == 0) {
        setenv("ERGON_AMDSMI_LIBRARY", ERG_FAKE_AMDSMI, 1);
        ASSERT_OK(erg_gpu_open("auto", &g, &err));
        ASSERT_STR_EQ(erg_gpu_backend_name(g), "amdsmi");
        erg_gpu_close(g);
    }
    if (ERG_FAKE_NVML[0] && access(ERG_FAKE_NVML, R_OK) == 0) {
        setenv("ERGON_NVML_LIBRARY", ERG_FAKE_NVML, 1);
        ASSERT_OK(erg_gpu_open("auto", &g, &err));
        ASSERT_STR_EQ(erg_gpu_backend_name(g), "nvml");
        erg_gpu_energy_info info;
        ASSERT_OK(erg_gpu_energy_info_get(g, 0, &info, &err));
        ASSERT_EQ_INT(info.source, ERG_ENERGY_COUNTER);
        ASSERT_STR_EQ(info.scope, "gpu");
        ASSERT_NEAR(info.resolution_mj, 1.0, 0);
        erg_gpu_close(g);
    }
}

/* The client drives the AMD back-end exactly as NVML: a plan of two stages. */
TEST(amdsmi_client_calls_for_two_stages_four_microbatches)
{
    char log[512];
    use_fake_amdsmi(log, sizeof log, NULL);
    erg_error err;
    erg_schedule sched = {.kind = ERG_SCHED_1F1B};
    erg_plan *plan = NULL;
    ASSERT_OK(erg_plan_new(&sched, 2, 4, &plan, &err));
    static const int s0[8] = {1700, 1700, 1200, 1200, 1200, 1700, 1675, 1675};
    static const int s1[8] = {1500, 1500, 1500, 1500, 1000, 1000, 1000, 1000};
    memcpy(erg_plan_stage_freqs(plan, 0), s0, sizeof s0);
    memcpy(erg_plan_stage_freqs(plan, 1), s1, sizeof s1);
    char path[512];
    snprintf(path, sizeof path, "%s/plan.json", tmpdir);
    ASSERT_OK(erg_plan_write_json(plan, path, &err));
    erg_plan_free(plan);
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("amdsmi", &g, &err));
    for (int rank = 0; rank < 2; rank++) {
        erg_client *c = NULL;
        ASSERT_OK(erg_client_new(g, rank, rank, NULL, ERG_CLIENT_NO_WATCHDOG, &c, &err));
        ASSERT_OK(erg_client_load_plan(c, path, rank, &err));
        erg_instr order[64];
        ASSERT_OK(erg_schedule_stage_order(&sched, 2, 4, rank, order, &err));
        ASSERT_OK(erg_client_step_begin(c));
        for (int i = 0; i < 8; i++) {
            ASSERT_OK(erg_client_instruction_begin(c, order[i].kind, order[i].microbatch));
            ASSERT_OK(erg_client_sync(c, 5, &err));
            ASSERT_OK(erg_client_instruction_end(c, order[i].kind, order[i].microbatch));
        }
        ASSERT_OK(erg_client_step_end(c, NULL, NULL));
        ASSERT_OK(erg_client_close(c, &err));
    }
    erg_gpu_close(g);
    char *text = slurp(log);
    ASSERT_STR_EQ(text, "amdsmi_init = 0\n"
                        "amdsmi_set_gpu_clk_range 0 1699 1700 0 = 0\n"
                        "amdsmi_set_gpu_clk_range 0 1199 1200 0 = 0\n"
                        "amdsmi_set_gpu_clk_range 0 1699 1700 0 = 0\n"
                        "amdsmi_set_gpu_clk_range 0 1674 1675 0 = 0\n"
                        "amdsmi_set_gpu_clk_range 0 500 1700 0 = 0\n"
                        "amdsmi_set_gpu_clk_range 1 1499 1500 0 = 0\n"
                        "amdsmi_set_gpu_clk_range 1 999 1000 0 = 0\n"
                        "amdsmi_set_gpu_clk_range 1 500 1700 0 = 0\n"
                        "amdsmi_shut_down = 0\n");
    free(text);
    rm_tmp();
}

/* A process that locks a clock through the client, then waits to be killed. */
static pid_t spawn_locker(int ready_fd)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    erg_error err;
    erg_gpu *g = NULL;
    erg_client *c = NULL;
    if (erg_gpu_open("amdsmi", &g, &err) || erg_client_new(g, 1, 1, NULL, 0, &c, &err) ||
        erg_client_set_uniform_clock(c, 1300, &err) || erg_client_sync(c, 5, &err))
        _exit(3);
    ssize_t w = write(ready_fd, "r", 1);
    (void)w;
    for (;;)
        pause();
}

static void kill_and_check(int sig)
{
    char log[512];
    use_fake_amdsmi(log, sizeof log, NULL);
    int fds[2];
    ASSERT(pipe(fds) == 0);
    pid_t pid = spawn_locker(fds[1]);
    ASSERT(pid > 0);
    close(fds[1]); /* a child that fails gives EOF, not a hang */
    char b;
    ASSERT_MSG(read(fds[0], &b, 1) == 1, "the locker could not lock a clock");
    kill(pid, sig);
    int status;
    ASSERT(waitpid(pid, &status, 0) == pid);
    ASSERT_MSG(WIFSIGNALED(status) && WTERMSIG(status) == sig, "child status %d", status);
    const char *reset = "amdsmi_set_gpu_clk_range 1 500 1700 0 = 0";
    char *text = NULL;
    for (int i = 0; i < 100; i++) {
        free(text);
        text = slurp(log);
        if (strstr(text, reset))
            break;
        sleep_s(0.05);
    }
    ASSERT_CONTAINS(text, "amdsmi_set_gpu_clk_range 1 1299 1300 0 = 0\n");
    ASSERT_CONTAINS(text, reset);
    ASSERT(strstr(text, reset) > strstr(text, "1299 1300"));
    free(text);
    rm_tmp();
}

TEST(amdsmi_clock_restored_after_sigterm)
{
    kill_and_check(SIGTERM);
}

TEST(amdsmi_clock_restored_after_sigkill_by_watchdog)
{
    kill_and_check(SIGKILL);
}

/* MI250X: two dies per package; the even die measures both, the odd one nothing. */
TEST(mi250_paired_dies)
{
    char log[512];
    use_fake_amdsmi(log, sizeof log, "mi250");
    setenv("FAKE_AMDSMI_DEVICES", "4", 1);
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("amdsmi", &g, &err));
    ASSERT_EQ_INT(erg_gpu_count(g), 4);
    erg_gpu_energy_info info;
    ASSERT_OK(erg_gpu_energy_info_get(g, 0, &info, &err));
    ASSERT_EQ_INT(info.source, ERG_ENERGY_COUNTER);
    ASSERT_STR_EQ(info.scope, "package");
    ASSERT_OK(erg_gpu_energy_info_get(g, 3, &info, &err));
    ASSERT_EQ_INT(info.source, ERG_ENERGY_NONE);
    ASSERT_STR_EQ(info.scope, "counted on GPU 2");
    uint32_t mw;
    ASSERT_OK(erg_gpu_power_mw(g, 2, &mw, &err));
    ASSERT_EQ_INT(mw, 600000); /* both dies at 300 W */
    uint64_t mj;
    ASSERT_EQ_INT(erg_gpu_energy_mj(g, 1, &mj, &err), ERG_ENOTSUP);
    ASSERT_CONTAINS(err.msg, "GPU 1 is the second die of AMD Instinct MI250X");
    ASSERT_CONTAINS(err.msg, "GPU 0's reading covers both dies");
    ASSERT_EQ_INT(erg_gpu_power_mw(g, 1, &mw, &err), ERG_ENOTSUP);
    /* Each die's clock is its own. */
    ASSERT_OK(erg_gpu_lock_sm_clocks(g, 1, 1000, 1000, &err));
    ASSERT_OK(erg_gpu_power_mw(g, 0, &mw, &err));
    ASSERT_EQ_INT(mw, 300000 + 193000);
    uint64_t e0, e1;
    ASSERT_OK(erg_gpu_energy_mj(g, 0, &e0, &err));
    sleep_s(0.1);
    ASSERT_OK(erg_gpu_energy_mj(g, 0, &e1, &err));
    ASSERT_NEAR((double)(e1 - e0), 49300.0, 15000.0);
    erg_gpu_close(g);
    rm_tmp();
}

/* MI300X: average power N/A, current valid. */
TEST(mi300x_average_power_not_available)
{
    char log[512];
    use_fake_amdsmi(log, sizeof log, "mi300x");
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("amdsmi", &g, &err));
    char name[64];
    ASSERT_OK(erg_gpu_name(g, 0, name, sizeof name, &err));
    ASSERT_STR_EQ(name, "AMD Instinct MI300X");
    uint32_t mw;
    ASSERT_OK(erg_gpu_power_mw(g, 0, &mw, &err));
    ASSERT_EQ_INT(mw, 300000);
    uint64_t mj;
    ASSERT_OK(erg_gpu_energy_mj(g, 0, &mj, &err));
    erg_gpu_close(g);
    rm_tmp();
}

typedef struct events {
    int n;
    int dev;
    char msg[400];
} events;

static void on_event(void *user, int dev, const char *message)
{
    events *e = user;
    e->n++;
    e->dev = dev;
    snprintf(e->msg, sizeof e->msg, "%s", message);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Read energy every 50 ms for `seconds`; checks that it never decreases. *first: the first
 * reading; *span_s: the time from the first reading to the last, as it really passed (a loaded
 * machine oversleeps the 50 ms). */
static uint64_t read_for(erg_gpu *g, int dev, double seconds, uint64_t *first, double *span_s)
{
    erg_error err;
    uint64_t prev = 0, mj = 0;
    int n = (int)(seconds / 0.05);
    double t0 = 0;
    for (int i = 0; i < n; i++) {
        ASSERT_OK(erg_gpu_energy_mj(g, dev, &mj, &err));
        if (i == 0) {
            t0 = mono_s();
            if (first)
                *first = mj;
        }
        if (span_s)
            *span_s = mono_s() - t0;
        ASSERT_MSG(mj >= prev, "energy went down from %llu to %llu mJ", (unsigned long long)prev,
                   (unsigned long long)mj);
        prev = mj;
        if (i + 1 < n)
            sleep_s(0.05);
    }
    return mj;
}

TEST(stalled_counter_is_replaced_by_integration_once)
{
    char log[512];
    use_fake_amdsmi(log, sizeof log, "stall");
    setenv("FAKE_AMDSMI_QUIRK_AFTER_S", "0.3", 1);
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("amdsmi", &g, &err));
    events ev = {0};
    erg_gpu_set_energy_event(g, on_event, &ev);
    uint64_t first = 0;
    double span = 0;
    uint64_t last = read_for(g, 0, 2.5, &first, &span);
    ASSERT_EQ_INT(ev.n, 1);
    ASSERT_EQ_INT(ev.dev, 0);
    ASSERT_CONTAINS(ev.msg, "GPU 0: energy counter not trusted: it stalled at");
    erg_gpu_energy_info info;
    ASSERT_OK(erg_gpu_energy_info_get(g, 0, &info, &err));
    ASSERT_EQ_INT(info.source, ERG_ENERGY_INTEGRATED);
    ASSERT_EQ_INT(info.replaced, 1);
    ASSERT_CONTAINS(info.reason, "stalled");
    ASSERT(info.interval_s > 0.04 && info.interval_s < 0.2);
    /* 300 W from the first reading to the last (about 2.45 s, longer on a loaded machine),
     * counted in full across the stall. */
    ASSERT_NEAR((double)(last - first) / 1000.0, 300.0 * span, 0.15 * 300.0 * span + 10.0);
    /* Device 1 stalled too, but it was never read: no event for it. */
    ASSERT_OK(erg_gpu_energy_info_get(g, 1, &info, &err));
    ASSERT_EQ_INT(info.source, ERG_ENERGY_COUNTER);
    erg_gpu_close(g);
    rm_tmp();
}

TEST(backwards_counter_is_replaced_and_reading_never_decreases)
{
    char log[512];
    use_fake_amdsmi(log, sizeof log, "backwards");
    setenv("FAKE_AMDSMI_QUIRK_AFTER_S", "0.2", 1);
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("amdsmi", &g, &err));
    events ev = {0};
    erg_gpu_set_energy_event(g, on_event, &ev);
    read_for(g, 1, 0.6, NULL, NULL);
    ASSERT_EQ_INT(ev.n, 1);
    ASSERT_CONTAINS(ev.msg, "went backwards");
    erg_gpu_energy_info info;
    ASSERT_OK(erg_gpu_energy_info_get(g, 1, &info, &err));
    ASSERT_EQ_INT(info.source, ERG_ENERGY_INTEGRATED);
    erg_gpu_close(g);
    rm_tmp();
}

TEST(mi100_counter_is_integrated_from_the_start)
{
    char log[512];
    use_fake_amdsmi(log, sizeof log, "mi100");
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("amdsmi", &g, &err));
    erg_gpu_energy_info info;
    ASSERT_OK(erg_gpu_energy_info_get(g, 0, &info, &err));
    ASSERT_EQ_INT(info.source, ERG_ENERGY_INTEGRATED);
    ASSERT_CONTAINS(info.reason, "MI100 energy counters are known to be unreliable");
    double span = 0;
    uint64_t first = 0, last = read_for(g, 0, 0.5, &first, &span);
    /* The drifting counter would say 1.6 x 300 W; integration says 300 W. */
    ASSERT_NEAR((double)(last - first) / 1000.0, 300.0 * span, 0.15 * 300.0 * span + 10.0);
    erg_gpu_close(g);
    rm_tmp();
}

TEST(drifting_counter_disagrees_with_integrated_power)
{
    char log[512];
    use_fake_amdsmi(log, sizeof log, "drift");
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("amdsmi", &g, &err));
    events ev = {0};
    erg_gpu_set_energy_event(g, on_event, &ev);
    read_for(g, 0, ERG_ENERGY_WINDOW_S + 0.6, NULL, NULL);
    ASSERT_EQ_INT(ev.n, 1);
    ASSERT_CONTAINS(ev.msg, "60% apart, tolerance 25%");
    erg_gpu_close(g);
    rm_tmp();
}

/* A healthy counter with changing clocks stays a counter (no false alarm). */
TEST(healthy_counter_with_changing_clocks_is_kept)
{
    char log[512];
    use_fake_amdsmi(log, sizeof log, NULL);
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("amdsmi", &g, &err));
    events ev = {0};
    erg_gpu_set_energy_event(g, on_event, &ev);
    static const int f[4] = {1700, 500, 1200, 500};
    for (int i = 0; i < 24; i++) {
        ASSERT_OK(erg_gpu_lock_sm_clocks(g, 0, f[i % 4], f[i % 4], &err));
        read_for(g, 0, 0.25, NULL, NULL);
    }
    ASSERT_EQ_INT(ev.n, 0);
    erg_gpu_energy_info info;
    ASSERT_OK(erg_gpu_energy_info_get(g, 0, &info, &err));
    ASSERT_EQ_INT(info.source, ERG_ENERGY_COUNTER);
    ASSERT_OK(erg_gpu_restore(g, 0, &err));
    erg_gpu_close(g);
    rm_tmp();
}

TAP_MAIN(TEST_ENTRY(amdsmi_reads_devices_clocks_power_energy),
         TEST_ENTRY(amdsmi_exact_calls_lock_range_reset_power_cap),
         TEST_ENTRY(amdsmi_without_permission_gives_a_clear_error),
         TEST_ENTRY(amdsmi_missing_library_or_symbol_and_auto),
         TEST_ENTRY(amdsmi_client_calls_for_two_stages_four_microbatches),
         TEST_ENTRY(amdsmi_clock_restored_after_sigterm),
         TEST_ENTRY(amdsmi_clock_restored_after_sigkill_by_watchdog), TEST_ENTRY(mi250_paired_dies),
         TEST_ENTRY(mi300x_average_power_not_available),
         TEST_ENTRY(stalled_counter_is_replaced_by_integration_once),
         TEST_ENTRY(backwards_counter_is_replaced_and_reading_never_decreases),
         TEST_ENTRY(mi100_counter_is_integrated_from_the_start),
         TEST_ENTRY(drifting_counter_disagrees_with_integrated_power),
         TEST_ENTRY(healthy_counter_with_changing_clocks_is_kept))
