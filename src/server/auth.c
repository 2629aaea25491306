/* auth.c: who may use the server when it leaves loopback (docs/http-api.md, "Access
 * control"): the bearer token (compared in constant time; also taken as the password of HTTP
 * Basic credentials, which is what the Zeus and Perseus clients send for a server URL of the
 * form http://user:TOKEN@host:port), the --allow-net client networks, and the start-up rule
 * that refuses a non-loopback address without either. */
#include "server/server_internal.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

struct srv_net {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    int prefix; /* bits */
};

/* ---- start-up ---- */

static erg_status parse_cidr(const char *s, srv_net *n, erg_error *err)
{
    char buf[80];
    if (strlen(s) >= sizeof buf)
        return erg_error_set(err, ERG_EINVAL, "--allow-net '%.80s' is too long", s);
    strcpy(buf, s);
    char *slash = strchr(buf, '/');
    if (slash)
        *slash = 0;
    memset(n, 0, sizeof *n);
    int max;
    if (inet_pton(AF_INET, buf, n->addr) == 1) {
        n->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, buf, n->addr) == 1) {
        n->family = AF_INET6;
        max = 128;
    } else {
        return erg_error_set(err, ERG_EINVAL,
                             "--allow-net '%.80s' is not a network: give ADDRESS/PREFIX, e.g. "
                             "10.0.0.0/8 or fd00::/8 (a bare address means that one host)",
                             s);
    }
    long p = max;
    if (slash && (!erg__parse_long(slash + 1, &p) || p < 0 || p > max))
        return erg_error_set(err, ERG_EINVAL, "--allow-net '%.80s': the prefix must be in [0, %d]",
                             s, max);
    n->prefix = (int)p;
    /* host bits must be zero: 10.1.2.3/8 is more likely a typo than a network */
    for (int b = n->prefix; b < max; b++)
        if (n->addr[b / 8] & (0x80 >> (b % 8)))
            return erg_error_set(err, ERG_EINVAL,
                                 "--allow-net '%.80s' has host bits set after the /%d prefix "
                                 "(did you mean the network of that address?)",
                                 s, n->prefix);
    return ERG_OK;
}

/* Whether a network lies inside a private or loopback range, whose clients are not the
 * public: IPv4 10/8, 172.16/12, 192.168/16, 127/8, 169.254/16 (link-local), 100.64/10 (shared
 * address space); IPv6 ::1, fc00::/7 (unique local), fe80::/10 (link-local). Any other network
 * (0.0.0.0/0, ::/0, a public prefix) lets clients from outside use the server. */
static bool net_is_private(const srv_net *n)
{
    static const struct {
        int family;
        unsigned char addr[16];
        int prefix;
    } ranges[] = {
        {AF_INET, {10}, 8},
        {AF_INET, {172, 16}, 12},
        {AF_INET, {192, 168}, 16},
        {AF_INET, {127}, 8},
        {AF_INET, {169, 254}, 16},
        {AF_INET, {100, 64}, 10},
        {AF_INET6, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128},
        {AF_INET6, {0xfc}, 7},
        {AF_INET6, {0xfe, 0x80}, 10},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        if (ranges[i].family != n->family || n->prefix < ranges[i].prefix)
            continue;
        int full = ranges[i].prefix / 8, rest = ranges[i].prefix % 8;
        if (memcmp(n->addr, ranges[i].addr, (size_t)full))
            continue;
        if (rest && ((n->addr[full] ^ ranges[i].addr[full]) & (0xff00 >> rest) & 0xff))
            continue;
        return true;
    }
    return false;
}

static void net_text(const srv_net *n, char *out, size_t on)
{
    char a[INET6_ADDRSTRLEN] = "?";
    inet_ntop(n->family, n->addr, a, sizeof a);
    snprintf(out, on, "%s/%d", a, n->prefix);
}

static bool token_ok_text(const char *t, size_t n)
{
    if (n < 16 || n > 4096)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
            return false;
    return true;
}

/* Loopback: 127.0.0.0/8 and ::1 (the only binds that need no access control). */
static bool host_is_loopback(const char *host)
{
    unsigned char a[16];
    if (inet_pton(AF_INET, host, a) == 1)
        return a[0] == 127;
    static const unsigned char one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return inet_pton(AF_INET6, host, a) == 1 && !memcmp(a, one, 16);
}

