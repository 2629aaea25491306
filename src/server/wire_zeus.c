/* wire_zeus.c: the Zeus Pipeline Frequency Optimizer wire protocol (ml-energy/zeus master,
 * zeus/optimizer/pipeline_frequency/; docs/zeus-protocol.md): POST /register_job with Zeus's
 * JobInfo, POST /register_rank/{job_id}, GET /schedule/{job_id}?rank=R answering
 * {"rank", "frequencies": [[name, clock], ...]}, POST /result/{job_id}. Zeus jobs run on the
 * shared state machine (jobs.c) with the "zeus:" scheduler classes (sched.c's table:
 * sched_fixed.c, sched_profiler.c, and "zeus:Frontier", ergon's Frontier, which makes a Zeus job
 * a member of the server's fleet like a Perseus one: fleet.c); this file only parses Zeus bodies
 * and formats Zeus answers.
 * A /register_job body is Zeus's when it carries job_metadata or none of the kronos-only
 * fields; the other routes are Zeus's when the job is. */
#include "server/zeus.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ergon/pipeline.h"
#include "ergon/plan.h"
#include "ergon/planner.h"
#include "server/store.h"

/* Errors are FastAPI's {"detail": ...}: 422 for bodies that fail validation,
 * 500 for what Zeus raises as RuntimeError (scheduler errors, unknown jobs). */
#define zfail(rs, status, ...) erg__srv_respond_error(rs, "detail", status, __VA_ARGS__)

static const char *const kronos_only[] = {"framework", "model_name", "partition_method",
                                          "microbatch_size", "num_microbatches"};

/* Is this register_job body Zeus's JobInfo? */
static bool zeus_job_body(const json_t *in)
{
    if (!json_is_object(in))
        return false;
    if (json_object_get(in, "job_metadata"))
        return true;
    for (size_t i = 0; i < sizeof kronos_only / sizeof kronos_only[0]; i++)
        if (json_object_get(in, kronos_only[i]))
            return false;
    return true;
}

/* job_metadata becomes part of the job id, hence of a directory name. */
static bool safe_metadata(const char *s)
{
    if (!strcmp(s, ".") || !strcmp(s, "..") || strlen(s) > 128)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == '/' || *p == '\\' || *p == 0x7f)
            return false;
    return true;
}

static const char *display_name(const char *internal)
{
    return strncmp(internal, "zeus:", 5) ? internal : internal + 5;
}

static bool is_3d(const char *name)
{
    size_t n = strlen(name);
    return n > 2 && !strcmp(name + n - 2, "3D");
}

static bool is_point(const char *name)
{
    return !strncmp(display_name(name), "PointSolution", 13);
}

static bool is_frontier(const char *name)
{
    return !strcmp(display_name(name), "Frontier");
}

/* A stage's instruction names of one iteration as the frontier's plans run them (Zeus 0.16's
 * client sends no pipe_schedule; its trainer calls on_instruction_begin with these names in this
 * order); NULL with why. */
static json_t *frontier_names(const json_t *args, int stages, int stage, char *why, size_t wn)
{
    const char *dir = json_string_value(json_object_get(args, "frontier_dir"));
    erg_frontier *f = NULL;
    erg_plan *p = NULL; /* plan 0: every plan of a frontier has the same instructions */
    erg_error e;
    json_t *a = NULL;
    const erg_instr *ins = NULL;
    int n = 0;
    if (erg_frontier_read_dir(dir ? dir : "", NULL, &f, &e) || erg_frontier_plan(f, 0, &p, &e))
        snprintf(why, wn, "Frontier: the frontier in '%.200s' cannot be read: %.300s",
                 dir ? dir : "", e.msg);
    else if (erg_plan_num_stages(p) != stages)
        snprintf(why, wn, "the frontier in '%.200s' has %d stages but the job has pp_degree %d",
                 dir ? dir : "", erg_plan_num_stages(p), stages);
    else if ((n = erg_order_rank(erg_plan_order(p), stage, &ins)) <= 0)
        snprintf(why, wn, "the frontier's plans give stage %d no instruction", stage);
    else if (!(a = json_array()))
        snprintf(why, wn, "out of memory");
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(erg_instr_kind_name(ins[i].kind)));
    erg_plan_free(p);
    erg_frontier_free(f);
    return a;
}

/* The plan entry that stage/rank uses: PointSolution3D has one entry per
 * stage; PointSolution one per rank (world == pp is required). */
static erg_status load_plan(erg_server *srv, srv_plan_pairs *pp, erg_error *err)
{
    const char *path = json_string_value(json_object_get(srv->zeus_sched_args, "solution_path"));
    return erg__srv_plan_load_pairs(path ? path : "", 0, pp, err);
}

/* ---- register_job ---- */

