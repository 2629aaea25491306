/* test_server_r4.c: regression tests of issue 38 ("Reliability r4", server items): memory a
 * registration can pin, acknowledged writes to a database deleted under the server, two
 * servers sharing a dump directory, and --allow-net networks wider than a private range. Each
 * test is named after the behaviour it guards. */
#include "tap.h"

#include "ergon/server.h"
#include "server/jobs.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sqlite3.h>
#include <sys/stat.h>

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ergon-r4-XXXXXX");
    ASSERT(mkdtemp(tmpdir));
}

/* ---- jansson's allocations, counted (json_set_alloc_funcs): a deterministic measure of the
 * memory parsed JSON holds. Sizes come from malloc_usable_size, so no header is needed (the
 * library frees json_dumps text with free(); such text is never subtracted, which can only
 * overstate what is live). ---- */
static size_t js_live, js_peak;

static void *count_malloc(size_t n)
{
    void *p = malloc(n);
    if (p) {
        size_t now = __atomic_add_fetch(&js_live, malloc_usable_size(p), __ATOMIC_RELAXED);
        if (now > __atomic_load_n(&js_peak, __ATOMIC_RELAXED))
            __atomic_store_n(&js_peak, now, __ATOMIC_RELAXED);
    }
    return p;
}

static void count_free(void *p)
{
    if (p)
        __atomic_sub_fetch(&js_live, malloc_usable_size(p), __ATOMIC_RELAXED);
    free(p);
}

/* Call first in a test (each test runs in its own process): nothing jansson allocated before
 * may be freed through the counter. */
static void count_json_allocations(void)
{
    json_set_alloc_funcs(count_malloc, count_free);
}

/* ---- the server ---- */

static char logbuf[1 << 16];
static size_t loglen;

static void log_sink(void *user, erg_log_level lvl, const char *line)
{
    (void)user;
    (void)lvl;
    size_t n = strlen(line);
    if (loglen + n + 2 < sizeof logbuf) {
        memcpy(logbuf + loglen, line, n);
        loglen += n;
        logbuf[loglen++] = '\n';
        logbuf[loglen] = 0;
    }
}

static void base_opts(erg_server_opts *o, const char *db)
{
    erg_server_opts_init(o);
    o->db_path = db;
    o->dump_data = false;
    o->scheduler = "AllMaxFrequency";
    o->scheduler_args = "{\"num_iters\":1000000}";
    o->mode = "frequency";
    o->log = log_sink;
}

static erg_server *new_server(const erg_server_opts *o)
{
    erg_server *srv = NULL;
    erg_error err;
    erg_status st = erg_server_new(o, &srv, &err);
    ASSERT_MSG(st == ERG_OK, "erg_server_new: %s", err.msg);
    return srv;
}

static int call(erg_server *srv, const char *method, const char *path, const char *body, size_t len,
                char **out)
{
    int status = 0;
    char *resp = NULL;
    const char *ct;
    ASSERT_EQ_INT(erg_server_handle(srv, method, path, NULL, body, len, 0, &status, &resp, &ct),
                  ERG_OK);
    ASSERT(resp && ct);
    if (out)
        *out = resp;
    else
        erg_free(resp);
    return status;
}

#define JOBINFO_FIELDS                                                                             \
    "\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":2,"            \
    "\"framework\":\"t\",\"model_name\":\"m\",\"partition_method\":\"u\","                         \
    "\"microbatch_size\":1,\"num_microbatches\":1"

/* A JobInfo body with one more field "blob" holding a JSON array of n zeros (what the
 * attacker sent: 2 bytes of text, one jansson integer each), and a small unknown field. */
static char *jobinfo_with_zeros(size_t n, size_t *len)
{
    const char *head = "{" JOBINFO_FIELDS ",\"run_tag\":\"kept\",\"blob\":[";
    size_t hl = strlen(head), cap = hl + 2 * n + 8;
    char *b = malloc(cap);
    ASSERT(b);
    memcpy(b, head, hl);
    size_t o = hl;
    for (size_t i = 0; i < n; i++) {
        if (i)
            b[o++] = ',';
        b[o++] = '0';
    }
    memcpy(b + o, "]}", 3);
    *len = o + 2;
    return b;
}

