/* http.c: the server's life cycle, its libmicrohttpd front end and the housekeeping thread. */
#include "server/jobs.h"
#include "server/fleet.h"
#include "server/store.h"
#include "server/zeus.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <errno.h>
#include <unistd.h>
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <microhttpd.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

/* libmicrohttpd is loaded by the first erg_server_start (core/lazylib.c) */
/* clang-format off */
#define MHD_FUNCS(X) \
    X(MHD_add_response_header) X(MHD_create_response_from_buffer) X(MHD_destroy_response) \
    X(MHD_get_connection_info) X(MHD_get_connection_values) X(MHD_is_feature_supported) \
    X(MHD_lookup_connection_value) X(MHD_queue_response) X(MHD_resume_connection) \
    X(MHD_start_daemon) X(MHD_stop_daemon) X(MHD_suspend_connection)
/* clang-format on */
ERG__LAZY_LIB(mhd_lib, ERG_SONAME_MHD, "ergon serve (the HTTP server)", MHD_FUNCS)
#define MHD_add_response_header (*lz_MHD_add_response_header)
#define MHD_create_response_from_buffer (*lz_MHD_create_response_from_buffer)
#define MHD_destroy_response (*lz_MHD_destroy_response)
#define MHD_get_connection_info (*lz_MHD_get_connection_info)
#define MHD_get_connection_values (*lz_MHD_get_connection_values)
#define MHD_is_feature_supported (*lz_MHD_is_feature_supported)
#define MHD_lookup_connection_value (*lz_MHD_lookup_connection_value)
#define MHD_queue_response (*lz_MHD_queue_response)
#define MHD_resume_connection (*lz_MHD_resume_connection)
#define MHD_start_daemon (*lz_MHD_start_daemon)
#define MHD_stop_daemon (*lz_MHD_stop_daemon)
#define MHD_suspend_connection (*lz_MHD_suspend_connection)

/* Event threads of the HTTP front end (requests are short; waits do not
 * hold threads). */
#define SRV_HTTP_THREADS 4

void erg_server_opts_init(erg_server_opts *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 7787;
    o->db_path = "ergon-server.sqlite";
    o->dump_dir = "dump";
    o->dump_data = true;
    o->scheduler = NULL;      /* = the Zeus configuration's counterpart, else AllMaxFrequency */
    o->scheduler_args = NULL; /* = {} */
    o->mode = NULL;
    o->log_level = ERG_LOG_INFO;
    o->rank_timeout_s = 0;
    o->job_idle_timeout_s = 604800;
    o->connection_timeout_s = 30;
    o->max_body_bytes = 16u << 20;
    o->max_connections = 4096;
    o->max_connections_per_ip = 0; /* = max_connections / 2 */
    o->max_jobs = 1000;
}

static char *dup_or_null(const char *s)
{
    return s ? erg__strdup(s) : NULL;
}

