/* profile.h: a stage profile: (stage, instruction, clock) -> time_s, energy_j. */
#ifndef ERGON_PROFILE_H
#define ERGON_PROFILE_H

#include "ergon/ergon.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Instruction kinds a pipeline stage runs. */
typedef enum erg_instr_kind {
    ERG_FORWARD = 0,
    ERG_BACKWARD = 1,        /* full backward (B) */
    ERG_BACKWARD_INPUT = 2,  /* zero-bubble backward for inputs (I) */
    ERG_BACKWARD_WEIGHT = 3, /* zero-bubble backward for weights (W) */
    ERG_OVERLAP_F_B = 4,     /* DualPipeV: a forward and a backward run as one step
                                (pipeline.h; never a profile row) */
} erg_instr_kind;
/* Kinds a profile stores rows for: forward, backward, and optionally
 * backward_input / backward_weight (zero-bubble I and W; where a stage lacks
 * them, pipeline.h's cost helper derives them from backward). */
#define ERG_NUM_INSTR_KINDS 4

/* "forward" / "backward". */
ERG_API const char *erg_instr_kind_name(erg_instr_kind kind);

/* One measured operating point. */
typedef struct erg_profile_point {
    int freq_mhz;    /* SM clock. */
    double time_s;   /* Mean wall time of one instruction (one microbatch). */
    double energy_j; /* Mean GPU energy of one instruction. */
} erg_profile_point;

/* Physical bounds on a profile point (rows outside are rejected, naming the
 * bound): a clock in [1, 10000] MHz, a time in [1 ns, 1 day], an energy in
 * [0, 1e9 J] and an average power (energy / time) of at most 100 kW. */
#define ERG_PROFILE_MAX_FREQ_MHZ 10000
#define ERG_PROFILE_MIN_TIME_S 1e-9
#define ERG_PROFILE_MAX_TIME_S 86400.0
#define ERG_PROFILE_MAX_ENERGY_J 1e9
#define ERG_PROFILE_MAX_POWER_W 1e5

/* Opaque profile: for every stage and instruction kind, the points in the
 * order they were added (file order). Not thread-safe for writers; readers of
 * a finished profile may share it. */
typedef struct erg_profile erg_profile;

/* Read the Perseus/Zeus stage-profile CSV: header with the columns
 * `stage,instruction,frequency,time,energy` (any order, extra columns and
 * instruction kinds other than forward, backward, backward_input and
 * backward_weight are ignored; a UTF-8 byte order mark is skipped). Rejected
 * with ERG_EPARSE and "file:line: what is wrong": missing column, a value that
 * is not a decimal number (hexadecimal included), a value outside the
 * physical bounds above (naming the bound), a duplicate (stage, instruction,
 * frequency), a gap in the stage numbers, a stage without forward or backward
 * rows, a stage with backward_input but no backward_weight rows (or the
 * reverse), an empty file. */
ERG_API erg_status erg_profile_read_csv(const char *path, erg_profile **out, erg_error *err);
/* The same on an in-memory text; `name` is used in messages. */
ERG_API erg_status erg_profile_parse_csv(const char *text, size_t len, const char *name,
                                         erg_profile **out, erg_error *err);
/* Write the CSV (stage, then rows in insertion order, forward before backward
 * at the same clock when both exist). */
ERG_API erg_status erg_profile_write_csv(const erg_profile *p, const char *path, erg_error *err);

/* An empty profile, for building one (simulator, client logs). */
ERG_API erg_status erg_profile_new(erg_profile **out, erg_error *err);
/* Add a point; fails with ERG_EINVAL on a duplicate or a value outside the
 * physical bounds above. */
ERG_API erg_status erg_profile_add(erg_profile *p, int stage, erg_instr_kind kind,
                                   const erg_profile_point *pt, erg_error *err);
/* Check the whole profile is usable (stages 0..n-1, each with forward and
 * backward points). */
ERG_API erg_status erg_profile_validate(const erg_profile *p, erg_error *err);
ERG_API void erg_profile_free(erg_profile *p);

/* Number of stages (highest stage index + 1). */
ERG_API int erg_profile_num_stages(const erg_profile *p);
/* Where the profile's energies come from: "" (unknown: files without the optional
 * `energy_source` column), "counter" (the GPU's energy counter), "integrated" (power
 * integrated by ergon where the counter could not be trusted), "model" (the simulated
 * GPU) or "mixed" (rows differ). The CSV reader takes it from the `energy_source` column
 * (one of those words per row); the writer adds the column when it is set. */
ERG_API const char *erg_profile_energy_source(const erg_profile *p);
/* Set it ("" clears); ERG_EINVAL for another word. */
ERG_API erg_status erg_profile_set_energy_source(erg_profile *p, const char *source,
                                                 erg_error *err);
/* Number of points of (stage, kind); 0 when absent. */
ERG_API size_t erg_profile_num_points(const erg_profile *p, int stage, erg_instr_kind kind);
/* The points of (stage, kind) (valid until the profile changes), or NULL. */
ERG_API const erg_profile_point *erg_profile_points(const erg_profile *p, int stage,
                                                    erg_instr_kind kind);
/* Find the point of (stage, kind) at freq_mhz; ERG_ENOTFOUND if absent. */
ERG_API erg_status erg_profile_lookup(const erg_profile *p, int stage, erg_instr_kind kind,
                                      int freq_mhz, erg_profile_point *out, erg_error *err);

/* A fingerprint of the profile's rows, for plans to record where they came from: FNV-1a
 * (64 bits) of every (stage, instruction, clock, time, energy) row, sorted by stage,
 * instruction and clock, with times and energies printed to 17 digits; written
 * "fnv1a64:" and 16 hex digits. Two profiles with the same rows in any order agree. */
#define ERG_PROFILE_FINGERPRINT_LEN 25
ERG_API void erg_profile_fingerprint(const erg_profile *p, char out[ERG_PROFILE_FINGERPRINT_LEN]);

/* Published P2P blocking power of a GPU ("A40": 70.38 W, "A100": 83.64 W, case
 * insensitive; "A100-SXM"/"a100_sxm" map to A100). ERG_ENOTFOUND otherwise. */
ERG_API erg_status erg_blocking_power_w(const char *gpu, double *power_w, erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
