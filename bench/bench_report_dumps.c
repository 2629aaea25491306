/* bench_report_dumps.c: latency of result reports with dumps on (issue 10: 2.8 ms median before,
 * 1.0 ms in the Python server): one job of N ranks, every result posted over HTTP on one
 * keep-alive connection, one after another, and timed one by one. */
#include "ergon/server.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * A Merak-sized window: each result holds I iterations, each with M forward,
 * M backward and M load samples (times and energies of forward/backward), as
 * the Perseus client sends them; N ranks (8 stages), W windows of
 * AllMaxFrequency, dumps on (N.prof.json, N.sched.json written when a window
 * completes: that is the last report of each window). Schedules are asked
 * through erg_server_handle (no wait), so the barrier opens without threads.
 * Reported: per-request client time (libcurl, loopback) of every report,
 * median, p90, p99, max; the window-completing reports separately.
 */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t sink(char *p, size_t size, size_t n, void *user)
{
    (void)p;
    (void)user;
    return size * n;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void append(char **b, size_t *len, size_t *cap, const char *s)
{
    size_t l = strlen(s);
    if (*len + l + 1 > *cap) {
        *cap = (*len + l + 1) * 2;
        *b = realloc(*b, *cap);
    }
    memcpy(*b + *len, s, l + 1);
    *len += l;
}

/* A ProfilingResult with measurement-like numbers (full-precision doubles). */
static char *result_body(int rank, int iters, int mb, unsigned *seed)
{
    char *b = NULL, num[64];
    size_t len = 0, cap = 0;
    snprintf(num, sizeof num, "{\"rank\": %d, \"iter_time\": [", rank);
    append(&b, &len, &cap, num);
    for (int i = 0; i < iters; i++) {
        snprintf(num, sizeof num, "%s%.17g", i ? ", " : "", 1.2 + rand_r(seed) / (double)RAND_MAX);
        append(&b, &len, &cap, num);
    }
    append(&b, &len, &cap, "], \"iter_energy\": [");
    for (int i = 0; i < iters; i++) {
        snprintf(num, sizeof num, "%s%.17g", i ? ", " : "",
                 300 + 50 * rand_r(seed) / (double)RAND_MAX);
        append(&b, &len, &cap, num);
    }
    static const char *const kinds[] = {"forward", "backward", "load"};
    for (int part = 0; part < 2; part++) {
        append(&b, &len, &cap, part ? "}, \"energy_breakdown\": {" : "], \"time_breakdown\": {");
        for (int k = 0; k < (part ? 2 : 3); k++) {
            snprintf(num, sizeof num, "%s\"%s\": [", k ? ", " : "", kinds[k]);
            append(&b, &len, &cap, num);
            for (int i = 0; i < iters; i++) {
                append(&b, &len, &cap, i ? ", [" : "[");
                for (int m = 0; m < mb; m++) {
                    snprintf(num, sizeof num, "%s%.17g", m ? ", " : "",
                             (part ? 5.0 : 0.02) * (1 + rand_r(seed) / (double)RAND_MAX));
                    append(&b, &len, &cap, num);
                }
                append(&b, &len, &cap, "]");
            }
            append(&b, &len, &cap, "]");
        }
    }
    append(&b, &len, &cap, "}}");
    return b;
}

int main(int argc, char **argv)
{
    int N = 256, PP = 8, W = 4, I = 30, MB = 32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            N = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--windows") && i + 1 < argc)
            W = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
            I = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--microbatches") && i + 1 < argc)
            MB = atoi(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--ranks N (256)] [--windows W (4)] [--iterations I (30)] "
                    "[--microbatches M (32)]\n",
                    argv[0]);
            return !strcmp(argv[i], "--help") ? 0 : 2;
        }
    }
    if (N < PP || N % PP || W < 1 || I < 1 || MB < 1) {
        fprintf(stderr, "--ranks must be a positive multiple of 8\n");
        return 2;
    }
    char dir[] = "/tmp/ergon-bench-report-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char db[300], dump[300];
    snprintf(db, sizeof db, "%s/state.sqlite", dir);
    snprintf(dump, sizeof dump, "%s/dump", dir);
    erg_server_opts o;
    erg_server_opts_init(&o);
    o.port = 0;
    o.db_path = db;
    o.dump_dir = dump;
    o.dump_data = true;
    o.scheduler = "AllMaxFrequency";
    char args[64];
    snprintf(args, sizeof args, "{\"num_iters\": %d}", W + 1);
    o.scheduler_args = args;
    erg_server *srv = NULL;
    erg_error err;
    if (erg_server_new(&o, &srv, &err) || erg_server_start(srv, &err)) {
        fprintf(stderr, "server: %s\n", err.msg);
        return 1;
    }
    int st;
    char *resp = NULL;
    const char *ct = NULL;
    char body[4096];
    snprintf(body, sizeof body,
             "{\"job_id\": \"\", \"pp_degree\": %d, \"dp_degree\": %d, \"tp_degree\": 1, "
             "\"world_size\": %d, \"framework\": \"bench\", \"model_name\": \"sim\", "
             "\"partition_method\": \"uniform\", \"microbatch_size\": 1, \"num_microbatches\": %d}",
             PP, N / PP, N, MB);
    erg_server_handle(srv, "POST", "/register_job", NULL, body, strlen(body), 0, &st, &resp, &ct);
    if (st != 200) {
        fprintf(stderr, "register_job: %d %s\n", st, resp);
        return 1;
    }
    char job[512];
    snprintf(job, sizeof job, "%.*s", (int)strlen(resp) - 2, resp + 1);
    erg_free(resp);
    /* pipe schedule: load, forward, p2p per microbatch, then backward, p2p; step */
    char ps[8192] = "[";
    for (int m = 0; m < MB; m++)
        strcat(ps, m ? ", \"load\", \"forward\", \"p2p\"" : "\"load\", \"forward\", \"p2p\"");
    for (int m = 0; m < MB; m++)
        strcat(ps, ", \"backward\", \"p2p\"");
    strcat(ps, ", \"step\"]");
    for (int r = 0; r < N; r++) {
        size_t rbn = strlen(ps) + 1024;
        char *rb = malloc(rbn);
        snprintf(rb, rbn,
                 "{\"job_id\": \"%s\", \"rank\": %d, \"dp_rank\": %d, \"pp_rank\": %d, "
                 "\"tp_rank\": 0, \"pipe_schedule\": %s, \"power_state_range\": [1410, 1395, "
                 "1380, 1365]}",
                 job, r, r / PP, r % PP, ps);
        erg_server_handle(srv, "POST", "/register_rank", NULL, rb, strlen(rb), 0, &st, &resp, &ct);
        free(rb);
        erg_free(resp);
        if (st != 200) {
            fprintf(stderr, "register_rank %d: %d\n", r, st);
            return 1;
        }
    }
    unsigned seed = 12345;
    char **bodies = calloc((size_t)N, sizeof *bodies);
    size_t bytes = 0;
    for (int r = 0; r < N; r++) {
        bodies[r] = result_body(r, I, MB, &seed);
        bytes += strlen(bodies[r]);
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *h = curl_easy_init();
    char url[1024], path[700];
    snprintf(path, sizeof path, "/result/%s", job);
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", erg_server_port(srv), path);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    double *lat = calloc((size_t)N * (size_t)W, sizeof(double)),
           *last = calloc((size_t)W, sizeof(double));
    size_t nl = 0;
    char spath[700];
    snprintf(spath, sizeof spath, "/schedule/%s", job);
    double t_all = now_s();
    for (int w = 0; w < W; w++) {
        for (int r = 0; r < N; r++) { /* every rank asks: the barrier opens */
            char q[32];
            snprintf(q, sizeof q, "rank=%d", r);
            erg_server_handle(srv, "GET", spath, q, NULL, 0, 0, &st, &resp, &ct);
            erg_free(resp);
        }
        for (int r = 0; r < N; r++) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, bodies[r]);
            double t0 = now_s();
            CURLcode cc = curl_easy_perform(h);
            double dt = now_s() - t0;
            long code = 0;
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
            if (cc != CURLE_OK || code != 200) {
                fprintf(stderr, "report window %d rank %d: %s %ld\n", w, r, curl_easy_strerror(cc),
                        code);
                return 1;
            }
            if (r == N - 1)
                last[w] = dt;
            else
                lat[nl++] = dt;
        }
    }
    double wall = now_s() - t_all;
    double sum = 0;
    for (size_t i = 0; i < nl; i++)
        sum += lat[i];
    for (int w = 0; w < W; w++)
        sum += last[w];
    /* all reports together, as a client sees them one after another */
    double *all = calloc(nl + (size_t)W, sizeof(double));
    memcpy(all, lat, nl * sizeof(double));
    memcpy(all + nl, last, (size_t)W * sizeof(double));
    size_t na = nl + (size_t)W;
    qsort(all, na, sizeof *all, cmp_d);
    qsort(lat, nl, sizeof *lat, cmp_d);
    qsort(last, (size_t)W, sizeof *last, cmp_d);
    double loadavg[1] = {0};
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf", &loadavg[0]) != 1)
            loadavg[0] = -1;
        fclose(la);
    }
    printf("result reports with dumps on: %d ranks (%d stages), %d windows, %d iterations x %d "
           "microbatches per result (%.1f KB of JSON each), loopback, one keep-alive "
           "connection, %ld CPUs, load average %.1f\n\n",
           N, PP, W, I, MB, bytes / (double)N / 1024, sysconf(_SC_NPROCESSORS_ONLN), loadavg[0]);
    printf("| reports | count | p50 ms | p90 ms | p99 ms | max ms |\n|---|---|---|---|---|---|\n");
    printf("| not completing a window | %zu | %.3f | %.3f | %.3f | %.3f |\n", nl, lat[nl / 2] * 1e3,
           lat[nl * 9 / 10] * 1e3, lat[nl * 99 / 100] * 1e3, lat[nl - 1] * 1e3);
    printf("| completing a window (writes N.prof.json of %d results) | %d | %.1f | | | %.1f |\n", N,
           W, last[W / 2] * 1e3, last[W - 1] * 1e3);
    printf("| all reports | %zu | %.3f | %.3f | %.3f | %.1f |\n", na, all[na / 2] * 1e3,
           all[na * 9 / 10] * 1e3, all[na * 99 / 100] * 1e3, all[na - 1] * 1e3);
    printf("\nmean of all reports %.3f ms; %.2f s for %d reports\n", sum / (double)na * 1e3, wall,
           N * W);
    free(all);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    erg_server_free(srv);
    for (int r = 0; r < N; r++)
        free(bodies[r]);
    free(bodies);
    free(lat);
    free(last);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        return 1;
    return 0;
}
