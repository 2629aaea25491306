/* wire_perseus.c: the Perseus wire protocol (/info, /register_job, /register_rank,
 * /schedule/{id}, /result/{id}) and ergon's /v1 API, which shares its data model: body
 * validation, routes and answer formats. The job state machine is jobs.c. */
#include "server/jobs.h"

#include <math.h>
#include <string.h>

#include "server/store.h"
#include "server/zeus.h"

/* Error bodies: {"detail": ...} on the Perseus routes (FastAPI), {"error": ...} on /v1. */
#define fail(rs, v1, status, ...)                                                                  \
    erg__srv_respond_error(rs, (v1) ? "error" : "detail", status, __VA_ARGS__)

/* ---- validation of wire objects ---- */

static bool safe_name(const char *s)
{
    if (!*s || !strcmp(s, ".") || !strcmp(s, "..") || strlen(s) > 128)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == '/' || *p == '\\' || *p == 0x7f)
            return false;
    return true;
}

static const char *const job_str_fields[] = {"framework", "model_name", "partition_method"};
static const char *const job_int_fields[] = {"pp_degree",  "dp_degree",       "tp_degree",
                                             "world_size", "microbatch_size", "num_microbatches"};

/* JobInfo -> normalised object (or NULL with why); the unknown fields it drops (too large)
 * are named in dropped. */
static json_t *check_job_info(const json_t *in, bool v1, char *why, size_t wn, char *dropped,
                              size_t dn)
{
    if (!json_is_object(in)) {
        snprintf(why, wn, "the body must be a JobInfo object");
        return NULL;
    }
    const json_t *jid = json_object_get(in, "job_id");
    if (jid && (!json_is_string(jid) || json_string_length(jid) != 0)) {
        snprintf(why, wn, "job_id must be an empty string: the server assigns it");
        return NULL;
    }
    if (!jid && !v1) {
        snprintf(why, wn, "field job_id is missing");
        return NULL;
    }
    json_t *o = json_object();
    json_object_set_new(o, "job_id", json_string(""));
    long v[6];
    for (int i = 0; i < 6; i++)
        if (!erg__srv_json_get_int(in, job_int_fields[i], 1, 1 << 20, &v[i], why, wn)) {
            json_decref(o);
            return NULL;
        }
    if (v[3] != v[0] * v[1] * v[2] || v[3] > 65536) {
        snprintf(why, wn,
                 "world_size %ld must equal pp_degree x dp_degree x tp_degree = %ld (at most "
                 "65536)",
                 v[3], v[0] * v[1] * v[2]);
        json_decref(o);
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        const json_t *s = json_object_get(in, job_str_fields[i]);
        if (!json_is_string(s) || !safe_name(json_string_value(s))) {
            snprintf(why, wn,
                     "field %s must be a non-empty string of at most 128 characters without '/' "
                     "or control characters",
                     job_str_fields[i]);
            json_decref(o);
            return NULL;
        }
        json_object_set(o, job_str_fields[i], (json_t *)s);
    }
    for (int i = 0; i < 6; i++)
        json_object_set_new(o, job_int_fields[i], json_integer(v[i]));
    /* Fields ergon does not use (job_metadata, a framework's own) stay in the job record as
     * sent, up to SRV_JOBINFO_UNKNOWN_MAX_BYTES; /v1's scheduler choice is stored apart. */
    static const char *const apart[] = {"scheduler", "scheduler_args", "mode", NULL};
    erg__srv_jobinfo_add_unknown(o, in, apart, dropped, dn);
    return o;
}

static int cmp_desc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

/* RankInfo -> normalised record and the state machine's view of it (sp's
 * arrays are erg__malloc'd; the caller frees them). */
