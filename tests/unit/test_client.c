/* test_client.c: GPU back-ends (fake NVML, sim) and the client: call sequences, restore, logs. */
#include "client/client_internal.h"
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256];

static void make_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ergon-test-client-XXXXXX");
    if (!mkdtemp(tmpdir))
        TAP_FAIL("mkdtemp: %s", strerror(errno));
}

static void rm_tmp(void)
{
    if (tmpdir[0] && !tap_rm_tree(tmpdir))
        TAP_FAIL("cannot remove %s", tmpdir);
}

/* Point the loader at the fake NVML and its call log at a fresh file. */
static void use_fake_nvml(char *log, size_t size)
{
    if (!ERG_FAKE_NVML[0] || access(ERG_FAKE_NVML, R_OK) != 0)
        SKIP_OR_FAIL("fake NVML library not built ('%s')", ERG_FAKE_NVML);
    make_tmp();
    snprintf(log, size, "%s/nvml.log", tmpdir);
    setenv("ERGON_NVML_LIBRARY", ERG_FAKE_NVML, 1);
    setenv("FAKE_NVML_LOG", log, 1);
    setenv("FAKE_NVML_DEVICES", "2", 1);
    unsetenv("FAKE_NVML_DENY");
    setenv("ERGON_WATCHDOG", ERG_WATCHDOG_EXE, 1); /* a static test binary is not next to it */
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

TEST(nvml_reads_devices_clocks_energy)
{
    char log[512];
    use_fake_nvml(log, sizeof log);
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("nvml", &g, &err));
    ASSERT_STR_EQ(erg_gpu_backend_name(g), "nvml");
    ASSERT_EQ_INT(erg_gpu_count(g), 2);
    char name[64];
    ASSERT_OK(erg_gpu_name(g, 1, name, sizeof name, &err));
    ASSERT_CONTAINS(name, "A100");
    int *clocks = NULL;
    size_t n = 0;
    ASSERT_OK(erg_gpu_sm_clocks(g, 0, &clocks, &n, &err));
    ASSERT_EQ_INT(n, 81);
    ASSERT_EQ_INT(clocks[0], 1410);
    ASSERT_EQ_INT(clocks[80], 210);
    erg_free(clocks);
    uint64_t e0, e1;
    ASSERT_OK(erg_gpu_energy_mj(g, 0, &e0, &err));
    sleep_s(0.05);
    ASSERT_OK(erg_gpu_energy_mj(g, 0, &e1, &err));
    ASSERT(e1 > e0);
    uint32_t lo, hi, def, cur;
    ASSERT_OK(erg_gpu_power_limits(g, 0, &lo, &hi, &def, &cur, &err));
    ASSERT(lo == 100000 && hi == 400000 && def == 400000 && cur == 400000);
    ASSERT_EQ_INT(erg_gpu_name(g, 2, name, sizeof name, &err), ERG_EINVAL);
    erg_gpu_close(g);
    rm_tmp();
}

TEST(nvml_refuses_unsupported_clocks_before_calling_the_driver)
{
    char log[512];
    use_fake_nvml(log, sizeof log);
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("nvml", &g, &err));
    ASSERT_EQ_INT(erg_gpu_lock_sm_clocks(g, 0, 1000, 1000, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "1000 MHz");
    ASSERT_EQ_INT(erg_gpu_lock_sm_clocks(g, 0, 1410, 1395, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "above maximum");
    ASSERT_EQ_INT(erg_gpu_set_power_limit(g, 0, 50000, &err), ERG_EINVAL);
    ASSERT_OK(erg_gpu_lock_sm_clocks(g, 0, 1005, 1005, &err));
    erg_gpu_close(g);
    char *text = slurp(log);
    ASSERT_STR_EQ(text, "nvmlInit_v2 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 0 1005 1005 = 0\n"
                        "nvmlShutdown = 0\n");
    free(text);
    rm_tmp();
}

TEST(nvml_without_permission_gives_a_clear_error)
{
    char log[512];
    use_fake_nvml(log, sizeof log);
    setenv("FAKE_NVML_DENY", "1", 1);
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("nvml", &g, &err));
    ASSERT_EQ_INT(erg_gpu_lock_sm_clocks(g, 0, 1410, 1410, &err), ERG_EPERM);
    ASSERT_CONTAINS(err.msg, "Insufficient Permissions");
    ASSERT_CONTAINS(err.msg, "ergond");
    /* The client reports it from its clock thread. */
    erg_client *c = NULL;
    ASSERT_OK(
        erg_client_new(g, 0, 0, NULL, ERG_CLIENT_NO_SIGNALS | ERG_CLIENT_NO_WATCHDOG, &c, &err));
    ASSERT_OK(erg_client_set_uniform_clock(c, 1200, &err));
    ASSERT_EQ_INT(erg_client_sync(c, 5, &err), ERG_EPERM);
    ASSERT_CONTAINS(err.msg, "Insufficient Permissions");
    erg_client_close(c, NULL);
    erg_gpu_close(g);
    rm_tmp();
}

