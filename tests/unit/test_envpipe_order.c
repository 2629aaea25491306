/* test_envpipe_order.c: EnvPipe's "ours" schedule against the spec's step grid and examples. */
#include "core/internal.h"
#include "ergon/pipeline.h"
#include "tap.h"

/* DeepSpeed's step grid (docs/envpipe.md, "The ours schedule"), an independent formulation:
 * step t is a forward slot of stage s when t and s have the same parity;
 * forward j = t/2 - s/2, backward j = t/2 + s/2 + 1 - S - r_s; T steps. */
static int step_grid_order(int S, int M, int s, const int *r, erg_instr *out)
{
    int maxr = 0;
    for (int i = 0; i < S; i++)
        maxr = r[i] > maxr ? r[i] : maxr;
    int T = 2 * (M + S - 1 + maxr), k = 0;
    for (int t = 0; t < T; t++) {
        bool fwd = (t % 2) == (s % 2);
        int j = fwd ? t / 2 - s / 2 : t / 2 + s / 2 + 1 - S - r[s];
        if (j >= 0 && j < M)
            out[k++] = (erg_instr){.kind = fwd ? ERG_FORWARD : ERG_BACKWARD, .microbatch = j};
    }
    return k;
}

static void order_str(const erg_instr *o, int n, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len + 8 < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%c%d", i ? " " : "",
                                o[i].kind == ERG_FORWARD ? 'F' : 'B', o[i].microbatch);
}

TEST(ours_matches_step_grid_for_small_pipelines)
{
    int checked = 0, rejected = 0;
    for (int S = 2; S <= 5; S++)
        for (int M = S; M <= 2 * S + 2; M++) {
            /* every r within the caps: 0 <= r_s <= M - (S - s), r_{S-1} = 0 */
            int r[8] = {0}, cap[8] = {0};
            for (int s = 0; s + 1 < S; s++)
                cap[s] = M - (S - s);
            for (;;) {
                erg_schedule sc = {.kind = ERG_SCHED_ENVPIPE};
                for (int s = 0; s < S; s++)
                    sc.extra_warmup[s] = r[s];
                bool mono = true;
                for (int s = 0; s + 1 < S; s++) {
                    int a = ERG__MIN(M, S - s + r[s]), b = ERG__MIN(M, S - s - 1 + r[s + 1]);
                    if (a < b)
                        mono = false;
                }
                for (int s = 0; s < S; s++) {
                    erg_instr got[64], want[64];
                    erg_error e;
                    erg_status st = erg_schedule_stage_order(&sc, S, M, s, got, &e);
                    if (!mono) {
                        ASSERT_EQ_INT(st, ERG_EINVAL);
                        rejected++;
                        break;
                    }
                    ASSERT_MSG(st == ERG_OK, "S=%d M=%d: %s", S, M, e.msg);
                    ASSERT_EQ_INT(step_grid_order(S, M, s, r, want), 2 * M);
                    char a[512], b[512];
                    order_str(got, 2 * M, a, sizeof a);
                    order_str(want, 2 * M, b, sizeof b);
                    ASSERT_MSG(!strcmp(a, b), "S=%d M=%d s=%d r0=%d: got %s, want %s", S, M, s,
                               r[0], a, b);
                    checked++;
                }
                int i = 0;
                while (i + 1 < S && r[i] == cap[i])
                    r[i++] = 0;
                if (i + 1 >= S)
                    break;
                r[i]++;
            }
        }
    ASSERT(checked > 1000);
    ASSERT(rejected > 10);
}

static void expect_order(int S, int M, const int *r, int s, const char *want)
{
    erg_schedule sc = {.kind = ERG_SCHED_ENVPIPE};
    for (int i = 0; i < S; i++)
        sc.extra_warmup[i] = r[i];
    erg_instr got[64];
    erg_error e;
    ASSERT_MSG(erg_schedule_stage_order(&sc, S, M, s, got, &e) == ERG_OK, "%s", e.msg);
    char a[512];
    order_str(got, 2 * M, a, sizeof a);
    ASSERT_MSG(!strcmp(a, want), "stage %d: got %s, want %s", s, a, want);
}

