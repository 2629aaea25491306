/* test_shard_values.c: the plan per parameter and output (values.c), read in process as
 * ergon.jax reads it: the mesh axes of every dim agree with the sharding annotate writes and
 * the plan JSON lists, why a value stays replicated, block costs, errors. */
#include "shard/shard_internal.h"
#include "tap.h"

#include <jansson.h>

#define ASSERT_OK_E(call, e)                                                                       \
    do {                                                                                           \
        erg_status _st = (call);                                                                   \
        ASSERT_MSG(_st == ERG_OK, "%s failed: %s", #call, (e).msg);                                \
    } while (0)

static erg_hlo_module *parse(const char *t)
{
    erg_hlo_module *m = NULL;
    erg_error err;
    ASSERT_OK_E(erg_hlo_parse(t, strlen(t), "t.hlo", &m, &err), err);
    return m;
}

static erg_hlo_module *load(const char *path)
{
    erg_hlo_module *m = NULL;
    erg_error err;
    ASSERT_OK_E(erg_hlo_load(path, &m, &err), err);
    return m;
}

/* The ERG_SHARD_AXIS* bits of a spec code, as values.c documents them. */
static unsigned bits_of(const erg_shard *s, int8_t c)
{
    return ((c == 0 || c == SP_BOTH) && s->mesh[0] > 1 ? ERG_SHARD_AXIS0 : 0) |
           ((c == 1 || c == SP_BOTH) && s->mesh[1] > 1 ? ERG_SHARD_AXIS1 : 0);
}

/* Every parameter's axes equal the sharding the plan JSON gives it (the text annotate
 * writes, which tools/shard_xla.py has XLA compile); a replicated one has a reason, a split
 * one none. Returns the number of split parameters. */
static int check_params_match_json(erg_shard *s, const erg_shard_plan *p)
{
    erg_error err;
    char *js = NULL;
    ASSERT_OK_E(erg_shard_plan_json(s, p, &js, &err), err);
    json_t *root = json_loads(js, 0, NULL);
    ASSERT(root);
    json_t *params = json_object_get(root, "parameters");
    size_t n = erg_shard_num_values(s, ERG_SHARD_PARAMETER);
    ASSERT_EQ_INT((long)json_array_size(params), (long)n);
    int split = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *q = json_array_get(params, i);
        ASSERT_EQ_INT((long)json_integer_value(json_object_get(q, "number")), (long)i);
        ASSERT_STR_EQ(erg_shard_value_name(s, ERG_SHARD_PARAMETER, i),
                      json_string_value(json_object_get(q, "name")));
        ASSERT_EQ_INT(erg_shard_value_block(s, ERG_SHARD_PARAMETER, i),
                      (long)json_integer_value(json_object_get(q, "block")));
        const char *txt = json_string_value(json_object_get(q, "sharding"));
        int rank = erg_shard_value_rank(s, ERG_SHARD_PARAMETER, i);
        ASSERT(rank >= 0);
        spec sp;
        ASSERT_MSG(erg__shard_parse_sharding(s, txt, strlen(txt), rank, &sp), "%s", txt);
        unsigned axes[HLO_MAX_RANK];
        char why[300];
        ASSERT_OK_E(erg_shard_value_axes(s, p, ERG_SHARD_PARAMETER, i, axes, HLO_MAX_RANK, why,
                                         sizeof why, &err),
                    err);
        bool any = false;
        for (int d = 0; d < rank; d++) {
            ASSERT_MSG(axes[d] == bits_of(s, sp.d[d]), "parameter %zu dim %d: axes %u, %s", i, d,
                       axes[d], txt);
            any |= axes[d] != 0;
        }
        ASSERT_MSG(any == (strcmp(txt, "{replicated}") != 0), "parameter %zu: %s", i, txt);
        ASSERT_MSG(any == (why[0] == '\0'), "parameter %zu: %s, why '%s'", i, txt, why);
        split += any;
    }
    json_decref(root);
    erg_free(js);
    return split;
}

static erg_shard_plan *given(erg_shard *s, size_t k)
{
    size_t n = erg_shard_num_blocks(s), v[64];
    ASSERT(n <= 64);
    for (size_t b = 0; b < n; b++)
        v[b] = k % erg_shard_block_num_strategies(s, b);
    erg_shard_plan *p = NULL;
    erg_error err;
    ASSERT_OK_E(erg_shard_plan_given(s, v, n, &p, &err), err);
    return p;
}