TEST(nvml_missing_library_or_symbol_degrades)
{
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_EQ_INT(erg_gpu_open_nvml("/nonexistent/libnvidia-ml.so.1", &g, &err), ERG_ENOGPU);
    ASSERT_CONTAINS(err.msg, "NVML unavailable");
    ASSERT(g == NULL);
    /* libm is a real library without NVML's symbols. */
    ASSERT_EQ_INT(erg_gpu_open_nvml("libm.so.6", &g, &err), ERG_ENOGPU);
    ASSERT_CONTAINS(err.msg, "missing symbol nvmlInit_v2");
    ASSERT_EQ_INT(erg_gpu_open("cuda", &g, &err), ERG_EINVAL);
    ASSERT_EQ_INT(erg_gpu_open("sim:a100:gpt3-xl:0", &g, &err), ERG_EINVAL);
    ASSERT_EQ_INT(erg_gpu_open("sim:a100:gpt3-xl:2:x", &g, &err), ERG_EINVAL);
}

/* Run `iters` iterations of `stage`'s 1F1B order with the client's hooks. */
static void run_stage(erg_client *c, int S, int M, int stage, int iters)
{
    erg_schedule sched = {.kind = ERG_SCHED_1F1B};
    erg_instr order[64];
    erg_error err;
    ASSERT_OK(erg_schedule_stage_order(&sched, S, M, stage, order, &err));
    for (int it = 0; it < iters; it++) {
        ASSERT_OK(erg_client_step_begin(c));
        for (int i = 0; i < 2 * M; i++) {
            ASSERT_OK(erg_client_instruction_begin(c, order[i].kind, order[i].microbatch));
            ASSERT_OK(erg_client_sync(c, 5, &err)); /* deterministic interleaving */
            ASSERT_OK(erg_client_instruction_end(c, order[i].kind, order[i].microbatch));
        }
        ASSERT_OK(erg_client_step_end(c, NULL, NULL));
    }
}

TEST(exact_nvml_calls_for_two_stages_four_microbatches)
{
    char log[512];
    use_fake_nvml(log, sizeof log);
    erg_error err;
    erg_schedule sched = {.kind = ERG_SCHED_1F1B};
    erg_plan *plan = NULL;
    ASSERT_OK(erg_plan_new(&sched, 2, 4, &plan, &err));
    /* Clocks in each stage's execution order. */
    static const int s0[8] = {1410, 1410, 1200, 1200, 1200, 1410, 1395, 1395};
    static const int s1[8] = {1350, 1350, 1350, 1350, 1005, 1005, 1005, 1005};
    memcpy(erg_plan_stage_freqs(plan, 0), s0, sizeof s0);
    memcpy(erg_plan_stage_freqs(plan, 1), s1, sizeof s1);
    char path[512];
    snprintf(path, sizeof path, "%s/plan.json", tmpdir);
    ASSERT_OK(erg_plan_write_json(plan, path, &err));
    erg_plan_free(plan);

    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("nvml", &g, &err));
    for (int rank = 0; rank < 2; rank++) {
        erg_client *c = NULL;
        ASSERT_OK(erg_client_new(g, rank, rank, NULL, 0, &c, &err));
        ASSERT_OK(erg_client_load_plan(c, path, rank, &err));
        run_stage(c, 2, 4, rank, 2);
        ASSERT_OK(erg_client_close(c, &err));
    }
    erg_gpu_close(g);
    char *text = slurp(log);
    /* Each client's watchdog (another process, same fake) opens NVML before the client is
     * returned and, after the clean close, shuts it down without touching a clock. */
    ASSERT_STR_EQ(text, "nvmlInit_v2 = 0\n"
                        "nvmlInit_v2 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 0 1410 1410 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 0 1200 1200 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 0 1410 1410 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 0 1395 1395 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 0 1410 1410 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 0 1200 1200 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 0 1410 1410 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 0 1395 1395 = 0\n"
                        "nvmlDeviceResetGpuLockedClocks 0 = 0\n"
                        "nvmlShutdown = 0\n"
                        "nvmlInit_v2 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 1 1350 1350 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 1 1005 1005 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 1 1350 1350 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 1 1005 1005 = 0\n"
                        "nvmlDeviceResetGpuLockedClocks 1 = 0\n"
                        "nvmlShutdown = 0\n"
                        "nvmlShutdown = 0\n");
    free(text);
    rm_tmp();
}

