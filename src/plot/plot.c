/* plot.c: cairo pictures of pipeline timelines and time-energy frontiers. */
#include "core/internal.h"
#include "ergon/emulate.h"
#include "ergon/plot.h"
#include "plot/plot_internal.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* cairo is loaded by the first picture (core/lazylib.c) */
/* clang-format off */
#define CAIRO_FUNCS(X) \
    X(cairo_arc) X(cairo_clip) X(cairo_close_path) X(cairo_create) X(cairo_destroy) \
    X(cairo_fill) X(cairo_fill_preserve) X(cairo_image_surface_create) X(cairo_line_to) \
    X(cairo_move_to) X(cairo_new_path) X(cairo_paint) X(cairo_pdf_surface_create) \
    X(cairo_rectangle) X(cairo_restore) X(cairo_rotate) X(cairo_save) X(cairo_select_font_face) \
    X(cairo_set_dash) X(cairo_set_font_size) X(cairo_set_line_join) X(cairo_set_line_width) \
    X(cairo_set_source_rgb) X(cairo_set_source_rgba) X(cairo_show_text) X(cairo_status) \
    X(cairo_status_to_string) X(cairo_stroke) X(cairo_surface_destroy) X(cairo_surface_finish) \
    X(cairo_surface_status) X(cairo_surface_write_to_png) X(cairo_svg_surface_create) \
    X(cairo_text_extents) X(cairo_translate)
/* clang-format on */
ERG__LAZY_LIB(cairo_lib, ERG_SONAME_CAIRO, "plotting (cairo)", CAIRO_FUNCS)
#define cairo_arc (*lz_cairo_arc)
#define cairo_clip (*lz_cairo_clip)
#define cairo_close_path (*lz_cairo_close_path)
#define cairo_create (*lz_cairo_create)
#define cairo_destroy (*lz_cairo_destroy)
#define cairo_fill (*lz_cairo_fill)
#define cairo_fill_preserve (*lz_cairo_fill_preserve)
#define cairo_image_surface_create (*lz_cairo_image_surface_create)
#define cairo_line_to (*lz_cairo_line_to)
#define cairo_move_to (*lz_cairo_move_to)
#define cairo_new_path (*lz_cairo_new_path)
#define cairo_paint (*lz_cairo_paint)
#define cairo_pdf_surface_create (*lz_cairo_pdf_surface_create)
#define cairo_rectangle (*lz_cairo_rectangle)
#define cairo_restore (*lz_cairo_restore)
#define cairo_rotate (*lz_cairo_rotate)
#define cairo_save (*lz_cairo_save)
#define cairo_select_font_face (*lz_cairo_select_font_face)
#define cairo_set_dash (*lz_cairo_set_dash)
#define cairo_set_font_size (*lz_cairo_set_font_size)
#define cairo_set_line_join (*lz_cairo_set_line_join)
#define cairo_set_line_width (*lz_cairo_set_line_width)
#define cairo_set_source_rgb (*lz_cairo_set_source_rgb)
#define cairo_set_source_rgba (*lz_cairo_set_source_rgba)
#define cairo_show_text (*lz_cairo_show_text)
#define cairo_status (*lz_cairo_status)
#define cairo_status_to_string (*lz_cairo_status_to_string)
#define cairo_stroke (*lz_cairo_stroke)
#define cairo_surface_destroy (*lz_cairo_surface_destroy)
#define cairo_surface_finish (*lz_cairo_surface_finish)
#define cairo_surface_status (*lz_cairo_surface_status)
#define cairo_surface_write_to_png (*lz_cairo_surface_write_to_png)
#define cairo_svg_surface_create (*lz_cairo_svg_surface_create)
#define cairo_text_extents (*lz_cairo_text_extents)
#define cairo_translate (*lz_cairo_translate)

void erg_plot_opts_init(erg_plot_opts *o)
{
    memset(o, 0, sizeof *o);
}

/* ---- output surfaces ---- */

typedef enum { FMT_PNG, FMT_SVG, FMT_PDF } out_fmt;

static const erg__name fmt_names[] = {{".png", FMT_PNG}, {".svg", FMT_SVG}, {".pdf", FMT_PDF}};

static erg_status pick_format(const char *path, out_fmt *f, erg_error *err)
{
    const char *dot = path ? strrchr(path, '.') : NULL;
    int v = 0;
    if (!erg__name_lookup(ERG__NAMES(fmt_names), dot, &v))
        return erg_error_set(err, ERG_EINVAL,
                             "cannot tell the picture format of '%s' (use .png, .svg or .pdf)",
                             path ? path : "");
    *f = (out_fmt)v;
    return ERG_OK;
}