static void h_register_job(erg_server *srv, const json_t *in, srv_resp *rs)
{
    char why[512];
    long v[4];
    static const char *const ints[] = {"pp_degree", "dp_degree", "tp_degree", "world_size"};
    const json_t *jid = json_object_get(in, "job_id");
    if (jid && (!json_is_string(jid) || json_string_length(jid) != 0)) {
        zfail(rs, 422, "job_id must be an empty string: the server assigns it");
        return;
    }
    for (int i = 0; i < 4; i++)
        if (!erg__srv_json_get_int(in, ints[i], 1, 1 << 20, &v[i], why, sizeof why)) {
            zfail(rs, 422, "%s", why);
            return;
        }
    if (v[3] != v[0] * v[1] * v[2] || v[3] > 65536) {
        zfail(rs, 422,
              "world_size %ld must equal pp_degree x dp_degree x tp_degree = %ld (at most 65536)",
              v[3], v[0] * v[1] * v[2]);
        return;
    }
    const json_t *md = json_object_get(in, "job_metadata");
    if (md && !json_is_null(md) && !json_is_string(md)) {
        zfail(rs, 422, "job_metadata must be a string or null");
        return;
    }
    const char *meta = json_is_string(md) ? json_string_value(md) : "";
    if (*meta && !safe_metadata(meta)) {
        zfail(rs, 422,
              "job_metadata must be at most 128 characters without '/', '\\' or control "
              "characters (it becomes part of the dump directory name)");
        return;
    }
    if (!srv->zeus_scheduler) {
        zfail(rs, 500, "this server does not serve Zeus PFO jobs: %s",
              srv->zeus_off ? srv->zeus_off : "no Zeus scheduler is configured");
        return;
    }
    const char *sched = srv->zeus_scheduler;
    if (is_point(sched)) {
        /* Zeus's PointSolution constructor checks: one entry per rank
         * (PointSolution) or per stage (PointSolution3D). */
        srv_plan_pairs pp;
        erg_error e;
        if (load_plan(srv, &pp, &e)) {
            zfail(rs, 500, "%s", e.msg);
            return;
        }
        long want = is_3d(sched) ? v[0] : v[3];
        int have = pp.n_stages;
        erg__srv_plan_pairs_free(&pp);
        if (have != want) {
            zfail(rs, 500, "Solution file assumes %d ranks, but the job has %ld ranks.", have,
                  want);
            return;
        }
        if (!is_3d(sched) && v[3] != v[0]) {
            zfail(rs, 500,
                  "PointSolution gives every rank its own entry, but ergon serves one schedule "
                  "per pipeline stage: with dp_degree or tp_degree > 1 use "
                  "ZEUS_PFO_SCHEDULER=PointSolution3D (one entry per stage)");
            return;
        }
    }
    if (is_frontier(sched)) {
        /* The frontier must be of this pipeline: refused before the ranks register. */
        json_t *names = frontier_names(srv->zeus_sched_args, (int)v[0], 0, why, sizeof why);
        if (!names) {
            zfail(rs, 500, "%s", why);
            return;
        }
        json_decref(names);
    }
    /* The job record: the validated numbers, job_metadata, and the other fields the client
     * sent up to SRV_JOBINFO_UNKNOWN_MAX_BYTES. */
    json_t *info = json_object();
    if (!info) {
        zfail(rs, 500, "out of memory");
        return;
    }
    json_object_set_new(info, "job_id", json_string(""));
    for (int i = 0; i < 4; i++)
        json_object_set_new(info, ints[i], json_integer(v[i]));
    json_object_set(info, "job_metadata", md ? (json_t *)md : json_null());
    char dropped[512];
    erg__srv_jobinfo_add_unknown(info, in, NULL, dropped, sizeof dropped);
    /* Zeus's job id: local time + dp + pp + tp + scheduler [+ job_metadata]. */
    char ts[SRV_JOB_ID_TIME_LEN];
    erg__srv_job_id_time(ts);
    erg__buf id = {0};
    if (erg__buf_printf(&id, "%s+dp%ld+pp%ld+tp%ld+%s%s%s", ts, v[1], v[0], v[2],
                        display_name(sched), *meta ? "+" : "", meta)) {
        json_decref(info);
        zfail(rs, 500, "out of memory");
        return;
    }
    srv_job *j = NULL;
    srv_outcome oc = erg__srv_job_create(srv, id.data, info, sched, srv->zeus_sched_args,
                                         SRV_MODE_FREQUENCY, &j, why, sizeof why);
    erg__buf_free(&id);
    json_decref(info);
    if (oc != SRV_OK) {
        zfail(rs, oc == SRV_UNAVAILABLE ? 503 : oc == SRV_INVALID ? 422 : 500, "%s", why);
        return;
    }
    if (*dropped)
        erg__srv_log(srv, ERG_LOG_WARNING, "register_job", j->id,
                     "JobInfo fields ergon does not use are kept up to %d bytes; not stored: %s",
                     SRV_JOBINFO_UNKNOWN_MAX_BYTES, dropped);
    erg__srv_respond(rs, 200, json_string(j->id));
}

/* ---- register_rank ---- */

/* A stage's instruction names of one iteration (forward, backward, ...) in the order of the
 * configured schedule (InstructionProfiler's "schedule", default 1f1b) with its
 * "num_microbatches"; NULL with why. */
static json_t *schedule_names(erg_server *srv, int stages, int stage, char *why, size_t wn)
{
    const json_t *sn = json_object_get(srv->zeus_sched_args, "schedule");
    long m = (long)json_integer_value(json_object_get(srv->zeus_sched_args, "num_microbatches"));
    erg_schedule sched;
    memset(&sched, 0, sizeof sched);
    erg_error e;
    erg_order *o = NULL;
    if ((json_is_string(sn) && erg_schedule_parse(json_string_value(sn), &sched.kind, &e)) ||
        erg_order_new(&sched, stages, (int)m, &o, &e)) {
        snprintf(why, wn, "the stage's instructions cannot be derived: %.300s", e.msg);
        return NULL;
    }
    const erg_instr *ins = NULL;
    int n = erg_order_rank(o, stage, &ins);
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(erg_instr_kind_name(ins[i].kind)));
    erg_order_free(o);
    if (!a || n <= 0) {
        json_decref(a);
        snprintf(why, wn, "schedule gives stage %d no instruction", stage);
        return NULL;
    }
    return a;
}

