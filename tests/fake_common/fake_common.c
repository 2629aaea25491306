/* fake_common.c: the call log, permissions, device count and state file of the fake libraries. */
#include "fake_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAKE_MAX_VALS 8
#define FAKE_MAX_DEVS 64

double fake_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void fake_log_call(const char *env, const char *fmt, ...)
{
    const char *path = getenv(env);
    if (!path || !*path)
        return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    ssize_t w = write(fd, line, (size_t)n);
    (void)w;
    close(fd);
}

bool fake_denied(const char *env)
{
    return geteuid() != 0 || getenv(env) != NULL;
}

int fake_device_count(const char *env, int def, int max)
{
    const char *e = getenv(env);
    int n = e ? atoi(e) : def;
    return n < 0 ? 0 : n > max ? max : n;
}

void fake_delay_us(const char *env)
{
    const char *e = getenv(env);
    long us = e ? atol(e) : 0;
    if (us > 0 && us < 10000000) {
        struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
}

/* One line "DEV V1 .. Vn"; false at the end of the file (or a malformed line). */
static bool read_line(FILE *f, int nvals, int *dev, unsigned long long *v)
{
    if (fscanf(f, "%d", dev) != 1)
        return false;
    for (int k = 0; k < nvals; k++)
        if (fscanf(f, "%llu", &v[k]) != 1)
            return false;
    return true;
}

void fake_state_load(const char *env, int ndev, int nvals, unsigned long long *vals)
{
    const char *path = getenv(env);
    FILE *f = path && *path ? fopen(path, "r") : NULL;
    if (!f || nvals > FAKE_MAX_VALS) {
        if (f)
            fclose(f);
        return;
    }
    unsigned long long v[FAKE_MAX_VALS];
    int dev;
    while (read_line(f, nvals, &dev, v))
        if (dev >= 0 && dev < ndev)
            memcpy(&vals[dev * nvals], v, (size_t)nvals * sizeof *v);
    fclose(f);
}

void fake_state_save(const char *env, int dev, int ndev, int nvals, const unsigned long long *vals)
{
    const char *path = getenv(env);
    if (!path || !*path || nvals > FAKE_MAX_VALS || ndev > FAKE_MAX_DEVS)
        return;
    char lock[4200], tmp[4200];
    snprintf(lock, sizeof lock, "%s.lock", path);
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    /* A POSIX record lock: owned by this process, so a child forked meanwhile (which keeps
     * a copy of the descriptor) does not keep it held as it would a flock. */
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (lfd >= 0)
        while (fcntl(lfd, F_SETLKW, &fl) != 0 && errno == EINTR)
            ;
    unsigned long long v[FAKE_MAX_DEVS * FAKE_MAX_VALS];
    memcpy(v, vals, (size_t)ndev * (size_t)nvals * sizeof *v);
    FILE *f = dev >= 0 ? fopen(path, "r") : NULL;
    if (f) {
        unsigned long long line[FAKE_MAX_VALS];
        int i;
        while (read_line(f, nvals, &i, line))
            if (i >= 0 && i < ndev && i != dev)
                memcpy(&v[i * nvals], line, (size_t)nvals * sizeof *line);
        fclose(f);
    }
    f = fopen(tmp, "w");
    if (f) {
        for (int i = 0; i < ndev; i++) {
            fprintf(f, "%d", i);
            for (int k = 0; k < nvals; k++)
                fprintf(f, " %llu", v[i * nvals + k]);
            fprintf(f, "\n");
        }
        if (fclose(f) == 0)
            rename(tmp, path);
        else
            unlink(tmp);
    }
    if (lfd >= 0)
        close(lfd); /* releases the lock */
}

double fake_kernel_s(double work_s, unsigned f_mhz, unsigned fmax_mhz)
{
    if (!(work_s > 0) || !f_mhz || !fmax_mhz)
        return 0.0;
    return work_s * (FAKE_MEM_SHARE + (1.0 - FAKE_MEM_SHARE) * (double)fmax_mhz / f_mhz);
}

bool fake_activity_model(void)
{
    const char *e = getenv("FAKE_GPU_ACTIVITY");
    return e && *e;
}
