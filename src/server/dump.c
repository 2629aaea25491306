/* dump.c: the per-job dump files in the Perseus layout (perseus.json, ranks.json, N.sched.json,
 * N.prof.json), written as Python's json.dumps would. */
#include "server/jobs.h"
#include "server/store.h"
#include "server/zeus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

json_t *erg__srv_server_info_json(erg_server *srv, const char *sched, const json_t *args, int mode)
{
    static const char *const lv[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
    return json_pack("{s:s,s:O,s:s,s:s,s:b,s:s}", "scheduler", sched, "scheduler_args", args,
                     "log_level", lv[srv->opts.log_level], "mode",
                     mode == SRV_MODE_ANY ? "unspecified" : erg__srv_mode_name(mode), "dump_data",
                     srv->opts.dump_data, "dump_dir", srv->dump_dir);
}

erg_status erg__srv_dump_dir_check(erg_server *srv, erg_error *err)
{
    erg_error e;
    if (erg__mkdir_p(srv->dump_dir, &e))
        return erg_error_set(err, ERG_EIO, "dump directory %s cannot be created: %s", srv->dump_dir,
                             e.msg);
    struct stat sb;
    if (stat(srv->dump_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return erg_error_set(err, ERG_EIO, "dump directory %s is not a directory", srv->dump_dir);
    /* Writable: create and remove a file (access() would say yes to root on a
     * read-only file system). */
    erg__buf probe = {0};
    if (erg__buf_printf(&probe, "%s/.ergon-write-test-XXXXXX", srv->dump_dir))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    int fd = mkstemp(probe.data);
    if (fd < 0 && (errno == ENOSPC || errno == EDQUOT)) {
        /* A full disk is a passing state, not a misconfiguration: refusing to start would turn
         * it into an outage of every job. Dumps wait in memory until the disk takes them. */
        erg__srv_log(
            srv, ERG_LOG_WARNING, "dump", NULL,
            "dump directory %s is full (%s): starting anyway; dumps wait in memory and are "
            "written as soon as the disk has room",
            srv->dump_dir, strerror(errno));
        erg__buf_free(&probe);
        return ERG_OK;
    }
    if (fd < 0) {
        erg_status st = erg_error_set(err, ERG_EIO,
                                      "dump directory %s is not writable: %s (use --no-dump to run "
                                      "without dumps)",
                                      srv->dump_dir, strerror(errno));
        erg__buf_free(&probe);
        return st;
    }
    close(fd);
    unlink(probe.data);
    erg__buf_free(&probe);
    return ERG_OK;
}

bool erg__srv_dump_claim_dir(erg_server *srv, const char *id)
{
    if (!srv->opts.dump_data)
        return true;
    erg__buf d = {0};
    if (erg__buf_printf(&d, "%s/%s", srv->dump_dir, id))
        return true; /* out of memory: the dump code will say so */
    erg_error e;
    (void)erg__mkdir_p(srv->dump_dir, &e); /* the root may have been removed */
    bool taken = mkdir(d.data, 0777) != 0 && errno == EEXIST;
    erg__buf_free(&d);
    return !taken;
}

void erg__srv_dump_unclaim_dir(erg_server *srv, const char *id)
{
    erg__buf d = {0};
    if (srv->opts.dump_data && !erg__buf_printf(&d, "%s/%s", srv->dump_dir, id))
        (void)rmdir(d.data); /* only while empty */
    erg__buf_free(&d);
}

/* A dump file waiting for the disk. */
typedef struct srv_dump_file {
    char *name;
    char *data;
    size_t len;
    bool only_if_missing;
    struct srv_dump_file *next;
} srv_dump_file;

#define SRV_DUMP_QUEUE_MAX_BYTES ((size_t)256 << 20)

static erg_status write_now(const srv_job *j, const srv_dump_file *f, erg_error *err)
{
    erg_status st = erg__mkdir_p(j->ctx.job_dir, err);
    if (st)
        return st;
    erg__buf path = {0};
    if (erg__buf_printf(&path, "%s/%s", j->ctx.job_dir, f->name))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    struct stat sb;
    if (!(f->only_if_missing && stat(path.data, &sb) == 0))
        st = erg__write_file(path.data, f->data, f->len, err);
    erg__buf_free(&path);
    return st;
}

static void file_free(srv_dump_file *f)
{
    erg__free(f->name);
    erg__free(f->data);
    erg__free(f);
}

void erg__srv_dump_queue_free(srv_job *j)
{
    while (j->dump_q) {
        srv_dump_file *f = j->dump_q;
        j->dump_q = f->next;
        file_free(f);
    }
    j->dump_q_bytes = 0;
}

/* Write the job's queue in order until the disk refuses; true when empty. */
static bool flush_job(erg_server *srv, srv_job *j)
{
    int written = 0;
    erg_error e;
    while (j->dump_q) {
        srv_dump_file *f = j->dump_q;
        if (write_now(j, f, &e))
            break;
        j->dump_q = f->next;
        j->dump_q_bytes -= f->len;
        file_free(f);
        written++;
    }
    if (written)
        erg__srv_log(srv, j->dump_q ? ERG_LOG_WARNING : ERG_LOG_INFO, "dump", j->id,
                     "%d deferred dump file(s) written%s", written,
                     j->dump_q ? "; more still wait for the disk" : "");
    return !j->dump_q;
}

void erg__srv_dumps_flush(erg_server *srv)
{
    for (srv_job *j = srv->jobs; j; j = j->next)
        if (j->dump_q)
            flush_job(srv, j);
}

/* Write (or defer) one dump file; data is consumed. Never fails the job. */
static void dump_put(erg_server *srv, srv_job *j, const char *name, char *data, size_t len,
                     bool only_if_missing)
{
    srv_dump_file *f = erg__calloc(1, sizeof *f);
    char *nm = erg__strdup(name);
    if (!f || !nm) {
        erg__free(f);
        erg__free(nm);
        erg__free(data);
        erg__srv_log(srv, ERG_LOG_ERROR, "dump", j->id, "dump %s dropped: out of memory", name);
        return;
    }
    *f = (srv_dump_file){nm, data, len, only_if_missing, NULL};
    erg_error e;
    if (!j->dump_q) {
        erg_status st = write_now(j, f, &e);
        if (!st) {
            file_free(f);
            return;
        }
        erg__srv_log(srv, ERG_LOG_WARNING, "dump", j->id,
                     "dump %s deferred (the job goes on; retried until the disk takes it): %s",
                     name, e.msg);
        erg__srv_store_event(srv, j->id, "dump_deferred", e.msg);
    }
    size_t total = 0;
    for (srv_job *o = srv->jobs; o; o = o->next)
        total += o->dump_q_bytes;
    if (total + len > SRV_DUMP_QUEUE_MAX_BYTES) {
        erg__srv_log(
            srv, ERG_LOG_ERROR, "dump", j->id,
            "dump %s dropped: %zu bytes of dumps already wait for the disk (its results are "
            "in the database)",
            name, total);
        erg__srv_store_event(srv, j->id, "dump_dropped", name);
        file_free(f);
        return;
    }
    srv_dump_file **tail = &j->dump_q;
    while (*tail)
        tail = &(*tail)->next;
    *tail = f;
    j->dump_q_bytes += len;
    if (j->dump_q != f)
        flush_job(srv, j); /* keep the order: older ones first */
}

static erg_status put_json(erg_server *srv, srv_job *j, const char *name, const json_t *v,
                           bool only_if_missing, erg_error *err)
{
    erg__buf b = {0};
    if (!v || erg__srv_json_py(v, &b)) {
        erg__buf_free(&b);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    if (!b.data && !(b.data = erg__strdup("")))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    dump_put(srv, j, name, b.data, b.len, only_if_missing);
    return ERG_OK;
}

/* The schedulers' own files (InstructionProfiler's CSV, Zeus*.json). */
static erg_status sched_write(void *user, const char *name, const char *data, size_t len,
                              erg_error *err)
{
    srv_job *j = user;
    char *copy = erg__malloc(len + 1);
    if (!copy)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    memcpy(copy, data, len);
    copy[len] = 0;
    dump_put(j->srv, j, name, copy, len, false);
    return ERG_OK;
}

static const char *info_str(const json_t *info, const char *key)
{
    const char *s = json_string_value(json_object_get(info, key));
    return s ? s : "";
}

erg_status erg__srv_dump_job_start(erg_server *srv, srv_job *j, erg_error *err)
{
    srv_sched_ctx *c = &j->ctx;
    if (!srv->opts.dump_data)
        return ERG_OK;
    erg__buf d = {0}, n = {0};
    const json_t *in = j->info;
    bool zeus = srv_job_is_zeus(j);
    if (zeus) {
        /* Zeus: no perseus.json; ranks.json with RankInfo's fields only. */
        char *csv = erg__srv_zeus_csv_name(j);
        if (erg__buf_printf(&d, "%s/%s", srv->dump_dir, j->id) || !csv) {
            erg__free(csv);
            erg__buf_free(&d);
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
        c->job_dir = d.data;
        c->profile_csv_name = csv;
        c->write_file = sched_write;
        c->write_user = j;
        json_t *ranks = json_array();
        for (int r = 0; ranks && r < j->world; r++)
            json_array_append_new(ranks, erg__srv_zeus_rank_dump(j, j->ranks[r].info));
        erg_status st = put_json(srv, j, "ranks.json", ranks, false, err);
        json_decref(ranks);
        return st;
    }
    /* InstructionProfiler's CSV: <framework>+<model>+<partition>+dp+tp+pp+mbs+nmb.csv */
    if (erg__buf_printf(&d, "%s/%s", srv->dump_dir, j->id) ||
        erg__buf_printf(&n, "%s+%s+%s+dp%d+tp%d+pp%d+mbs%d+nmb%d.csv", info_str(in, "framework"),
                        info_str(in, "model_name"), info_str(in, "partition_method"), j->dp, j->tp,
                        j->pp, (int)json_integer_value(json_object_get(in, "microbatch_size")),
                        (int)json_integer_value(json_object_get(in, "num_microbatches")))) {
        erg__buf_free(&d);
        erg__buf_free(&n);
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    c->job_dir = d.data;
    c->profile_csv_name = n.data;
    c->write_file = sched_write;
    c->write_user = j;
    json_t *si = erg__srv_server_info_json(srv, j->sched_name, j->sched_args, j->mode);
    json_t *ranks = json_array();
    for (int r = 0; ranks && r < j->world; r++)
        json_array_append(ranks, j->ranks[r].info);
    erg_status st = put_json(srv, j, "perseus.json", si, false, err);
    if (!st)
        st = put_json(srv, j, "ranks.json", ranks, false, err);
    json_decref(si);
    json_decref(ranks);
    return st;
}

static json_t *sched_dump_json(const srv_job *j)
{
    json_t *a = json_array();
    for (int r = 0; a && r < j->world; r++) {
        int s = j->ranks[r].pp;
        json_t *ps = json_array();
        for (int i = 0; ps && i < j->ctx.n_instrs[s]; i++)
            json_array_append_new(ps, json_integer(j->cur[s][i]));
        json_t *o = json_object();
        json_object_set_new(o, "rank", json_integer(r));
        json_object_set_new(o, "power_states", ps);
        json_array_append_new(a, o);
    }
    return a;
}

erg_status erg__srv_dump_window(erg_server *srv, srv_job *j, bool replay, erg_error *err)
{
    if (!srv->opts.dump_data || !j->ctx.job_dir)
        return ERG_OK;
    json_t *res = json_array();
    for (int r = 0; res && r < j->world; r++)
        json_array_append(res, j->results[r]);
    json_t *sch = srv_job_is_zeus(j) ? erg__srv_zeus_sched_dump(j) : sched_dump_json(j);
    char name[64];
    snprintf(name, sizeof name, "%ld.prof.json", j->window);
    erg_status st = put_json(srv, j, name, res, replay, err);
    snprintf(name, sizeof name, "%ld.sched.json", j->window);
    if (!st)
        st = put_json(srv, j, name, sch, replay, err);
    json_decref(res);
    json_decref(sch);
    return st;
}
