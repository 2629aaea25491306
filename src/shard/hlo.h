/* hlo.h: the in-memory form of a parsed XLA HLO text module (private to src/shard/). */
#ifndef ERGON_SHARD_HLO_H
#define ERGON_SHARD_HLO_H

#include "core/internal.h"
#include "ergon/shard.h"

#define HLO_MAX_RANK 16

enum hlo_shape_kind { HLO_ARRAY = 0, HLO_TUPLE = 1, HLO_TOKEN = 2 };

typedef struct hlo_shape {
    int kind;  /* enum hlo_shape_kind */
    int dtype; /* index into the dtype table (erg__hlo_dtype_name) */
    int rank;
    int64_t dims[HLO_MAX_RANK];
    int nelems; /* tuple elements */
    struct hlo_shape *elems;
} hlo_shape;

/* Opcodes the analysis distinguishes; everything else is HLO_OP_OTHER plus its text. */
typedef enum hlo_op {
    HLO_OP_OTHER = 0,
    HLO_OP_PARAMETER,
    HLO_OP_CONSTANT,
    HLO_OP_IOTA,
    HLO_OP_BROADCAST,
    HLO_OP_TRANSPOSE,
    HLO_OP_RESHAPE,
    HLO_OP_BITCAST,
    HLO_OP_COPY,
    HLO_OP_CONVERT,
    HLO_OP_REDUCE,
    HLO_OP_DOT,
    HLO_OP_CONVOLUTION,
    HLO_OP_GTE,
    HLO_OP_TUPLE,
    HLO_OP_CUSTOM_CALL,
    HLO_OP_ELEMENTWISE,
    HLO_OP_SLICE,
    HLO_OP_PAD,
    HLO_OP_CONCATENATE,
    HLO_OP_GATHER,
    HLO_OP_SCATTER,
    HLO_OP_CALL,
    HLO_OP_WHILE,
    HLO_OP_FUSION,
    HLO_OP_COLLECTIVE,
    HLO_OP_RNG,
} hlo_op;

typedef struct hlo_attr {
    char *key;
    size_t off, len; /* value text in the module text */
} hlo_attr;

typedef struct hlo_instr {
    char *name;   /* without '%' */
    char *opcode; /* as written */
    hlo_op op;
    hlo_shape shape;
    int nops;
    int *ops;        /* operand indices in the same computation */
    char **op_names; /* operand names until resolution, then NULL */
    int nattrs;
    hlo_attr *attrs;
    size_t start, end;       /* text span of the whole instruction */
    size_t lit_off, lit_len; /* text inside the parens of constant/parameter */
    long param_num;
    bool root;
} hlo_instr;

typedef struct hlo_comp {
    char *name;
    bool entry;
    int n;
    size_t cap;
    hlo_instr *ins;
    int root;
    size_t start;
    /* name -> index, open addressing */
    int *slots;
    size_t nslots;
} hlo_comp;

struct erg_hlo_module {
    char *text;
    size_t len;
    char *filename;
    char *name;
    size_t header_end; /* end of the HloModule header line's attributes */
    bool has_num_partitions;
    long num_partitions, num_replicas; /* header values, 1 when absent */
    int ncomps;
    size_t capcomps;
    hlo_comp *comps;
    int entry;
};

const char *erg__hlo_dtype_name(int dtype);
/* Bytes per element (sub-byte types round up to 1). */
double erg__hlo_dtype_bytes(int dtype);
int64_t erg__hlo_shape_elems(const hlo_shape *s);
double erg__hlo_shape_bytes(const hlo_shape *s);
const hlo_attr *erg__hlo_find_attr(const hlo_instr *in, const char *key);
/* Parse an attribute value of the form {1,2,3} into ints; returns count or -1. */
int erg__hlo_attr_ints(const erg_hlo_module *m, const hlo_instr *in, const char *key, int64_t *out,
                       int max);
/* Copy of an attribute value (caller frees with erg__free) or NULL. */
char *erg__hlo_attr_str(const erg_hlo_module *m, const hlo_instr *in, const char *key);
/* 1-based line and column of a text offset. */
void erg__hlo_line_col(const erg_hlo_module *m, size_t off, long *line, long *col);
int erg__hlo_find_comp(const erg_hlo_module *m, const char *name);
/* True when b has a's computations, instructions (names, opcodes, shapes, operands, literals)
 * and attributes, in order, apart from attributes keyed skip_key (may be NULL) and the module
 * header's num_partitions; otherwise false with the first difference in why. */
/* HLO text queries (hlo_query.c). Trip count of the while loop whose body is computation ci
 * (backend_config known_trip_count, else the condition's compare with a constant; 0 when
 * unknown or no loop body); *loop names the while instruction or is NULL. */
long erg__hlo_trip_count(const erg_hlo_module *m, int ci, const char **loop);
/* EINVAL with the line when the module is already partitioned (collectives over device
 * groups, partition-id/replica-id, or num_partitions > 1 without sharding annotations). */
erg_status erg__hlo_check_unpartitioned(const erg_hlo_module *m, erg_error *err);
bool erg__hlo_module_same(const erg_hlo_module *a, const erg_hlo_module *b, const char *skip_key,
                          char *why, size_t whylen);

#endif
