/* cmd_serve.c: `ergon serve`, the control-plane server (Perseus protocol plus /v1 API). */
#include "cli.h"
#include "ergon/server.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <strings.h>
#include <time.h>

/* Every option: flag, environment variable (Perseus names where they exist),
 * value name, help. Options beat environment variables. */
static const struct {
    const char *flag, *env, *value, *help;
} serve_opts[] = {
    {"--host", "ERGON_HOST", "ADDR", "numeric address to bind (default 127.0.0.1; 0.0.0.0 = all)"},
    {"--port", "PORT", "N", "TCP port (default 7787; 0 = any free port, printed at start)"},
    {"--db", "ERGON_DB", "FILE", "SQLite state file, WAL mode (default ergon-server.sqlite)"},
    {"--dump", "PERSEUS_DUMP_DIR", "DIR", "root of the per-job dumps (default dump)"},
    {"--no-dump", "PERSEUS_DUMP_DATA", "", "do not write dumps (env: PERSEUS_DUMP_DATA=false)"},
    {"--scheduler", "PERSEUS_SCHEDULER", "NAME", "default scheduler class (default AllMaxFrequency)"},
    {"--scheduler-args", "PERSEUS_SCHEDULER_ARGS", "JSON", "its arguments as a JSON object (default {})"},
    {"--mode", "PERSEUS_MODE", "MODE", "knob: frequency or \"power limit\" (required by knob-agnostic schedulers)"},
    {"--log-level", "PERSEUS_LOG_LEVEL", "LEVEL", "debug, info, warning or error (default info)"},
    {"--rank-timeout", "ERGON_RANK_TIMEOUT", "S", "abort a job when one of its ranks is silent this long (default 0 = never)"},
    {"--job-idle-timeout", "ERGON_JOB_IDLE_TIMEOUT", "S", "evict jobs idle this long (default 604800)"},
    {"--connection-timeout", "ERGON_CONNECTION_TIMEOUT", "S", "close idle or slow connections after this long (default 30)"},
    {"--max-body", "ERGON_MAX_BODY", "BYTES", "largest request body (default 16777216)"},
    {"--max-connections", "ERGON_MAX_CONNECTIONS", "N", "concurrent connections (default 4096; at most `ulimit -n` less 128, raised to the hard limit at start)"},
    {"--durable", "ERGON_DURABLE", "", "SQLite synchronous=FULL: survive power loss, not only crashes"},
    {"--max-jobs", "ERGON_MAX_JOBS", "N", "jobs running at once (finished ones do not count); more registrations get 503 (default 1000)"},
    {"--plans-dir", "ERGON_PLANS_DIR", "DIR", "directory whose plans clients may name in per-job scheduler_args (repeatable; env: ':'-separated; default none: only start-up arguments name files)"},
    {"--max-connections-per-ip", "ERGON_MAX_CONNECTIONS_PER_IP", "N", "connections from one address (default half of --max-connections)"},
};
#define PLANS_DIR_OPT 16
#define PER_IP_OPT 17
#define MAX_PLANS_DIRS 64

static void serve_help(void)
{
    printf("usage: ergon serve [options]\n\n"
           "Run the control-plane server. Training ranks talk to it over HTTP/JSON: the\n"
           "Perseus (kronos) protocol (/info, /register_job, /register_rank, /schedule/{job},\n"
           "/result/{job}) and ergon's /v1 API (explicit job end, heartbeats, abort, straggler\n"
           "targets); /metrics serves Prometheus text. Every job, rank and acknowledged result\n"
           "is kept in the SQLite file, so a restarted server resumes every job. Endpoints:\n"
           "docs/http-api.md.\n\noptions (environment variable in brackets):\n");
    for (size_t i = 0; i < sizeof serve_opts / sizeof serve_opts[0]; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", serve_opts[i].flag, *serve_opts[i].value ? " " : "",
                 serve_opts[i].value);
        printf("  %-26s %s [%s]\n", left, serve_opts[i].help, serve_opts[i].env);
    }
    printf("  %-26s this text\n\n", "-h, --help");
    printf("schedulers: AllMax, AllMaxFrequency, AllMaxPowerLimit, TwoFrequencies,\n"
           "  InstructionProfiler, PointSolution, ZeusGlobalPowerLimit, ZeusLocalPowerState,\n"
           "  Frontier (the *3D names are accepted too). Arguments: docs/http-api.md.\n\n"
           "Logs go to stderr as one JSON object per line. SIGINT/SIGTERM stop the server;\n"
           "state is already on disk. exit status: 0 after a clean stop, 1 when the server\n"
           "cannot start (bad scheduler arguments, database or port), 2 on a usage error.\n");
}

