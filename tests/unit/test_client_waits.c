/* test_client_waits.c: the run-time client's receive waits (EnvPipe's measurement): a wait
 * measured around a receive is charged to the next instruction begun, per step. */
#include "tap.h"

#include "ergon/client.h"
#include "ergon/gpu.h"

#include <time.h>

TEST(client_charges_receive_waits_to_the_next_instruction)
{
    erg_gpu *g = NULL;
    erg_client *c = NULL;
    erg_error err;
    ASSERT_OK(erg_gpu_open("sim:a100:gpt3-xl:2", &g, &err));
    ASSERT_OK(erg_client_new(g, 0, 1, NULL,
                             ERG_CLIENT_NO_SIGNALS | ERG_CLIENT_NO_WATCHDOG | ERG_CLIENT_NO_ENERGY,
                             &c, &err));
    size_t n = 99;
    double w[8];
    ASSERT_OK(erg_client_step_waits(c, ERG_FORWARD, w, 8, &n));
    ASSERT_EQ_INT((int)n, 0);
    ASSERT_EQ_INT(erg_client_recv_end(c, NULL), ERG_ESTATE);
    ASSERT_EQ_INT(erg_client_add_wait(c, -1), ERG_EINVAL);
    ASSERT_EQ_INT(erg_client_add_wait(c, NAN), ERG_EINVAL);
    ASSERT_OK(erg_client_step_begin(c));
    /* F0: no receive; F1 after a 20 ms receive; B0 after two receives (10 + 5 ms) and an
     * added (CUDA-event) wait of 1 ms; B1 none */
    ASSERT_OK(erg_client_instruction_begin(c, ERG_FORWARD, 0));
    ASSERT_OK(erg_client_instruction_end(c, ERG_FORWARD, 0));
    ASSERT_OK(erg_client_recv_begin(c));
    ASSERT_EQ_INT(erg_client_recv_begin(c), ERG_ESTATE);
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    double got = 0;
    ASSERT_OK(erg_client_recv_end(c, &got));
    ASSERT_MSG(got >= 0.019 && got < 0.5, "measured %g s for a 20 ms receive", got);
    ASSERT_OK(erg_client_instruction_begin(c, ERG_FORWARD, 1));
    ASSERT_OK(erg_client_instruction_end(c, ERG_FORWARD, 1));
    ASSERT_OK(erg_client_add_wait(c, 0.001));
    ts.tv_nsec = 10000000;
    ASSERT_OK(erg_client_recv_begin(c));
    nanosleep(&ts, NULL);
    ASSERT_OK(erg_client_recv_end(c, NULL));
    ts.tv_nsec = 5000000;
    ASSERT_OK(erg_client_recv_begin(c));
    nanosleep(&ts, NULL);
    ASSERT_OK(erg_client_recv_end(c, NULL));
    ASSERT_OK(erg_client_instruction_begin(c, ERG_BACKWARD, 0));
    ASSERT_OK(erg_client_instruction_end(c, ERG_BACKWARD, 0));
    ASSERT_OK(erg_client_instruction_begin(c, ERG_BACKWARD, 1));
    ASSERT_OK(erg_client_instruction_end(c, ERG_BACKWARD, 1));
    /* not visible before the step ends */
    ASSERT_OK(erg_client_step_waits(c, ERG_FORWARD, w, 8, &n));
    ASSERT_EQ_INT((int)n, 0);
    ASSERT_OK(erg_client_step_end(c, NULL, NULL));
    ASSERT_OK(erg_client_step_waits(c, ERG_FORWARD, w, 8, &n));
    ASSERT_EQ_INT((int)n, 2);
    ASSERT_NEAR(w[0], 0, 0);
    ASSERT_NEAR(w[1], got, 1e-12);
    ASSERT_OK(erg_client_step_waits(c, ERG_BACKWARD, w, 1, &n));
    ASSERT_EQ_INT((int)n, 2); /* the count, although only one fits */
    ASSERT_MSG(w[0] >= 0.016 && w[0] < 0.5, "B0 waited %g s", w[0]);
    ASSERT_OK(erg_client_step_waits(c, ERG_BACKWARD, w, 8, &n));
    ASSERT_NEAR(w[1], 0, 0);
    /* the next step starts afresh */
    ASSERT_OK(erg_client_step_begin(c));
    ASSERT_OK(erg_client_instruction_begin(c, ERG_FORWARD, 0));
    ASSERT_OK(erg_client_instruction_end(c, ERG_FORWARD, 0));
    ASSERT_OK(erg_client_step_end(c, NULL, NULL));
    ASSERT_OK(erg_client_step_waits(c, ERG_FORWARD, w, 8, &n));
    ASSERT_EQ_INT((int)n, 1);
    ASSERT_OK(erg_client_step_waits(c, ERG_BACKWARD, w, 8, &n));
    ASSERT_EQ_INT((int)n, 0);
    ASSERT_OK(erg_client_close(c, &err));
    erg_gpu_close(g);
}

TAP_MAIN(TEST_ENTRY(client_charges_receive_waits_to_the_next_instruction))
