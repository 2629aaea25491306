/* test_server_handlers.c: bad input through the request handlers (no sockets): 4xx with a
 * message, allocation failures answered, the job limit, scheduler errors reaching the ranks. */
#include "server_test_util.h"

TEST(bad_input_gets_4xx_with_message)
{
    erg_server *srv = mem_server("AllMaxFrequency", "{\"num_iters\":1}");
    char *resp;
    /* malformed JSON, wrong types, missing fields, bad world size */
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, "{\"job_id\": ", &resp), 422);
    ASSERT_CONTAINS(resp, "malformed JSON");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, "[1,2]", &resp), 422);
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", "/v1/jobs", NULL, "{\"pp_degree\":\"2\"}", &resp), 400);
    ASSERT_CONTAINS(resp, "pp_degree must be an integer");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", "/v1/jobs", NULL,
                       "{\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":3,"
                       "\"framework\":\"f\",\"model_name\":\"m\",\"partition_method\":\"p\","
                       "\"microbatch_size\":1,\"num_microbatches\":1}",
                       &resp),
                  400);
    ASSERT_CONTAINS(resp, "world_size 3");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", "/v1/jobs", NULL,
                       "{\"pp_degree\":1,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":1,"
                       "\"framework\":\"../etc\",\"model_name\":\"m/x\",\"partition_method\":\"p\","
                       "\"microbatch_size\":1,\"num_microbatches\":1}",
                       &resp),
                  400);
    ASSERT_CONTAINS(resp, "without '/'");
    erg_free(resp);
    /* deep nesting */
    char deep[400];
    memset(deep, '[', 300);
    deep[300] = 0;
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, deep, &resp), 422);
    ASSERT_CONTAINS(resp, "nested");
    erg_free(resp);
    /* unknown job, unknown endpoint, wrong method */
    ASSERT_EQ_INT(call(srv, "GET", "/schedule/nope", "rank=0", NULL, &resp), 404);
    ASSERT_CONTAINS(resp, "unknown job");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "GET", "/nothing", NULL, NULL, NULL), 404);
    ASSERT_EQ_INT(call(srv, "GET", "/register_job", NULL, NULL, NULL), 405);
    ASSERT_EQ_INT(call(srv, "GET", "/v1/jobs/x/results", NULL, NULL, NULL), 405);

    char *id = reg_job(srv);
    const char *ps = "[\"forward\",\"backward\"]";
    /* rank out of range, bad instruction, duplicate power state */
    char body[1024];
    snprintf(body, sizeof body,
             "{\"job_id\":\"%s\",\"rank\":5,\"dp_rank\":0,\"pp_rank\":0,\"tp_rank\":0,"
             "\"pipe_schedule\":[\"forward\"],\"power_state_range\":[1410]}",
             id);
    ASSERT_EQ_INT(call(srv, "POST", "/register_rank", NULL, body, &resp), 422);
    ASSERT_CONTAINS(resp, "rank = 5");
    erg_free(resp);
    ASSERT_EQ_INT(reg_rank(srv, id, 0, "[\"forward\",\"jump\"]"), 422);
    snprintf(body, sizeof body,
             "{\"job_id\":\"%s\",\"rank\":0,\"dp_rank\":0,\"pp_rank\":0,\"tp_rank\":0,"
             "\"pipe_schedule\":[\"forward\"],\"power_state_range\":[1410,1410]}",
             id);
    ASSERT_EQ_INT(call(srv, "POST", "/register_rank", NULL, body, &resp), 422);
    ASSERT_CONTAINS(resp, "twice");
    erg_free(resp);
    ASSERT_EQ_INT(reg_rank(srv, id, 0, ps), 200);
    ASSERT_EQ_INT(reg_rank(srv, id, 0, ps), 200); /* idempotent retry */
    ASSERT_EQ_INT(reg_rank(srv, id, 0, "[\"forward\"]"), 409);
    /* schedule for an unregistered rank; results before the window started */
    ASSERT_EQ_INT(call(srv, "GET", "/schedule/x", "rank=abc", NULL, NULL), 422);
    char path[512];
    snprintf(path, sizeof path, "/schedule/%s", id);
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=1", NULL, &resp), 404);
    ASSERT_CONTAINS(resp, "has not registered");
    erg_free(resp);
    ASSERT_EQ_INT(reg_rank(srv, id, 1, ps), 200);
    /* barrier pending (no wait) */
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=0", NULL, NULL), 503);
    char rpath[512];
    snprintf(rpath, sizeof rpath, "/result/%s", id);
    const char *good = "{\"rank\":0,\"iter_time\":[1.0],\"iter_energy\":[2.0],"
                       "\"time_breakdown\":{},\"energy_breakdown\":{}}";
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL, good, &resp), 409);
    ASSERT_CONTAINS(resp, "has not started");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=1", NULL, &resp), 200);
    ASSERT_CONTAINS(resp, "[1410, 1410]");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=0", NULL, NULL), 200);
    /* results of the wrong shape or types */
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL,
                       "{\"rank\":0,\"iter_time\":[1.0,2.0],\"iter_energy\":[2.0]}", &resp),
                  422);
    ASSERT_CONTAINS(resp, "iter_energy has 1");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL,
                       "{\"rank\":0,\"iter_time\":[\"x\"],\"iter_energy\":[2.0]}", NULL),
                  422);
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL,
                       "{\"rank\":0,\"iter_time\":[1],\"iter_energy\":[2],"
                       "\"time_breakdown\":{\"fly\":[[1]]}}",
                       &resp),
                  422);
    ASSERT_CONTAINS(resp, "not a pipe instruction");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL, good, NULL), 200);
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL, good, &resp), 409); /* twice */
    ASSERT_CONTAINS(resp, "already reported");
    erg_free(resp);
    ASSERT_EQ_INT(call(srv, "POST", rpath, NULL,
                       "{\"rank\":1,\"iter_time\":[1.0],\"iter_energy\":[2.0]}", NULL),
                  200);
    /* AllMax with num_iters 1: the job is over */
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=0", NULL, &resp), 500);
    ASSERT_CONTAINS(resp, "[profiling-done]");
    erg_free(resp);
    char vpath[600];
    snprintf(vpath, sizeof vpath, "/v1/jobs/%s/schedule", id);
    ASSERT_EQ_INT(call(srv, "GET", vpath, "rank=1", NULL, &resp), 200);
    ASSERT_CONTAINS(resp, "\"done\":true");
    erg_free(resp);
    /* the server still serves after all of that */
    ASSERT_EQ_INT(call(srv, "GET", "/info", NULL, NULL, NULL), 200);
    ASSERT_EQ_INT(call(srv, "GET", "/metrics", NULL, NULL, &resp), 200);
    ASSERT_CONTAINS(resp, "ergon_jobs{state=\"done\"} 1");
    erg_free(resp);
    free(id);
    erg_server_free(srv);
    CHECK_NO_LEAKS();
}

