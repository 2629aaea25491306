/* bench_wide.c: load generator for one wide job against `ergon serve` (issue 38): thousands of
 * ranks of one job on the Perseus, Zeus PFO or /v1 protocol, each rank a raw non-blocking
 * socket driven from one poll() loop, so that 4,096 concurrent requests cost the generator
 * little CPU and the server's numbers are the server's. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * For each protocol a fresh `ergon serve` (its own process, so that its peak RSS and CPU time
 * are its own) gets one job of PP x DP ranks:
 *   1. register_job (one request);
 *   2. every rank registers (--concurrency requests in flight, a connection each);
 *   3. window 0: world-1 ranks ask for their schedule and wait at the barrier (one connection
 *      each, all held open); once the server reports them all waiting (/metrics,
 *      ergon_requests_waiting), the last rank asks: "barrier open" is the time from that last
 *      request being written to the first schedule received, "all answered" to the last;
 *   4. (Perseus, /v1) every rank reports a result; then window 1 as a burst: every rank's
 *      connection is opened first, then all requests are written at once ("burst open": from
 *      the last request written to the first schedule received).
 * Every schedule must be a 200 for that rank with a non-empty list of clocks; anything else
 * (a refused or unanswered connection, a wrong rank) fails the run (exit 1). With
 * --expect-refused the job must be refused at registration (exit 0 when it is, 1 when it is
 * accepted: its ranks are then run until --timeout to show what happens).
 * Perseus and Zeus ranks never retry (their clients do not); /v1 ranks retry 202 and
 * connection errors with backoff, as libergon's client does.
 */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum { P_PERSEUS, P_ZEUS, P_V1 };
static const char *const proto_names[] = {"perseus", "zeus", "v1"};

static int PP = 16, DP = 256, CONC = 128, PORT;
static double TIMEOUT_S = 120;
static const char *ERGON;
static const char *SERVE_ARGS[32];
static int N_SERVE_ARGS;
static const char *LOG_PATH;
static char JOB[600];

/* ---- one HTTP request on its own connection ---- */

enum { S_IDLE, S_CONNECTING, S_HELD, S_SENDING, S_RECV, S_DONE };

typedef struct req {
    int fd, state, status, rank, tries;
    char *out;
    size_t out_len, out_off;
    char *in;
    size_t in_len, in_cap;
    double t_sent, t_done, retry_at;
    bool retry; /* /v1: 202 and connection errors are asked again */
    bool hold;  /* connect, then wait for release_held() to send */
} req;

static double fmin_d(double a, double b)
{
    return a < b ? a : b;
}

static void req_close(req *q)
{
    if (q->fd >= 0)
        close(q->fd);
    q->fd = -1;
}

static void req_set(req *q, int rank, bool retry, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void req_set(req *q, int rank, bool retry, const char *fmt, ...)
{
    free(q->out);
    free(q->in);
    memset(q, 0, sizeof *q);
    q->fd = -1;
    q->rank = rank;
    q->retry = retry;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&q->out, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    q->out_len = (size_t)n;
}

static char *http_req(const char *method, const char *path, const char *body)
{
    char *s = NULL;
    size_t bl = body ? strlen(body) : 0;
    if (asprintf(&s, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%.0zu%s\r\n%s",
                 method, path, body ? "Content-Type: application/json\r\nContent-Length: " : "", bl,
                 body ? "\r\n" : "", body ? body : "") < 0)
        abort();
    return s;
}

static void req_http(req *q, int rank, bool retry, const char *method, const char *path,
                     const char *body)
{
    char *s = http_req(method, path, body);
    req_set(q, rank, retry, "%s", s);
    free(s);
}

static void req_start(req *q)
{
    q->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (q->fd < 0) {
        fprintf(stderr, "bench_wide: socket: %s\n", strerror(errno));
        exit(2);
    }
    int one = 1;
    setsockopt(q->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)PORT)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    q->in_len = 0;
    q->out_off = 0;
    q->tries++;
    if (connect(q->fd, (struct sockaddr *)&a, sizeof a) == 0 || errno == EINPROGRESS)
        q->state = S_CONNECTING;
    else {
        q->status = -1;
        q->state = S_DONE;
        req_close(q);
    }
}

