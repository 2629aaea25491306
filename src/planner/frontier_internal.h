/* frontier_internal.h: building a frontier incrementally (planner-private). */
#ifndef ERGON_FRONTIER_INTERNAL_H
#define ERGON_FRONTIER_INTERNAL_H

#include "ergon/planner.h"

#include <stdbool.h>
#include <stddef.h>

erg_status erg__frontier_new(int S, int M, const erg_schedule *sched, double unit_s,
                             double blocking_power_w, erg_frontier **out, erg_error *err);
/* Clocks of the state before plan 0 (id order = plan layout). */
erg_status erg__frontier_set_initial(erg_frontier *f, const int *freq, erg_error *err);
/* Append a plan: begin, add the clocks that changed since the previous plan,
 * end with the full current clocks (used for periodic checkpoints). */
erg_status erg__frontier_begin_plan(erg_frontier *f, const erg_frontier_point *pt, erg_error *err);
erg_status erg__frontier_add_change(erg_frontier *f, int instr, int freq_mhz, erg_error *err);
erg_status erg__frontier_end_plan(erg_frontier *f, const int *freq, erg_error *err);

/* For the packed plan file (frontier_pack.c). */
bool erg__frontier_computed(const erg_frontier *f); /* not read from plan files */
const erg_schedule *erg__frontier_schedule(const erg_frontier *f);
/* Rank r's clocks are [off[r], off[r+1]) of a plan's clocks (S+1 entries:
 * each rank's instruction count, as the schedule's order gives it). */
const int *erg__frontier_rank_offsets(const erg_frontier *f);
/* Each rank's instructions in run order (NULL before the first plan). */
const erg_order *erg__frontier_order(const erg_frontier *f);
/* Computed frontiers: freq (plan k-1's clocks; anything for k = 0) becomes
 * plan k's clocks. */
void erg__frontier_advance(const erg_frontier *f, size_t k, int *freq);
/* Computed frontiers: plan k's clocks into freq, from the nearest checkpoint. */
void erg__frontier_replay(const erg_frontier *f, size_t k, int *freq);
/* DIR/plans.ergon (docs/formats.md): every plan, or every `every`-th and the
 * last; *kept plans, *bytes written (may be NULL). */
#define ERG__PACKED_NAME "plans.ergon"
/* The fingerprint a plans.ergon header names (read_packed; "" for none). */
void erg__frontier_set_stored_fingerprint(erg_frontier *f, const char *fp);
const char *erg__frontier_stored_fingerprint(const erg_frontier *f); /* NULL: computed */
/* The last plan is the all-max fallback (a plans.ergon header line "fallback all_max"). */
void erg__frontier_set_fallback(erg_frontier *f);
erg_status erg__frontier_write_packed(const erg_frontier *f, const char *path, size_t every,
                                      size_t *kept, size_t *bytes, erg_error *err);
erg_status erg__frontier_parse_packed(const char *text, size_t len, const char *name,
                                      const erg_schedule *hint, erg_frontier **out, erg_error *err);
erg_status erg__frontier_read_packed(const char *path, const erg_schedule *hint, erg_frontier **out,
                                     erg_error *err);

#endif