erg_status erg_server_new(const erg_server_opts *opts, erg_server **out, erg_error *err)
{
    *out = NULL;
    erg_server_opts def;
    if (!opts) {
        erg_server_opts_init(&def);
        opts = &def;
    }
    if (opts->port < 0 || opts->port > 65535)
        return erg_error_set(err, ERG_EINVAL, "port %d is not in [0, 65535]", opts->port);
    if (!(opts->job_idle_timeout_s > 0) || opts->rank_timeout_s < 0 ||
        !(opts->connection_timeout_s > 0) || opts->max_body_bytes < 1024 ||
        opts->max_connections < 1 || opts->max_jobs < 1)
        return erg_error_set(err, ERG_EINVAL,
                             "timeouts must be positive (rank timeout >= 0), the body limit at "
                             "least 1024 bytes and the connection and job limits at least 1");
    if ((unsigned)opts->log_level > ERG_LOG_ERROR)
        return erg_error_set(err, ERG_EINVAL, "unknown log level %d", (int)opts->log_level);
    erg_server *srv = erg__calloc(1, sizeof *srv);
    if (!srv)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    srv->lock_fd = -1;
    /* Bodies held at once: room for two of the largest, at least 16 MiB. */
    srv->body_budget =
        opts->max_body_bytes * 2 > (16u << 20) ? opts->max_body_bytes * 2 : (16u << 20);
    srv->opts = *opts;
    pthread_mutex_init(&srv->mu, NULL);
    pthread_mutex_init(&srv->log_mu, NULL);
    pthread_cond_init(&srv->hk_cond, NULL);
    erg_status st = ERG_OK;
    srv->host = dup_or_null(opts->host ? opts->host : "127.0.0.1");
    /* A host name (localhost, the node's name) is resolved once, here, to the numeric address
     * the server binds and access control judges (localhost is loopback). */
    if (srv->host) {
        unsigned char probe[16];
        if (inet_pton(AF_INET, srv->host, probe) != 1 &&
            inet_pton(AF_INET6, srv->host, probe) != 1) {
            struct addrinfo hints, *res = NULL;
            memset(&hints, 0, sizeof hints);
            hints.ai_family = AF_UNSPEC;
            hints.ai_socktype = SOCK_STREAM;
            int gr = getaddrinfo(srv->host, NULL, &hints, &res);
            char num[INET6_ADDRSTRLEN] = "";
            /* IPv4 first, as a listener on one address takes one family */
            for (int fam = 0; !gr && fam < 2 && !num[0]; fam++)
                for (struct addrinfo *ai = res; ai && !num[0]; ai = ai->ai_next) {
                    if (ai->ai_family == AF_INET && fam == 0)
                        inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, num,
                                  sizeof num);
                    else if (ai->ai_family == AF_INET6 && fam == 1)
                        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, num,
                                  sizeof num);
                }
            if (res)
                freeaddrinfo(res);
            if (!num[0]) {
                st = erg_error_set(err, ERG_EINVAL,
                                   "host '%.64s' is neither a numeric IPv4/IPv6 address nor a "
                                   "name this machine resolves%s%s",
                                   srv->host, gr ? ": " : "", gr ? gai_strerror(gr) : "");
                goto fail;
            }
            erg__free(srv->host);
            srv->host = dup_or_null(num);
        }
    }
    srv->db_path = dup_or_null(opts->db_path ? opts->db_path : ":memory:");
    srv->dump_dir = dup_or_null(opts->dump_dir ? opts->dump_dir : "dump");
    if (!srv->host || !srv->db_path || !srv->dump_dir) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    srv->opts.host = srv->host;
    srv->opts.db_path = srv->db_path;
    srv->opts.dump_dir = srv->dump_dir;
    srv->opts.scheduler_args = NULL;
    srv->opts.mode = NULL;
    srv->opts.plans_dirs = NULL;
    srv->opts.n_plans_dirs = 0;
    if ((st = erg__srv_plans_dirs_init(srv, opts->plans_dirs, opts->n_plans_dirs, err)))
        goto fail;
    srv->opts.auth_token = NULL;
    srv->opts.allow_nets = NULL;
    srv->opts.n_allow_nets = 0;
    srv->opts.tls_cert_file = srv->opts.tls_key_file = NULL;
    if ((st = erg__srv_auth_init(srv, opts, err)))
        goto fail;
    if (opts->tls_cert_file && opts->tls_key_file) {
        size_t n;
        erg_error e;
        if (erg__read_file(opts->tls_cert_file, 1u << 20, &srv->tls_cert, &n, &e)) {
            st = erg_error_set(err, ERG_EIO, "TLS certificate: %s", e.msg);
            goto fail;
        }
        if (erg__read_file(opts->tls_key_file, 1u << 20, &srv->tls_key, &n, &e)) {
            st = erg_error_set(err, ERG_EIO, "TLS key: %s", e.msg);
            goto fail;
        }
        if (!strstr(srv->tls_cert, "-----BEGIN CERTIFICATE-----") ||
            !strstr(srv->tls_key, "PRIVATE KEY-----")) {
            st = erg_error_set(err, ERG_EINVAL,
                               "TLS: %s must hold a PEM certificate (-----BEGIN CERTIFICATE-----) "
                               "and %s a PEM private key",
                               opts->tls_cert_file, opts->tls_key_file);
            goto fail;
        }
    }
    /* One configuration for both protocols: the Zeus one first; without a scheduler of
     * its own the server runs the Zeus one's counterpart (wire_zeus.c). */
    if ((st = erg__srv_zeus_config(srv, opts, err)))
        goto fail;
    bool perseus_given = opts->scheduler || opts->scheduler_args;
    const char *sched_name = opts->scheduler ? opts->scheduler : "AllMaxFrequency";
    json_error_t je;
    if (!perseus_given && srv->zeus_scheduler) {
        srv->sched_args = erg__srv_zeus_to_perseus(srv, &sched_name);
        if (!srv->sched_args) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto fail;
        }
    } else {
        srv->sched_args = json_loads(opts->scheduler_args ? opts->scheduler_args : "{}", 0, &je);
        if (!srv->sched_args || !json_is_object(srv->sched_args)) {
            st = erg_error_set(err, ERG_EINVAL, "scheduler arguments must be a JSON object: %s",
                               srv->sched_args ? "got another JSON value" : je.text);
            goto fail;
        }
    }
    srv->scheduler = dup_or_null(sched_name);
    if (!srv->scheduler) {
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        goto fail;
    }
    srv->opts.scheduler = srv->scheduler;
    if ((st = erg__srv_sched_check_args(srv->scheduler, srv->sched_args, err)))
        goto fail;
    /* Mode resolution (docs/http-api.md, Options): fixed-knob schedulers impose theirs. */
    int want = SRV_MODE_ANY;
    if (!perseus_given && srv->zeus_scheduler && !(opts->mode && *opts->mode))
        want = SRV_MODE_FREQUENCY; /* Zeus sets clocks */
    if (opts->mode && *opts->mode && strcmp(opts->mode, "unspecified")) {
        if (!strcmp(opts->mode, "frequency"))
            want = SRV_MODE_FREQUENCY;
        else if (!strcmp(opts->mode, "power limit") || !strcmp(opts->mode, "power-limit"))
            want = SRV_MODE_POWER;
        else {
            st = erg_error_set(err, ERG_EINVAL,
                               "mode must be \"frequency\" or \"power limit\", not '%.64s'",
                               opts->mode);
            goto fail;
        }
    }
    const srv_sched_class *cls = erg__srv_sched_find(srv->scheduler);
    if (cls->fixed_mode != SRV_MODE_ANY) {
        if (want != SRV_MODE_ANY && want != cls->fixed_mode) {
            st = erg_error_set(err, ERG_EINVAL, "scheduler %s runs in %s mode, not %s",
                               srv->scheduler, erg__srv_mode_name(cls->fixed_mode),
                               erg__srv_mode_name(want));
            goto fail;
        }
        srv->mode = cls->fixed_mode;
    } else {
        if (want == SRV_MODE_ANY) {
            st = erg_error_set(err, ERG_EINVAL,
                               "scheduler %s works with either knob: give the mode "
                               "(\"frequency\" or \"power limit\")",
                               srv->scheduler);
            goto fail;
        }
        srv->mode = want;
    }
    if ((st = erg__srv_zeus_reconcile(srv, perseus_given, err)))
        goto fail;
    erg__srv_zeus_log_config(srv);
    if (opts->dump_data && (st = erg__srv_dump_dir_check(srv, err)))
        goto fail;
    if ((st = erg__srv_store_open(srv, err)) || (st = erg__srv_fleet_open(srv, err)))
        goto fail;
    pthread_mutex_lock(&srv->mu);
    st = erg__srv_jobs_restore(srv, err);
    pthread_mutex_unlock(&srv->mu);
    if (st)
        goto fail;
    *out = srv;
    return ERG_OK;
