/* cmd_serve.c: `ergon serve`, the control-plane server (Perseus and Zeus PFO protocols plus /v1
 * API). */
#include "cli.h"
#include "ergon/server.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <strings.h>
#include <time.h>

/* Every option: flag, environment variable (Perseus names where they exist),
 * the Zeus PFO variable for the same setting (or NULL), value name, help.
 * Options beat environment variables; Perseus's and ergon's variables beat
 * Zeus's. PERSEUS_* and ZEUS_PFO_* names are case-insensitive, as pydantic
 * reads them (docs/zeus-protocol.md §5). */
static const struct {
    const char *flag, *env, *zenv, *value, *help;
} serve_opts[] = {
    {"--host", "ERGON_HOST", NULL, "ADDR",
     "numeric address to bind (default 127.0.0.1; 0.0.0.0 = all)"},
    {"--port", "PORT", NULL, "N", "TCP port (default 7787; 0 = any free port, printed at start)"},
    {"--db", "ERGON_DB", NULL, "FILE", "SQLite state file, WAL mode (default ergon-server.sqlite)"},
    {"--dump", "PERSEUS_DUMP_DIR", "ZEUS_PFO_DUMP_DIR", "DIR",
     "root of the per-job dumps (default dump)"},
    {"--no-dump", "PERSEUS_DUMP_DATA", "ZEUS_PFO_DUMP_DATA", "",
     "do not write dumps (env: false, f, no, n, off, 0; any case)"},
    {"--scheduler", "PERSEUS_SCHEDULER", NULL, "NAME",
     "default scheduler class (default AllMaxFrequency)"},
    {"--scheduler-args", "PERSEUS_SCHEDULER_ARGS", NULL, "JSON",
     "its arguments as a JSON object (default {})"},
    {"--mode", "PERSEUS_MODE", NULL, "MODE",
     "knob: frequency or \"power limit\" (required by knob-agnostic schedulers)"},
    {"--log-level", "PERSEUS_LOG_LEVEL", "ZEUS_PFO_LOG_LEVEL", "LEVEL",
     "debug, info, warning or error, any case (default info)"},
    {"--rank-timeout", "ERGON_RANK_TIMEOUT", NULL, "S",
     "abort a job when one of its ranks is silent this long (default 0 = never)"},
    {"--job-idle-timeout", "ERGON_JOB_IDLE_TIMEOUT", "ZEUS_PFO_MAX_JOB_IDLE_TIME", "S",
     "evict jobs idle this long (default 604800)"},
    {"--connection-timeout", "ERGON_CONNECTION_TIMEOUT", NULL, "S",
     "close idle or slow connections after this long (default 30)"},
    {"--max-body", "ERGON_MAX_BODY", NULL, "BYTES", "largest request body (default 16777216)"},
    {"--max-connections", "ERGON_MAX_CONNECTIONS", NULL, "N",
     "concurrent connections (default 4096; at most `ulimit -n` less 128, raised to the hard limit "
     "at start)"},
    {"--durable", "ERGON_DURABLE", NULL, "",
     "SQLite synchronous=FULL: survive power loss, not only crashes"},
    {"--max-jobs", "ERGON_MAX_JOBS", NULL, "N",
     "jobs running at once (finished ones do not count); more registrations get 503 (default "
     "1000)"},
    {"--zeus-scheduler", "ZEUS_PFO_SCHEDULER", NULL, "NAME",
     "scheduler of Zeus PFO jobs: PointSolution (default), PointSolution3D, "
     "InstructionProfiler(3D)"},
    {"--zeus-scheduler-args", "ZEUS_PFO_SCHEDULER_ARGS", NULL, "JSON",
     "its arguments, e.g. {\"solution_path\": \"freqs_pipeline_00042.py\"}"},
    {"--plans-dir", "ERGON_PLANS_DIR", NULL, "DIR",
     "directory whose plans clients may name in per-job scheduler_args (repeatable; env: "
     "':'-separated; default none: only start-up arguments name files)"},
    {"--max-connections-per-ip", "ERGON_MAX_CONNECTIONS_PER_IP", NULL, "N",
     "connections from one address (default half of --max-connections); a rank waiting at a "
     "barrier holds one, so a job of N ranks needs N + 16 of both"},
    {"--token-file", "ERGON_SERVE_TOKEN_FILE", NULL, "FILE",
     "access token (16+ printable characters, mode 600): every route but /healthz needs "
     "'Authorization: Bearer TOKEN' or the URL http://ergon:TOKEN@host:port (the token itself may "
     "come in ERGON_SERVE_TOKEN)"},
    {"--allow-net", "ERGON_ALLOW_NET", NULL, "CIDR",
     "client network allowed without the token on the Perseus and Zeus routes (every route without "
     "a token); repeatable; env: comma-separated"},
    {"--tls-cert", "ERGON_TLS_CERT", NULL, "FILE",
     "serve https with this PEM certificate (chain) ..."},
    {"--tls-key", "ERGON_TLS_KEY", NULL, "FILE", "... and this PEM private key"},
    {"--insecure", "ERGON_INSECURE", NULL, "",
     "allow a non-loopback --host without a token or --allow-net, or with an --allow-net network "
     "that is not a private range (a network you trust)"},
};
enum {
    O_HOST,
    O_PORT,
    O_DB,
    O_DUMP,
    O_NODUMP,
    O_SCHED,
    O_SARGS,
    O_MODE,
    O_LOG,
    O_RANKTO,
    O_IDLE,
    O_CONNTO,
    O_MAXBODY,
    O_MAXCONN,
    O_DURABLE,
    O_MAXJOBS,
    O_ZSCHED,
    O_ZARGS,
    O_PLANS,
    O_PERIP,
    O_TOKENFILE,
    O_ALLOWNET,
    O_TLSCERT,
    O_TLSKEY,
    O_INSECURE,
    O_NUM
};
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
 * but are not read (a typo silently ignored costs a run). */