TEST(memory_clock_locked_at_max_and_reset)
{
    char log[512];
    use_fake_nvml(log, sizeof log);
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("nvml", &g, &err));
    erg_client *c = NULL;
    ASSERT_OK(
        erg_client_new(g, 1, 0, NULL, ERG_CLIENT_LOCK_MEMORY | ERG_CLIENT_NO_WATCHDOG, &c, &err));
    ASSERT_OK(erg_client_set_uniform_clock(c, 1005, &err));
    ASSERT_OK(erg_client_sync(c, 5, &err));
    ASSERT_OK(erg_client_close(c, &err));
    erg_gpu_close(g);
    char *text = slurp(log);
    ASSERT_STR_EQ(text, "nvmlInit_v2 = 0\n"
                        "nvmlDeviceSetMemoryLockedClocks 1 1215 1215 = 0\n"
                        "nvmlDeviceSetGpuLockedClocks 1 1005 1005 = 0\n"
                        "nvmlDeviceResetGpuLockedClocks 1 = 0\n"
                        "nvmlDeviceResetMemoryLockedClocks 1 = 0\n"
                        "nvmlShutdown = 0\n");
    free(text);
    rm_tmp();
}

TEST(plan_with_unsupported_clock_or_bad_microbatch_is_refused)
{
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("sim:a100:gpt3-xl:2", &g, &err));
    erg_schedule sched = {.kind = ERG_SCHED_1F1B};
    erg_plan *plan = NULL;
    ASSERT_OK(erg_plan_new(&sched, 2, 4, &plan, &err));
    erg_plan_fill(plan, 1411);
    erg_client *c = NULL;
    ASSERT_OK(erg_client_new(g, 0, 0, NULL, ERG_CLIENT_NO_SIGNALS, &c, &err));
    ASSERT_EQ_INT(erg_client_set_plan(c, plan, 0, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "1411");
    erg_plan_fill(plan, 1410);
    ASSERT_EQ_INT(erg_client_set_plan(c, plan, 2, &err), ERG_EINVAL);
    ASSERT_OK(erg_client_set_plan(c, plan, 1, &err));
    ASSERT_EQ_INT(erg_client_instruction_begin(c, ERG_FORWARD, 4), ERG_EINVAL);
    ASSERT_EQ_INT(erg_client_instruction_end(c, ERG_FORWARD, 0), ERG_ESTATE);
    ASSERT_OK(erg_client_instruction_begin(c, ERG_FORWARD, 0));
    ASSERT_EQ_INT(erg_client_instruction_begin(c, ERG_FORWARD, 1), ERG_ESTATE);
    ASSERT_EQ_INT(erg_client_instruction_end(c, ERG_BACKWARD, 0), ERG_ESTATE);
    ASSERT_OK(erg_client_instruction_end(c, ERG_FORWARD, 0));
    ASSERT_OK(erg_client_sync(c, 5, &err));
    ASSERT_EQ_INT(erg_client_active_clock(c), 1410);
    ASSERT_OK(erg_client_close(c, &err));
    erg_plan_free(plan);
    erg_gpu_close(g);
}

/* Zero-bubble and DualPipeV plans: every instruction's clock reaches the GPU
 * through the kind + chunk hooks (an OVERLAP_F_B step through both parts). */
