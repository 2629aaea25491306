/* client_http.c: the libcurl client of the server's /v1 API with retries and exponential backoff.
 */
#include "core/internal.h"
#include "ergon/server_client.h"

/* curl.h's type-checking macros wrap the real names; the calls below go through pointers */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* libcurl is loaded by the first erg_srv_client_new (core/lazylib.c) */
/* clang-format off */
#define CURL_FUNCS(X) \
    X(curl_easy_cleanup) X(curl_easy_escape) X(curl_easy_getinfo) X(curl_easy_init) \
    X(curl_easy_perform) X(curl_easy_reset) X(curl_easy_setopt) X(curl_easy_strerror) \
    X(curl_free) X(curl_global_init) X(curl_slist_append) X(curl_slist_free_all)
/* clang-format on */
ERG__LAZY_LIB(curl_lib, ERG_SONAME_CURL, "the server client (libergon's HTTP client)", CURL_FUNCS)
#define curl_easy_cleanup (*lz_curl_easy_cleanup)
#define curl_easy_escape (*lz_curl_easy_escape)
#undef curl_easy_getinfo /* curl.h defines both as macros of themselves */
#define curl_easy_getinfo (*lz_curl_easy_getinfo)
#define curl_easy_init (*lz_curl_easy_init)
#define curl_easy_perform (*lz_curl_easy_perform)
#define curl_easy_reset (*lz_curl_easy_reset)
#undef curl_easy_setopt
#define curl_easy_setopt (*lz_curl_easy_setopt)
#define curl_easy_strerror (*lz_curl_easy_strerror)
#define curl_free (*lz_curl_free)
#define curl_global_init (*lz_curl_global_init)
#define curl_slist_append (*lz_curl_slist_append)
#define curl_slist_free_all (*lz_curl_slist_free_all)

struct erg_srv_client {
    CURL *curl;
    char *base;
    char *auth_header; /* "Authorization: Bearer <token>" or NULL */
    char *ca_file;     /* CA bundle for https (NULL: the system's) */
    erg_srv_client_opts o;
    unsigned seed;
};

