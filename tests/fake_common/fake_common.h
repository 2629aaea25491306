/* fake_common.h: what the fake vendor libraries (tests/fake_nvml, tests/fake_amdsmi) share:
 * the call log, permissions, the device count, the state file that outlives a process. */
#ifndef ERGON_FAKE_COMMON_H
#define ERGON_FAKE_COMMON_H

#include <stdbool.h>

/* Not exported from the fake library: only the vendor's symbols are. */
#define FAKE_HIDDEN __attribute__((visibility("hidden")))

/* Monotonic time, seconds. */
FAKE_HIDDEN double fake_now_s(void);
/* Append one line (printf format, a newline added) to the file named by $env, if set. */
FAKE_HIDDEN void fake_log_call(const char *env, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Setters fail without privilege: euid != 0, or $env set. */
FAKE_HIDDEN bool fake_denied(const char *env);
/* $env as a device count in [0, max] (def when unset). */
FAKE_HIDDEN int fake_device_count(const char *env, int def, int max);
/* Sleep $env microseconds (0 or unset: not at all; at most 10 s). */
FAKE_HIDDEN void fake_delay_us(const char *env);

/* The settings file named by $env: one line "DEV V1 .. Vn" per device (n = nvals), as on a
 * real GPU settings outlive the process. vals holds ndev * nvals values. */
/* Read it: lines of devices below ndev overwrite their values. */
FAKE_HIDDEN void fake_state_load(const char *env, int ndev, int nvals, unsigned long long *vals);
/* Rewrite it with device dev's values (-1: every device's), keeping the other devices' lines
 * as the file has them (another process sharing the GPU may have changed them), under a
 * record lock on "<file>.lock", atomically (a temporary file renamed). */
FAKE_HIDDEN void fake_state_save(const char *env, int dev, int ndev, int nvals,
                                 const unsigned long long *vals);

/* Compute on a fake device (what lets an end-to-end run on a fake library see clocks change
 * time and energy, as on a GPU). A trainer that finds the symbols fake_gpu_kernel_begin /
 * fake_gpu_kernel_end in the vendor library it loaded (the fakes only) brackets each
 * instruction with them: begin returns how long a kernel of work_s seconds at the top clock
 * takes at the device's clock, half of it memory-bound (FAKE_MEM_SHARE: that half does not
 * scale with the clock), and the trainer holds the instruction that long. With
 * $FAKE_GPU_ACTIVITY set, a device draws its clock's power only while a kernel runs and its
 * idle power between kernels (the blocking power of a pipeline stage); without it, the
 * clock's power all the time (what the unit tests of the fakes measure). */
#define FAKE_MEM_SHARE 0.5
FAKE_HIDDEN double fake_kernel_s(double work_s, unsigned f_mhz, unsigned fmax_mhz);
/* $FAKE_GPU_ACTIVITY is set (read at each power reading: a test may switch it). */
FAKE_HIDDEN bool fake_activity_model(void);

#endif
