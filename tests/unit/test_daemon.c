/* test_daemon.c: ergond's parsers, and the daemon back-end against an in-process daemon. */
#include "daemon/daemon_internal.h"
#include "ergon/client.h"
#include "ergon/daemon.h"
#include "ergon/gpu.h"
#include "tap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TEST(http_parser_bounds_and_cases)
{
    erg__http_req r;
    const char *ok = "POST /gpu/set_power_limit?gpu_ids=0&power_limit_mw=1 HTTP/1.1\r\n"
                     "Host: x\r\nContent-Length: 3\r\n\r\nabc";
    ASSERT_EQ_INT(erg__http_parse(ok, strlen(ok), &r), 1);
    ASSERT_STR_EQ(r.method, "POST");
    ASSERT_STR_EQ(r.path, "/gpu/set_power_limit");
    ASSERT_STR_EQ(r.query, "gpu_ids=0&power_limit_mw=1");
    ASSERT_EQ_INT(r.content_length, 3);
    /* body not there yet / head not complete */
    ASSERT_EQ_INT(erg__http_parse(ok, strlen(ok) - 1, &r), 0);
    ASSERT_EQ_INT(erg__http_parse(ok, 20, &r), 0);
    const char *bad[] = {
        "GET /x HTTP/1.1\r\nContent-Length: 99999\r\n\r\n",                  /* -413 */
        "GET /x HTTP/2.0\r\n\r\n",                                           /* -505 */
        "BREW /x HTTP/1.1\r\n\r\n",                                          /* -501 */
        "GET x HTTP/1.1\r\n\r\n",                                            /* -400 */
        "GET /%zz HTTP/1.1\r\n\r\n",                                         /* -400 */
        "GET /x HTTP/1.1\r\nNoColon\r\n\r\n",                                /* -400 */
        "GET /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", /* -400 */
        "GET /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",             /* -501 */
    };
    const int want[] = {-413, -505, -501, -400, -400, -400, -400, -501};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASSERT_MSG(erg__http_parse(bad[i], strlen(bad[i]), &r) == want[i], "case %zu: %d", i,
                   erg__http_parse(bad[i], strlen(bad[i]), &r));
    /* a head that never ends within the cap */
    char big[ERG__HTTP_MAX_HEAD + 10];
    memset(big, 'a', sizeof big);
    memcpy(big, "GET /x HTTP/1.1\r\nA: ", 20);
    ASSERT_EQ_INT(erg__http_parse(big, sizeof big, &r), -431);
}

TEST(query_and_gpu_ids)
{
    erg__query q;
    ASSERT_EQ_INT(erg__query_parse("a=1&b=%41+c&flag", &q), 0);
    ASSERT_EQ_INT(q.n, 3);
    ASSERT_STR_EQ(erg__query_get(&q, "b"), "A c");
    ASSERT_STR_EQ(erg__query_get(&q, "flag"), "");
    ASSERT(erg__query_get(&q, "zz") == NULL);
    ASSERT_EQ_INT(erg__query_parse("a=1&a=2", &q), -1);
    ASSERT_EQ_INT(erg__query_parse("a=1&&b=2", &q), -1);
    ASSERT_EQ_INT(erg__query_parse("a=%0", &q), -1);
    ASSERT_EQ_INT(erg__query_parse("a=%00", &q), -1);
    ASSERT_EQ_INT(erg__query_parse("=1", &q), -1);
    uint64_t m;
    ASSERT_EQ_INT(erg__parse_gpu_ids("0,2,2", 4, &m), 0);
    ASSERT(m == 5);
    ASSERT_EQ_INT(erg__parse_gpu_ids("0,,1", 4, &m), -1);
    ASSERT_EQ_INT(erg__parse_gpu_ids("4", 4, &m), -1);
    ASSERT_EQ_INT(erg__parse_gpu_ids("-1", 4, &m), -1);
    ASSERT_EQ_INT(erg__parse_gpu_ids("", 4, &m), -1);
    ASSERT_EQ_INT(erg__parse_gpu_ids("99999999999999", 4, &m), -1);
}