static void chunk_hooks_case(erg_schedule_kind kind)
{
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("sim:a100:gpt3-xl:2", &g, &err));
    erg_schedule sched = {.kind = kind};
    erg_plan *plan = NULL;
    ASSERT_OK(erg_plan_new(&sched, 2, 4, &plan, &err));
    const int rank = 1;
    int n = erg_plan_stage_len(plan, rank);
    int *fq = erg_plan_stage_freqs(plan, rank);
    for (int k = 0; k < n; k++)
        fq[k] = 1410 - 15 * k;
    for (int k = 0; k < erg_plan_stage_len(plan, 0); k++)
        erg_plan_stage_freqs(plan, 0)[k] = 1410;
    erg_client *c = NULL;
    ASSERT_OK(erg_client_new(g, 0, rank, NULL, ERG_CLIENT_NO_SIGNALS, &c, &err));
    ASSERT_OK(erg_client_set_plan(c, plan, rank, &err));
    const erg_instr *v;
    ASSERT_EQ_INT(erg_order_rank(erg_plan_order(plan), rank, &v), n);
    int checked = 0;
    for (int k = 0; k < n; k++) {
        /* rank 1 holds stages 1 (chunk 0) and 2 (chunk 1) in both placements */
        int parts = v[k].kind == ERG_OVERLAP_F_B ? 2 : 1;
        for (int p = 0; p < parts; p++) {
            int st = p ? v[k].stage2 : v[k].stage, mb = p ? v[k].microbatch2 : v[k].microbatch;
            erg_instr_kind kd = p ? v[k].kind2 : parts == 2 ? ERG_FORWARD : v[k].kind;
            int chunk = st == 1 ? 0 : 1;
            ASSERT_OK(erg_client_instruction_begin_chunk(c, kd, chunk, mb));
            ASSERT_OK(erg_client_sync(c, 5, &err));
            ASSERT_MSG(erg_client_active_clock(c) == fq[k],
                       "%s instruction %d part %d: %d MHz, "
                       "planned %d",
                       erg_schedule_name(kind), k, p, erg_client_active_clock(c), fq[k]);
            ASSERT_OK(erg_client_instruction_end_chunk(c, kd, chunk, mb));
            checked++;
        }
    }
    ASSERT(checked >= n);
    ASSERT_EQ_INT(erg_client_instruction_begin_chunk(c, ERG_FORWARD, 2, 0), ERG_EINVAL);
    ASSERT_OK(erg_client_close(c, &err));
    erg_plan_free(plan);
    erg_gpu_close(g);
}

TEST(zero_bubble_plans_reach_the_gpu_by_kind_and_chunk)
{
    chunk_hooks_case(ERG_SCHED_ZBV);
    chunk_hooks_case(ERG_SCHED_DUALPIPEV);
    chunk_hooks_case(ERG_SCHED_INTERLEAVED_ZB);
}

/* A child process that locks a clock and then waits to be killed. */
static pid_t spawn_locker(const char *log, int ready_fd)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    erg_error err;
    erg_gpu *g = NULL;
    erg_client *c = NULL;
    if (erg_gpu_open("nvml", &g, &err) || erg_client_new(g, 1, 1, NULL, 0, &c, &err) ||
        erg_client_set_uniform_clock(c, 1305, &err) || erg_client_sync(c, 5, &err))
        _exit(3);
    ssize_t w = write(ready_fd, "r", 1);
    (void)w;
    for (;;)
        pause();
}

