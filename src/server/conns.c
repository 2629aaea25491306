/* conns.c: the HTTP front's connection slots (issue 38 item 4): how many connections are open,
 * in all and from each client address; whether a new one gets a slot (--max-connections,
 * --max-connections-per-ip); a warning, at most one a second, when one is refused for want of
 * a slot (libmicrohttpd closes it unanswered, and logged nothing for the per-address limit);
 * and how many ranks of one job the slots can hold waiting at a barrier, which a registration
 * is checked against (jobs.c, erg__srv_job_create). */
#include "server/server_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#define CONN_BUCKETS 1024

typedef struct conn_addr {
    unsigned char key[16];
    unsigned char len;
    unsigned n; /* open connections from this address */
    struct conn_addr *next;
} conn_addr;

struct srv_conn_table {
    pthread_mutex_t mu;
    conn_addr *bucket[CONN_BUCKETS];
    unsigned long unlogged; /* refusals since the last warning */
    double last_warn;       /* monotonic s */
};

static bool addr_key(const struct sockaddr *sa, unsigned char key[16], unsigned char *len)
{
    if (sa && sa->sa_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        *len = 4;
        return true;
    }
    if (sa && sa->sa_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        *len = 16;
        return true;
    }
    return false;
}

static void addr_text(const unsigned char *key, unsigned char len, char *out, size_t on)
{
    if (!inet_ntop(len == 4 ? AF_INET : AF_INET6, key, out, (socklen_t)on))
        snprintf(out, on, "?");
}

/* The link that points at the address's entry (or the end of its chain); mu held. */
static conn_addr **find(struct srv_conn_table *t, const unsigned char *key, unsigned char len)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (unsigned i = 0; i < len; i++)
        h = (h ^ key[i]) * 16777619u;
    conn_addr **pp = &t->bucket[h % CONN_BUCKETS];
    while (*pp && ((*pp)->len != len || memcmp((*pp)->key, key, len)))
        pp = &(*pp)->next;
    return pp;
}

erg_status erg__srv_conns_init(erg_server *srv, erg_error *err)
{
    srv->conn_tab = erg__calloc(1, sizeof *srv->conn_tab);
    if (!srv->conn_tab)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    pthread_mutex_init(&srv->conn_tab->mu, NULL);
    srv->conn_tab->last_warn = -1e9;
    return ERG_OK;
}

void erg__srv_conns_free(erg_server *srv)
{
    struct srv_conn_table *t = srv->conn_tab;
    if (!t)
        return;
    for (int b = 0; b < CONN_BUCKETS; b++)
        while (t->bucket[b]) {
            conn_addr *e = t->bucket[b];
            t->bucket[b] = e->next;
            erg__free(e);
        }
    pthread_mutex_destroy(&t->mu);
    erg__free(t);
    srv->conn_tab = NULL;
}

/* What the connection limit is made of, for messages: "--max-connections 100" or
 * "--max-connections 4096 lowered by ulimit -n 1024". */
static void limit_text(const erg_server *srv, char *out, size_t on)
{
    if (srv->conn_limit < srv->opts.max_connections)
        snprintf(out, on, "--max-connections %u lowered by ulimit -n %lu",
                 srv->opts.max_connections, srv->conn_nofile);
    else
        snprintf(out, on, "--max-connections %u", srv->conn_limit);
}

/* A refusal: warn now (*before: those not logged since the last warning) or count it; mu
 * held. */
static bool warn_due(struct srv_conn_table *t, unsigned long *before)
{
    double now = erg__srv_now_mono();
    if (now - t->last_warn < 1.0) {
        t->unlogged++;
        return false;
    }
    *before = t->unlogged;
    t->unlogged = 0;
    t->last_warn = now;
    return true;
}

void erg__srv_conns_refused_by_mhd(erg_server *srv, const char *msg)
{
    struct srv_conn_table *t = srv->conn_tab;
    unsigned long before = 0;
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    bool warn = warn_due(t, &before);
    pthread_mutex_unlock(&t->mu);
    if (warn)
        erg__srv_log(
            srv, ERG_LOG_WARNING, "connection", NULL,
            "a connection not taken for want of capacity: libmicrohttpd: %s (%u open)%s%.0lu%s",
            msg, __atomic_load_n(&srv->conns, __ATOMIC_RELAXED), before ? "; " : "", before,
            before ? " more refused since the last report" : "");
}

