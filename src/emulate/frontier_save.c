/* frontier_save.c: a frontier directory, written whole by the library -- the plans
 * (frontier.csv, plans.ergon, plan files: planner/frontier.c), the profile they were planned
 * with (profile.csv) and their all-max baseline (frontier-info.csv, docs/formats.md) -- under
 * the directory's lock, an earlier frontier's files replaced. frontier_baseline.c reads the
 * baseline back; `ergon plan perseus`, the Python binding (ergon.frontier) and anyone else
 * produce the same directory through erg_frontier_save_dir. */
#include "core/internal.h"
#include "ergon/emulate.h"
#include "ergon/baselines.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void erg_frontier_dir_opts_init(erg_frontier_dir_opts *o)
{
    memset(o, 0, sizeof *o);
    o->formats = ERG_FRONTIER_CSV | ERG_FRONTIER_PACKED;
    o->lock_wait_s = ERG_FRONTIER_DIR_LOCK_WAIT_S;
}

static void join(char *out, size_t n, const char *dir, const char *name)
{
    size_t l = strlen(dir);
    while (l > 1 && dir[l - 1] == '/')
        l--;
    snprintf(out, n, "%.*s/%s", (int)l, dir, name);
}

/* The files of a frontier directory: an earlier frontier's are removed first. */
static bool frontier_file(const char *name)
{
    size_t l = strlen(name);
    if (!strcmp(name, "frontier.csv") || !strcmp(name, "plans.ergon") ||
        !strcmp(name, "profile.csv") || !strcmp(name, "frontier-info.csv"))
        return true;
    if (!strncmp(name, "freqs_pipeline_", 15) && l > 18 && !strcmp(name + l - 3, ".py"))
        return true;
    return !strncmp(name, "plan_", 5) && l > 10 && !strcmp(name + l - 5, ".json");
}

static erg_status clean_dir(const char *dir, size_t *removed, erg_error *err)
{
    *removed = 0;
    DIR *d = opendir(dir);
    if (!d)
        return ERG_OK; /* created later */
    struct dirent *e;
    char path[4096];
    erg_status st = ERG_OK;
    while (!st && (e = readdir(d))) {
        if (!frontier_file(e->d_name))
            continue;
        join(path, sizeof path, dir, e->d_name);
        if (unlink(path) && errno != ENOENT)
            st = erg_error_set(err, ERG_EIO, "%s: cannot remove the old plan file: %s", path,
                               strerror(errno));
        else
            ++*removed;
    }
    closedir(d);
    return st;
}

/* The stages planned only (the first S of a larger profile, or S x chunks), so that choose,
 * show and emulate evaluate the plans on the profile they were made with. *cut: a copy to
 * free, or NULL when prof is used as it is. */
static erg_status planned_profile(const erg_profile *prof, int S, int V, erg_profile **cut,
                                  erg_error *err)
{
    *cut = NULL;
    int ps = erg_profile_num_stages(prof);
    int used = ps >= S * V ? S * V : S;
    if (used >= ps)
        return ERG_OK;
    erg_status st = erg_profile_new(cut, err);
    for (int s = 0; s < used && !st; s++)
        for (int k = 0; k < ERG_NUM_INSTR_KINDS && !st; k++) {
            size_t n = erg_profile_num_points(prof, s, (erg_instr_kind)k);
            const erg_profile_point *v = erg_profile_points(prof, s, (erg_instr_kind)k);
            for (size_t i = 0; i < n && !st; i++)
                st = erg_profile_add(*cut, s, (erg_instr_kind)k, &v[i], err);
        }
    if (st) {
        erg_profile_free(*cut);
        *cut = NULL;
    }
    return st;
}

/* What frontier-info.csv says of f's schedule, and all-max clocks on it evaluated with the
 * profiled values (erg_emulate). */
typedef struct sched_info {
    erg_schedule_kind kind;
    int chunks;
    double backward_split;
} sched_info;

