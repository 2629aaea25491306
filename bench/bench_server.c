/* bench_server.c: load benchmark of the control-plane server: N simulated ranks (threads, one
 * keep-alive connection each) registering, waiting at window barriers and reporting on loopback. */
#include "ergon/server.h"
#include "ergon/server_client.h"

#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/*
 * One job of N ranks (pp stages x N/pp data-parallel replicas, AllMaxFrequency
 * for W windows) against an in-process server on 127.0.0.1. Every rank is a
 * thread with its own client. Per window each rank: GET schedule (barrier),
 * GET it again (the barrier is released: a plain "ready" fetch), POST its
 * result. Then every rank sends H heartbeats back to back (throughput).
 *
 * Latencies: register, ready schedule fetch, result report, heartbeat: the
 * client-side time of one request. Barrier release: per window, the time
 * from the LAST rank's schedule request being sent to each rank receiving
 * its schedule (what the barrier costs once everybody has arrived).
 */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int N = 1000, PP = 8, W = 3, H = 5, M = 8;
static double PACED_RATE = 2000, PACED_S = 3;
static char url[64], job[512];

typedef struct rank_stats {
    double reg;
    double *sched_sent, *sched_recv, *ready, *report;
    double *hb;
    int err;
} rank_stats;

static rank_stats *stats;
static pthread_barrier_t hb_barrier;

static void *rank_main(void *arg)
{
    int r = (int)(intptr_t)arg;
    rank_stats *s = &stats[r];
    erg_srv_client *c = NULL;
    erg_error err;
    erg_srv_client_opts o;
    erg_srv_client_opts_init(&o);
    o.schedule_wait_s = 60;
    if (erg_srv_client_new(url, &o, &c, &err)) {
        s->err = 1;
        return NULL;
    }
    const char *ps[64];
    int n = 0;
    int stage = r % PP;
    for (int i = 0; i < M; i++) {
        ps[n++] = "forward";
        ps[n++] = "p2p";
    }
    for (int i = 0; i < M; i++) {
        ps[n++] = "backward";
        ps[n++] = "p2p";
    }
    ps[n++] = "step";
    static const int states[] = {1410, 1395, 1380, 1365, 1350, 1200, 1000};
    double t0 = now_s();
    if (erg_srv_client_register_rank(c, job, r, r / PP, stage, 0, ps, (size_t)n, states, 7, &err)) {
        fprintf(stderr, "rank %d: %s\n", r, err.msg);
        s->err = 1;
        goto out;
    }
    s->reg = now_s() - t0;
    for (int w = 0; w < W; w++) {
        int *st = NULL;
        size_t ns;
        long win;
        bool done;
        s->sched_sent[w] = now_s();
        if (erg_srv_client_fetch_schedule(c, job, r, &st, &ns, &win, &done, &err) || done ||
            win != w) {
            fprintf(stderr, "rank %d: fetch: %s\n", r, err.msg);
            s->err = 1;
            goto out;
        }
        s->sched_recv[w] = now_s();
        erg_free(st);
        t0 = now_s();
        if (erg_srv_client_fetch_schedule(c, job, r, &st, &ns, &win, &done, &err)) {
            s->err = 1;
            goto out;
        }
        s->ready[w] = now_s() - t0;
        erg_free(st);
        erg_srv_result *res = NULL;
        erg_srv_result_new(r, &res, &err);
        for (int it = 0; it < 3; it++) {
            erg_srv_result_add_iteration(res, 1.0 + 0.01 * stage, 250.0, &err);
            for (int i = 0; i < M; i++) {
                erg_srv_result_add_sample(res, "forward", 0.02, 5.0, &err);
                erg_srv_result_add_sample(res, "backward", 0.04, 10.0, &err);
            }
        }
        t0 = now_s();
        erg_status rs = erg_srv_client_report(c, job, win, res, &err);
        s->report[w] = now_s() - t0;
        erg_srv_result_free(res);
        if (rs) {
            fprintf(stderr, "rank %d: report: %s\n", r, err.msg);
            s->err = 1;
            goto out;
        }
    }
    pthread_barrier_wait(&hb_barrier);
    for (int h = 0; h < H; h++) {
        t0 = now_s();
        if (erg_srv_client_heartbeat(c, job, r, &err))
            s->err = 1;
        s->hb[h] = now_s() - t0;
    }
out:
    erg_srv_client_free(c);
    return NULL;
}

