/* server_test_util.c: the helpers of the test_server*.c unit tests (server_test_util.h). */
#include "server_test_util.h"

/* ---------------------------------------------------------------------
 * A simulated training rank on the simulated GPU's DVFS model (gpu.h:
 * erg_sim_eval, an A100 running GPT-3 XL split into S stages): compute
 * instruction (stage, kind) at clock f takes t and draws P; its energy is
 * P t. Loads, P2P and the optimizer step take fixed times at 80 W. Time is
 * simulated: nothing sleeps.
 * --------------------------------------------------------------------- */
void sim_eval(int S, int stage, int kind, int f, double *t, double *p)
{
    const erg_sim_gpu_info *g = NULL;
    erg_sim_work w;
    erg_error err;
    ASSERT_OK(erg_sim_gpu_find("a100", &g, &err));
    ASSERT_OK(
        erg_sim_model_work("gpt3-xl", S, 0, stage, kind ? ERG_BACKWARD : ERG_FORWARD, &w, &err));
    ASSERT_OK(erg_sim_eval(g, &w, f, t, p, &err));
}
double sim_time(int S, int stage, int kind, int f)
{
    double t, p;
    sim_eval(S, stage, kind, f, &t, &p);
    return t;
}
double sim_power(int S, int stage, int kind, int f)
{
    double t, p;
    sim_eval(S, stage, kind, f, &t, &p);
    return p;
}

static char tmpdir_[256];
const char *mktmp(void)
{
    snprintf(tmpdir_, sizeof tmpdir_, "/tmp/ergon-test-server-XXXXXX");
    ASSERT(mkdtemp(tmpdir_));
    return tmpdir_;
}

/* Pipe schedule of a stage: Merak-like: load+forward+p2p, backward+p2p, step. */
int pipe_schedule(int S, int M, int s, const char **out)
{
    erg_instr order[256];
    erg_error err;
    erg_schedule sch = {0};
    ASSERT_OK(erg_schedule_stage_order(&sch, S, M, s, order, &err));
    int n = 0;
    for (int i = 0; i < 2 * M; i++) {
        if (order[i].kind == ERG_FORWARD) {
            if (s == 0)
                out[n++] = "load";
            out[n++] = "forward";
        } else {
            out[n++] = "backward";
        }
        out[n++] = "p2p";
    }
    out[n++] = "step";
    return n;
}

const int STATES[] = {1410, 1320, 1230, 1140, 1050, 960, 870};
#define NSTATES 7