TEST(config_allow_list)
{
    erg__config c;
    erg_error err;
    const char *t = "# comment\n\nallow 0,2 uid:1000 gid:50\nallow * user:root # trailing\n";
    ASSERT_OK(erg__config_parse(t, strlen(t), "c.conf", &c, &err));
    ASSERT(erg__config_allows(&c, 1000, 1, 0));
    ASSERT(!erg__config_allows(&c, 1000, 1, 1));
    ASSERT(erg__config_allows(&c, 7, 50, 2));
    ASSERT(!erg__config_allows(&c, 7, 51, 2));
    ASSERT(erg__config_allows(&c, 0, 0, 5)); /* root */
    /* group: entries also match a supplementary group (SO_PEERGROUPS) */
    unsigned sup[] = {12, 50};
    ASSERT(erg__config_allows_groups(&c, 7, 51, sup, 2, 2));
    ASSERT(!erg__config_allows_groups(&c, 7, 51, sup, 1, 2));
    erg__config_free(&c);
    const char *bad[] = {"deny 0 uid:1\n",
                         "allow 0\n",
                         "allow x uid:1\n",
                         "allow 0 uid:x\n",
                         "allow 0 user:no-such-user-ergon\n",
                         "allow 0 pid:3\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_EQ_INT(erg__config_parse(bad[i], strlen(bad[i]), "c.conf", &c, &err), ERG_EPARSE);
        ASSERT_CONTAINS(err.msg, "c.conf:1:");
    }
}

TEST(lease_state_parse_bounds)
{
    erg__state s;
    erg_error err;
    const char *ok = "# c\nergond-leases 1\nboot 0a-f1\nlease 42 7 1000 3 5\n\npending 63 2\n";
    ASSERT_OK(erg__state_parse(ok, strlen(ok), "L", &s, &err));
    ASSERT_STR_EQ(s.boot, "0a-f1");
    ASSERT_EQ_INT(s.n, 2);
    ASSERT_EQ_INT(s.rec[0].pid, 42);
    ASSERT(s.rec[0].start == 7 && s.rec[0].uid == 1000 && s.rec[0].gpu == 3);
    ASSERT(s.rec[0].bits == 5 && !s.rec[0].pending);
    ASSERT(s.rec[1].pending && s.rec[1].gpu == 63 && s.rec[1].bits == 2);
    erg__state_free(&s);
    const char *bad[] = {
        "",                                             /* no header */
        "ergond-leases 2\n",                            /* unknown version */
        "lease 1 1 0 0 1\n",                            /* record before the header */
        "ergond-leases 1\nlease 0 1 0 0 1\n",           /* pid 0 */
        "ergond-leases 1\nlease 1 1 0 64 1\n",          /* GPU 64 */
        "ergond-leases 1\nlease 1 1 0 0 8\n",           /* bits */
        "ergond-leases 1\nlease 1 1 0 0 0\n",           /* no bits */
        "ergond-leases 1\nlease 1 -1 0 0 1\n",          /* negative */
        "ergond-leases 1\nlease 1 0x1 0 0 1\n",         /* hex */
        "ergond-leases 1\nlease 1 1 0 0\n",             /* short */
        "ergond-leases 1\nlease 1 1 0 0 1 1\n",         /* long */
        "ergond-leases 1\nlease 99999999999 1 0 0 1\n", /* pid range */
        "ergond-leases 1\npending 0\n",                 /* short */
        "ergond-leases 1\nboot XYZ\n",                  /* not a boot id */
        "ergond-leases 1\nboot a\nboot b\n",            /* repeated */
        "ergond-leases 1\nhold 1\n",                    /* unknown record */
    };
    for (size_t i = 0; i < ERG__ARRAY_LEN(bad); i++) {
        ASSERT_EQ_INT(erg__state_parse(bad[i], strlen(bad[i]), "L", &s, &err), ERG_EPARSE);
        ASSERT_CONTAINS(err.msg, "L");
    }
    ASSERT_EQ_INT(erg__state_parse("ergond-leases 1\nlease x\n", 22, "L", &s, &err), ERG_EPARSE);
    ASSERT_CONTAINS(err.msg, "L:2: expected 'lease PID");
    char nul[] = "ergond-leases 1\nlease 1\0 1 0 0 1\n";
    ASSERT_EQ_INT(erg__state_parse(nul, sizeof nul - 1, "L", &s, &err), ERG_EPARSE);
    /* our own start time is readable and stable */
    unsigned long long a = 0, b = 0;
    ASSERT_EQ_INT(erg__proc_start_ticks(getpid(), &a), 0);
    ASSERT_EQ_INT(erg__proc_start_ticks(getpid(), &b), 0);
    ASSERT(a == b && a > 0);
    ASSERT_EQ_INT(erg__proc_start_ticks(-1, &a), -1);
}

