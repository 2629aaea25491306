/* test_schedules.c: every schedule generator against PyTorch's own orders
 * (golden files in tests/data/schedules, generated from PyTorch's
 * schedules.py), the refusals, the torch-CSV reader and the DAG of the
 * multi-chunk schedules. */
#include "core/internal.h"
#include "ergon/pipeline.h"
#include "tap.h"

static char *slurp(const char *path)
{
    char *t = NULL;
    size_t n = 0;
    erg_error err;
    if (erg__read_file(path, 1 << 24, &t, &n, &err))
        TAP_FAIL("cannot read %s: %s", path, err.msg);
    return t;
}

/* Walk a golden file: for each case, compare ergon's torch-csv rows. */
static void check_golden(const char *file, const char *name, int *ncases, int *nrefused)
{
    char path[512];
    snprintf(path, sizeof path, "%s/schedules/%s.golden", ERG_TEST_DATA_DIR, file);
    char *text = slurp(path);
    erg_schedule s = {.kind = ERG_SCHED_1F1B};
    erg_error err;
    ASSERT_OK(erg_schedule_parse(name, &s.kind, &err));
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    while (line) {
        int P, V, M;
        if (sscanf(line, "## P=%d V=%d M=%d", &P, &V, &M) != 3) {
            line = strtok_r(NULL, "\n", &save);
            continue;
        }
        char hdr[64];
        snprintf(hdr, sizeof hdr, "%s", line);
        line = strtok_r(NULL, "\n", &save);
        s.chunks = V;
        erg_order *o = NULL;
        erg_status st = erg_order_new(&s, P, M, &o, &err);
        if (line && !strncmp(line, "refused:", 8)) {
            ASSERT_MSG(st != ERG_OK, "%s %s: PyTorch refuses (%s) but ergon accepts", name, hdr,
                       line);
            ASSERT_EQ_INT(st, ERG_EINVAL);
            (*nrefused)++;
            line = strtok_r(NULL, "\n", &save);
            continue;
        }
        ASSERT_MSG(st == ERG_OK, "%s %s: ergon refuses: %s", name, hdr, err.msg);
        char *csv = NULL;
        ASSERT_OK(erg_order_format(o, 1, &csv, &err));
        char *rsave = NULL;
        char *row = strtok_r(csv, "\n", &rsave);
        for (int r = 0; r < P; r++) {
            ASSERT_MSG(line && row, "%s %s: rank %d missing", name, hdr, r);
            ASSERT_MSG(!strcmp(line, row), "%s %s rank %d:\n#  pytorch: %s\n#  ergon:   %s", name,
                       hdr, r, line, row);
            line = strtok_r(NULL, "\n", &save);
            row = strtok_r(NULL, "\n", &rsave);
        }
        ASSERT_MSG(!row, "%s %s: ergon has more ranks", name, hdr);
        erg_free(csv);
        erg_order_free(o);
        (*ncases)++;
    }
    erg__free(text);
}

#define GOLDEN_TEST(fn, file, name, min_cases, min_refused)                                        \
    TEST(fn)                                                                                       \
    {                                                                                              \
        int n = 0, r = 0;                                                                          \
        check_golden(file, name, &n, &r);                                                          \
        printf("# %s: %d cases equal to PyTorch, %d refusals equal\n", name, n, r);                \
        ASSERT(n >= (min_cases));                                                                  \
        ASSERT(r >= (min_refused));                                                                \
    }

GOLDEN_TEST(gpipe_equals_pytorch, "gpipe", "gpipe", 15, 0)
GOLDEN_TEST(interleaved_1f1b_equals_pytorch, "interleaved-1f1b", "interleaved-1f1b", 36, 9)
GOLDEN_TEST(looped_bfs_equals_pytorch, "looped-bfs", "looped-bfs", 45, 0)
GOLDEN_TEST(interleaved_zb_equals_pytorch, "interleaved-zb", "interleaved-zb", 36, 9)
GOLDEN_TEST(zbv_equals_pytorch, "zbv", "zbv", 15, 30)
GOLDEN_TEST(dualpipev_equals_pytorch, "dualpipev", "dualpipev", 9, 36)