static json_t *check_rank_info(const srv_job *j, const json_t *in, char *why, size_t wn,
                               srv_rank_spec *sp)
{
    memset(sp, 0, sizeof *sp);
    if (!json_is_object(in)) {
        snprintf(why, wn, "the body must be a RankInfo object");
        return NULL;
    }
    const json_t *jid = json_object_get(in, "job_id");
    if (jid && (!json_is_string(jid) || strcmp(json_string_value(jid), j->id))) {
        snprintf(why, wn, "job_id in the body does not match the job");
        return NULL;
    }
    long rank, dp, pp, tp;
    if (!erg__srv_json_get_int(in, "rank", 0, j->world - 1, &rank, why, wn) ||
        !erg__srv_json_get_int(in, "dp_rank", 0, j->dp - 1, &dp, why, wn) ||
        !erg__srv_json_get_int(in, "pp_rank", 0, j->pp - 1, &pp, why, wn) ||
        !erg__srv_json_get_int(in, "tp_rank", 0, j->tp - 1, &tp, why, wn))
        return NULL;
    const json_t *ps = json_object_get(in, "pipe_schedule");
    size_t n = json_array_size(ps);
    if (!json_is_array(ps) || n == 0 || n > 1000000) {
        snprintf(why, wn, "pipe_schedule must be a non-empty list of instructions");
        return NULL;
    }
    int *instrs = erg__calloc(n, sizeof(int));
    json_t *psn = json_array();
    if (!instrs || !psn) {
        snprintf(why, wn, "out of memory");
        erg__free(instrs);
        json_decref(psn);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(ps, i);
        int code = json_is_string(x) ? erg__srv_instr_code(json_string_value(x)) : -1;
        if (code < 0) {
            snprintf(why, wn,
                     "pipe_schedule[%zu] is not a pipe instruction (load, forward, backward, p2p, "
                     "cc, step, low, high, other, pure_backward, backward_input, "
                     "backward_weight, overlap_f_b)",
                     i);
            erg__free(instrs);
            json_decref(psn);
            return NULL;
        }
        instrs[i] = code;
        json_array_append(psn, (json_t *)x);
    }
    const json_t *pr = json_object_get(in, "power_state_range");
    size_t m = json_array_size(pr);
    if (!json_is_array(pr) || m == 0 || m > 10000) {
        snprintf(why, wn, "power_state_range must be a non-empty list of integers");
        erg__free(instrs);
        json_decref(psn);
        return NULL;
    }
    int *vals = erg__calloc(m, sizeof(int));
    if (!vals) {
        snprintf(why, wn, "out of memory");
        erg__free(instrs);
        json_decref(psn);
        return NULL;
    }
    for (size_t i = 0; i < m; i++) {
        const json_t *x = json_array_get(pr, i);
        if (!json_is_integer(x) || json_integer_value(x) <= 0 ||
            json_integer_value(x) > 1000000000) {
            snprintf(why, wn, "power_state_range[%zu] must be a positive integer", i);
            erg__free(vals);
            erg__free(instrs);
            json_decref(psn);
            return NULL;
        }
        vals[i] = (int)json_integer_value(x);
    }
    qsort(vals, m, sizeof(int), cmp_desc);
    for (size_t i = 1; i < m; i++)
        if (vals[i] == vals[i - 1]) {
            snprintf(why, wn, "power_state_range has the value %d twice", vals[i]);
            erg__free(vals);
            erg__free(instrs);
            json_decref(psn);
            return NULL;
        }
    json_t *prn = json_array();
    for (size_t i = 0; i < m; i++)
        json_array_append_new(prn, json_integer(vals[i]));
    *sp = (srv_rank_spec){rank, (int)dp, (int)pp, (int)tp, instrs, (int)n, vals, (int)m};
    return json_pack("{s:s,s:i,s:i,s:i,s:i,s:o,s:o}", "job_id", j->id, "rank", (json_int_t)rank,
                     "dp_rank", (json_int_t)dp, "pp_rank", (json_int_t)pp, "tp_rank",
                     (json_int_t)tp, "pipe_schedule", psn, "power_state_range", prn);
}

static void spec_free(srv_rank_spec *sp)
{
    erg__free((void *)sp->instrs);
    erg__free((void *)sp->states);
    sp->instrs = sp->states = NULL;
}

static json_t *body_json(const srv_body *b, srv_resp *rs, bool v1)
{
    if (!b->v) {
        fail(rs, v1, b->status ? b->status : v1 ? 400 : 422, "%s", b->err);
        return NULL;
    }
    return json_incref(b->v);
}