struct erg_srv_result {
    json_t *obj; /* ProfilingResult being built. */
    int rank;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* url for a message: its userinfo (user:password@, the documented http://ergon:TOKEN@host form)
 * replaced by "***@", so that no error, log or traceback carries the token. Everything after
 * "://" up to the last '@' counts as userinfo: the paths this client sends have no raw '@'
 * (job ids are escaped), and a password with a '/', '?' or '#' that libcurl would cut
 * elsewhere is still hidden. A string without "://" is redacted from its start. */
static void redact_url(const char *url, char *out, size_t cap)
{
    const char *auth = strstr(url, "://");
    auth = auth ? auth + 3 : url;
    const char *at = strrchr(auth, '@');
    if (at)
        snprintf(out, cap, "%.*s***%s", (int)(auth - url), url, at);
    else
        snprintf(out, cap, "%s", url);
}

void erg_srv_client_opts_init(erg_srv_client_opts *o)
{
    o->request_timeout_s = 30;
    o->max_retries = 10;
    o->backoff_initial_s = 0.05;
    o->backoff_max_s = 2;
    o->schedule_wait_s = 30;
    o->schedule_timeout_s = 86400;
}

erg_status erg_srv_client_new(const char *base_url, const erg_srv_client_opts *opts,
                              erg_srv_client **out, erg_error *err)
{
    *out = NULL;
    if (!base_url || (strncmp(base_url, "http://", 7) && strncmp(base_url, "https://", 8))) {
        char shown[120];
        redact_url(base_url ? base_url : "", shown, sizeof shown);
        return erg_error_set(err, ERG_EINVAL,
                             "server URL must start with http:// or https://, got '%.100s'", shown);
    }
    erg_status lst = erg__lazylib_load(&curl_lib, err);
    if (lst != ERG_OK)
        return lst;
    pthread_once(&curl_once, curl_init_once);
    erg_srv_client *c = erg__calloc(1, sizeof *c);
    if (!c)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (opts)
        c->o = *opts;
    else
        erg_srv_client_opts_init(&c->o);
    if (c->o.max_retries < 0 || !(c->o.request_timeout_s > 0) || !(c->o.schedule_wait_s >= 0) ||
        !(c->o.backoff_initial_s >= 0) || !(c->o.backoff_max_s >= c->o.backoff_initial_s)) {
        erg__free(c);
        return erg_error_set(err, ERG_EINVAL, "invalid client timeouts or retry settings");
    }
    c->base = erg__strdup(base_url);
    c->curl = curl_easy_init();
    c->seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)c;
    if (!c->base || !c->curl) {
        erg_srv_client_free(c);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    size_t n = strlen(c->base);
    while (n && c->base[n - 1] == '/')
        c->base[--n] = 0;
    /* A server with access control (docs/http-api.md): the token and CA bundle from the
     * environment, as `ergon serve` reads its token; the setters below override them. A
     * token in the URL (http://user:TOKEN@host) is sent by libcurl as Basic credentials. */
    const char *tok = getenv("ERGON_SERVE_TOKEN"), *ca = getenv("ERGON_SERVE_CA_FILE");
    erg_status st = ERG_OK;
    if (tok && *tok)
        st = erg_srv_client_set_token(c, tok, err);
    if (!st && ca && *ca)
        st = erg_srv_client_set_ca_file(c, ca, err);
    if (st) {
        erg_srv_client_free(c);
        return st;
    }
    *out = c;
    return ERG_OK;
}

erg_status erg_srv_client_set_token(erg_srv_client *c, const char *token, erg_error *err)
{
    for (const char *p = token ? token : ""; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            return erg_error_set(err, ERG_EINVAL,
                                 "the server token must be printable ASCII without spaces");
    char *h = NULL;
    if (token && *token) {
        erg__buf b = {0};
        if (erg__buf_printf(&b, "Authorization: Bearer %s", token))
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        h = b.data;
    }
    if (c->auth_header) {
        memset(c->auth_header, 0, strlen(c->auth_header));
        erg__free(c->auth_header);
    }
    c->auth_header = h;
    return ERG_OK;
}

erg_status erg_srv_client_set_ca_file(erg_srv_client *c, const char *path, erg_error *err)
{
    char *p = NULL;
    if (path && *path) {
        FILE *f = fopen(path, "r");
        if (!f)
            return erg_error_set(err, ERG_EIO, "CA file %.300s cannot be read", path);
        fclose(f);
        if (!(p = erg__strdup(path)))
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    erg__free(c->ca_file);
    c->ca_file = p;
    return ERG_OK;
}

void erg_srv_client_free(erg_srv_client *c)
{
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    erg__free(c->base);
    if (c->auth_header) {
        memset(c->auth_header, 0, strlen(c->auth_header));
        erg__free(c->auth_header);
    }
    erg__free(c->ca_file);
    erg__free(c);
}

static size_t on_data(char *p, size_t size, size_t n, void *user)
{
    erg__buf *b = user;
    if (b->len + size * n > (64u << 20))
        return 0; /* a response this large is not ours */
    return erg__buf_append(b, p, size * n) ? 0 : size * n;
}

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* One exchange without retries. Returns ERG_ENET on transport failure. */
static erg_status exchange(erg_srv_client *c, const char *method, const char *path,
                           const char *body, double timeout_s, int *status, erg__buf *resp,
                           erg_error *err)
{
    erg__buf url = {0};
    if (erg__buf_printf(&url, "%s%s", c->base, path))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    CURL *h = c->curl;
    curl_easy_reset(h);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    hdr = curl_slist_append(hdr, "Expect:");
    if (c->auth_header)
        hdr = curl_slist_append(hdr, c->auth_header);
    curl_easy_setopt(h, CURLOPT_URL, url.data);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (c->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    if (!strcmp(method, "POST")) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)(body ? strlen(body) : 0));
    } else if (strcmp(method, "GET")) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hdr);
    erg_status st = ERG_OK;
    if (rc != CURLE_OK) {
        char shown[600];
        redact_url(url.data, shown, sizeof shown);
        st = erg_error_set(err, ERG_ENET, "%s %s: %s", method, shown, curl_easy_strerror(rc));
    } else {
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        *status = (int)code;
    }
    erg__buf_free(&url);
    return st;
}

static double backoff(erg_srv_client *c, int attempt)
{
    double d = c->o.backoff_initial_s * pow(2, attempt);
    if (d > c->o.backoff_max_s)
        d = c->o.backoff_max_s;
    double jitter = 0.75 + 0.5 * ((double)rand_r(&c->seed) / RAND_MAX);
    return d * jitter;
}

static double mono_s(void);

/* Exchange with retries on transport errors and 500/502/503/504. */
static erg_status request(erg_srv_client *c, const char *method, const char *path, const char *body,
                          double timeout_s, int *status, erg__buf *resp, erg_error *err)
{
    erg_status st = ERG_OK;
    double t0 = mono_s();
    for (int attempt = 0;; attempt++) {
        erg__buf_free(resp);
        *status = 0;
        st = exchange(c, method, path, body, timeout_s, status, resp, err);
        bool retry =
            st == ERG_ENET ||
            (!st && (*status == 500 || *status == 502 || *status == 503 || *status == 504));
        /* Perseus routes use 500 for their endings: never retry those. */
        if (!st && *status == 500 && resp->data &&
            (strstr(resp->data, "[profiling-done]") || strstr(resp->data, "aborted")))
            retry = false;
        if (!retry || attempt >= c->o.max_retries) {
            if (err && st == ERG_ENET && attempt > 0) { /* say what was tried (cut off?) */
                char last[sizeof err->msg];
                snprintf(last, sizeof last, "%s", err->msg);
                erg_error_set(err, st,
                              "%s (gave up after %d attempts in %.1f s: "
                              "request_timeout_s %g, max_retries %d)",
                              last, attempt + 1, mono_s() - t0, timeout_s, c->o.max_retries);
            }
            break;
        }
        sleep_s(backoff(c, attempt));
    }
    return st;
}

/* Turn a non-2xx answer into a status with the server's message. */
static erg_status http_error(int status, const erg__buf *resp, const char *what, erg_error *err)
{
    const char *msg = resp->data ? resp->data : "";
    json_t *v = resp->data ? json_loads(resp->data, JSON_DECODE_ANY, NULL) : NULL;
    const json_t *m = json_object_get(v, "error");
    if (!m)
        m = json_object_get(v, "detail");
    if (json_is_string(m))
        msg = json_string_value(m);
    const char *state = json_string_value(json_object_get(v, "state"));
    erg_status code = status == 401 || status == 403       ? ERG_EPERM
                      : status == 404                      ? ERG_ENOTFOUND
                      : state && !strcmp(state, "aborted") ? ERG_ECANCELED
                      : status == 409                      ? ERG_ESTATE
                      : status >= 400 && status < 500      ? ERG_EINVAL
                      : status == 503                      ? ERG_ENET
                                                           : ERG_EINTERNAL;
    erg_error_set(err, code, "%s: HTTP %d: %s%.400s", what, status,
                  code == ERG_ECANCELED && !strstr(msg, "abort") ? "the job was aborted: " : "",
                  msg);
    json_decref(v);
    return code;
}

static char *job_path(erg_srv_client *c, const char *job_id, const char *action)
{
    char *esc = curl_easy_escape(c->curl, job_id, 0);
    if (!esc)
        return NULL;
    erg__buf b = {0};
    erg_status st = erg__buf_printf(&b, "/v1/jobs/%s%s%s", esc, *action ? "/" : "", action);
    curl_free(esc);
    return st ? NULL : b.data;
}

static erg_status post_json(erg_srv_client *c, const char *path, json_t *body, const char *what,
                            json_t **reply, erg_error *err)
{
    char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body && !s)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    int status = 0;
    erg__buf resp = {0};
    erg_status st = request(c, "POST", path, s, c->o.request_timeout_s, &status, &resp, err);
    free(s);
    if (!st && (status < 200 || status >= 300))
        st = http_error(status, &resp, what, err);
    if (!st && reply) {
        *reply = resp.data ? json_loads(resp.data, JSON_DECODE_ANY, NULL) : NULL;
        if (!*reply)
            st = erg_error_set(err, ERG_EPARSE, "%s: the server's answer is not JSON", what);
    }
    erg__buf_free(&resp);
    return st;
}

