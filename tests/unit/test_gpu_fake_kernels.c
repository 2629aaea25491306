/* test_gpu_fake_kernels.c: the fake vendor libraries model compute (tests/fake_common): a fake
 * kernel lasts longer at a lower clock, and with FAKE_GPU_ACTIVITY the device draws its
 * clock's power only while a kernel runs. Through ergon's real load path (dlopen of the fake,
 * clocks set by ergon), the kernel entry points found with dlsym as the example trainer does. */
#include "ergon/gpu.h"
#include "tap.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef double (*begin_fn)(unsigned, double);
typedef int (*end_fn)(unsigned);

static void need(const char *path, const char *what)
{
    if (!path[0] || access(path, R_OK) != 0)
        SKIP_OR_FAIL("%s not built ('%s')", what, path);
    if (geteuid() != 0)
        SKIP_OR_FAIL("needs root (the fakes refuse clock changes otherwise)");
}

/* spec opens the fake at lib; low and high are supported clocks of its device 0; idle_w and
 * busy_w(high) its power model. */
static void check_fake(const char *spec, const char *lib, int low, int high, double idle_w,
                       double busy_high_w)
{
    erg_error err;
    erg_gpu *g = NULL;
    unsetenv("FAKE_GPU_ACTIVITY");
    ASSERT_OK(erg_gpu_open(spec, &g, &err));
    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD); /* the library ergon loaded */
    ASSERT_MSG(h != NULL, "%s is not loaded", lib);
    begin_fn begin = (begin_fn)dlsym(h, "fake_gpu_kernel_begin");
    end_fn end = (end_fn)dlsym(h, "fake_gpu_kernel_end");
    ASSERT(begin && end);
    /* Time: half the work scales with the clock. */
    ASSERT_OK(erg_gpu_lock_sm_clocks(g, 0, high, high, &err));
    double t_high = begin(0, 1.0);
    ASSERT_EQ_INT(end(0), 0);
    ASSERT_OK(erg_gpu_lock_sm_clocks(g, 0, low, low, &err));
    double t_low = begin(0, 1.0);
    ASSERT_EQ_INT(end(0), 0);
    ASSERT_NEAR(t_high, 1.0, 1e-9);
    ASSERT_NEAR(t_low, 0.5 + 0.5 * high / (double)low, 1e-9);
    ASSERT(begin(99, 1.0) < 0); /* no such device */
    /* Power: without FAKE_GPU_ACTIVITY the clock's power at all times (what other tests
     * measure); with it, idle power unless a kernel runs. */
    ASSERT_OK(erg_gpu_lock_sm_clocks(g, 0, high, high, &err));
    uint32_t mw = 0;
    ASSERT_OK(erg_gpu_power_mw(g, 0, &mw, &err));
    ASSERT_NEAR(mw / 1000.0, busy_high_w, 1.0);
    setenv("FAKE_GPU_ACTIVITY", "1", 1);
    ASSERT_OK(erg_gpu_power_mw(g, 0, &mw, &err));
    ASSERT_NEAR(mw / 1000.0, idle_w, 1.0);
    begin(0, 1.0);
    ASSERT_OK(erg_gpu_power_mw(g, 0, &mw, &err));
    ASSERT_NEAR(mw / 1000.0, busy_high_w, 1.0);
    end(0);
    ASSERT_OK(erg_gpu_power_mw(g, 0, &mw, &err));
    ASSERT_NEAR(mw / 1000.0, idle_w, 1.0);
    unsetenv("FAKE_GPU_ACTIVITY");
    ASSERT_OK(erg_gpu_reset_sm_clocks(g, 0, &err));
    dlclose(h);
    erg_gpu_close(g);
}

TEST(fake_amdsmi_kernels_follow_the_clock)
{
    need(ERG_FAKE_AMDSMI, "fake amdsmi library");
    setenv("FAKE_AMDSMI_DEVICES", "1", 1);
    unsetenv("FAKE_AMDSMI_QUIRK");
    unsetenv("FAKE_AMDSMI_STATE");
    char spec[4200];
    snprintf(spec, sizeof spec, "amdsmi:%s", ERG_FAKE_AMDSMI);
    /* MI210: 40 W + 260 W * clock / 1700 */
    check_fake(spec, ERG_FAKE_AMDSMI, 850, 1700, 40.0, 300.0);
}

TEST(fake_nvml_kernels_follow_the_clock)
{
    need(ERG_FAKE_NVML, "fake NVML library");
    setenv("FAKE_NVML_DEVICES", "1", 1);
    unsetenv("FAKE_NVML_STATE");
    char spec[4200];
    snprintf(spec, sizeof spec, "nvml:%s", ERG_FAKE_NVML);
    /* A100: 60 W + 300 W * clock / 1410 */
    check_fake(spec, ERG_FAKE_NVML, 705, 1410, 60.0, 360.0);
}

TAP_MAIN(TEST_ENTRY(fake_amdsmi_kernels_follow_the_clock),
         TEST_ENTRY(fake_nvml_kernels_follow_the_clock))
