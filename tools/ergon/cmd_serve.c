/* cmd_serve.c: `ergon serve`, the control-plane server (Perseus and Zeus PFO protocols plus /v1
 * API). */
#include "cli.h"
#include "ergon/server.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <strings.h>
#include <time.h>

#define MAX_PLANS_DIRS 64
#define MAX_ALLOW_NETS 256

/* Other variables of these families that ergon serve knows (not options). */
static const char *const other_known[] = {"ERGON_SERVER_URL", "ERGON_LIBRARY", "ERGON_SERVE_TOKEN",
                                          "ERGON_SERVE_CA_FILE"};

/* ---- environment, read the way pydantic v1 BaseSettings reads it ---- */

extern char **environ;

static bool icase_prefix(const char *s, const char *p)
{
    return !strncasecmp(s, p, strlen(p));
}

/* The value of a PERSEUS_/ZEUS_PFO_ variable in any case (the spelling later
 * in the environment wins, as in pydantic's lower-cased dict), or of any
 * other variable exactly. */
static const char *env_get(const char *name)
{
    if (!name)
        return NULL;
    if (!icase_prefix(name, "PERSEUS_") && !icase_prefix(name, "ZEUS_PFO_"))
        return getenv(name);
    const char *found = NULL;
    size_t n = strlen(name);
    for (char **e = environ; e && *e; e++)
        if (!strncasecmp(*e, name, n) && (*e)[n] == '=')
            found = *e + n + 1;
    return found;
}

static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t k = 0; k <= lb; k++)
        d[0][k] = (int)k;
    for (size_t i = 1; i <= la; i++)
        for (size_t k = 1; k <= lb; k++) {
            int c = d[i - 1][k - 1] + ((a[i - 1] | 32) != (b[k - 1] | 32));
            int x = d[i - 1][k] + 1, y = d[i][k - 1] + 1;
            d[i][k] = c < x ? (c < y ? c : y) : (x < y ? x : y);
        }
    return d[la][lb];
}

/* Report variables that look like settings of ergon serve, Perseus or Zeus
 * but are not read (a typo silently ignored costs a run): every row's env and env2 are read. */
static void report_lookalikes(const cli_opt *opts)
{
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e || (size_t)(eq - *e) > 63)
            continue;
        char name[64];
        memcpy(name, *e, (size_t)(eq - *e));
        name[eq - *e] = 0;
        bool family = icase_prefix(name, "PERSEUS") || icase_prefix(name, "ZEUS_PFO") ||
                      icase_prefix(name, "ERGON_");
        const char *best = NULL;
        int bd = 99;
        bool known = false;
        for (const cli_opt *r = opts; r->name; r++) {
            const char *cand[2] = {r->env, r->env2};
            for (int k = 0; k < 2; k++) {
                if (!cand[k])
                    continue;
                bool icase =
                    icase_prefix(cand[k], "PERSEUS_") || icase_prefix(cand[k], "ZEUS_PFO_");
                if (icase ? !strcasecmp(name, cand[k]) : !strcmp(name, cand[k]))
                    known = true;
                int dd = edit_distance(name, cand[k]);
                if (dd < bd) {
                    bd = dd;
                    best = cand[k];
                }
            }
        }
        for (size_t i = 0; i < sizeof other_known / sizeof other_known[0]; i++)
            known = known || !strcmp(name, other_known[i]);
        if (known)
            continue;
        /* PERSEUS_* and ZEUS_PFO_* are settings families: anything unknown is
         * reported; ERGON_* and others only when close to a setting. */
        bool prefix_family = icase_prefix(name, "PERSEUS") || icase_prefix(name, "ZEUS_PFO");
        if (prefix_family || (bd <= 2 && (family || strlen(name) > 6))) {
            char msg[400];
            if (best && bd <= 3)
                snprintf(msg, sizeof msg,
                         "environment variable %s is not read by ergon serve (did you mean %s?)",
                         name, best);
            else
                snprintf(msg, sizeof msg,
                         "environment variable %s is not read by ergon serve (settings: ergon "
                         "serve --help)",
                         name);
            fprintf(stderr, "{\"level\": \"warning\", \"event\": \"config\", \"msg\": \"%s\"}\n",
                    msg);
        }
    }
}

/* pydantic v1's bool_validator: lower-cased 1/0, on/off, t/f, true/false,
 * y/n, yes/no. */