erg_status erg_srv_client_register_job(erg_srv_client *c, const erg_srv_job_desc *d, char **job_id,
                                       erg_error *err)
{
    *job_id = NULL;
    json_t *o = json_pack("{s:i,s:i,s:i,s:i,s:s,s:s,s:s,s:i,s:i}", "pp_degree", d->pp_degree,
                          "dp_degree", d->dp_degree, "tp_degree", d->tp_degree, "world_size",
                          d->world_size, "framework", d->framework ? d->framework : "",
                          "model_name", d->model_name ? d->model_name : "", "partition_method",
                          d->partition_method ? d->partition_method : "", "microbatch_size",
                          d->microbatch_size, "num_microbatches", d->num_microbatches);
    if (!o)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (d->scheduler)
        json_object_set_new(o, "scheduler", json_string(d->scheduler));
    if (d->scheduler_args_json) {
        json_t *a = json_loads(d->scheduler_args_json, 0, NULL);
        if (!json_is_object(a)) {
            json_decref(a);
            json_decref(o);
            return erg_error_set(err, ERG_EINVAL, "scheduler_args_json is not a JSON object");
        }
        json_object_set_new(o, "scheduler_args", a);
    }
    if (d->mode)
        json_object_set_new(o, "mode", json_string(d->mode));
    json_t *reply = NULL;
    erg_status st = post_json(c, "/v1/jobs", o, "register job", &reply, err);
    json_decref(o);
    if (!st) {
        const char *id = json_string_value(json_object_get(reply, "job_id"));
        if (!id || !(*job_id = erg__strdup(id)))
            st = erg_error_set(err, ERG_EPARSE, "register job: no job_id in the answer");
    }
    json_decref(reply);
    return st;
}