static int count_lines(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void kill_and_check(int sig)
{
    char log[512];
    use_fake_nvml(log, sizeof log);
    int fds[2];
    ASSERT(pipe(fds) == 0);
    pid_t pid = spawn_locker(log, fds[1]);
    ASSERT(pid > 0);
    char b;
    ASSERT_EQ_INT(read(fds[0], &b, 1), 1);
    kill(pid, sig);
    int status;
    ASSERT(waitpid(pid, &status, 0) == pid);
    ASSERT_MSG(WIFSIGNALED(status) && WTERMSIG(status) == sig, "child status %d", status);
    /* The reset may come from a grandchild (the watchdog): wait for it. */
    char *text = NULL;
    for (int i = 0; i < 100; i++) {
        free(text);
        text = slurp(log);
        if (strstr(text, "nvmlDeviceResetGpuLockedClocks 1 = 0"))
            break;
        sleep_s(0.05);
    }
    ASSERT_CONTAINS(text, "nvmlDeviceSetGpuLockedClocks 1 1305 1305 = 0\n");
    ASSERT_CONTAINS(text, "nvmlDeviceResetGpuLockedClocks 1 = 0\n");
    /* The reset comes after the lock. */
    ASSERT(strstr(text, "ResetGpuLockedClocks 1") > strstr(text, "SetGpuLockedClocks 1 1305"));
    sleep_s(0.1);
    free(text);
    text = slurp(log);
    /* Exactly one reset: the signal path disarms the watchdog. */
    ASSERT_EQ_INT(count_lines(text, "ResetGpuLockedClocks 1"), 1);
    free(text);
    rm_tmp();
}

TEST(clocks_restored_after_sigterm)
{
    kill_and_check(SIGTERM);
}

TEST(clocks_restored_after_sighup)
{
    kill_and_check(SIGHUP);
}

TEST(clocks_restored_after_sigkill_by_watchdog)
{
    kill_and_check(SIGKILL);
}

/* Simulated training: the sim GPU is busy for the model's time of each
 * instruction at the current clock. */
static void sim_run(erg_gpu *g, erg_client *c, erg_instr_kind kind, int mb)
{
    erg_error err;
    double t = 0;
    ASSERT_OK(erg_client_instruction_begin(c, kind, mb));
    ASSERT_OK(erg_gpu_sim_set_activity(g, 0, true, kind, &t, &err));
    sleep_s(t);
    ASSERT_OK(erg_gpu_sim_set_activity(g, 0, false, kind, NULL, &err));
    ASSERT_OK(erg_client_instruction_end(c, kind, mb));
}

TEST(sim_logs_give_the_model_profile)
{
    make_tmp();
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("sim:a100:bert-large:4", &g, &err));
    erg_client *c = NULL;
    ASSERT_OK(erg_client_new(g, 0, 0, tmpdir, ERG_CLIENT_NO_SIGNALS, &c, &err));
    static const int clocks[2] = {1410, 1005};
    for (int k = 0; k < 2; k++) {
        ASSERT_OK(erg_client_set_uniform_clock(c, clocks[k], &err));
        ASSERT_OK(erg_client_sync(c, 5, &err));
        for (int it = 0; it < 3; it++) {
            ASSERT_OK(erg_client_step_begin(c));
            sim_run(g, c, ERG_FORWARD, 0);
            sim_run(g, c, ERG_BACKWARD, 0);
            double t, e;
            ASSERT_OK(erg_client_step_end(c, &t, &e));
            ASSERT(t > 0 && e > 0);
        }
    }
    ASSERT_OK(erg_client_close(c, &err));
    erg_gpu_close(g);
    erg_profile *p = NULL;
    ASSERT_OK(erg_profile_from_logs(tmpdir, 0, &p, &err));
    ASSERT_EQ_INT(erg_profile_num_stages(p), 1);
    ASSERT_EQ_INT(erg_profile_num_points(p, 0, ERG_FORWARD), 2);
    erg_profile *model = NULL;
    ASSERT_OK(erg_sim_profile("a100", "bert-large", 4, 0, 1005, &model, &err));
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 2; i++) {
            erg_profile_point got, want;
            ASSERT_OK(erg_profile_lookup(p, 0, (erg_instr_kind)k, clocks[i], &got, &err));
            ASSERT_OK(erg_profile_lookup(model, 0, (erg_instr_kind)k, clocks[i], &want, &err));
            /* A sleep can only overshoot (more on a loaded machine) and the
             * simulated GPU stays busy meanwhile: time may grow, power
             * (energy / time) must be the model's. */
            ASSERT_MSG(got.time_s >= 0.98 * want.time_s && got.time_s <= 10.0 * want.time_s,
                       "t %.5f vs model %.5f", got.time_s, want.time_s);
            double pg = got.energy_j / got.time_s, pw = want.energy_j / want.time_s;
            ASSERT_MSG(fabs(pg / pw - 1) < 0.05, "P %.2f W vs model %.2f W", pg, pw);
        }
    erg_profile_free(p);
    erg_profile_free(model);
    rm_tmp();
}

/* The log's freq_run is the clock in effect once the instruction's own clock request was
 * handled: with ERG_CLIENT_WAIT_CLOCK begin waits for it; without it a sync inside the
 * instruction records it, and so does begin when nothing is pending. */