static int cmp_desc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

static srv_job *lookup(erg_server *srv, const char *id, srv_resp *rs)
{
    srv_job *j = erg__srv_job_find(srv, id);
    if (!j) {
        /* Zeus: a KeyError, i.e. 500 */
        if (erg__srv_store_has_job(srv, id))
            zfail(rs, 500, "job '%.300s' was evicted (idle) and is no longer served", id);
        else
            zfail(rs, 500, "unknown job '%.300s'", id);
        return NULL;
    }
    erg__srv_job_touch(j);
    return j;
}

static void h_register_rank(erg_server *srv, const char *id, const json_t *in, srv_resp *rs)
{
    srv_job *j = lookup(srv, id, rs);
    if (!j)
        return;
    if (!srv_job_is_zeus(j)) {
        /* One job speaks one protocol (docs/http-api.md). */
        zfail(rs, 409,
              "job %.300s speaks the Perseus protocol (registered with Perseus's or /v1's "
              "JobInfo): POST /register_rank/{job_id} is a Zeus PFO route and is refused on it; "
              "register its ranks with POST /register_rank (or POST /v1/jobs/{job_id}/ranks)",
              j->id);
        return;
    }
    char why[512];
    long rank, dp, pp, tp;
    if (!json_is_object(in)) {
        zfail(rs, 422, "the body must be a RankInfo object");
        return;
    }
    if (!erg__srv_json_get_int(in, "rank", 0, j->world - 1, &rank, why, sizeof why) ||
        !erg__srv_json_get_int(in, "dp_rank", 0, j->dp - 1, &dp, why, sizeof why) ||
        !erg__srv_json_get_int(in, "pp_rank", 0, j->pp - 1, &pp, why, sizeof why) ||
        !erg__srv_json_get_int(in, "tp_rank", 0, j->tp - 1, &tp, why, sizeof why)) {
        zfail(rs, 422, "%s", why);
        return;
    }
    const json_t *af = json_object_get(in, "available_frequencies");
    size_t m = json_array_size(af);
    if (!json_is_array(af) || m == 0 || m > 10000) {
        zfail(rs, 422, "available_frequencies must be a non-empty list of integers");
        return;
    }
    int *states = erg__calloc(m, sizeof(int));
    int *instrs = NULL;
    json_t *names = NULL, *record = NULL;
    srv_plan_pairs plan = {0};
    if (!states) {
        zfail(rs, 500, "out of memory");
        return;
    }
    for (size_t i = 0; i < m; i++) {
        const json_t *x = json_array_get(af, i);
        if (!json_is_integer(x) || json_integer_value(x) <= 0 ||
            json_integer_value(x) > 1000000000) {
            zfail(rs, 422, "available_frequencies[%zu] must be a positive integer", i);
            goto out;
        }
        states[i] = (int)json_integer_value(x);
    }
    int *sorted = erg__calloc(m, sizeof(int));
    if (!sorted) {
        zfail(rs, 500, "out of memory");
        goto out;
    }
    memcpy(sorted, states, m * sizeof(int));
    qsort(sorted, m, sizeof(int), cmp_desc);
    for (size_t i = 1; i < m; i++)
        if (sorted[i] == sorted[i - 1]) {
            zfail(rs, 422, "available_frequencies has the value %d twice", sorted[i]);
            erg__free(sorted);
            goto out;
        }
    json_t *psr = json_array();
    for (size_t i = 0; psr && i < m; i++)
        json_array_append_new(psr, json_integer(sorted[i]));
    erg__free(sorted);
    /* The rank's instruction names: its plan entry (PointSolution) or its
     * pipe_schedule (InstructionProfiler, Zeus #158). */
    const json_t *ps = json_object_get(in, "pipe_schedule");
    if (is_point(j->sched_name)) {
        erg_error e;
        if (load_plan(srv, &plan, &e)) {
            json_decref(psr);
            zfail(rs, 500, "%s", e.msg);
            goto out;
        }
        if (!is_3d(j->sched_name) && rank != pp) {
            /* Zeus gives rank r entry r; ergon's schedule is per stage. */
            json_decref(psr);
            zfail(rs, 500,
                  "PointSolution serves plan entry %ld to rank %ld, but that rank has pp_rank "
                  "%ld and ergon serves one schedule per stage: use "
                  "ZEUS_PFO_SCHEDULER=PointSolution3D (entry = pp_rank)",
                  rank, rank, pp);
            goto out;
        }
        int entry = is_3d(j->sched_name) ? (int)pp : (int)rank;
        if (entry >= plan.n_stages) {
            json_decref(psr);
            zfail(rs, 500, "Solution file assumes %d ranks, but the job has %d ranks.",
                  plan.n_stages, is_3d(j->sched_name) ? j->pp : j->world);
            goto out;
        }
        names = json_array();
        for (int i = 0; names && i < plan.lens[entry]; i++)
            json_array_append_new(names, json_string(plan.names[entry][i]));
    } else if ((!ps || json_is_null(ps)) && is_frontier(j->sched_name)) {
        /* Frontier: the stage's instructions as the frontier's plans run them. */
        char why2[600];
        if (!(names = frontier_names(j->sched_args, j->pp, (int)pp, why2, sizeof why2))) {
            json_decref(psr);
            zfail(rs, 500, "%s", why2);
            goto out;
        }
    } else if ((!ps || json_is_null(ps)) &&
               json_object_get(srv->zeus_sched_args, "num_microbatches")) {
        /* Zeus 0.16's client sends no pipe_schedule: the stage's names from the schedule
         * the configuration names (1F1B by default) for pp_degree stages. */
        char why2[400];
        if (!(names = schedule_names(srv, j->pp, (int)pp, why2, sizeof why2))) {
            json_decref(psr);
            zfail(rs, 422, "%s", why2);
            goto out;
        }
    } else {
        size_t n = json_array_size(ps);
        if (!json_is_array(ps) || n == 0 || n > 1000000) {
            json_decref(psr);
            zfail(rs, 422,
                  "pipe_schedule must not be empty: %s needs each rank's instruction "
                  "names of one iteration (Zeus 0.16's client sends none: give the server's "
                  "scheduler arguments num_microbatches, and schedule if not 1f1b, so that it "
                  "knows them)",
                  display_name(j->sched_name));
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            const json_t *x = json_array_get(ps, i);
            if (!json_is_string(x) || json_string_length(x) == 0 || json_string_length(x) > 64) {
                json_decref(psr);
                zfail(rs, 422, "pipe_schedule[%zu] must be an instruction name (1-64 characters)",
                      i);
                goto out;
            }
        }
        names = json_incref((json_t *)ps);
    }
    size_t n = json_array_size(names);
    instrs = erg__calloc(n + 1, sizeof(int));
    if (!names || !psr || !instrs) {
        json_decref(psr);
        zfail(rs, 500, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        int c = erg__srv_instr_code(json_string_value(json_array_get(names, i)));
        instrs[i] = c < 0 ? SRV_I_OTHER : c;
    }
    /* Stored record: RankInfo's fields plus what the state machine needs to
     * rebuild the rank after a restart (pipe_schedule names, the states
     * sorted); ranks.json shows RankInfo's fields only. */
    record =
        json_pack("{s:i,s:i,s:i,s:i,s:O,s:O,s:o}", "rank", (json_int_t)rank, "dp_rank",
                  (json_int_t)dp, "pp_rank", (json_int_t)pp, "tp_rank", (json_int_t)tp,
                  "available_frequencies", af, "pipe_schedule", names, "power_state_range", psr);
    if (!record) {
        zfail(rs, 500, "out of memory");
        goto out;
    }
    srv_rank_spec sp = {rank, (int)dp, (int)pp, (int)tp, instrs, (int)n, states, (int)m};
    srv_outcome oc = erg__srv_job_add_rank(srv, j, &sp, record, why, sizeof why);
    if (oc == SRV_OK || oc == SRV_DUPLICATE)
        erg__srv_respond(rs, 200, NULL);
    else
        zfail(rs,
              oc == SRV_INVALID       ? 422
              : oc == SRV_CONFLICT    ? 409
              : oc == SRV_UNAVAILABLE ? 503
                                      : 500,
              "%s", why);
out:
    erg__srv_plan_pairs_free(&plan);
    json_decref(names);
    json_decref(record);
    erg__free(instrs);
    erg__free(states);
}

/* ---- schedule ---- */

static void schedule_reply(srv_job *j, long r, srv_resp *rs)
{
    int s = j->ranks[r].pp;
    const json_t *names = json_object_get(j->ranks[r].info, "pipe_schedule");
    json_t *fr = json_array();
    for (int i = 0; fr && i < j->ctx.n_instrs[s]; i++)
        json_array_append_new(
            fr, json_pack("[O,i]", json_array_get(names, (size_t)i), (json_int_t)j->cur[s][i]));
    erg__srv_respond(rs, 200, json_pack("{s:i,s:o}", "rank", (json_int_t)r, "frequencies", fr));
}

static bool schedule_answer(erg_server *srv, srv_job *j, long r, long w, int flags, bool expired,
                            srv_resp *rs)
{
    (void)flags;
    switch (erg__srv_job_schedule_state(srv, j, w)) {
    case SRV_SCHED_STOPPING:
        zfail(rs, 503, "the server is shutting down; retry");
        return true;
    case SRV_SCHED_ENDED:
        /* Zeus raises RuntimeError for all of these: 500 */
        if (j->state == SRV_JOB_DONE)
            zfail(rs, 500, "[profiling-done] job %s has finished: %s", j->id,
                  j->message ? j->message : "");
        else if (j->state == SRV_JOB_FAILED)
            zfail(rs, 500, "%s", j->message ? j->message : "scheduler failure");
        else
            zfail(rs, 500, "job %s was aborted: %s", j->id, j->message ? j->message : "");
        return true;
    case SRV_SCHED_READY:
        schedule_reply(j, r, rs);
        return true;
    case SRV_SCHED_LATE:
        zfail(rs, 409, "window %ld of job %s is over; rank %ld asked for it late", w, j->id, r);
        return true;
    case SRV_SCHED_PENDING:
        break;
    }
    if (!expired)
        return false;
    zfail(rs, 503, "window %ld of job %s is not ready yet; retry", w, j->id);
    return true;
}

static void h_schedule(erg_server *srv, srv_job *j, const srv_req *rq, srv_resp *rs)
{
    char buf[32];
    long r;
    if (!erg__srv_query_get(rq->query, "rank", buf, sizeof buf) || !erg__parse_long(buf, &r)) {
        zfail(rs, 422, "query parameter rank=<int> is required");
        return;
    }
    erg__srv_job_touch(j);
    char why[512];
    long w;
    srv_outcome oc = erg__srv_job_ask(srv, j, r, &w, why, sizeof why);
    if (oc != SRV_OK) {
        zfail(rs, oc == SRV_NOT_FOUND ? 500 : 409, "%s", why);
        return;
    }
    if (!erg__srv_job_wait(srv, j, r, w, rq->max_wait, rq->conn, schedule_answer, 0, rs))
        zfail(rs, 503, "out of memory; retry");
}

/* ---- result ---- */

static json_t *floats(const json_t *v)
{
    if (json_is_number(v))
        return json_real(json_number_value(v));
    if (json_is_array(v)) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < json_array_size(v); i++)
            json_array_append_new(a, floats(json_array_get(v, i)));
        return a;
    }
    return json_incref((json_t *)v);
}

