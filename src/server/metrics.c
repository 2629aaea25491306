/* metrics.c: the server's Prometheus text (/metrics) and its request counters and latency
 * histogram. */
#include "server/jobs.h"
#include "server/fleet.h"

#include <math.h>

const double erg__srv_hist_bounds[SRV_HIST_BUCKETS] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                                       0.0025,  0.005,  0.01,    0.025,  0.05,
                                                       0.1,     0.25,   0.5,     1,      2.5};

void erg__srv_metrics_observe(erg_server *srv, int group, int status, double dt)
{
    if (status >= 100 && status < 600)
        srv->requests_by_class[status / 100]++;
    int bk = 0;
    while (bk < SRV_HIST_BUCKETS && dt > erg__srv_hist_bounds[bk])
        bk++;
    srv->hist[group][bk]++;
    srv->hist_sum[group] += dt > 0 ? dt : 0;
}

void erg__srv_metrics_text(erg_server *srv, srv_resp *rs)
{
    int by_state[SRV_JOB_NUM_STATES] = {0};
    long ranks = 0, waiting = 0;
    double energy = 0, saved = 0;
    for (srv_job *j = srv->jobs; j; j = j->next) {
        by_state[j->state]++;
        ranks += j->n_registered;
        waiting += j->waiters;
        /* Results are bounded (router.c); a database written before that
         * may still hold absurd ones: they never make the total inf. */
        if (isfinite(j->energy_j) && isfinite(j->saved_j) && isfinite(energy + j->energy_j) &&
            isfinite(saved + j->saved_j)) {
            energy += j->energy_j;
            saved += j->saved_j;
        }
    }
    erg__buf b = {0};
    erg__buf_printf(&b, "# HELP ergon_jobs Jobs held by the server, by state.\n"
                        "# TYPE ergon_jobs gauge\n");
    for (int s = 0; s < SRV_JOB_NUM_STATES; s++)
        erg__buf_printf(&b, "ergon_jobs{state=\"%s\"} %d\n", erg__srv_job_state_name(s),
                        by_state[s]);
    char e1[40], e2[40];
    erg__buf_printf(
        &b,
        "# HELP ergon_ranks_registered Ranks registered in jobs held by the server.\n"
        "# TYPE ergon_ranks_registered gauge\nergon_ranks_registered %ld\n"
        "# HELP ergon_requests_waiting Schedule requests waiting at a window barrier.\n"
        "# TYPE ergon_requests_waiting gauge\nergon_requests_waiting %ld\n"
        "# HELP ergon_windows_completed_total Windows whose results all arrived (this process).\n"
        "# TYPE ergon_windows_completed_total counter\nergon_windows_completed_total %ld\n"
        "# HELP ergon_results_total Results acknowledged (this process).\n"
        "# TYPE ergon_results_total counter\nergon_results_total %ld\n"
        "# HELP ergon_jobs_evicted_total Jobs evicted after being idle (this process).\n"
        "# TYPE ergon_jobs_evicted_total counter\nergon_jobs_evicted_total %ld\n"
        "# HELP ergon_energy_joules Measured GPU energy of the completed windows of held jobs.\n"
        "# TYPE ergon_energy_joules gauge\nergon_energy_joules %s\n"
        "# HELP ergon_energy_saved_joules Energy saved against each job's all-max windows.\n"
        "# TYPE ergon_energy_saved_joules gauge\nergon_energy_saved_joules %s\n"
        "# HELP ergon_http_requests_total HTTP requests answered, by status class.\n"
        "# TYPE ergon_http_requests_total counter\n",
        ranks, waiting, srv->windows_completed, srv->results_total, srv->evicted_total,
        erg__fmt_double_py(energy, e1, sizeof e1), erg__fmt_double_py(saved, e2, sizeof e2));
    for (int c = 1; c < 6; c++)
        erg__buf_printf(&b, "ergon_http_requests_total{code=\"%dxx\"} %ld\n", c,
                        srv->requests_by_class[c]);
    static const char *const groups[SRV_HIST_GROUPS] = {"schedule", "result", "register", "other"};
    erg__buf_printf(&b, "# HELP ergon_request_duration_seconds Server-side handling time of a "
                        "request (lock queueing included, barrier waits excluded).\n"
                        "# TYPE ergon_request_duration_seconds histogram\n");
    for (int g = 0; g < SRV_HIST_GROUPS; g++) {
        long cum = 0;
        char le[40];
        for (int k = 0; k <= SRV_HIST_BUCKETS; k++) {
            cum += srv->hist[g][k];
            if (k < SRV_HIST_BUCKETS)
                erg__fmt_double_py(erg__srv_hist_bounds[k], le, sizeof le);
            else
                snprintf(le, sizeof le, "+Inf");
            erg__buf_printf(&b,
                            "ergon_request_duration_seconds_bucket{route=\"%s\",le=\"%s\"} %ld\n",
                            groups[g], le, cum);
        }
        erg__buf_printf(&b, "ergon_request_duration_seconds_sum{route=\"%s\"} %s\n", groups[g],
                        erg__fmt_double_py(srv->hist_sum[g], le, sizeof le));
        erg__buf_printf(&b, "ergon_request_duration_seconds_count{route=\"%s\"} %ld\n", groups[g],
                        cum);
    }
    erg__srv_fleet_metrics(srv, &b);
    rs->status = 200;
    rs->ctype = "text/plain; version=0.0.4";
    rs->body = b.data ? b.data : erg__strdup("");
}