/* ---- JSON forms for bindings (no struct layout crosses the boundary) ---- */

static json_t *parse_object(const char *text, const char *what, erg_error *err)
{
    json_error_t je;
    json_t *o = json_loads(text && *text ? text : "{}", 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        erg_error_set(err, ERG_EINVAL, "%s: not a JSON object%s%s", what, o ? "" : ": ",
                      o ? "" : je.text);
        return NULL;
    }
    return o;
}

/* An int-valued member: a JSON integer within int range. */
static bool get_int(json_t *v, int *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < INT_MIN || json_integer_value(v) > INT_MAX)
        return false;
    *out = (int)json_integer_value(v);
    return true;
}

erg_srv_client_opts *erg_srv_client_opts_new(void)
{
    erg_srv_client_opts *o = erg__malloc(sizeof *o);
    if (o)
        erg_srv_client_opts_init(o);
    return o;
}

void erg_srv_client_opts_free(erg_srv_client_opts *opts)
{
    erg__free(opts);
}

erg_status erg_srv_client_opts_set(erg_srv_client_opts *o, const char *name, double value,
                                   erg_error *err)
{
    struct {
        const char *name;
        double *x;
    } fields[] = {
        {"request_timeout_s", &o->request_timeout_s},
        {"max_retries", NULL},
        {"backoff_initial_s", &o->backoff_initial_s},
        {"backoff_max_s", &o->backoff_max_s},
        {"schedule_wait_s", &o->schedule_wait_s},
        {"schedule_timeout_s", &o->schedule_timeout_s},
    };
    for (size_t i = 0; name && i < sizeof fields / sizeof fields[0]; i++) {
        if (strcmp(name, fields[i].name))
            continue;
        if (fields[i].x) {
            *fields[i].x = value;
            return ERG_OK;
        }
        if (!(value >= INT_MIN && value <= INT_MAX) || value != floor(value))
            return erg_error_set(err, ERG_EINVAL,
                                 "client options: max_retries must be an "
                                 "integer, not %g",
                                 value);
        o->max_retries = (int)value;
        return ERG_OK;
    }
    return erg_error_set(err, ERG_EINVAL, "client options: unknown option '%s'", name ? name : "");
}