/* Issue 15 item 18: like sshd's StrictModes, a config (or a directory above
 * it) that another user could change is refused with a clear message. */
TEST(config_refused_when_writable_by_others)
{
    char dir[] = "/tmp/ergon-test-strict-XXXXXX";
    ASSERT(mkdtemp(dir));
    char sub[300], conf[340], sock[340];
    snprintf(sub, sizeof sub, "%s/etc", dir);
    snprintf(conf, sizeof conf, "%s/ergond.conf", sub);
    snprintf(sock, sizeof sock, "%s/s", dir);
    ASSERT_EQ_INT(mkdir(sub, 0755), 0);
    FILE *f = fopen(conf, "w");
    ASSERT(f);
    fprintf(f, "allow * uid:12345\n");
    fclose(f);
    erg_error err;
    erg_gpu *sim = NULL;
    ASSERT_OK(erg_gpu_open("sim:a40:gpt3-xl:2", &sim, &err));
    erg_daemon *d = NULL;
    static const struct {
        mode_t file, dir;
        const char *msg;
    } cases[] = {
        {0666, 0755, "is writable by its group and everyone (mode 0666)"},
        {0646, 0755, "is writable by everyone (mode 0646)"},
        {0664, 0755, "is writable by its group (mode 0664)"},
        {0644, 0777, "directory"},
        {0644, 0775, "is writable by its group (mode 0775)"},
    };
    for (size_t i = 0; i < ERG__ARRAY_LEN(cases); i++) {
        ASSERT_EQ_INT(chmod(conf, cases[i].file), 0);
        ASSERT_EQ_INT(chmod(sub, cases[i].dir), 0);
        ASSERT_EQ_INT(erg_daemon_new(sock, 0600, conf, sim, NULL, NULL, &d, &err), ERG_EPERM);
        ASSERT_CONTAINS(err.msg, "refusing config file");
        ASSERT_CONTAINS(err.msg, conf);
        ASSERT_CONTAINS(err.msg, cases[i].msg);
        ASSERT_CONTAINS(err.msg, "StrictModes");
        ASSERT(d == NULL);
    }
    ASSERT_CONTAINS(err.msg, sub); /* the directory is named */
    ASSERT_CONTAINS(err.msg, "chmod go-w");
    /* A sticky world-writable directory (like /tmp) is fine; so is 0644 in 0755. */
    ASSERT_EQ_INT(chmod(sub, 01777), 0);
    ASSERT_EQ_INT(chmod(conf, 0644), 0);
    ASSERT_OK(erg_daemon_new(sock, 0600, conf, sim, NULL, NULL, &d, &err));
    erg_daemon_free(d);
    d = NULL;
    ASSERT_EQ_INT(chmod(sub, 0755), 0);
    ASSERT_OK(erg_daemon_new(sock, 0600, conf, sim, NULL, NULL, &d, &err));
    /* The admin lock file's directory is checked the same way. */
    ASSERT_EQ_INT(chmod(sub, 0777), 0);
    char lock[360];
    snprintf(lock, sizeof lock, "%s/disable", sub);
    ASSERT_EQ_INT(erg_daemon_set_lock_file(d, lock, &err), ERG_EPERM);
    ASSERT_CONTAINS(err.msg, "refusing lock file");
    ASSERT_EQ_INT(chmod(sub, 0755), 0);
    ASSERT_OK(erg_daemon_set_lock_file(d, lock, &err));
    erg_daemon_free(d);
    d = NULL;
    /* Owned by another (non-root) user: refused, when we can make it so. */
    if (geteuid() == 0) {
        ASSERT_EQ_INT(chown(conf, 12345, 12345), 0);
        ASSERT_EQ_INT(erg_daemon_new(sock, 0600, conf, sim, NULL, NULL, &d, &err), ERG_EPERM);
        ASSERT_CONTAINS(err.msg, "is owned by uid 12345");
        ASSERT_EQ_INT(chown(conf, 0, 0), 0);
        ASSERT_EQ_INT(chown(sub, 12345, 12345), 0);
        ASSERT_EQ_INT(erg_daemon_new(sock, 0600, conf, sim, NULL, NULL, &d, &err), ERG_EPERM);
        ASSERT_CONTAINS(err.msg, "directory");
        ASSERT_CONTAINS(err.msg, "is owned by uid 12345");
        ASSERT_EQ_INT(chown(sub, 0, 0), 0);
    }
    /* Not a regular file. */
    ASSERT_EQ_INT(erg_daemon_new(sock, 0600, sub, sim, NULL, NULL, &d, &err), ERG_EINVAL);
    ASSERT_CONTAINS(err.msg, "is not a regular file");
    erg_gpu_close(sim);
    unlink(conf);
    rmdir(sub);
    rmdir(dir);
}