/* ProfilingResult with Zeus's free-form breakdown keys: the record keeps
 * them all; the numbers the schedulers see keep the pipe instructions. */
static json_t *zeus_result(const json_t *in, srv_result *parsed, long *rank, char *why, size_t wn)
{
    if (!json_is_object(in)) {
        snprintf(why, wn, "the body must be a ProfilingResult object");
        return NULL;
    }
    if (!erg__srv_json_get_int(in, "rank", 0, 1 << 20, rank, why, wn))
        return NULL;
    json_t *o = json_pack("{s:i}", "rank", (json_int_t)*rank);
    json_t *known = json_pack("{s:i}", "rank", (json_int_t)*rank);
    static const char *const keys[] = {"iter_time", "iter_energy", "time_breakdown",
                                       "energy_breakdown"};
    for (int i = 0; o && known && i < 4; i++) {
        const json_t *v = json_object_get(in, keys[i]);
        if (i < 2) {
            if (!v) {
                snprintf(why, wn, "field %s is missing", keys[i]);
                goto fail;
            }
            json_object_set_new(o, keys[i], floats(v));
            json_object_set_new(known, keys[i], floats(v));
            continue;
        }
        if (v && !json_is_object(v)) {
            snprintf(why, wn, "field %s must be an object of lists of lists of numbers", keys[i]);
            goto fail;
        }
        json_t *all = json_object(), *kn = json_object();
        const char *k;
        json_t *x;
        if (v)
            json_object_foreach((json_t *)v, k, x)
            {
                json_object_set_new(all, k, floats(x));
                if (erg__srv_instr_code(k) >= 0)
                    json_object_set_new(kn, k, floats(x));
            }
        json_object_set_new(o, keys[i], all);
        json_object_set_new(known, keys[i], kn);
    }
    erg_error e;
    if (!o || !known || erg__srv_result_from_json(known, parsed, &e)) {
        snprintf(why, wn, "%s", o && known ? e.msg : "out of memory");
        goto fail;
    }
    json_decref(known);
    return o;
fail:
    json_decref(o);
    json_decref(known);
    return NULL;
}

