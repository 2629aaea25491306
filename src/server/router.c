/* router.c: one request through the server: its body parsed and validated outside the lock,
 * the common routes (/healthz, /metrics), the wire protocols in turn, and the accounting. */
#include "server/jobs.h"
#include "server/fleet.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

/* The wire protocols, asked in order. */
static const srv_wire *const wires[] = {&erg__srv_wire_zeus, &erg__srv_wire_perseus};

/* ---- responses ---- */

char *erg__srv_json_compact(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        return NULL;
    char *r = erg__strdup(s);
    free(s);
    return r;
}

void erg__srv_respond(srv_resp *rs, int status, json_t *body)
{
    rs->status = status;
    rs->ctype = "application/json";
    if (!body) {
        rs->body = erg__strdup("null");
        return;
    }
    rs->body = erg__srv_json_compact(body);
    json_decref(body);
}

void erg__srv_respond_error(srv_resp *rs, const char *key, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    erg__srv_respond(rs, status, json_pack("{s:s}", key, msg));
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

bool erg__srv_query_get(const char *q, const char *key, char *out, size_t on)
{
    size_t kl = strlen(key);
    while (q && *q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        if (len > kl && !strncmp(q, key, kl) && q[kl] == '=') {
            size_t o = 0;
            for (size_t i = kl + 1; i < len && o + 1 < on; i++) {
                char c = q[i];
                int hi, lo;
                if (c == '%' && i + 2 < len && (hi = hexval(q[i + 1])) >= 0 &&
                    (lo = hexval(q[i + 2])) >= 0) {
                    out[o++] = (char)(hi * 16 + lo);
                    i += 2;
                } else {
                    out[o++] = c == '+' ? ' ' : c;
                }
            }
            out[o] = 0;
            return true;
        }
        q = amp ? amp + 1 : NULL;
    }
    return false;
}

/* ---- bodies ---- */

static bool get_rank(const json_t *o, long *out, char *why, size_t wn)
{
    const json_t *v = json_object_get(o, "rank");
    if (!v) {
        snprintf(why, wn, "field rank is missing");
        return false;
    }
    if (!json_is_integer(v)) {
        snprintf(why, wn, "field rank must be an integer");
        return false;
    }
    long long x = json_integer_value(v);
    if (x < 0 || x > 1 << 20) {
        snprintf(why, wn, "field rank = %lld is out of range [0, %d]", x, 1 << 20);
        return false;
    }
    *out = (long)x;
    return true;
}

/* Deep copy of a result with every measurement as a float (pydantic v1 turns
 * ints into floats for these fields, and the dumps show that). */
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
    if (json_is_object(v)) {
        json_t *o = json_object();
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) json_object_set_new(o, k, floats(x));
        return o;
    }
    return json_incref((json_t *)v);
}

/* Physical bounds of a measurement (docs/http-api.md, "Results"): an
 * iteration takes (0, 10^6] s; a rank's GPU draws at most SRV_MAX_POWER_W on
 * average over an iteration, so its energy is in [0, SRV_MAX_POWER_W x time];
 * breakdown samples are finite, >= 0 and within those of an iteration. */
#define SRV_MAX_ITER_TIME_S 1e6
#define SRV_MAX_POWER_W 1e4

static bool check_series(const srv_series *bd, const char *what, double hi, char *why, size_t wn)
{
    for (int c = 0; c < SRV_NUM_INSTR; c++)
        for (int i = 0; i < bd[c].n_iters; i++)
            for (int k = 0; k < bd[c].n_occ[i]; k++) {
                double x = bd[c].vals[i][k];
                if (!isfinite(x) || x < 0 || x > hi) {
                    snprintf(why, wn, "%s.%s[%d][%d] = %.17g is outside [0, %.17g]", what,
                             erg__srv_instr_names[c], i, k, x, hi);
                    return false;
                }
            }
    return true;
}