static erg_status open_surface(const char *path, out_fmt f, int w, int h, cairo_surface_t **out,
                               erg_error *err)
{
    erg_status lst = erg__lazylib_load(&cairo_lib, err); /* every picture starts here */
    if (lst != ERG_OK)
        return lst;
    cairo_surface_t *s = f == FMT_PNG   ? cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h)
                         : f == FMT_SVG ? cairo_svg_surface_create(path, w, h)
                                        : cairo_pdf_surface_create(path, w, h);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        erg_status st = erg_error_set(err, ERG_EIO, "cannot create %s: %s", path,
                                      cairo_status_to_string(cairo_surface_status(s)));
        cairo_surface_destroy(s);
        return st;
    }
    *out = s;
    return ERG_OK;
}

static erg_status close_surface(cairo_surface_t *s, cairo_t *cr, const char *path, out_fmt f,
                                erg_error *err)
{
    erg_status st = ERG_OK;
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (cs == CAIRO_STATUS_SUCCESS && f == FMT_PNG)
        cs = cairo_surface_write_to_png(s, path);
    cairo_surface_finish(s);
    if (cs == CAIRO_STATUS_SUCCESS)
        cs = cairo_surface_status(s);
    if (cs != CAIRO_STATUS_SUCCESS)
        st = erg_error_set(err, ERG_EIO, "cannot write %s: %s", path, cairo_status_to_string(cs));
    cairo_surface_destroy(s);
    return st;
}

/* ---- drawing helpers ---- */

/* A diverging blue-white-red colour map (like matplotlib's RdBu_r), x in [0, 1]. */
static void colormap(double x, double *r, double *g, double *b)
{
    static const double stops[5][3] = {{0.02, 0.19, 0.38},
                                       {0.26, 0.58, 0.76},
                                       {0.97, 0.97, 0.97},
                                       {0.84, 0.38, 0.30},
                                       {0.40, 0.00, 0.12}};
    if (!(x >= 0))
        x = 0;
    if (x > 1)
        x = 1;
    double p = x * 4;
    int i = (int)p;
    if (i >= 4)
        i = 3;
    double t = p - i;
    *r = stops[i][0] + (stops[i + 1][0] - stops[i][0]) * t;
    *g = stops[i][1] + (stops[i + 1][1] - stops[i][1]) * t;
    *b = stops[i][2] + (stops[i + 1][2] - stops[i][2]) * t;
}

/* A "nice" tick step (1, 2 or 5 x 10^k) for about n ticks over span. */
static double nice_step(double span, int n)
{
    if (!(span > 0))
        return 1;
    double raw = span / n, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

static void fmt_tick(double v, double step, char *buf, size_t size)
{
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 6)
        dec = 6;
    if (fabs(v) >= 1e5)
        snprintf(buf, size, "%.4g", v);
    else
        snprintf(buf, size, "%.*f", dec, v);
}

static void text_at(cairo_t *cr, double x, double y, const char *s, double ax, double ay)
{
    cairo_text_extents_t te;
    cairo_text_extents(cr, s, &te);
    cairo_move_to(cr, x - te.width * ax - te.x_bearing, y - te.height * ay - te.y_bearing);
    cairo_show_text(cr, s);
}