erg_status erg_srv_client_register_job_json(erg_srv_client *c, const char *desc_json, char **job_id,
                                            erg_error *err)
{
    *job_id = NULL;
    json_t *o = parse_object(desc_json, "job description", err);
    if (!o)
        return ERG_EINVAL;
    erg_srv_job_desc d;
    memset(&d, 0, sizeof d);
    char *args = NULL;
    bool have_world = false;
    erg_status st = ERG_OK;
    struct {
        const char *name;
        int *i;
        const char **s;
    } fields[] = {
        {"pp_degree", &d.pp_degree, NULL},
        {"dp_degree", &d.dp_degree, NULL},
        {"tp_degree", &d.tp_degree, NULL},
        {"world_size", &d.world_size, NULL},
        {"framework", NULL, &d.framework},
        {"model_name", NULL, &d.model_name},
        {"partition_method", NULL, &d.partition_method},
        {"microbatch_size", &d.microbatch_size, NULL},
        {"num_microbatches", &d.num_microbatches, NULL},
        {"scheduler", NULL, &d.scheduler},
        {"scheduler_args_json", NULL, &d.scheduler_args_json},
        {"mode", NULL, &d.mode},
    };
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (!strcmp(k, "scheduler_args")) {
            if (json_is_null(v))
                continue;
            if (!json_is_object(v) || d.scheduler_args_json) {
                st = erg_error_set(err, ERG_EINVAL,
                                   "job description: scheduler_args must be "
                                   "an object (and not given with scheduler_args_json)");
                break;
            }
            if (!(args = json_dumps(v, JSON_COMPACT))) {
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                break;
            }
            d.scheduler_args_json = args;
            continue;
        }
        size_t i = 0, n = sizeof fields / sizeof fields[0];
        while (i < n && strcmp(k, fields[i].name))
            i++;
        if (i == n) {
            st = erg_error_set(err, ERG_EINVAL, "job description: unknown field '%s'", k);
            break;
        }
        if (fields[i].i ? !get_int(v, fields[i].i)
                        : !(json_is_null(v) || (*fields[i].s = json_string_value(v)))) {
            st = erg_error_set(err, ERG_EINVAL, "job description: %s must be %s", k,
                               fields[i].i ? "an integer" : "a string or null");
            break;
        }
        if (fields[i].i == &d.world_size)
            have_world = true;
    }
    if (!st && args && json_object_get(o, "scheduler_args_json") &&
        !json_is_null(json_object_get(o, "scheduler_args_json")))
        st = erg_error_set(err, ERG_EINVAL,
                           "job description: give scheduler_args or "
                           "scheduler_args_json, not both");
    if (!st) {
        if (!have_world)
            d.world_size = d.pp_degree * d.dp_degree * d.tp_degree;
        st = erg_srv_client_register_job(c, &d, job_id, err);
    }
    free(args);
    json_decref(o);
    return st;
}

