/* test_profile.c: the stage-profile CSV reader: good input, and every error
 * message for bad input (file:line: what is wrong). */
#include "ergon/profile.h"
#include "tap.h"

#include <stdlib.h>
#include <unistd.h>

#include <stdlib.h>

static erg_status parse(const char *text, erg_profile **p, erg_error *err)
{
    return erg_profile_parse_csv(text, strlen(text), "p.csv", p, err);
}

#define HDR "stage,instruction,frequency,time,energy\n"

static void expect_error(const char *text, const char *msg)
{
    erg_profile *p = (erg_profile *)1;
    erg_error err;
    ASSERT_EQ_INT(parse(text, &p, &err), ERG_EPARSE);
    ASSERT(p == NULL);
    ASSERT_CONTAINS(err.msg, msg);
}

TEST(reads_a_good_profile)
{
    const char *t = HDR "0,forward,1410,0.1,30\n0,backward,1410,0.2,60\n"
                        "0,load,1410,0.01,1\n0,forward,1395,0.11,29\n"
                        "1,forward,1410,0.1,30\n1,backward,1410,0.2,61\n";
    erg_profile *p;
    erg_error err;
    ASSERT_OK(parse(t, &p, &err));
    ASSERT_EQ_INT(erg_profile_num_stages(p), 2);
    ASSERT_EQ_INT(erg_profile_num_points(p, 0, ERG_FORWARD), 2);
    erg_profile_point pt;
    ASSERT_OK(erg_profile_lookup(p, 1, ERG_BACKWARD, 1410, &pt, &err));
    ASSERT_NEAR(pt.energy_j, 61, 0);
    ASSERT_EQ_INT(erg_profile_lookup(p, 1, ERG_BACKWARD, 1395, &pt, &err), ERG_ENOTFOUND);
    ASSERT_CONTAINS(err.msg, "1395 MHz");
    erg_profile_free(p);
}

TEST(columns_in_any_order_with_extras)
{
    const char *t = "energy,time,frequency,note,instruction,stage\n30,0.1,1410,x,forward,0\n"
                    "60,0.2,1410,y,backward,0\n";
    erg_profile *p;
    erg_error err;
    ASSERT_OK(parse(t, &p, &err));
    erg_profile_free(p);
}

TEST(error_messages)
{
    expect_error("", "p.csv: empty file");
    expect_error("\n\n", "p.csv: empty file");
    expect_error("stage,instruction,frequency,time\n0,forward,1,1\n",
                 "p.csv:1: missing column 'energy'");
    expect_error(HDR "0,forward,1410,abc,30\n", "p.csv:2: time 'abc' is not a number");
    expect_error(HDR "0,forward,1410,0.1,\n", "p.csv:2: energy '' is not a number");
    expect_error(HDR "x,forward,1410,0.1,30\n", "p.csv:2: stage 'x' is not an integer");
    expect_error(HDR "0,forward,14.5,0.1,30\n", "p.csv:2: frequency '14.5' is not an integer");
    expect_error(HDR "0,forward,1410,-0.1,30\n",
                 "p.csv:2: time -0.1 s is below the minimum of 1e-09 s");
    expect_error(HDR "0,forward,1410,0.1,-3\n", "p.csv:2: energy -3 J is below the minimum of 0 J");
    expect_error(HDR "0,forward,1410,0.1,30,7\n", "p.csv:2: expected 5 fields, found 6");
    expect_error(HDR "0,forward,1410,0.1,30\n0,backward,1410,0.2,60\n0,forward,1410,0.1,31\n",
                 "p.csv:4: duplicate row: stage 0 forward at 1410 MHz already on line 2");
    expect_error(HDR "0,forward,1410,0.1,30\n0,backward,1410,0.2,60\n2,forward,1410,0.1,30\n"
                     "2,backward,1410,0.2,60\n",
                 "stage 1 is missing");
    expect_error(HDR "0,forward,1410,0.1,30\n", "stage 0 has no backward rows");
    expect_error(HDR "0,backward,1410,0.1,30\n", "stage 0 has no forward rows");
    expect_error(HDR "0,load,1410,0.1,30\n", "no forward or backward rows");
    expect_error(HDR "99999,forward,1410,0.1,30\n", "p.csv:2: stage 99999 out of range");
    expect_error(HDR "0,forward,1410,nan,30\n", "time 'nan' is not a number");
    expect_error(HDR "0,forward,1410,1e999,30\n", "time '1e999' is not a number");
}

