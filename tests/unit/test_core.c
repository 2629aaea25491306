/* test_core.c: errors, Python-compatible number formatting, CSV tokenizer. */
#include "core/internal.h"
#include "tap.h"

TEST(floordiv_matches_python)
{
    ASSERT_NEAR(erg__floordiv_py(1.0, 0.1), 9.0, 0);
    ASSERT_NEAR(erg__floordiv_py(10000.0, 1e-6), 10000000000.0, 0);
    ASSERT_NEAR(erg__floordiv_py(-1.0, 0.3), -4.0, 0);
    ASSERT_NEAR(erg__floordiv_py(0.11248032760620108, 0.001), 112.0, 0);
}

TEST(fmt_double_like_python_repr)
{
    char b[40];
    ASSERT_STR_EQ(erg__fmt_double_py(0.1, b, sizeof b), "0.1");
    ASSERT_STR_EQ(erg__fmt_double_py(3.456, b, sizeof b), "3.456");
    ASSERT_STR_EQ(erg__fmt_double_py(87267 * 0.0001, b, sizeof b), "8.726700000000001");
    ASSERT_STR_EQ(erg__fmt_double_py(1e-7, b, sizeof b), "1e-07");
    ASSERT_STR_EQ(erg__fmt_double_py(0.0001, b, sizeof b), "0.0001");
    ASSERT_STR_EQ(erg__fmt_double_py(10000.0, b, sizeof b), "10000.0");
    ASSERT_STR_EQ(erg__fmt_double_py(1e16, b, sizeof b), "1e+16");
    ASSERT_STR_EQ(erg__fmt_double_py(1234567890123456.0, b, sizeof b), "1234567890123456.0");
    ASSERT_STR_EQ(erg__fmt_double_py(-2.5, b, sizeof b), "-2.5");
    ASSERT_STR_EQ(erg__fmt_double_py(5736.362622327515, b, sizeof b), "5736.362622327515");
    ASSERT_STR_EQ(erg__fmt_double_py(0.0, b, sizeof b), "0.0");
}

TEST(csv_tokenizer_tracks_lines)
{
    const char *t = "a,b, c\n\n1,\"x,y\",3\r\n";
    erg__csv c;
    erg__csv_init(&c, t, strlen(t));
    ASSERT_EQ_INT(erg__csv_next(&c), 1);
    ASSERT_EQ_INT(c.nfields, 3);
    ASSERT_STR_EQ(c.fields[2], "c");
    ASSERT_EQ_INT(erg__csv_next(&c), 1);
    ASSERT_EQ_INT(c.line, 3);
    ASSERT_STR_EQ(c.fields[1], "x,y");
    ASSERT_STR_EQ(c.fields[2], "3");
    ASSERT_EQ_INT(erg__csv_next(&c), 0);
    erg__csv_free(&c);
}

TEST(error_set_and_names)
{
    erg_error err;
    ASSERT_EQ_INT(erg_error_set(&err, ERG_EPARSE, "f.csv:%d: bad", 3), ERG_EPARSE);
    ASSERT_STR_EQ(err.msg, "f.csv:3: bad");
    ASSERT_STR_EQ(erg_status_name(ERG_EPARSE), "EPARSE");
    ASSERT_STR_EQ(erg_strerror(ERG_OK), "success");
}

TEST(strict_number_parsing)
{
    double d;
    long l;
    ASSERT(erg__parse_double("1.5", &d) && d == 1.5);
    ASSERT(!erg__parse_double("1.5x", &d));
    ASSERT(!erg__parse_double("nan", &d));
    ASSERT(!erg__parse_double("", &d));
    ASSERT(erg__parse_long("1740", &l) && l == 1740);
    ASSERT(!erg__parse_long("17.5", &l));
}

TEST(allocation_failure_is_reported)
{
    erg__buf b = {0};
    erg__alloc_fail_after(1);
    ASSERT_EQ_INT(erg__buf_append(&b, "abc", 3), ERG_ENOMEM);
    ASSERT_EQ_INT(erg__buf_append(&b, "abc", 3), ERG_OK);
    erg__buf_free(&b);
}

TAP_MAIN(TEST_ENTRY(floordiv_matches_python), TEST_ENTRY(fmt_double_like_python_repr),
         TEST_ENTRY(csv_tokenizer_tracks_lines), TEST_ENTRY(error_set_and_names),
         TEST_ENTRY(strict_number_parsing), TEST_ENTRY(allocation_failure_is_reported))