/* ergon's 1F1B is the Perseus planner's (docs/schedules.md); PyTorch's Schedule1F1B pipeline order
 * agrees with it on every rank but the last, where PyTorch skips F0 and
 * writes F<M> (a bug in _get_pipeline_order, not in its runtime). */
TEST(one_f_one_b_equals_pytorch_except_its_last_rank)
{
    char path[512];
    snprintf(path, sizeof path, "%s/schedules/pytorch-1f1b.golden", ERG_TEST_DATA_DIR);
    char *text = slurp(path), *save = NULL;
    erg_schedule s = {.kind = ERG_SCHED_1F1B};
    erg_error err;
    int cases = 0, last_differs = 0;
    char *line = strtok_r(text, "\n", &save);
    while (line) {
        int P, V, M;
        if (sscanf(line, "## P=%d V=%d M=%d", &P, &V, &M) != 3) {
            line = strtok_r(NULL, "\n", &save);
            continue;
        }
        erg_order *o = NULL;
        ASSERT_OK(erg_order_new(&s, P, M, &o, &err));
        for (int r = 0; r < P; r++) {
            line = strtok_r(NULL, "\n", &save);
            ASSERT(line);
            /* ergon's actions of rank r, comma separated, without idle steps */
            const erg_instr *v;
            int n = erg_order_rank(o, r, &v);
            char mine[4096] = "", t[64];
            for (int k = 0; k < n; k++) {
                erg_instr_format(v[k], t, sizeof t);
                strcat(mine, k ? "," : "");
                strcat(mine, t);
            }
            char theirs[4096] = "";
            for (const char *p = line; *p; p++)
                if (!(*p == ',' && (p[1] == ',' || p[1] == 0 || p == line)))
                    strncat(theirs, p, 1);
            if (theirs[0] == ',')
                memmove(theirs, theirs + 1, strlen(theirs));
            if (r < P - 1)
                ASSERT_STR_EQ(mine, theirs);
            else {
                last_differs += strcmp(mine, theirs) != 0;
                char bad[32];
                snprintf(bad, sizeof bad, "%dF%d", r, M);
                ASSERT_CONTAINS(theirs, bad);
            }
        }
        erg_order_free(o);
        cases++;
        line = strtok_r(NULL, "\n", &save);
    }
    ASSERT(cases >= 15);
    ASSERT_EQ_INT(last_differs, cases);
    erg__free(text);
}