static void set_font(cairo_t *cr, double size, bool bold)
{
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

/* Vertical colour bar with min/max labels. */
static void colorbar(cairo_t *cr, double x, double y, double h, double lo, double hi,
                     const char *unit, const char *title)
{
    int steps = 64;
    for (int i = 0; i < steps; i++) {
        double r, g, b;
        colormap(1.0 - (i + 0.5) / steps, &r, &g, &b);
        cairo_set_source_rgb(cr, r, g, b);
        cairo_rectangle(cr, x, y + h * i / steps, 16, h / steps + 0.5);
        cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, x, y, 16, h);
    cairo_stroke(cr);
    set_font(cr, 11, false);
    char buf[64];
    int nt = 4;
    for (int i = 0; i <= nt; i++) {
        double v = hi - (hi - lo) * i / nt;
        snprintf(buf, sizeof buf, "%.0f %s", v, unit);
        text_at(cr, x + 20, y + h * i / nt, buf, 0, 0.5);
    }
    set_font(cr, 11, true);
    text_at(cr, x, y - 8, title, 0, 1);
}

/* ---- timeline ---- */

void erg__plot_box_subtitle(int labelled, int n, bool actions, char *buf, size_t size)
{
    const char *tail = "grey: idle or blocked; dark line under the boxes: critical path";
    const char *what = actions ? "boxes: <stage><F|B|I|W><m> (PyTorch action names; F/B overlap "
                                 "as sF;sB)"
                               : "boxes: F<m>/B<m> of microbatch m";
    if (labelled >= n)
        snprintf(buf, size, "%s; %s", what, tail);
    else if (labelled > 0)
        snprintf(buf, size, "%s (%d of %d boxes too narrow to label); %s", what, n - labelled, n,
                 tail);
    else
        snprintf(buf, size, "boxes (%s) too narrow to label; %s",
                 actions ? "instructions" : "forwards, backwards", tail);
}

erg_status erg_plot_timeline(const erg_profile *profile, const erg_plan *plan, double power_w,
                             const erg_plot_opts *opts, const char *path, erg_error *err)
{
    if (!profile || !plan || !path)
        return erg_error_set(err, ERG_EINVAL, "erg_plot_timeline: NULL argument");
    erg_plot_opts def;
    erg_plot_opts_init(&def);
    if (!opts)
        opts = &def;
    out_fmt fmt = FMT_PNG; /* set by pick_format */
    erg_status st = pick_format(path, &fmt, err);
    if (st)
        return st;
    int S = erg_plan_num_stages(plan), M = erg_plan_num_microbatches(plan);
    erg_schedule sc = erg_plan_schedule(plan);
    erg_dag *dag = NULL;
    st = erg_dag_new(&sc, S, M, &dag, err);
    if (st)
        return st;
    int n = erg_dag_num_instrs(dag), V = erg_dag_num_chunks(dag);
    double *start = erg__calloc((size_t)n * 4, sizeof(double));
    if (!start) {
        erg_dag_free(dag);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    double *dur = start + n, *lf = dur + n, *val = lf + n;
    erg_emulation em;
    st = erg_emulate(profile, dag, plan, power_w, &em, start, dur, err);
    if (!st)
        st = erg_dag_cpm(dag, dur, NULL, lf, NULL, err);
    double lo = INFINITY, hi = -INFINITY;
    for (int id = 0; id < n && !st; id++) {
        int s;
        erg_instr in = erg_dag_instr(dag, id, &s);
        int f = erg_plan_stage_freqs_const(plan, s)[id - erg_dag_rank_offset(dag, s)];
        (void)in;
        if (opts->color == ERG_PLOT_COLOR_POWER) {
            erg_profile_point pt;
            st = erg_instr_cost_point(profile, dag, id, f, &pt, err);
            val[id] = pt.time_s > 0 ? pt.energy_j / pt.time_s : 0;
        } else {
            val[id] = f;
        }
        lo = val[id] < lo ? val[id] : lo;
        hi = val[id] > hi ? val[id] : hi;
    }
    if (st) {
        erg__free(start);
        erg_dag_free(dag);
        return st;
    }
    if (hi - lo < 1e-9) {
        lo -= 1;
        hi += 1;
    }
    int W = opts->width_px > 0 ? opts->width_px : 1200;
    double row_h = S <= 8 ? 36 : S <= 16 ? 24 : 14;
    double ml = 70, mr = 130, mt = 48, mb = 56;
    int H = opts->height_px > 0 ? opts->height_px : (int)(mt + mb + row_h * S);
    if (W < ml + mr + 100)
        W = (int)(ml + mr + 100);
    cairo_surface_t *surf;
    st = open_surface(path, fmt, W, H, &surf, err);
    if (st) {
        erg__free(start);
        erg_dag_free(dag);
        return st;
    }
    cairo_t *cr = cairo_create(surf);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    double T = em.time_s > 0 ? em.time_s : 1;
    double pw = W - ml - mr, ph = row_h * S;
    double xs = pw / T;
    /* title */
    char title[256];
    if (opts->title)
        snprintf(title, sizeof title, "%s", opts->title);
    else {
        char vs[32] = "";
        if (V > 1)
            snprintf(vs, sizeof vs, ", V=%d", V);
        snprintf(title, sizeof title, "%s, %s schedule, %s=%d%s, M=%d: %.4g s, %.6g J",
                 erg_plan_method(plan) ? erg_plan_method(plan) : "plan", erg_schedule_name(sc.kind),
                 V > 1 ? "P" : "S", S, vs, M, em.time_s, em.energy_j);
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    set_font(cr, 15, true);
    text_at(cr, W / 2.0, 16, title, 0.5, 0.5);
    /* chunked and file schedules: boxes named as PyTorch's actions */
    bool actions = V > 1 || sc.kind == ERG_SCHED_FILE;
    /* rows */
    for (int s = 0; s < S; s++) {
        double y = mt + row_h * s;
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_rectangle(cr, ml, y + 1, pw, row_h - 2);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        set_font(cr, 12, false);
        char lab[32];
        snprintf(lab, sizeof lab, actions ? "rank %d" : "stage %d", s);
        text_at(cr, ml - 8, y + row_h / 2, lab, 1, 0.5);
    }
    set_font(cr, row_h >= 30 ? 10 : 8, false);
    int labelled = 0;
    for (int id = 0; id < n; id++) {
        int s;
        erg_instr in = erg_dag_instr(dag, id, &s);
        double x = ml + start[id] * xs, w = dur[id] * xs, y = mt + row_h * s;
        double r, g, b;
        colormap((val[id] - lo) / (hi - lo), &r, &g, &b);
        cairo_set_source_rgb(cr, r, g, b);
        cairo_rectangle(cr, x, y + 3, w, row_h - 6);
        cairo_fill_preserve(cr);
        cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
        cairo_set_line_width(cr, w > 4 ? 0.8 : 0.3);
        cairo_stroke(cr);
        char lab[64];
        if (actions) {
            if (in.kind == ERG_OVERLAP_F_B)
                snprintf(lab, sizeof lab, "%dF%d;%d%c%d", in.stage, in.microbatch, in.stage2,
                         in.kind2 == ERG_BACKWARD_INPUT ? 'I' : 'B', in.microbatch2);
            else
                erg_instr_format(in, lab, sizeof lab);
        } else {
            snprintf(lab, sizeof lab, "%c%d", in.kind == ERG_FORWARD ? 'F' : 'B', in.microbatch);
        }
        /* label what fits: the row's font, else a smaller one, else none */
        cairo_text_extents_t te;
        double fs = row_h >= 30 ? 10 : 8;
        cairo_text_extents(cr, lab, &te);
        if (te.width + 3 >= w && fs > 7) {
            set_font(cr, 7, false);
            cairo_text_extents(cr, lab, &te);
        }
        if (te.width + 3 < w) {
            double lum = 0.3 * r + 0.59 * g + 0.11 * b;
            cairo_set_source_rgb(cr, lum < 0.5 ? 1 : 0, lum < 0.5 ? 1 : 0, lum < 0.5 ? 1 : 0);
            text_at(cr, x + w / 2, y + row_h / 2, lab, 0.5, 0.5);
            labelled++;
        }
        set_font(cr, fs, false);
    }
    /* the legend line says what the boxes' labels are, and when some are omitted */
    {
        char sub[256];
        erg__plot_box_subtitle(labelled, n, actions, sub, sizeof sub);
        set_font(cr, 11, false);
        cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
        text_at(cr, W / 2.0, 34, sub, 0.5, 0.5);
    }
    /* critical path: one chain of critical instructions, each starting as the one before ends,
     * from the iteration's start to its end. Drawn along the boxes' lower edge, clear of their
     * labels, with right angles only: along a rank, then, where the path moves to another rank,
     * straight down or up at the moment of the hand-over (drawing every critical edge from box
     * centre to box centre crossed the other ranks' rows diagonally, a tangle on DualPipeV). */
    if (!opts->no_critical_path) {
        double eps = 1e-9 * (T > 1 ? T : 1);
        int u = -1;
        for (int i = 0; i < n && u < 0; i++)
            if (start[i] <= eps && fabs(lf[i] - start[i] - dur[i]) <= eps) {
                /* the chain must go on to the end: prefer a start with a tight successor */
                u = i;
            }
        cairo_set_source_rgba(cr, 0.05, 0.05, 0.05, 0.85);
        cairo_set_line_width(cr, 2.2);
        cairo_set_line_join(cr, CAIRO_LINE_JOIN_MITER);
        if (u >= 0) {
            int su;
            (void)erg_dag_instr(dag, u, &su);
            cairo_move_to(cr, ml + start[u] * xs, mt + row_h * (su + 1) - 4);
            for (int steps = 0; u >= 0 && steps <= n; steps++) {
                (void)erg_dag_instr(dag, u, &su);
                double end_x = ml + (start[u] + dur[u]) * xs, y = mt + row_h * (su + 1) - 4;
                cairo_line_to(cr, end_x, y);
                const int *sc2;
                int ns = erg_dag_successors(dag, u, &sc2), next = -1;
                for (int j = 0; j < ns && next < 0; j++) {
                    int v = sc2[j];
                    if (fabs(lf[v] - start[v] - dur[v]) <= eps &&
                        fabs(start[u] + dur[u] - start[v]) <= eps)
                        next = v;
                }
                if (next >= 0) {
                    int sv;
                    (void)erg_dag_instr(dag, next, &sv);
                    if (sv != su) /* hand-over to another rank: a vertical step */
                        cairo_line_to(cr, end_x, mt + row_h * (sv + 1) - 4);
                }
                u = next;
            }
            cairo_stroke(cr);
        }
    }
    /* time axis */
    double ay = mt + ph + 4;
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_move_to(cr, ml, ay);
    cairo_line_to(cr, ml + pw, ay);
    cairo_stroke(cr);
    double step = nice_step(T, 10);
    set_font(cr, 11, false);
    for (double t = 0; t <= T * (1 + 1e-9); t += step) {
        double x = ml + t * xs;
        cairo_move_to(cr, x, ay);
        cairo_line_to(cr, x, ay + 5);
        cairo_stroke(cr);
        char buf[32];
        fmt_tick(t, step, buf, sizeof buf);
        text_at(cr, x, ay + 8, buf, 0.5, 0);
    }
    text_at(cr, ml + pw / 2, ay + 34, "time (s)", 0.5, 0);
    colorbar(cr, ml + pw + 18, mt + 14, ph > 60 ? ph - 20 : 40, lo, hi,
             opts->color == ERG_PLOT_COLOR_POWER ? "W" : "MHz",
             opts->color == ERG_PLOT_COLOR_POWER ? "avg power" : "SM clock");
    st = close_surface(surf, cr, path, fmt, err);
    erg__free(start);
    erg_dag_free(dag);
    return st;
}

/* ---- frontier ---- */

/* qsort has no user pointer: the points being sorted (one picture at a time
 * per thread). */
static _Thread_local const erg_plot_point *g_sort_pts;
static int cmp_by_time(const void *a, const void *b)
{
    double ta = g_sort_pts[*(const size_t *)a].time_s, tb = g_sort_pts[*(const size_t *)b].time_s;
    if (ta != tb)
        return ta < tb ? -1 : 1;
    double ea = g_sort_pts[*(const size_t *)a].energy_j,
           eb = g_sort_pts[*(const size_t *)b].energy_j;
    return ea < eb ? -1 : ea > eb;
}

size_t erg__plot_dominated(const erg_plot_point *pts, size_t n, unsigned char *flags)
{
    memset(flags, 0, n);
    size_t *ord = n ? erg__malloc(n * sizeof *ord) : NULL;
    if (!ord)
        return 0;
    for (size_t k = 0; k < n; k++)
        ord[k] = k;
    g_sort_pts = pts;
    qsort(ord, n, sizeof *ord, cmp_by_time);
    double emin = INFINITY;
    size_t nd = 0;
    for (size_t j = 0; j < n; j++) {
        const erg_plot_point *p = &pts[ord[j]];
        if (p->energy_j > emin + 1e-9 * fabs(emin)) {
            flags[ord[j]] = 1;
            nd++;
        }
        emin = fmin(emin, p->energy_j);
    }
    erg__free(ord);
    return nd;
}

static void marker(cairo_t *cr, int shape, double x, double y, double r)
{
    cairo_new_path(cr); /* no line from the previous point */
    switch (shape % 6) {
    case 0:
        cairo_arc(cr, x, y, r, 0, 2 * M_PI);
        cairo_close_path(cr);
        break;
    case 1:
        cairo_rectangle(cr, x - r, y - r, 2 * r, 2 * r);
        break;
    case 2:
        cairo_move_to(cr, x, y - r * 1.2);
        cairo_line_to(cr, x + r * 1.1, y + r * 0.8);
        cairo_line_to(cr, x - r * 1.1, y + r * 0.8);
        cairo_close_path(cr);
        break;
    case 3:
        cairo_move_to(cr, x, y - r * 1.3);
        cairo_line_to(cr, x + r * 1.1, y);
        cairo_line_to(cr, x, y + r * 1.3);
        cairo_line_to(cr, x - r * 1.1, y);
        cairo_close_path(cr);
        break;
    case 4:
        cairo_move_to(cr, x, y + r * 1.2);
        cairo_line_to(cr, x + r * 1.1, y - r * 0.8);
        cairo_line_to(cr, x - r * 1.1, y - r * 0.8);
        cairo_close_path(cr);
        break;
    default:
        for (int i = 0; i < 5; i++) {
            double a = -M_PI / 2 + i * 4 * M_PI / 5;
            if (i == 0)
                cairo_move_to(cr, x + r * 1.3 * cos(a), y + r * 1.3 * sin(a));
            else
                cairo_line_to(cr, x + r * 1.3 * cos(a), y + r * 1.3 * sin(a));
        }
        cairo_close_path(cr);
        break;
    }
}

static const double palette[][3] = {{0.12, 0.47, 0.71}, {0.84, 0.15, 0.16}, {0.17, 0.63, 0.17},
                                    {1.00, 0.50, 0.05}, {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29},
                                    {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}, {0.74, 0.74, 0.13},
                                    {0.09, 0.75, 0.81}};

erg_status erg_plot_frontier(const erg_plot_series *series, size_t count, const erg_plot_opts *opts,
                             const char *path, erg_error *err)
{
    if (!series || !count || !path)
        return erg_error_set(err, ERG_EINVAL, "erg_plot_frontier: nothing to draw");
    erg_plot_opts def;
    erg_plot_opts_init(&def);
    if (!opts)
        opts = &def;
    out_fmt fmt = FMT_PNG; /* set by pick_format */
    erg_status st = pick_format(path, &fmt, err);
    if (st)
        return st;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (size_t i = 0; i < count; i++)
        for (size_t k = 0; k < series[i].count; k++) {
            const erg_plot_point *p = &series[i].points[k];
            if (!isfinite(p->time_s) || !isfinite(p->energy_j))
                return erg_error_set(err, ERG_EINVAL, "series '%s' point %zu is not finite",
                                     series[i].name ? series[i].name : "", k);
            x0 = fmin(x0, p->time_s);
            x1 = fmax(x1, p->time_s);
            y0 = fmin(y0, p->energy_j);
            y1 = fmax(y1, p->energy_j);
        }
    if (!isfinite(x0))
        return erg_error_set(err, ERG_EINVAL, "erg_plot_frontier: the series have no points");
    double dx = x1 - x0, dy = y1 - y0;
    if (dx <= 0)
        dx = fabs(x0) > 0 ? fabs(x0) * 0.1 : 1;
    if (dy <= 0)
        dy = fabs(y0) > 0 ? fabs(y0) * 0.1 : 1;
    x0 -= dx * 0.05;
    x1 += dx * 0.05;
    y0 -= dy * 0.08;
    y1 += dy * 0.08;
    int W = opts->width_px > 0 ? opts->width_px : 1000;
    int H = opts->height_px > 0 ? opts->height_px : 640;
    /* The legend sits inside the plot, top right (slow and costly: where no
     * frontier goes), sized to its entries. */
    double ml = 90, mr = 24, mt = 40, mb = 60;
    if (W < ml + mr + 100)
        W = (int)(ml + mr + 100);
    if (H < mt + mb + 100)
        H = (int)(mt + mb + 100);
    double pw = W - ml - mr, ph = H - mt - mb;
    cairo_surface_t *surf;
    st = open_surface(path, fmt, W, H, &surf, err);
    if (st)
        return st;
    cairo_t *cr = cairo_create(surf);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
#define PX(t) (ml + ((t)-x0) / (x1 - x0) * pw)
#define PY(e) (mt + ph - ((e)-y0) / (y1 - y0) * ph)
    /* grid and ticks */
    set_font(cr, 11, false);
    double xs = nice_step(x1 - x0, 8), ys = nice_step(y1 - y0, 8);
    for (double t = ceil(x0 / xs) * xs; t <= x1; t += xs) {
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_set_line_width(cr, 1);
        cairo_move_to(cr, PX(t), mt);
        cairo_line_to(cr, PX(t), mt + ph);
        cairo_stroke(cr);
        char buf[32];
        fmt_tick(t, xs, buf, sizeof buf);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, PX(t), mt + ph + 6, buf, 0.5, 0);
    }
    for (double e = ceil(y0 / ys) * ys; e <= y1; e += ys) {
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, ml, PY(e));
        cairo_line_to(cr, ml + pw, PY(e));
        cairo_stroke(cr);
        char buf[32];
        fmt_tick(e, ys, buf, sizeof buf);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, ml - 6, PY(e), buf, 1, 0.5);
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_rectangle(cr, ml, mt, pw, ph);
    cairo_stroke(cr);
    set_font(cr, 12, false);
    text_at(cr, ml + pw / 2, mt + ph + 30, "iteration time (s)", 0.5, 0);
    cairo_save(cr);
    cairo_translate(cr, 22, mt + ph / 2);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, 0, 0, "energy per iteration (J)", 0.5, 0.5);
    cairo_restore(cr);
    set_font(cr, 15, true);
    text_at(cr, ml + pw / 2, 18, opts->title ? opts->title : "Iteration time vs energy", 0.5, 0.5);
    /* series: lines first, then markers on top */
    cairo_save(cr);
    cairo_rectangle(cr, ml, mt, pw, ph);
    cairo_clip(cr);
    /* A line series is drawn solid through its non-dominated points only (no
     * other point of the series is as fast and cheaper) and dashed through all,
     * so a "frontier" never rises at its slow end unmarked. */
    bool any_dominated = false;
    unsigned char **dom = erg__calloc(count, sizeof *dom);
    for (size_t i = 0; dom && i < count; i++) {
        const erg_plot_series *sr = &series[i];
        if (!sr->line || sr->count < 2)
            continue;
        dom[i] = erg__calloc(sr->count, 1);
        if (dom[i] && erg__plot_dominated(sr->points, sr->count, dom[i]))
            any_dominated = true;
    }
    double drawn[256][2];
    int n_drawn = 0;
    int marker_i = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < count; i++) {
            const erg_plot_series *sr = &series[i];
            const double *c = palette[i % ERG__ARRAY_LEN(palette)];
            if (pass == 0 && sr->line) {
                cairo_set_source_rgb(cr, c[0], c[1], c[2]);
                const unsigned char *d = dom ? dom[i] : NULL;
                bool has_dom = false;
                for (size_t k = 0; d && k < sr->count && !has_dom; k++)
                    has_dom = d[k];
                if (has_dom) { /* every plan, thin and dashed */
                    static const double dash[] = {4, 3};
                    cairo_set_dash(cr, dash, 2, 0);
                    cairo_set_line_width(cr, 1.0);
                    for (size_t k = 0; k < sr->count; k++) {
                        double x = PX(sr->points[k].time_s), y = PY(sr->points[k].energy_j);
                        if (k == 0)
                            cairo_move_to(cr, x, y);
                        else
                            cairo_line_to(cr, x, y);
                    }
                    cairo_stroke(cr);
                    cairo_set_dash(cr, NULL, 0, 0);
                }
                cairo_set_line_width(cr, 1.8);
                bool first = true;
                for (size_t k = 0; k < sr->count; k++) {
                    if (d && d[k])
                        continue;
                    double x = PX(sr->points[k].time_s), y = PY(sr->points[k].energy_j);
                    if (first)
                        cairo_move_to(cr, x, y);
                    else
                        cairo_line_to(cr, x, y);
                    first = false;
                }
                cairo_stroke(cr);
            } else if (pass == 1 && !sr->line) {
                for (size_t k = 0; k < sr->count; k++) {
                    double x = PX(sr->points[k].time_s), y = PY(sr->points[k].energy_j);
                    /* a marker on top of one already drawn (two methods with the same time
                     * and energy, e.g. all-max and the frontier at the all-max time) is drawn
                     * larger and hollow around it, so both stay visible */
                    int under = 0;
                    for (int q = 0; q < n_drawn; q++)
                        if (fabs(drawn[q][0] - x) < 5 && fabs(drawn[q][1] - y) < 5)
                            under++;
                    if (n_drawn < (int)(sizeof drawn / sizeof drawn[0])) {
                        drawn[n_drawn][0] = x;
                        drawn[n_drawn][1] = y;
                        n_drawn++;
                    }
                    marker(cr, marker_i, x, y, 6 + 4 * under);
                    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
                    if (under) {
                        cairo_set_line_width(cr, 2.5);
                        cairo_stroke(cr);
                        continue;
                    }
                    cairo_fill_preserve(cr);
                    cairo_set_source_rgb(cr, 0, 0, 0);
                    cairo_set_line_width(cr, 1);
                    cairo_stroke(cr);
                }
                marker_i++;
            }
        }
    cairo_restore(cr);
    for (size_t i = 0; dom && i < count; i++)
        erg__free(dom[i]);
    erg__free(dom);
    /* legend: a box inside the plot's top right corner, as wide as its names */
    set_font(cr, 12, false);
    const char *dom_label = "dashed: dominated plans (slower and costlier than another)";
    double tw = 0;
    for (size_t i = 0; i < count; i++) {
        cairo_text_extents_t te;
        cairo_text_extents(cr, series[i].name ? series[i].name : "", &te);
        tw = fmax(tw, te.x_advance);
    }
    set_font(cr, 10, false);
    if (any_dominated) {
        cairo_text_extents_t te;
        cairo_text_extents(cr, dom_label, &te);
        tw = fmax(tw, te.x_advance - 30);
    }
    double lw = 30 + tw + 10, lh = 18 * (double)count + (any_dominated ? 16 : 0) + 8;
    double lx = ml + pw - lw - 8, ly = mt + 8;
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_rectangle(cr, lx - 4, ly, lw, lh);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.7, 0.7, 0.7);
    cairo_set_line_width(cr, 1);
    cairo_stroke(cr);
    if (any_dominated) {
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        text_at(cr, lx, ly + 4 + 18 * (double)count + 6, dom_label, 0, 0.5);
    }
    set_font(cr, 12, false);
    lx += 2;
    ly += 4 + 9;
    marker_i = 0;
    for (size_t i = 0; i < count; i++) {
        const erg_plot_series *sr = &series[i];
        const double *c = palette[i % ERG__ARRAY_LEN(palette)];
        double y = ly + 18 * (double)i;
        cairo_set_source_rgb(cr, c[0], c[1], c[2]);
        if (sr->line) {
            cairo_set_line_width(cr, 2);
            cairo_move_to(cr, lx, y);
            cairo_line_to(cr, lx + 22, y);
            cairo_stroke(cr);
        } else {
            marker(cr, marker_i++, lx + 11, y, 6);
            cairo_fill_preserve(cr);
            cairo_set_source_rgb(cr, 0, 0, 0);
            cairo_set_line_width(cr, 1);
            cairo_stroke(cr);
        }
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, lx + 30, y, sr->name ? sr->name : "", 0, 0.5);
    }
