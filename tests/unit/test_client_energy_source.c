/* test_client_energy_source.c: where energy came from, through the client's time-energy logs
 * (their energy_source column), `ergon profile logs` and the step energies a server result
 * reports (erg_client_energy_source). */
#include "client/client_internal.h"
#include "ergon/client.h"
#include "ergon/gpu.h"
#include "ergon/profile.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *instr = "instruction,microbatch,start,end,freq_start,freq_end\n"
                           "forward,0,1.0,1.5,1410,1410\n"
                           "backward,0,1.5,2.5,1410,1410\n";

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* A log directory with one rank: the instructions above and `energy` as time-energy-0.csv. */
static erg_status profile_of(const char *energy, erg_profile **out, erg_error *err)
{
    char dir[] = "/tmp/ergon-test-ces-XXXXXX";
    if (!mkdtemp(dir))
        return ERG_EIO;
    char ip[128], ep[128];
    snprintf(ip, sizeof ip, "%s/instructions-0.csv", dir);
    snprintf(ep, sizeof ep, "%s/time-energy-0.csv", dir);
    write_text(ip, instr);
    write_text(ep, energy);
    erg_status st = erg_profile_from_logs(dir, 0, out, err);
    unlink(ip);
    unlink(ep);
    rmdir(dir);
    return st;
}

TEST(old_logs_without_the_column_make_a_profile_of_unknown_source)
{
    erg_error err;
    erg_profile *p = NULL;
    ASSERT_OK(profile_of("time,energy\n0.5,10.0\n3.0,500.0\n", &p, &err));
    ASSERT_STR_EQ(erg_profile_energy_source(p), "");
    erg_profile_free(p);
}

TEST(the_samples_source_reaches_the_profile)
{
    erg_error err;
    erg_profile *p = NULL;
    /* The first sample is the counter's (the baseline, before the counter stalled); every
     * increase after it was integrated: an integrated profile. */
    ASSERT_OK(profile_of("time,energy,energy_source\n0.5,10.0,counter\n2.0,300.0,integrated\n"
                         "3.0,500.0,integrated\n",
                         &p, &err));
    ASSERT_STR_EQ(erg_profile_energy_source(p), "integrated");
    erg_profile_free(p);
    /* The forward's increase came from the counter, the backward's from integration. */
    ASSERT_OK(profile_of("time,energy,energy_source\n0.5,10.0,counter\n1.5,200.0,counter\n"
                         "3.0,500.0,integrated\n",
                         &p, &err));
    ASSERT_STR_EQ(erg_profile_energy_source(p), "mixed");
    erg_profile_free(p);
    ASSERT_OK(
        profile_of("time,energy,energy_source\n0.5,10.0,counter\n3.0,500.0,counter\n", &p, &err));
    ASSERT_STR_EQ(erg_profile_energy_source(p), "counter");
    erg_profile_free(p);
}

TEST(a_bad_source_is_refused_naming_file_line_and_value)
{
    erg_error err;
    erg_profile *p = NULL;
    ASSERT_EQ_INT(
        profile_of("time,energy,energy_source\n0.5,10.0,counter\n3.0,500.0,nvml\n", &p, &err),
        ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "time-energy-0.csv:3: energy_source 'nvml' is not counter, "
                             "integrated or model");
    /* A row short of the column. */
    ASSERT_EQ_INT(profile_of("time,energy,energy_source\n0.5,10.0\n3.0,500.0,counter\n", &p, &err),
                  ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "time-energy-0.csv:2: expected two numbers time,energy and an "
                             "energy_source");
}