/* One request through the handler as a peer with the given pid; the status, and the body in
 * body (cap bytes). */
static int handle_as(erg_daemon *d, pid_t pid, const char *target, char *body, size_t cap)
{
    char raw[512];
    snprintf(raw, sizeof raw, "POST %s HTTP/1.1\r\nHost: x\r\n\r\n", target);
    erg__http_req req;
    if (erg__http_parse(raw, strlen(raw), &req) != 1)
        return -1;
    erg__peer peer = {.uid = 0, .gid = 0, .pid = pid};
    erg__buf resp = {0};
    erg__daemon_handle(d, &req, &peer, &resp);
    int status = -1;
    if (resp.data) {
        sscanf(resp.data, "HTTP/1.1 %d", &status);
        const char *b = strstr(resp.data, "\r\n\r\n");
        snprintf(body, cap, "%s", b ? b + 4 : "");
    }
    erg__buf_free(&resp);
    return status;
}

/* A client in a PID namespace ergond cannot see (another container) is reported by the kernel
 * with pid 0. kill(0, 0) succeeds (it signals ergond's own process group), so a lease of "pid 0"
 * never expired and the GPU kept the client's clock until ergond stopped. Such a peer may read
 * and reset, never set: nothing could undo what it set. */
TEST(peer_without_visible_pid_cannot_set)
{
    erg_error err;
    erg_gpu *sim = NULL;
    ASSERT_OK(erg_gpu_open("sim:a40:gpt3-xl:2", &sim, &err));
    erg_daemon *d = NULL;
    ASSERT_OK(erg__daemon_new_detached("allow * uid:0\n", sim, &d, &err));
    const char *set = "/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=1200&max_clock_mhz=1200";
    char body[512];
    int st = handle_as(d, 0, set, body, sizeof body);
    ASSERT_MSG(st == 403, "set clocks as pid 0: HTTP %d %s", st, body);
    ASSERT_CONTAINS(body, "pid 0");
    ASSERT_CONTAINS(body, "PID namespace");
    st = handle_as(d, 0, "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=200000", body, sizeof body);
    ASSERT_MSG(st == 403, "set power limit as pid 0: HTTP %d %s", st, body);
    /* nothing was changed */
    uint32_t cur = 0;
    ASSERT_OK(erg_gpu_power_limits(sim, 1, NULL, NULL, NULL, &cur, &err));
    ASSERT_EQ_INT(cur, 300000);
    /* resets leave the GPU at its defaults, which needs no lease: allowed */
    st = handle_as(d, 0, "/gpu/reset_locked_clocks?gpu_ids=0", body, sizeof body);
    ASSERT_MSG(st == 200, "reset as pid 0: HTTP %d %s", st, body);
    /* the same request from a process ergond can watch is fine */
    st = handle_as(d, getpid(), set, body, sizeof body);
    ASSERT_MSG(st == 200, "set clocks as pid %d: HTTP %d %s", (int)getpid(), st, body);
    /* and from a process that has already exited, refused: nothing to hold the lease */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    ASSERT(child > 0);
    waitpid(child, NULL, 0);
    st = handle_as(d, child, set, body, sizeof body);
    ASSERT_MSG(st == 503, "set clocks as exited pid %d: HTTP %d %s", (int)child, st, body);
    erg_daemon_free(d);
    erg_gpu_close(sim);
}

static void *serve(void *arg)
{
    erg_daemon_run(arg, NULL);
    return NULL;
}

