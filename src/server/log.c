/* log.c: the server's clocks (and the time job ids begin with) and its structured log (one
 * JSON object per record). */
#include "server/server_internal.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>

double erg__srv_now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double erg__srv_now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void erg__srv_job_id_time(char ts[SRV_JOB_ID_TIME_LEN])
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(ts, SRV_JOB_ID_TIME_LEN, "%Y-%m-%d-%H-%M-%S", &tm);
}

void erg__srv_log(erg_server *srv, erg_log_level lvl, const char *event, const char *job_id,
                  const char *fmt, ...)
{
    if (!srv->opts.log || lvl < srv->opts.log_level)
        return;
    static const char *const names[] = {"debug", "info", "warning", "error"};
    char msg[1024] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    char ts[40];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ".%03ldZ", now.tv_nsec / 1000000);
    json_t *o = json_pack("{s:s,s:s,s:s}", "ts", ts, "level", names[lvl], "event", event);
    if (!o)
        return;
    if (job_id)
        json_object_set_new(o, "job_id", json_string(job_id));
    if (msg[0])
        json_object_set_new(o, "msg", json_string(msg));
    char *line = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (line) {
        pthread_mutex_lock(&srv->log_mu);
        srv->opts.log(srv->opts.log_user, lvl, line);
        pthread_mutex_unlock(&srv->log_mu);
        free(line);
    }
}

void erg_server_log(erg_server *srv, erg_log_level level, const char *event, const char *msg)
{
    if (srv && event)
        erg__srv_log(srv, level, event, NULL, msg ? "%s" : NULL, msg);
}
