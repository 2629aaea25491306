/* client_internal.h: records the client keeps and the aggregation that turns them into profiles. */
#ifndef ERGON_CLIENT_INTERNAL_H
#define ERGON_CLIENT_INTERNAL_H

#include "core/internal.h"
#include "ergon/client.h"

/* One timed instruction. Times are epoch seconds. */
typedef struct erg__instr_rec {
    int kind;       /* erg_instr_kind, or -1 for an instruction we do not profile. */
    int microbatch; /* Microbatch index, -1 if unknown. */
    double start_s, end_s;
    int freq_start; /* SM clock applied when it began (0 = unknown / not locked). */
    int freq_end;   /* ... and when it ended. */
    int chunk;      /* the chunk the hooks named (0 for the plain hooks and read logs) */
    int freq_run;   /* the clock it ran at (docs/runtime.md, "Logs"): the clock in effect once
                       its own clock request was handled, seen at begin or by a sync before
                       end; -1 when that was not seen (logs before the column: -1 too) */
} erg__instr_rec;

/* One energy counter sample: epoch seconds, cumulative joules, and where the reading came
 * from (erg_energy_source: the increase since the previous sample was measured that way), or
 * ERG__SOURCE_UNKNOWN (logs written before the energy_source column). */
typedef struct erg__energy_sample {
    double time_s;
    double energy_j;
    int source;
} erg__energy_sample;
#define ERG__SOURCE_UNKNOWN (-1)

/* Sets of sources: bit 0 unknown, bit 1 + s source s. */
static inline unsigned erg__source_bit(int source)
{
    return source >= 0 && source < 8 ? 2u << source : 1u;
}
/* The word of a set: "" (empty or all unknown), the one source's name, or "mixed" (two or
 * more, unknown included, as the stage profile CSV says when rows differ). */
const char *erg__source_set_word(unsigned set);
/* Sample i's source from its energy_source word; false for another word. */
bool erg__source_parse(const char *word, int *source);

/* Energy between t0 and t1 from the piecewise-linear cumulative curve of
 * `n` samples (time non-decreasing). ERG_EINVAL if [t0, t1] is not inside
 * the sampled range. *sources (may be NULL) gains the sources of the samples whose increase
 * the energy is made of (each sample stands for the increase since its predecessor). */
erg_status erg__energy_between(const erg__energy_sample *s, size_t n, double t0, double t1,
                               double *energy_j, unsigned *sources);

/* Add to `p` the rows of one stage: group records by (kind, clock) where
 * freq_start == freq_end > 0, drop the first 10% (rounded down) of each group
 * in record order if drop_warmup, and add the mean time and energy, clocks
 * in descending order. A record outside the sampled energy range is an
 * error. `name` is used in messages. *sources (may be NULL) gains the sources of the
 * samples behind the rows (erg__source_set_word names them). */
erg_status erg__aggregate_stage(erg_profile *p, int stage, const erg__instr_rec *recs, size_t nrecs,
                                const erg__energy_sample *samples, size_t nsamples,
                                bool drop_warmup, const char *name, unsigned *sources,
                                erg_error *err);

/* Profiling mode's early stop (docs/runtime.md): after the window of
 * clock index i (0-based, clocks descending) of n with mean iteration energy
 * e, given the previous window's energy prev (NAN for the first) and the
 * running count *ups of consecutive increases: true when the energy went up
 * five times in a row and at least the first third of the clocks is done. */
bool erg__profile_early_stop(int *ups, double prev, double e, size_t i, size_t n);

/* Parse an instructions-<rank>.csv / time-energy-<rank>.csv text (`name`
 * in messages). *out is allocated with erg__malloc. */
erg_status erg__parse_instructions(const char *text, size_t len, const char *name,
                                   erg__instr_rec **out, size_t *n, erg_error *err);
erg_status erg__parse_energy(const char *text, size_t len, const char *name,
                             erg__energy_sample **out, size_t *n, erg_error *err);

#endif
