/* test_server_wire.c: the server over sockets: the Zeus PFO client's requests byte for byte
 * (docs/zeus-protocol.md §7: httpx 0.28 request lines, headers and compact JSON bodies of
 * JobInfo.dict() / RankInfo.dict(), through register_job -> register_rank -> schedule ->
 * result, against answers FastAPI would give), huge bodies and slow clients. */
#include "server_test_util.h"

TEST(zeus_client_replay_point_solution)
{
    const char *d = mktmp();
    char db[512], dump[512], plan[512], args[700];
    snprintf(db, sizeof db, "%s/z.db", d);
    snprintf(dump, sizeof dump, "%s/dump", d);
    snprintf(plan, sizeof plan, "%s/freqs_pipeline_00042.py", d);
    /* run_optimization.py's file: a repr'd list of tuples per stage. */
    write_text(plan,
               "[\n"
               "[('forward', 1410), ('forward', 1395), ('backward', 1380), ('backward', 1410)],\n"
               "[('forward', 1395), ('backward', 1395), ('forward', 1380), ('backward', 1365)],\n"
               "]\n# Iteration 42 cost change: -0.5\n# Iteration 42 total cost: 100.0\n"
               "# Iteration 42 total cost with P2P: 120.0\n");
    snprintf(args, sizeof args, "{\"solution_path\": \"%s\"}", plan);
    srv_cfg c = {db, dump, NULL, NULL, NULL, 0, 0, 0, 0, NULL, NULL, args};
    int port;
    pid_t srv = start_server(&c, &port);
    raw_resp r;
    zeus_call(port, "POST", "/register_job",
              "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":2,"
              "\"job_metadata\":\"run-7\"}",
              &r);
    ASSERT_MSG(r.status == 200, "%d %s", r.status, r.body);
    /* "YYYY-MM-DD-HH-MM-SS+dp1+pp2+tp1+PointSolution+run-7" as a JSON string */
    ASSERT_EQ_INT(strlen(r.body), 2 + 19 + strlen("+dp1+pp2+tp1+PointSolution+run-7"));
    ASSERT(r.body[0] == '"' && r.body[5] == '-' && r.body[8] == '-' && r.body[11] == '-' &&
           r.body[14] == '-' && r.body[17] == '-' && r.body[20] == '+');
    ASSERT_CONTAINS(r.body, "+dp1+pp2+tp1+PointSolution+run-7\"");
    char id[128];
    snprintf(id, sizeof id, "%.*s", (int)strlen(r.body) - 2, r.body + 1);
    char target[256];
    snprintf(target, sizeof target, "/register_rank/%s", id);
    for (int k = 0; k < 2; k++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,\"tp_rank\":0,"
                 "\"available_frequencies\":[1410,1395,1380,1365]}",
                 k, k);
        zeus_call(port, "POST", target, body, &r);
        ASSERT_EQ_INT(r.status, 200);
        ASSERT_STR_EQ(r.body, "null");
    }
    /* The schedule: a barrier of both ranks; then the plan verbatim, no
     * warm-up window (FastAPI's compact JSON). */
    static const char *const want[2] = {
        "{\"rank\":0,\"frequencies\":[[\"forward\",1410],[\"forward\",1395],[\"backward\",1380],"
        "[\"backward\",1410]]}",
        "{\"rank\":1,\"frequencies\":[[\"forward\",1395],[\"backward\",1395],[\"forward\",1380],"
        "[\"backward\",1365]]}"};
    for (int round = 0; round < 2; round++) {
        int fd[2];
        for (int k = 0; k < 2; k++) {
            snprintf(target, sizeof target, "/schedule/%s?rank=%d", id, k);
            fd[k] = zeus_send(port, "GET", target, NULL);
        }
        for (int k = 0; k < 2; k++) {
            zeus_read(fd[k], &r);
            ASSERT_EQ_INT(r.status, 200);
            ASSERT_STR_EQ(r.body, want[k]); /* the same plan every window */
        }
        if (round == 1)
            break;
        /* The protocol's results (the Zeus client itself never posts them). */
        snprintf(target, sizeof target, "/result/%s", id);
        for (int k = 0; k < 2; k++) {
            char body[512];
            snprintf(body, sizeof body,
                     "{\"rank\":%d,\"iter_time\":[0.5,0.25],\"iter_energy\":[100,90.5],"
                     "\"time_breakdown\":{\"forward\":[[0.1,0.1],[0.1,0.1]],\"custom\":[[1]]},"
                     "\"energy_breakdown\":{}}",
                     k);
            zeus_call(port, "POST", target, body, &r);
            ASSERT_MSG(r.status == 200, "%d %s", r.status, r.body);
            ASSERT_STR_EQ(r.body, "null");
        }
    }
    /* Dumps in Zeus's layout, as pydantic's .json() writes them. */
    char p[900];
    snprintf(p, sizeof p, "%s/%s/perseus.json", dump, id);
    ASSERT(access(p, F_OK) != 0);
    snprintf(p, sizeof p, "%s/%s/ranks.json", dump, id);
    char *t = read_text(p);
    ASSERT_STR_EQ(t, "[{\"rank\": 0, \"dp_rank\": 0, \"pp_rank\": 0, \"tp_rank\": 0, "
                     "\"available_frequencies\": [1410, 1395, 1380, 1365]}, {\"rank\": 1, "
                     "\"dp_rank\": 0, \"pp_rank\": 1, \"tp_rank\": 0, \"available_frequencies\": "
                     "[1410, 1395, 1380, 1365]}]");
    erg__free(t);
    snprintf(p, sizeof p, "%s/%s/0.sched.json", dump, id);
    t = read_text(p);
    ASSERT_STR_EQ(t, "[{\"rank\": 0, \"frequencies\": [[\"forward\", 1410], [\"forward\", 1395], "
                     "[\"backward\", 1380], [\"backward\", 1410]]}, {\"rank\": 1, \"frequencies\": "
                     "[[\"forward\", 1395], [\"backward\", 1395], [\"forward\", 1380], "
                     "[\"backward\", 1365]]}]");
    erg__free(t);
    snprintf(p, sizeof p, "%s/%s/0.prof.json", dump, id);
    t = read_text(p);
    ASSERT_STR_EQ(t, "[{\"rank\": 0, \"iter_time\": [0.5, 0.25], \"iter_energy\": [100.0, 90.5], "
                     "\"time_breakdown\": {\"forward\": [[0.1, 0.1], [0.1, 0.1]], \"custom\": "
                     "[[1.0]]}, \"energy_breakdown\": {}}, {\"rank\": 1, \"iter_time\": [0.5, "
                     "0.25], \"iter_energy\": [100.0, 90.5], \"time_breakdown\": {\"forward\": "
                     "[[0.1, 0.1], [0.1, 0.1]], \"custom\": [[1.0]]}, \"energy_breakdown\": {}}]");
    erg__free(t);
    /* The job record keeps what the client sent (job_metadata). */
    snprintf(target, sizeof target, "/v1/jobs/%s", id);
    zeus_call(port, "GET", target, NULL, &r);
    ASSERT_CONTAINS(r.body, "\"scheduler\":\"zeus:PointSolution\"");
    /* Validation as FastAPI: 422 with a detail. */
    zeus_call(port, "POST", "/register_job",
              "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":3,"
              "\"job_metadata\":null}",
              &r);
    ASSERT_EQ_INT(r.status, 422);
    ASSERT_CONTAINS(r.body, "\"detail\"");
    /* A kronos JobInfo on the same port: the kronos wire, unknown fields kept too. */
    zeus_call(port, "POST", "/register_job",
              "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":2,"
              "\"framework\":\"merak\",\"model_name\":\"gpt\",\"partition_method\":\"u\","
              "\"microbatch_size\":1,\"num_microbatches\":2,\"run_tag\":\"kronos-extra\"}",
              &r);
    ASSERT_MSG(r.status == 200, "%d %s", r.status, r.body);
    /* One configuration serves both protocols: the Zeus plan's PointSolution. */
    ASSERT_CONTAINS(r.body, "+merak+gpt+u+dp1+pp2+tp1+mbs1+nmb2+PointSolution\"");
    stop_server(srv);
    sqlite3 *q;
    ASSERT(sqlite3_open(db, &q) == SQLITE_OK);
    sqlite3_stmt *st;
    ASSERT(sqlite3_prepare_v2(q, "SELECT group_concat(info, ' ') FROM jobs", -1, &st, NULL) ==
           SQLITE_OK);
    ASSERT(sqlite3_step(st) == SQLITE_ROW);
    ASSERT_CONTAINS((const char *)sqlite3_column_text(st, 0), "\"job_metadata\":\"run-7\"");
    ASSERT_CONTAINS((const char *)sqlite3_column_text(st, 0), "\"run_tag\":\"kronos-extra\"");
    sqlite3_finalize(st);
    sqlite3_close(q);
}