TEST(refusals_are_clear_errors)
{
    erg_error err;
    erg_order *o = NULL;
    erg_schedule s = {.kind = ERG_SCHED_ZBV, .chunks = 3};
    ASSERT_EQ_INT(erg_order_new(&s, 4, 8, &o, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "exactly 2 chunks");
    s = (erg_schedule){.kind = ERG_SCHED_DUALPIPEV};
    ASSERT_EQ_INT(erg_order_new(&s, 4, 7, &o, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "at least as many microbatches as stages");
    s = (erg_schedule){.kind = ERG_SCHED_INTERLEAVED_1F1B};
    ASSERT_EQ_INT(erg_order_new(&s, 4, 9, &o, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "multiple of the number of rounds");
    s = (erg_schedule){.kind = ERG_SCHED_GPIPE, .chunks = 2};
    ASSERT_EQ_INT(erg_order_new(&s, 4, 8, &o, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "--chunks must be 1");
    ASSERT(o == NULL);
}

TEST(dag_of_every_schedule_is_acyclic_with_expected_sizes)
{
    static const erg_schedule_kind kinds[] = {
        ERG_SCHED_GPIPE,          ERG_SCHED_1F1B, ERG_SCHED_INTERLEAVED_1F1B, ERG_SCHED_LOOPED_BFS,
        ERG_SCHED_INTERLEAVED_ZB, ERG_SCHED_ZBV,  ERG_SCHED_DUALPIPEV};
    erg_error err;
    for (size_t i = 0; i < ERG__ARRAY_LEN(kinds); i++) {
        erg_schedule s = {.kind = kinds[i]};
        int V = erg_schedule_chunks(&s), P = 4, M = 8;
        erg_dag *d = NULL;
        ASSERT_OK(erg_dag_new(&s, P, M, &d, &err));
        ASSERT_EQ_INT(erg_dag_num_stages(d), P);
        ASSERT_EQ_INT(erg_dag_num_pipeline_stages(d), P * V);
        int nf = 0, nb = 0, ni = 0, nw = 0, nov = 0, tot = 0;
        for (int r = 0; r < P; r++) {
            tot += erg_dag_rank_len(d, r);
            ASSERT_EQ_INT(erg_dag_rank_offset(d, r + 1),
                          erg_dag_rank_offset(d, r) + erg_dag_rank_len(d, r));
        }
        ASSERT_EQ_INT(tot, erg_dag_num_instrs(d));
        for (int id = 0; id < tot; id++) {
            int r;
            erg_instr in = erg_dag_instr(d, id, &r);
            nf += in.kind == ERG_FORWARD;
            nb += in.kind == ERG_BACKWARD;
            ni += in.kind == ERG_BACKWARD_INPUT;
            nw += in.kind == ERG_BACKWARD_WEIGHT;
            nov += in.kind == ERG_OVERLAP_F_B;
            ASSERT_EQ_INT(erg_order_stage_rank(erg_dag_order(d), in.stage), r);
            ASSERT_EQ_INT(erg_dag_instr_id(d, in.stage,
                                           in.kind == ERG_OVERLAP_F_B ? ERG_FORWARD : in.kind,
                                           in.microbatch),
                          id);
        }
        /* every (stage, microbatch) forwarded once and backwarded once */
        ASSERT_EQ_INT(nf + nov, P * V * M);
        ASSERT_EQ_INT(nb + ni + nov, P * V * M);
        ASSERT_EQ_INT(ni, nw);
        /* placement: loop or V */
        for (int st = 0; st < P * V; st++) {
            int want = erg_schedule_is_vshape(kinds[i]) && (st / P) % 2 ? P - 1 - st % P : st % P;
            ASSERT_EQ_INT(erg_order_stage_rank(erg_dag_order(d), st), want);
        }
        erg_dag_free(d);
    }
}

TEST(torch_csv_round_trips)
{
    static const erg_schedule_kind kinds[] = {ERG_SCHED_INTERLEAVED_ZB, ERG_SCHED_ZBV,
                                              ERG_SCHED_DUALPIPEV, ERG_SCHED_LOOPED_BFS};
    erg_error err;
    for (size_t i = 0; i < ERG__ARRAY_LEN(kinds); i++) {
        erg_schedule s = {.kind = kinds[i]};
        erg_order *o = NULL, *o2 = NULL;
        ASSERT_OK(erg_order_new(&s, 4, 12, &o, &err));
        char *a = NULL, *b = NULL;
        ASSERT_OK(erg_order_format(o, 1, &a, &err));
        ASSERT_OK(erg_order_parse_csv(a, strlen(a), "rt.csv", &o2, &err));
        ASSERT_OK(erg_order_format(o2, 1, &b, &err));
        ASSERT_STR_EQ(a, b);
        ASSERT_EQ_INT(erg_order_num_microbatches(o2), 12);
        ASSERT_EQ_INT(erg_order_num_stages(o2), 8);
        erg_free(a);
        erg_free(b);
        erg_order_free(o);
        erg_order_free(o2);
    }
}

static void expect_reject(const char *csv, const char *needle)
{
    erg_order *o = NULL;
    erg_error err;
    erg_status st = erg_order_parse_csv(csv, strlen(csv), "t.csv", &o, &err);
    ASSERT_MSG(st == ERG_EPARSE, "accepted: %s", csv);
    ASSERT(o == NULL);
    ASSERT_CONTAINS(err.msg, needle);
}

TEST(torch_csv_reader_rejects_bad_schedules_with_file_line_cell)
{
    /* a cycle: rank 0's 0B0 needs 1B0, which rank 1 runs after 1F1, which
     * needs 0F1, which rank 0 runs after 0B0 */
    expect_reject("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n", "deadlocks");
    expect_reject("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n", "t.csv:1:2 (0B0); t.csv:2:1 (1F1)");
    /* missing action */
    expect_reject("0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n", "missing action: stage 0 microbatch 1");
    /* repeated action */
    expect_reject("0F0,0F0,0B0\n1F0,1B0\n", "t.csv:1:2 (0F0): repeated action");
    /* W before its I */
    expect_reject("0F0,0W0,0I0\n1F0,1B0\n", "t.csv:1:2 (0W0): W before its I");
    /* backward before forward */
    expect_reject("0B0,0F0\n1F0,1B0\n", "t.csv:1:1 (0B0): backward before its forward");
    /* unknown action */
    expect_reject("0F0,0X0\n", "t.csv:1:2: unknown action '0X0'");
    expect_reject("0F0,(0F1;1B0)OVERLAP\n", "t.csv:1:2: unknown action");
    /* non-compute action */
    expect_reject("0F0,0SEND_F0,0B0\n", "t.csv:1:2: '0SEND_F0' is not a compute action");
    /* stage on two ranks */
    expect_reject("0F0,0B0\n0F1,0B1\n", "stage 0 is on rank 0 and rank 1");
    /* empty */
    expect_reject("", "empty schedule");
}

TEST(torch_csv_reader_accepts_idle_cells_and_overlap)
{
    const char *csv = "0F0,0F1,,3F0,3I0,3W0,3F1,(0F2;3B1)OVERLAP_F_B,0B0,0B1,0B2\n"
                      "1F0,2F0,1F1,2F1,,(1F2;2B0)OVERLAP_F_B,2F2,2I1,2W1,2B2,1B0,1I1,1W1,1B2\n"
                      ",,,,,,,,,,,,,,,,,,3F2,3B2\n";
    /* stage 3 is on rank 0 and also given rank 2 above: rejected */
    erg_order *o = NULL;
    erg_error err;
    ASSERT_EQ_INT(erg_order_parse_csv(csv, strlen(csv), "t.csv", &o, &err), ERG_EPARSE);
    const char *ok = "0F0,0F1,,3F0,3I0,3W0,3F1,(0F2;3B1)OVERLAP_F_B,3F2,3B2,0B0,0B1,0B2\n"
                     "1F0,2F0,1F1,2F1,,(1F2;2B0)OVERLAP_F_B,2F2,2I1,2W1,2B2,1B0,1I1,1W1,1B2\n";
    ASSERT_OK(erg_order_parse_csv(ok, strlen(ok), "t.csv", &o, &err));
    ASSERT_EQ_INT(erg_order_num_ranks(o), 2);
    ASSERT_EQ_INT(erg_order_num_stages(o), 4);
    ASSERT_EQ_INT(erg_order_num_microbatches(o), 3);
    const erg_instr *v;
    ASSERT_EQ_INT(erg_order_rank(o, 0, &v), 12);
    ASSERT_EQ_INT(v[6].kind, ERG_OVERLAP_F_B);
    ASSERT_EQ_INT(v[6].stage2, 3);
    ASSERT_EQ_INT(erg_order_rank_steps(o, 0, &v), 13);
    erg_order_free(o);
}

/* The accessors bindings use instead of mirroring erg_schedule, erg_instr and
 * erg_error (python/ergon): they read and write the very fields a C caller sees. */
TEST(binding_accessors_read_and_write_the_struct_fields)
{
    erg_schedule *sp = erg_schedule_new(ERG_SCHED_ENVPIPE);
    ASSERT(sp != NULL);
    ASSERT_EQ_INT(erg_schedule_get_kind(sp), ERG_SCHED_ENVPIPE);
    ASSERT_EQ_INT(erg_schedule_get_chunks(sp), 0);
    ASSERT_EQ_INT(erg_schedule_chunks(sp), 1);
    erg_schedule_set_max_inflight(sp, 7);
    erg_schedule_set_chunks(sp, 3);
    ASSERT_EQ_INT(sp->max_inflight, 7);
    ASSERT_EQ_INT(erg_schedule_get_max_inflight(sp), 7);
    ASSERT_EQ_INT(sp->chunks, 3);
    erg_error err;
    ASSERT_OK(erg_schedule_set_extra_warmup(sp, 0, 2, &err));
    ASSERT_OK(erg_schedule_set_extra_warmup(sp, ERG_SCHED_MAX_STAGES - 1, 5, &err));
    ASSERT_EQ_INT(sp->extra_warmup[0], 2);
    ASSERT_EQ_INT(sp->extra_warmup[ERG_SCHED_MAX_STAGES - 1], 5);
    ASSERT_EQ_INT(erg_schedule_get_extra_warmup(sp, ERG_SCHED_MAX_STAGES - 1), 5);
    ASSERT_EQ_INT(erg_schedule_get_extra_warmup(sp, ERG_SCHED_MAX_STAGES), 0);
    ASSERT_EQ_INT(erg_schedule_get_extra_warmup(sp, -1), 0);
    ASSERT_EQ_INT(erg_schedule_set_extra_warmup(sp, ERG_SCHED_MAX_STAGES, 1, &err), ERG_EINVAL);
    ASSERT_CONTAINS(erg_error_message(&err), "stage 64");
    ASSERT_EQ_INT(erg_error_status(&err), ERG_EINVAL);
    ASSERT_EQ_INT(erg_schedule_set_extra_warmup(sp, -1, 1, &err), ERG_EINVAL);
    erg_schedule_free(sp);
    erg_schedule_free(NULL);

    /* erg_error as opaque zeroed storage */
    ASSERT_EQ_INT((int)erg_error_size(), (int)sizeof(erg_error));
    char *raw = calloc(1, erg_error_size());
    ASSERT(raw != NULL);
    ASSERT_STR_EQ(erg_error_message((erg_error *)raw), "");
    ASSERT_EQ_INT(erg_error_status((erg_error *)raw), ERG_OK);
    memset(raw, 'x', erg_error_size()); /* no NUL: never read past the array */
    ASSERT_STR_EQ(erg_error_message((erg_error *)raw), "");
    free(raw);
    ASSERT_STR_EQ(erg_error_message(NULL), "");

    /* instructions as ints, for every field, from an order and from a fresh array */
    erg_schedule dv = {.kind = ERG_SCHED_DUALPIPEV};
    erg_order *o;
    ASSERT_OK(erg_order_new(&dv, 2, 4, &o, &err));
    const erg_instr *v;
    int n = erg_order_rank(o, 0, &v);
    ASSERT(n > 0);
    int overlaps = 0;
    for (int i = 0; i < n; i++) {
        int f[ERG_INSTR_NUM_FIELDS];
        erg_instr_get(v, (size_t)i, f);
        ASSERT_EQ_INT(f[0], (int)v[i].kind);
        ASSERT_EQ_INT(f[1], v[i].stage);
        ASSERT_EQ_INT(f[2], v[i].microbatch);
        ASSERT_EQ_INT(f[3], (int)v[i].kind2);
        ASSERT_EQ_INT(f[4], v[i].stage2);
        ASSERT_EQ_INT(f[5], v[i].microbatch2);
        overlaps += v[i].kind == ERG_OVERLAP_F_B;
    }
    ASSERT(overlaps > 0);
    erg_order_free(o);
    erg_instr *arr = erg_instr_array_new(8);
    ASSERT(arr != NULL);
    ASSERT(erg_instr_array_new(0) == NULL);
    erg_schedule one = {.kind = ERG_SCHED_1F1B};
    ASSERT_OK(erg_schedule_stage_order(&one, 2, 4, 1, arr, &err));
    int f[ERG_INSTR_NUM_FIELDS];
    erg_instr_get(arr, 1, f);
    ASSERT_EQ_INT(f[0], ERG_BACKWARD); /* stage 1 of 2: F0 B0 F1 B1 ... */
    ASSERT_EQ_INT(f[2], 0);
    erg_free(arr);
}

TAP_MAIN(TEST_ENTRY(binding_accessors_read_and_write_the_struct_fields),
         TEST_ENTRY(gpipe_equals_pytorch), TEST_ENTRY(interleaved_1f1b_equals_pytorch),
         TEST_ENTRY(looped_bfs_equals_pytorch), TEST_ENTRY(interleaved_zb_equals_pytorch),
         TEST_ENTRY(zbv_equals_pytorch), TEST_ENTRY(dualpipev_equals_pytorch),
         TEST_ENTRY(one_f_one_b_equals_pytorch_except_its_last_rank),
         TEST_ENTRY(refusals_are_clear_errors),
         TEST_ENTRY(dag_of_every_schedule_is_acyclic_with_expected_sizes),
         TEST_ENTRY(torch_csv_round_trips),
         TEST_ENTRY(torch_csv_reader_rejects_bad_schedules_with_file_line_cell),
         TEST_ENTRY(torch_csv_reader_accepts_idle_cells_and_overlap))