static bool check_bounds(const srv_result *r, char *why, size_t wn)
{
    double tmax = 0;
    for (int i = 0; i < r->n_iters; i++) {
        double t = r->iter_time_s[i], e = r->iter_energy_j[i];
        if (!isfinite(t) || !(t > 0) || t > SRV_MAX_ITER_TIME_S) {
            snprintf(why, wn, "iter_time[%d] = %.17g s must be > 0 and at most %g s", i, t,
                     SRV_MAX_ITER_TIME_S);
            return false;
        }
        if (!isfinite(e) || e < 0 || e > SRV_MAX_POWER_W * t) {
            snprintf(why, wn,
                     "iter_energy[%d] = %.17g J must be >= 0 and at most %g W x iter_time "
                     "(%.17g J)",
                     i, e, SRV_MAX_POWER_W, SRV_MAX_POWER_W * t);
            return false;
        }
        if (t > tmax)
            tmax = t;
    }
    return check_series(r->time_bd, "time_breakdown", tmax, why, wn) &&
           check_series(r->energy_bd, "energy_breakdown", SRV_MAX_POWER_W * tmax, why, wn) &&
           check_series(r->wait_bd, "wait_breakdown", tmax, why, wn);
}

/* ProfilingResult (same on every wire) -> normalised object and numbers. */
static json_t *normalize_result(const json_t *in, srv_result *parsed, long *rank, char *why,
                                size_t wn)
{
    if (!json_is_object(in)) {
        snprintf(why, wn, "the body must be a ProfilingResult object");
        return NULL;
    }
    if (!get_rank(in, rank, why, wn))
        return NULL;
    json_t *o = json_pack("{s:i}", "rank", (json_int_t)*rank);
    static const char *const keys[] = {"iter_time", "iter_energy", "time_breakdown",
                                       "energy_breakdown"};
    for (int i = 0; o && i < 4; i++) {
        const json_t *v = json_object_get(in, keys[i]);
        json_object_set_new(o, keys[i], v ? floats(v) : i < 2 ? json_array() : json_object());
    }
    /* ergon's receive waits (EnvPipe): kept only when sent, so a record of a
     * client that sends none is unchanged (Perseus-compatible dumps). */
    const json_t *wb = json_object_get(in, "wait_breakdown");
    if (o && wb)
        json_object_set_new(o, "wait_breakdown", floats(wb));
    /* Where the rank's energies come from (ergon extension, docs/runtime.md): kept only
     * when sent, into the dumps (N.prof.json). */
    const json_t *es = json_object_get(in, "energy_source");
    if (o && es) {
        const char *v = json_string_value(es);
        if (!v || (strcmp(v, "counter") && strcmp(v, "integrated") && strcmp(v, "model") &&
                   strcmp(v, "none") && strcmp(v, "mixed"))) {
            snprintf(why, wn,
                     "energy_source must be \"counter\", \"integrated\", \"model\", "
                     "\"none\" or \"mixed\"");
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, "energy_source", json_string(v));
    }
    erg_error e;
    if (!o || erg__srv_result_from_json(o, parsed, &e)) {
        snprintf(why, wn, "%s", o ? e.msg : "out of memory");
        json_decref(o);
        return NULL;
    }
    if (!check_bounds(parsed, why, wn)) {
        erg__srv_result_free(parsed);
        json_decref(o);
        return NULL;
    }
    return o;
}

static void body_prepare(srv_body *b, const char *body, size_t len, bool is_result,
                         bool is_register)
{
    memset(b, 0, sizeof *b);
    b->len = len;
    if (!body || len == 0) {
        snprintf(b->err, sizeof b->err, "the request needs a JSON body");
        return;
    }
    /* A JobInfo is a few hundred bytes: a larger one is refused unparsed, so that no
     * registration parses (or holds) more than this (docs/http-api.md, "Job record"). */
    if (is_register && len > SRV_JOBINFO_MAX_BYTES) {
        b->status = 413;
        snprintf(b->err, sizeof b->err,
                 "a JobInfo body is at most %d bytes (got %zu); fields ergon does not use are "
                 "kept up to %d bytes",
                 SRV_JOBINFO_MAX_BYTES, len, SRV_JOBINFO_UNKNOWN_MAX_BYTES);
        return;
    }
    if (erg__srv_json_depth(body, len) > 32) {
        snprintf(b->err, sizeof b->err, "the JSON body is nested more than 32 levels deep");
        return;
    }
    json_error_t je;
    b->v = json_loadb(body, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!b->v) {
        snprintf(b->err, sizeof b->err, "malformed JSON at line %d, column %d: %s", je.line,
                 je.column, je.text);
        return;
    }
    if (is_result)
        b->result = normalize_result(b->v, &b->parsed, &b->rank, b->err, sizeof b->err);
    b->have_parsed = b->result != NULL;
}

