/* test_pipeline.c: schedules, the instruction DAG, CPM, plans and the emulator. */
#include "core/internal.h"
#include "ergon/emulate.h"
#include "ergon/pipeline.h"
#include "ergon/plan.h"
#include "tap.h"

static void order_str(const erg_instr *o, int n, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%c%d", i ? " " : "",
                              o[i].kind == ERG_FORWARD ? 'F' : 'B', o[i].microbatch);
}

TEST(one_f_one_b_matches_spec)
{
    erg_schedule s = {.kind = ERG_SCHED_1F1B};
    erg_instr o[24];
    char buf[512];
    erg_error err;
    ASSERT_OK(erg_schedule_stage_order(&s, 8, 12, 0, o, &err));
    order_str(o, 24, buf, sizeof buf);
    ASSERT_STR_EQ(buf, "F0 F1 F2 F3 F4 F5 F6 F7 B0 F8 B1 F9 B2 F10 B3 F11 B4 B5 B6 B7 B8 B9 "
                       "B10 B11");
    ASSERT_OK(erg_schedule_stage_order(&s, 8, 12, 7, o, &err));
    order_str(o, 24, buf, sizeof buf);
    ASSERT_STR_EQ(buf, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 F8 B8 F9 B9 F10 B10 "
                       "F11 B11");
    /* fewer microbatches than stages: warm-up is capped at M */
    ASSERT_OK(erg_schedule_stage_order(&s, 4, 2, 0, o, &err));
    order_str(o, 4, buf, sizeof buf);
    ASSERT_STR_EQ(buf, "F0 F1 B0 B1");
}

TEST(dag_sizes_match_spec)
{
    erg_schedule s = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    erg_error err;
    ASSERT_OK(erg_dag_new(&s, 8, 12, &d, &err));
    ASSERT_EQ_INT(erg_dag_num_instrs(d), 192);
    int edges = 0, sources = 0, sinks = 0;
    for (int i = 0; i < 192; i++) {
        const int *x;
        int ns = erg_dag_successors(d, i, &x);
        edges += ns;
        sinks += ns == 0;
        sources += erg_dag_predecessors(d, i, &x) == 0;
    }
    /* 194 nodes and 354 edges with the dummy source and sink */
    ASSERT_EQ_INT(edges + sources + sinks, 354);
    ASSERT_EQ_INT(sources, 1);
    ASSERT_EQ_INT(sinks, 1);
    int st;
    erg_instr in = erg_dag_instr(d, erg_dag_instr_id(d, 0, ERG_BACKWARD, 11), &st);
    ASSERT_EQ_INT(st, 0);
    ASSERT_EQ_INT(in.microbatch, 11);
    /* successors: same-stage next first, then the cross-stage one */
    const int *x;
    int id = erg_dag_instr_id(d, 3, ERG_FORWARD, 2);
    ASSERT_EQ_INT(erg_dag_successors(d, id, &x), 2);
    ASSERT_EQ_INT(x[0], id + 1);
    ASSERT_EQ_INT(x[1], erg_dag_instr_id(d, 4, ERG_FORWARD, 2));
    erg_dag_free(d);
}

TEST(cpm_unit_durations)
{
    /* With every instruction taking 1, 1F1B's makespan is 2(M + S - 1). */
    erg_error err;
    for (int S = 1; S <= 5; S++)
        for (int M = 1; M <= 7; M++) {
            erg_schedule s = {.kind = ERG_SCHED_1F1B};
            erg_dag *d;
            ASSERT_OK(erg_dag_new(&s, S, M, &d, &err));
            int n = erg_dag_num_instrs(d);
            double dur[2 * 5 * 7], es[2 * 5 * 7], lf[2 * 5 * 7], T;
            for (int i = 0; i < n; i++)
                dur[i] = 1;
            ASSERT_OK(erg_dag_cpm(d, dur, es, lf, &T, &err));
            ASSERT_NEAR(T, 2.0 * (M + S - 1), 0);
            /* the first forward and the last backward are critical */
            ASSERT_NEAR(es[0], 0, 0);
            int last = erg_dag_instr_id(d, 0, ERG_BACKWARD, M - 1);
            ASSERT_NEAR(lf[last], T, 0);
            ASSERT_NEAR(es[last] + 1, T, 0);
            erg_dag_free(d);
            /* GPipe: M forwards and M backwards per stage */
            s.kind = ERG_SCHED_GPIPE;
            ASSERT_OK(erg_dag_new(&s, S, M, &d, &err));
            ASSERT_OK(erg_dag_cpm(d, dur, NULL, NULL, &T, &err));
            ASSERT_NEAR(T, 2.0 * (M + S - 1), 0);
            erg_dag_free(d);
        }
}

