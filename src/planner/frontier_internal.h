/* frontier_internal.h: building a frontier incrementally (planner-private). */
#ifndef ERGON_FRONTIER_INTERNAL_H
#define ERGON_FRONTIER_INTERNAL_H

#include "ergon/planner.h"

erg_status erg__frontier_new(int S, int M, const erg_schedule *sched, double unit_s,
                             double blocking_power_w, erg_frontier **out, erg_error *err);
/* Clocks of the state before plan 0 (id order = plan layout). */
erg_status erg__frontier_set_initial(erg_frontier *f, const int *freq, erg_error *err);
/* Append a plan: begin, add the clocks that changed since the previous plan,
 * end with the full current clocks (used for periodic checkpoints). */
erg_status erg__frontier_begin_plan(erg_frontier *f, const erg_frontier_point *pt,
                                    erg_error *err);
erg_status erg__frontier_add_change(erg_frontier *f, int instr, int freq_mhz, erg_error *err);
erg_status erg__frontier_end_plan(erg_frontier *f, const int *freq, erg_error *err);

#endif