TEST(zeus_client_replay_instruction_profiler)
{
    const char *d = mktmp();
    char db[512], dump[512];
    snprintf(db, sizeof db, "%s/z.db", d);
    snprintf(dump, sizeof dump, "%s/dump", d);
    srv_cfg c = {db,
                 dump,
                 NULL,
                 NULL,
                 NULL,
                 0,
                 0,
                 0,
                 0,
                 NULL,
                 "InstructionProfiler",
                 "{\"minimum_frequency\": 1380, \"warmup_step_ratio\": 0.1}"};
    int port;
    pid_t srv = start_server(&c, &port);
    raw_resp r;
    zeus_call(port, "POST", "/register_job",
              "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":2,"
              "\"job_metadata\":null}",
              &r);
    ASSERT_MSG(r.status == 200, "%d %s", r.status, r.body);
    ASSERT_CONTAINS(r.body, "+dp1+pp2+tp1+InstructionProfiler\"");
    char id[128], target[256];
    snprintf(id, sizeof id, "%.*s", (int)strlen(r.body) - 2, r.body + 1);
    snprintf(target, sizeof target, "/register_rank/%s", id);
    for (int k = 0; k < 2; k++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,\"tp_rank\":0,"
                 "\"available_frequencies\":[1410,1395,1380,1365],"
                 "\"pipe_schedule\":[\"forward\",\"backward\"]}",
                 k, k);
        zeus_call(port, "POST", target, body, &r);
        ASSERT_EQ_INT(r.status, 200);
    }
    /* 2 warm-up windows at the maximum, then 1410, 1395, 1380 (>= minimum). */
    static const int want[5] = {1410, 1410, 1410, 1395, 1380};
    for (int w = 0; w <= 5; w++) {
        int fd[2];
        for (int k = 0; k < 2; k++) {
            snprintf(target, sizeof target, "/schedule/%s?rank=%d", id, k);
            fd[k] = zeus_send(port, "GET", target, NULL);
        }
        for (int k = 0; k < 2; k++) {
            zeus_read(fd[k], &r);
            if (w == 5) { /* the end: Zeus's RuntimeError, a 500 with the marker */
                ASSERT_EQ_INT(r.status, 500);
                ASSERT_CONTAINS(r.body, "[profiling-done]");
                continue;
            }
            ASSERT_MSG(r.status == 200, "window %d: %d %s", w, r.status, r.body);
            char exp[160];
            snprintf(exp, sizeof exp,
                     "{\"rank\":%d,\"frequencies\":[[\"forward\",%d],[\"backward\",%d]]}", k,
                     want[w], want[w]);
            ASSERT_STR_EQ(r.body, exp);
        }
        if (w == 5)
            break;
        snprintf(target, sizeof target, "/result/%s", id);
        for (int k = 0; k < 2; k++) {
            char body[512];
            /* forward takes (k + 1) * 1410 / f * 0.01 s; no energy breakdown */
            double tf = (k + 1) * 1410.0 / want[w] * 0.01;
            snprintf(body, sizeof body,
                     "{\"rank\":%d,\"iter_time\":[1.0,1.0],\"iter_energy\":[200.0,200.0],"
                     "\"time_breakdown\":{\"forward\":[[%.17g],[%.17g]],\"backward\":[[0.02],"
                     "[0.02]]},\"energy_breakdown\":{}}",
                     k, tf * 3, tf);
            zeus_call(port, "POST", target, body, &r);
            ASSERT_MSG(r.status == 200, "%d %s", r.status, r.body);
        }
    }
    stop_server(srv);
    char p[900];
    snprintf(p, sizeof p, "%s/%s/None+None+None+dp1+tp1+pp2+mbsNone+nmbNone.csv", dump, id);
    char *t = read_text(p);
    char a[40], line[200];
    ASSERT(!strncmp(t, "stage,instruction,frequency,time,energy\n", 40));
    /* stage 1 forward at 1395: the first iteration is dropped, energy empty */
    snprintf(line, sizeof line, "\n1,forward,1395,%s,\n",
             erg__fmt_double_py(2 * 1410.0 / 1395 * 0.01, a, sizeof a));
    ASSERT_CONTAINS(t, line);
    ASSERT(!strstr(t, "nan"));
    erg__free(t);
    snprintf(p, sizeof p, "%s/%s/ranks.json", dump, id);
    t = read_text(p);
    ASSERT_CONTAINS(t, "\"available_frequencies\": [1410, 1395, 1380, 1365], \"pipe_schedule\": "
                       "[\"forward\", \"backward\"]}");
    erg__free(t);
}