TEST(mlp_axes_equal_the_annotated_shardings_on_every_mesh_and_strategy)
{
    erg_hlo_module *m = load(ERG_TEST_DATA_DIR "/shard_mlp.hlo");
    static const int meshes[][2] = {{1, 4}, {2, 2}, {1, 8}, {2, 4}};
    unsigned seen = 0; /* axis bit combinations met: a check that reads only one proves little */
    for (int t = 0; t < 4; t++) {
        erg_shard *s = NULL;
        erg_error err;
        ASSERT_OK_E(erg_shard_analyze(m, meshes[t][0], meshes[t][1], &s, &err), err);
        ASSERT_OK_E(erg_shard_profile_device(s, NULL, &err), err);
        int m0, m1;
        erg_shard_mesh(s, &m0, &m1);
        ASSERT_EQ_INT(m0, meshes[t][0]);
        ASSERT_EQ_INT(m1, meshes[t][1]);
        ASSERT_EQ_INT((long)erg_shard_num_values(s, ERG_SHARD_PARAMETER), 4);
        ASSERT_EQ_INT((long)erg_shard_num_values(s, ERG_SHARD_OUTPUT), 3);
        /* the searched plan and every strategy index given to all blocks */
        erg_shard_plan *p = NULL;
        ASSERT_OK_E(erg_shard_search(s, ERG_SHARD_DP, 60, &p, &err), err);
        ASSERT(check_params_match_json(s, p) > 0);
        erg_shard_plan_free(p);
        for (size_t k = 0; k < 12; k++) {
            p = given(s, k);
            check_params_match_json(s, p);
            for (size_t i = 0; i < 4; i++) {
                unsigned ax[2];
                ASSERT_OK_E(
                    erg_shard_value_axes(s, p, ERG_SHARD_PARAMETER, i, ax, 2, NULL, 0, &err), err);
                seen |= 1u << (ax[0] | (ax[1] << 2));
            }
            /* output e is ROOT operand e: dw1, dw2, dx, each as its producer is planned */
            static const char *const outs[] = {"dw1", "dw2", "dx"};
            for (size_t e = 0; e < 3; e++) {
                ASSERT_STR_EQ(erg_shard_value_name(s, ERG_SHARD_OUTPUT, e), outs[e]);
                unsigned ax[2];
                ASSERT_OK_E(erg_shard_value_axes(s, p, ERG_SHARD_OUTPUT, e, ax, 2, NULL, 0, &err),
                            err);
                const spec *sp = erg__shard_plan_spec(s, p, s->c->ins[s->c->root].ops[e]);
                bool tiled = sp && erg__shard_tiles(s, sp, 2) > 1;
                for (int d = 0; d < 2; d++)
                    ASSERT_EQ_INT((long)ax[d], tiled ? (long)bits_of(s, sp->d[d]) : 0);
            }
            erg_shard_plan_free(p);
        }
        erg_shard_free(s);
    }
    /* axis 0 alone, axis 1 alone and both on one dim all occurred on some dim 0 */
    ASSERT_MSG(seen & (1u << ERG_SHARD_AXIS0), "seen %#x", seen);
    ASSERT_MSG(seen & (1u << ERG_SHARD_AXIS1), "seen %#x", seen);
    ASSERT_MSG(seen & (1u << (ERG_SHARD_AXIS0 | ERG_SHARD_AXIS1)), "seen %#x", seen);
    erg_hlo_free(m);
}

/* x[8,6] . w[6,5]: on 1x4 only the batch dim divides; w cannot be split by any strategy, the
 * scalar and the vector no dot reads have no block. Each gets its reason, nothing fails. */
static const char *const ODD =
    "HloModule odd\n"
    "ENTRY e {\n"
    "  x = f32[8,6] parameter(0)\n"
    "  w = f32[6,5] parameter(1)\n"
    "  c = f32[] parameter(2)\n"
    "  v = f32[7] parameter(3)\n"
    "  h = f32[8,5] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  n = f32[7] negate(v)\n"
    "  ROOT r = (f32[8,5], f32[7], f32[]) tuple(h, n, c)\n"
    "}\n";

