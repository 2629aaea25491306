/* bench_soak.c: soak of the control-plane server (issue 15): many ranks, many windows and job
 * churn on loopback, sampling the server process's WAL size, RSS and open descriptors. */
#include "ergon/server.h"
#include "ergon/server_client.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * The server runs in a child process (SQLite file in a temporary directory,
 * dumps on, --max-jobs 8), so its RSS and descriptors are its own. The parent
 * runs N rank threads (erg_srv_client each). Jobs of N ranks (S stages x N/S
 * replicas, AllMaxFrequency with J windows) follow each other until W windows
 * have run in total; every rank fetches its schedule (barrier), reports a
 * ~1.5 KB result, and so on. Churn beside them: per main job, C side jobs are
 * registered, half of them ended and half aborted, and a finished one is
 * queried. After each main job the parent samples the server: WAL and
 * database size, VmRSS, open descriptors, /metrics' ergon_jobs.
 *
 * usage: bench_soak [--ranks N] [--stages S] [--windows W] [--job-windows J] [--side-jobs C]
 */

static int N = 256, S = 8, W = 600, J = 50, C = 4;
static char url[64], job[512];
static pthread_barrier_t bar;
static volatile int stop_all;
static int errors;
static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void count_error(int r, const char *what, const char *msg)
{
    pthread_mutex_lock(&err_mu);
    if (errors++ < 10)
        fprintf(stderr, "rank %d: %s: %s\n", r, what, msg);
    pthread_mutex_unlock(&err_mu);
}

static void *rank_main(void *arg)
{
    int r = (int)(intptr_t)arg, stage = r % S;
    erg_srv_client *c = NULL;
    erg_error err;
    erg_srv_client_opts o;
    erg_srv_client_opts_init(&o);
    o.schedule_wait_s = 60;
    if (erg_srv_client_new(url, &o, &c, &err)) {
        count_error(r, "client", err.msg);
        return NULL;
    }
    const char *ps[40];
    int n = 0;
    for (int i = 0; i < 8; i++) {
        ps[n++] = "forward";
        ps[n++] = "p2p";
    }
    for (int i = 0; i < 8; i++) {
        ps[n++] = "backward";
        ps[n++] = "p2p";
    }
    ps[n++] = "step";
    static const int states[] = {1410, 1395, 1380, 1365, 1350, 1200, 1000};
    for (;;) {
        pthread_barrier_wait(&bar); /* the main thread registered a job (or stops) */
        if (stop_all)
            break;
        if (erg_srv_client_register_rank(c, job, r, r / S, stage, 0, ps, (size_t)n, states, 7,
                                         &err)) {
            count_error(r, "register", err.msg);
            pthread_barrier_wait(&bar);
            continue;
        }
        for (;;) {
            int *st = NULL;
            size_t ns;
            long win;
            bool done = false;
            if (erg_srv_client_fetch_schedule(c, job, r, &st, &ns, &win, &done, &err)) {
                count_error(r, "fetch", err.msg);
                break;
            }
            erg_free(st);
            if (done)
                break;
            erg_srv_result *res = NULL;
            erg_srv_result_new(r, &res, &err);
            for (int it = 0; it < 3; it++) {
                erg_srv_result_add_iteration(res, 1.0 + 0.01 * stage, 250.0, &err);
                for (int i = 0; i < 8; i++) {
                    erg_srv_result_add_sample(res, "forward", 0.02, 5.0, &err);
                    erg_srv_result_add_sample(res, "backward", 0.04, 10.0, &err);
                }
            }
            erg_status rs = erg_srv_client_report(c, job, win, res, &err);
            erg_srv_result_free(res);
            if (rs) {
                count_error(r, "report", err.msg);
                break;
            }
        }
        pthread_barrier_wait(&bar); /* job over */
    }
    erg_srv_client_free(c);
    return NULL;
}

/* ---- the server process ---- */

static pid_t start_server(const char *dir, int *port)
{
    int p[2];
    if (pipe(p))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        char db[600], dump[600];
        snprintf(db, sizeof db, "%s/soak.db", dir);
        snprintf(dump, sizeof dump, "%s/dump", dir);
        erg_server_opts o;
        erg_server_opts_init(&o);
        o.port = 0;
        o.db_path = db;
        o.dump_dir = dump;
        o.scheduler = "AllMaxFrequency";
        char args[64];
        snprintf(args, sizeof args, "{\"num_iters\": %d}", J);
        o.scheduler_args = args;
        o.max_jobs = 8;
        erg_server *srv = NULL;
        erg_error err;
        int port_out = -1;
        if (erg_server_new(&o, &srv, &err) || erg_server_start(srv, &err))
            fprintf(stderr, "server: %s\n", err.msg);
        else
            port_out = erg_server_port(srv);
        if (write(p[1], &port_out, sizeof port_out) != sizeof port_out || port_out < 0)
            _exit(1);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigprocmask(SIG_BLOCK, &set, NULL);
        int sig;
        sigwait(&set, &sig);
        erg_server_free(srv);
        _exit(0);
    }
    close(p[1]);
    int got = -1;
    if (read(p[0], &got, sizeof got) != sizeof got)
        got = -1;
    close(p[0]);
    *port = got;
    return pid;
}

static long proc_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    size_t fl = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl))
            v = atol(line + fl + 1);
    if (f)
        fclose(f);
    return v;
}

static int proc_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static long file_size(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 ? (long)sb.st_size : 0;
}

/* Samples the WAL every 50 ms (its peaks fall between the per-job rows). */
static char wal_path[620];
static volatile long wal_peak;
static volatile int sampler_stop;

