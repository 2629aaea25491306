/* test_profile_energy_source.c: the optional energy_source column of the stage profile CSV. */
#include "ergon/profile.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *rows = "0,forward,1410,0.5,100\n0,backward,1410,1.0,200\n";

static erg_profile *parse(const char *text, erg_error *err, erg_status *st)
{
    erg_profile *p = NULL;
    *st = erg_profile_parse_csv(text, strlen(text), "p.csv", &p, err);
    return p;
}

TEST(files_without_the_column_are_read_as_before)
{
    erg_error err;
    erg_status st;
    char text[256];
    snprintf(text, sizeof text, "stage,instruction,frequency,time,energy\n%s", rows);
    erg_profile *p = parse(text, &err, &st);
    ASSERT_OK(st);
    ASSERT_STR_EQ(erg_profile_energy_source(p), "");
    /* Written back without the column. */
    char path[] = "/tmp/ergon-test-es-XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    close(fd);
    ASSERT_OK(erg_profile_write_csv(p, path, &err));
    FILE *f = fopen(path, "r");
    char line[128] = "";
    ASSERT(f && fgets(line, sizeof line, f));
    fclose(f);
    ASSERT_STR_EQ(line, "stage,instruction,frequency,time,energy\n");
    erg_profile_free(p);
    unlink(path);
}

TEST(the_source_is_read_written_and_read_back)
{
    erg_error err;
    erg_status st;
    const char *text = "energy_source,stage,instruction,frequency,time,energy\n"
                       "integrated,0,forward,1410,0.5,100\nintegrated,0,backward,1410,1.0,200\n";
    erg_profile *p = parse(text, &err, &st);
    ASSERT_OK(st);
    ASSERT_STR_EQ(erg_profile_energy_source(p), "integrated");
    char path[] = "/tmp/ergon-test-es-XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    close(fd);
    ASSERT_OK(erg_profile_write_csv(p, path, &err));
    erg_profile *q = NULL;
    ASSERT_OK(erg_profile_read_csv(path, &q, &err));
    ASSERT_STR_EQ(erg_profile_energy_source(q), "integrated");
    FILE *f = fopen(path, "r");
    char line[128] = "";
    ASSERT(f && fgets(line, sizeof line, f) && fgets(line, sizeof line, f));
    fclose(f);
    ASSERT_STR_EQ(line, "0,forward,1410,0.5,100.0,integrated\n");
    erg_profile_free(q);
    erg_profile_free(p);
    unlink(path);
}

TEST(rows_that_differ_are_mixed_and_bad_words_are_refused)
{
    erg_error err;
    erg_status st;
    erg_profile *p = parse("stage,instruction,frequency,time,energy,energy_source\n"
                           "0,forward,1410,0.5,100,counter\n0,backward,1410,1.0,200,integrated\n",
                           &err, &st);
    ASSERT_OK(st);
    ASSERT_STR_EQ(erg_profile_energy_source(p), "mixed");
    ASSERT_EQ_INT(erg_profile_set_energy_source(p, "guess", &err), ERG_EINVAL);
    ASSERT_OK(erg_profile_set_energy_source(p, "model", &err));
    ASSERT_STR_EQ(erg_profile_energy_source(p), "model");
    erg_profile_free(p);
    p = parse("stage,instruction,frequency,time,energy,energy_source\n"
              "0,forward,1410,0.5,100,counter\n0,backward,1410,1.0,200,nvml\n",
              &err, &st);
    ASSERT_EQ_INT(st, ERG_EPARSE);
    ASSERT(p == NULL);
    ASSERT_CONTAINS(err.msg, "p.csv:3: energy_source 'nvml' is not counter, integrated");
}

TAP_MAIN(TEST_ENTRY(files_without_the_column_are_read_as_before),
         TEST_ENTRY(the_source_is_read_written_and_read_back),
         TEST_ENTRY(rows_that_differ_are_mixed_and_bad_words_are_refused))