bool erg__srv_conns_admit(erg_server *srv, const struct sockaddr *sa)
{
    struct srv_conn_table *t = srv->conn_tab;
    unsigned char key[16], len = 0;
    bool keyed = addr_key(sa, key, &len);
    pthread_mutex_lock(&t->mu);
    unsigned open = __atomic_load_n(&srv->conns, __ATOMIC_RELAXED);
    conn_addr *e = keyed ? *find(t, key, len) : NULL;
    unsigned from = e ? e->n : 0;
    bool ok = open < srv->conn_limit && from < srv->conn_per_ip;
    unsigned long before = 0;
    bool warn = !ok && warn_due(t, &before);
    pthread_mutex_unlock(&t->mu);
    if (!warn)
        return ok;
    char who[INET6_ADDRSTRLEN] = "?", lim[96];
    if (keyed)
        addr_text(key, len, who, sizeof who);
    limit_text(srv, lim, sizeof lim);
    char more[96] = "";
    if (before)
        snprintf(more, sizeof more, "; %lu more refused since the last report", before);
    if (open >= srv->conn_limit)
        erg__srv_log(srv, ERG_LOG_WARNING, "connection", NULL,
                     "refused a connection from %s, closed unanswered: %u connections are open "
                     "(%s)%s",
                     who, open, lim, more);
    else
        erg__srv_log(srv, ERG_LOG_WARNING, "connection", NULL,
                     "refused a connection from %s, closed unanswered: %u from %s are open "
                     "(--max-connections-per-ip %u)%s",
                     who, from, who, srv->conn_per_ip, more);
    return false;
}

void erg__srv_conns_opened(erg_server *srv, const struct sockaddr *sa)
{
    struct srv_conn_table *t = srv->conn_tab;
    unsigned char key[16], len = 0;
    __atomic_add_fetch(&srv->conns, 1, __ATOMIC_RELAXED);
    if (!addr_key(sa, key, &len))
        return;
    pthread_mutex_lock(&t->mu);
    conn_addr **pp = find(t, key, len);
    if (!*pp && (*pp = erg__calloc(1, sizeof **pp))) {
        memcpy((*pp)->key, key, len);
        (*pp)->len = len;
    }
    if (*pp)
        (*pp)->n++;
    pthread_mutex_unlock(&t->mu);
}

void erg__srv_conns_closed(erg_server *srv, const struct sockaddr *sa)
{
    struct srv_conn_table *t = srv->conn_tab;
    unsigned char key[16], len = 0;
    __atomic_sub_fetch(&srv->conns, 1, __ATOMIC_RELAXED);
    if (!addr_key(sa, key, &len))
        return;
    pthread_mutex_lock(&t->mu);
    conn_addr **pp = find(t, key, len);
    if (*pp && --(*pp)->n == 0) {
        conn_addr *e = *pp;
        *pp = e->next;
        erg__free(e);
    }
    pthread_mutex_unlock(&t->mu);
}

long erg__srv_conns_barrier_capacity(const erg_server *srv, char *how, size_t hn)
{
    if (!srv->mhd || !srv->conn_limit)
        return -1;
    /* SRV_CONN_RESERVE kept for other requests, a quarter of a limit below 64 */
    long r_all = ERG__MIN(SRV_CONN_RESERVE, (long)srv->conn_limit / 4);
    long r_one = ERG__MIN(SRV_CONN_RESERVE, (long)srv->conn_per_ip / 4);
    long all = (long)srv->conn_limit - r_all, one = (long)srv->conn_per_ip - r_one;
    char lim[96];
    limit_text(srv, lim, sizeof lim);
    snprintf(how, hn,
             "a waiting rank holds a connection, and the server holds %u (%s), %u from one "
             "client address (--max-connections-per-ip), less %ld kept for other requests",
             srv->conn_limit, lim, srv->conn_per_ip, all < one ? r_all : r_one);
    return all < one ? all : one;
}