/* ---- paced phase: a second job whose window-0 schedule is released; one
 * thread drives N keep-alive connections (libcurl multi) that fetch it at a
 * fixed total rate. Latency counts from the intended send time (open loop:
 * a slow answer delays nothing else and is not hidden). ---- */
static char pjob[512];

static void *paced_setup(void *arg)
{
    int r = (int)(intptr_t)arg;
    erg_srv_client *c = NULL;
    erg_error err;
    erg_srv_client_opts o;
    erg_srv_client_opts_init(&o);
    o.schedule_wait_s = 60;
    if (erg_srv_client_new(url, &o, &c, &err))
        return (void *)1;
    const char *ps[] = {"forward", "backward"};
    static const int states[] = {1410, 1200};
    int *st = NULL;
    size_t ns;
    long win;
    bool done;
    void *ret = NULL;
    if (erg_srv_client_register_rank(c, pjob, r, r / PP, r % PP, 0, ps, 2, states, 2, &err) ||
        erg_srv_client_fetch_schedule(c, pjob, r, &st, &ns, &win, &done, &err) || done)
        ret = (void *)1;
    erg_free(st);
    erg_srv_client_free(c);
    return ret;
}

static size_t discard(char *p, size_t size, size_t n, void *user)
{
    (void)p;
    (void)user;
    return size * n;
}

static int cmp_d(const void *a, const void *b);
static void report(const char *what, double *v, size_t n);

static int paced_phase(void)
{
    CURLM *m = curl_multi_init();
    CURL **h = calloc((size_t)N, sizeof *h);
    double *start = calloc((size_t)N, sizeof *start);
    bool *busy = calloc((size_t)N, sizeof *busy);
    char *esc = curl_easy_escape(NULL, pjob, 0);
    for (int r = 0; r < N; r++) {
        char u[1024];
        snprintf(u, sizeof u, "%s/v1/jobs/%s/schedule?rank=%d&wait=0", url, esc, r);
        h[r] = curl_easy_init();
        curl_easy_setopt(h[r], CURLOPT_URL, u);
        curl_easy_setopt(h[r], CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(h[r], CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h[r], CURLOPT_PRIVATE, (void *)(intptr_t)r);
    }
    curl_free(esc);
    size_t cap = (size_t)(PACED_RATE * PACED_S) + 16, nl = 0;
    double *lat = calloc(cap, sizeof *lat);
    long sent = 0, errors = 0, skipped = 0;
    int running = 0, rr = 0;
    double t0 = now_s(), next = t0, end = t0 + PACED_S;
    for (;;) {
        double now = now_s();
        while (now >= next && next < end) {
            int r = -1;
            for (int k = 0; k < N && r < 0; k++, rr = (rr + 1) % N)
                if (!busy[rr])
                    r = rr;
            if (r >= 0 && nl + (size_t)sent < cap * 2) {
                start[r] = next;
                busy[r] = true;
                curl_multi_add_handle(m, h[r]);
                sent++;
            } else {
                skipped++;
            }
            next += 1.0 / PACED_RATE;
        }
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int q;
        while ((msg = curl_multi_info_read(m, &q))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            void *pv;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &pv);
            int r = (int)(intptr_t)pv;
            long code = 0;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            if (msg->data.result != CURLE_OK || code != 200)
                errors++;
            if (nl < cap)
                lat[nl++] = now_s() - start[r];
            curl_multi_remove_handle(m, msg->easy_handle);
            busy[r] = false;
        }
        if (next >= end && running == 0)
            break;
        double wait_ms = (next - now_s()) * 1000;
        curl_multi_poll(m, NULL, 0, wait_ms < 0 ? 0 : wait_ms > 10 ? 10 : (int)wait_ms, NULL);
    }
    double wall = now_s() - t0;
    printf("\npaced schedule fetches: %d keep-alive connections, %.0f requests/s offered for "
           "%.0f s (one client thread, libcurl multi)\n\n",
           N, PACED_RATE, PACED_S);
    printf("| %-28s | %6s | %8s | %8s | %8s | %8s |\n", "request", "count", "p50 ms", "p99 ms",
           "max ms", "mean ms");
    printf(
        "|------------------------------|--------|----------|----------|----------|----------|\n");
    if (nl)
        report("schedule fetch (paced)", lat, nl);
    printf("\nachieved %.0f requests/s; errors: %ld; not sent (all connections busy): %ld\n",
           (double)nl / wall, errors, skipped);
    for (int r = 0; r < N; r++)
        curl_easy_cleanup(h[r]);
    curl_multi_cleanup(m);
    free(h);
    free(start);
    free(busy);
    free(lat);
    return errors ? 1 : 0;
}