/* Is the response complete? Sets status; body at q->in + hdr. */
static bool resp_done(req *q, bool eof)
{
    if (!q->in)
        return eof;
    char *h = memmem(q->in, q->in_len, "\r\n\r\n", 4);
    if (!h)
        return eof;
    size_t hdr = (size_t)(h - q->in) + 4;
    q->status = q->in_len > 12 ? atoi(q->in + 9) : -1;
    long cl = -1;
    for (char *p = q->in; p < h; p = strstr(p, "\r\n") + 2) {
        if (!strncasecmp(p, "Content-Length:", 15))
            cl = atol(p + 15);
        if (!strstr(p, "\r\n"))
            break;
    }
    return eof || (cl >= 0 && q->in_len >= hdr + (size_t)cl);
}

static const char *resp_body(const req *q)
{
    char *h = q->in ? strstr(q->in, "\r\n\r\n") : NULL;
    return h ? h + 4 : "";
}

static void req_finish(req *q, bool ok)
{
    q->t_done = now_s();
    if (!ok)
        q->status = -1;
    req_close(q);
    q->state = S_DONE;
    if (q->retry && (q->status == -1 || q->status == 202 || q->status == 503) && q->tries < 200) {
        double d = 0.05 * (1 << (q->tries < 6 ? q->tries : 6));
        q->state = S_IDLE;
        q->retry_at = now_s() + (q->status == 202 ? 0 : (d > 2 ? 2 : d));
    }
}

static void req_event(req *q, short re)
{
    if (q->state == S_CONNECTING && (re & (POLLOUT | POLLERR | POLLHUP))) {
        int e = 0;
        socklen_t l = sizeof e;
        getsockopt(q->fd, SOL_SOCKET, SO_ERROR, &e, &l);
        if (e) {
            req_finish(q, false);
            return;
        }
        q->state = q->hold ? S_HELD : S_SENDING;
        if (q->state == S_HELD)
            return;
    }
    if (q->state == S_SENDING) {
        ssize_t n = send(q->fd, q->out + q->out_off, q->out_len - q->out_off, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN) {
            req_finish(q, false);
            return;
        }
        if (n > 0)
            q->out_off += (size_t)n;
        if (q->out_off == q->out_len) {
            q->t_sent = now_s();
            q->state = S_RECV;
        }
        return;
    }
    if ((q->state == S_RECV || q->state == S_HELD) && (re & (POLLIN | POLLERR | POLLHUP))) {
        if (q->in_cap - q->in_len < 4096) {
            q->in_cap = q->in_cap ? q->in_cap * 2 : 8192;
            q->in = realloc(q->in, q->in_cap + 1);
            if (!q->in)
                abort();
        }
        ssize_t n = recv(q->fd, q->in + q->in_len, q->in_cap - q->in_len, 0);
        if (n < 0 && errno == EAGAIN)
            return;
        if (n > 0) {
            q->in_len += (size_t)n;
            q->in[q->in_len] = 0;
        }
        if (q->state == S_HELD) { /* closed before its request was sent */
            req_finish(q, false);
            return;
        }
        if (resp_done(q, n <= 0))
            req_finish(q, q->in_len > 0);
    }
}

/* Drive the requests: start idle ones (at most conc in flight), held ones wait; return when
 * none is in flight or idle (or, with until_sent, when every non-held one has been sent). */
