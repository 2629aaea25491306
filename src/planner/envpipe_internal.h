/* envpipe_internal.h: what the EnvPipe planner (envpipe.c) and Perseus's emulation of it
 * (envpipe_perseus.c) share, private to src/planner. */
#ifndef ERGON_ENVPIPE_INTERNAL_H
#define ERGON_ENVPIPE_INTERNAL_H

#include "ergon/envpipe.h"
#include "planner/ctab.h"

#define ERG_ENVPIPE_DEFAULT_MAX_ITERS 10000

/* Is instruction `in` of stage s in EnvPipe's outer envelope: the last stage, every stage's
 * first forward and last backward? */
bool erg__envpipe_in_envelope(int S, int M, int s, erg_instr in);

/* Emulated receive waits: start minus the previous unit's end on the same stage (minus 0 for
 * the first unit); 0 for units without a receive. es, dur, wait: one per instruction id. */
void erg__envpipe_emulated_waits(const erg_dag *dag, const double *es, const double *dur,
                                 double *wait);

/* Evaluate plan on the clock tables and stamp its estimate and method. */
erg_status erg__envpipe_finish_plan(const erg__ctab *c, const erg_dag *dag, erg_plan *plan,
                                    double power_w, const char *method, erg_error *err);

/* --variant perseus-emulation (envpipe_perseus.c); erg_plan_envpipe has checked the common
 * arguments. */
erg_status erg__envpipe_perseus_emulation(const erg_profile *profile, int S, int M,
                                          const erg_envpipe_opts *o, erg_plan **out,
                                          erg_envpipe_info *info, erg_error *err);

#endif