/* All-max clocks' power over an iteration (power.c): average, peak, trough. */
static erg_status all_max_power(const erg_profile *prof, const erg_dag *dag, const erg_plan *plan,
                                double power_w, erg_power_stats *out, erg_error *err)
{
    erg_emulate_opts eo;
    erg_emulate_opts_init(&eo);
    eo.blocking_power_w = power_w;
    erg_power_trace *tr = NULL;
    erg_status st = erg_power_trace_new(prof, dag, plan, &eo, &tr, err);
    if (!st)
        st = erg_power_trace_stats(tr, erg_power_trace_period(tr), out, err);
    erg_power_trace_free(tr);
    return st;
}

static erg_status all_max_of(const erg_frontier *f, const erg_profile *prof, double power_w,
                             sched_info *si, erg_emulation *em, erg_power_stats *pw, erg_error *err)
{
    erg_plan *p0 = NULL, *allmax = NULL;
    erg_dag *dag = NULL;
    erg_status st = erg_frontier_plan(f, 0, &p0, err);
    if (st)
        return st;
    /* p0 owns a schedule file's order: it lives until the DAG and the plan copied it */
    erg_schedule sc = erg_plan_schedule(p0);
    si->kind = sc.kind;
    si->chunks = erg_schedule_chunks(&sc);
    si->backward_split = erg_schedule_backward_split(&sc);
    int S = erg_plan_num_stages(p0), M = erg_plan_num_microbatches(p0);
    if (!(st = erg_dag_new(&sc, S, M, &dag, err)) &&
        !(st = erg_plan_all_max(prof, S, M, &sc, power_w, &allmax, err)))
        st = erg_emulate(prof, dag, allmax, power_w, em, NULL, NULL, err);
    if (!st)
        st = all_max_power(prof, dag, allmax, power_w, pw, err);
    erg_plan_free(allmax);
    erg_dag_free(dag);
    erg_plan_free(p0);
    return st;
}

static erg_status write_info(const erg_frontier *f, const erg_profile *prof, double power_w,
                             const char *dir, const erg_frontier_dir_opts *o, erg_error *err)
{
    sched_info sc;
    erg_emulation em;
    erg_power_stats pw;
    erg_status st = all_max_of(f, prof, power_w, &sc, &em, &pw, err);
    if (st)
        return st;
    int S = erg_frontier_num_stages(f), M = erg_frontier_num_microbatches(f);
    int V = sc.chunks;
    char path[4096], pfp[ERG_PROFILE_FINGERPRINT_LEN], ffp[ERG_FRONTIER_FINGERPRINT_LEN];
    erg_profile *cut = NULL;
    if ((st = planned_profile(prof, S, V, &cut, err)))
        return st;
    join(path, sizeof path, dir, "profile.csv");
    st = erg_profile_write_csv(cut ? cut : prof, path, err);
    erg_profile_fingerprint(cut ? cut : prof, pfp);
    erg_profile_free(cut);
    if (st)
        return st;
    /* the schedule as the plans name it: kind, chunks per rank, and the backward split that
     * derived I/W costs; the frontier plans.ergon carries: the files are one run's */
    erg__buf b = {0};
    st = erg__buf_printf(
        &b,
        "key,value\nformat,ergon-frontier-info\nversion,1\nschedule,%s\nnum_stages,%d\n"
        "num_chunks,%d\nnum_pipeline_stages,%d\nbackward_split,%.17g\n"
        "num_microbatches,%d\nblocking_power_w,%.17g\nunit_time_s,%.17g\n"
        "all_max_time_s,%.17g\nall_max_energy_j,%.17g\nprofile,profile.csv\n"
        "profile_fingerprint,%s\n",
        erg_schedule_name(sc.kind), S, V, S * V, sc.backward_split, M, power_w,
        erg_frontier_unit_s(f), em.time_s, em.energy_j, pfp);
    if (!st && erg_frontier_fingerprint(f, ffp) && ffp[0])
        st = erg__buf_printf(&b, "frontier_fingerprint,%s\n", ffp);
    /* the profile's own file name, for titles (show frontier) */
    const char *src = o->source_profile, *base = src ? strrchr(src, '/') : NULL;
    base = base ? base + 1 : src;
    if (!st && base && !strpbrk(base, ",\n\r"))
        st = erg__buf_printf(&b, "source_profile,%s\n", base);
    /* all-max clocks' power (docs/fleet.md) */
    if (!st)
        st = erg__buf_printf(&b,
                             "all_max_avg_power_w,%.17g\nall_max_peak_power_w,%.17g\n"
                             "all_max_trough_power_w,%.17g\n",
                             pw.avg_w, pw.peak_w, pw.trough_w);
    if (!st && o->switch_latency_s > 0)
        st = erg__buf_printf(&b, "switch_latency_s,%.17g\ntransfer_time_s,%.17g\n",
                             o->switch_latency_s, o->transfer_time_s);
    /* the all-max fallback beside the planner's frontier: plans.ergon's last plan (or the last
     * plan file), its point here for a directory of plan files only */
    erg_frontier_point fb;
    size_t n = erg_frontier_size(f);
    if (!st && erg_frontier_has_fallback(f) && !(st = erg_frontier_get(f, n - 1, &fb, err)))
        st = erg__buf_printf(&b,
                             "fallback,all_max\nfallback_time_s,%.17g\nfallback_energy_j,%.17g\n",
                             fb.time_s, fb.energy_j);
    if (st == ERG_ENOMEM)
        erg_error_set(err, st, "out of memory");
    join(path, sizeof path, dir, "frontier-info.csv");
    if (!st)
        st = erg__write_file(path, b.data, b.len, err);
    erg__buf_free(&b);
    return st;
}

