/* plan.h: a plan: one SM clock per instruction of every stage; its file formats. */
#ifndef ERGON_PLAN_H
#define ERGON_PLAN_H

#include "ergon/ergon.h"
#include "ergon/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque plan for S stages (= ranks, GPUs) x M microbatches on a schedule.
 * Clocks are stored per rank in the rank's execution order (2M each for the
 * one-stage-per-rank F/B schedules; the rank's instruction count in general),
 * as the freqs_pipeline_%05d.py files list them. */
typedef struct erg_plan erg_plan;

/* A plan with every clock 0 (unset). */
ERG_API erg_status erg_plan_new(const erg_schedule *sched, int num_stages, int num_microbatches,
                                erg_plan **out, erg_error *err);
ERG_API erg_status erg_plan_copy(const erg_plan *src, erg_plan **out, erg_error *err);
ERG_API void erg_plan_free(erg_plan *plan);

ERG_API int erg_plan_num_stages(const erg_plan *plan);
ERG_API int erg_plan_num_microbatches(const erg_plan *plan);
ERG_API erg_schedule erg_plan_schedule(const erg_plan *plan);
/* The same, by reference (valid while the plan lives): for bindings that read
 * it with the erg_schedule_get_* accessors (pipeline.h). */
ERG_API const erg_schedule *erg_plan_schedule_ref(const erg_plan *plan);
/* The rank's instructions (the plan's own order; ERG_SCHED_FILE plans carry it). */
ERG_API const erg_order *erg_plan_order(const erg_plan *plan);
/* Number of clocks of a rank (its instruction count; 0 if out of range). */
ERG_API int erg_plan_stage_len(const erg_plan *plan, int stage);
/* The clocks of a rank in execution order (NULL if out of range). */
ERG_API int *erg_plan_stage_freqs(erg_plan *plan, int stage);
ERG_API const int *erg_plan_stage_freqs_const(const erg_plan *plan, int stage);
/* Clock of (stage, kind, microbatch); 0 if out of range. */
ERG_API int erg_plan_freq(const erg_plan *plan, int stage, erg_instr_kind kind, int microbatch);
/* Set every clock to freq_mhz. */
ERG_API void erg_plan_fill(erg_plan *plan, int freq_mhz);

/* Optional annotations (NAN / NULL when unknown). */
ERG_API void erg_plan_set_estimate(erg_plan *plan, double time_s, double energy_j);
ERG_API void erg_plan_estimate(const erg_plan *plan, double *time_s, double *energy_j);
ERG_API erg_status erg_plan_set_method(erg_plan *plan, const char *method, erg_error *err);
/* The plan's power over an iteration, as the emulator traces it (emulate.h,
 * erg_power_trace_stats): written into JSON plans ("power": {avg_w, peak_w, trough_w}) when
 * all three are finite, and read back (NAN when unknown). */
ERG_API void erg_plan_set_power(erg_plan *plan, double avg_w, double peak_w, double trough_w);
ERG_API void erg_plan_power(const erg_plan *plan, double *avg_w, double *peak_w, double *trough_w);
ERG_API const char *erg_plan_method(const erg_plan *plan);

/* Provenance: where a plan came from. The fingerprint of the profile it was planned with
 * (erg_profile_fingerprint), the blocking power, and the clock table (a GPU name such as
 * "A100", or "profile" for the profile's own clocks). Written into JSON plans ("provenance")
 * and as a comment line of .py plans ("# ergon provenance: {...}", which Perseus and Zeus skip),
 * and read back; ergon's commands that take a plan with a profile refuse a mismatch. NULL /
 * NAN when unknown (plans from elsewhere or from older ergon). */
ERG_API erg_status erg_plan_set_provenance(erg_plan *plan, const char *profile_fingerprint,
                                           double blocking_power_w, const char *clock_table,
                                           erg_error *err);
ERG_API const char *erg_plan_profile_fingerprint(const erg_plan *plan);
ERG_API double erg_plan_blocking_power(const erg_plan *plan);
ERG_API const char *erg_plan_clock_table(const erg_plan *plan);
/* The schedule the plan file itself names (JSON plans; .py plans with a provenance line), or
 * false when it names none (then the reader's hint was used). */
ERG_API bool erg_plan_schedule_stated(const erg_plan *plan, erg_schedule_kind *kind);

/* Read a plan file: our JSON format (docs/formats.md) or the Perseus/Zeus
 * `freqs_pipeline_%05d.py` Python literal (parsed as data, never evaluated).
 * For .py files the schedule comes from `sched_hint` (NULL = 1F1B) and M is
 * the one whose orders have the rows' lengths; errors name the file, line and
 * column. */
ERG_API erg_status erg_plan_read(const char *path, const erg_schedule *sched_hint, erg_plan **out,
                                 erg_error *err);
ERG_API erg_status erg_plan_parse(const char *text, size_t len, const char *name,
                                  const erg_schedule *sched_hint, erg_plan **out, erg_error *err);
/* A plan literal of (instruction name, clock) pairs per stage -- Zeus PFO's format, which
 * `ergon plan ... --format zeus-py` writes too: [[("forward", 1410), ("backward", 1395), ...],
 * ...] with tuples or lists, single or double quotes, # comments, trailing commas -- read as
 * written: every pair in order with its name, no schedule fitted. (erg_plan_parse reads the
 * same text as a plan, keeping the pairs that get clocks: forward, backward, backward_input,
 * backward_weight, overlap_f_b.) ERG_ENOTFOUND when the text is not of this format (it does
 * not open with "[[(" or "[[["); ERG_EPARSE naming file, line and column. */
typedef struct erg_plan_pairs erg_plan_pairs;
ERG_API erg_status erg_plan_pairs_parse(const char *text, size_t len, const char *name,
                                        erg_plan_pairs **out, erg_error *err);
ERG_API void erg_plan_pairs_free(erg_plan_pairs *pairs);
ERG_API int erg_plan_pairs_num_stages(const erg_plan_pairs *pairs);
/* Pairs of a stage (0 if out of range). */
ERG_API int erg_plan_pairs_stage_len(const erg_plan_pairs *pairs, int stage);
/* The clocks of a stage's pairs, in order (NULL if out of range). */
ERG_API const int *erg_plan_pairs_freqs(const erg_plan_pairs *pairs, int stage);
/* The instruction name of pair i of a stage (NULL if out of range). */
ERG_API const char *erg_plan_pairs_name(const erg_plan_pairs *pairs, int stage, int i);

/* Write our JSON format. */
ERG_API erg_status erg_plan_write_json(const erg_plan *plan, const char *path, erg_error *err);
/* Write the freqs_pipeline_%05d.py literal; `trailer` (may be NULL) is
 * appended verbatim after the closing bracket (Perseus comment lines). */
ERG_API erg_status erg_plan_write_py(const erg_plan *plan, const char *trailer, const char *path,
                                     erg_error *err);
/* The same into a malloc'd string the caller releases with erg_free. */
ERG_API erg_status erg_plan_format_py(const erg_plan *plan, const char *trailer, char **out,
                                      erg_error *err);
ERG_API erg_status erg_plan_format_json(const erg_plan *plan, char **out, erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