TEST(the_log_records_the_clock_each_instruction_ran_at)
{
    make_tmp();
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("sim:a100:bert-large:4", &g, &err));
    erg_client *w = NULL, *s = NULL;
    ASSERT_OK(
        erg_client_new(g, 0, 0, tmpdir, ERG_CLIENT_NO_SIGNALS | ERG_CLIENT_WAIT_CLOCK, &w, &err));
    ASSERT_OK(erg_client_new(g, 1, 1, tmpdir, ERG_CLIENT_NO_SIGNALS, &s, &err));
    static const int clocks[3] = {1410, 1005, 1200};
    for (int k = 0; k < 3; k++) {
        ASSERT_OK(erg_client_set_uniform_clock(w, clocks[k], &err));
        ASSERT_OK(erg_client_instruction_begin_chunk(w, ERG_BACKWARD_WEIGHT, 1, k));
        ASSERT_EQ_INT(erg_client_active_clock(w), clocks[k]); /* begin waited for it */
        ASSERT_OK(erg_client_instruction_end_chunk(w, ERG_BACKWARD_WEIGHT, 1, k));
        ASSERT_OK(erg_client_set_uniform_clock(s, clocks[k], &err));
        ASSERT_OK(erg_client_instruction_begin(s, ERG_FORWARD, k));
        ASSERT_OK(erg_client_sync(s, 5, &err)); /* records the clock now in effect */
        ASSERT_OK(erg_client_instruction_end(s, ERG_FORWARD, k));
        ASSERT_OK(erg_client_instruction_begin(s, ERG_BACKWARD, k)); /* nothing pending */
        ASSERT_OK(erg_client_instruction_end(s, ERG_BACKWARD, k));
    }
    ASSERT_OK(erg_client_close(w, &err));
    ASSERT_OK(erg_client_close(s, &err));
    erg_gpu_close(g);
    char path[512];
    snprintf(path, sizeof path, "%s/instructions-0.csv", tmpdir);
    char *text = slurp(path);
    ASSERT_CONTAINS(text, "instruction,microbatch,start,end,freq_start,freq_end,chunk,freq_run\n");
    ASSERT_CONTAINS(text, ",1,1410\n");
    ASSERT_CONTAINS(text, ",1,1005\n");
    ASSERT_CONTAINS(text, ",1,1200\n");
    free(text);
    snprintf(path, sizeof path, "%s/instructions-1.csv", tmpdir);
    text = slurp(path);
    for (int k = 0; k < 3; k++) {
        char want[64];
        snprintf(want, sizeof want, "forward,%d,", k);
        const char *line = strstr(text, want);
        ASSERT(line != NULL);
        snprintf(want, sizeof want, ",0,%d\n", clocks[k]);
        ASSERT_MSG(strstr(line, want) == strchr(line, '\n') - strlen(want) + 1, "forward %d: %.80s",
                   k, line);
        snprintf(want, sizeof want, "backward,%d,", k);
        line = strstr(text, want);
        ASSERT(line != NULL);
        snprintf(want, sizeof want, ",0,%d\n", clocks[k]);
        ASSERT_MSG(strstr(line, want) == strchr(line, '\n') - strlen(want) + 1,
                   "backward %d: %.80s", k, line);
    }
    free(text);
    rm_tmp();
}

static erg_status one_iteration(void *user, erg_client *c)
{
    erg_gpu *g = user;
    sim_run(g, c, ERG_FORWARD, 0);
    sim_run(g, c, ERG_BACKWARD, 0);
    return ERG_OK;
}

TEST(profiling_mode_sweeps_and_measures_blocking_power)
{
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("sim:a100:bert-large:4", &g, &err));
    erg_client *c = NULL;
    ASSERT_OK(erg_client_new(g, 0, 0, NULL, ERG_CLIENT_NO_SIGNALS, &c, &err));
    erg_profile *p = NULL;
    double pb = 0;
    ASSERT_OK(erg_client_profile(c, 0, 1300, 2, one_iteration, g, 0.2, &p, &pb, &err));
    ASSERT_MSG(fabs(pb - 83.64) < 2.0, "blocking power %.2f W", pb);
    size_t n = erg_profile_num_points(p, 0, ERG_FORWARD);
    /* 1410..1305; energy falls with the clock there, so no early stop unless a
     * badly loaded machine makes the sleeps (and so the energies) noisy */
    ASSERT_MSG(n >= 6 && n <= 8, "%zu clocks", n);
    const erg_profile_point *pt = erg_profile_points(p, 0, ERG_FORWARD);
    ASSERT_EQ_INT(pt[0].freq_mhz, 1410);
    for (size_t i = 1; i < n; i++)
        ASSERT_EQ_INT(pt[i].freq_mhz, 1410 - 15 * (int)i);
    /* lower clock, lower power (robust to sleep overshoot, unlike time) */
    ASSERT(pt[n - 1].energy_j / pt[n - 1].time_s < pt[0].energy_j / pt[0].time_s);
    ASSERT_EQ_INT(erg_client_active_clock(c), 0); /* reset after profiling */
    erg_profile_free(p);
    ASSERT_OK(erg_client_close(c, &err));
    erg_gpu_close(g);
}