erg_status erg_frontier_save_dir(const erg_frontier *f, const erg_profile *prof,
                                 double blocking_power_w, const char *dir,
                                 const erg_frontier_dir_opts *opts, size_t *removed, erg_error *err)
{
    erg_frontier_dir_opts d;
    if (!opts) {
        erg_frontier_dir_opts_init(&d);
        opts = &d;
    }
    size_t rm = 0;
    if (removed)
        *removed = 0;
    if (!f || !prof || !dir)
        return erg_error_set(err, ERG_EINVAL, "erg_frontier_save_dir: NULL argument");
    if (!(blocking_power_w >= 0))
        return erg_error_set(err, ERG_EINVAL,
                             "erg_frontier_save_dir: blocking power %g W: expected >= 0",
                             blocking_power_w);
    /* no stale plans: an earlier frontier's files are replaced under the directory's lock
     * (another writer's files never mix with these) */
    erg_frontier_dir_lock *lock = NULL;
    erg_status st = erg_frontier_dir_lock_take(dir, true, opts->lock_wait_s, &lock, err);
    if (!st)
        st = clean_dir(dir, &rm, err);
    if (!st)
        st =
            erg_frontier_write_dir(f, dir, opts->formats, opts->progress, opts->progress_user, err);
    if (!st && erg_frontier_size(f))
        st = write_info(f, prof, blocking_power_w, dir, opts, err);
    erg_frontier_dir_lock_release(lock);
    if (removed)
        *removed = rm;
    return st;
}