erg_status erg_srv_client_register_rank(erg_srv_client *c, const char *job_id, int rank,
                                        int dp_rank, int pp_rank, int tp_rank,
                                        const char *const *pipe_schedule, size_t n_instrs,
                                        const int *power_states, size_t n_states, erg_error *err)
{
    json_t *ps = json_array(), *pr = json_array();
    for (size_t i = 0; ps && i < n_instrs; i++)
        json_array_append_new(ps, json_string(pipe_schedule[i]));
    for (size_t i = 0; pr && i < n_states; i++)
        json_array_append_new(pr, json_integer(power_states[i]));
    json_t *o = json_pack("{s:s,s:i,s:i,s:i,s:i,s:o,s:o}", "job_id", job_id, "rank", rank,
                          "dp_rank", dp_rank, "pp_rank", pp_rank, "tp_rank", tp_rank,
                          "pipe_schedule", ps, "power_state_range", pr);
    char *path = job_path(c, job_id, "ranks");
    erg_status st = o && path ? post_json(c, path, o, "register rank", NULL, err)
                              : erg_error_set(err, ERG_ENOMEM, "out of memory");
    json_decref(o);
    erg__free(path);
    return st;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

erg_status erg_srv_client_fetch_schedule(erg_srv_client *c, const char *job_id, int rank,
                                         int **power_states, size_t *n, long *window, bool *done,
                                         erg_error *err)
{
    *power_states = NULL;
    *n = 0;
    *done = false;
    *window = -1;
    char *base = job_path(c, job_id, "schedule");
    if (!base)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    erg__buf path = {0};
    erg_status st = erg__buf_printf(&path, "%s?rank=%d&wait=%g", base, rank, c->o.schedule_wait_s)
                        ? erg_error_set(err, ERG_ENOMEM, "out of memory")
                        : ERG_OK;
    erg__free(base);
    double deadline = mono_s() + c->o.schedule_timeout_s;
    while (!st) {
        int status = 0;
        erg__buf resp = {0};
        st = request(c, "GET", path.data, NULL, c->o.request_timeout_s + c->o.schedule_wait_s,
                     &status, &resp, err);
        if (st) {
            erg__buf_free(&resp);
            break;
        }
        if (status == 202) { /* still waiting at the barrier */
            erg__buf_free(&resp);
            if (mono_s() > deadline) {
                st = erg_error_set(err, ERG_ETIMEOUT,
                                   "rank %d waited %.0f s at the barrier of job %s", rank,
                                   c->o.schedule_timeout_s, job_id);
                break;
            }
            continue;
        }
        if (status != 200) {
            st = http_error(status, &resp, "fetch schedule", err);
            erg__buf_free(&resp);
            break;
        }
        json_t *v = resp.data ? json_loads(resp.data, 0, NULL) : NULL;
        erg__buf_free(&resp);
        if (!v) {
            st = erg_error_set(err, ERG_EPARSE, "fetch schedule: the answer is not JSON");
            break;
        }
        if (json_is_true(json_object_get(v, "done"))) {
            *done = true;
            json_decref(v);
            break;
        }
        const json_t *a = json_object_get(v, "power_states");
        if (!json_is_array(a) || json_integer_value(json_object_get(v, "rank")) != rank) {
            st = erg_error_set(err, ERG_EPARSE,
                               "fetch schedule: the answer has no power_states for rank %d", rank);
            json_decref(v);
            break;
        }
        size_t len = json_array_size(a);
        int *ps = erg__calloc(len ? len : 1, sizeof(int));
        if (!ps) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            json_decref(v);
            break;
        }
        for (size_t i = 0; i < len; i++) {
            const json_t *x = json_array_get(a, i);
            if (!json_is_integer(x)) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "fetch schedule: power_states[%zu] is not an "
                                   "integer",
                                   i);
                break;
            }
            ps[i] = (int)json_integer_value(x);
        }
        if (st) {
            erg__free(ps);
        } else {
            *power_states = ps;
            *n = len;
            *window = (long)json_integer_value(json_object_get(v, "window"));
        }
        json_decref(v);
        break;
    }
    erg__buf_free(&path);
    return st;
}