TEST(unsplittable_values_are_replicated_with_a_reason)
{
    erg_hlo_module *m = parse(ODD);
    erg_shard *s = NULL;
    erg_error err;
    ASSERT_OK_E(erg_shard_analyze(m, 1, 4, &s, &err), err);
    ASSERT_OK_E(erg_shard_profile_device(s, "a100-nvlink", &err), err);
    erg_shard_plan *p = NULL;
    ASSERT_OK_E(erg_shard_search(s, ERG_SHARD_DP, 60, &p, &err), err);
    check_params_match_json(s, p);
    unsigned ax[2];
    char why[300];
    ASSERT_OK_E(erg_shard_value_axes(s, p, ERG_SHARD_PARAMETER, 1, ax, 2, why, sizeof why, &err),
                err);
    ASSERT(ax[0] == 0 && ax[1] == 0);
    ASSERT_CONTAINS(why, "no strategy of block");
    ASSERT_CONTAINS(why, "splits [6,5] on the 1x4 mesh");
    ASSERT_OK_E(erg_shard_value_axes(s, p, ERG_SHARD_PARAMETER, 2, ax, 0, why, sizeof why, &err),
                err);
    ASSERT_STR_EQ(why, "a scalar");
    ASSERT_OK_E(erg_shard_value_axes(s, p, ERG_SHARD_PARAMETER, 3, ax, 1, why, sizeof why, &err),
                err);
    ASSERT_EQ_INT((long)ax[0], 0);
    ASSERT_CONTAINS(why, "no block owns it");
    ASSERT_EQ_INT(erg_shard_value_block(s, ERG_SHARD_PARAMETER, 3), -1);
    /* x splits on its batch dim over axis 1 (the only axis of size > 1) */
    ASSERT_OK_E(erg_shard_value_axes(s, p, ERG_SHARD_PARAMETER, 0, ax, 2, why, sizeof why, &err),
                err);
    ASSERT_EQ_INT((long)ax[0], (long)ERG_SHARD_AXIS1);
    ASSERT_EQ_INT((long)ax[1], 0);
    ASSERT_STR_EQ(why, "");
    ASSERT_EQ_INT((long)erg_shard_num_values(s, ERG_SHARD_OUTPUT), 3);
    ASSERT_OK_E(erg_shard_value_axes(s, p, ERG_SHARD_OUTPUT, 0, ax, 2, why, sizeof why, &err), err);
    ASSERT_EQ_INT((long)ax[0], (long)ERG_SHARD_AXIS1);
    ASSERT_STR_EQ(erg_shard_value_name(s, ERG_SHARD_OUTPUT, 2), "c");
    ASSERT_EQ_INT(erg_shard_value_rank(s, ERG_SHARD_OUTPUT, 2), 0);
    erg_shard_plan_free(p);
    erg_shard_free(s);
    erg_hlo_free(m);
}

TEST(block_costs_and_errors)
{
    erg_hlo_module *m = load(ERG_TEST_DATA_DIR "/shard_mlp.hlo");
    erg_shard *s = NULL;
    erg_error err;
    ASSERT_OK_E(erg_shard_analyze(m, 2, 2, &s, &err), err);
    double t = -1, c = -1, mem = -1;
    ASSERT_EQ_INT(erg_shard_block_cost(s, 0, 0, &t, &c, &mem, &err), ERG_ESTATE);
    ASSERT_CONTAINS(err.msg, "run erg_shard_profile first");
    ASSERT_EQ_INT(erg_shard_profile_device(s, "no-such-device", &err), ERG_ENOTFOUND);
    ASSERT_CONTAINS(err.msg, "no-such-device");
    ASSERT_OK_E(erg_shard_profile_device(s, NULL, &err), err);
    size_t nb = erg_shard_num_blocks(s);
    ASSERT(nb > 0);
    for (size_t b = 0; b < nb; b++)
        for (size_t k = 0; k < erg_shard_block_num_strategies(s, b); k++) {
            ASSERT_OK_E(erg_shard_block_cost(s, b, k, &t, &c, &mem, &err), err);
            ASSERT_MSG(t > 0 && c >= 0 && c <= t && mem > 0, "block %zu k %zu: %g %g %g", b, k, t,
                       c, mem);
            ASSERT(t == s->pbs[s->order[b]].time_s[k]);
        }
    ASSERT_EQ_INT(erg_shard_block_cost(s, nb, 0, &t, NULL, NULL, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "out of range");
    ASSERT_EQ_INT(erg_shard_block_cost(s, 0, 999, NULL, NULL, NULL, &err), ERG_EINVAL);
    erg_shard_plan *p = NULL;
    ASSERT_OK_E(erg_shard_search(s, ERG_SHARD_DP, 60, &p, &err), err);
    unsigned ax[2];
    ASSERT_EQ_INT(erg_shard_value_axes(s, p, ERG_SHARD_PARAMETER, 4, ax, 2, NULL, 0, &err),
                  ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "parameter 4 out of range (4)");
    ASSERT_EQ_INT(erg_shard_value_axes(s, p, ERG_SHARD_OUTPUT, 0, ax, 1, NULL, 0, &err),
                  ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "output 0 has rank 2, room for 1 axes");
    ASSERT_EQ_INT(erg_shard_value_axes(NULL, p, ERG_SHARD_OUTPUT, 0, ax, 2, NULL, 0, &err),
                  ERG_EINVAL);
    ASSERT(erg_shard_value_name(s, ERG_SHARD_OUTPUT, 3) == NULL);
    ASSERT_EQ_INT(erg_shard_value_rank(s, ERG_SHARD_PARAMETER, 9), -1);
    ASSERT_EQ_INT((long)erg_shard_num_values(NULL, ERG_SHARD_PARAMETER), 0);
    erg_shard_plan_free(p);
    erg_shard_free(s);
    erg_hlo_free(m);
}

TAP_MAIN(TEST_ENTRY(mlp_axes_equal_the_annotated_shardings_on_every_mesh_and_strategy),
         TEST_ENTRY(unsplittable_values_are_replicated_with_a_reason),
         TEST_ENTRY(block_costs_and_errors))