static void h_result(erg_server *srv, srv_job *j, const srv_body *b, srv_resp *rs)
{
    erg__srv_job_touch(j);
    if (!b->v) {
        zfail(rs, 422, "%s", b->err);
        return;
    }
    char why[700];
    long r;
    srv_result parsed;
    memset(&parsed, 0, sizeof parsed);
    json_t *rec = zeus_result(b->v, &parsed, &r, why, sizeof why);
    if (!rec) {
        zfail(rs, 422, "%s", why);
        return;
    }
    if (r >= j->world) {
        zfail(rs, 422, "field rank = %ld is out of range [0, %d]", r, j->world - 1);
    } else {
        srv_outcome oc =
            erg__srv_job_add_result(srv, j, r, j->window, rec, &parsed, why, sizeof why);
        if (oc == SRV_OK)
            erg__srv_respond(rs, 200, NULL);
        else
            zfail(rs,
                  oc == SRV_INVALID       ? 422
                  : oc == SRV_NOT_FOUND   ? 500
                  : oc == SRV_UNAVAILABLE ? 503
                                          : 409,
                  "%s", why);
    }
    json_decref(rec);
    erg__srv_result_free(&parsed);
}

/* ---- routes ---- */

static srv_job *zeus_job(erg_server *srv, const char *id)
{
    srv_job *j = erg__srv_job_find(srv, id);
    return j && srv_job_is_zeus(j) ? j : NULL;
}

static bool route(erg_server *srv, const srv_req *rq, srv_resp *rs)
{
    const char *path = rq->path;
    if (!strcmp(path, "/register_job")) {
        if (!rq->post || !rq->body->v || !zeus_job_body(rq->body->v))
            return false; /* the kronos wire answers (or validates) it */
        h_register_job(srv, rq->body->v, rs);
        return true;
    }
    if (!strncmp(path, "/register_rank/", 15)) {
        if (!rq->post)
            zfail(rs, 405, "use POST on /register_rank/{job_id}");
        else if (!rq->body->v)
            zfail(rs, 422, "%s", rq->body->err);
        else
            h_register_rank(srv, path + 15, rq->body->v, rs);
        return true;
    }
    if (!strncmp(path, "/schedule/", 10) && rq->get) {
        srv_job *j = zeus_job(srv, path + 10);
        if (!j)
            return false;
        h_schedule(srv, j, rq, rs);
        return true;
    }
    if (!strncmp(path, "/result/", 8) && rq->post) {
        srv_job *j = zeus_job(srv, path + 8);
        if (!j)
            return false;
        h_result(srv, j, rq->body, rs);
        return true;
    }
    return false;
}

const srv_wire erg__srv_wire_zeus = {"zeus", route};

/* ---- configuration ---- */