/* A tight loop against a slow GPU overflows the ring: the GPU must still end
 * at the last clock asked for, and far fewer changes reach the driver. */
/* A clock change the GPU refused (ergond down, no permission) is not the GPU's clock: the same
 * clock asked again is sent again, not dropped as a repeat (multi-host test: the GPU stayed at
 * 1200 MHz while 1005 was asked once ergond was back). sync keeps reporting the first error. */
TEST(a_refused_clock_is_sent_again_when_asked_again)
{
    char log[512];
    use_fake_nvml(log, sizeof log);
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("nvml", &g, &err));
    erg_client *c = NULL;
    ASSERT_OK(
        erg_client_new(g, 0, 0, NULL, ERG_CLIENT_NO_SIGNALS | ERG_CLIENT_NO_WATCHDOG, &c, &err));
    setenv("FAKE_NVML_DENY", "1", 1);
    ASSERT_OK(erg_client_set_uniform_clock(c, 1200, &err));
    ASSERT_EQ_INT(erg_client_sync(c, 5, &err), ERG_EPERM);
    ASSERT_EQ_INT(erg_client_active_clock(c), 0);
    unsetenv("FAKE_NVML_DENY");
    ASSERT_OK(erg_client_set_uniform_clock(c, 1200, &err));
    erg_client_sync(c, 5, NULL); /* still the first error: reported until the client closes */
    ASSERT_EQ_INT(erg_client_active_clock(c), 1200);
    char *calls = slurp(log);
    ASSERT_CONTAINS(calls, "nvmlDeviceSetGpuLockedClocks 0 1200 1200 = 0");
    free(calls);
    erg_client_close(c, NULL);
    erg_gpu_close(g);
    rm_tmp();
}

TEST(queue_coalesces_and_ends_at_the_last_request)
{
    char log[512];
    use_fake_nvml(log, sizeof log);
    setenv("FAKE_NVML_SET_DELAY_US", "300", 1);
    unsetenv("FAKE_NVML_LOG");
    erg_error err;
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("nvml", &g, &err));
    erg_schedule sched = {.kind = ERG_SCHED_GPIPE};
    erg_plan *plan = NULL;
    const int M = 50;
    ASSERT_OK(erg_plan_new(&sched, 1, M, &plan, &err));
    int *f = erg_plan_stage_freqs(plan, 0);
    for (int i = 0; i < 2 * M; i++)
        f[i] = 1410 - 15 * (i % 60);
    erg_client *c = NULL;
    ASSERT_OK(
        erg_client_new(g, 0, 0, NULL, ERG_CLIENT_NO_SIGNALS | ERG_CLIENT_NO_WATCHDOG, &c, &err));
    ASSERT_OK(erg_client_set_plan(c, plan, 0, &err));
    int last = 0;
    for (int it = 0; it < 1000; it++)
        for (int i = 0; i < 2 * M; i++) {
            erg_instr_kind k = i < M ? ERG_FORWARD : ERG_BACKWARD;
            int mb = i % M;
            ASSERT_OK(erg_client_instruction_begin(c, k, mb));
            ASSERT_OK(erg_client_instruction_end(c, k, mb));
            last = erg_plan_freq(plan, 0, k, mb);
        }
    ASSERT_OK(erg_client_sync(c, 10, &err));
    ASSERT_EQ_INT(erg_client_active_clock(c), last);
    ASSERT_MSG(erg_client_clock_changes(c) < 100000 / 4, "%llu changes applied",
               (unsigned long long)erg_client_clock_changes(c));
    ASSERT_OK(erg_client_close(c, &err));
    erg_plan_free(plan);
    erg_gpu_close(g);
    rm_tmp();
}