/* The status code of a state-machine outcome on this wire. */
static int outcome_status(srv_outcome o, bool v1)
{
    switch (o) {
    case SRV_OK:
    case SRV_DUPLICATE:
        return 200;
    case SRV_INVALID:
        return v1 ? 400 : 422;
    case SRV_CONFLICT:
    case SRV_NOT_RUNNING:
        return 409;
    case SRV_NOT_FOUND:
        return 404;
    case SRV_UNAVAILABLE:
        return 503;
    case SRV_INTERNAL:
        return 500;
    }
    return 500;
}

/* ---- handlers ---- */

static void h_info(erg_server *srv, srv_resp *rs, bool v1)
{
    json_t *o = erg__srv_server_info_json(srv, srv->scheduler, srv->sched_args, srv->mode);
    /* What Zeus PFO jobs run (one configuration serves both protocols); a Perseus
     * client's pydantic ServerInfo ignores the extra field. */
    if (o)
        json_object_set_new(o, "zeus", erg__srv_zeus_info(srv));
    if (v1 && o) {
        json_object_set_new(o, "version", json_string(erg_version()));
        json_object_set_new(o, "api", json_string("v1"));
    }
    erg__srv_respond(rs, 200, o);
}

static void h_register_job(erg_server *srv, const srv_body *b, srv_resp *rs, bool v1)
{
    json_t *in = body_json(b, rs, v1);
    if (!in)
        return;
    char why[512], dropped[512];
    int vcode = v1 ? 400 : 422;
    json_t *info = check_job_info(in, v1, why, sizeof why, dropped, sizeof dropped);
    const char *sched = srv->scheduler;
    json_t *args = json_incref(srv->sched_args);
    int mode = srv->mode;
    erg_error e;
    if (!info) {
        fail(rs, v1, vcode, "%s", why);
        goto out;
    }
    const json_t *sn = json_object_get(in, "scheduler");
    const json_t *sa = json_object_get(in, "scheduler_args");
    const json_t *md = json_object_get(in, "mode");
    /* /v1 jobs may bring their own scheduler, arguments and mode; each one
     * left out is the server's (arguments: {} when another scheduler is named). */
    if (v1 && (sn || sa || md)) {
        if ((sn && !json_is_string(sn)) || (sa && !json_is_object(sa)) ||
            (md && !json_is_string(md))) {
            fail(rs, v1, 400,
                 "scheduler must be a string, scheduler_args an object, mode a string");
            goto out;
        }
        if (sn)
            sched = json_string_value(sn);
        json_decref(args);
        args = NULL;
        if (sa) {
            /* Files named by clients must lie in a --plans-dir directory. */
            if (erg__srv_confine_sched_args(srv, sa, &args, why, sizeof why)) {
                fail(rs, v1, 400, "%s", why);
                goto out;
            }
        } else {
            args = sn ? json_object() : json_incref(srv->sched_args);
        }
        if (erg__srv_sched_check_args(sched, args, &e)) {
            fail(rs, v1, 400, "%s", e.msg);
            goto out;
        }
        const srv_sched_class *cls = erg__srv_sched_find(sched);
        int want = md ? (!strcmp(json_string_value(md), "frequency")     ? SRV_MODE_FREQUENCY
                         : !strcmp(json_string_value(md), "power limit") ? SRV_MODE_POWER
                                                                         : -2)
                      : SRV_MODE_ANY;
        if (want == -2) {
            fail(rs, v1, 400, "mode must be \"frequency\" or \"power limit\"");
            goto out;
        }
        if (cls->fixed_mode != SRV_MODE_ANY) {
            if (want != SRV_MODE_ANY && want != cls->fixed_mode) {
                fail(rs, v1, 400, "scheduler %s runs in %s mode", sched,
                     erg__srv_mode_name(cls->fixed_mode));
                goto out;
            }
            mode = cls->fixed_mode;
        } else {
            mode = want != SRV_MODE_ANY ? want : srv->mode;
            if (mode == SRV_MODE_ANY) {
                fail(rs, v1, 400, "scheduler %s needs a mode (\"frequency\" or \"power limit\")",
                     sched);
                goto out;
            }
        }
    }
    /* The Perseus job id: local time + the job's fields + scheduler. */
    char ts[SRV_JOB_ID_TIME_LEN];
    erg__srv_job_id_time(ts);
    erg__buf id = {0};
    if (erg__buf_printf(&id, "%s+%s+%s+%s+dp%d+pp%d+tp%d+mbs%d+nmb%d+%s", ts,
                        json_string_value(json_object_get(info, "framework")),
                        json_string_value(json_object_get(info, "model_name")),
                        json_string_value(json_object_get(info, "partition_method")),
                        (int)json_integer_value(json_object_get(info, "dp_degree")),
                        (int)json_integer_value(json_object_get(info, "pp_degree")),
                        (int)json_integer_value(json_object_get(info, "tp_degree")),
                        (int)json_integer_value(json_object_get(info, "microbatch_size")),
                        (int)json_integer_value(json_object_get(info, "num_microbatches")),
                        sched)) {
        fail(rs, v1, 500, "out of memory");
        goto out;
    }
    srv_job *j = NULL;
    srv_outcome oc =
        erg__srv_job_create(srv, id.data, info, sched, args, mode, &j, why, sizeof why);
    erg__buf_free(&id);
    if (oc != SRV_OK) {
        fail(rs, v1, outcome_status(oc, v1), "%s", why);
        goto out;
    }
    if (*dropped)
        erg__srv_log(srv, ERG_LOG_WARNING, "register_job", j->id,
                     "JobInfo fields ergon does not use are kept up to %d bytes; not stored: %s",
                     SRV_JOBINFO_UNKNOWN_MAX_BYTES, dropped);
    if (v1)
        erg__srv_respond(rs, 201, json_pack("{s:s}", "job_id", j->id));
    else
        erg__srv_respond(rs, 200, json_string(j->id));
out:
    json_decref(in);
    json_decref(info);
    json_decref(args);
}