/* Every allocation of a whole job's life (register, ranks, windows,
 * results, the end) failing in turn: each request still gets an answer
 * (an error or the normal one) and nothing crashes. */
TEST(allocation_failures_are_answered)
{
    /* n = 1, 2, ...: the n-th allocation of the library (erg__malloc) fails.
     * A run is clean when every answer is the normal one and the job ends;
     * a failure may also be absorbed (a cache that is simply not filled), so
     * stop after 30 clean runs in a row: past the sequence's last
     * allocation, every run is clean. jansson's own allocations are not
     * failed: routed through the same hook, jansson 2.14's json_loadb
     * crashes on a failed allocation (seen under ASan). */
    const char *ps = "[\"forward\",\"backward\"]";
    bool clean = false;
    int clean_streak = 0;
    long n = 1;
    for (; n < 20000 && clean_streak < 30; n++) {
        erg_server *srv = mem_server("AllMaxFrequency", "{\"num_iters\":2}");
        erg__alloc_fail_after(n);
        int st, bad = 0;
        char *resp = NULL;
        const char *ct;
        erg_server_handle(srv, "POST", "/register_job", NULL, JOB2, strlen(JOB2), 0, &st, &resp,
                          &ct);
        ASSERT(resp && st >= 200 && st < 600);
        char id[512] = "";
        if (st == 200) {
            json_t *v = json_loads(resp, JSON_DECODE_ANY, NULL);
            if (json_is_string(v))
                snprintf(id, sizeof id, "%s", json_string_value(v));
            json_decref(v);
        } else {
            bad++;
        }
        erg_free(resp);
        for (int w = 0; w < 2 && id[0]; w++) {
            for (int r = 0; r < 2; r++) {
                char body[1024];
                snprintf(body, sizeof body,
                         "{\"job_id\":\"%s\",\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,"
                         "\"tp_rank\":0,\"pipe_schedule\":%s,\"power_state_range\":[1410]}",
                         id, r, r, ps);
                resp = NULL;
                erg_server_handle(srv, "POST", "/register_rank", NULL, body, strlen(body), 0, &st,
                                  &resp, &ct);
                ASSERT(resp && st >= 200 && st < 600);
                bad += st != 200;
                erg_free(resp);
            }
            for (int r = 0; r < 2; r++) {
                char path[700];
                snprintf(path, sizeof path, "/schedule/%s", id);
                resp = NULL;
                erg_server_handle(srv, "GET", path, r ? "rank=1" : "rank=0", NULL, 0, 0, &st, &resp,
                                  &ct);
                ASSERT(resp && st >= 200 && st < 600);
                bad += st != 200 && !(r == 0 && st == 503); /* rank 0 waits for rank 1 */
                erg_free(resp);
            }
            for (int r = 0; r < 2; r++) {
                char body[1024], path[700];
                snprintf(path, sizeof path, "/result/%s", id);
                snprintf(body, sizeof body,
                         "{\"rank\":%d,\"iter_time\":[1.0,2.0],\"iter_energy\":[3,4],"
                         "\"time_breakdown\":{\"forward\":[[0.1],[0.2]]}}",
                         r);
                resp = NULL;
                erg_server_handle(srv, "POST", path, NULL, body, strlen(body), 0, &st, &resp, &ct);
                ASSERT(resp && st >= 200 && st < 600);
                bad += st != 200;
                erg_free(resp);
            }
        }
        char path[700];
        snprintf(path, sizeof path, "/schedule/%s", id);
        resp = NULL;
        erg_server_handle(srv, "GET", path, "rank=0", NULL, 0, 0, &st, &resp, &ct);
        clean = !bad && id[0] && st == 500 && resp && strstr(resp, "[profiling-done]");
        clean_streak = clean ? clean_streak + 1 : 0;
        erg_free(resp);
        erg__alloc_fail_after(0);
        erg_server_free(srv);
    }
    ASSERT_MSG(clean_streak >= 30, "no clean run up to n = %ld", n);
    CHECK_NO_LEAKS();
    printf("# %ld allocation failure points exercised\n", n - 31);
}

