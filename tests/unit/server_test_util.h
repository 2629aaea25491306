/* server_test_util.h: what the test_server*.c unit tests share (server_test_util.c): the
 * simulated GPU's model, scratch directories, pipe schedules, a server in a child process and
 * HTTP to it, handler calls without sockets, raw sockets and the Zeus client's exchanges. */
#ifndef ERGON_TESTS_SERVER_TEST_UTIL_H
#define ERGON_TESTS_SERVER_TEST_UTIL_H
#include "tap.h"

#include "ergon/gpu.h"
#include "ergon/pipeline.h"
#include "ergon/plan.h"
#include "ergon/planner.h"
#include "ergon/profile.h"
#include "ergon/server.h"
#include "ergon/server_client.h"
#include "server/server_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <curl/curl.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* Leaks so far in this (forked) test process; tests end with _exit, which
 * skips LeakSanitizer's exit-time check. */
#define CHECK_NO_LEAKS() ASSERT_MSG(__lsan_do_recoverable_leak_check() == 0, "memory leaked")
#else
#define CHECK_NO_LEAKS() ((void)0)
#endif

/* The clocks the simulated ranks offer (MHz). */
extern const int STATES[];
#define NSTATES 7
/* A 2-stage job's registration body (handler tests). */
extern const char *JOB2;

/* The server in a child process (so the test can kill -9 it). */
typedef struct srv_cfg {
    const char *db, *dump, *scheduler, *args, *mode;
    int port;
    double rank_timeout_s, idle_s, conn_timeout_s;
    const char *plans_dir; /* --plans-dir: where per-job scheduler_args may name files */
    const char *zeus_sched, *zeus_args; /* Zeus PFO jobs' configuration */
} srv_cfg;

/* One HTTP/1.1 exchange on its own connection: send, then read the answer
 * (headers + Content-Length body). */
typedef struct raw_resp {
    int status;
    char body[8192];
} raw_resp;

void sim_eval(int S, int stage, int kind, int f, double *t, double *p);
double sim_time(int S, int stage, int kind, int f);
double sim_power(int S, int stage, int kind, int f);
const char *mktmp(void);
int pipe_schedule(int S, int M, int s, const char **out);
pid_t start_server(const srv_cfg *c, int *port);
void stop_server(pid_t pid);
char *http(const char *url, const char *method, const char *path, const char *body, int *status);
char *register_job(const char *url, int S, int dp, int M, const char *sched, const char *args,
                   const char *model);
json_t *load_json(const char *path);
bool exists(const char *p);
erg_server *db_server(const char *sched, const char *args, const char *db);
erg_server *mem_server(const char *sched, const char *args);
int call(erg_server *srv, const char *method, const char *path, const char *query, const char *body,
         char **out);
char *reg_job(erg_server *srv);
int reg_rank(erg_server *srv, const char *id, int r, const char *sched_list);
int raw_connect(int port);
int zeus_send(int port, const char *method, const char *target, const char *body);
void zeus_read(int fd, raw_resp *r);
void zeus_call(int port, const char *method, const char *target, const char *body, raw_resp *r);
char *read_text(const char *path);
void write_text(const char *path, const char *text);

#endif