static srv_job *lookup(erg_server *srv, const char *id, srv_resp *rs, bool v1)
{
    srv_job *j = id ? erg__srv_job_find(srv, id) : NULL;
    if (!j) {
        if (id && erg__srv_store_has_job(srv, id))
            fail(rs, v1, 404, "job '%.300s' was evicted (idle) and is no longer served", id);
        else
            fail(rs, v1, 404, "unknown job '%.300s'", id ? id : "");
    } else
        erg__srv_job_touch(j);
    return j;
}

/* One job speaks one protocol: a job registered through Zeus's JobInfo takes its ranks,
 * schedules and results on Zeus's routes only (its management routes, /v1 status, end,
 * abort and heartbeat, stay open). false with a 409 naming the job, its protocol and the
 * refused route. */
static bool same_protocol(const srv_job *j, const char *route, bool v1, srv_resp *rs)
{
    if (!srv_job_is_zeus(j))
        return true;
    fail(rs, v1, 409,
         "job %s speaks the Zeus PFO protocol (registered with Zeus's JobInfo): %s is a %s "
         "route and is refused on it; Zeus ranks use POST /register_rank/{job_id}, GET "
         "/schedule/{job_id}?rank=R and POST /result/{job_id}",
         j->id, route, v1 ? "/v1" : "Perseus");
    return false;
}