erg_status erg_frontier_complete_all_max(erg_frontier *f, const erg_profile *prof,
                                         double blocking_power_w, double switch_latency_s,
                                         double transfer_time_s, bool *added,
                                         erg_emulation *all_max, erg_error *err)
{
    if (added)
        *added = false;
    if (!f || !prof)
        return erg_error_set(err, ERG_EINVAL, "erg_frontier_complete_all_max: NULL argument");
    if (!erg_frontier_size(f))
        return erg_error_set(err, ERG_EINVAL, "the frontier is empty");
    erg_plan *p0 = NULL, *allmax = NULL;
    erg_frontier_baseline b;
    erg_frontier_baseline_init(&b);
    erg_status st = erg_frontier_plan(f, 0, &p0, err);
    if (st)
        return st;
    erg_schedule sc = erg_plan_schedule(p0);
    int S = erg_plan_num_stages(p0), M = erg_plan_num_microbatches(p0);
    b.prof = (erg_profile *)prof;
    b.power_w = blocking_power_w;
    if (!(st = erg_dag_new(&sc, S, M, &b.dag, err)) &&
        !(st = erg_plan_all_max(prof, S, M, &sc, blocking_power_w, &allmax, err)) &&
        !(st = erg_emulate(prof, b.dag, allmax, blocking_power_w, &b.all_max, NULL, NULL, err))) {
        b.have = true;
        b.switch_latency_s = switch_latency_s;
        b.transfer_time_s = transfer_time_s;
        if (all_max)
            *all_max = b.all_max;
        st = erg_frontier_baseline_complete(&b, f, allmax, added, err);
    }
    erg_plan_free(allmax);
    erg_dag_free(b.dag);
    erg_plan_free(p0);
    return st;
}

erg_status erg_frontier_plan_dir(const erg_profile *prof, int num_stages, int num_microbatches,
                                 int schedule_kind, double blocking_power_w, double unit_s,
                                 const char *dir, int formats, size_t *num_planned, bool *fallback,
                                 erg_error *err)
{
    if (num_planned)
        *num_planned = 0;
    if (fallback)
        *fallback = false;
    if (schedule_kind < 0 || schedule_kind >= ERG_SCHED_FILE)
        return erg_error_set(err, ERG_EINVAL,
                             "erg_frontier_plan_dir: schedule kind %d: expected a named "
                             "schedule (erg_schedule_kind below ERG_SCHED_FILE)",
                             schedule_kind);
    erg_perseus_opts o;
    erg_perseus_opts_init(&o);
    o.blocking_power_w = blocking_power_w;
    if (unit_s > 0)
        o.unit_s = unit_s;
    o.schedule.kind = (erg_schedule_kind)schedule_kind;
    erg_frontier *f = NULL;
    erg_status st = erg_plan_perseus(prof, num_stages, num_microbatches, &o, &f, err);
    if (!st && erg_frontier_size(f))
        st = erg_frontier_complete_all_max(f, prof, blocking_power_w, 0, 0, fallback, NULL, err);
    erg_frontier_dir_opts d;
    erg_frontier_dir_opts_init(&d);
    if (formats)
        d.formats = formats;
    if (!st)
        st = erg_frontier_save_dir(f, prof, blocking_power_w, dir, &d, NULL, err);
    if (!st && num_planned)
        *num_planned = erg_frontier_num_planned(f);
    erg_frontier_free(f);
    return st;
}

erg_status erg_frontier_dir_choose(const char *dir, double deadline_s, size_t *index,
                                   double *time_s, double *energy_j, erg_error *err)
{
    erg_frontier *f = NULL;
    erg_frontier_baseline b;
    erg_frontier_baseline_init(&b);
    erg_status st = erg_frontier_read_dir(dir, NULL, &f, err);
    if (!st)
        st = erg_frontier_baseline_open(dir, f, &b, err);
    size_t k = 0;
    erg_emulation em = {0};
    if (!st)
        st = erg_frontier_baseline_pick(&b, f, deadline_s, &k, &em, err);
    erg_frontier_point pt;
    if (!st && !b.have && !(st = erg_frontier_get(f, k, &pt, err))) {
        em.time_s = pt.time_s; /* no baseline: the planner's estimate */
        em.energy_j = pt.energy_j;
    }
    if (!st) {
        if (index)
            *index = k;
        if (time_s)
            *time_s = em.time_s;
        if (energy_j)
            *energy_j = em.energy_j;
    }
    erg_frontier_baseline_free(&b);
    erg_frontier_free(f);
    return st;
}