erg_status erg_srv_result_new(int rank, erg_srv_result **out, erg_error *err)
{
    *out = NULL;
    erg_srv_result *r = erg__calloc(1, sizeof *r);
    if (!r)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    r->rank = rank;
    r->obj = json_pack("{s:i,s:[],s:[],s:{},s:{}}", "rank", rank, "iter_time", "iter_energy",
                       "time_breakdown", "energy_breakdown");
    if (!r->obj) {
        erg__free(r);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    *out = r;
    return ERG_OK;
}

erg_status erg_srv_result_set_energy_source(erg_srv_result *r, const char *source, erg_error *err)
{
    if (!r || !source)
        return erg_error_set(err, ERG_EINVAL, "erg_srv_result_set_energy_source: NULL argument");
    if (strcmp(source, "counter") && strcmp(source, "integrated") && strcmp(source, "model") &&
        strcmp(source, "none") && strcmp(source, "mixed"))
        return erg_error_set(err, ERG_EINVAL,
                             "energy source '%s' is not counter, integrated, model, none or mixed",
                             source);
    if (json_object_set_new(r->obj, "energy_source", json_string(source)))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    return ERG_OK;
}

void erg_srv_result_free(erg_srv_result *r)
{
    if (!r)
        return;
    json_decref(r->obj);
    erg__free(r);
}

erg_status erg_srv_result_add_iteration(erg_srv_result *r, double time_s, double energy_j,
                                        erg_error *err)
{
    if (!isfinite(time_s) || !isfinite(energy_j))
        return erg_error_set(err, ERG_EINVAL, "iteration time and energy must be finite");
    if (json_array_append_new(json_object_get(r->obj, "iter_time"), json_real(time_s)) ||
        json_array_append_new(json_object_get(r->obj, "iter_energy"), json_real(energy_j)))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    /* Every breakdown list gets a new (empty) iteration. */
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(r->obj, "time_breakdown"), k, v)
        json_array_append_new(v, json_array());
    json_object_foreach(json_object_get(r->obj, "energy_breakdown"), k, v)
        json_array_append_new(v, json_array());
    json_object_foreach(json_object_get(r->obj, "wait_breakdown"), k, v)
        json_array_append_new(v, json_array());
    return ERG_OK;
}

static json_t *series_for(json_t *bd, const char *instr, size_t iters)
{
    json_t *s = json_object_get(bd, instr);
    if (!s) {
        s = json_array();
        for (size_t i = 0; s && i < iters; i++)
            json_array_append_new(s, json_array());
        json_object_set_new(bd, instr, s);
    }
    return s;
}