/* Issue 15 item 14: "0x10" was read as 16 s (strtod reads hexadecimal). */
TEST(rejects_hexadecimal_values)
{
    expect_error(HDR "0,forward,1410,0x10,30\n", "p.csv:2: time '0x10' is not a number");
    expect_error(HDR "0,forward,1410,0.1,0X1E\n", "p.csv:2: energy '0X1E' is not a number");
    expect_error(HDR "0,forward,0x582,0.1,30\n", "p.csv:2: frequency '0x582' is not an integer");
    expect_error(HDR "0x0,forward,1410,0.1,30\n", "p.csv:2: stage '0x0' is not an integer");
}

/* Issue 15 item 14: values outside physical ranges are refused, naming the bound
 * crossed (1e308 s used to pass, then overflowed a float->long in envpipe.c). */
TEST(rejects_values_outside_physical_bounds_naming_the_bound)
{
    expect_error(HDR "0,forward,1410,1e308,30\n",
                 "p.csv:2: time 1e308 s is above the maximum of 86400 s");
    expect_error(HDR "0,forward,1410,0.1,1e308\n",
                 "p.csv:2: energy 1e308 J is above the maximum of 1e+09 J");
    expect_error(HDR "0,forward,1410,1e-12,30\n",
                 "p.csv:2: time 1e-12 s is below the minimum of 1e-09 s");
    expect_error(HDR "0,forward,1410,0,30\n", "p.csv:2: time 0 s is below the minimum");
    expect_error(HDR "0,forward,0,0.1,30\n", "p.csv:2: clock 0 MHz is below the minimum of 1 MHz");
    expect_error(HDR "0,forward,99999999,0.1,30\n",
                 "p.csv:2: clock 99999999 MHz is above the maximum of 10000 MHz");
    expect_error(HDR "0,forward,1e300,0.1,30\n",
                 "p.csv:2: clock 1e300 MHz is above the maximum of 10000 MHz");
    expect_error(HDR "0,forward,1410,0.001,1000\n",
                 "p.csv:2: energy 1000 J in 0.001 s is an average power of 1e+06 W, above the "
                 "maximum of 100000 W");
    /* the API refuses the same points */
    erg_profile *p;
    erg_error err;
    ASSERT_OK(erg_profile_new(&p, &err));
    erg_profile_point big = {1410, 1e308, 1};
    ASSERT_EQ_INT(erg_profile_add(p, 0, ERG_FORWARD, &big, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "time 1e+308 s is above the maximum of 86400 s");
    erg_profile_point fast = {20000, 0.1, 1};
    ASSERT_EQ_INT(erg_profile_add(p, 0, ERG_FORWARD, &fast, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "clock 20000 MHz is above the maximum of 10000 MHz");
    erg_profile_free(p);
}

/* Issue 15 item 14: 1e-320 (a subnormal) was "not a number"; it is a number,
 * below the time bound, and a harmless energy. */
TEST(subnormal_values_are_numbers_checked_against_the_bounds)
{
    expect_error(HDR "0,forward,1410,1e-320,30\n",
                 "p.csv:2: time 1e-320 s is below the minimum of 1e-09 s");
    expect_error(HDR "0,forward,1410,1e-400,30\n",
                 "p.csv:2: time 1e-400 s is below the minimum of 1e-09 s");
    erg_profile *p;
    erg_error err;
    const char *t = HDR "0,forward,1410,0.1,1e-320\n0,backward,1410,0.2,60\n";
    ASSERT_OK(parse(t, &p, &err));
    erg_profile_point pt;
    ASSERT_OK(erg_profile_lookup(p, 0, ERG_FORWARD, 1410, &pt, &err));
    ASSERT(pt.energy_j >= 0 && pt.energy_j < 1e-300);
    erg_profile_free(p);
}

/* Issue 15 item 14: a UTF-8 byte order mark (Excel's "CSV UTF-8") gave
 * "missing column 'stage'". */
TEST(accepts_a_utf8_byte_order_mark)
{
    const char *t = "\xEF\xBB\xBF" HDR "0,forward,1410,0.1,30\n0,backward,1410,0.2,60\n";
    erg_profile *p;
    erg_error err;
    ASSERT_OK(parse(t, &p, &err));
    ASSERT_EQ_INT(erg_profile_num_stages(p), 1);
    erg_profile_free(p);
    /* only at the very start: elsewhere it is part of a field */
    expect_error(HDR "\xEF\xBB\xBF"
                     "0,forward,1410,0.1,30\n",
                 "p.csv:2: stage '\xEF\xBB\xBF"
                 "0' is not an integer");
}

TEST(missing_file)
{
    erg_profile *p;
    erg_error err;
    ASSERT_EQ_INT(erg_profile_read_csv("/nonexistent/x.csv", &p, &err), ERG_ENOTFOUND);
    ASSERT_CONTAINS(err.msg, "/nonexistent/x.csv: cannot open");
}

TEST(write_and_read_back)
{
    erg_profile *p;
    erg_error err;
    ASSERT_OK(erg_profile_new(&p, &err));
    for (int s = 0; s < 3; s++)
        for (int f = 1410; f >= 1380; f -= 15) {
            erg_profile_point a = {f, 0.1 + 0.001 * s + (1410 - f) * 1e-4, 30.0 / 3};
            erg_profile_point b = {f, 0.2 + (1410 - f) * 1e-4, 61.25};
            ASSERT_OK(erg_profile_add(p, s, ERG_FORWARD, &a, &err));
            ASSERT_OK(erg_profile_add(p, s, ERG_BACKWARD, &b, &err));
        }
    erg_profile_point dup = {1410, 1, 1};
    ASSERT_EQ_INT(erg_profile_add(p, 0, ERG_FORWARD, &dup, &err), ERG_EINVAL);
    char path[] = "/tmp/ergon_prof_XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    close(fd);
    ASSERT_OK(erg_profile_write_csv(p, path, &err));
    erg_profile *q;
    ASSERT_OK(erg_profile_read_csv(path, &q, &err));
    ASSERT_EQ_INT(erg_profile_num_stages(q), 3);
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < 2; k++) {
            size_t n = erg_profile_num_points(p, s, (erg_instr_kind)k);
            ASSERT_EQ_INT(erg_profile_num_points(q, s, (erg_instr_kind)k), n);
            const erg_profile_point *a = erg_profile_points(p, s, (erg_instr_kind)k);
            const erg_profile_point *b = erg_profile_points(q, s, (erg_instr_kind)k);
            for (size_t i = 0; i < n; i++) {
                ASSERT_EQ_INT(a[i].freq_mhz, b[i].freq_mhz);
                ASSERT(a[i].time_s == b[i].time_s); /* repr round-trips exactly */
                ASSERT(a[i].energy_j == b[i].energy_j);
            }
        }
    unlink(path);
    erg_profile_free(p);
    erg_profile_free(q);
}

TEST(blocking_power_table)
{
    double w;
    erg_error err;
    ASSERT_OK(erg_blocking_power_w("A40", &w, &err));
    ASSERT_NEAR(w, 70.38, 0);
    ASSERT_OK(erg_blocking_power_w("a100", &w, &err));
    ASSERT_NEAR(w, 83.64, 0);
    ASSERT_EQ_INT(erg_blocking_power_w("T4", &w, &err), ERG_ENOTFOUND);
    ASSERT_CONTAINS(err.msg, "--blocking-power");
}

TEST(profile_reads_and_writes_backward_input_and_weight_rows)
{
    const char *csv = "stage,instruction,frequency,time,energy\n"
                      "0,forward,1410,0.1,10\n0,backward,1410,0.2,20\n"
                      "0,backward_input,1410,0.12,11\n0,backward_weight,1410,0.09,8\n";
    erg_profile *p;
    erg_error err;
    ASSERT_OK(erg_profile_parse_csv(csv, strlen(csv), "iw.csv", &p, &err));
    erg_profile_point pt;
    ASSERT_OK(erg_profile_lookup(p, 0, ERG_BACKWARD_INPUT, 1410, &pt, &err));
    ASSERT_NEAR(pt.time_s, 0.12, 0);
    ASSERT_OK(erg_profile_lookup(p, 0, ERG_BACKWARD_WEIGHT, 1410, &pt, &err));
    ASSERT_NEAR(pt.energy_j, 8, 0);
    char path[] = "/tmp/ergon_iw_XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    close(fd);
    ASSERT_OK(erg_profile_write_csv(p, path, &err));
    erg_profile *q;
    ASSERT_OK(erg_profile_read_csv(path, &q, &err));
    ASSERT_EQ_INT((int)erg_profile_num_points(q, 0, ERG_BACKWARD_WEIGHT), 1);
    unlink(path);
    erg_profile_free(q);
    erg_profile_free(p);
    /* I without W is rejected */
    const char *bad = "stage,instruction,frequency,time,energy\n"
                      "0,forward,1410,0.1,10\n0,backward,1410,0.2,20\n"
                      "0,backward_input,1410,0.12,11\n";
    ASSERT_EQ_INT(erg_profile_parse_csv(bad, strlen(bad), "iw.csv", &p, &err), ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "stage 0 has backward_input rows but no backward_weight rows");
}

/* A name in /dev is written in place: here /dev/fd/N of a regular file, which is what
 * /dev/stdout is when the shell redirects it. A temp file there cannot be made (/dev/fd), or its
 * rename would replace the system's name (/dev/stdout, for every later process). */
TEST(writes_to_a_name_in_dev_in_place)
{
    erg_profile *p;
    erg_error err;
    ASSERT_OK(erg_profile_new(&p, &err));
    erg_profile_point a = {1410, 0.5, 100}, b = {1410, 1, 210};
    ASSERT_OK(erg_profile_add(p, 0, ERG_FORWARD, &a, &err));
    ASSERT_OK(erg_profile_add(p, 0, ERG_BACKWARD, &b, &err));
    char path[] = "/tmp/ergon_prof_XXXXXX", dev[64];
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    snprintf(dev, sizeof dev, "/dev/fd/%d", fd);
    ASSERT_OK(erg_profile_write_csv(p, dev, &err));
    close(fd);
    erg_profile *q;
    ASSERT_OK(erg_profile_read_csv(path, &q, &err));
    ASSERT_EQ_INT(erg_profile_num_points(q, 0, ERG_FORWARD), 1);
    ASSERT_NEAR(erg_profile_points(q, 0, ERG_FORWARD)[0].energy_j, 100, 0);
    ASSERT_NEAR(erg_profile_points(q, 0, ERG_BACKWARD)[0].energy_j, 210, 0);
    erg_profile_free(q);
    erg_profile_free(p);
    unlink(path);
}

TAP_MAIN(TEST_ENTRY(profile_reads_and_writes_backward_input_and_weight_rows),
         TEST_ENTRY(reads_a_good_profile), TEST_ENTRY(columns_in_any_order_with_extras),
         TEST_ENTRY(error_messages), TEST_ENTRY(missing_file), TEST_ENTRY(write_and_read_back),
         TEST_ENTRY(blocking_power_table), TEST_ENTRY(rejects_hexadecimal_values),
         TEST_ENTRY(rejects_values_outside_physical_bounds_naming_the_bound),
         TEST_ENTRY(subnormal_values_are_numbers_checked_against_the_bounds),
         TEST_ENTRY(accepts_a_utf8_byte_order_mark), TEST_ENTRY(writes_to_a_name_in_dev_in_place))