static void report_lookalikes(void)
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
        for (size_t i = 0; i < sizeof serve_opts / sizeof serve_opts[0]; i++) {
            const char *cand[2] = {serve_opts[i].env, serve_opts[i].zenv};
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

static void serve_help(void)
{
    printf("usage: ergon serve [options]\n\n"
           "Run the control-plane server. Training ranks talk to it over HTTP/JSON: the\n"
           "Perseus (kronos) protocol (/info, /register_job, /register_rank, /schedule/{job},\n"
           "/result/{job}), Zeus's Pipeline Frequency Optimizer protocol (/register_job with\n"
           "Zeus's JobInfo, /register_rank/{job}, /schedule/{job}, /result/{job}; configured\n"
           "by ZEUS_PFO_* as Zeus documents it) and ergon's /v1 API (explicit job end,\n"
           "heartbeats, abort, straggler targets); /metrics serves Prometheus text. Every job, "
           "rank and acknowledged result\n"
           "is kept in the SQLite file, so a restarted server resumes every job. Endpoints:\n"
           "docs/http-api.md.\n\noptions (environment variable in brackets):\n");
    for (size_t i = 0; i < sizeof serve_opts / sizeof serve_opts[0]; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", serve_opts[i].flag, *serve_opts[i].value ? " " : "",
                 serve_opts[i].value);
        if (serve_opts[i].zenv)
            printf("  %-26s %s [%s, %s]\n", left, serve_opts[i].help, serve_opts[i].env,
                   serve_opts[i].zenv);
        else
            printf("  %-26s %s [%s]\n", left, serve_opts[i].help, serve_opts[i].env);
    }
    printf("  %-26s this text\n\n", "-h, --help");
    printf("schedulers: AllMax, AllMaxFrequency, AllMaxPowerLimit, TwoFrequencies,\n"
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
           "cannot start (bad scheduler arguments, database or port), 2 on a usage error.\n");
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

/* What `ergon serve` was given: the environment's values, then the command line's. */
typedef struct serve_args {
    const char *val[O_NUM];
    const char *src[O_NUM]; /* where each value came from, for messages */
    bool no_dump, durable, insecure;
    const char *nets[MAX_ALLOW_NETS];
    size_t n_nets;
    const char *plans[MAX_PLANS_DIRS];
    size_t n_plans;
    char *nets_env, *token, *plans_env; /* owned */
} serve_args;

static void serve_args_free(serve_args *a)
{
    free(a->plans_env);
    free(a->nets_env);
    if (a->token) {
        memset(a->token, 0, strlen(a->token));
        free(a->token);
    }
    a->plans_env = a->nets_env = a->token = NULL;
}

/* The environment (ERGON_*, ZEUS_PFO_*), then argv. CLI_HELP after --help. */
static int serve_read(serve_args *a, int argc, char **argv)
{
    for (size_t i = 0; i < O_NUM; i++) {
        a->val[i] = env_get(serve_opts[i].env);
        a->src[i] = serve_opts[i].env;
        if (!a->val[i] && serve_opts[i].zenv) {
            a->val[i] = env_get(serve_opts[i].zenv);
            a->src[i] = serve_opts[i].zenv;
        }
    }
    if (a->val[O_NODUMP]) {
        int bv = parse_bool_py(a->val[O_NODUMP]);
        if (bv < 0)
            return cli_usage_error("serve",
                                   "%s='%s' is not a boolean (1, 0, on, off, t, f, true, false, y, "
                                   "n, yes, no; any case)",
                                   a->src[O_NODUMP], a->val[O_NODUMP]);
        a->no_dump = !bv;
    }
    if (a->val[O_DURABLE]) {
        int bv = parse_bool_py(a->val[O_DURABLE]);
        if (bv < 0)
            return cli_usage_error("serve", "ERGON_DURABLE='%s' is not a boolean",
                                   a->val[O_DURABLE]);
        a->durable = bv;
    }
    if (a->val[O_INSECURE]) {
        int bv = parse_bool_py(a->val[O_INSECURE]);
        if (bv < 0)
            return cli_usage_error("serve", "ERGON_INSECURE='%s' is not a boolean",
                                   a->val[O_INSECURE]);
        a->insecure = bv;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            serve_help();
            return CLI_HELP;
        }
        size_t k = 0, n = O_NUM;
        const char *arg = argv[i], *eq = strchr(arg, '=');
        size_t alen = eq ? (size_t)(eq - arg) : strlen(arg);
        for (; k < n; k++)
            if (strlen(serve_opts[k].flag) == alen && !strncmp(serve_opts[k].flag, arg, alen))
                break;
        if (k == n)
            return cli_usage_error("serve", "unknown option '%s'", arg);
        if (!*serve_opts[k].value) {
            if (eq)
                return cli_usage_error("serve", "%s takes no value", serve_opts[k].flag);
            if (k == O_NODUMP)
                a->no_dump = true;
            else if (k == O_INSECURE)
                a->insecure = true;
            else
                a->durable = true;
            continue;
        }
        if (eq)
            a->val[k] = eq + 1;
        else if (i + 1 < argc)
            a->val[k] = argv[++i];
        else
            return cli_usage_error("serve", "%s needs a value (%s)", serve_opts[k].flag,
                                   serve_opts[k].value);
        a->src[k] = serve_opts[k].flag;
        if (k == O_PLANS) {
            if (a->n_plans == MAX_PLANS_DIRS)
                return cli_usage_error("serve", "at most %d --a->plans-dir", MAX_PLANS_DIRS);
            a->plans[a->n_plans++] = a->val[k];
        }
        if (k == O_ALLOWNET) {
            if (a->n_nets == MAX_ALLOW_NETS)
                return cli_usage_error("serve", "at most %d --allow-net", MAX_ALLOW_NETS);
            a->nets[a->n_nets++] = a->val[k];
        }
    }
    return CLI_OK;
}

