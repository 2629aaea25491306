/* loop.c: ergond's server loop -- one thread polls the stop pipe, the listening socket, the
 * connections and the lease holders' pidfds -- with accepting, connection limits, reading,
 * answering and time-outs. Owns: the connections (d->conns) and when things happen: a request
 * is handled, an exited holder's lease expires, the state is written, the daemon stops. Trusts:
 * the kernel for who is on the other end (SO_PEERCRED, SO_PEERGROUPS at accept time); every
 * byte a connection sends goes through the bounded parser of http.c first.
 *
 * THE SERVER LOOP. One thread polls: a self-pipe (stop), the listening socket, up to MAX_CONNS
 * connections and one pidfd per lease. A connection is read into a fixed buffer (head + body
 * caps); as soon as erg__http_parse says complete, the request is handled inline
 * (endpoints.c), one response is written and the connection is closed (Connection: close). A
 * connection idle for CONN_TIMEOUT_S is dropped. The peer's uid/gid/pid come from SO_PEERCRED
 * at accept time; the pid is 0 when the peer is in a PID namespace ergond's does not contain,
 * and such a peer cannot set anything (endpoints.c). A lease whose pidfd becomes readable expires
 * (leases.c); without pidfds the holders are checked with kill(pid, 0) twice a second. On stop,
 * every lease still held expires (its GPUs are reset) and the state is written. */
#include "daemon/daemon_impl.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void erg_daemon_stop(erg_daemon *d)
{
    if (d && d->stop_pipe[1] >= 0) {
        ssize_t w = write(d->stop_pipe[1], "x", 1);
        (void)w;
    }
}

void erg__conn_close(erg_daemon *d, int i)
{
    if (d->conns[i]) {
        close(d->conns[i]->fd);
        erg__free(d->conns[i]);
        d->conns[i] = NULL;
    }
}

static void send_all(int fd, const char *data, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, data + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

static void accept_conns(erg_daemon *d)
{
    for (;;) {
        int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct ucred cred;
        socklen_t cl = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
            close(fd);
            continue;
        }
        int slot = -1, mine = 0, non_root = 0;
        for (int i = 0; i < MAX_CONNS; i++) {
            if (!d->conns[i]) {
                if (slot < 0)
                    slot = i;
                continue;
            }
            mine += d->conns[i]->peer.uid == cred.uid;
            non_root += d->conns[i]->peer.uid != 0;
        }
        const char *full = NULL;
        char why[160];
        if (slot < 0)
            full = "too many connections";
        else if (cred.uid != 0 && mine >= d->conns_per_uid) {
            snprintf(why, sizeof why,
                     "too many connections from uid %u (at most %d at once per uid)",
                     (unsigned)cred.uid, d->conns_per_uid);
            full = why;
        } else if (cred.uid != 0 && non_root >= MAX_CONNS - ROOT_RESERVED)
            full = "too many connections (the last slots are kept for root)";
        if (full) {
            /* Read what already arrived (closing with unread data makes the
             * peer's read fail with ECONNRESET before it sees the answer). */
            char sink[1024];
            for (int k = 0; k < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; k++)
                ;
            erg__buf r = {0};
            erg__http_respond_error(&r, 503, "%s", full);
            if (r.data)
                send_all(fd, r.data, r.len);
            erg__buf_free(&r);
            shutdown(fd, SHUT_WR);
            close(fd);
            continue;
        }
        struct timeval tv = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        conn *c = erg__malloc(sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->peer.uid = cred.uid;
        c->peer.gid = cred.gid;
        c->peer.pid = cred.pid;
        c->peer.ngroups = 0;
#ifdef SO_PEERGROUPS
        {
            /* The groups the peer had when it connected (Linux >= 4.13). */
            gid_t gl[ERG__PEER_MAX_GROUPS];
            socklen_t gll = sizeof gl;
            if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, gl, &gll) == 0)
                for (size_t k = 0; k < gll / sizeof gl[0]; k++)
                    c->peer.groups[c->peer.ngroups++] = (unsigned)gl[k];
        }
#endif
        c->len = 0;
        c->deadline = now_s() + CONN_TIMEOUT_S;
        d->conns[slot] = c;
    }
}