/* The info column of the jobs table (every row, space-separated), read with SQLite. */
static char *stored_infos(const char *db)
{
    sqlite3 *q;
    ASSERT(sqlite3_open(db, &q) == SQLITE_OK);
    sqlite3_stmt *st;
    ASSERT(sqlite3_prepare_v2(q, "SELECT group_concat(info, ' ') FROM jobs", -1, &st, NULL) ==
           SQLITE_OK);
    ASSERT(sqlite3_step(st) == SQLITE_ROW);
    const char *t = (const char *)sqlite3_column_text(st, 0);
    char *r = strdup(t ? t : "");
    sqlite3_finalize(st);
    sqlite3_close(q);
    return r;
}

/* ---------------------------------------------------------------------
 * Item 2: a registration cannot pin memory: unknown JobInfo fields are kept up to
 * SRV_JOBINFO_UNKNOWN_MAX_BYTES, a JobInfo body is at most SRV_JOBINFO_MAX_BYTES.
 * --------------------------------------------------------------------- */

TEST(registration_memory_is_bounded_and_unknown_fields_are_not_stored)
{
    count_json_allocations();
    make_tmpdir();
    char db[400];
    snprintf(db, sizeof db, "%s/s.db", tmpdir);
    erg_server_opts o;
    base_opts(&o, db);
    erg_server *srv = new_server(&o);
    const char *routes[] = {"/register_job", "/v1/jobs"};
    /* 2 M zeros: 4 MB of text, ~100 MB as parsed JSON (the attack sent 15 MB: 288 MB pinned). */
    size_t len;
    char *big = jobinfo_with_zeros((size_t)2 << 20, &len);
    for (int r = 0; r < 2; r++) {
        size_t before = js_live;
        js_peak = js_live;
        char *resp = NULL;
        int st = call(srv, "POST", routes[r], big, len, &resp);
        size_t peak = js_peak - before, held = js_live - before;
        fprintf(stderr, "# %s with a %zu-byte JobInfo: %d, JSON peak %zu bytes, held %zu bytes\n",
                routes[r], len, st, peak, held);
        ASSERT_MSG(st == 413, "%s: a %zu-byte JobInfo got %d %s", routes[r], len, st, resp);
        ASSERT_CONTAINS(resp, "JobInfo");
        erg_free(resp);
        ASSERT_MSG(peak < ((size_t)4 << 20), "%s: parsing the JobInfo took %zu bytes", routes[r],
                   peak);
        ASSERT_MSG(held < ((size_t)64 << 10), "%s: the registration holds %zu bytes", routes[r],
                   held);
    }
    free(big);
    /* Under the body limit: the job registers, its large unknown field is dropped (logged),
     * the small one is kept. */
    char *mid = jobinfo_with_zeros(20000, &len);
    size_t before = js_live;
    char *resp = NULL;
    int st = call(srv, "POST", "/v1/jobs", mid, len, &resp);
    ASSERT_MSG(st == 201, "a %zu-byte JobInfo: %d %s", len, st, resp);
    erg_free(resp);
    free(mid);
    size_t held = js_live - before;
    ASSERT_MSG(held < ((size_t)64 << 10), "the registration holds %zu bytes", held);
    ASSERT_CONTAINS(logbuf, "not stored: \\\"blob\\\"");
    erg_server_free(srv);
    char *infos = stored_infos(db);
    ASSERT_MSG(strlen(infos) < 4096, "the jobs table holds %zu bytes of JobInfo: %.200s",
               strlen(infos), infos);
    ASSERT(!strstr(infos, "blob"));
    ASSERT_CONTAINS(infos, "\"run_tag\":\"kept\"");
    free(infos);
    /* A row an earlier server stored with such a field (before registrations were bounded) is
     * trimmed at restore and rewritten. */
    char *legacy = jobinfo_with_zeros(100000, &len);
    sqlite3 *q;
    ASSERT(sqlite3_open(db, &q) == SQLITE_OK);
    sqlite3_stmt *ins;
    ASSERT(sqlite3_prepare_v2(q,
                              "INSERT INTO jobs(job_id, info, scheduler, scheduler_args, mode, "
                              "state, message, created) VALUES('legacy', ?, 'AllMaxFrequency', "
                              "'{}', 0, 'registering', '', 1)",
                              -1, &ins, NULL) == SQLITE_OK);
    sqlite3_bind_text(ins, 1, legacy, (int)len, SQLITE_TRANSIENT);
    ASSERT(sqlite3_step(ins) == SQLITE_DONE);
    sqlite3_finalize(ins);
    sqlite3_close(q);
    free(legacy);
    /* After a restart nothing of it is loaded. */
    before = js_live;
    srv = new_server(&o);
    held = js_live - before;
    ASSERT_MSG(held < ((size_t)64 << 10), "the restored server holds %zu bytes of JSON", held);
    char *list = NULL;
    ASSERT_EQ_INT(call(srv, "GET", "/v1/jobs", NULL, 0, &list), 200);
    ASSERT_CONTAINS(list, "+t+m+u+dp1+pp2+tp1+mbs1+nmb1+AllMaxFrequency");
    ASSERT_CONTAINS(list, "\"legacy\"");
    erg_free(list);
    erg_server_free(srv);
    infos = stored_infos(db);
    ASSERT_MSG(strlen(infos) < 8192, "after the restart the jobs table holds %zu bytes: %.200s",
               strlen(infos), infos);
    free(infos);
    tap_rm_tree(tmpdir);
}