erg_status erg__srv_auth_init(erg_server *srv, const erg_server_opts *o, erg_error *err)
{
    if (o->auth_token) {
        if (!token_ok_text(o->auth_token, strlen(o->auth_token)))
            return erg_error_set(err, ERG_EINVAL,
                                 "the token must be 16 to 4096 printable ASCII characters "
                                 "without spaces (got %zu characters); make one with: "
                                 "(umask 077; openssl rand -hex 32 > token)",
                                 strlen(o->auth_token));
        if (!(srv->token = erg__strdup(o->auth_token)))
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        srv->token_len = strlen(srv->token);
    }
    if (o->n_allow_nets > 256)
        return erg_error_set(err, ERG_EINVAL, "at most 256 --allow-net networks");
    if (o->n_allow_nets) {
        srv->nets = erg__calloc(o->n_allow_nets, sizeof *srv->nets);
        if (!srv->nets)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
        for (size_t i = 0; i < o->n_allow_nets; i++) {
            erg_status st =
                parse_cidr(o->allow_nets[i] ? o->allow_nets[i] : "", &srv->nets[i], err);
            if (st)
                return st;
            srv->n_nets++;
        }
    }
    if ((o->tls_cert_file != NULL) != (o->tls_key_file != NULL))
        return erg_error_set(err, ERG_EINVAL, "TLS needs both --tls-cert and --tls-key");
    /* srv->host: the numeric address the server binds (a name was resolved by erg_server_new) */
    const char *host = srv->host ? srv->host : o->host ? o->host : "127.0.0.1";
    if (!host_is_loopback(host) && !srv->token && !srv->n_nets && !o->insecure)
        return erg_error_set(
            err, ERG_EINVAL,
            "refusing to listen on %.64s without access control: anyone who reaches the port "
            "could register ranks, post results and end jobs. Give a token (--token-file FILE "
            "or ERGON_SERVE_TOKEN) and/or the training hosts' networks (--allow-net CIDR), "
            "preferably with TLS (--tls-cert, --tls-key); or --insecure on a network you trust",
            host);
    /* An allowed network wider than a private or loopback range admits the public: as a
     * bind without access control, it needs --insecure and gets the warning (before,
     * --allow-net 0.0.0.0/0 started a public server silently). */
    const srv_net *pub = NULL;
    for (size_t i = 0; !pub && i < srv->n_nets; i++)
        if (!net_is_private(&srv->nets[i]))
            pub = &srv->nets[i];
    char pubs[INET6_ADDRSTRLEN + 8] = "";
    if (pub)
        net_text(pub, pubs, sizeof pubs);
    const char *opened = srv->token ? "the Perseus and Zeus routes" : "every route";
    if (!host_is_loopback(host) && pub && !o->insecure)
        return erg_error_set(
            err, ERG_EINVAL,
            "refusing to listen on %.64s with --allow-net %s: that network is not a private or "
            "loopback range, so clients from outside (the Internet, if the port is reachable) "
            "could use %s without a token. Give the training hosts' private network (e.g. "
            "10.0.0.0/8), or --insecure if this network is trusted",
            host, pubs, opened);
    if (!host_is_loopback(host) && pub)
        erg__srv_log(srv, ERG_LOG_WARNING, "access", NULL,
                     "--insecure: listening on %s with --allow-net %s, which is not a private or "
                     "loopback range: every client in it may use %s without a token",
                     host, pubs, opened);
    if (!host_is_loopback(host) && !srv->token && !srv->n_nets)
        erg__srv_log(
            srv, ERG_LOG_WARNING, "access", NULL,
            "--insecure: listening on %s without access control; every client that reaches "
            "the port may register ranks, post results and end jobs",
            host);
    else if (!host_is_loopback(host) && srv->token && !o->tls_cert_file)
        erg__srv_log(srv, ERG_LOG_WARNING, "access", NULL,
                     "the token travels in clear text on %s: serve https (--tls-cert, --tls-key) "
                     "unless the network is private",
                     host);
    return ERG_OK;
}

void erg__srv_auth_free(erg_server *srv)
{
    if (srv->token) {
        memset(srv->token, 0, srv->token_len);
        erg__free(srv->token);
    }
    erg__free(srv->nets);
    srv->token = NULL;
    srv->nets = NULL;
    srv->n_nets = 0;
}