static void body_free(srv_body *b)
{
    json_decref(b->v);
    json_decref(b->result);
    if (b->have_parsed)
        erg__srv_result_free(&b->parsed);
}

/* ---- routing ---- */

void erg__srv_dispatch(erg_server *srv, const char *method, const char *path, const char *query,
                       const char *body, size_t len, double max_wait, void *conn, srv_resp *rs)
{
    memset(rs, 0, sizeof *rs);
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    bool v1 = !strncmp(path, "/v1/", 4);
    size_t pl = strlen(path);
    bool is_result =
        !strncmp(path, "/result/", 8) || (v1 && pl > 8 && !strcmp(path + pl - 8, "/results"));
    bool is_register = !strcmp(path, "/register_job") || !strcmp(path, "/v1/jobs");
    srv_body pb;
    double t0 = erg__srv_now_mono();
    body_prepare(&pb, post ? body : NULL, post ? len : 0, is_result, is_register);
    srv_req rq = {method, path, query, get, post, &pb, max_wait, conn};
    if (!strcmp(path, "/healthz") && get) {
        /* without the server lock: a request stalled on a database locked by
         * another process must not hide the server's liveness */
        bool stopping = __atomic_load_n(&srv->stopping, __ATOMIC_RELAXED);
        erg__srv_respond(rs, 200, json_pack("{s:s}", "status", stopping ? "stopping" : "ok"));
        body_free(&pb);
        return;
    }
    pthread_mutex_lock(&srv->mu);
    if (!strcmp(path, "/metrics")) {
        if (get)
            erg__srv_metrics_text(srv, rs);
        else
            erg__srv_respond_error(rs, "detail", 405, "use GET on /metrics");
    } else if (!strcmp(path, "/healthz")) {
        erg__srv_respond(rs, 200, json_pack("{s:s}", "status", srv->stopping ? "stopping" : "ok"));
    } else {
        bool routed = erg__srv_fleet_route(srv, &rq, rs);
        for (size_t i = 0; !routed && i < sizeof wires / sizeof wires[0]; i++)
            routed = wires[i]->route(srv, &rq, rs);
        if (!routed)
            erg__srv_respond_error(rs, v1 ? "error" : "detail", 404, "no such endpoint %.200s",
                                   path);
    }
    if (rs->parked) {
        pthread_mutex_unlock(&srv->mu);
        body_free(&pb);
        return;
    }
    if (!rs->body) {
        rs->status = 500;
        rs->body = erg__strdup("{\"detail\":\"out of memory\"}");
        rs->ctype = "application/json";
    }
    /* Server-side handling time (queueing on the lock included, barrier
     * waits excluded) into the latency histogram. */
    int group = strstr(path, "schedule") ? 0
                : is_result              ? 1
                : strstr(path, "register") || (v1 && pl > 6 && !strcmp(path + pl - 6, "/ranks")) ||
                        !strcmp(path, "/v1/jobs")
                    ? 2
                    : 3;
    erg__srv_metrics_observe(srv, group, rs->status, erg__srv_now_mono() - t0 - rs->waited_s);
    pthread_mutex_unlock(&srv->mu);
    body_free(&pb);
    erg__srv_log(srv, ERG_LOG_DEBUG, "request", NULL, "%s %.200s -> %d", method, path, rs->status);
}