static void h_register_rank(erg_server *srv, const char *path_id, const srv_body *b, srv_resp *rs,
                            bool v1)
{
    json_t *in = body_json(b, rs, v1);
    if (!in)
        return;
    int vcode = v1 ? 400 : 422;
    const char *id = path_id;
    if (!id) {
        const json_t *jid = json_object_get(in, "job_id");
        if (!json_is_string(jid)) {
            fail(rs, v1, vcode, "field job_id must be the string returned by register_job");
            json_decref(in);
            return;
        }
        id = json_string_value(jid);
    }
    srv_job *j = lookup(srv, id, rs, v1);
    if (j && !same_protocol(j, v1 ? "POST /v1/jobs/{job_id}/ranks" : "POST /register_rank", v1, rs))
        j = NULL;
    char why[512];
    srv_rank_spec sp;
    memset(&sp, 0, sizeof sp);
    json_t *info = j ? check_rank_info(j, in, why, sizeof why, &sp) : NULL;
    if (!j)
        goto out;
    if (!info) {
        fail(rs, v1, vcode, "%s", why);
        goto out;
    }
    srv_outcome oc = erg__srv_job_add_rank(srv, j, &sp, info, why, sizeof why);
    if (oc == SRV_OK || oc == SRV_DUPLICATE)
        erg__srv_respond(rs, 200,
                         v1 ? json_pack("{s:i,s:b}", "rank", (json_int_t)sp.rank, "duplicate",
                                        oc == SRV_DUPLICATE)
                            : NULL);
    else
        fail(rs, v1, outcome_status(oc, v1), "%s", why);
out:
    spec_free(&sp);
    json_decref(in);
    json_decref(info);
}

static void schedule_reply(srv_job *j, long r, srv_resp *rs, bool v1)
{
    int s = j->ranks[r].pp;
    erg__buf b = {0};
    erg_status st =
        v1 ? erg__buf_printf(&b, "{\"rank\":%ld,\"window\":%ld,\"done\":false,\"power_states\":%s}",
                             r, j->window, j->cur_json[s])
           : erg__buf_printf(&b, "{\"rank\":%ld,\"power_states\":%s}", r, j->cur_json[s]);
    if (st) {
        rs->status = 500;
        rs->body = erg__strdup("{\"detail\":\"out of memory\"}");
    } else {
        rs->status = 200;
        rs->body = b.data;
    }
    rs->ctype = "application/json";
}

static void end_reply(srv_job *j, long r, srv_resp *rs, bool v1)
{
    const char *msg = j->message ? j->message : "";
    if (j->state == SRV_JOB_DONE) {
        if (v1)
            erg__srv_respond(rs, 200,
                             json_pack("{s:i,s:b,s:s,s:s}", "rank", (json_int_t)r, "done", 1,
                                       "state", "done", "message", msg));
        else
            fail(rs, false, 500, "[profiling-done] job %s has finished: %s", j->id, msg);
    } else if (j->state == SRV_JOB_FAILED) {
        if (v1)
            erg__srv_respond(rs, 409, json_pack("{s:s,s:s}", "error", msg, "state", "failed"));
        else
            fail(rs, false, 400, "%s", j->message ? j->message : "scheduler failure");
    } else {
        if (v1)
            erg__srv_respond(rs, 409, json_pack("{s:s,s:s}", "error", msg, "state", "aborted"));
        else
            fail(rs, false, 500, "job %s was aborted: %s", j->id, msg);
    }
}

/* The answer to a schedule request if it is known now (flags: 1 = /v1). */
static bool schedule_answer(erg_server *srv, srv_job *j, long r, long w, int flags, bool expired,
                            srv_resp *rs)
{
    bool v1 = flags & 1;
    switch (erg__srv_job_schedule_state(srv, j, w)) {
    case SRV_SCHED_STOPPING:
        fail(rs, v1, 503, "the server is shutting down; retry");
        return true;
    case SRV_SCHED_ENDED:
        end_reply(j, r, rs, v1);
        return true;
    case SRV_SCHED_READY:
        schedule_reply(j, r, rs, v1);
        return true;
    case SRV_SCHED_LATE:
        fail(rs, v1, 409, "window %ld of job %s is over; rank %ld asked for it late", w, j->id, r);
        return true;
    case SRV_SCHED_PENDING:
        break;
    }
    if (!expired)
        return false;
    if (v1)
        erg__srv_respond(rs, 202,
                         json_pack("{s:i,s:i,s:b,s:b}", "rank", (json_int_t)r, "window",
                                   (json_int_t)w, "pending", 1, "done", 0));
    else
        fail(rs, false, 503, "window %ld of job %s is not ready yet; retry", w, j->id);
    return true;
}