TEST(spec_examples)
{
    int readme[4] = {0, 1, 2, 0};
    for (int s = 0; s < 3; s++)
        expect_order(4, 4, readme, s, "F0 F1 F2 F3 B0 B1 B2 B3");
    expect_order(4, 4, readme, 3, "F0 B0 F1 B1 F2 B2 F3 B3");
    int r8[4] = {4, 3, 1, 0};
    expect_order(4, 8, r8, 0, "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7");
    expect_order(4, 8, r8, 1, "F0 F1 F2 F3 F4 F5 B0 F6 B1 F7 B2 B3 B4 B5 B6 B7");
    expect_order(4, 8, r8, 2, "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
    expect_order(4, 8, r8, 3, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST(zero_r_is_1f1b_and_cap_limits_warmup)
{
    erg_schedule ours = {.kind = ERG_SCHED_ENVPIPE}, f1 = {.kind = ERG_SCHED_1F1B};
    erg_instr a[24], b[24];
    for (int s = 0; s < 4; s++) {
        ASSERT_EQ_INT(erg_schedule_stage_order(&ours, 4, 12, s, a, NULL), ERG_OK);
        ASSERT_EQ_INT(erg_schedule_stage_order(&f1, 4, 12, s, b, NULL), ERG_OK);
        ASSERT(!memcmp(a, b, sizeof a));
    }
    ours.extra_warmup[0] = 6;
    ours.extra_warmup[1] = 5;
    ours.max_inflight = 6;
    ASSERT_EQ_INT(erg_schedule_stage_order(&ours, 4, 12, 0, a, NULL), ERG_OK);
    int w = 0;
    while (a[w].kind == ERG_FORWARD)
        w++;
    ASSERT_EQ_INT(w, 6);
    /* the cap never goes below the 1F1B warm-up */
    ours.max_inflight = 1;
    ASSERT_EQ_INT(erg_schedule_stage_order(&ours, 4, 12, 0, a, NULL), ERG_OK);
    w = 0;
    while (a[w].kind == ERG_FORWARD)
        w++;
    ASSERT_EQ_INT(w, 4);
}

TEST(bad_input_is_an_error)
{
    erg_schedule sc = {.kind = ERG_SCHED_ENVPIPE};
    erg_instr o[16];
    erg_error e;
    ASSERT_EQ_INT(erg_schedule_stage_order(&sc, 4, 3, 0, o, &e), ERG_EINVAL);
    ASSERT(strstr(e.msg, "M=3 < S=4"));
    sc.extra_warmup[1] = 3; /* stage 1 would run more warm-up than stage 0 */
    ASSERT_EQ_INT(erg_schedule_stage_order(&sc, 4, 8, 0, o, &e), ERG_EINVAL);
    ASSERT(strstr(e.msg, "deadlock"));
    erg_dag *d = NULL;
    ASSERT_EQ_INT(erg_dag_new(&sc, 4, 8, &d, &e), ERG_EINVAL);
    ASSERT(d == NULL);
    sc.extra_warmup[1] = -1;
    ASSERT_EQ_INT(erg_schedule_stage_order(&sc, 4, 8, 0, o, &e), ERG_EINVAL);
}

TEST(dag_on_ours_is_acyclic_with_clamped_r)
{
    erg_schedule sc = {.kind = ERG_SCHED_ENVPIPE};
    int r[8] = {8, 7, 6, 5, 4, 3, 2, 0};
    for (int i = 0; i < 8; i++)
        sc.extra_warmup[i] = r[i];
    erg_dag *d = NULL;
    erg_error e;
    ASSERT_MSG(erg_dag_new(&sc, 8, 16, &d, &e) == ERG_OK, "%s", e.msg);
    ASSERT_EQ_INT(erg_dag_num_instrs(d), 256);
    erg_dag_free(d);
}

TAP_MAIN(TEST_ENTRY(ours_matches_step_grid_for_small_pipelines), TEST_ENTRY(spec_examples),
         TEST_ENTRY(zero_r_is_1f1b_and_cap_limits_warmup), TEST_ENTRY(bad_input_is_an_error),
         TEST_ENTRY(dag_on_ours_is_acyclic_with_clamped_r))