/* Run every handle of hs[0..n) at once on one multi handle; t_sent[i] gets
 * the time its request was sent (after its connection was made), t_done[i]
 * the time its answer was complete. Returns the number of non-200 answers. */
static int run_all(CURL **hs, int n, double *t_sent, double *t_done)
{
    CURLM *m = curl_multi_init();
    for (int i = 0; i < n; i++) {
        curl_easy_setopt(hs[i], CURLOPT_PRIVATE, (void *)(intptr_t)i);
        t_sent[i] = now_s();
        curl_multi_add_handle(m, hs[i]);
    }
    int running = 1, bad = 0;
    while (running) {
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int q;
        while ((msg = curl_multi_info_read(m, &q))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            void *pv;
            long code = 0;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &pv);
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            t_done[(intptr_t)pv] = now_s();
            /* When the request really left: after connecting. */
            curl_off_t pre = 0;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRETRANSFER_TIME_T, &pre);
            t_sent[(intptr_t)pv] += (double)pre * 1e-6;
            bad += msg->data.result != CURLE_OK || code != 200;
            curl_multi_remove_handle(m, msg->easy_handle);
        }
        if (running)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    curl_multi_cleanup(m);
    return bad;
}

/* Barriers seen from one event-driven client: every rank reports window w,
 * then all N schedule requests for window w+1 are sent at once; the
 * barrier-release latency of a rank is its answer's arrival minus the time
 * the last request was sent. */
