/* test_lazylib.c: libraries loaded on first use (core/lazylib.c): the loader itself, and that
 * libergon maps libcurl and cairo only when a client or a picture asks for them. */
#include "core/internal.h"
#include "ergon/plot.h"
#include "ergon/server_client.h"
#include "tap.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* Whether a library whose file name contains `name` is mapped into this process. */
static bool mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ASSERT_MSG(f, "cannot read /proc/self/maps");
    char line[4096];
    bool found = false;
    while (fgets(line, sizeof line, f))
        if (strstr(line, name))
            found = true;
    fclose(f);
    return found;
}

#define M_FUNCS(X) X(cos) X(sqrt)
ERG__LAZY_LIB(m_lib, "libm.so.6", "the test's maths", M_FUNCS)

TEST(loads_and_resolves_every_function)
{
    erg_error err;
    ASSERT_OK(erg__lazylib_load(&m_lib, &err));
    ASSERT(lz_cos && lz_sqrt);
    ASSERT_NEAR(lz_cos(0.0), 1.0, 0.0);
    ASSERT_NEAR(lz_sqrt(16.0), 4.0, 0.0);
    ASSERT_OK(erg__lazylib_load(&m_lib, &err)); /* again: the fast path */
}

#define NONE_FUNCS(X) X(cos)
ERG__LAZY_LIB(none_lib, "libergon-no-such-library.so.9", "the test's absent library", NONE_FUNCS)

TEST(a_missing_library_is_named_with_who_needs_it)
{
    erg_error err;
    for (int k = 0; k < 2; k++) { /* a failure is not remembered as a success */
        ASSERT_EQ_INT(erg__lazylib_load(&none_lib, &err), ERG_ENOTSUP);
        ASSERT_CONTAINS(err.msg, "libergon-no-such-library.so.9");
        ASSERT_CONTAINS(err.msg, "the test's absent library");
        ASSERT(!none_lib.loaded);
    }
}

/* A function libm does not have, declared only for __typeof__. */
double erg_test_no_such_function(double);
#define ODD_FUNCS(X) X(cos) X(erg_test_no_such_function)
ERG__LAZY_LIB(odd_lib, "libm.so.6", "the test's odd library", ODD_FUNCS)

TEST(a_missing_function_is_named)
{
    erg_error err;
    ASSERT_EQ_INT(erg__lazylib_load(&odd_lib, &err), ERG_ENOTSUP);
    ASSERT_CONTAINS(err.msg, "erg_test_no_such_function");
    ASSERT_CONTAINS(err.msg, "libm.so.6");
    ASSERT(!odd_lib.loaded);
}

#define M2_FUNCS(X) X(exp)
ERG__LAZY_LIB(m2_lib, "libm.so.6", "the threads' maths", M2_FUNCS)

static void *load_in_thread(void *arg)
{
    erg_error err;
    erg_status *st = arg;
    *st = erg__lazylib_load(&m2_lib, &err);
    if (*st == ERG_OK && lz_exp(0.0) != 1.0)
        *st = ERG_EINTERNAL;
    return NULL;
}

TEST(threads_racing_to_load_all_get_it)
{
    pthread_t t[16];
    erg_status st[16];
    for (int i = 0; i < 16; i++)
        ASSERT(pthread_create(&t[i], NULL, load_in_thread, &st[i]) == 0);
    for (int i = 0; i < 16; i++) {
        pthread_join(t[i], NULL);
        ASSERT_EQ_INT(st[i], ERG_OK);
    }
}

/* The point of it: a process that plans never maps the HTTP stack or cairo; the first client
 * or picture does. */
TEST(curl_and_cairo_are_mapped_only_when_used)
{
    ASSERT_MSG(!mapped("libcurl"), "libcurl mapped before any client");
    ASSERT_MSG(!mapped("libcairo"), "libcairo mapped before any picture");
    ASSERT_MSG(!mapped("libmicrohttpd"), "libmicrohttpd mapped before any server");
    ASSERT_MSG(!mapped("libglpk"), "libglpk mapped before any ILP");
    ASSERT_MSG(!mapped("libopenblas"), "libopenblas mapped before any GEMM");
    erg_srv_client *c = NULL;
    erg_error err;
    ASSERT_OK(erg_srv_client_new("http://127.0.0.1:9", NULL, &c, &err));
    ASSERT_MSG(mapped("libcurl"), "erg_srv_client_new did not load libcurl");
    erg_srv_client_free(c);
    ASSERT(!mapped("libcairo"));
    erg_plot_series s;
    memset(&s, 0, sizeof s);
    erg_plot_point pts[2] = {{1, 2}, {2, 1}};
    s.name = "f";
    s.points = pts;
    s.count = 2;
    s.line = true;
    char path[] = "/tmp/ergon-lazylib-XXXXXX";
    ASSERT(mkdtemp(path));
    char png[64];
    snprintf(png, sizeof png, "%s/f.png", path);
    ASSERT_OK(erg_plot_frontier(&s, 1, NULL, png, &err));
    ASSERT_MSG(mapped("libcairo"), "a picture did not load cairo");
    tap_rm_tree(path);
}

TAP_MAIN(TEST_ENTRY(loads_and_resolves_every_function),
         TEST_ENTRY(a_missing_library_is_named_with_who_needs_it),
         TEST_ENTRY(a_missing_function_is_named), TEST_ENTRY(threads_racing_to_load_all_get_it),
         TEST_ENTRY(curl_and_cairo_are_mapped_only_when_used))