static void *sampler(void *arg)
{
    (void)arg;
    while (!sampler_stop) {
        long w = file_size(wal_path);
        if (w > wal_peak)
            wal_peak = w;
        usleep(50000);
    }
    return NULL;
}

static int parse_int(const char *s, int lo, int hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "bench_soak: '%s' is not in [%d, %d]\n", s, lo, hi);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ranks"))
            N = parse_int(argv[i + 1], 1, 4096);
        else if (!strcmp(argv[i], "--stages"))
            S = parse_int(argv[i + 1], 1, 64);
        else if (!strcmp(argv[i], "--windows"))
            W = parse_int(argv[i + 1], 1, 1000000);
        else if (!strcmp(argv[i], "--job-windows"))
            J = parse_int(argv[i + 1], 1, 1000000);
        else if (!strcmp(argv[i], "--side-jobs"))
            C = parse_int(argv[i + 1], 0, 1000);
        else {
            fprintf(stderr, "usage: bench_soak [--ranks N] [--stages S] [--windows W] "
                            "[--job-windows J] [--side-jobs C]\n");
            return 2;
        }
    }
    if (N % S) {
        fprintf(stderr, "bench_soak: --ranks must be a multiple of --stages\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char dir[] = "/tmp/ergon-soak-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    int port;
    pid_t srv = start_server(dir, &port);
    if (srv < 0 || port <= 0) {
        fprintf(stderr, "bench_soak: the server did not start\n");
        return 1;
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    char db[600];
    snprintf(db, sizeof db, "%s/soak.db", dir);
    snprintf(wal_path, sizeof wal_path, "%s-wal", db);
    pthread_t samp;
    pthread_create(&samp, NULL, sampler, NULL);
    pthread_barrier_init(&bar, NULL, (unsigned)N + 1);
    pthread_t *th = calloc((size_t)N, sizeof *th);
    for (int r = 0; r < N; r++)
        pthread_create(&th[r], NULL, rank_main, (void *)(intptr_t)r);
    erg_srv_client *c = NULL;
    erg_error err;
    if (erg_srv_client_new(url, NULL, &c, &err)) {
        fprintf(stderr, "bench_soak: %s\n", err.msg);
        return 1;
    }
    int jobs = (W + J - 1) / J;
    printf("soak: %d ranks (%d stages), %d jobs of %d windows (%d windows), %d side jobs per "
           "job, server pid %d, %s\n\n",
           N, S, jobs, J, jobs * J, C, (int)srv, dir);
    printf("| after job | windows | elapsed s | WAL KiB (max seen) | DB KiB | server RSS KiB | "
           "open fds | jobs held |\n|---|---|---|---|---|---|---|---|\n");
    fflush(stdout);
    double t0 = now_s();
    long wal_max = 0;
    long rss_first = 0, rss_last = 0, fds_first = 0, fds_last = 0;
    for (int k = 0; k < jobs; k++) {
        erg_srv_job_desc d = {S, N / S, 1, N, "soak", "model", "uniform", 1, 8, NULL, NULL, NULL};
        char *id = NULL;
        if (erg_srv_client_register_job(c, &d, &id, &err)) {
            fprintf(stderr, "bench_soak: register job %d: %s\n", k, err.msg);
            errors++;
            break;
        }
        snprintf(job, sizeof job, "%s", id);
        erg_free(id);
        /* Churn: side jobs registered and ended or aborted at once. */
        for (int s = 0; s < C; s++) {
            erg_srv_job_desc sd = {2, 1, 1, 2, "soak", "side", "uniform", 1, 1, NULL, NULL, NULL};
            char *sid = NULL;
            if (erg_srv_client_register_job(c, &sd, &sid, &err) ||
                erg_srv_client_end_job(c, sid, s % 2, "soak churn", &err)) {
                fprintf(stderr, "bench_soak: side job: %s\n", err.msg);
                errors++;
            }
            erg_free(sid);
        }
        pthread_barrier_wait(&bar); /* ranks start */
        /* Sample the WAL while the job runs. */
        pthread_barrier_wait(&bar); /* ranks done */
        long w = file_size(wal_path);
        if (wal_peak > wal_max)
            wal_max = wal_peak;
        long rss = proc_kb(srv, "VmRSS:");
        int fds = proc_fds(srv);
        int held = 0;
        char *m = NULL;
        int status = 0;
        if (!erg_srv_client_request(c, "GET", "/v1/jobs", NULL, &status, &m, &err) && m) {
            for (const char *p = m; (p = strstr(p, "\"job_id\"")); p++)
                held++;
        }
        erg_free(m);
        if (k == 1) {
            rss_first = rss;
            fds_first = fds;
        }
        rss_last = rss;
        fds_last = fds;
        printf("| %d | %d | %.1f | %ld (%ld) | %ld | %ld | %d | %d |\n", k + 1, (k + 1) * J,
               now_s() - t0, w >> 10, wal_max >> 10, file_size(db) >> 10, rss, fds, held);
        fflush(stdout);
    }
    stop_all = 1;
    pthread_barrier_wait(&bar);
    sampler_stop = 1;
    pthread_join(samp, NULL);
    for (int r = 0; r < N; r++)
        pthread_join(th[r], NULL);
    erg_srv_client_free(c);
    printf("\n%d errors; WAL at most %ld KiB; RSS after job 2 -> end: %ld -> %ld KiB; open fds "
           "%ld -> %ld; %.1f s\n",
           errors, wal_max >> 10, rss_first, rss_last, fds_first, fds_last, now_s() - t0);
    kill(srv, SIGTERM);
    waitpid(srv, NULL, 0);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_soak: could not remove %s\n", dir);
    free(th);
    return errors ? 1 : 0;
}