fail:
    erg_server_free(srv);
    return st;
}

/* ---- libmicrohttpd glue ---- */

typedef struct conn_ctx {
    erg__buf body;
    bool too_big;
    bool busy;  /* The body budget was exhausted: 503. */
    int denied; /* Access refused (401 or 403, auth.c); its body is dropped. */
    const char *deny_why;
    size_t reserved; /* Bytes of the server's body budget held by this request. */
    erg_server *srv;
    struct MHD_Connection *conn;
    bool resp_ready; /* A parked request's answer arrived. */
    int resp_status;
    char *resp_body;
    const char *resp_ctype;
} conn_ctx;

static void park_conn(void *p)
{
    conn_ctx *ctx = p;
    MHD_suspend_connection(ctx->conn);
}

static void wake_conn(void *p, int status, char *body, const char *ctype)
{
    conn_ctx *ctx = p;
    ctx->resp_status = status;
    ctx->resp_body = body;
    ctx->resp_ctype = ctype;
    ctx->resp_ready = true;
    MHD_resume_connection(ctx->conn);
}

static enum MHD_Result send_text(struct MHD_Connection *c, int status, const char *ctype,
                                 const char *text, bool close)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    if (close)
        MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    erg__buf *q = cls;
    if (q->len > 4096)
        return MHD_NO;
    /* Re-encode the few bytes that matter for our parser. */
    erg__buf_printf(q, "%s%s=", q->len ? "&" : "", key);
    for (const char *p = value ? value : ""; *p; p++) {
        if (*p == '&' || *p == '%' || *p == '+' || *p == '=')
            erg__buf_printf(q, "%%%02X", (unsigned char)*p);
        else
            erg__buf_append(q, p, 1);
    }
    return MHD_YES;
}