TEST(huge_bodies_and_slow_clients)
{
    const char *d = mktmp();
    char db[512], dump[512], url[64];
    snprintf(db, sizeof db, "%s/s.db", d);
    snprintf(dump, sizeof dump, "%s/dump", d);
    srv_cfg c = {db, dump, NULL, NULL, NULL, 0, 0, 0, 1.0, NULL, NULL, NULL};
    int port;
    pid_t srv = start_server(&c, &port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    /* A slow client: half a request line, then silence. */
    int slow = raw_connect(port);
    ASSERT(write(slow, "GET /inf", 8) == 8);
    /* A body over the limit (declared up front): 413 at once. */
    int big = raw_connect(port);
    const char *hdr = "POST /register_job HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n"
                      "Content-Type: application/json\r\n\r\n";
    ASSERT(write(big, hdr, strlen(hdr)) == (ssize_t)strlen(hdr));
    char buf[512] = {0};
    ssize_t n = read(big, buf, sizeof buf - 1);
    ASSERT(n > 0);
    ASSERT_CONTAINS(buf, "413");
    close(big);
    /* A chunked body over the limit (no length up front). */
    int status;
    size_t blen = (16u << 20) + 100;
    char *body = malloc(blen + 1);
    memset(body, ' ', blen);
    body[blen] = 0;
    body[0] = '{';
    body[blen - 1] = '}';
    char *resp = http(url, "POST", "/register_job", body, &status);
    ASSERT_EQ_INT(status, 413);
    erg_free(resp);
    free(body);
    /* Meanwhile normal requests work. */
    resp = http(url, "GET", "/info", NULL, &status);
    ASSERT_EQ_INT(status, 200);
    ASSERT_CONTAINS(resp, "AllMaxFrequency");
    erg_free(resp);
    /* The slow client is dropped after the connection timeout (1 s). */
    struct timeval tv = {5, 0};
    setsockopt(slow, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    n = read(slow, buf, sizeof buf);
    ASSERT_MSG(n <= 0, "the server answered a half request");
    close(slow);
    resp = http(url, "GET", "/healthz", NULL, &status);
    ASSERT_EQ_INT(status, 200);
    erg_free(resp);
    stop_server(srv);
}

TAP_MAIN(TEST_ENTRY(zeus_client_replay_point_solution),
         TEST_ENTRY(zeus_client_replay_instruction_profiler),
         TEST_ENTRY(huge_bodies_and_slow_clients))