TEST(energy_between_names_the_samples_it_used)
{
    erg__energy_sample s[] = {{0, 0, ERG_ENERGY_COUNTER},
                              {1, 10, ERG_ENERGY_COUNTER},
                              {2, 20, ERG_ENERGY_INTEGRATED},
                              {3, 30, ERG__SOURCE_UNKNOWN}};
    erg_error err;
    double e;
    unsigned set = 0;
    ASSERT_OK(erg__energy_between(s, 4, 0.2, 0.8, &e, &set));
    ASSERT_NEAR(e, 6.0, 1e-9);
    ASSERT_STR_EQ(erg__source_set_word(set), "counter");
    set = 0; /* [1, 2]: only sample 2's increase */
    ASSERT_OK(erg__energy_between(s, 4, 1.0, 2.0, &e, &set));
    ASSERT_STR_EQ(erg__source_set_word(set), "integrated");
    set = 0;
    ASSERT_OK(erg__energy_between(s, 4, 1.5, 2.5, &e, &set));
    ASSERT_STR_EQ(erg__source_set_word(set), "mixed"); /* integrated + unknown */
    ASSERT_STR_EQ(erg__source_set_word(0), "");
    ASSERT_STR_EQ(erg__source_set_word(1), "");
    ASSERT_STR_EQ(erg__source_set_word(erg__source_bit(ERG_ENERGY_MODEL)), "model");
}

/* One step of a forward and a backward on the simulated GPU (its model reads "model"). */
static void sim_step(erg_client *c, erg_gpu *g)
{
    erg_client_step_begin(c);
    for (int k = 0; k < 2; k++) {
        erg_client_instruction_begin(c, (erg_instr_kind)k, 0);
        erg_gpu_sim_set_activity(g, 0, true, (erg_instr_kind)k, NULL, NULL);
        usleep(20000);
        erg_gpu_sim_set_activity(g, 0, false, ERG_FORWARD, NULL, NULL);
        erg_client_instruction_end(c, (erg_instr_kind)k, 0);
    }
    erg_client_step_end(c, NULL, NULL);
}

TEST(what_the_client_writes_it_reads_back)
{
    erg_error err;
    char dir[] = "/tmp/ergon-test-ces-XXXXXX";
    ASSERT(mkdtemp(dir));
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open("sim:a100:gpt3-xl:1", &g, &err));
    erg_client *c = NULL;
    ASSERT_OK(erg_client_new(g, 0, 0, dir, ERG_CLIENT_NO_SIGNALS, &c, &err));
    ASSERT_STR_EQ(erg_client_energy_source(c, false), ""); /* no step yet */
    ASSERT_OK(erg_client_set_uniform_clock(c, 1410, &err));
    ASSERT_OK(erg_client_sync(c, 10.0, &err));
    for (int i = 0; i < 3; i++)
        sim_step(c, g);
    ASSERT_STR_EQ(erg_client_energy_source(c, true), "model");
    ASSERT_STR_EQ(erg_client_energy_source(c, false), ""); /* reset */
    ASSERT_OK(erg_client_close(c, &err));
    char ep[128], line[128] = "";
    snprintf(ep, sizeof ep, "%s/time-energy-0.csv", dir);
    FILE *f = fopen(ep, "r");
    ASSERT(f && fgets(line, sizeof line, f) && fgets(line, sizeof line, f));
    fclose(f);
    ASSERT_CONTAINS(line, ",model\n");
    erg_profile *p = NULL;
    ASSERT_OK(erg_profile_from_logs(dir, 0, &p, &err));
    ASSERT_STR_EQ(erg_profile_energy_source(p), "model");
    erg_profile_free(p);
    erg_gpu_close(g);
    char ip[128];
    snprintf(ip, sizeof ip, "%s/instructions-0.csv", dir);
    unlink(ip);
    unlink(ep);
    rmdir(dir);
}

TAP_MAIN(TEST_ENTRY(old_logs_without_the_column_make_a_profile_of_unknown_source),
         TEST_ENTRY(the_samples_source_reaches_the_profile),
         TEST_ENTRY(a_bad_source_is_refused_naming_file_line_and_value),
         TEST_ENTRY(energy_between_names_the_samples_it_used),
         TEST_ENTRY(what_the_client_writes_it_reads_back))