/* Request bodies held by all connections together are bounded (issue 15
 * item 9): a body that would take more than the budget left waits for no
 * one, it gets 503 (retry) before its bytes are read when its length is
 * declared, or as soon as it outgrows the budget otherwise. */
static bool budget_take(erg_server *srv, conn_ctx *ctx, size_t n)
{
    size_t cur = __atomic_load_n(&srv->body_inflight, __ATOMIC_RELAXED);
    do {
        if (cur + n > srv->body_budget)
            return false;
    } while (!__atomic_compare_exchange_n(&srv->body_inflight, &cur, cur + n, true,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    ctx->reserved += n;
    return true;
}

static void budget_release(conn_ctx *ctx)
{
    if (ctx->reserved)
        __atomic_sub_fetch(&ctx->srv->body_inflight, ctx->reserved, __ATOMIC_RELAXED);
    ctx->reserved = 0;
}

/* Drop a request's body bytes and return large freed blocks to the system:
 * glibc keeps them in per-thread arenas otherwise (8 bodies of 16 MB were seen
 * to leave the server at 1.35 GB). */
static void body_release(conn_ctx *ctx)
{
    bool large = ctx->body.len >= (1u << 20) || ctx->reserved >= (1u << 20);
    erg__buf_free(&ctx->body);
    budget_release(ctx);
#ifdef __GLIBC__
    if (large)
        malloc_trim(0);
#else
    (void)large;
#endif
}

static enum MHD_Result refuse_busy(erg_server *srv, struct MHD_Connection *c)
{
    char msg[200];
    snprintf(msg, sizeof msg,
             "{\"detail\":\"the server is reading too many large request bodies (%zu bytes at "
             "most); retry\"}",
             srv->body_budget);
    pthread_mutex_lock(&srv->mu);
    srv->requests_by_class[5]++;
    pthread_mutex_unlock(&srv->mu);
    return send_text(c, 503, "application/json", msg, true);
}

/* Access control (auth.c): with a token or --allow-net networks, a request must carry the
 * token or come from an allowed network (the Perseus and Zeus routes; every route when there
 * is no token); /healthz is open. true when the request is refused (ctx->denied set). */
static bool check_access(erg_server *srv, struct MHD_Connection *c, const char *url, conn_ctx *ctx)
{
    if ((!srv->token && !srv->n_nets) || erg__srv_auth_route_open(url))
        return false;
    srv_auth_result ar = SRV_AUTH_MISSING;
    if (srv->token) {
        ar = erg__srv_auth_token(srv,
                                 MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"));
        if (ar == SRV_AUTH_OK)
            return false;
    }
    if (srv->n_nets && erg__srv_auth_route_net_ok(srv, url)) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci && erg__srv_auth_net_allowed(srv, ci->client_addr))
            return false;
    }
    ctx->denied = srv->token ? 401 : 403;
    ctx->deny_why = !srv->token ? "this client's address is not in an --allow-net network"
                    : ar == SRV_AUTH_WRONG ? "the credentials do not match the server's token"
                                           : "this route needs the server's token";
    return true;
}

static enum MHD_Result refuse_access(erg_server *srv, struct MHD_Connection *c, const char *url,
                                     conn_ctx *ctx)
{
    char msg[600], addr[INET6_ADDRSTRLEN + 2] = "?";
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ci->client_addr)->sin_addr, addr,
                  sizeof addr);
    else if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ci->client_addr)->sin6_addr, addr,
                  sizeof addr);
    bool v1 = !strncmp(url, "/v1/", 4);
    snprintf(msg, sizeof msg,
             "{\"%s\":\"%d %s: %s (client %s). %s (docs/http-api.md, Access control)\"}",
             v1 ? "error" : "detail", ctx->denied,
             ctx->denied == 401 ? "Unauthorized" : "Forbidden", ctx->deny_why, addr,
             ctx->denied == 401
                 ? "Send 'Authorization: Bearer <token>', or put the token in the server URL as "
                   "Zeus and Perseus clients can: http://ergon:<token>@host:port"
                 : "Start the server with --allow-net naming this client's network");
    pthread_mutex_lock(&srv->mu);
    srv->requests_by_class[4]++;
    pthread_mutex_unlock(&srv->mu);
    erg__srv_log(srv, ERG_LOG_WARNING, "access", NULL, "refused %.200s from %s: %s", url, addr,
                 ctx->deny_why);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(msg), msg, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (ctx->denied == 401)
        MHD_add_response_header(r, "WWW-Authenticate",
                                "Bearer realm=\"ergon\", Basic realm=\"ergon\"");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)ctx->denied, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    erg_server *srv = cls;
    conn_ctx *ctx = *con_cls;
    if (!ctx) {
        ctx = erg__calloc(1, sizeof *ctx);
        if (!ctx)
            return MHD_NO;
        ctx->conn = c;
        ctx->srv = srv;
        *con_cls = ctx;
        if (check_access(srv, c, url, ctx))
            return MHD_YES; /* answered once the body (not kept) has been read */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        long n;
        if (cl && erg__parse_long(cl, &n) && n > 0 && (size_t)n <= srv->opts.max_body_bytes) {
            /* Declared length: reserve it (and the buffer) before reading. */
            if (!budget_take(srv, ctx, (size_t)n)) {
                ctx->busy = true;
                return refuse_busy(srv, c);
            }
            ctx->body.data = erg__malloc((size_t)n + 1);
            if (ctx->body.data) {
                ctx->body.cap = (size_t)n + 1;
                ctx->body.data[0] = 0;
            }
        }
        if (cl && erg__parse_long(cl, &n) && (size_t)n > srv->opts.max_body_bytes) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "{\"detail\":\"request body of %ld bytes exceeds the limit of %zu bytes\"}", n,
                     srv->opts.max_body_bytes);
            pthread_mutex_lock(&srv->mu);
            srv->requests_by_class[4]++;
            pthread_mutex_unlock(&srv->mu);
            ctx->too_big = true;
            return send_text(c, 413, "application/json", msg, false);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!ctx->too_big && !ctx->busy && !ctx->denied) {
            size_t need = ctx->body.len + *upload_size;
            if (need > srv->opts.max_body_bytes) {
                ctx->too_big = true;
                body_release(ctx);
            } else if (need > ctx->reserved && !budget_take(srv, ctx, need - ctx->reserved)) {
                ctx->busy = true; /* undeclared length outgrew the budget */
                body_release(ctx);
            } else if (erg__buf_append(&ctx->body, upload_data, *upload_size)) {
                return MHD_NO;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (ctx->resp_ready) {
        /* A resumed connection is closed after its answer (one request per
         * connection, as the Perseus and Zeus clients open them; under epoll a
         * resumed keep-alive connection once stalled until the connection
         * timeout). */
        enum MHD_Result ret = send_text(c, ctx->resp_status, ctx->resp_ctype, ctx->resp_body, true);
        erg__free(ctx->resp_body);
        ctx->resp_body = NULL;
        ctx->resp_ready = false;
        return ret;
    }
    if (ctx->denied)
        return refuse_access(srv, c, url, ctx);
    if (ctx->busy)
        return refuse_busy(srv, c);
    if (ctx->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "{\"detail\":\"request body exceeds the limit of %zu bytes\"}",
                 srv->opts.max_body_bytes);
        pthread_mutex_lock(&srv->mu);
        srv->requests_by_class[4]++;
        pthread_mutex_unlock(&srv->mu);
        return send_text(c, 413, "application/json", msg, false);
    }
    erg__buf q = {0};
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_query, &q);
    srv_resp rs;
    if (srv->request_hook)
        srv->request_hook(srv, url);
    erg__srv_dispatch(srv, method, url, q.data, ctx->body.data, ctx->body.len, 1e9, ctx, &rs);
    erg__buf_free(&q);
    body_release(ctx); /* parsed by now; a parked request holds no body */
    if (rs.parked)
        return MHD_YES; /* suspended; wake_conn answers later */
    enum MHD_Result ret = send_text(c, rs.status, rs.ctype, rs.body, false);
    erg__free(rs.body);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    conn_ctx *ctx = *con_cls;
    if (ctx) {
        body_release(ctx);
        erg__free(ctx->resp_body);
        erg__free(ctx);
        *con_cls = NULL;
    }
}

