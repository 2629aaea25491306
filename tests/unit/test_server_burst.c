/* test_server_burst.c: a burst of requests that reaches one HTTP event thread at once is
 * answered at once (issue 38: bench_wide's burst phase, where every rank's connection is
 * opened and held idle, then every request written at once, had ranks 0-2 closed unanswered
 * after the server's 30 s connection timeout).
 *
 * The cause is libmicrohttpd 0.9.75's epoll loop (MHD_epoll in daemon.c): it takes at most
 * 128 events per epoll_wait and, after a full batch, calls epoll_wait again with the timeout
 * it computed before the first call (the time until its oldest connection times out). When
 * exactly 128 connections were ready and nothing else comes, the thread sleeps in that second
 * call with 128 requests unread, and wakes at the timeout, whose check runs before the
 * requests are read: the oldest connections are closed unanswered once the sleep overran by
 * a millisecond, the others are answered a connection timeout late. A burst of parked
 * schedule requests is where nothing else comes: the ranks wait silently at the barrier.
 *
 * The test makes that batch happen every time: one event thread (the server's test hooks),
 * held inside a request while 128 idle connections each receive a request, then let go. The
 * server answers them all at once; with the epoll loop none is answered before the connection
 * timeout (60 s here), and the test gives them 20 s. */
#include "tap.h"

#include "ergon/server.h"
#include "server/server_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <semaphore.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

/* libmicrohttpd 0.9.75's MAX_EVENTS: the most events one epoll_wait of its loop takes. */
#define BATCH 128

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static bool send_all(int fd, const char *s)
{
    size_t n = strlen(s), off = 0;
    while (off < n) {
        ssize_t w = send(fd, s + off, n - off, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        off += (size_t)w;
    }
    return true;
}

/* The request hook: the first request that passes holds its event thread until released. */
static sem_t held, release;
static int armed;

static void hold_first(erg_server *srv, const char *url)
{
    (void)srv;
    (void)url;
    if (__atomic_exchange_n(&armed, 0, __ATOMIC_SEQ_CST)) {
        sem_post(&held);
        while (sem_wait(&release) != 0 && errno == EINTR)
            ;
    }
}

static const char *const HEALTHZ = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

TEST(a_burst_of_128_requests_to_one_event_thread_is_answered_at_once)
{
    erg_server_opts o;
    erg_server_opts_init(&o);
    o.port = 0;
    o.db_path = ":memory:";
    o.dump_data = false;
    o.scheduler = "AllMaxFrequency";
    o.mode = "frequency";
    o.connection_timeout_s = 60;
    erg_server *srv = NULL;
    erg_error err;
    ASSERT_OK(erg_server_new(&o, &srv, &err));
    srv->http_threads = 1;
    srv->request_hook = hold_first;
    sem_init(&held, 0, 0);
    sem_init(&release, 0, 0);
    ASSERT_OK(erg_server_start(srv, &err));
    int port = erg_server_port(srv);

    /* BATCH idle connections, all accepted (each counted when libmicrohttpd takes it). */
    int fds[BATCH];
    for (int i = 0; i < BATCH; i++) {
        fds[i] = connect_to(port);
        ASSERT_MSG(fds[i] >= 0, "connection %d: %s", i, strerror(errno));
    }
    double t0 = now_s();
    while (__atomic_load_n(&srv->conns, __ATOMIC_RELAXED) < BATCH && now_s() - t0 < 60)
        usleep(10000);
    ASSERT_EQ_INT(__atomic_load_n(&srv->conns, __ATOMIC_RELAXED), BATCH);

    /* Hold the event thread inside one more request. */
    __atomic_store_n(&armed, 1, __ATOMIC_SEQ_CST);
    int h = connect_to(port);
    ASSERT(h >= 0 && send_all(h, HEALTHZ));
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    int rc;
    while ((rc = sem_timedwait(&held, &until)) != 0 && errno == EINTR)
        ;
    ASSERT_MSG(rc == 0, "the event thread never reached the held request");

    /* Meanwhile every idle connection gets its request, delivered (nothing left unacknowledged
     * in its send queue) before the thread is let go: one batch of exactly BATCH events. */
    for (int i = 0; i < BATCH; i++)
        ASSERT_MSG(send_all(fds[i], HEALTHZ), "request %d: %s", i, strerror(errno));
    t0 = now_s();
    for (int i = 0; i < BATCH; i++) {
        int q = 1;
        while (ioctl(fds[i], SIOCOUTQ, &q) == 0 && q > 0 && now_s() - t0 < 60)
            usleep(1000);
        ASSERT_MSG(q == 0, "request %d was not delivered (%d bytes in its send queue)", i, q);
    }
    sem_post(&release);

    /* Every request answered (a status line), or its connection closed unanswered. */
    char buf[BATCH][64];
    size_t got[BATCH] = {0};
    bool done[BATCH] = {false};
    int answered = 0, closed = 0, left = BATCH;
    double t_release = now_s();
    while (left > 0 && now_s() - t_release < 20) {
        struct pollfd pf[BATCH];
        int idx[BATCH], np = 0;
        for (int i = 0; i < BATCH; i++)
            if (!done[i]) {
                pf[np] = (struct pollfd){fds[i], POLLIN, 0};
                idx[np++] = i;
            }
        if (poll(pf, (nfds_t)np, 200) <= 0)
            continue;
        for (int k = 0; k < np; k++) {
            int i = idx[k];
            if (!pf[k].revents)
                continue;
            ssize_t n = recv(fds[i], buf[i] + got[i], sizeof buf[i] - 1 - got[i], 0);
            if (n > 0)
                got[i] += (size_t)n;
            buf[i][got[i]] = 0;
            if (got[i] >= 12) {
                answered += !strncmp(buf[i], "HTTP/1.1 200", 12);
                done[i] = true;
            } else if (n <= 0) {
                closed += got[i] == 0;
                done[i] = true;
            }
            left -= done[i];
        }
    }
    printf("# %d of %d requests answered 200 within %.1f s of the event thread's release, %d "
           "connections closed unanswered, %d without an answer yet (connection timeout 60 s)\n",
           answered, BATCH, now_s() - t_release, closed, left);
    fflush(stdout);
    ASSERT_MSG(answered == BATCH,
               "a burst of %d requests to one event thread: %d answered within 20 s, %d closed "
               "unanswered, %d still waiting (libmicrohttpd's epoll loop sleeps after a full "
               "batch until the connection timeout)",
               BATCH, answered, closed, left);
    for (int i = 0; i < BATCH; i++)
        close(fds[i]);
    close(h);
    erg_server_free(srv);
}

TAP_MAIN(TEST_ENTRY(a_burst_of_128_requests_to_one_event_thread_is_answered_at_once))