static int parse_bool_py(const char *v)
{
    static const char *const yes[] = {"1", "on", "t", "true", "y", "yes"};
    static const char *const no[] = {"0", "off", "f", "false", "n", "no"};
    for (size_t i = 0; i < 6; i++) {
        if (!strcasecmp(v, yes[i]))
            return 1;
        if (!strcasecmp(v, no[i]))
            return 0;
    }
    return -1;
}

/* pydantic v1's int_validator is Python's int(): surrounding whitespace, a
 * sign, and '_' between digits. */
static bool parse_int_py(const char *v, long *out)
{
    while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r' || *v == '\f' || *v == '\v')
        v++;
    bool neg = false;
    if (*v == '+' || *v == '-')
        neg = *v++ == '-';
    long x = 0;
    int digits = 0;
    char prev = 0;
    for (; *v >= '0' && *v <= '9'
               ? true
               : (*v == '_' && prev >= '0' && prev <= '9' && v[1] >= '0' && v[1] <= '9');
         v++) {
        prev = *v;
        if (*v == '_')
            continue;
        if (x > (1L << 50))
            return false;
        x = x * 10 + (*v - '0');
        digits++;
    }
    while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r' || *v == '\f' || *v == '\v')
        v++;
    if (!digits || *v)
        return false;
    *out = neg ? -x : x;
    return true;
}

/* The token of --token-file: its first line without surrounding white space. The file must
 * not be readable by other users (it is a password). NULL after a message. */
static char *read_token_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "ergon serve: --token-file %s: %s\n", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & 077)) {
        fprintf(stderr,
                "ergon serve: --token-file %s is readable by other users (mode %04o): chmod 600 "
                "%s\n",
                path, (unsigned)(sb.st_mode & 07777), path);
        fclose(f);
        return NULL;
    }
    char buf[4200];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = 0;
    char *b = buf;
    while (*b == ' ' || *b == '\t')
        b++;
    size_t l = strlen(b);
    while (l && (b[l - 1] == ' ' || b[l - 1] == '\t' || b[l - 1] == '\r'))
        b[--l] = 0;
    if (!l) {
        fprintf(stderr, "ergon serve: --token-file %s is empty\n", path);
        return NULL;
    }
    char *t = strdup(b);
    memset(buf, 0, sizeof buf);
    return t;
}