/* Connection slots (conns.c). libmicrohttpd divides its connection limit among
 * the pool's threads, and a thread at its share closes what it accepts even when
 * the others are idle (seen: /healthz refused with 99 of 200 slots used). So
 * libmicrohttpd gets a limit no thread reaches, and the server counts its own
 * limits across threads, the per-address one too (libmicrohttpd's closed
 * connections over it without a word). */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t len)
{
    (void)len;
    return erg__srv_conns_admit(cls, addr) ? MHD_YES : MHD_NO;
}

static void notify_conn(void *cls, struct MHD_Connection *c, void **socket_ctx,
                        enum MHD_ConnectionNotificationCode toe)
{
    (void)socket_ctx;
    erg_server *srv = cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED)
        erg__srv_conns_opened(srv, sa);
    else if (toe == MHD_CONNECTION_NOTIFY_CLOSED)
        erg__srv_conns_closed(srv, sa);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    erg_server *srv = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = 0;
    /* "Server reached connection limit. Closing inbound connection." and "Hit process or
     * system resource limit at N connections, ..." (accept() out of descriptors) */
    if (strstr(msg, "reached connection limit") || strstr(msg, "resource limit"))
        erg__srv_conns_refused_by_mhd(srv, msg);
    else
        erg__srv_log(srv, ERG_LOG_DEBUG, "http", NULL, "%s", msg);
}