static void h_schedule(erg_server *srv, const char *id, const srv_req *rq, srv_resp *rs, bool v1)
{
    char buf[32];
    long r;
    if (!erg__srv_query_get(rq->query, "rank", buf, sizeof buf) || !erg__parse_long(buf, &r)) {
        fail(rs, v1, v1 ? 400 : 422, "query parameter rank=<int> is required");
        return;
    }
    double wait = rq->max_wait;
    if (v1) {
        double w = 30;
        if (erg__srv_query_get(rq->query, "wait", buf, sizeof buf) &&
            (!erg__parse_double(buf, &w) || w < 0 || w > 600)) {
            fail(rs, v1, 400, "query parameter wait must be seconds in [0, 600]");
            return;
        }
        wait = fmin(w, rq->max_wait);
    }
    srv_job *j = lookup(srv, id, rs, v1);
    if (!j ||
        !same_protocol(j, v1 ? "GET /v1/jobs/{job_id}/schedule" : "GET /schedule/{job_id}", v1, rs))
        return;
    char why[512];
    long w;
    srv_outcome oc = erg__srv_job_ask(srv, j, r, &w, why, sizeof why);
    if (oc != SRV_OK) {
        fail(rs, v1, outcome_status(oc, v1), "%s", why);
        return;
    }
    if (!erg__srv_job_wait(srv, j, r, w, wait, rq->conn, schedule_answer, v1 ? 1 : 0, rs))
        fail(rs, v1, 503, "out of memory; retry");
}

static void h_result(erg_server *srv, const char *id, const srv_body *b, srv_resp *rs, bool v1)
{
    json_t *in = body_json(b, rs, v1);
    if (!in)
        return;
    int vcode = v1 ? 400 : 422;
    srv_job *j = lookup(srv, id, rs, v1);
    long r = b->rank;
    if (!j ||
        !same_protocol(j, v1 ? "POST /v1/jobs/{job_id}/results" : "POST /result/{job_id}", v1, rs))
        goto out;
    if (!b->result) {
        fail(rs, v1, vcode, "%s", b->err);
        goto out;
    }
    if (r >= j->world) {
        fail(rs, v1, vcode, "field rank = %ld is out of range [0, %d]", r, j->world - 1);
        goto out;
    }
    long win = j->window;
    const json_t *wv = json_object_get(in, "window");
    if (v1 && wv) {
        if (!json_is_integer(wv) || json_integer_value(wv) < 0) {
            fail(rs, v1, 400, "field window must be a non-negative integer");
            goto out;
        }
        win = (long)json_integer_value(wv);
    }
    char why[700];
    srv_outcome oc =
        erg__srv_job_add_result(srv, j, r, win, b->result, &b->parsed, why, sizeof why);
    if (oc == SRV_OK || (oc == SRV_DUPLICATE && v1))
        erg__srv_respond(rs, 200,
                         v1 ? json_pack("{s:i,s:i,s:b}", "rank", (json_int_t)r, "window",
                                        (json_int_t)win, "duplicate", oc == SRV_DUPLICATE)
                            : NULL);
    else if (oc == SRV_NOT_RUNNING)
        erg__srv_respond(rs, 409,
                         json_pack("{s:s,s:s}", v1 ? "error" : "detail", why, "state",
                                   erg__srv_job_state_name(j->state)));
    else
        fail(rs, v1, oc == SRV_DUPLICATE ? 409 : outcome_status(oc, v1), "%s", why);
out:
    json_decref(in);
}

static void h_heartbeat(erg_server *srv, const char *id, const srv_body *b, srv_resp *rs)
{
    json_t *in = body_json(b, rs, true);
    if (!in)
        return;
    srv_job *j = lookup(srv, id, rs, true);
    long r;
    char why[256];
    if (j && !erg__srv_json_get_int(in, "rank", 0, j->world - 1, &r, why, sizeof why))
        fail(rs, true, 400, "%s", why);
    else if (j && !j->ranks[r].registered)
        fail(rs, true, 404, "rank %ld has not registered in job %s", r, j->id);
    else if (j) {
        j->ranks[r].last_seen = erg__srv_now_mono();
        erg__srv_respond(rs, 200,
                         json_pack("{s:s,s:i}", "state", erg__srv_job_state_name(j->state),
                                   "window", (json_int_t)j->window));
    }
    json_decref(in);
}