TEST(daemon_backend_round_trip)
{
    char dir[] = "/tmp/ergon-test-daemon-XXXXXX";
    ASSERT(mkdtemp(dir));
    char sock[256], conf[256];
    snprintf(sock, sizeof sock, "%s/s", dir);
    snprintf(conf, sizeof conf, "%s/c", dir);
    FILE *f = fopen(conf, "w");
    fprintf(f, "allow 0 uid:12345\n");
    fclose(f);
    chmod(conf, 0644); /* whatever the umask: a group-writable config is refused */
    erg_error err;
    erg_gpu *sim = NULL;
    ASSERT_OK(erg_gpu_open("sim:a40:gpt3-xl:2", &sim, &err));
    erg_daemon *d = NULL;
    ASSERT_OK(erg_daemon_new(sock, 0600, conf, sim, NULL, NULL, &d, &err));
    /* a second daemon on the same live socket is refused */
    erg_daemon *d2 = NULL;
    ASSERT_EQ_INT(erg_daemon_new(sock, 0600, conf, sim, NULL, NULL, &d2, &err), ERG_EEXIST);
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, serve, d) == 0);

    char spec[300];
    snprintf(spec, sizeof spec, "daemon:%s", sock);
    erg_gpu *g = NULL;
    ASSERT_OK(erg_gpu_open(spec, &g, &err));
    ASSERT_STR_EQ(erg_gpu_backend_name(g), "daemon");
    ASSERT_EQ_INT(erg_gpu_count(g), 2);
    char name[128];
    ASSERT_OK(erg_gpu_name(g, 1, name, sizeof name, &err));
    ASSERT_CONTAINS(name, "A40");
    int *clocks = NULL;
    size_t n = 0;
    ASSERT_OK(erg_gpu_sm_clocks(g, 0, &clocks, &n, &err));
    ASSERT_EQ_INT(clocks[0], 1740);
    ASSERT_EQ_INT(n, (1740 - 210) / 15 + 1);
    erg_free(clocks);
    uint64_t e0, e1;
    uint32_t mw, lo, hi, def, cur;
    ASSERT_OK(erg_gpu_energy_mj(g, 0, &e0, &err));
    usleep(30000);
    ASSERT_OK(erg_gpu_energy_mj(g, 0, &e1, &err));
    ASSERT(e1 > e0);
    ASSERT_OK(erg_gpu_power_mw(g, 0, &mw, &err));
    ASSERT(mw > 60000 && mw < 80000); /* A40 blocking power 70.38 W */
    ASSERT_OK(erg_gpu_power_limits(g, 0, &lo, &hi, &def, &cur, &err));
    ASSERT(hi == 300000 && def == 300000 && cur == 300000 && lo == 120000);
    /* The training-loop client through the daemon. */
    erg_client *c = NULL;
    ASSERT_OK(erg_client_new(g, 1, 1, NULL, ERG_CLIENT_NO_SIGNALS, &c, &err));
    ASSERT_OK(erg_client_set_uniform_clock(c, 1200, &err));
    ASSERT_OK(erg_client_sync(c, 5, &err));
    ASSERT_EQ_INT(erg_client_active_clock(c), 1200);
    ASSERT_OK(erg_gpu_set_power_limit(g, 1, 250000, &err));
    ASSERT_OK(erg_gpu_power_limits(g, 1, NULL, NULL, NULL, &cur, &err));
    ASSERT_EQ_INT(cur, 250000);
    ASSERT_OK(erg_gpu_reset_power_limit(g, 1, &err));
    ASSERT_OK(erg_client_close(c, &err));
    /* Daemon-side validation comes back with its message. */
    ASSERT_EQ_INT(erg_gpu_lock_sm_clocks(g, 0, 1745, 1745, &err), ERG_EINVAL);
    erg_gpu_close(g);
    erg_daemon_stop(d);
    pthread_join(th, NULL);
    erg_daemon_free(d);
    ASSERT(access(sock, F_OK) != 0); /* socket removed */
    /* Daemon gone: a clear error. */
    ASSERT_EQ_INT(erg_gpu_open(spec, &g, &err), ERG_ENOGPU);
    ASSERT_CONTAINS(err.msg, "ergond unreachable");
    erg_gpu_close(sim);
    unlink(conf);
    rmdir(dir);
}

TAP_MAIN(TEST_ENTRY(http_parser_bounds_and_cases), TEST_ENTRY(query_and_gpu_ids),
         TEST_ENTRY(config_allow_list), TEST_ENTRY(lease_state_parse_bounds),
         TEST_ENTRY(config_refused_when_writable_by_others), TEST_ENTRY(daemon_backend_round_trip),
         TEST_ENTRY(peer_without_visible_pid_cannot_set))