#undef PX
#undef PY
    return close_surface(surf, cr, path, fmt, err);
}

/* ---- a plan's power over one iteration ---- */

static void power_step(cairo_t *cr, const erg_power_trace *tr, int which, double ml, double mt,
                       double pw, double ph, double T, double ymax)
{
    for (size_t i = 0; i < erg_power_trace_len(tr); i++) {
        erg_power_segment sg;
        erg_power_trace_segment(tr, i, &sg);
        double v = which == 0 ? sg.total_w : which == 1 ? sg.compute_w : sg.blocking_w;
        double x0 = ml + sg.start_s / T * pw, x1 = ml + sg.end_s / T * pw;
        double y = mt + ph - v / ymax * ph;
        if (i == 0)
            cairo_move_to(cr, x0, y);
        else
            cairo_line_to(cr, x0, y);
        cairo_line_to(cr, x1, y);
    }
    cairo_stroke(cr);
}

erg_status erg_plot_power(const erg_power_trace *tr, const erg_plot_opts *opts, const char *path,
                          erg_error *err)
{
    if (!tr || !path || !erg_power_trace_len(tr))
        return erg_error_set(err, ERG_EINVAL, "erg_plot_power: nothing to draw");
    erg_plot_opts def;
    erg_plot_opts_init(&def);
    if (!opts)
        opts = &def;
    out_fmt fmt = FMT_PNG;
    erg_status st = pick_format(path, &fmt, err);
    erg_power_stats ps;
    double T = erg_power_trace_period(tr);
    if (!st)
        st = erg_power_trace_stats(tr, T, &ps, err);
    if (st)
        return st;
    int W = opts->width_px > 0 ? opts->width_px : 1200;
    int H = opts->height_px > 0 ? opts->height_px : 520;
    double ml = 90, mr = 24, mt = 40, mb = 60, ymax = ps.peak_w * 1.08;
    if (W < ml + mr + 100)
        W = (int)(ml + mr + 100);
    if (H < mt + mb + 100)
        H = (int)(mt + mb + 100);
    if (!(ymax > 0))
        ymax = 1;
    double pw = W - ml - mr, ph = H - mt - mb;
    cairo_surface_t *surf;
    if ((st = open_surface(path, fmt, W, H, &surf, err)))
        return st;
    cairo_t *cr = cairo_create(surf);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    set_font(cr, 11, false);
    double xs = nice_step(T, 10), ys = nice_step(ymax, 8);
    for (double t = 0; t <= T * (1 + 1e-9); t += xs) {
        char buf[32];
        fmt_tick(t, xs, buf, sizeof buf);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_set_line_width(cr, 1);
        cairo_move_to(cr, ml + t / T * pw, mt);
        cairo_line_to(cr, ml + t / T * pw, mt + ph);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, ml + t / T * pw, mt + ph + 6, buf, 0.5, 0);
    }
    for (double w = 0; w <= ymax; w += ys) {
        char buf[32];
        fmt_tick(w, ys, buf, sizeof buf);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, ml, mt + ph - w / ymax * ph);
        cairo_line_to(cr, ml + pw, mt + ph - w / ymax * ph);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, ml - 6, mt + ph - w / ymax * ph, buf, 1, 0.5);
    }
    cairo_rectangle(cr, ml, mt, pw, ph);
    cairo_stroke(cr);
    set_font(cr, 12, false);
    text_at(cr, ml + pw / 2, mt + ph + 30, "time within the iteration (s)", 0.5, 0);
    cairo_save(cr);
    cairo_translate(cr, 22, mt + ph / 2);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, 0, 0, "power (W)", 0.5, 0.5);
    cairo_restore(cr);
    char title[200];
    snprintf(title, sizeof title,
             "Power over one iteration: average %.0f W, peak %.0f W, trough %.0f W", ps.avg_w,
             ps.peak_w, ps.trough_w);
    set_font(cr, 15, true);
    text_at(cr, ml + pw / 2, 18, opts->title ? opts->title : title, 0.5, 0.5);
    static const double col[3][3] = {{0, 0, 0}, {0.12, 0.47, 0.71}, {0.5, 0.5, 0.5}};
    static const char *const names[3] = {"job", "computing GPUs", "waiting GPUs"};
    for (int k = 2; k >= 0; k--) {
        cairo_set_source_rgb(cr, col[k][0], col[k][1], col[k][2]);
        cairo_set_line_width(cr, k == 0 ? 2.2 : 1.4);
        power_step(cr, tr, k, ml, mt, pw, ph, T, ymax);
    }
    static const double dash[] = {6, 4};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_set_source_rgb(cr, 0.84, 0.15, 0.16);
    cairo_set_line_width(cr, 1.2);
    cairo_move_to(cr, ml, mt + ph - ps.avg_w / ymax * ph);
    cairo_line_to(cr, ml + pw, mt + ph - ps.avg_w / ymax * ph);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    set_font(cr, 11, false);
    for (int k = 0; k < 4; k++) { /* legend, bottom right */
        double y = mt + ph - 14 - 16 * (3 - k), x = ml + pw - 170;
        if (k < 3)
            cairo_set_source_rgb(cr, col[k][0], col[k][1], col[k][2]);
        else
            cairo_set_source_rgb(cr, 0.84, 0.15, 0.16);
        cairo_set_line_width(cr, 2);
        cairo_move_to(cr, x, y);
        cairo_line_to(cr, x + 24, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, x + 30, y, k < 3 ? names[k] : "average", 0, 0.5);
    }
    return close_surface(surf, cr, path, fmt, err);
}