pid_t start_server(const srv_cfg *c, int *port)
{
    int p[2];
    ASSERT(pipe(p) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        erg_server_opts o;
        erg_server_opts_init(&o);
        o.port = c->port;
        o.db_path = c->db;
        o.dump_dir = c->dump;
        /* NULL: the default (the Zeus configuration's counterpart, else AllMaxFrequency) */
        o.scheduler = c->scheduler;
        o.scheduler_args = c->args;
        o.mode = c->mode;
        if (c->rank_timeout_s > 0)
            o.rank_timeout_s = c->rank_timeout_s;
        if (c->idle_s > 0)
            o.job_idle_timeout_s = c->idle_s;
        if (c->conn_timeout_s > 0)
            o.connection_timeout_s = c->conn_timeout_s;
        const char *dirs[1] = {c->plans_dir};
        if (c->plans_dir) {
            o.plans_dirs = dirs;
            o.n_plans_dirs = 1;
        }
        o.zeus_scheduler = c->zeus_sched;
        o.zeus_scheduler_args = c->zeus_args;
        erg_server *srv = NULL;
        erg_error err;
        int port_out = -1;
        if (erg_server_new(&o, &srv, &err) || erg_server_start(srv, &err)) {
            fprintf(stderr, "# server: %s\n", err.msg);
        } else {
            port_out = erg_server_port(srv);
        }
        if (write(p[1], &port_out, sizeof port_out) != sizeof port_out)
            _exit(1);
        if (port_out < 0)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    int got = -1;
    ssize_t r = read(p[0], &got, sizeof got);
    close(p[0]);
    ASSERT_MSG(r == sizeof got && got > 0, "the server did not start");
    *port = got;
    return pid;
}

void stop_server(pid_t pid)
{
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

char *http(const char *url, const char *method, const char *path, const char *body, int *status)
{
    erg_srv_client *c = NULL;
    erg_error err;
    ASSERT_OK(erg_srv_client_new(url, NULL, &c, &err));
    char *resp = NULL;
    ASSERT_OK(erg_srv_client_request(c, method, path, body, status, &resp, &err));
    erg_srv_client_free(c);
    return resp;
}

char *register_job(const char *url, int S, int dp, int M, const char *sched, const char *args,
                   const char *model)
{
    erg_srv_client *c = NULL;
    erg_error err;
    ASSERT_OK(erg_srv_client_new(url, NULL, &c, &err));
    erg_srv_job_desc d = {S,         dp, 1, S * dp, "sim", model,
                          "uniform", 1,  M, sched,  args,  "frequency"};
    char *id = NULL;
    ASSERT_OK(erg_srv_client_register_job(c, &d, &id, &err));
    erg_srv_client_free(c);
    return id;
}

json_t *load_json(const char *path)
{
    json_error_t je;
    json_t *v = json_load_file(path, 0, &je);
    ASSERT_MSG(v, "%s: %s", path, je.text);
    return v;
}

bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

erg_server *db_server(const char *sched, const char *args, const char *db)
{
    erg_server_opts o;
    erg_server_opts_init(&o);
    o.db_path = db;
    o.dump_data = false;
    o.scheduler = sched;
    o.scheduler_args = args;
    o.mode = "frequency";
    erg_server *srv = NULL;
    erg_error err;
    ASSERT_OK(erg_server_new(&o, &srv, &err));
    return srv;
}

erg_server *mem_server(const char *sched, const char *args)
{
    return db_server(sched, args, ":memory:");
}

int call(erg_server *srv, const char *method, const char *path, const char *query, const char *body,
         char **out)
{
    int status = 0;
    char *resp = NULL;
    const char *ct;
    ASSERT_EQ_INT(erg_server_handle(srv, method, path, query, body, body ? strlen(body) : 0, 0,
                                    &status, &resp, &ct),
                  ERG_OK);
    ASSERT(resp && ct);
    if (out)
        *out = resp;
    else
        erg_free(resp);
    return status;
}

const char *JOB2 = "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,"
                   "\"world_size\":2,\"framework\":\"f\",\"model_name\":\"m\","
                   "\"partition_method\":\"p\",\"microbatch_size\":1,"
                   "\"num_microbatches\":1}";

char *reg_job(erg_server *srv)
{
    char *resp;
    ASSERT_EQ_INT(call(srv, "POST", "/register_job", NULL, JOB2, &resp), 200);
    json_t *v = json_loads(resp, JSON_DECODE_ANY, NULL);
    ASSERT(json_is_string(v));
    char *id = strdup(json_string_value(v));
    json_decref(v);
    erg_free(resp);
    return id;
}

int reg_rank(erg_server *srv, const char *id, int r, const char *sched_list)
{
    char body[1024];
    snprintf(body, sizeof body,
             "{\"job_id\":\"%s\",\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,\"tp_rank\":0,"
             "\"pipe_schedule\":%s,\"power_state_range\":[1000,1410,1200]}",
             id, r, r, sched_list);
    return call(srv, "POST", "/register_rank", NULL, body, NULL);
}

int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    return fd;
}

int zeus_send(int port, const char *method, const char *target, const char *body)
{
    char req[8192];
    int n;
    if (body)
        n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: */*\r\n"
                     "Accept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n"
                     "User-Agent: python-httpx/0.28.1\r\nContent-Length: %zu\r\n"
                     "Content-Type: application/json\r\n\r\n%s",
                     method, target, port, strlen(body), body);
    else
        n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: */*\r\n"
                     "Accept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n"
                     "User-Agent: python-httpx/0.28.1\r\n\r\n",
                     method, target, port);
    ASSERT(n > 0 && n < (int)sizeof req);
    int fd = raw_connect(port);
    ASSERT(write(fd, req, (size_t)n) == n);
    return fd;
}

void zeus_read(int fd, raw_resp *r)
{
    char buf[16384];
    size_t got = 0;
    long clen = -1;
    char *hdr_end = NULL;
    for (;;) {
        ssize_t k = read(fd, buf + got, sizeof buf - 1 - got);
        ASSERT(k >= 0);
        got += (size_t)k;
        buf[got] = 0;
        if (!hdr_end && (hdr_end = strstr(buf, "\r\n\r\n"))) {
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            ASSERT(cl && cl < hdr_end);
            clen = strtol(cl + 17, NULL, 10);
        }
        if (hdr_end && (long)(got - (size_t)(hdr_end + 4 - buf)) >= clen)
            break;
        ASSERT_MSG(k > 0, "connection closed early: %s", buf);
    }
    close(fd);
    ASSERT(sscanf(buf, "HTTP/1.1 %d", &r->status) == 1);
    snprintf(r->body, sizeof r->body, "%.*s", (int)clen, hdr_end + 4);
}

void zeus_call(int port, const char *method, const char *target, const char *body, raw_resp *r)
{
    zeus_read(zeus_send(port, method, target, body), r);
}

char *read_text(const char *path)
{
    char *text;
    size_t len;
    erg_error err;
    ASSERT_MSG(!erg__read_file(path, 1 << 20, &text, &len, &err), "%s", err.msg);
    return text;
}

void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fputs(text, f);
    fclose(f);
}