TEST(early_stop_rule)
{
    /* 12 clocks: energy falls, then rises from index 4 on. */
    static const double e[12] = {10, 9, 8, 7, 7.5, 8, 8.5, 9, 9.5, 10, 11, 12};
    int ups = 0;
    double prev = NAN;
    size_t stop_at = 99;
    for (size_t i = 0; i < 12; i++) {
        if (erg__profile_early_stop(&ups, prev, e[i], i, 12)) {
            stop_at = i;
            break;
        }
        prev = e[i];
    }
    ASSERT_EQ_INT(stop_at, 8); /* ups at 4,5,6,7,8 */
    /* Not before the first third: 5 increases from the start of 30 clocks. */
    ups = 0;
    prev = NAN;
    stop_at = 99;
    for (size_t i = 0; i < 30; i++) {
        if (erg__profile_early_stop(&ups, prev, (double)i, i, 30)) {
            stop_at = i;
            break;
        }
        prev = (double)i;
    }
    ASSERT_EQ_INT(stop_at, 9); /* 5 ups by i = 5, but (i+1)*3 >= 30 first at i = 9 */
    /* A NAN (no energy) breaks the run. */
    ups = 4;
    ASSERT(!erg__profile_early_stop(&ups, 1.0, NAN, 20, 30));
    ASSERT_EQ_INT(ups, 0);
}

TEST(bad_logs_are_refused_with_file_and_line)
{
    make_tmp();
    erg_error err;
    erg_profile *p = NULL;
    ASSERT_EQ_INT(erg_profile_from_logs(tmpdir, 0, &p, &err), ERG_ENOTFOUND);
    char path[512];
    snprintf(path, sizeof path, "%s/instructions-0.csv", tmpdir);
    FILE *f = fopen(path, "w");
    fprintf(f, "instruction,start,end,freq_start,freq_end\nforward,1.0,0.5,1410,1410\n");
    fclose(f);
    snprintf(path, sizeof path, "%s/time-energy-0.csv", tmpdir);
    f = fopen(path, "w");
    fprintf(f, "time,energy\n0.0,1.0\n2.0,3.0\n");
    fclose(f);
    ASSERT_EQ_INT(erg_profile_from_logs(tmpdir, 0, &p, &err), ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "instructions-0.csv:2");
    snprintf(path, sizeof path, "%s/instructions-0.csv", tmpdir);
    f = fopen(path, "w");
    fprintf(f, "instruction,start,end,freq_start,freq_end\nforward,1.0,3.5,1410,1410\n");
    fclose(f);
    ASSERT_EQ_INT(erg_profile_from_logs(tmpdir, 0, &p, &err), ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "outside the energy samples");
    snprintf(path, sizeof path, "%s/time-energy-0.csv", tmpdir);
    f = fopen(path, "w");
    fprintf(f, "time,energy\n0.0,1.0\n2.0,0.5\n");
    fclose(f);
    ASSERT_EQ_INT(erg_profile_from_logs(tmpdir, 0, &p, &err), ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "time-energy-0.csv:3");
    f = fopen(path, "w");
    fprintf(f, "time,energy\n0.0,1.0\n4.0,3.0\n");
    fclose(f);
    ASSERT(erg_profile_from_logs(tmpdir, 1, &p, &err) != ERG_OK);
    ASSERT_CONTAINS(err.msg, "no backward");
    ASSERT(erg_profile_from_logs(tmpdir, 2, &p, &err) != ERG_OK);
    ASSERT_CONTAINS(err.msg, "instructions-1.csv");
    rm_tmp();
}

TAP_MAIN(TEST_ENTRY(nvml_reads_devices_clocks_energy),
         TEST_ENTRY(nvml_refuses_unsupported_clocks_before_calling_the_driver),
         TEST_ENTRY(nvml_without_permission_gives_a_clear_error),
         TEST_ENTRY(nvml_missing_library_or_symbol_degrades),
         TEST_ENTRY(exact_nvml_calls_for_two_stages_four_microbatches),
         TEST_ENTRY(plan_with_unsupported_clock_or_bad_microbatch_is_refused),
         TEST_ENTRY(zero_bubble_plans_reach_the_gpu_by_kind_and_chunk),
         TEST_ENTRY(memory_clock_locked_at_max_and_reset),
         TEST_ENTRY(clocks_restored_after_sigterm), TEST_ENTRY(clocks_restored_after_sighup),
         TEST_ENTRY(clocks_restored_after_sigkill_by_watchdog),
         TEST_ENTRY(sim_logs_give_the_model_profile),
         TEST_ENTRY(the_log_records_the_clock_each_instruction_ran_at),
         TEST_ENTRY(profiling_mode_sweeps_and_measures_blocking_power),
         TEST_ENTRY(a_refused_clock_is_sent_again_when_asked_again),
         TEST_ENTRY(queue_coalesces_and_ends_at_the_last_request), TEST_ENTRY(early_stop_rule),
         TEST_ENTRY(bad_logs_are_refused_with_file_and_line))