/* ---- per request ---- */

/* Constant time in the presented credential's content: every byte of the longer of the two
 * is visited whatever matches, and the lengths are compared without branching early. */
static bool same_token(const erg_server *srv, const unsigned char *p, size_t n)
{
    size_t m = srv->token_len, len = n > m ? n : m;
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < len; i++) {
        unsigned char a = i < n ? p[i] : 0, b = i < m ? (unsigned char)srv->token[i] : 0;
        diff |= (unsigned)(a ^ b);
    }
    return diff == 0;
}

static int b64val(int c)
{
    return c >= 'A' && c <= 'Z'   ? c - 'A'
           : c >= 'a' && c <= 'z' ? c - 'a' + 26
           : c >= '0' && c <= '9' ? c - '0' + 52
           : c == '+'             ? 62
           : c == '/'             ? 63
                                  : -1;
}

/* Base64 (with or without padding) into out; -1 when malformed or too long. */
static long b64decode(const char *s, unsigned char *out, size_t cap)
{
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (; *s && *s != '='; s++) {
        int v = b64val((unsigned char)*s);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o == cap)
                return -1;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    while (*s == '=')
        s++;
    return *s ? -1 : (long)o;
}

srv_auth_result erg__srv_auth_token(const erg_server *srv, const char *authorization)
{
    if (!authorization)
        return SRV_AUTH_MISSING;
    const char *a = authorization;
    while (*a == ' ')
        a++;
    if (!strncasecmp(a, "Bearer ", 7)) {
        a += 7;
        while (*a == ' ')
            a++;
        size_t n = strlen(a);
        while (n && a[n - 1] == ' ')
            n--;
        return same_token(srv, (const unsigned char *)a, n) ? SRV_AUTH_OK : SRV_AUTH_WRONG;
    }
    if (!strncasecmp(a, "Basic ", 6)) {
        /* user:TOKEN (any user): what httpx and curl send for http://user:TOKEN@host */
        unsigned char buf[4200];
        a += 6;
        while (*a == ' ')
            a++;
        long n = b64decode(a, buf, sizeof buf);
        unsigned char *colon = n > 0 ? memchr(buf, ':', (size_t)n) : NULL;
        if (!colon)
            return SRV_AUTH_WRONG;
        size_t off = (size_t)(colon + 1 - buf);
        bool ok = same_token(srv, colon + 1, (size_t)n - off);
        memset(buf, 0, sizeof buf);
        return ok ? SRV_AUTH_OK : SRV_AUTH_WRONG;
    }
    return SRV_AUTH_WRONG;
}

bool erg__srv_auth_net_allowed(const erg_server *srv, const struct sockaddr *sa)
{
    unsigned char a[16];
    int fam;
    if (!sa)
        return false;
    if (sa->sa_family == AF_INET) {
        fam = AF_INET;
        memcpy(a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const unsigned char *b =
            (const unsigned char *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (!memcmp(b, mapped, 12)) { /* ::ffff:a.b.c.d is the IPv4 host */
            fam = AF_INET;
            memcpy(a, b + 12, 4);
        } else {
            fam = AF_INET6;
            memcpy(a, b, 16);
        }
    } else {
        return false;
    }
    for (size_t i = 0; i < srv->n_nets; i++) {
        const srv_net *n = &srv->nets[i];
        if (n->family != fam)
            continue;
        int full = n->prefix / 8, rest = n->prefix % 8;
        if (memcmp(a, n->addr, (size_t)full))
            continue;
        if (rest && ((a[full] ^ n->addr[full]) & (0xff00 >> rest) & 0xff))
            continue;
        return true;
    }
    return false;
}

bool erg__srv_auth_route_open(const char *path)
{
    return !strcmp(path, "/healthz");
}

bool erg__srv_auth_route_net_ok(const erg_server *srv, const char *path)
{
    /* With a token, the allow-list opens only the Perseus and Zeus routes (their clients
     * cannot all be given a token); /v1 and /metrics always take the token. Without a
     * token, the allow-list is the only control and covers every route. */
    if (!srv->token)
        return true;
    return strncmp(path, "/v1/", 4) && strcmp(path, "/metrics");
}