TEST(job_limit)
{
    erg_server_opts o;
    erg_server_opts_init(&o);
    o.db_path = ":memory:";
    o.dump_data = false;
    o.max_jobs = 2;
    erg_server *srv = NULL;
    erg_error err;
    ASSERT_OK(erg_server_new(&o, &srv, &err));
    char *resp;
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, JOB2, NULL), 200);
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, JOB2, NULL), 200);
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, JOB2, &resp), 503);
    ASSERT_CONTAINS(resp, "--max-jobs");
    erg_free(resp);
    /* the two ids differ although registered in the same second */
    ASSERT_EQ_INT(call(srv, "GET", "/v1/jobs", NULL, NULL, &resp), 200);
    json_t *v = json_loads(resp, 0, NULL);
    json_t *jobs = json_object_get(v, "jobs");
    ASSERT_EQ_INT(json_array_size(jobs), 2);
    ASSERT(strcmp(json_string_value(json_object_get(json_array_get(jobs, 0), "job_id")),
                  json_string_value(json_object_get(json_array_get(jobs, 1), "job_id"))));
    json_decref(v);
    erg_free(resp);
    erg_server_free(srv);
}

TEST(scheduler_errors_reach_ranks)
{
    /* A plan whose length does not match the ranks' pipe schedules: the
     * ranks get 400 with the reason at their first schedule request. */
    const char *d = mktmp();
    char plan[512], args[700];
    snprintf(plan, sizeof plan, "%s/p.py", d);
    FILE *f = fopen(plan, "w");
    fprintf(f, "[[1410, 1410, 1200, 1200], [1410, 1410, 1200, 1200]]\n");
    fclose(f);
    snprintf(args, sizeof args, "{\"solution_path\":\"%s\",\"warmup_iters\":0}", plan);
    erg_server *srv = mem_server("PointSolution", args);
    char *id = reg_job(srv);
    ASSERT_EQ_INT(reg_rank(srv, id, 0, "[\"forward\",\"backward\"]"), 200);
    ASSERT_EQ_INT(reg_rank(srv, id, 1, "[\"forward\",\"backward\"]"), 200);
    char path[512], *resp;
    snprintf(path, sizeof path, "/schedule/%s", id);
    ASSERT_EQ_INT(call(srv, "GET", path, "rank=0", NULL, &resp), 400);
    ASSERT_CONTAINS(resp, "4 clocks");
    erg_free(resp);
    free(id);
    erg_server_free(srv);
    /* A bad solution_path is refused when the server starts. */
    erg_server_opts o;
    erg_server_opts_init(&o);
    o.db_path = ":memory:";
    o.dump_data = false;
    o.scheduler = "PointSolution";
    o.scheduler_args = "{\"solution_path\":\"/nonexistent/plan.py\"}";
    o.mode = "frequency";
    erg_error err;
    ASSERT_EQ_INT(erg_server_new(&o, &srv, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "/nonexistent/plan.py");
    o.scheduler = "AllMaxPowerLimit";
    o.scheduler_args = "{}";
    ASSERT_EQ_INT(erg_server_new(&o, &srv, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "power limit");
    o.scheduler = "InstructionProfiler";
    o.mode = NULL;
    ASSERT_EQ_INT(erg_server_new(&o, &srv, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "mode");
}

TAP_MAIN(TEST_ENTRY(bad_input_gets_4xx_with_message), TEST_ENTRY(allocation_failures_are_answered),
         TEST_ENTRY(job_limit), TEST_ENTRY(scheduler_errors_reach_ranks))