static void run(req **qs, int n, int conc, bool until_sent, double deadline)
{
    struct pollfd *pf = calloc((size_t)n + 1, sizeof *pf);
    int *idx = calloc((size_t)n + 1, sizeof *idx);
    if (!pf || !idx)
        abort();
    for (;;) {
        double t = now_s();
        int np = 0, inflight = 0, idle = 0, unsent = 0;
        for (int i = 0; i < n; i++)
            if (qs[i]->state != S_DONE && qs[i]->state != S_IDLE)
                inflight++;
        double next_retry = 1e300;
        for (int i = 0; i < n; i++) {
            req *q = qs[i];
            if (q->state == S_IDLE) {
                if (q->retry_at <= t && inflight < conc) {
                    req_start(q);
                    inflight++;
                } else {
                    idle++;
                    if (q->retry_at < next_retry)
                        next_retry = q->retry_at;
                    continue;
                }
            }
            if (q->state == S_DONE)
                continue;
            if (q->state == S_CONNECTING || q->state == S_SENDING)
                unsent++;
            pf[np].fd = q->fd;
            pf[np].events = q->state == S_CONNECTING || q->state == S_SENDING ? POLLOUT : POLLIN;
            pf[np].revents = 0;
            idx[np++] = i;
        }
        if (np == 0 && idle == 0)
            break;
        if (until_sent && unsent == 0 && idle == 0)
            break;
        if (t > deadline)
            break;
        double wait = fmin_d(deadline - t, idle ? next_retry - t : 1.0);
        int ms = wait < 0 ? 0 : wait > 1 ? 1000 : (int)(wait * 1000) + 1;
        int k = poll(pf, (nfds_t)np, ms);
        if (k < 0 && errno != EINTR) {
            perror("poll");
            exit(2);
        }
        for (int i = 0; k > 0 && i < np; i++)
            if (pf[i].revents)
                req_event(qs[idx[i]], pf[i].revents);
    }
    free(pf);
    free(idx);
}

static void run_one(req *q, double timeout_s)
{
    req *qs[1] = {q};
    run(qs, 1, 1, false, now_s() + timeout_s);
}

/* ---- measurements ---- */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct pct {
    double p50, p99;
    int n;
} pct;

static pct percentiles(double *v, int n)
{
    pct p = {0, 0, n};
    if (n <= 0)
        return p;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    p.p50 = v[(n - 1) / 2];
    int k = (int)(0.99 * n + 0.999999) - 1;
    p.p99 = v[k < 0 ? 0 : k >= n ? n - 1 : k];
    return p;
}

/* Latencies (ms) of the requests that got 2xx; counts the others. */
static pct latencies(req *qs, int n, int *bad)
{
    double *v = calloc((size_t)n + 1, sizeof *v);
    int k = 0;
    *bad = 0;
    for (int i = 0; i < n; i++) {
        if (qs[i].status >= 200 && qs[i].status < 300)
            v[k++] = (qs[i].t_done - qs[i].t_sent) * 1e3;
        else
            (*bad)++;
    }
    pct p = percentiles(v, k);
    free(v);
    return p;
}

static void show_bad(const char *what, req *qs, int n)
{
    int shown = 0;
    for (int i = 0; i < n && shown < 3; i++)
        if (qs[i].status < 200 || qs[i].status >= 300) {
            fprintf(stderr, "bench_wide: %s of rank %d: %s %.300s\n", what, qs[i].rank,
                    qs[i].status < 0 ? "connection closed unanswered" : "HTTP",
                    qs[i].status < 0 ? ""
                    : qs[i].in       ? qs[i].in
                                     : "");
            shown++;
        }
}

/* A schedule answer for rank r: 200, that rank, a non-empty list of clocks. */
static bool schedule_ok(const req *q, int proto)
{
    if (q->status != 200)
        return false;
    const char *b = resp_body(q);
    const char *p = strstr(b, "\"rank\"");
    if (!p)
        return false;
    p += 6;
    while (*p == ' ' || *p == ':')
        p++;
    if (atoi(p) != q->rank)
        return false;
    const char *key = proto == P_ZEUS ? "\"frequencies\"" : "\"power_states\"";
    p = strstr(b, key);
    if (!p)
        return false;
    p = strchr(p, '[');
    if (!p)
        return false;
    p++;
    while (*p == ' ')
        p++;
    return *p && *p != ']';
}