erg_status erg__srv_zeus_config(erg_server *srv, const erg_server_opts *opts, erg_error *err)
{
    if (!opts->zeus_scheduler && !opts->zeus_scheduler_args)
        return ERG_OK; /* derived from the server's scheduler, or refused with a message */
    const char *name = opts->zeus_scheduler ? opts->zeus_scheduler : "PointSolution";
    static const char *const known[] = {"PointSolution", "PointSolution3D", "InstructionProfiler",
                                        "InstructionProfiler3D", "Frontier"};
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ok = ok || !strcmp(name, known[i]);
    if (!ok)
        return erg_error_set(err, ERG_EINVAL,
                             "Zeus scheduler '%.64s' is unknown (ZEUS_PFO_SCHEDULER: "
                             "PointSolution, PointSolution3D, InstructionProfiler, "
                             "InstructionProfiler3D, and ergon's Frontier)",
                             name);
    json_error_t je;
    json_t *args = json_loads(opts->zeus_scheduler_args ? opts->zeus_scheduler_args : "{}", 0, &je);
    if (!args || !json_is_object(args)) {
        erg_error_set(err, ERG_EINVAL, "ZEUS_PFO_SCHEDULER_ARGS must be a JSON object: %s",
                      args ? "got another JSON value" : je.text);
        json_decref(args);
        return ERG_EINVAL;
    }
    erg__buf internal = {0};
    if (erg__buf_printf(&internal, "zeus:%s", name)) {
        json_decref(args);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    erg_error e;
    if (erg__srv_sched_check_args(internal.data, args, &e)) {
        erg__buf_free(&internal);
        json_decref(args);
        /* Zeus's wording (PFOServerSettings._validate_scheduler_args) */
        return erg_error_set(err, ERG_EINVAL, "Invalid scheduler args for %s: %s", name, e.msg);
    }
    if (!opts->dump_data && !strncmp(name, "InstructionProfiler", 19)) {
        erg__buf_free(&internal);
        json_decref(args);
        return erg_error_set(err, ERG_EINVAL,
                             "InstructionProfiler requires dump_data to be enabled.");
    }
    srv->zeus_scheduler = internal.data;
    srv->zeus_sched_args = args;
    srv->zeus_source = "the Zeus configuration (ZEUS_PFO_SCHEDULER, ZEUS_PFO_SCHEDULER_ARGS)";
    return ERG_OK;
}

/* The scheduler family both protocols share: PointSolution or InstructionProfiler (the *3D
 * names included), or ergon's Frontier; else NULL. */
static const char *family(const char *name)
{
    const char *n = display_name(name);
    if (!strcmp(n, "Frontier"))
        return "Frontier";
    if (!strncmp(n, "PointSolution", 13) && (!n[13] || !strcmp(n + 13, "3D")))
        return "PointSolution";
    if (!strncmp(n, "InstructionProfiler", 19) && (!n[19] || !strcmp(n + 19, "3D")))
        return "InstructionProfiler";
    return NULL;
}

json_t *erg__srv_zeus_to_perseus(const erg_server *srv, const char **name)
{
    const char *fam = family(srv->zeus_scheduler);
    json_t *a = json_object();
    if (!a)
        return NULL;
    *name = fam;
    if (!strcmp(fam, "Frontier")) {
        /* The same class on the same arguments: both protocols' jobs join the fleet. */
        json_decref(a);
        return json_deep_copy(srv->zeus_sched_args);
    }
    if (!strcmp(fam, "PointSolution")) {
        /* Perseus's PointSolution on the same plan (its warm-up windows included). */
        json_object_set(a, "solution_path", json_object_get(srv->zeus_sched_args, "solution_path"));
    } else {
        const json_t *r = json_object_get(srv->zeus_sched_args, "warmup_step_ratio");
        const json_t *m = json_object_get(srv->zeus_sched_args, "minimum_frequency");
        if (r)
            json_object_set(a, "warmup_step_ratio", (json_t *)r);
        if (m)
            json_object_set(a, "minimum_power_state", (json_t *)m);
        static const char *const same[] = {"num_microbatches", "schedule"};
        for (int i = 0; i < 2; i++)
            if (json_object_get(srv->zeus_sched_args, same[i]))
                json_object_set(a, same[i], json_object_get(srv->zeus_sched_args, same[i]));
    }
    return a;
}

/* What a configuration means to a job of either protocol, for the conflict check:
 * {"family", plan file (real path) | profiler's ratio and minimum clock}. */
static json_t *canon(const char *name, const json_t *args, bool zeus)
{
    const char *fam = family(name);
    if (!fam)
        return json_pack("{s:s}", "family", name);
    if (!strcmp(fam, "Frontier")) {
        /* every argument, the directory by its real path */
        json_t *a = json_deep_copy(args);
        const char *d = json_string_value(json_object_get(args, "frontier_dir"));
        char *rp = d ? realpath(d, NULL) : NULL;
        if (a && rp)
            json_object_set_new(a, "frontier_dir", json_string(rp));
        free(rp);
        return json_pack("{s:s,s:o}", "family", fam, "args", a ? a : json_null());
    }
    if (!strcmp(fam, "PointSolution")) {
        const json_t *p = json_object_get(args, "solution_path");
        const char *path = json_is_string(p) ? json_string_value(p) : zeus ? "" : "frequencies.py";
        char *rp = realpath(path, NULL);
        json_t *o = json_pack("{s:s,s:s}", "family", fam, "plan", rp ? rp : path);
        free(rp);
        return o;
    }
    const json_t *r = json_object_get(args, "warmup_step_ratio");
    const json_t *m = json_object_get(args, zeus ? "minimum_frequency" : "minimum_power_state");
    return json_pack("{s:s,s:f,s:I}", "family", fam, "warmup_step_ratio",
                     json_is_number(r) ? json_number_value(r) : 0.1, "minimum",
                     (json_int_t)(json_is_integer(m) ? json_integer_value(m) : 850));
}

/* The plan file's format, by its first bytes (erg__srv_plan_load_pairs reads all three). */
static const char *plan_format(const char *path)
{
    char buf[256];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    int seen = 0;
    for (const char *p = buf; *p; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            continue;
        if (*p == '#') { /* a comment line */
            while (*p && *p != '\n')
                p++;
            if (!*p)
                break;
            continue;
        }
        if (!seen && *p == '{')
            return "ergon JSON plan";
        if (*p == '[' && seen < 2) {
            seen++;
            continue;
        }
        if (seen == 2)
            return *p == '(' || *p == '[' ? "Zeus (name, clock) plan" : "Perseus plan";
        break;
    }
    return "plan";
}

erg_status erg__srv_zeus_reconcile(erg_server *srv, bool perseus_given, erg_error *err)
{
    if (srv->zeus_scheduler && perseus_given) {
        /* Both given: they must mean the same to either protocol's jobs. */
        json_t *a = canon(srv->scheduler, srv->sched_args, false);
        json_t *b = canon(srv->zeus_scheduler, srv->zeus_sched_args, true);
        bool same = a && b && json_equal(a, b);
        char *ta = erg__srv_json_compact(srv->sched_args),
             *tb = erg__srv_json_compact(srv->zeus_sched_args);
        erg_status st = ERG_OK;
        if (!same)
            st = erg_error_set(
                err, ERG_EINVAL,
                "conflicting configuration: Perseus and /v1 jobs would run %s %.300s "
                "(--scheduler/--scheduler-args, PERSEUS_SCHEDULER/PERSEUS_SCHEDULER_ARGS) but "
                "Zeus jobs %s %.300s (--zeus-scheduler/--zeus-scheduler-args, "
                "ZEUS_PFO_SCHEDULER/ZEUS_PFO_SCHEDULER_ARGS); one server serves one "
                "configuration to both protocols: give only one of them (a /v1 job may still "
                "name its own scheduler)",
                srv->scheduler, ta ? ta : "", display_name(srv->zeus_scheduler), tb ? tb : "");
        json_decref(a);
        json_decref(b);
        erg__free(ta);
        erg__free(tb);
        return st;
    }
    if (srv->zeus_scheduler)
        return ERG_OK; /* the server's scheduler was derived from it */
    /* Only the server's scheduler: Zeus jobs run its counterpart when Zeus has one. */
    const char *fam = family(srv->scheduler);
    char why[600] = "";
    json_t *zargs = NULL;
    if (!fam) {
        snprintf(why, sizeof why,
                 "this server's scheduler is %s, which Zeus's protocol has no counterpart for "
                 "(Zeus jobs run PointSolution, InstructionProfiler or Frontier): start ergon "
                 "serve with "
                 "--scheduler PointSolution --scheduler-args '{\"solution_path\": "
                 "\"freqs_pipeline_00000.py\"}' (or ZEUS_PFO_SCHEDULER_ARGS)",
                 srv->scheduler);
    } else if (!strcmp(fam, "Frontier")) {
        zargs = json_deep_copy(srv->sched_args); /* the same frontier: one fleet */
    } else if (srv->mode != SRV_MODE_FREQUENCY) {
        snprintf(why, sizeof why,
                 "this server's %s runs in %s mode and Zeus jobs set clocks (frequency mode)",
                 srv->scheduler, erg__srv_mode_name(srv->mode));
    } else if (!strcmp(fam, "PointSolution")) {
        const json_t *p = json_object_get(srv->sched_args, "solution_path");
        zargs = json_pack("{s:s}", "solution_path",
                          json_is_string(p) ? json_string_value(p) : "frequencies.py");
    } else if (!srv->opts.dump_data) {
        snprintf(why, sizeof why, "InstructionProfiler requires dump_data to be enabled.");
    } else {
        const json_t *r = json_object_get(srv->sched_args, "warmup_step_ratio");
        const json_t *m = json_object_get(srv->sched_args, "minimum_power_state");
        zargs = json_object();
        if (zargs && r)
            json_object_set(zargs, "warmup_step_ratio", (json_t *)r);
        if (zargs && m)
            json_object_set(zargs, "minimum_frequency", (json_t *)m);
        static const char *const same[] = {"num_microbatches", "schedule"};
        for (int i = 0; zargs && i < 2; i++)
            if (json_object_get(srv->sched_args, same[i]))
                json_object_set(zargs, same[i], json_object_get(srv->sched_args, same[i]));
    }
    if (zargs) {
        erg__buf internal = {0};
        erg_error e;
        if (erg__buf_printf(&internal, "zeus:%s", fam)) {
            json_decref(zargs);
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
        if (erg__srv_sched_check_args(internal.data, zargs, &e)) {
            /* e.g. a directory of plans: Zeus serves one plan file */
            snprintf(why, sizeof why, "this server's %s cannot serve Zeus jobs: %s%s",
                     srv->scheduler, e.msg,
                     !strcmp(fam, "PointSolution") ? " (Zeus serves one plan file)" : "");
            erg__buf_free(&internal);
            json_decref(zargs);
        } else {
            srv->zeus_scheduler = internal.data;
            srv->zeus_sched_args = zargs;
            srv->zeus_source = "the server's scheduler (--scheduler, PERSEUS_SCHEDULER)";
        }
    }
    if (!srv->zeus_scheduler && !(srv->zeus_off = erg__strdup(why)))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    return ERG_OK;
}

json_t *erg__srv_zeus_info(const erg_server *srv)
{
    if (!srv->zeus_scheduler)
        return json_pack("{s:b,s:s}", "served", 0, "reason", srv->zeus_off ? srv->zeus_off : "");
    json_t *o =
        json_pack("{s:b,s:s,s:O,s:s}", "served", 1, "scheduler", display_name(srv->zeus_scheduler),
                  "scheduler_args", srv->zeus_sched_args, "from", srv->zeus_source);
    const json_t *p = json_object_get(srv->zeus_sched_args, "solution_path");
    if (o && json_is_string(p)) {
        char *rp = realpath(json_string_value(p), NULL);
        srv_plan_pairs pp;
        erg_error e;
        int stages = erg__srv_plan_load_pairs(json_string_value(p), 0, &pp, &e) ? -1 : pp.n_stages;
        if (stages >= 0)
            erg__srv_plan_pairs_free(&pp);
        json_object_set_new(o, "plan",
                            json_pack("{s:s,s:s,s:i}", "path", rp ? rp : json_string_value(p),
                                      "format", plan_format(json_string_value(p)), "stages",
                                      stages));
        free(rp);
    }
    return o;
}

void erg__srv_zeus_log_config(erg_server *srv)
{
    json_t *o = erg__srv_zeus_info(srv);
    if (!srv->zeus_scheduler) {
        erg__srv_log(srv, ERG_LOG_INFO, "zeus", NULL, "Zeus PFO jobs are not served: %s",
                     srv->zeus_off ? srv->zeus_off : "");
    } else {
        char *args = erg__srv_json_compact(srv->zeus_sched_args);
        const json_t *plan = json_object_get(o, "plan");
        if (plan)
            erg__srv_log(srv, ERG_LOG_INFO, "zeus", NULL,
                         "Zeus PFO jobs run %s %s from %s; plan %s loaded (%s, %d stages)",
                         display_name(srv->zeus_scheduler), args ? args : "", srv->zeus_source,
                         json_string_value(json_object_get(plan, "path")),
                         json_string_value(json_object_get(plan, "format")),
                         (int)json_integer_value(json_object_get(plan, "stages")));
        else
            erg__srv_log(srv, ERG_LOG_INFO, "zeus", NULL, "Zeus PFO jobs run %s %s from %s",
                         display_name(srv->zeus_scheduler), args ? args : "", srv->zeus_source);
        erg__free(args);
    }
    json_decref(o);
}

void erg__srv_zeus_config_free(erg_server *srv)
{
    erg__free(srv->zeus_scheduler);
    erg__free(srv->zeus_off);
    json_decref(srv->zeus_sched_args);
    srv->zeus_scheduler = NULL;
    srv->zeus_off = NULL;
    srv->zeus_sched_args = NULL;
}

/* ---- dumps ---- */

json_t *erg__srv_zeus_rank_dump(const srv_job *j, const json_t *record)
{
    json_t *o = json_object();
    static const char *const keys[] = {"rank", "dp_rank", "pp_rank", "tp_rank",
                                       "available_frequencies"};
    for (size_t i = 0; o && i < sizeof keys / sizeof keys[0]; i++)
        json_object_set(o, keys[i], json_object_get(record, keys[i]));
    /* #158's RankInfo carried pipe_schedule; its InstructionProfiler needs it. */
    if (o && !is_point(j->sched_name))
        json_object_set(o, "pipe_schedule", json_object_get(record, "pipe_schedule"));
    return o;
}

json_t *erg__srv_zeus_sched_dump(const srv_job *j)
{
    json_t *a = json_array();
    for (int r = 0; a && r < j->world; r++) {
        int s = j->ranks[r].pp;
        const json_t *names = json_object_get(j->ranks[r].info, "pipe_schedule");
        json_t *fr = json_array();
        for (int i = 0; fr && i < j->ctx.n_instrs[s]; i++)
            json_array_append_new(
                fr, json_pack("[O,i]", json_array_get(names, (size_t)i), (json_int_t)j->cur[s][i]));
        json_array_append_new(a, json_pack("{s:i,s:o}", "rank", (json_int_t)r, "frequencies", fr));
    }
    return a;
}

/* Python's f"{x}": the string, the integer, or None. */
static void py_field(erg__buf *b, const json_t *info, const char *key, const char *prefix,
                     bool *fail)
{
    const json_t *v = json_object_get(info, key);
    erg_status st;
    if (json_is_string(v) && safe_metadata(json_string_value(v)))
        st = erg__buf_printf(b, "%s%s", prefix, json_string_value(v));
    else if (json_is_integer(v))
        st = erg__buf_printf(b, "%s%lld", prefix, (long long)json_integer_value(v));
    else
        st = erg__buf_printf(b, "%sNone", prefix);
    *fail = *fail || st;
}

char *erg__srv_zeus_csv_name(const srv_job *j)
{
    erg__buf b = {0};
    bool fail = false;
    py_field(&b, j->info, "framework", "", &fail);
    py_field(&b, j->info, "model_name", "+", &fail);
    py_field(&b, j->info, "partition_method", "+", &fail);
    fail = fail || erg__buf_printf(&b, "+dp%d+tp%d+pp%d", j->dp, j->tp, j->pp);
    py_field(&b, j->info, "microbatch_size", "+mbs", &fail);
    py_field(&b, j->info, "num_microbatches", "+nmb", &fail);
    fail = fail || erg__buf_printf(&b, ".csv");
    if (fail) {
        erg__buf_free(&b);
        return NULL;
    }
    return b.data;
}