static void h_end(erg_server *srv, const char *id, const srv_body *b, bool abort, srv_resp *rs)
{
    json_t *in = b->len ? body_json(b, rs, true) : json_object();
    if (!in)
        return;
    srv_job *j = lookup(srv, id, rs, true);
    const json_t *reason = json_object_get(in, "reason");
    erg_error e;
    if (j && reason && !json_is_string(reason))
        fail(rs, true, 400, "field reason must be a string");
    else if (j && srv_job_live(j->state) && erg__srv_store_check(srv, &e))
        fail(rs, true, 503, "%s", e.msg); /* the end would not be stored */
    else if (j) {
        if (srv_job_live(j->state)) {
            char msg[400];
            snprintf(msg, sizeof msg, "%s by a client%s%.300s", abort ? "aborted" : "ended",
                     reason ? ": " : "", reason ? json_string_value(reason) : "");
            erg__srv_job_finish(srv, j, abort ? SRV_JOB_ABORTED : SRV_JOB_DONE, msg);
        }
        erg__srv_respond(
            rs, 200,
            json_pack("{s:s,s:s}", "job_id", j->id, "state", erg__srv_job_state_name(j->state)));
    }
    json_decref(in);
}

static void h_straggler(erg_server *srv, const char *id, const srv_body *b, srv_resp *rs)
{
    json_t *in = body_json(b, rs, true);
    if (!in)
        return;
    srv_job *j = lookup(srv, id, rs, true);
    const json_t *sd = json_object_get(in, "slowdown"), *dl = json_object_get(in, "deadline_s");
    if (!j)
        goto out;
    const srv_sched_class *cls = erg__srv_sched_find(j->sched_name);
    if (!cls || !cls->targets) {
        fail(rs, true, 409, "job %s runs %s; straggler targets need the Frontier scheduler", j->id,
             j->sched_name);
        goto out;
    }
    if ((sd && dl) || (!sd && !dl)) {
        fail(rs, true, 400, "give exactly one of slowdown (>= 1) or deadline_s (> 0)");
        goto out;
    }
    if ((sd &&
         (!json_is_number(sd) || !(json_number_value(sd) >= 1) || json_number_value(sd) > 1e6)) ||
        (dl && (!json_is_number(dl) || !(json_number_value(dl) > 0)))) {
        fail(rs, true, 400, "slowdown must be a number >= 1, deadline_s a number > 0");
        goto out;
    }
    erg_error e;
    if (erg__srv_store_check(srv, &e)) {
        fail(rs, true, 503, "%s", e.msg); /* the target would not be stored */
        goto out;
    }
    long from = erg__srv_job_set_target(srv, j, sd ? 1 : 2, json_number_value(sd ? sd : dl));
    json_t *o = json_pack("{s:s,s:i}", "job_id", j->id, "applies_from_window", (json_int_t)from);
    if (o)
        json_object_set_new(o, sd ? "slowdown" : "deadline_s", json_real(j->tval));
    erg__srv_respond(rs, 200, o);
out:
    json_decref(in);
}

static json_t *finite_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

/* GET /v1/jobs/{id}: always an object (a number JSON cannot hold is null). */
static json_t *job_status(srv_job *j)
{
    json_t *o = json_pack(
        "{s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:b,s:I,s:o,s:o}", "job_id", j->id, "state",
        erg__srv_job_state_name(j->state), "message", j->message ? j->message : "", "scheduler",
        j->sched_name, "world_size", j->world, "ranks_registered", j->n_registered, "window",
        (int)j->window, "results_in_window", j->n_results, "barrier_released", j->released,
        "frontier_choice", (json_int_t)j->choice, "energy_j", finite_or_null(j->energy_j),
        "energy_saved_j", finite_or_null(j->saved_j));
    if (o && j->tkind)
        json_object_set_new(o, j->tkind == 1 ? "slowdown" : "deadline_s", json_real(j->tval));
    if (o)
        json_object_set_new(o, "mode", json_string(erg__srv_mode_name(j->mode)));
    return o;
}

/* ---- routes ---- */