/* ---------------------------------------------------------------------
 * Item 6: a write to a database file that is no longer the one the server opened (deleted,
 * replaced) is refused with 503 and logged, never acknowledged.
 * --------------------------------------------------------------------- */

static int v1_register(erg_server *srv, const char *model, char **resp)
{
    char body[600];
    snprintf(body, sizeof body,
             "{\"pp_degree\":1,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":1,"
             "\"framework\":\"t\",\"model_name\":\"%s\",\"partition_method\":\"u\","
             "\"microbatch_size\":1,\"num_microbatches\":1}",
             model);
    return call(srv, "POST", "/v1/jobs", body, strlen(body), resp);
}

TEST(writes_to_a_deleted_database_are_refused_not_acknowledged)
{
    make_tmpdir();
    char db[400], keep[420];
    snprintf(db, sizeof db, "%s/s.db", tmpdir);
    snprintf(keep, sizeof keep, "%s/kept.db", tmpdir);
    erg_server_opts o;
    base_opts(&o, db);
    erg_server *srv = new_server(&o);
    ASSERT_EQ_INT(v1_register(srv, "before", NULL), 201);
    /* The operator (or a clean-up job) deletes the file; a hard link keeps its inode to
     * put it back later. */
    ASSERT(link(db, keep) == 0 && unlink(db) == 0);
    for (int i = 0; i < 2; i++) {
        char *resp = NULL;
        int st = v1_register(srv, "deleted", &resp);
        ASSERT_MSG(st == 503, "registration %d with %s deleted: %d %s", i + 1, db, st, resp);
        ASSERT_CONTAINS(resp, db);
        erg_free(resp);
    }
    const char *kjob = "{" JOBINFO_FIELDS "}";
    char *resp = NULL;
    int st = call(srv, "POST", "/register_job", kjob, strlen(kjob), &resp);
    ASSERT_MSG(st == 503, "Perseus registration with %s deleted: %d %s", db, st, resp);
    erg_free(resp);
    ASSERT_CONTAINS(logbuf, "\"level\":\"error\",\"event\":\"db_gone\"");
    ASSERT_CONTAINS(logbuf, db);
    /* The file is back: writes are acknowledged again, and survive a restart; what was
     * refused is not there. */
    ASSERT(link(keep, db) == 0 && unlink(keep) == 0);
    ASSERT_EQ_INT(v1_register(srv, "after", NULL), 201);
    ASSERT_CONTAINS(logbuf, "\"event\":\"db_back\"");
    erg_server_free(srv);
    srv = new_server(&o);
    char *list = NULL;
    ASSERT_EQ_INT(call(srv, "GET", "/v1/jobs", NULL, 0, &list), 200);
    ASSERT_CONTAINS(list, "+t+before+u+");
    ASSERT_CONTAINS(list, "+t+after+u+");
    ASSERT_MSG(!strstr(list, "+t+deleted+u+") && !strstr(list, "+t+m+u+"),
               "a refused registration is in the database: %s", list);
    erg_free(list);
    erg_server_free(srv);
    tap_rm_tree(tmpdir);
}

