/* emulate_internal.h: the emulator's switch-latency pass, shared by
 * erg_emulate_ex and the switch-aware planner (switch_aware.c). */
#ifndef ERGON_EMULATE_INTERNAL_H
#define ERGON_EMULATE_INTERNAL_H

#include "ergon/pipeline.h"

#include <stdbool.h>

/* Time and energy of instruction `id` at a clock; false when not profiled. */
typedef bool (*erg__cost_lookup_fn)(void *user, int id, int freq_mhz, double *time_s,
                                    double *energy_j);

typedef struct erg__async_result {
    double time_s;           /* iteration time */
    double compute_energy_j; /* energy of the instructions as they really ran */
    double idle_s;           /* sum over ranks of time_s - busy time */
    int num_switches;        /* clock requests issued */
} erg__async_result;

/* Longest path of `dag` with the switch model of emulate_ex.c: freq, t_plan, e_plan (id order)
 * are each instruction's clock and its profiled time and energy there; L the switch latency
 * (0: none), x the time of a cross-rank edge. dur, es (num_instrs) receive durations and
 * starts; cur, pend (ints) and pend_t (doubles), num_stages each, are scratch. */
void erg__async_pass(const erg_dag *dag, const int *freq, const double *t_plan,
                     const double *e_plan, erg__cost_lookup_fn lookup, void *user, double L,
                     double x, double *dur, double *es, int *cur, int *pend, double *pend_t,
                     erg__async_result *r);

#endif