static void route_v1_job(erg_server *srv, const srv_req *rq, srv_resp *rs)
{
    const char *path = rq->path;
    bool get = rq->get, post = rq->post;
    const srv_body *b = rq->body;
    const char *id0 = path + 9, *slash = strchr(id0, '/');
    size_t idl = slash ? (size_t)(slash - id0) : strlen(id0);
    char *id = erg__strndup(id0, idl);
    const char *act = slash ? slash + 1 : "";
    if (!id) {
        fail(rs, true, 500, "out of memory");
    } else if (!*act) {
        if (!get)
            fail(rs, true, 405, "use GET on /v1/jobs/{job_id}");
        else {
            srv_job *j = lookup(srv, id, rs, true);
            json_t *st = j ? job_status(j) : NULL;
            if (st)
                erg__srv_respond(rs, 200, st);
            else if (j)
                fail(rs, true, 500, "out of memory");
        }
    } else if (!strcmp(act, "ranks") && post) {
        h_register_rank(srv, id, b, rs, true);
    } else if (!strcmp(act, "schedule") && get) {
        h_schedule(srv, id, rq, rs, true);
    } else if (!strcmp(act, "results") && post) {
        h_result(srv, id, b, rs, true);
    } else if (!strcmp(act, "heartbeat") && post) {
        h_heartbeat(srv, id, b, rs);
    } else if ((!strcmp(act, "end") || !strcmp(act, "abort")) && post) {
        h_end(srv, id, b, !strcmp(act, "abort"), rs);
    } else if (!strcmp(act, "straggler") && post) {
        h_straggler(srv, id, b, rs);
    } else if (!strcmp(act, "ranks") || !strcmp(act, "schedule") || !strcmp(act, "results") ||
               !strcmp(act, "heartbeat") || !strcmp(act, "end") || !strcmp(act, "abort") ||
               !strcmp(act, "straggler")) {
        fail(rs, true, 405, "wrong method for /v1/jobs/{job_id}/%s (see docs/http-api.md)", act);
    } else {
        fail(rs, true, 404, "no such endpoint /v1/jobs/{job_id}/%.64s", act);
    }
    erg__free(id);
}

static bool route(erg_server *srv, const srv_req *rq, srv_resp *rs)
{
    const char *path = rq->path;
    bool get = rq->get, post = rq->post;
    bool v1 = !strncmp(path, "/v1/", 4);
    const srv_body *b = rq->body;
    if (!strcmp(path, "/info") || !strcmp(path, "/v1/info")) {
        if (get)
            h_info(srv, rs, v1);
        else
            fail(rs, v1, 405, "use GET on %s", path);
    } else if (!strcmp(path, "/register_job") || !strcmp(path, "/v1/jobs")) {
        if (post)
            h_register_job(srv, b, rs, v1);
        else if (get && v1) {
            json_t *a = json_array();
            for (srv_job *j = srv->jobs; a && j; j = j->next)
                json_array_append_new(a, json_pack("{s:s,s:s,s:i}", "job_id", j->id, "state",
                                                   erg__srv_job_state_name(j->state), "window",
                                                   (int)j->window));
            erg__srv_respond(rs, 200, json_pack("{s:o}", "jobs", a));
        } else
            fail(rs, v1, 405, "use POST on %s", path);
    } else if (!strcmp(path, "/register_rank")) {
        if (post)
            h_register_rank(srv, NULL, b, rs, false);
        else
            fail(rs, false, 405, "use POST on /register_rank");
    } else if (!strncmp(path, "/schedule/", 10)) {
        if (get)
            h_schedule(srv, path + 10, rq, rs, false);
        else
            fail(rs, false, 405, "use GET on /schedule/{job_id}");
    } else if (!strncmp(path, "/result/", 8)) {
        if (post)
            h_result(srv, path + 8, b, rs, false);
        else
            fail(rs, false, 405, "use POST on /result/{job_id}");
    } else if (!strncmp(path, "/v1/jobs/", 9)) {
        route_v1_job(srv, rq, rs);
    } else {
        return false;
    }
    return true;
}

const srv_wire erg__srv_wire_perseus = {"perseus", route};