static void serve_conn(erg_daemon *d, int i)
{
    conn *c = d->conns[i];
    ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (r <= 0) {
        erg__conn_close(d, i);
        return;
    }
    c->len += (size_t)r;
    erg__http_req req;
    int pr = erg__http_parse(c->buf, c->len, &req);
    erg__buf resp = {0};
    if (pr < 0) {
        erg__dlog(d, 1, "malformed request from pid %d uid %u: HTTP %d", (int)c->peer.pid,
                  c->peer.uid, -pr);
        erg__http_respond_error(&resp, -pr, "malformed request (%s)", erg__http_reason(-pr));
    } else if (pr == 0) {
        if (c->len < sizeof c->buf)
            return;
        erg__http_respond_error(&resp, 431, "request too large");
    } else
        erg__daemon_handle(d, &req, &c->peer, &resp);
    if (resp.data)
        send_all(c->fd, resp.data, resp.len);
    erg__buf_free(&resp);
    erg__conn_close(d, i);
}

erg_status erg_daemon_run(erg_daemon *d, erg_error *err)
{
    if (!d || d->listen_fd < 0)
        return erg_error_set(err, ERG_EINVAL, "daemon not listening");
    erg__dlog(d, 0, "ergond serving %d GPU%s on %s", erg_gpu_count(d->gpu),
              erg_gpu_count(d->gpu) == 1 ? "" : "s", d->socket_path);
    struct pollfd pfd[2 + MAX_CONNS + MAX_LEASES];
    int who[2 + MAX_CONNS + MAX_LEASES];
    for (;;) {
        int n = 0;
        pfd[n] = (struct pollfd){d->stop_pipe[0], POLLIN, 0};
        who[n++] = -1;
        pfd[n] = (struct pollfd){d->listen_fd, POLLIN, 0};
        who[n++] = -2;
        bool fallback = false;
        for (int i = 0; i < MAX_CONNS; i++)
            if (d->conns[i]) {
                pfd[n] = (struct pollfd){d->conns[i]->fd, POLLIN, 0};
                who[n++] = i;
            }
        for (int i = 0; i < MAX_LEASES; i++)
            if (d->leases[i].used) {
                if (d->leases[i].pidfd >= 0) {
                    pfd[n] = (struct pollfd){d->leases[i].pidfd, POLLIN, 0};
                    who[n++] = 1000 + i;
                } else
                    fallback = true;
            }
        int rc = poll(pfd, (nfds_t)n, fallback ? 500 : 1000);
        if (rc < 0 && errno != EINTR)
            return erg_error_set(err, ERG_EIO, "poll: %s", strerror(errno));
        if (rc > 0 && (pfd[0].revents & POLLIN))
            break;
        for (int k = 2; rc > 0 && k < n; k++) {
            if (!pfd[k].revents)
                continue;
            if (who[k] >= 1000) {
                lease *l = &d->leases[who[k] - 1000];
                if (l->used)
                    erg__lease_expire(d, l, "exited");
            } else if (d->conns[who[k]])
                serve_conn(d, who[k]);
        }
        if (rc > 0 && (pfd[1].revents & POLLIN))
            accept_conns(d);
        double now = now_s();
        for (int i = 0; i < MAX_CONNS; i++)
            if (d->conns[i] && now > d->conns[i]->deadline) {
                erg__buf resp = {0};
                erg__http_respond_error(&resp, 408, "request timed out");
                if (resp.data)
                    send_all(d->conns[i]->fd, resp.data, resp.len);
                erg__buf_free(&resp);
                erg__conn_close(d, i);
            }
        if (fallback)
            for (int i = 0; i < MAX_LEASES; i++)
                if (d->leases[i].used && d->leases[i].pidfd < 0 &&
                    (d->leases[i].pid <= 0 || (kill(d->leases[i].pid, 0) != 0 && errno == ESRCH)))
                    erg__lease_expire(d, &d->leases[i], "exited");
        erg__lease_sync(d, false, NULL);
    }
    for (int i = 0; i < MAX_LEASES; i++)
        if (d->leases[i].used)
            erg__lease_expire(d, &d->leases[i], "still held at shutdown");
    erg__lease_sync(d, false, NULL);
    erg__dlog(d, 0, "ergond stopped after %llu requests", (unsigned long long)d->requests);
    return ERG_OK;
}