TEST(bad_pipeline_arguments)
{
    erg_schedule s = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    erg_error err;
    ASSERT_EQ_INT(erg_dag_new(&s, 0, 4, &d, &err), ERG_EINVAL);
    ASSERT_EQ_INT(erg_dag_new(&s, 4, -1, &d, &err), ERG_EINVAL);
    erg_schedule_kind k;
    ASSERT_EQ_INT(erg_schedule_parse("zigzag", &k, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "unknown schedule 'zigzag'");
}

TEST(plan_py_and_json_formats)
{
    erg_schedule s = {.kind = ERG_SCHED_1F1B};
    erg_plan *p;
    erg_error err;
    ASSERT_OK(erg_plan_new(&s, 2, 2, &p, &err));
    int *f0 = erg_plan_stage_freqs(p, 0), *f1 = erg_plan_stage_freqs(p, 1);
    int a[] = {1410, 1395, 1380, 1365}, b[] = {1200, 1215, 1230, 1245};
    memcpy(f0, a, sizeof a);
    memcpy(f1, b, sizeof b);
    char *py;
    ASSERT_OK(erg_plan_format_py(p, "# Iteration 0: cost change 1.5 \n", &py, &err));
    ASSERT_STR_EQ(py, "[\n[1410, 1395, 1380, 1365],\n[1200, 1215, 1230, 1245],\n]\n"
                      "# Iteration 0: cost change 1.5 \n");
    erg_plan *q;
    ASSERT_OK(erg_plan_parse(py, strlen(py), "x.py", NULL, &q, &err));
    ASSERT(!memcmp(erg_plan_stage_freqs(q, 1), b, sizeof b));
    /* stage 0 order is F0 F1 B0 B1: B0 runs at 1380 */
    ASSERT_EQ_INT(erg_plan_freq(q, 0, ERG_BACKWARD, 0), 1380);
    erg_plan_free(q);
    erg_free(py);
    erg_plan_set_estimate(p, 1.25, 300.5);
    char *js;
    ASSERT_OK(erg_plan_format_json(p, &js, &err));
    ASSERT_OK(erg_plan_parse(js, strlen(js), "x.json", NULL, &q, &err));
    ASSERT(!memcmp(erg_plan_stage_freqs(q, 0), a, sizeof a));
    double t, e;
    erg_plan_estimate(q, &t, &e);
    ASSERT_NEAR(t, 1.25, 0);
    ASSERT_NEAR(e, 300.5, 0);
    erg_plan_free(q);
    erg_free(js);
    erg_plan_free(p);
}

TEST(plan_parse_errors)
{
    erg_plan *p;
    erg_error err;
    const char *bad1 = "[\n[1410, 1395],\n[1200, x],\n]\n";
    ASSERT_EQ_INT(erg_plan_parse(bad1, strlen(bad1), "b.py", NULL, &p, &err), ERG_EPARSE);
    ASSERT_STR_EQ(err.msg, "b.py:3:8: expected a clock in MHz (a positive integer below 10^9), "
                           "found 'x'");
    const char *bad2 = "[[1410, 1395], [1200]]";
    ASSERT_EQ_INT(erg_plan_parse(bad2, strlen(bad2), "b.py", NULL, &p, &err), ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "stage 1 has 1 clocks but stage 0 has 2");
    const char *bad3 = "[[1410, 1395]] __import__('os')";
    ASSERT_EQ_INT(erg_plan_parse(bad3, strlen(bad3), "b.py", NULL, &p, &err), ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "expected only comments after the list");
    const char *bad4 = "{\"format\": \"ergon-plan\", \"version\": 1, \"num_stages\": 1, "
                       "\"num_microbatches\": 1,"
                       " \"stages\": [{\"freq_mhz\": [1, -2]}]}";
    ASSERT_EQ_INT(erg_plan_parse(bad4, strlen(bad4), "b.json", NULL, &p, &err), ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "not a positive integer");
    const char *bad5 = "{\"format\": ";
    ASSERT_EQ_INT(erg_plan_parse(bad5, strlen(bad5), "b.json", NULL, &p, &err), ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "b.json:1:");
}

/* The pair literal read as written (what the server's Zeus route serves), and the same text
 * read as a plan: only the pairs that get clocks. */
TEST(plan_pairs_as_written)
{
    const char *t = "[\n  [(\"forward\", 1410), ('backward', 1200)],  # stage 0\n"
                    "  [[\"forward\", 1000], (\"load\", 5), (\"backward\", 800),],\n]\n";
    erg_plan_pairs *pp = NULL;
    erg_error err;
    ASSERT_OK(erg_plan_pairs_parse(t, strlen(t), "z.py", &pp, &err));
    ASSERT_EQ_INT(erg_plan_pairs_num_stages(pp), 2);
    ASSERT_EQ_INT(erg_plan_pairs_stage_len(pp, 0), 2);
    ASSERT_EQ_INT(erg_plan_pairs_stage_len(pp, 1), 3);
    ASSERT_STR_EQ(erg_plan_pairs_name(pp, 1, 1), "load");
    ASSERT_EQ_INT(erg_plan_pairs_freqs(pp, 1)[1], 5);
    ASSERT_EQ_INT(erg_plan_pairs_freqs(pp, 1)[2], 800);
    ASSERT(erg_plan_pairs_name(pp, 1, 3) == NULL);
    ASSERT(erg_plan_pairs_freqs(pp, 2) == NULL);
    erg_plan_pairs_free(pp);
    erg_plan *p = NULL;
    ASSERT_OK(erg_plan_parse(t, strlen(t), "z.py", NULL, &p, &err));
    ASSERT_EQ_INT(erg_plan_stage_len(p, 1), 2);
    ASSERT_EQ_INT(erg_plan_stage_freqs_const(p, 1)[1], 800);
    erg_plan_free(p);
    const char *kronos = "[[1410, 1200]]\n";
    ASSERT_EQ_INT(erg_plan_pairs_parse(kronos, strlen(kronos), "k.py", &pp, &err), ERG_ENOTFOUND);
    ASSERT(pp == NULL);
    const char *bad = "[[(\"forward\", 1410),\n (\"backward\" 1200)]]";
    ASSERT_EQ_INT(erg_plan_pairs_parse(bad, strlen(bad), "b.py", &pp, &err), ERG_EPARSE);
    ASSERT_STR_EQ(err.msg, "b.py:2:14: expected ',' after the instruction name, found '1'");
}

TEST(emulate_two_stage_pipeline)
{
    /* S=2, M=2, forward 1 s / 10 J, backward 2 s / 30 J at 1000 MHz;
     * 1F1B makespan: F0(s0) F0(s1) B0(s1) ... = 1+1+2+... computed by CPM. */
    erg_profile *prof;
    erg_error err;
    ASSERT_OK(erg_profile_new(&prof, &err));
    for (int s = 0; s < 2; s++) {
        erg_profile_point f = {1000, 1, 10}, b = {1000, 2, 30};
        ASSERT_OK(erg_profile_add(prof, s, ERG_FORWARD, &f, &err));
        ASSERT_OK(erg_profile_add(prof, s, ERG_BACKWARD, &b, &err));
    }
    erg_schedule sc = {.kind = ERG_SCHED_1F1B};
    erg_dag *d;
    erg_plan *p;
    ASSERT_OK(erg_dag_new(&sc, 2, 2, &d, &err));
    ASSERT_OK(erg_plan_new(&sc, 2, 2, &p, &err));
    erg_plan_fill(p, 1000);
    erg_emulation em;
    ASSERT_OK(erg_emulate(prof, d, p, 5, &em, NULL, NULL, &err));
    /* s0: F0[0,1] F1[1,2]; s1: F0[1,2] B0[2,4] F1[4,5] B1[5,7];
     * s0: B0[4,6] B1[7,9] -> T = 9; busy 6 per stage -> idle 3+3 */
    ASSERT_NEAR(em.time_s, 9, 1e-12);
    ASSERT_NEAR(em.compute_energy_j, 160, 1e-12);
    ASSERT_NEAR(em.blocking_energy_j, 5 * 6, 1e-12);
    erg_plan_fill(p, 900);
    ASSERT_EQ_INT(erg_emulate(prof, d, p, 5, &em, NULL, NULL, &err), ERG_ENOTFOUND);
    ASSERT_CONTAINS(err.msg, "900 MHz");
    erg_plan_free(p);
    erg_dag_free(d);
    erg_profile_free(prof);
}

#define PLAN_HEAD                                                                                  \
    "{\"format\": \"ergon-plan\", \"version\": 1, \"num_stages\": 2, "                             \
    "\"num_microbatches\": 1, \"stages\": "

static void expect_plan_error(const char *text, const char *msg)
{
    erg_plan *p = (erg_plan *)1;
    erg_error err;
    ASSERT_EQ_INT(erg_plan_parse(text, strlen(text), "p.json", NULL, &p, &err), ERG_EPARSE);
    ASSERT(p == NULL);
    ASSERT_CONTAINS(err.msg, msg);
}

/* Issue 15 item 15: "stage" was ignored, so two swapped entries applied their
 * clocks to the wrong stages. */
TEST(json_plan_stage_field_places_the_clocks)
{
    const char *t = PLAN_HEAD "[{\"stage\": 1, \"freq_mhz\": [1200, 1215]},"
                              " {\"stage\": 0, \"freq_mhz\": [1410, 1395]}]}";
    erg_plan *p;
    erg_error err;
    ASSERT_OK(erg_plan_parse(t, strlen(t), "p.json", NULL, &p, &err));
    ASSERT_EQ_INT(erg_plan_stage_freqs(p, 0)[0], 1410);
    ASSERT_EQ_INT(erg_plan_stage_freqs(p, 0)[1], 1395);
    ASSERT_EQ_INT(erg_plan_stage_freqs(p, 1)[0], 1200);
    ASSERT_EQ_INT(erg_plan_stage_freqs(p, 1)[1], 1215);
    erg_plan_free(p);
    /* without "stage", the position */
    const char *u = PLAN_HEAD "[{\"freq_mhz\": [1200, 1215]}, {\"freq_mhz\": [1410, 1395]}]}";
    ASSERT_OK(erg_plan_parse(u, strlen(u), "p.json", NULL, &p, &err));
    ASSERT_EQ_INT(erg_plan_stage_freqs(p, 0)[0], 1200);
    erg_plan_free(p);
    expect_plan_error(PLAN_HEAD "[{\"stage\": 1, \"freq_mhz\": [1, 2]},"
                                " {\"stage\": 1, \"freq_mhz\": [1, 2]}]}",
                      "p.json: stages[0] and stages[1] are both \"stage\": 1");
    expect_plan_error(PLAN_HEAD "[{\"stage\": 0, \"freq_mhz\": [1, 2]},"
                                " {\"stage\": 2, \"freq_mhz\": [1, 2]}]}",
                      "p.json: stages[1]: \"stage\": 2 is not a stage in 0..1");
    expect_plan_error(PLAN_HEAD "[{\"stage\": \"0\", \"freq_mhz\": [1, 2]},"
                                " {\"stage\": 1, \"freq_mhz\": [1, 2]}]}",
                      "p.json: stages[0]: \"stage\": \"0\" is not a stage in 0..1");
    expect_plan_error(PLAN_HEAD "[{\"stage\": 1, \"freq_mhz\": [1, 2]},"
                                " {\"freq_mhz\": [1, 2]}]}",
                      "p.json: stages[1] has no \"stage\" but stages[0] has");
    expect_plan_error(PLAN_HEAD "[{\"stage\": 1, \"freq_mhz\": [1, 2]},"
                                " {\"stage\": 0, \"freq_mhz\": [1]}]}",
                      "p.json: stage 0 needs freq_mhz with 2 clocks");
}

/* Issue 15 item 15: an unknown "version" was read as if it were version 1. */
TEST(json_plan_rejects_unknown_version)
{
    expect_plan_error("{\"format\": \"ergon-plan\", \"version\": 2, \"num_stages\": 1, "
                      "\"num_microbatches\": 1, \"stages\": [{\"freq_mhz\": [1, 2]}]}",
                      "p.json: unknown \"version\": 2 (this reader knows ergon-plan version 1)");
    expect_plan_error("{\"format\": \"ergon-plan\", \"version\": \"1\", \"num_stages\": 1, "
                      "\"num_microbatches\": 1, \"stages\": [{\"freq_mhz\": [1, 2]}]}",
                      "p.json: unknown \"version\": \"1\"");
    expect_plan_error("{\"format\": \"ergon-plan\", \"num_stages\": 1, "
                      "\"num_microbatches\": 1, \"stages\": [{\"freq_mhz\": [1, 2]}]}",
                      "p.json: \"version\" is missing");
}

TAP_MAIN(TEST_ENTRY(one_f_one_b_matches_spec), TEST_ENTRY(dag_sizes_match_spec),
         TEST_ENTRY(cpm_unit_durations), TEST_ENTRY(bad_pipeline_arguments),
         TEST_ENTRY(plan_py_and_json_formats), TEST_ENTRY(plan_parse_errors),
         TEST_ENTRY(plan_pairs_as_written), TEST_ENTRY(emulate_two_stage_pipeline),
         TEST_ENTRY(json_plan_stage_field_places_the_clocks),
         TEST_ENTRY(json_plan_rejects_unknown_version))