static int multi_barrier_phase(void)
{
    const int rounds = 5;
    CURL **post = calloc((size_t)N, sizeof *post), **get = calloc((size_t)N, sizeof *get);
    double *ts = calloc((size_t)N, sizeof(double)), *td = calloc((size_t)N, sizeof(double));
    double *lat = calloc((size_t)N * rounds, sizeof(double));
    char *esc = curl_easy_escape(NULL, pjob, 0);
    int bad = 0;
    size_t nl = 0;
    for (int r = 0; r < N; r++) {
        char u[1024];
        post[r] = curl_easy_init();
        get[r] = curl_easy_init();
        snprintf(u, sizeof u, "%s/v1/jobs/%s/results", url, esc);
        curl_easy_setopt(post[r], CURLOPT_URL, u);
        snprintf(u, sizeof u, "%s/v1/jobs/%s/schedule?rank=%d&wait=60", url, esc, r);
        curl_easy_setopt(get[r], CURLOPT_URL, u);
        for (int k = 0; k < 2; k++) {
            CURL *e = k ? get[r] : post[r];
            curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
            curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        }
    }
    double wall0 = now_s();
    for (int w = 0; w < rounds && !bad; w++) {
        for (int r = 0; r < N; r++) {
            char body[160];
            snprintf(body, sizeof body,
                     "{\"rank\":%d,\"window\":%d,\"iter_time\":[1.0],\"iter_energy\":[100.0]}", r,
                     w);
            curl_easy_setopt(post[r], CURLOPT_COPYPOSTFIELDS, body);
        }
        bad += run_all(post, N, ts, td);
        bad += run_all(get, N, ts, td);
        double last = 0;
        for (int r = 0; r < N; r++)
            last = fmax(last, ts[r]);
        for (int r = 0; r < N; r++)
            lat[nl++] = fmax(0, td[r] - last);
    }
    double wall = now_s() - wall0;
    printf(
        "\nbarriers from one event-driven client (libcurl multi): %d rounds of N results "
        "then N schedule requests at once, %.2f s\n\n| %-28s | %6s | %8s | %8s | %8s | %8s |\n"
        "|------------------------------|--------|----------|----------|----------|----------|\n",
        rounds, wall, "request", "count", "p50 ms", "p99 ms", "max ms", "mean ms");
    if (nl)
        report("schedule: barrier release", lat, nl);
    printf("\nerrors: %d\n", bad);
    for (int r = 0; r < N; r++) {
        curl_easy_cleanup(post[r]);
        curl_easy_cleanup(get[r]);
    }
    curl_free(esc);
    free(post);
    free(get);
    free(ts);
    free(td);
    free(lat);
    return bad ? 1 : 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_d);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    printf("| %-28s | %6zu | %8.2f | %8.2f | %8.2f | %8.2f |\n", what, n, 1e3 * v[n / 2],
           1e3 * v[(size_t)floor(0.99 * (n - 1))], 1e3 * v[n - 1], 1e3 * sum / n);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            N = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--windows") && i + 1 < argc)
            W = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stages") && i + 1 < argc)
            PP = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--paced-rate") && i + 1 < argc)
            PACED_RATE = atof(argv[++i]);
        else if (!strcmp(argv[i], "--paced-seconds") && i + 1 < argc)
            PACED_S = atof(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--ranks N] [--windows W] [--stages S] [--paced-rate R] "
                    "[--paced-seconds T]\n"
                    "Load benchmark of ergon's control-plane server on loopback.\n",
                    argv[0]);
            return !strcmp(argv[i], "--help") ? 0 : 2;
        }
    }
    if (N < 1 || PP < 1 || N % PP || W < 1 || !(PACED_RATE > 0) || !(PACED_S >= 0)) {
        fprintf(stderr, "--ranks must be a positive multiple of --stages\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)(8 * N + 64)) {
        rl.rlim_cur = rl.rlim_max < (rlim_t)(8 * N + 64) ? rl.rlim_max : (rlim_t)(8 * N + 64);
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    char dir[] = "/tmp/ergon-bench-server-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char db[256];
    snprintf(db, sizeof db, "%s/state.sqlite", dir);
    erg_server_opts o;
    erg_server_opts_init(&o);
    o.port = 0;
    o.db_path = db;
    o.dump_data = false;
    o.scheduler = "AllMaxFrequency";
    char args[64];
    snprintf(args, sizeof args, "{\"num_iters\": %d}", W);
    o.scheduler_args = args;
    o.max_connections = (unsigned)(4 * N + 64);
    erg_server *srv = NULL;
    erg_error err;
    if (erg_server_new(&o, &srv, &err) || erg_server_start(srv, &err)) {
        fprintf(stderr, "server: %s\n", err.msg);
        return 1;
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d", erg_server_port(srv));
    erg_srv_client *c = NULL;
    erg_srv_client_new(url, NULL, &c, &err);
    erg_srv_job_desc d = {PP, N / PP, 1, N, "bench", "sim", "uniform", 1, M, NULL, NULL, NULL};
    char *id = NULL;
    if (erg_srv_client_register_job(c, &d, &id, &err)) {
        fprintf(stderr, "register job: %s\n", err.msg);
        return 1;
    }
    snprintf(job, sizeof job, "%s", id);
    erg_free(id);
    stats = calloc((size_t)N, sizeof *stats);
    for (int r = 0; r < N; r++) {
        stats[r].sched_sent = calloc((size_t)W, sizeof(double));
        stats[r].sched_recv = calloc((size_t)W, sizeof(double));
        stats[r].ready = calloc((size_t)W, sizeof(double));
        stats[r].report = calloc((size_t)W, sizeof(double));
        stats[r].hb = calloc((size_t)H, sizeof(double));
    }
    pthread_barrier_init(&hb_barrier, NULL, (unsigned)N);
    pthread_t *th = calloc((size_t)N, sizeof *th);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    double t_start = now_s();
    for (int r = 0; r < N; r++)
        if (pthread_create(&th[r], &attr, rank_main, (void *)(intptr_t)r)) {
            fprintf(stderr, "cannot create thread %d\n", r);
            return 1;
        }
    for (int r = 0; r < N; r++)
        pthread_join(th[r], NULL);
    double wall = now_s() - t_start;
    int errors = 0;
    for (int r = 0; r < N; r++)
        errors += stats[r].err;
    size_t nw = (size_t)N * (size_t)W, nh = (size_t)N * (size_t)H;
    double *v = calloc(nw > nh ? nw : nh, sizeof(double));
    printf("ergon serve load benchmark: %d ranks (%d stages x %d replicas), %d windows, "
           "%d heartbeats per rank, loopback, %ld CPUs online\n\n",
           N, PP, N / PP, W, H, sysconf(_SC_NPROCESSORS_ONLN));
    printf("| %-28s | %6s | %8s | %8s | %8s | %8s |\n", "request", "count", "p50 ms", "p99 ms",
           "max ms", "mean ms");
    printf(
        "|------------------------------|--------|----------|----------|----------|----------|\n");
    for (int r = 0; r < N; r++)
        v[r] = stats[r].reg;
    report("register rank", v, (size_t)N);
    size_t k = 0;
    for (int w = 0; w < W; w++) {
        double last = 0;
        for (int r = 0; r < N; r++)
            last = fmax(last, stats[r].sched_sent[w]);
        for (int r = 0; r < N; r++)
            v[k++] = fmax(0, stats[r].sched_recv[w] - last);
    }
    report("schedule: barrier release", v, nw);
    k = 0;
    for (int w = 0; w < W; w++)
        for (int r = 0; r < N; r++)
            v[k++] = stats[r].ready[w];
    report("schedule fetch (ready)", v, nw);
    k = 0;
    for (int w = 0; w < W; w++)
        for (int r = 0; r < N; r++)
            v[k++] = stats[r].report[w];
    report("report result", v, nw);
    k = 0;
    double hb_sum = 0;
    for (int h = 0; h < H; h++)
        for (int r = 0; r < N; r++) {
            v[k] = stats[r].hb[h];
            hb_sum += v[k++];
        }
    report("heartbeat", v, nh);
    long total = (long)N * (1 + 3 * W + H);
    printf("\nrequests: %ld in %.2f s wall (%.0f requests/s overall, barrier waits included); "
           "heartbeats: %.0f requests/s with %d concurrent clients; errors: %d\n",
           total, wall, total / wall, nh / (hb_sum / N), N, errors);
    int status;
    char *m = NULL;
    erg_srv_client_request(c, "GET", "/metrics", NULL, &status, &m, &err);
    /* Server-side handling time from the /metrics histogram (bucket bounds). */
    static const char *const groups[] = {"schedule", "result", "register", "other"};
    printf(
        "\nserver-side handling time (lock queueing included, barrier waits excluded; "
        "quantiles are histogram bucket bounds):\n\n| route    | count  | p50 <= ms | p99 <= ms |\n"
        "|----------|--------|-----------|-----------|\n");
    for (int g = 0; m && g < 4; g++) {
        double le[32];
        long cum[32];
        int nb = 0;
        char key[96];
        snprintf(key, sizeof key, "ergon_request_duration_seconds_bucket{route=\"%s\",le=\"",
                 groups[g]);
        for (const char *p = strstr(m, key); p && nb < 32; p = strstr(p + 1, key)) {
            const char *q = p + strlen(key);
            le[nb] = !strncmp(q, "+Inf", 4) ? INFINITY : atof(q);
            cum[nb++] = atol(strchr(q, '}') + 2);
        }
        if (!nb || !cum[nb - 1])
            continue;
        double p50 = 0, p99 = 0;
        for (int b = nb - 1; b >= 0; b--) {
            if (cum[b] >= 0.5 * cum[nb - 1])
                p50 = le[b];
            if (cum[b] >= 0.99 * cum[nb - 1])
                p99 = le[b];
        }
        printf("| %-8s | %6ld | %9.2f | %9.2f |\n", groups[g], cum[nb - 1], 1e3 * p50, 1e3 * p99);
    }
    const char *res = m ? strstr(m, "\nergon_results_total ") : NULL;
    printf("server: results acknowledged %ld (expected %ld)\n", res ? atol(res + 21) : -1L,
           (long)N * W);
    erg_free(m);
    /* The paced phase: a fresh job of N ranks, barrier once, then paced fetches. */
    int paced_err = 0;
    if (PACED_S > 0) {
        erg_srv_job_desc d2 = {PP,
                               N / PP,
                               1,
                               N,
                               "bench",
                               "paced",
                               "uniform",
                               1,
                               1,
                               "AllMaxFrequency",
                               "{\"num_iters\": 10}",
                               NULL};
        char *id2 = NULL;
        if (erg_srv_client_register_job(c, &d2, &id2, &err)) {
            fprintf(stderr, "register job: %s\n", err.msg);
            return 1;
        }
        snprintf(pjob, sizeof pjob, "%s", id2);
        erg_free(id2);
        for (int r = 0; r < N; r++)
            pthread_create(&th[r], &attr, paced_setup, (void *)(intptr_t)r);
        for (int r = 0; r < N; r++) {
            void *rv;
            pthread_join(th[r], &rv);
            paced_err |= rv != NULL;
        }
        if (paced_err)
            fprintf(stderr, "paced phase: a rank failed to register or fetch\n");
        else
            paced_err = paced_phase() | multi_barrier_phase();
    }
    erg_srv_client_free(c);
    erg_server_free(srv);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {
    }
    return errors || paced_err ? 1 : 0;
}