static void log_line(void *user, erg_log_level level, const char *line)
{
    (void)user;
    (void)level;
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

/* A repeatable option (--plans-dir, --allow-net) and its environment list: the first one on
 * the command line replaces the environment's. */
typedef struct serve_list {
    const char *item[MAX_ALLOW_NETS];
    size_t n, max;
    const char *seps; /* between the environment list's entries */
    bool from_env;
    char *env_copy; /* owned */
} serve_list;

/* What `ergon serve` was given: the server's defaults (erg_server_opts_init), then the
 * environment's values, then the command line's. */
typedef struct serve_args {
    erg_server_opts *o;
    long port, max_body, max_conn, max_jobs, per_ip;
    bool no_dump;
    const char *token_file;
    serve_list plans, nets;
    char *token; /* owned */
} serve_args;

static void serve_args_free(serve_args *a)
{
    free(a->plans.env_copy);
    free(a->nets.env_copy);
    if (a->token) {
        memset(a->token, 0, strlen(a->token));
        free(a->token);
    }
    a->plans.env_copy = a->nets.env_copy = a->token = NULL;
}

static int list_opt(const char *cmd, const char *v, void *user)
{
    serve_list *l = user;
    if (l->from_env)
        l->n = 0;
    l->from_env = false;
    if (l->n == l->max)
        return cli_usage_error(cmd, "at most %zu --%s", l->max,
                               l->max == MAX_PLANS_DIRS ? "plans-dir" : "allow-net");
    l->item[l->n++] = v;
    return CLI_OK;
}

/* VAR=A:B (plans) or A,B (networks); empty: none. */
static int list_env(serve_list *l, const char *var, const char *v)
{
    if (!*v)
        return CLI_OK;
    free(l->env_copy);
    if (!(l->env_copy = strdup(v)))
        return cli_usage_error("serve", "out of memory");
    char *save = NULL;
    l->n = 0;
    for (char *t = strtok_r(l->env_copy, l->seps, &save); t; t = strtok_r(NULL, l->seps, &save)) {
        if (l->n == l->max)
            return cli_usage_error("serve", "%s names more than %zu entries", var, l->max);
        l->item[l->n++] = t;
    }
    l->from_env = true;
    return CLI_OK;
}

/* --log-level or its variable (what): Perseus and Zeus upper-case the level; ergon takes any
 * case, and warn and critical as Python's logging does. */
static int log_level_set(const char *what, const char *v, erg_log_level *out)
{
    static const char *const names[] = {"debug", "info", "warning", "error", "warn", "critical"};
    for (int i = 0; i < 6; i++)
        if (!strcasecmp(v, names[i])) {
            *out = (erg_log_level)(i < 4 ? i : i - 2);
            return CLI_OK;
        }
    return cli_usage_error("serve", "%s expects debug, info, warning or error, got '%s'", what, v);
}

static int log_level_opt(const char *cmd, const char *v, void *user)
{
    (void)cmd;
    return log_level_set("--log-level", v, user);
}

/* Row r's variable (var: env, else env2) parsed with the row's rules and bounds, messages
 * naming the variable: pydantic's booleans for the flags (PERSEUS_DUMP_DATA, ZEUS_PFO_DUMP_DATA
 * say whether to dump: the opposite of --no-dump), its int() for ZEUS_PFO_MAX_JOB_IDLE_TIME. */
static int env_apply(serve_args *a, const cli_opt *r, const char *var, const char *v)
{
    long l;
    switch (r->kind) {
    case CLI_OPT_FLAG: {
        int b = parse_bool_py(v);
        if (b < 0)
            return cli_usage_error("serve",
                                   "%s='%s' is not a boolean (1, 0, on, off, t, f, true, false, y, "
                                   "n, yes, no; any case)",
                                   var, v);
        *(bool *)r->dest = r->dest == &a->no_dump ? !b : b;
        return CLI_OK;
    }
    case CLI_OPT_STR:
        *(const char **)r->dest = v;
        return CLI_OK;
    case CLI_OPT_LONG:
        return cli_parse_int("serve", var, v, (long)r->min, (long)r->max, r->dest) ? CLI_OK
                                                                                   : CLI_USAGE;
    case CLI_OPT_DOUBLE:
        if (strcmp(var, "ZEUS_PFO_MAX_JOB_IDLE_TIME"))
            return cli_parse_double("serve", var, v, r->min, r->max, r->dest) ? CLI_OK : CLI_USAGE;
        if (!parse_int_py(v, &l) || l <= 0)
            return cli_usage_error("serve",
                                   "ZEUS_PFO_MAX_JOB_IDLE_TIME='%s' is not a positive integer of "
                                   "seconds",
                                   v);
        *(double *)r->dest = (double)l;
        return CLI_OK;
    case CLI_OPT_FN:
        return r->fn == list_opt ? list_env(r->user, var, v) : log_level_set(var, v, r->user);
    case CLI_OPT_TEXT:
        break;
    }
    return CLI_OK;
}

/* Every row's variable that is set (env beats env2). */
static int serve_env(serve_args *a, const cli_opt *opts)
{
    for (const cli_opt *r = opts; r->name; r++) {
        const char *var = r->env, *v = env_get(r->env);
        if (!v && r->env2)
            v = env_get(var = r->env2);
        int rc = v ? env_apply(a, r, var, v) : CLI_OK;
        if (rc)
            return rc;
    }
    return CLI_OK;
}

static const cli_help serve_help = {
    "usage: ergon serve [options]\n",
    "Run the control-plane server. Training ranks talk to it over HTTP/JSON: the\n"
    "Perseus (kronos) protocol (/info, /register_job, /register_rank, /schedule/{job},\n"
    "/result/{job}), Zeus's Pipeline Frequency Optimizer protocol (/register_job with\n"
    "Zeus's JobInfo, /register_rank/{job}, /schedule/{job}, /result/{job}; configured\n"
    "by ZEUS_PFO_* as Zeus documents it) and ergon's /v1 API (explicit job end,\n"
    "heartbeats, abort, straggler targets); /metrics serves Prometheus text. Every job,\n"
    "rank and acknowledged result is kept in the SQLite file, so a restarted server\n"
    "resumes every job. Endpoints: docs/http-api.md.\n\n"
    "options (environment variable in brackets; options win, then ergon's and Perseus's\n"
    "variables, then Zeus's):\n",
    "schedulers: AllMax, AllMaxFrequency, AllMaxPowerLimit, TwoFrequencies,\n"
    "  InstructionProfiler, PointSolution, ZeusGlobalPowerLimit, ZeusLocalPowerState,\n"
    "  Frontier, EnvPipe (the *3D names are accepted too). Arguments: docs/http-api.md.\n\n"
    "PERSEUS_* and ZEUS_PFO_* variables are read in any case, as Perseus and Zeus read\n"
    "them; an unknown variable of these families (or one close to a setting's name) is\n"
    "reported at start-up. Zeus start line: ZEUS_PFO_SCHEDULER_ARGS='{\"solution_path\":\n"
    "\"freqs_pipeline_00042.py\"}' ergon serve --port 7787 (docs/http-api.md). One\n"
    "configuration serves both protocols: --scheduler PointSolution --scheduler-args\n"
    "'{\"solution_path\": PLAN}' serves Zeus clients that plan too, ZEUS_PFO_* configure\n"
    "Perseus clients, and two different configurations stop start-up.\n\n"
    "Access control: a --host other than loopback needs --token-file (or\n"
    "ERGON_SERVE_TOKEN) and/or --allow-net, or --insecure; an --allow-net network wider\n"
    "than a private range (10/8, 172.16/12, 192.168/16, fc00::/7, ...; 0.0.0.0/0 is not)\n"
    "needs --insecure too. Zeus and Perseus clients send\n"
    "the token through their URL: server_url=\"https://ergon:TOKEN@host:7787\" (httpx\n"
    "sends it as Basic credentials; SSL_CERT_FILE=cert.pem for --tls-cert).\n\n"
    "Logs go to stderr as one JSON object per line. SIGINT/SIGTERM stop the server;\n"
    "state is already on disk. exit status: 0 after a clean stop, 1 when the server\n"
    "cannot start (bad scheduler arguments, database or port), 2 on a usage error.\n"};

/* serve's rows: every option names its variables (Perseus names where they exist, then the
 * Zeus PFO one for the same setting); PERSEUS_* and ZEUS_PFO_* are read in any case, as
 * pydantic reads them (docs/zeus-protocol.md §5). */
#define SV_S(n, a, d, e, e2, h)                                                                    \
    {                                                                                              \
        .name = n, .kind = CLI_OPT_STR, .arg = a, .dest = d, .env = e, .env2 = e2, .help = h       \
    }
#define SV_L(n, a, d, lo, hi, e, h)                                                                \
    {                                                                                              \
        .name = n, .kind = CLI_OPT_LONG, .arg = a, .dest = d, .min = lo, .max = hi, .env = e,      \
        .help = h                                                                                  \
    }
#define SV_D(n, a, d, lo, hi, e, e2, h)                                                            \
    {                                                                                              \
        .name = n, .kind = CLI_OPT_DOUBLE, .arg = a, .dest = d, .min = lo, .max = hi, .env = e,    \
        .env2 = e2, .help = h                                                                      \
    }
#define SV_B(n, d, e, e2, h)                                                                       \
    {                                                                                              \
        .name = n, .kind = CLI_OPT_FLAG, .dest = d, .env = e, .env2 = e2, .help = h                \
    }
#define SV_F(n, a, f, u, e, e2, h)                                                                 \
    {                                                                                              \
        .name = n, .kind = CLI_OPT_FN, .arg = a, .fn = f, .user = u, .env = e, .env2 = e2,         \
        .help = h                                                                                  \
    }

/* The environment, then argv, through one table (also the --help). CLI_HELP after --help. */
static int serve_parse(serve_args *a, int argc, char **argv)
{
    erg_server_opts *o = a->o;
    const cli_opt opts[] = {
        SV_S("host", "ADDR", &o->host, "ERGON_HOST", NULL,
             "numeric address to bind (default 127.0.0.1; 0.0.0.0 = all)"),
        SV_L("port", "N", &a->port, 0, 65535, "PORT",
             "TCP port (default 7787; 0 = any free port, printed at start)"),
        SV_S("db", "FILE", &o->db_path, "ERGON_DB", NULL,
             "SQLite state file, WAL mode (default ergon-server.sqlite)"),
        SV_S("dump", "DIR", &o->dump_dir, "PERSEUS_DUMP_DIR", "ZEUS_PFO_DUMP_DIR",
             "root of the per-job dumps (default dump)"),
        SV_B("no-dump", &a->no_dump, "PERSEUS_DUMP_DATA", "ZEUS_PFO_DUMP_DATA",
             "do not write dumps (env: false, f, no, n, off, 0; any case)"),
        SV_S("scheduler", "NAME", &o->scheduler, "PERSEUS_SCHEDULER", NULL,
             "default scheduler class (default AllMaxFrequency)"),
        SV_S("scheduler-args", "JSON", &o->scheduler_args, "PERSEUS_SCHEDULER_ARGS", NULL,
             "its arguments as a JSON object (default {})"),
        SV_S("mode", "MODE", &o->mode, "PERSEUS_MODE", NULL,
             "knob: frequency or \"power limit\" (required by knob-agnostic\nschedulers)"),
        SV_F("log-level", "LEVEL", log_level_opt, &o->log_level, "PERSEUS_LOG_LEVEL",
             "ZEUS_PFO_LOG_LEVEL", "debug, info, warning or error, any case (default info)"),
        SV_D("rank-timeout", "S", &o->rank_timeout_s, 0, 1e7, "ERGON_RANK_TIMEOUT", NULL,
             "abort a job when one of its ranks is silent this long\n(default 0 = never)"),
        SV_D("job-idle-timeout", "S", &o->job_idle_timeout_s, 0.01, 1e9, "ERGON_JOB_IDLE_TIMEOUT",
             "ZEUS_PFO_MAX_JOB_IDLE_TIME",
             "evict jobs idle this long (default 604800; the Zeus variable:\na whole number)"),
        SV_D("connection-timeout", "S", &o->connection_timeout_s, 1, 86400,
             "ERGON_CONNECTION_TIMEOUT", NULL,
             "close idle or slow connections after this long (default 30)"),
        SV_L("max-body", "BYTES", &a->max_body, 1024, 1L << 32, "ERGON_MAX_BODY",
             "largest request body (default 16777216)"),
        SV_L("max-connections", "N", &a->max_conn, 1, 1000000, "ERGON_MAX_CONNECTIONS",
             "concurrent connections (default 4096; at most `ulimit -n`\nless 128, raised to "
             "the hard limit at start)"),
        SV_B("durable", &o->durable_sync, "ERGON_DURABLE", NULL,
             "SQLite synchronous=FULL: survive power loss, not only crashes"),
        SV_L("max-jobs", "N", &a->max_jobs, 1, 1000000, "ERGON_MAX_JOBS",
             "jobs running at once (finished ones do not count); more\nregistrations get 503 "
             "(default 1000)"),
        SV_S("zeus-scheduler", "NAME", &o->zeus_scheduler, "ZEUS_PFO_SCHEDULER", NULL,
             "scheduler of Zeus PFO jobs: PointSolution (default),\nPointSolution3D, "
             "InstructionProfiler(3D)"),
        SV_S("zeus-scheduler-args", "JSON", &o->zeus_scheduler_args, "ZEUS_PFO_SCHEDULER_ARGS",
             NULL, "its arguments, e.g. {\"solution_path\": \"freqs_pipeline_00042.py\"}"),
        SV_F("plans-dir", "DIR", list_opt, &a->plans, "ERGON_PLANS_DIR", NULL,
             "directory whose plans clients may name in per-job\nscheduler_args (repeatable; "
             "env: ':'-separated; default none:\nonly start-up arguments name files)"),
        SV_L("max-connections-per-ip", "N", &a->per_ip, 1, 1000000, "ERGON_MAX_CONNECTIONS_PER_IP",
             "connections from one address (default half of\n--max-connections); a rank waiting "
             "at a barrier holds one, so a\njob of N ranks needs N + 16 of both"),
        SV_S("token-file", "FILE", &a->token_file, "ERGON_SERVE_TOKEN_FILE", NULL,
             "access token (16+ printable characters, mode 600): every route\nbut /healthz "
             "needs 'Authorization: Bearer TOKEN' or the URL\nhttp://ergon:TOKEN@host:port (the "
             "token itself may come in\nERGON_SERVE_TOKEN)"),
        SV_F("allow-net", "CIDR", list_opt, &a->nets, "ERGON_ALLOW_NET", NULL,
             "client network allowed without the token on the Perseus and\nZeus routes (every "
             "route without a token); repeatable; env:\ncomma-separated"),
        SV_S("tls-cert", "FILE", &o->tls_cert_file, "ERGON_TLS_CERT", NULL,
             "serve https with this PEM certificate (chain) ..."),
        SV_S("tls-key", "FILE", &o->tls_key_file, "ERGON_TLS_KEY", NULL,
             "... and this PEM private key"),
        SV_B("insecure", &o->insecure, "ERGON_INSECURE", NULL,
             "allow a non-loopback --host without a token or --allow-net, or\nwith an "
             "--allow-net network that is not a private range (a\nnetwork you trust)"),
        CLI_OPTS_END,
    };
    /* --help answers whatever the environment holds (a bad variable is an error of a run) */
    int rc = cli_opts_wants_help(argc, argv) ? CLI_OK : serve_env(a, opts);
    if (rc == CLI_OK)
        rc = cli_opts_parse_all("serve", argc, argv, opts, &serve_help);
    if (rc == CLI_OK)
        report_lookalikes(opts);
    return rc;
}

/* The server's options from what was given: the numbers, the lists, the token (the file beats
 * ERGON_SERVE_TOKEN; neither ever printed). */
static int serve_options(serve_args *a, erg_server_opts *o)
{
    o->port = (int)a->port;
    o->max_body_bytes = (size_t)a->max_body;
    o->max_connections = (unsigned)a->max_conn;
    o->max_jobs = (int)a->max_jobs;
    o->max_connections_per_ip = (unsigned)a->per_ip;
    o->dump_data = !a->no_dump;
    o->plans_dirs = a->plans.item;
    o->n_plans_dirs = a->plans.n;
    o->allow_nets = a->nets.item;
    o->n_allow_nets = a->nets.n;
    if (a->token_file) {
        if (!(a->token = read_token_file(a->token_file)))
            return CLI_USER_ERROR;
    } else if (getenv("ERGON_SERVE_TOKEN") && *getenv("ERGON_SERVE_TOKEN")) {
        if (!(a->token = strdup(getenv("ERGON_SERVE_TOKEN"))))
            return cli_usage_error("serve", "out of memory");
    }
    o->auth_token = a->token;
    o->log = log_line;
    return CLI_OK;
}

int cmd_serve(int argc, char **argv)
{
    erg_server_opts o;
    erg_server_opts_init(&o);
    serve_args a = {.o = &o,
                    .port = o.port,
                    .max_body = (long)o.max_body_bytes,
                    .max_conn = (long)o.max_connections,
                    .max_jobs = o.max_jobs,
                    .per_ip = (long)o.max_connections_per_ip,
                    .plans = {.max = MAX_PLANS_DIRS, .seps = ":"},
                    .nets = {.max = MAX_ALLOW_NETS, .seps = ", "}};
    int rc = serve_parse(&a, argc, argv);
    if (rc) {
        serve_args_free(&a);
        return rc == CLI_HELP ? CLI_OK : rc;
    }
    if ((rc = serve_options(&a, &o))) {
        serve_args_free(&a);
        return rc;
    }
    /* Block the stop signals in every thread; the main thread waits for them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Every connection is a descriptor: take the hard limit, and say so (the server lowers
     * --max-connections to what the limit allows, saying so too). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rlim_t soft = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
            char hard[32];
            if (rl.rlim_max == RLIM_INFINITY)
                snprintf(hard, sizeof hard, "unlimited");
            else
                snprintf(hard, sizeof hard, "%lu", (unsigned long)rl.rlim_max);
            fprintf(stderr,
                    "{\"level\": \"info\", \"event\": \"config\", \"msg\": \"descriptor limit "
                    "(ulimit -n) raised from %lu to the hard limit, %s: every connection is a "
                    "descriptor\"}\n",
                    (unsigned long)soft, hard);
        }
    }

    erg_server *srv = NULL;
    erg_error err;
    erg_status st = erg_server_new(&o, &srv, &err);
    if (!st)
        st = erg_server_start(srv, &err);
    serve_args_free(&a);
    if (st) {
        erg_server_free(srv);
        return cli_report("serve", &err);
    }
    bool v6 = strchr(o.host, ':') != NULL;
    printf("ergon serve: listening on %s://%s%s%s:%d\n", o.tls_cert_file ? "https" : "http",
           v6 ? "[" : "", o.host, v6 ? "]" : "", erg_server_port(srv));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    char why[32];
    snprintf(why, sizeof why, "signal %d", sig);
    erg_server_log(srv, ERG_LOG_INFO, "shutdown", why);
    erg_server_free(srv);
    return CLI_OK;
}