/* The server's options from what was given. */
static int serve_options(serve_args *a, erg_server_opts *o)
{
    long lv;
    double dv;
    if (a->val[O_HOST])
        o->host = a->val[O_HOST];
    if (a->val[O_PORT]) {
        if (!cli_parse_int("serve", "--port", a->val[O_PORT], 0, 65535, &lv))
            return CLI_USAGE;
        o->port = (int)lv;
    }
    if (a->val[O_DB])
        o->db_path = a->val[O_DB];
    if (a->val[O_DUMP])
        o->dump_dir = a->val[O_DUMP];
    o->dump_data = !a->no_dump;
    if (a->val[O_SCHED])
        o->scheduler = a->val[O_SCHED];
    if (a->val[O_SARGS])
        o->scheduler_args = a->val[O_SARGS];
    if (a->val[O_MODE])
        o->mode = a->val[O_MODE];
    if (a->val[O_LOG]) {
        /* Perseus and Zeus upper-case the level; ergon takes any case. */
        static const char *const names[] = {"debug", "info", "warning", "error"};
        int found = -1;
        for (int i = 0; i < 4; i++)
            if (!strcasecmp(a->val[O_LOG], names[i]))
                found = i;
        if (!strcasecmp(a->val[O_LOG], "warn"))
            found = 2;
        if (!strcasecmp(a->val[O_LOG], "critical"))
            found = 3;
        if (found < 0)
            return cli_usage_error("serve", "%s expects debug, info, warning or error, got '%s'",
                                   a->src[O_LOG], a->val[O_LOG]);
        o->log_level = (erg_log_level)found;
    }
    if (a->val[O_RANKTO]) {
        if (!cli_parse_double("serve", "--rank-timeout", a->val[O_RANKTO], 0, 1e7, &dv))
            return CLI_USAGE;
        o->rank_timeout_s = dv;
    }
    if (a->val[O_IDLE]) {
        if (a->src[O_IDLE] == serve_opts[O_IDLE].zenv) {
            /* ZEUS_PFO_MAX_JOB_IDLE_TIME: an int, as pydantic reads it */
            if (!parse_int_py(a->val[O_IDLE], &lv) || lv <= 0)
                return cli_usage_error("serve",
                                       "ZEUS_PFO_MAX_JOB_IDLE_TIME='%s' is not a positive "
                                       "integer of seconds",
                                       a->val[O_IDLE]);
            o->job_idle_timeout_s = (double)lv;
        } else {
            if (!cli_parse_double("serve", "--job-idle-timeout", a->val[O_IDLE], 0.01, 1e9, &dv))
                return CLI_USAGE;
            o->job_idle_timeout_s = dv;
        }
    }
    if (a->val[O_CONNTO]) {
        if (!cli_parse_double("serve", "--connection-timeout", a->val[O_CONNTO], 1, 86400, &dv))
            return CLI_USAGE;
        o->connection_timeout_s = dv;
    }
    if (a->val[O_MAXBODY]) {
        if (!cli_parse_int("serve", "--max-body", a->val[O_MAXBODY], 1024, 1L << 32, &lv))
            return CLI_USAGE;
        o->max_body_bytes = (size_t)lv;
    }
    if (a->val[O_MAXCONN]) {
        if (!cli_parse_int("serve", "--max-connections", a->val[O_MAXCONN], 1, 1000000, &lv))
            return CLI_USAGE;
        o->max_connections = (unsigned)lv;
    }
    if (a->val[O_MAXJOBS]) {
        if (!cli_parse_int("serve", "--max-jobs", a->val[O_MAXJOBS], 1, 1000000, &lv))
            return CLI_USAGE;
        o->max_jobs = (int)lv;
    }
    o->zeus_scheduler = a->val[O_ZSCHED];
    o->zeus_scheduler_args = a->val[O_ZARGS];
    if (a->val[O_PERIP]) {
        if (!cli_parse_int("serve", "--max-connections-per-ip", a->val[O_PERIP], 1, 1000000, &lv))
            return CLI_USAGE;
        o->max_connections_per_ip = (unsigned)lv;
    }
    /* No --a->plans-dir on the command line: ERGON_PLANS_DIR=DIR[:DIR...]. */
    if (a->n_plans == 0 && a->val[O_PLANS] && *a->val[O_PLANS]) {
        a->plans_env = strdup(a->val[O_PLANS]);
        if (!a->plans_env)
            return cli_usage_error("serve", "out of memory");
        char *save = NULL;
        for (char *t = strtok_r(a->plans_env, ":", &save); t && a->n_plans < MAX_PLANS_DIRS;
             t = strtok_r(NULL, ":", &save))
            a->plans[a->n_plans++] = t;
    }
    o->plans_dirs = a->plans;
    o->n_plans_dirs = a->n_plans;
    /* Access control: the a->token (file beats variable), networks, TLS. */
    if (a->val[O_TOKENFILE]) {
        if (!(a->token = read_token_file(a->val[O_TOKENFILE]))) {
            free(a->plans_env);
            return CLI_USER_ERROR;
        }
    } else if (getenv("ERGON_SERVE_TOKEN") && *getenv("ERGON_SERVE_TOKEN")) {
        a->token = strdup(getenv("ERGON_SERVE_TOKEN"));
    }
    o->auth_token = a->token;
    if (a->n_nets == 0 && a->val[O_ALLOWNET] && *a->val[O_ALLOWNET]) {
        a->nets_env = strdup(a->val[O_ALLOWNET]);
        char *save = NULL;
        for (char *t = a->nets_env ? strtok_r(a->nets_env, ", ", &save) : NULL;
             t && a->n_nets < MAX_ALLOW_NETS; t = strtok_r(NULL, ", ", &save))
            a->nets[a->n_nets++] = t;
    }
    o->allow_nets = a->nets;
    o->n_allow_nets = a->n_nets;
    o->tls_cert_file = a->val[O_TLSCERT];
    o->tls_key_file = a->val[O_TLSKEY];
    o->insecure = a->insecure;
    o->durable_sync = a->durable;
    o->log = log_line;

    return CLI_OK;
}

int cmd_serve(int argc, char **argv)
{
    erg_server_opts o;
    erg_server_opts_init(&o);
    serve_args a = {0};
    int rc = serve_read(&a, argc, argv);
    if (rc)
        return rc == CLI_HELP ? CLI_OK : rc;
    report_lookalikes();
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
