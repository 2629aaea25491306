/* plot.h: pictures of plans (pipeline timelines) and time-energy frontiers (PNG, SVG, PDF). */
#ifndef ERGON_PLOT_H
#define ERGON_PLOT_H

#include "ergon/emulate.h"
#include "ergon/ergon.h"
#include "ergon/plan.h"
#include "ergon/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum erg_plot_color {
    ERG_PLOT_COLOR_CLOCK = 0, /* Box colour = the instruction's SM clock. */
    ERG_PLOT_COLOR_POWER = 1, /* Box colour = its average power (energy / time). */
} erg_plot_color;

typedef struct erg_plot_opts {
    int width_px;          /* Picture width (0 = 1200). */
    int height_px;         /* Picture height (0 = fitted to the content). */
    erg_plot_color color;  /* Timeline colouring. */
    const char *title;     /* NULL = a title made from the plan or "Time vs energy". */
    bool no_critical_path; /* Timeline: do not draw the critical path. */
} erg_plot_opts;

ERG_API void erg_plot_opts_init(erg_plot_opts *opts);

/* Draw a plan's pipeline timeline to `path`; the format follows the
 * extension (.png, .svg, .pdf; ERG_EINVAL otherwise). One row per stage
 * (stage 0 on top), each instruction a box from its emulated start with its
 * profiled duration, labelled F<m>/B<m> and coloured by clock or average power
 * (legend on the right), idle time in grey, the critical path as a dark
 * line through the centres of back-to-back critical instructions, and a time
 * axis in seconds. ERG_ENOTFOUND names a clock the profile lacks. */
ERG_API erg_status erg_plot_timeline(const erg_profile *profile, const erg_plan *plan,
                                     double blocking_power_w, const erg_plot_opts *opts,
                                     const char *path, erg_error *err);

/* One point of a frontier picture. */
typedef struct erg_plot_point {
    double time_s;
    double energy_j;
} erg_plot_point;

/* A named series: a line (a frontier) or marked points (one method). */
typedef struct erg_plot_series {
    const char *name;
    const erg_plot_point *points;
    size_t count;
    bool line;
} erg_plot_series;

/* Draw iteration time (x) against energy (y) for every series, with axes,
 * grid and a legend. Same formats as erg_plot_timeline. */
ERG_API erg_status erg_plot_frontier(const erg_plot_series *series, size_t count,
                                     const erg_plot_opts *opts, const char *path, erg_error *err);

/* Draw a plan's power over one iteration (erg_power_trace_new, docs/fleet.md): the job's power,
 * the part its computing GPUs draw and the part its waiting GPUs draw, as step lines over the
 * iteration's time, with the average dashed, and the average, peak and trough in the title.
 * Same formats as erg_plot_timeline. */
ERG_API erg_status erg_plot_power(const erg_power_trace *trace, const erg_plot_opts *opts,
                                  const char *path, erg_error *err);

#ifdef __cplusplus
}
#endif
#endif