static void *housekeeper(void *arg)
{
    erg_server *srv = arg;
    pthread_mutex_lock(&srv->mu);
    while (!srv->stopping) {
        erg__srv_jobs_housekeeping(srv);
        pthread_mutex_unlock(&srv->mu);
        erg__srv_store_checkpoint(srv);
        pthread_mutex_lock(&srv->mu);
        if (srv->stopping)
            break;
        double period = 1.0;
        if (srv->opts.rank_timeout_s > 0)
            period = fmin(period, srv->opts.rank_timeout_s / 4);
        period = fmin(period, srv->opts.job_idle_timeout_s / 4);
        if (period < 0.05)
            period = 0.05;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + period;
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&srv->hk_cond, &srv->mu, &ts);
    }
    pthread_mutex_unlock(&srv->mu);
    return NULL;
}

erg_status erg_server_start(erg_server *srv, erg_error *err)
{
    if (srv->mhd)
        return erg_error_set(err, ERG_ESTATE, "the server is already listening");
    erg_status lst = erg__lazylib_load(&mhd_lib, err);
    if (lst != ERG_OK)
        return lst;
    struct sockaddr_in6 a6;
    struct sockaddr_in a4;
    struct sockaddr *sa;
    /* A small pool of event-driven threads; waiting requests are suspended
     * connections, not threads (jobs.c, "parked requests"). poll(), not epoll: libmicrohttpd
     * 0.9.75's epoll loop takes 128 events per epoll_wait and after a full batch waits again
     * with the timeout it computed first (until its oldest connection times out), so a thread
     * whose burst was exactly 128 requests slept with them unread until the connection
     * timeout, which then closed the oldest unanswered (issue 38; test_server_burst). Its
     * poll() loop waits once per turn and serves every ready connection. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    srv->park = park_conn;
    srv->wake = wake_conn;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET, srv->host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)srv->opts.port);
        sa = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, srv->host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)srv->opts.port);
        sa = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        return erg_error_set(err, ERG_EINVAL, "host '%.64s' is not a numeric IPv4 or IPv6 address",
                             srv->host);
    }
    /* Our own listening socket: SO_REUSEADDR (restart over TIME_WAIT) but
     * never SO_REUSEPORT, so a second server on a busy port fails here with
     * the reason instead of sharing the port (the kernel would split the
     * requests between the two). */
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return erg_error_set(err, ERG_ENET, "cannot create a socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (sa->sa_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    socklen_t salen = sa->sa_family == AF_INET6 ? sizeof a6 : sizeof a4;
    if (bind(fd, sa, salen) != 0 || listen(fd, 1024) != 0) {
        int e = errno;
        close(fd);
        if (e == EADDRINUSE)
            return erg_error_set(err, ERG_ENET,
                                 "port %d on %s is in use (another server is listening there)",
                                 srv->opts.port, srv->host);
        return erg_error_set(err, ERG_ENET, "cannot listen on %s port %d: %s", srv->host,
                             srv->opts.port, strerror(e));
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    int port = srv->opts.port;
    if (getsockname(fd, (struct sockaddr *)&bound, &bl) == 0)
        port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                 : ((struct sockaddr_in *)&bound)->sin_port);
    /* Never more connections than descriptors: past the limit accept() fails
     * with EMFILE, and so would the database and dump files. */
    unsigned conn_limit = srv->opts.max_connections;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)conn_limit + 128) {
        /* 128 descriptors for the rest (database, dumps, event threads), half below 256 */
        unsigned lim = rl.rlim_cur > 256 ? (unsigned)(rl.rlim_cur - 128)
                                         : (unsigned)ERG__MAX(rl.rlim_cur / 2, 1);
        erg__srv_log(
            srv, ERG_LOG_WARNING, "listen", NULL,
            "max connections lowered from %u to %u by the descriptor limit (ulimit -n %lu)",
            conn_limit, lim, (unsigned long)rl.rlim_cur);
        conn_limit = lim;
        srv->conn_nofile = (unsigned long)rl.rlim_cur;
    }
    /* One address never takes every connection slot: the others (health
     * checks, other nodes) keep at least half. */
    unsigned per_ip =
        srv->opts.max_connections_per_ip ? srv->opts.max_connections_per_ip : (conn_limit + 1) / 2;
    if (per_ip > conn_limit)
        per_ip = conn_limit;
    srv->stopping = false;
    srv->conn_limit = conn_limit;
    srv->conn_per_ip = per_ip;
    srv->conns = 0;
    erg_status cst = srv->conn_tab ? ERG_OK : erg__srv_conns_init(srv, err);
    if (cst) {
        close(fd);
        return cst;
    }
    /* HTTPS: libmicrohttpd's own TLS (GnuTLS); the PEM text lives as long as the server. */
    struct MHD_OptionItem tls[3] = {
        {MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (srv->tls_cert) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            close(fd);
            return erg_error_set(err, ERG_EINVAL,
                                 "this libmicrohttpd was built without TLS: https cannot be "
                                 "served (run without --tls-cert/--tls-key behind a TLS proxy)");
        }
        flags |= MHD_USE_TLS;
        tls[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, srv->tls_key};
        tls[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, srv->tls_cert};
    }
    unsigned threads = srv->http_threads ? srv->http_threads : SRV_HTTP_THREADS;
    srv->mhd = MHD_start_daemon(
        flags, (uint16_t)port, accept_policy, srv, on_request, srv, MHD_OPTION_ARRAY, tls,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv, MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, notify_conn,
        srv, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)ceil(srv->opts.connection_timeout_s),
        MHD_OPTION_CONNECTION_LIMIT, (conn_limit + 8) * threads, MHD_OPTION_THREAD_POOL_SIZE,
        threads, MHD_OPTION_END);
    if (!srv->mhd) {
        close(fd);
        return erg_error_set(err, ERG_ENET, "cannot start the HTTP server on %s port %d", srv->host,
                             port);
    }
    srv->port = port;
    if (pthread_create(&srv->hk, NULL, housekeeper, srv) == 0)
        srv->hk_running = true;
    char how[400];
    long wide = erg__srv_conns_barrier_capacity(srv, how, sizeof how);
    erg__srv_log(srv, ERG_LOG_INFO, "listen", NULL,
                 "listening on %s port %d (%s), scheduler %s, mode %s; access: %s%s%zu allowed "
                 "network(s)%s; connections: %u, %u from one address (jobs of up to %ld ranks)",
                 srv->host, srv->port, srv->tls_cert ? "https" : "http", srv->scheduler,
                 erg__srv_mode_name(srv->mode), srv->token ? "token" : "no token", ", ",
                 srv->n_nets,
                 !srv->token && !srv->n_nets ? " (open to every client that reaches the port)" : "",
                 srv->conn_limit, srv->conn_per_ip, wide > 0 ? wide : 0);
    return ERG_OK;
}