static void log_line(void *user, erg_log_level level, const char *line)
{
    (void)user;
    (void)level;
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

static const char *opt_env(const char *flag)
{
    for (size_t i = 0; i < sizeof serve_opts / sizeof serve_opts[0]; i++)
        if (!strcmp(serve_opts[i].flag, flag))
            return getenv(serve_opts[i].env);
    return NULL;
}

int cmd_serve(int argc, char **argv)
{
    erg_server_opts o;
    erg_server_opts_init(&o);
    const char *val[sizeof serve_opts / sizeof serve_opts[0]];
    for (size_t i = 0; i < sizeof serve_opts / sizeof serve_opts[0]; i++)
        val[i] = opt_env(serve_opts[i].flag);
    bool no_dump = false, durable = false;
    const char *plans[MAX_PLANS_DIRS];
    size_t n_plans = 0;
    char *plans_env = NULL;
    const char *e = getenv("PERSEUS_DUMP_DATA");
    if (e && (!strcasecmp(e, "false") || !strcmp(e, "0")))
        no_dump = true;
    e = getenv("ERGON_DURABLE");
    if (e && (!strcasecmp(e, "true") || !strcmp(e, "1")))
        durable = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            serve_help();
            return CLI_OK;
        }
        size_t k = 0, n = sizeof serve_opts / sizeof serve_opts[0];
        const char *a = argv[i], *eq = strchr(a, '=');
        size_t alen = eq ? (size_t)(eq - a) : strlen(a);
        for (; k < n; k++)
            if (strlen(serve_opts[k].flag) == alen && !strncmp(serve_opts[k].flag, a, alen))
                break;
        if (k == n)
            return cli_usage_error("serve", "unknown option '%s'", a);
        if (!*serve_opts[k].value) {
            if (eq)
                return cli_usage_error("serve", "%s takes no value", serve_opts[k].flag);
            if (!strcmp(serve_opts[k].flag, "--no-dump"))
                no_dump = true;
            else
                durable = true;
            continue;
        }
        const char *v;
        if (eq)
            v = eq + 1;
        else if (i + 1 < argc)
            v = argv[++i];
        else
            return cli_usage_error("serve", "%s needs a value (%s)", serve_opts[k].flag,
                                   serve_opts[k].value);
        if (k == PLANS_DIR_OPT) {
            if (n_plans == MAX_PLANS_DIRS)
                return cli_usage_error("serve", "at most %d --plans-dir", MAX_PLANS_DIRS);
            plans[n_plans++] = v;
        }
        val[k] = v;
    }
    long lv;
    double dv;
    if (val[0])
        o.host = val[0];
    if (val[1]) {
        if (!cli_parse_int("serve", "--port", val[1], 0, 65535, &lv))
            return CLI_USAGE;
        o.port = (int)lv;
    }
    if (val[2])
        o.db_path = val[2];
    if (val[3])
        o.dump_dir = val[3];
    o.dump_data = !no_dump;
    if (val[5])
        o.scheduler = val[5];
    if (val[6])
        o.scheduler_args = val[6];
    if (val[7])
        o.mode = val[7];
    if (val[8]) {
        static const char *const names[] = {"debug", "info", "warning", "error"};
        int found = -1;
        for (int i = 0; i < 4; i++)
            if (!strcasecmp(val[8], names[i]))
                found = i;
        if (found < 0)
            return cli_usage_error("serve", "--log-level expects debug, info, warning or error, "
                                            "got '%s'",
                                   val[8]);
        o.log_level = (erg_log_level)found;
    }
    if (val[9]) {
        if (!cli_parse_double("serve", "--rank-timeout", val[9], 0, 1e7, &dv))
            return CLI_USAGE;
        o.rank_timeout_s = dv;
    }
    if (val[10]) {
        if (!cli_parse_double("serve", "--job-idle-timeout", val[10], 0.01, 1e9, &dv))
            return CLI_USAGE;
        o.job_idle_timeout_s = dv;
    }
    if (val[11]) {
        if (!cli_parse_double("serve", "--connection-timeout", val[11], 1, 86400, &dv))
            return CLI_USAGE;
        o.connection_timeout_s = dv;
    }
    if (val[12]) {
        if (!cli_parse_int("serve", "--max-body", val[12], 1024, 1L << 32, &lv))
            return CLI_USAGE;
        o.max_body_bytes = (size_t)lv;
    }
    if (val[13]) {
        if (!cli_parse_int("serve", "--max-connections", val[13], 1, 1000000, &lv))
            return CLI_USAGE;
        o.max_connections = (unsigned)lv;
    }
    if (val[15]) {
        if (!cli_parse_int("serve", "--max-jobs", val[15], 1, 1000000, &lv))
            return CLI_USAGE;
        o.max_jobs = (int)lv;
    }
    if (val[PER_IP_OPT]) {
        if (!cli_parse_int("serve", "--max-connections-per-ip", val[PER_IP_OPT], 1, 1000000, &lv))
            return CLI_USAGE;
        o.max_connections_per_ip = (unsigned)lv;
    }
    /* No --plans-dir on the command line: ERGON_PLANS_DIR=DIR[:DIR...]. */
    if (n_plans == 0 && val[PLANS_DIR_OPT] && *val[PLANS_DIR_OPT]) {
        plans_env = strdup(val[PLANS_DIR_OPT]);
        if (!plans_env)
            return cli_usage_error("serve", "out of memory");
        char *save = NULL;
        for (char *t = strtok_r(plans_env, ":", &save); t && n_plans < MAX_PLANS_DIRS;
             t = strtok_r(NULL, ":", &save))
            plans[n_plans++] = t;
    }
    o.plans_dirs = plans;
    o.n_plans_dirs = n_plans;
    o.durable_sync = durable;
    o.log = log_line;

    /* Block the stop signals in every thread; the main thread waits for them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Every connection is a descriptor: take the hard limit (the server lowers
     * --max-connections to what the limit allows, saying so). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    erg_server *srv = NULL;
    erg_error err;
    if (erg_server_new(&o, &srv, &err) || erg_server_start(srv, &err)) {
        erg_server_free(srv);
        free(plans_env);
        return cli_report("serve", &err);
    }
    free(plans_env);
    bool v6 = strchr(o.host, ':') != NULL;
    printf("ergon serve: listening on http://%s%s%s:%d\n", v6 ? "[" : "", o.host, v6 ? "]" : "",
           erg_server_port(srv));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "{\"event\":\"shutdown\",\"msg\":\"signal %d\"}\n", sig);
    erg_server_free(srv);
    return CLI_OK;
}