/* ---------------------------------------------------------------------
 * Item 10: two servers sharing a dump directory never give two jobs one id (so one job's
 * dump never replaces the other's): a job's id is the one whose dump directory it creates.
 * --------------------------------------------------------------------- */

/* The id from a /v1/jobs answer. */
static void job_id_of(const char *resp, char *id, size_t n)
{
    json_t *v = json_loads(resp, 0, NULL);
    const char *s = json_string_value(json_object_get(v, "job_id"));
    ASSERT_MSG(s, "no job id in %s", resp);
    snprintf(id, n, "%s", s);
    json_decref(v);
}

/* One window of a one-rank job: rank 0 registers, fetches its schedule and reports energy_j. */
static void run_one_window(erg_server *srv, const char *id, int energy_j)
{
    char path[700], body[300];
    snprintf(path, sizeof path, "/v1/jobs/%s/ranks", id);
    const char *rank = "{\"rank\":0,\"dp_rank\":0,\"pp_rank\":0,\"tp_rank\":0,"
                       "\"pipe_schedule\":[\"forward\",\"backward\"],"
                       "\"power_state_range\":[1410,1200]}";
    ASSERT_EQ_INT(call(srv, "POST", path, rank, strlen(rank), NULL), 200);
    int status = 0;
    char *resp = NULL;
    const char *ct;
    snprintf(path, sizeof path, "/v1/jobs/%s/schedule", id);
    ASSERT_EQ_INT(
        erg_server_handle(srv, "GET", path, "rank=0&wait=0", NULL, 0, 0, &status, &resp, &ct),
        ERG_OK);
    ASSERT_MSG(status == 200, "schedule: %d %s", status, resp);
    erg_free(resp);
    snprintf(path, sizeof path, "/v1/jobs/%s/results", id);
    snprintf(body, sizeof body, "{\"rank\":0,\"iter_time\":[1.0],\"iter_energy\":[%d]}", energy_j);
    ASSERT_EQ_INT(call(srv, "POST", path, body, strlen(body), NULL), 200);
}

static char *read_dump(const char *dump, const char *id, const char *name)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/%s/%s", dump, id, name);
    char *text = NULL;
    size_t len;
    erg_error err;
    ASSERT_MSG(erg__read_file(p, 1 << 20, &text, &len, &err) == ERG_OK, "%s", err.msg);
    return text;
}

TEST(two_servers_on_one_dump_directory_never_share_a_job_id)
{
    make_tmpdir();
    char dba[400], dbb[400], dump[400];
    snprintf(dba, sizeof dba, "%s/a.db", tmpdir);
    snprintf(dbb, sizeof dbb, "%s/b.db", tmpdir);
    snprintf(dump, sizeof dump, "%s/dump", tmpdir);
    erg_server_opts oa, ob;
    base_opts(&oa, dba);
    oa.dump_data = true;
    oa.dump_dir = dump;
    oa.scheduler_args = "{\"num_iters\":1}";
    ob = oa;
    ob.db_path = dbb;
    erg_server *a = new_server(&oa), *b = new_server(&ob);
    /* Identical JobInfos on both servers in the same second (the id's time): tried again in
     * the rare case that the second changed between the two calls. */
    char ida[512] = "", idb[512] = "";
    for (int attempt = 0; attempt < 5 && (!*ida || strncmp(ida, idb, 19) != 0); attempt++) {
        char *ra = NULL, *rb = NULL;
        ASSERT_EQ_INT(v1_register(a, "same", &ra), 201);
        ASSERT_EQ_INT(v1_register(b, "same", &rb), 201);
        job_id_of(ra, ida, sizeof ida);
        job_id_of(rb, idb, sizeof idb);
        erg_free(ra);
        erg_free(rb);
    }
    ASSERT_MSG(!strncmp(ida, idb, 19), "never in the same second: %s, %s", ida, idb);
    ASSERT_MSG(strcmp(ida, idb) != 0, "both servers gave job id %s", ida);
    run_one_window(a, ida, 111);
    run_one_window(b, idb, 222);
    char *pa = read_dump(dump, ida, "0.prof.json"), *pb = read_dump(dump, idb, "0.prof.json");
    ASSERT_CONTAINS(pa, "\"iter_energy\": [111.0]");
    ASSERT_CONTAINS(pb, "\"iter_energy\": [222.0]");
    erg__free(pa);
    erg__free(pb);
    erg_server_free(a);
    erg_server_free(b);
    tap_rm_tree(tmpdir);
}

