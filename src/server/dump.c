/* dump.c: the per-job dump files in the Perseus layout (perseus.json, ranks.json, N.sched.json,
 * N.prof.json), written as Python's json.dumps would. */
#include "server/jobs.h"
#include "server/zeus.h"

#include <string.h>
#include <sys/stat.h>

json_t *srv_server_info_json(erg_server *srv, const char *sched, const json_t *args, int mode)
{
    static const char *const lv[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
    return json_pack("{s:s,s:O,s:s,s:s,s:b,s:s}", "scheduler", sched, "scheduler_args", args,
                     "log_level", lv[srv->opts.log_level], "mode",
                     mode == SRV_MODE_ANY ? "unspecified" : srv_mode_name(mode), "dump_data",
                     srv->opts.dump_data, "dump_dir", srv->dump_dir);
}

static erg_status write_json_file(const char *dir, const char *name, const json_t *v,
                                  bool only_if_missing, erg_error *err)
{
    erg__buf path = {0}, b = {0};
    erg_status st = erg__buf_printf(&path, "%s/%s", dir, name);
    struct stat sb;
    if (!st && only_if_missing && stat(path.data, &sb) == 0)
        goto out;
    if (!st)
        st = srv_json_py(v, &b);
    if (st)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    else
        st = erg__write_file(path.data, b.data ? b.data : "", b.len, err);
out:
    erg__buf_free(&path);
    erg__buf_free(&b);
    return st;
}

static const char *info_str(const json_t *info, const char *key)
{
    const char *s = json_string_value(json_object_get(info, key));
    return s ? s : "";
}

erg_status srv_dump_job_start(erg_server *srv, srv_job *j, erg_error *err)
{
    srv_sched_ctx *c = &j->ctx;
    if (!srv->opts.dump_data)
        return ERG_OK;
    erg__buf d = {0}, n = {0};
    const json_t *in = j->info;
    bool zeus = srv_job_is_zeus(j);
    if (zeus) {
        /* Zeus: no perseus.json; ranks.json with RankInfo's fields only. */
        char *csv = srv_zeus_csv_name(j);
        if (erg__buf_printf(&d, "%s/%s", srv->dump_dir, j->id) || !csv) {
            erg__free(csv);
            erg__buf_free(&d);
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        }
        c->job_dir = d.data;
        c->profile_csv_name = csv;
        erg_status st = erg__mkdir_p(c->job_dir, err);
        if (st)
            return st;
        json_t *ranks = json_array();
        for (int r = 0; ranks && r < j->world; r++)
            json_array_append_new(ranks, srv_zeus_rank_dump(j, j->ranks[r].info));
        st = ranks ? write_json_file(c->job_dir, "ranks.json", ranks, false, err)
                   : erg_error_set(err, ERG_ENOMEM, "out of memory");
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
    erg_status st = erg__mkdir_p(c->job_dir, err);
    if (st)
        return st;
    json_t *si = srv_server_info_json(srv, j->sched_name, j->sched_args, j->mode);
    json_t *ranks = json_array();
    for (int r = 0; ranks && r < j->world; r++)
        json_array_append(ranks, j->ranks[r].info);
    if (!si || !ranks)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (!st)
        st = write_json_file(c->job_dir, "perseus.json", si, false, err);
    if (!st)
        st = write_json_file(c->job_dir, "ranks.json", ranks, false, err);
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

erg_status srv_dump_window(erg_server *srv, srv_job *j, bool replay, erg_error *err)
{
    if (!srv->opts.dump_data || !j->ctx.job_dir)
        return ERG_OK;
    erg_status st = ERG_OK;
    json_t *res = json_array();
    for (int r = 0; res && r < j->world; r++)
        json_array_append(res, j->results[r]);
    json_t *sch = srv_job_is_zeus(j) ? srv_zeus_sched_dump(j) : sched_dump_json(j);
    char name[64];
    snprintf(name, sizeof name, "%ld.prof.json", j->window);
    if (!res || !sch)
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    if (!st)
        st = write_json_file(j->ctx.job_dir, name, res, replay, err);
    snprintf(name, sizeof name, "%ld.sched.json", j->window);
    if (!st)
        st = write_json_file(j->ctx.job_dir, name, sch, replay, err);
    json_decref(res);
    json_decref(sch);
    return st;
}