int erg_server_port(const erg_server *srv)
{
    return srv && srv->mhd ? srv->port : 0;
}

void erg_server_stop(erg_server *srv)
{
    if (!srv)
        return;
    pthread_mutex_lock(&srv->mu);
    srv->stopping = true;
    erg__srv_jobs_wake_all(srv);
    pthread_cond_broadcast(&srv->hk_cond);
    pthread_mutex_unlock(&srv->mu);
    if (srv->hk_running) {
        pthread_join(srv->hk, NULL);
        srv->hk_running = false;
    }
    if (srv->mhd) {
        MHD_stop_daemon(srv->mhd);
        srv->mhd = NULL;
    }
}

void erg_server_free(erg_server *srv)
{
    if (!srv)
        return;
    erg_server_stop(srv);
    erg__srv_jobs_free(srv);
    erg__srv_fleet_free(srv);
    erg__srv_store_close(srv);
    json_decref(srv->sched_args);
    erg__srv_zeus_config_free(srv);
    erg__srv_auth_free(srv);
    erg__srv_conns_free(srv);
    if (srv->tls_key)
        memset(srv->tls_key, 0, strlen(srv->tls_key));
    erg__free(srv->tls_key);
    erg__free(srv->tls_cert);
    erg__srv_plans_dirs_free(srv);
    erg__free(srv->host);
    erg__free(srv->db_path);
    erg__free(srv->dump_dir);
    erg__free(srv->scheduler);
    pthread_mutex_destroy(&srv->mu);
    pthread_mutex_destroy(&srv->log_mu);
    pthread_cond_destroy(&srv->hk_cond);
    erg__free(srv);
}

erg_status erg_server_handle(erg_server *srv, const char *method, const char *path,
                             const char *query, const char *body, size_t len, double max_wait_s,
                             int *http_status, char **resp_body, const char **content_type)
{
    srv_resp rs;
    erg__srv_dispatch(srv, method ? method : "", path ? path : "", query, body, len,
                      max_wait_s > 0 ? max_wait_s : 0, NULL, &rs);
    *http_status = rs.status;
    *resp_body = rs.body;
    *content_type = rs.ctype;
    return rs.body ? ERG_OK : ERG_ENOMEM;
}