/* ---- the server ---- */

static long proc_field_kb(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key)))
            v = atol(line + strlen(key));
    if (f)
        fclose(f);
    return v;
}

static double proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static pid_t serve(int proto, const char *dir)
{
    int p[2];
    if (pipe(p))
        return -1;
    char db[600], plan[600], zargs[700], log[600];
    snprintf(db, sizeof db, "%s/state.db", dir);
    snprintf(plan, sizeof plan, "%s/freqs_pipeline_00001.py", dir);
    snprintf(log, sizeof log, "%s", LOG_PATH ? LOG_PATH : "/dev/null");
    if (proto == P_ZEUS) { /* Zeus jobs need a Zeus scheduler: one plan entry per stage */
        FILE *f = fopen(plan, "w");
        if (!f)
            return -1;
        fprintf(f, "[\n");
        for (int s = 0; s < PP; s++)
            fprintf(f, "[('forward', 1410), ('forward', 1380), ('backward', 1380), ('backward', "
                       "1410)],\n");
        fprintf(f, "]\n");
        fclose(f);
        snprintf(zargs, sizeof zargs, "{\"solution_path\": \"%s\"}", plan);
    }
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        int lf = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (lf >= 0)
            dup2(lf, 2);
        const char *argv[64] = {ERGON, "serve",     "--port",      "0",      "--db",
                                db,    "--no-dump", "--log-level", "warning"};
        int a = 9;
        if (proto == P_ZEUS) {
            setenv("ZEUS_PFO_SCHEDULER", "PointSolution3D", 1);
            setenv("ZEUS_PFO_SCHEDULER_ARGS", zargs, 1);
        } else {
            argv[a++] = "--scheduler";
            argv[a++] = "AllMaxFrequency";
            argv[a++] = "--scheduler-args";
            argv[a++] = "{\"num_iters\": 100}";
        }
        for (int i = 0; i < N_SERVE_ARGS; i++)
            argv[a++] = SERVE_ARGS[i];
        argv[a] = NULL;
        execv(ERGON, (char **)argv);
        fprintf(stderr, "bench_wide: cannot run %s: %s\n", ERGON, strerror(errno));
        _exit(127);
    }
    close(p[1]);
    /* "ergon serve: listening on http://127.0.0.1:PORT" */
    char line[512];
    size_t n = 0;
    double end = now_s() + 60;
    PORT = 0;
    while (!PORT && now_s() < end && n < sizeof line - 1) {
        struct pollfd pf = {p[0], POLLIN, 0};
        if (poll(&pf, 1, 1000) <= 0)
            continue;
        ssize_t k = read(p[0], line + n, sizeof line - 1 - n);
        if (k <= 0)
            break;
        n += (size_t)k;
        line[n] = 0;
        char *nl = strchr(line, '\n');
        char *c = nl ? memrchr(line, ':', (size_t)(nl - line)) : NULL;
        if (c && strstr(line, "listening"))
            PORT = atoi(c + 1);
    }
    close(p[0]);
    if (!PORT) {
        fprintf(stderr, "bench_wide: the server did not start (its log: %s)\n", log);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

/* ---- the protocols ---- */

static void json_id(const char *body, char *out, size_t on)
{
    const char *p = strstr(body, "\"job_id\"");
    p = p ? strchr(p + 8, '"') : strchr(body, '"');
    const char *e = p ? strchr(p + 1, '"') : NULL;
    snprintf(out, on, "%.*s", p && e ? (int)(e - p - 1) : 0, p ? p + 1 : "");
}

static void rank_body(char *b, size_t bn, int proto, int r)
{
    int stage = r % PP, dp = r / PP;
    if (proto == P_ZEUS)
        snprintf(b, bn,
                 "{\"rank\":%d,\"dp_rank\":%d,\"pp_rank\":%d,\"tp_rank\":0,"
                 "\"available_frequencies\":[1410,1395,1380,1365,1200,1000]}",
                 r, dp, stage);
    else
        snprintf(b, bn,
                 "{\"job_id\":\"%s\",\"rank\":%d,\"dp_rank\":%d,\"pp_rank\":%d,\"tp_rank\":0,"
                 "\"pipe_schedule\":[\"forward\",\"forward\",\"backward\",\"backward\"],"
                 "\"power_state_range\":[1410,1395,1380,1365,1200,1000]}",
                 proto == P_V1 ? "" : JOB, r, dp, stage);
    if (proto == P_V1) { /* job_id is optional on /v1: leave it out */
        char *p = strstr(b, "\"job_id\":\"\",");
        if (p)
            memmove(p, p + 12, strlen(p + 12) + 1);
    }
}

static void sched_req(req *q, int proto, int r, bool hold)
{
    char path[800];
    if (proto == P_V1)
        snprintf(path, sizeof path, "/v1/jobs/%s/schedule?rank=%d&wait=60", JOB, r);
    else
        snprintf(path, sizeof path, "/schedule/%s?rank=%d", JOB, r);
    req_http(q, r, proto == P_V1, "GET", path, NULL);
    q->hold = hold;
}

static int waiting_now(void)
{
    req q = {.fd = -1};
    req_http(&q, -1, false, "GET", "/metrics", NULL);
    run_one(&q, 10);
    const char *p = q.in ? strstr(q.in, "\nergon_requests_waiting ") : NULL;
    int w = p ? atoi(p + 24) : -1;
    free(q.out);
    free(q.in);
    return w;
}

typedef struct outcome {
    pct reg, res, fan;
    double open_ms, all_ms, burst_open_ms, burst_all_ms;
    int got, bad;
} outcome;

/* Window barrier, world-1 ranks first, then the last one (see the top). */
static bool barrier_last(int proto, int W, outcome *o, double deadline)
{
    req *qs = calloc((size_t)W, sizeof *qs);
    req **pq = calloc((size_t)W, sizeof *pq);
    for (int r = 0; r < W; r++) {
        sched_req(&qs[r], proto, r, false);
        pq[r] = &qs[r];
    }
    run(pq, W - 1, W, true, deadline);
    int lost = 0;
    while (now_s() < deadline) {
        run(pq, W - 1, W, false, now_s() + 0.02); /* answers and closed connections */
        lost = 0;
        for (int r = 0; r < W - 1; r++)
            lost += qs[r].state == S_DONE && qs[r].status < 0;
        if (lost)
            break; /* a Perseus or Zeus rank whose request is lost fails */
        if (waiting_now() >= W - 1)
            break;
        usleep(20000);
    }
    if (lost) {
        run(pq, W - 1, W, false, now_s() + 2); /* the others stay waiting */
        int waiting = 0, closed = 0;
        for (int r = 0; r < W - 1; r++) {
            waiting += qs[r].state != S_DONE;
            closed += qs[r].state == S_DONE && qs[r].status < 0;
        }
        printf("DEADLOCK: %d ranks wait at the barrier, which cannot open: %d ranks' "
               "connections were closed unanswered (server waiting count %d)\n",
               waiting, closed, waiting_now());
    } else {
        run(pq, W, W, false, deadline); /* the last rank */
    }
    double t_last = qs[W - 1].t_sent;
    double first = 1e300, last = 0;
    double *fan = calloc((size_t)W, sizeof *fan);
    int k = 0;
    o->got = o->bad = 0;
    for (int r = 0; r < W; r++) {
        if (schedule_ok(&qs[r], proto)) {
            o->got++;
            fan[k++] = (qs[r].t_done - t_last) * 1e3;
            first = qs[r].t_done < first ? qs[r].t_done : first;
            last = qs[r].t_done > last ? qs[r].t_done : last;
        } else
            o->bad++;
    }
    if (o->bad)
        show_bad("schedule", qs, W);
    o->open_ms = k ? (first - t_last) * 1e3 : NAN;
    o->all_ms = k ? (last - t_last) * 1e3 : NAN;
    o->fan = percentiles(fan, k);
    free(fan);
    for (int r = 0; r < W; r++) {
        req_close(&qs[r]);
        free(qs[r].out);
        free(qs[r].in);
    }
    free(qs);
    free(pq);
    return o->bad == 0;
}

/* Every rank's connection opened first, then every request written at once. */
static bool barrier_burst(int proto, int W, outcome *o, double deadline)
{
    req *qs = calloc((size_t)W, sizeof *qs);
    req **pq = calloc((size_t)W, sizeof *pq);
    for (int r = 0; r < W; r++) {
        sched_req(&qs[r], proto, r, true);
        pq[r] = &qs[r];
    }
    run(pq, W, W, true, deadline); /* connected and held */
    usleep(200000);                /* the server accepts them */
    double t_last = 0;
    for (int r = 0; r < W; r++)
        if (qs[r].state == S_HELD) {
            qs[r].state = S_SENDING;
            req_event(&qs[r], POLLOUT);
            t_last = qs[r].t_sent > t_last ? qs[r].t_sent : t_last;
        }
    run(pq, W, W, false, deadline);
    double first = 1e300, last = 0;
    int bad = 0;
    for (int r = 0; r < W; r++) {
        if (schedule_ok(&qs[r], proto)) {
            first = qs[r].t_done < first ? qs[r].t_done : first;
            last = qs[r].t_done > last ? qs[r].t_done : last;
        } else
            bad++;
    }
    if (bad)
        show_bad("schedule (burst)", qs, W);
    o->bad += bad;
    o->burst_open_ms = bad < W ? (first - t_last) * 1e3 : NAN;
    o->burst_all_ms = bad < W ? (last - t_last) * 1e3 : NAN;
    for (int r = 0; r < W; r++) {
        req_close(&qs[r]);
        free(qs[r].out);
        free(qs[r].in);
    }
    free(qs);
    free(pq);
    return bad == 0;
}

/* Every rank sends one request (register or result), CONC at a time. */
static bool all_ranks(int proto, int W, bool result, pct *lat, double deadline)
{
    req *qs = calloc((size_t)W, sizeof *qs);
    req **pq = calloc((size_t)W, sizeof *pq);
    char body[1200], path[800];
    for (int r = 0; r < W; r++) {
        if (result) {
            snprintf(body, sizeof body,
                     "{%s%s%s\"rank\":%d,\"iter_time\":[0.5,0.5],\"iter_energy\":[120.0,120.5],"
                     "\"time_breakdown\":{},\"energy_breakdown\":{}}",
                     proto == P_V1 ? "" : "\"job_id\":\"", proto == P_V1 ? "" : JOB,
                     proto == P_V1 ? "" : "\",", r);
            snprintf(path, sizeof path, proto == P_V1 ? "/v1/jobs/%s/results" : "/result/%s", JOB);
        } else {
            rank_body(body, sizeof body, proto, r);
            snprintf(path, sizeof path,
                     proto == P_V1     ? "/v1/jobs/%s/ranks"
                     : proto == P_ZEUS ? "/register_rank/%s"
                                       : "/register_rank%.0s",
                     JOB);
        }
        req_http(&qs[r], r, proto == P_V1, "POST", path, body);
        pq[r] = &qs[r];
    }
    run(pq, W, CONC, false, deadline);
    int bad;
    *lat = latencies(qs, W, &bad);
    if (bad)
        show_bad(result ? "result" : "register_rank", qs, W);
    for (int r = 0; r < W; r++) {
        req_close(&qs[r]);
        free(qs[r].out);
        free(qs[r].in);
    }
    free(qs);
    free(pq);
    return bad == 0;
}

/* ---- one protocol ---- */

static int register_job(int proto, int W, bool expect_refused)
{
    char body[600];
    int TP = 1;
    if (proto == P_ZEUS)
        snprintf(body, sizeof body,
                 "{\"job_id\":\"\",\"pp_degree\":%d,\"dp_degree\":%d,\"tp_degree\":%d,"
                 "\"world_size\":%d,\"job_metadata\":null}",
                 PP, DP, TP, W);
    else
        snprintf(body, sizeof body,
                 "{%s\"framework\":\"bench\",\"model_name\":\"wide\",\"partition_method\":\"u\","
                 "\"pp_degree\":%d,\"dp_degree\":%d,\"tp_degree\":%d,\"world_size\":%d,"
                 "\"microbatch_size\":1,\"num_microbatches\":2}",
                 proto == P_V1 ? "" : "\"job_id\":\"\",", PP, DP, TP, W);
    req q = {.fd = -1};
    req_http(&q, 0, false, "POST", proto == P_V1 ? "/v1/jobs" : "/register_job", body);
    run_one(&q, 60);
    int st = q.status;
    if (st == 200 || st == 201)
        json_id(resp_body(&q), JOB, sizeof JOB);
    if (expect_refused || (st != 200 && st != 201))
        printf("%s: register_job of %d ranks: HTTP %d %s\n", proto_names[proto], W, st,
               resp_body(&q));
    free(q.out);
    free(q.in);
    return st;
}

/* --no-burst: leave out window 1's burst (the barrier of window 0 and the results still run). */
static bool no_burst;

static int bench_one(int proto, bool expect_refused)
{
    int W = PP * DP;
    char dir[] = "/tmp/bench_wide.XXXXXX";
    if (!mkdtemp(dir))
        return 2;
    double cpu0 = self_cpu_s();
    pid_t pid = serve(proto, dir);
    if (pid < 0)
        return 2;
    double deadline = now_s() + TIMEOUT_S;
    outcome o;
    memset(&o, 0, sizeof o);
    o.open_ms = o.all_ms = o.burst_open_ms = o.burst_all_ms = NAN;
    bool ok = true;
    int st = register_job(proto, W, expect_refused);
    if (expect_refused && st >= 400) {
        printf("%s: refused at registration, as expected\n", proto_names[proto]);
        goto stop;
    }
    if (st != 200 && st != 201) {
        ok = false;
        goto stop;
    }
    if (expect_refused)
        printf("%s: the job of %d ranks was ACCEPTED; running its ranks:\n", proto_names[proto], W);
    long rss0 = proc_field_kb(pid, "VmRSS:");
    ok = all_ranks(proto, W, false, &o.reg, deadline);
    long rss_reg = proc_field_kb(pid, "VmRSS:");
    if (ok)
        ok = barrier_last(proto, W, &o, deadline);
    printf("%s: server RSS %.1f MB at the start, %.1f MB once every rank registered\n",
           proto_names[proto], rss0 / 1024.0, rss_reg / 1024.0);
    if (ok && proto != P_ZEUS) { /* Zeus's client never reports results */
        ok = all_ranks(proto, W, true, &o.res, deadline);
        if (ok && !no_burst)
            ok = barrier_burst(proto, W, &o, deadline);
    }
    if (now_s() > deadline)
        fprintf(stderr, "bench_wide: %s: --timeout %.0f s reached\n", proto_names[proto],
                TIMEOUT_S);
    if (expect_refused)
        ok = false;
stop:;
    long hwm = proc_field_kb(pid, "VmHWM:"), rss = proc_field_kb(pid, "VmRSS:");
    double scpu = proc_cpu_s(pid);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    double gcpu = self_cpu_s() - cpu0;
    if (!expect_refused || !ok) {
        printf("| %s | %d | %.2f / %.2f | %.1f | %.1f | %.1f / %.1f | ", proto_names[proto], W,
               o.reg.p50, o.reg.p99, o.open_ms, o.all_ms, o.fan.p50, o.fan.p99);
        if (proto == P_ZEUS)
            printf("- | - | ");
        else
            printf("%.2f / %.2f | %.1f / %.1f | ", o.res.p50, o.res.p99, o.burst_open_ms,
                   o.burst_all_ms);
        printf("%.1f | %.2f | %.2f |\n", hwm / 1024.0, scpu, gcpu);
        printf("%s: %d of %d ranks got their schedule%s; server RSS at the end %.1f MB\n",
               proto_names[proto], o.got, W, ok ? "" : " -- FAILED", rss / 1024.0);
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_wide: could not remove %s\n", dir);
    return ok ? 0 : 1;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_wide [--ergon PATH] [--protocol perseus|zeus|v1|all] [--pp N] [--dp N]\n"
            "                  [--concurrency N] [--timeout S] [--serve-arg ARG]... [--log FILE] "
            "[--no-burst]\n"
            "                  [--expect-refused]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int protos = 7;
    bool expect_refused = false;
    static char self_dir[4096];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--expect-refused")) {
            expect_refused = true;
            continue;
        }
        if (!strcmp(a, "--no-burst")) {
            no_burst = true;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--ergon"))
            ERGON = v;
        else if (!strcmp(a, "--protocol"))
            protos = !strcmp(v, "all")       ? 7
                     : !strcmp(v, "perseus") ? 1
                     : !strcmp(v, "zeus")    ? 2
                     : !strcmp(v, "v1")      ? 4
                                             : (usage(), 0);
        else if (!strcmp(a, "--pp"))
            PP = atoi(v);
        else if (!strcmp(a, "--dp"))
            DP = atoi(v);
        else if (!strcmp(a, "--concurrency"))
            CONC = atoi(v);
        else if (!strcmp(a, "--timeout"))
            TIMEOUT_S = atof(v);
        else if (!strcmp(a, "--log"))
            LOG_PATH = v;
        else if (!strcmp(a, "--serve-arg") && N_SERVE_ARGS < 24)
            SERVE_ARGS[N_SERVE_ARGS++] = v;
        else
            usage();
    }
    if (PP < 1 || DP < 1 || CONC < 1 || PP * DP < 2 || TIMEOUT_S <= 0)
        usage();
    if (!ERGON) { /* build/bench/bench_wide -> build/ergon */
        ssize_t n = readlink("/proc/self/exe", self_dir, sizeof self_dir - 16);
        if (n <= 0)
            usage();
        self_dir[n] = 0;
        char *s = strrchr(self_dir, '/');
        strcpy(s ? s : self_dir, "/../ergon");
        ERGON = self_dir;
    }
    signal(SIGPIPE, SIG_IGN);
    /* every rank is a descriptor here too */
    struct rlimit rl;
    int W = PP * DP;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)W + 64) {
        fprintf(stderr, "bench_wide: %d ranks need %d descriptors; ulimit -n is %lu\n", W, W + 64,
                (unsigned long)rl.rlim_cur);
        return 2;
    }
    printf("bench_wide: one job of %d ranks (pp %d x dp %d), %s, %ld cores\n", W, PP, DP, ERGON,
           sysconf(_SC_NPROCESSORS_ONLN));
    if (!expect_refused)
        printf("| protocol | ranks | register_rank p50 / p99 ms | barrier open after the last "
               "rank ms | all answered ms | answers p50 / p99 ms | result p50 / p99 ms | burst "
               "open / all answered ms | server peak RSS MB | server CPU s | generator CPU s "
               "|\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    int rc = 0;
    for (int p = 0; p < 3; p++)
        if (protos & (1 << p)) {
            int r = bench_one(p, expect_refused);
            rc = r > rc ? r : rc;
        }
    return rc;
}