/* ---------------------------------------------------------------------
 * Item 12: an --allow-net network wider than a private or loopback range opens the server to
 * the public: a non-loopback bind with one needs --insecure, and gets its warning.
 * --------------------------------------------------------------------- */

/* erg_server_new on host with one or two networks; the status, the message in why. */
static erg_status open_with_nets(const char *host, const char *net1, const char *net2,
                                 bool insecure, char *why, size_t wn)
{
    const char *nets[2] = {net1, net2};
    erg_server_opts o;
    base_opts(&o, ":memory:");
    o.host = host;
    o.allow_nets = nets;
    o.n_allow_nets = net2 ? 2 : 1;
    o.insecure = insecure;
    erg_server *srv = NULL;
    erg_error err;
    erg_status st = erg_server_new(&o, &srv, &err);
    snprintf(why, wn, "%s", st ? err.msg : "");
    erg_server_free(srv);
    return st;
}

TEST(allow_net_wider_than_a_private_range_counts_as_public)
{
    char why[ERG_ERROR_MSG_LEN];
    const char *public_nets[] = {"0.0.0.0/0",   "::/0",          "8.8.8.0/24",
                                 "172.0.0.0/8", "2001:db8::/32", "0.0.0.0/1"};
    for (size_t i = 0; i < sizeof public_nets / sizeof public_nets[0]; i++) {
        const char *n = public_nets[i];
        erg_status st = open_with_nets("0.0.0.0", n, NULL, false, why, sizeof why);
        ASSERT_MSG(st == ERG_EINVAL, "0.0.0.0 with --allow-net %s started without --insecure", n);
        ASSERT_CONTAINS(why, n);
        ASSERT_CONTAINS(why, "--insecure");
        /* beside a private one, too */
        st = open_with_nets("0.0.0.0", "10.0.0.0/8", n, false, why, sizeof why);
        ASSERT_MSG(st == ERG_EINVAL, "0.0.0.0 with --allow-net 10.0.0.0/8 and %s started", n);
        /* --insecure accepts it, with the warning naming the network */
        loglen = 0;
        logbuf[0] = 0;
        st = open_with_nets("0.0.0.0", n, NULL, true, why, sizeof why);
        ASSERT_MSG(st == ERG_OK, "--insecure --allow-net %s: %s", n, why);
        ASSERT_CONTAINS(logbuf, "\"level\":\"warning\",\"event\":\"access\"");
        ASSERT_CONTAINS(logbuf, "--insecure");
        ASSERT_CONTAINS(logbuf, n);
        /* a loopback bind reaches no other client: nothing to refuse */
        st = open_with_nets("127.0.0.1", n, NULL, false, why, sizeof why);
        ASSERT_MSG(st == ERG_OK, "127.0.0.1 with --allow-net %s: %s", n, why);
    }
    const char *private_nets[] = {"10.0.0.0/8",     "172.16.0.0/12", "192.168.0.0/16",
                                  "192.168.7.0/24", "127.0.0.0/8",   "fd00::/8",
                                  "fe80::/10",      "100.64.0.0/10", "169.254.0.0/16"};
    for (size_t i = 0; i < sizeof private_nets / sizeof private_nets[0]; i++) {
        erg_status st = open_with_nets("0.0.0.0", private_nets[i], NULL, false, why, sizeof why);
        ASSERT_MSG(st == ERG_OK, "0.0.0.0 with --allow-net %s: %s", private_nets[i], why);
    }
}

TAP_MAIN(TEST_ENTRY(registration_memory_is_bounded_and_unknown_fields_are_not_stored),
         TEST_ENTRY(writes_to_a_deleted_database_are_refused_not_acknowledged),
         TEST_ENTRY(two_servers_on_one_dump_directory_never_share_a_job_id),
         TEST_ENTRY(allow_net_wider_than_a_private_range_counts_as_public))
