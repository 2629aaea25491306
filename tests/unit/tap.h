/* tap.h: a small test runner: each test in a child process with a timeout,
 * typed asserts that print both sides, TAP output, SKIP with a reason. */
#ifndef ERGON_TAP_H
#define ERGON_TAP_H

#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct tap_test {
    const char *name;
    void (*fn)(void);
} tap_test;

#define TEST(name) static void name(void)
#define TEST_ENTRY(name)                                                                           \
    {                                                                                              \
#name, name                                                                                \
    }

#define TAP_SKIP_CODE 77

#define TAP_FAIL(...)                                                                              \
    do {                                                                                           \
        fprintf(stderr, "# %s:%d: ", __FILE__, __LINE__);                                          \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        fflush(stderr);                                                                            \
        _exit(1);                                                                                  \
    } while (0)

/* Skips (docs/testing.md, "Skips"). Under CI=true nothing skips but what is skipped by design:
 *   SKIP_OR_FAIL("fmt", ...)    a missing prerequisite (a fake library, root, a tool): skips with
 *                               the message, and fails with it under CI=true;
 *   SKIP_BY_DESIGN("fmt", ...)  a skip docs/testing.md lists (e.g. the ASan build): always skips;
 *   tap_need_data(path)         test data (tests/data, tests/data/published) is part of the
 *                               repository: missing, it fails the test, CI or not.
 * SKIP is SKIP_OR_FAIL. Their first argument is a string literal (the format). */
static inline bool tap_ci(void)
{
    const char *ci = getenv("CI");
    return ci && !strcmp(ci, "true");
}

#define TAP_SKIP_(kind, ...)                                                                       \
    do {                                                                                           \
        printf("# SKIP%s: ", kind);                                                                \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
        _exit(TAP_SKIP_CODE);                                                                      \
    } while (0)
#define SKIP_OR_FAIL(...)                                                                          \
    do {                                                                                           \
        if (tap_ci())                                                                              \
            TAP_FAIL("CI=true: a missing prerequisite fails, it does not skip: " __VA_ARGS__);     \
        TAP_SKIP_("", __VA_ARGS__);                                                                \
    } while (0)
#define SKIP_BY_DESIGN(...) TAP_SKIP_(" (by design)", __VA_ARGS__)
#define SKIP(...) SKIP_OR_FAIL(__VA_ARGS__)

#define tap_need_data(path)                                                                        \
    do {                                                                                           \
        const char *p_ = (path);                                                                   \
        if (access(p_, R_OK) != 0)                                                                 \
            TAP_FAIL("%s is missing: the test data is part of the repository "                     \
                     "(tests/data/published/README.md names each published file)",                 \
                     p_);                                                                          \
    } while (0)

#define ASSERT(c)                                                                                  \
    do {                                                                                           \
        if (!(c))                                                                                  \
            TAP_FAIL("assertion failed: %s", #c);                                                  \
    } while (0)
#define ASSERT_MSG(c, ...)                                                                         \
    do {                                                                                           \
        if (!(c))                                                                                  \
            TAP_FAIL(__VA_ARGS__);                                                                 \
    } while (0)
#define ASSERT_EQ_INT(a, b)                                                                        \
    do {                                                                                           \
        long long _a = (long long)(a), _b = (long long)(b);                                        \
        if (_a != _b)                                                                              \
            TAP_FAIL("%s == %s failed: %lld != %lld", #a, #b, _a, _b);                             \
    } while (0)
#define ASSERT_NEAR(a, b, tol)                                                                     \
    do {                                                                                           \
        double _a = (double)(a), _b = (double)(b);                                                 \
        if (!(fabs(_a - _b) <= (tol)))                                                             \
            TAP_FAIL("%s ~= %s failed: %.17g vs %.17g (diff %.3g, tol %.3g)", #a, #b, _a, _b,      \
                     fabs(_a - _b), (double)(tol));                                                \
    } while (0)
#define ASSERT_STR_EQ(a, b)                                                                        \
    do {                                                                                           \
        const char *_a = (a), *_b = (b);                                                           \
        if (!_a || !_b || strcmp(_a, _b) != 0)                                                     \
            TAP_FAIL("%s == %s failed: \"%s\" != \"%s\"", #a, #b, _a ? _a : "(null)",              \
                     _b ? _b : "(null)");                                                          \
    } while (0)
#define ASSERT_CONTAINS(hay, needle)                                                               \
    do {                                                                                           \
        const char *_h = (hay), *_n = (needle);                                                    \
        if (!_h || !strstr(_h, _n))                                                                \
            TAP_FAIL("\"%s\" does not contain \"%s\"", _h ? _h : "(null)", _n);                    \
    } while (0)
/* For erg_status calls with an erg_error named `err` in scope. */
#define ASSERT_OK(call)                                                                            \
    do {                                                                                           \
        int _st = (int)(call);                                                                     \
        if (_st != 0)                                                                              \
            TAP_FAIL("%s failed with status %d: %s", #call, _st, err.msg);                         \
    } while (0)

/* Removes the directory tree `dir` (a test's scratch directory); false if it cannot. A process
 * the test started may still be writing its last lines there (a client's watchdog that exits
 * after its client: its GPU library's shut-down goes to the fake's log), so a tree that is not
 * empty yet is tried again, for up to 5 s. */
static inline bool tap_rm_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' 2>/dev/null", dir);
    for (int i = 0; i < 100; i++) {
        if (system(cmd) == 0 && access(dir, F_OK) != 0)
            return true;
        usleep(50000);
    }
    return false;
}

static inline int tap_timeout_s(void)
{
    const char *t = getenv("ERG_TEST_TIMEOUT_S");
    int base = t ? atoi(t) : 300;
    const char *m = getenv("ERG_TEST_TIMEOUT_MULTIPLIER");
    int mult = m ? atoi(m) : 1;
    if (getenv("ERGON_SANITIZED"))
        mult *= 4;
    return base * (mult > 0 ? mult : 1);
}

/* Run every test; returns the process exit code (0 ok, 1 failures, 77 all skipped). */
static inline int tap_run(const tap_test *tests, size_t n, int argc, char **argv)
{
    int passed = 0, failed = 0, skipped = 0;
    printf("1..%zu\n", n);
    fflush(stdout);
    for (size_t i = 0; i < n; i++) {
        if (argc > 1 && !strstr(tests[i].name, argv[1])) {
            printf("ok %zu - %s # SKIP filtered out\n", i + 1, tests[i].name);
            skipped++;
            continue;
        }
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            alarm((unsigned)tap_timeout_s());
            tests[i].fn();
            fflush(stdout);
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            printf("ok %zu - %s\n", i + 1, tests[i].name);
            passed++;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == TAP_SKIP_CODE) {
            printf("ok %zu - %s # SKIP\n", i + 1, tests[i].name);
            skipped++;
        } else {
            if (WIFSIGNALED(status))
                printf("# killed by signal %d%s\n", WTERMSIG(status),
                       WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
            printf("not ok %zu - %s\n", i + 1, tests[i].name);
            failed++;
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (failed)
        return 1;
    if (passed == 0 && skipped > 0)
        return TAP_SKIP_CODE;
    return 0;
}

#define TAP_MAIN(...)                                                                              \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        static const tap_test tests_[] = {__VA_ARGS__};                                            \
        return tap_run(tests_, sizeof(tests_) / sizeof(tests_[0]), argc, argv);                    \
    }

#endif