erg_status erg_srv_result_add_sample(erg_srv_result *r, const char *instr, double time_s,
                                     double energy_j, erg_error *err)
{
    size_t iters = json_array_size(json_object_get(r->obj, "iter_time"));
    if (iters == 0)
        return erg_error_set(err, ERG_ESTATE, "add an iteration before its samples");
    if (!instr || !*instr || !isfinite(time_s))
        return erg_error_set(err, ERG_EINVAL, "a sample needs an instruction name and a time");
    json_t *ts = series_for(json_object_get(r->obj, "time_breakdown"), instr, iters);
    if (!ts || json_array_append_new(json_array_get(ts, iters - 1), json_real(time_s)))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (isfinite(energy_j)) {
        json_t *es = series_for(json_object_get(r->obj, "energy_breakdown"), instr, iters);
        if (!es || json_array_append_new(json_array_get(es, iters - 1), json_real(energy_j)))
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    return ERG_OK;
}

erg_status erg_srv_result_add_wait(erg_srv_result *r, const char *instr, double wait_s,
                                   erg_error *err)
{
    size_t iters = json_array_size(json_object_get(r->obj, "iter_time"));
    if (iters == 0)
        return erg_error_set(err, ERG_ESTATE, "add an iteration before its waits");
    if (!instr || !*instr || !isfinite(wait_s) || wait_s < 0)
        return erg_error_set(err, ERG_EINVAL,
                             "a wait needs an instruction name and a finite time >= 0 (got %g s)",
                             wait_s);
    json_t *wb = json_object_get(r->obj, "wait_breakdown");
    if (!wb) { /* created on the first wait: a result without waits is unchanged */
        wb = json_object();
        if (!wb || json_object_set_new(r->obj, "wait_breakdown", wb))
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    json_t *ws = series_for(wb, instr, iters);
    if (!ws || json_array_append_new(json_array_get(ws, iters - 1), json_real(wait_s)))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    return ERG_OK;
}

erg_status erg_srv_client_report(erg_srv_client *c, const char *job_id, long window,
                                 const erg_srv_result *r, erg_error *err)
{
    json_t *o = json_copy(r->obj);
    if (!o)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (window >= 0)
        json_object_set_new(o, "window", json_integer(window));
    char *path = job_path(c, job_id, "results");
    erg_status st = path ? post_json(c, path, o, "report", NULL, err)
                         : erg_error_set(err, ERG_ENOMEM, "out of memory");
    erg__free(path);
    json_decref(o);
    return st;
}

erg_status erg_srv_client_heartbeat(erg_srv_client *c, const char *job_id, int rank, erg_error *err)
{
    json_t *o = json_pack("{s:i}", "rank", rank);
    char *path = job_path(c, job_id, "heartbeat");
    erg_status st = o && path ? post_json(c, path, o, "heartbeat", NULL, err)
                              : erg_error_set(err, ERG_ENOMEM, "out of memory");
    json_decref(o);
    erg__free(path);
    return st;
}

erg_status erg_srv_client_end_job(erg_srv_client *c, const char *job_id, bool abort,
                                  const char *reason, erg_error *err)
{
    json_t *o = reason ? json_pack("{s:s}", "reason", reason) : json_object();
    char *path = job_path(c, job_id, abort ? "abort" : "end");
    erg_status st = o && path ? post_json(c, path, o, abort ? "abort job" : "end job", NULL, err)
                              : erg_error_set(err, ERG_ENOMEM, "out of memory");
    json_decref(o);
    erg__free(path);
    return st;
}

erg_status erg_srv_client_set_straggler(erg_srv_client *c, const char *job_id, double slowdown,
                                        double deadline_s, erg_error *err)
{
    json_t *o = slowdown > 0 ? json_pack("{s:f}", "slowdown", slowdown)
                             : json_pack("{s:f}", "deadline_s", deadline_s);
    char *path = job_path(c, job_id, "straggler");
    erg_status st = o && path ? post_json(c, path, o, "set straggler", NULL, err)
                              : erg_error_set(err, ERG_ENOMEM, "out of memory");
    json_decref(o);
    erg__free(path);
    return st;
}

erg_status erg_srv_client_request(erg_srv_client *c, const char *method, const char *path,
                                  const char *body, int *http_status, char **response,
                                  erg_error *err)
{
    *response = NULL;
    *http_status = 0;
    erg__buf resp = {0};
    erg_status st = request(c, method, path, body, c->o.request_timeout_s, http_status, &resp, err);
    if (!st)
        *response = resp.data ? resp.data : erg__strdup("");
    else
        erg__buf_free(&resp);
    return st;
}

static bool is_compute_name(const char *name)
{
    static const char *const names[] = {"forward", "backward", "backward_input", "backward_weight",
                                        "overlap_f_b"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i]))
            return true;
    return false;
}

erg_status erg_srv_schedule_to_plan(const char *const *pipe_schedule, const int *power_states,
                                    size_t n, int num_stages, int num_microbatches, int stage,
                                    const erg_schedule *sched, erg_plan **out, erg_error *err)
{
    *out = NULL;
    if (stage < 0 || stage >= num_stages || num_microbatches < 1)
        return erg_error_set(err, ERG_EINVAL, "stage %d of %d stages, %d microbatches", stage,
                             num_stages, num_microbatches);
    erg_plan *p = NULL;
    erg_status st = erg_plan_new(sched, num_stages, num_microbatches, &p, err);
    if (st)
        return st;
    /* Compute instructions get a clock: forward, backward and, for zero-bubble
     * and DualPipeV schedules, backward_input, backward_weight, overlap_f_b
     * (erg_instr_kind_name), in the rank's order. */
    size_t compute = 0;
    for (size_t i = 0; i < n; i++)
        if (is_compute_name(pipe_schedule[i]))
            compute++;
    size_t want = (size_t)erg_plan_stage_len(p, stage);
    if (compute != want) {
        erg_plan_free(p);
        return erg_error_set(err, ERG_EINVAL,
                             "the schedule has %zu forward/backward entries; a stage of %d "
                             "microbatches has %zu",
                             compute, num_microbatches, want);
    }
    int *f = erg_plan_stage_freqs(p, stage);
    for (size_t i = 0, k = 0; i < n; i++)
        if (is_compute_name(pipe_schedule[i]))
            f[k++] = power_states[i];
    *out = p;
    return ERG_OK;
}
