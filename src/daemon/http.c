/* http.c: ergond's bounded parsers: HTTP request head, query string, allow-list config. */
#include "daemon/daemon_internal.h"

#include <ctype.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Find "\r\n\r\n" (or "\n\n") in buf[0..len); returns the head length or 0. */
static size_t head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (buf[i] == '\n' && buf[i + 1] == '\n')
            return i + 2;
        if (i + 3 < len && buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' &&
            buf[i + 3] == '\n')
            return i + 4;
    }
    return 0;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decode src[0..n) into dst (size cap); -1 on bad escape, NUL or overflow. */
static int pct_decode(const char *src, size_t n, char *dst, size_t cap, bool plus_space)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)src[i];
        if (c == '%') {
            if (i + 2 >= n)
                return -1;
            int h = hexval((unsigned char)src[i + 1]), l = hexval((unsigned char)src[i + 2]);
            if (h < 0 || l < 0)
                return -1;
            c = h * 16 + l;
            i += 2;
        } else if (c == '+' && plus_space)
            c = ' ';
        if (c == 0 || o + 1 >= cap)
            return -1;
        dst[o++] = (char)c;
    }
    dst[o] = '\0';
    return 0;
}

int erg__http_parse(const char *buf, size_t len, erg__http_req *req)
{
    memset(req, 0, sizeof *req);
    size_t scan = len < ERG__HTTP_MAX_HEAD ? len : ERG__HTTP_MAX_HEAD;
    size_t hl = head_end(buf, scan);
    if (!hl)
        return len >= ERG__HTTP_MAX_HEAD ? -431 : 0;
    /* request line */
    const char *p = buf, *end = buf + hl;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol)
        return -400;
    const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
    if (!sp1 || sp1 == p || (size_t)(sp1 - p) >= sizeof req->method)
        return sp1 && sp1 != p ? -501 : -400;
    memcpy(req->method, p, (size_t)(sp1 - p));
    for (size_t i = 0; req->method[i]; i++)
        if (!isupper((unsigned char)req->method[i]))
            return -400;
    const char *target = sp1 + 1;
    const char *sp2 = memchr(target, ' ', (size_t)(eol - target));
    if (!sp2 || sp2 == target)
        return -400;
    const char *ver = sp2 + 1;
    size_t vlen = (size_t)(eol - ver);
    if (vlen && ver[vlen - 1] == '\r')
        vlen--;
    if (vlen != 8 || (memcmp(ver, "HTTP/1.1", 8) && memcmp(ver, "HTTP/1.0", 8)))
        return vlen >= 5 && !memcmp(ver, "HTTP/", 5) ? -505 : -400;
    if (strcmp(req->method, "GET") && strcmp(req->method, "POST") && strcmp(req->method, "HEAD"))
        return -501;
    if (*target != '/')
        return -400;
    const char *q = memchr(target, '?', (size_t)(sp2 - target));
    const char *pend = q ? q : sp2;
    if ((size_t)(pend - target) >= sizeof req->path)
        return -414;
    if (pct_decode(target, (size_t)(pend - target), req->path, sizeof req->path, false))
        return -400;
    if (q) {
        size_t qn = (size_t)(sp2 - q - 1);
        if (qn >= sizeof req->query)
            return -414;
        memcpy(req->query, q + 1, qn);
        req->query[qn] = '\0';
        if (memchr(req->query, '\0', qn))
            return -400;
    }
    /* headers */
    int nh = 0;
    bool have_cl = false;
    p = eol + 1;
    while (p < end) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            return -400;
        size_t ll = (size_t)(eol - p);
        if (ll && p[ll - 1] == '\r')
            ll--;
        if (ll == 0)
            break;
        if (++nh > ERG__HTTP_MAX_HEADERS)
            return -431;
        const char *colon = memchr(p, ':', ll);
        if (!colon || colon == p)
            return -400;
        for (const char *c = p; c < colon; c++)
            if (*c == ' ' || *c == '\t' || (unsigned char)*c < 33)
                return -400;
        size_t kl = (size_t)(colon - p);
        const char *v = colon + 1;
        const char *vend = p + ll;
        while (v < vend && (*v == ' ' || *v == '\t'))
            v++;
        if (kl == 14 && !strncasecmp(p, "content-length", 14)) {
            if (have_cl || v == vend)
                return -400;
            have_cl = true;
            size_t cl = 0;
            for (const char *c = v; c < vend; c++) {
                if (*c == ' ' || *c == '\t') {
                    for (; c < vend; c++)
                        if (*c != ' ' && *c != '\t')
                            return -400;
                    break;
                }
                if (!isdigit((unsigned char)*c))
                    return -400;
                cl = cl * 10 + (size_t)(*c - '0');
                if (cl > ERG__HTTP_MAX_BODY)
                    return -413;
            }
            req->content_length = cl;
        } else if (kl == 17 && !strncasecmp(p, "transfer-encoding", 17))
            return -501; /* no chunked bodies: nothing here needs one */
        p = eol + 1;
    }
    req->head_len = hl;
    return len >= hl + req->content_length ? 1 : 0;
}

int erg__query_parse(const char *q, erg__query *out)
{
    out->n = 0;
    if (!q || !*q)
        return 0;
    const char *p = q;
    while (*p) {
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        if (n == 0)
            return -1;
        if (out->n >= ERG__QUERY_MAX)
            return -1;
        const char *eq = memchr(p, '=', n);
        size_t kn = eq ? (size_t)(eq - p) : n;
        if (kn == 0)
            return -1;
        if (pct_decode(p, kn, out->key[out->n], sizeof out->key[0], true))
            return -1;
        out->val[out->n][0] = '\0';
        if (eq && pct_decode(eq + 1, n - kn - 1, out->val[out->n], sizeof out->val[0], true))
            return -1;
        for (int i = 0; i < out->n; i++)
            if (!strcmp(out->key[i], out->key[out->n]))
                return -1;
        out->n++;
        p += n;
        if (*p == '&') {
            p++;
            if (!*p)
                return -1;
        }
    }
    return 0;
}

const char *erg__query_get(const erg__query *q, const char *key)
{
    for (int i = 0; i < q->n; i++)
        if (!strcmp(q->key[i], key))
            return q->val[i];
    return NULL;
}

int erg__parse_gpu_ids(const char *s, int count, uint64_t *mask)
{
    *mask = 0;
    if (!s || !*s)
        return -1;
    const char *p = s;
    for (;;) {
        if (!isdigit((unsigned char)*p))
            return -1;
        long v = 0;
        while (isdigit((unsigned char)*p)) {
            v = v * 10 + (*p - '0');
            if (v > 63)
                return -1;
            p++;
        }
        if (v >= count)
            return -1;
        *mask |= (uint64_t)1 << v;
        if (*p == '\0')
            return 0;
        if (*p != ',')
            return -1;
        p++;
    }
}

/* ---- config ---- */

erg_status erg__next_line(const char **p, const char *end, char *buf, size_t cap, long *line,
                          const char *name, erg_error *err)
{
    if (*p >= end)
        return ERG_ENOTFOUND;
    ++*line;
    const char *eol = memchr(*p, '\n', (size_t)(end - *p));
    size_t ll = eol ? (size_t)(eol - *p) : (size_t)(end - *p);
    if (ll >= cap)
        return erg_error_set(err, ERG_EPARSE, "%s:%ld: line too long", name, *line);
    memcpy(buf, *p, ll);
    buf[ll] = '\0';
    bool nul = memchr(buf, '\0', ll) != NULL;
    *p += ll + (eol ? 1 : 0);
    if (nul)
        return erg_error_set(err, ERG_EPARSE, "%s:%ld: NUL byte", name, *line);
    return ERG_OK;
}

erg_status erg__config_parse(const char *text, size_t len, const char *name, erg__config *out,
                             erg_error *err)
{
    out->allow = NULL;
    out->n = 0;
    size_t cap = 0;
    long line = 0;
    const char *p = text, *end = text + len;
    erg_status st = ERG_OK;
    while (p < end) {
        char buf[1024];
        if ((st = erg__next_line(&p, end, buf, sizeof buf, &line, name, err)))
            goto fail;
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL;
        char *tok = strtok_r(buf, " \t\r", &save);
        if (!tok)
            continue;
        if (strcmp(tok, "allow")) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: unknown directive '%s' (expected allow)",
                               name, line, tok);
            goto fail;
        }
        char *gpus = strtok_r(NULL, " \t\r", &save);
        if (!gpus) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: allow needs GPUS and principals", name,
                               line);
            goto fail;
        }
        uint64_t mask;
        if (!strcmp(gpus, "*"))
            mask = UINT64_MAX;
        else if (erg__parse_gpu_ids(gpus, 64, &mask)) {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: GPU list '%s' is not '*' or ids 0..63 separated by commas",
                               name, line, gpus);
            goto fail;
        }
        int nprin = 0;
        char *prin;
        while ((prin = strtok_r(NULL, " \t\r", &save))) {
            erg__allow a = {mask, 0, 0};
            char *colon = strchr(prin, ':');
            if (!colon || !colon[1]) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: principal '%s' is not user:NAME, uid:N, group:NAME "
                                   "or gid:N",
                                   name, line, prin);
                goto fail;
            }
            *colon = '\0';
            const char *v = colon + 1;
            long id;
            if (!strcmp(prin, "uid") || !strcmp(prin, "gid")) {
                if (!erg__parse_long(v, &id) || id < 0 || id > 0x7fffffffL) {
                    st = erg_error_set(err, ERG_EPARSE, "%s:%ld: %s '%s' is not a number", name,
                                       line, prin, v);
                    goto fail;
                }
                a.is_gid = prin[0] == 'g';
                a.id = (unsigned)id;
            } else if (!strcmp(prin, "user")) {
                struct passwd pw, *res = NULL;
                char pbuf[4096];
                if (getpwnam_r(v, &pw, pbuf, sizeof pbuf, &res) || !res) {
                    st = erg_error_set(err, ERG_EPARSE, "%s:%ld: unknown user '%s'", name, line,
                                       v);
                    goto fail;
                }
                a.id = res->pw_uid;
            } else if (!strcmp(prin, "group")) {
                struct group gr, *res = NULL;
                char gbuf[8192];
                if (getgrnam_r(v, &gr, gbuf, sizeof gbuf, &res) || !res) {
                    st = erg_error_set(err, ERG_EPARSE, "%s:%ld: unknown group '%s'", name, line,
                                       v);
                    goto fail;
                }
                a.is_gid = 1;
                a.id = res->gr_gid;
            } else {
                st = erg_error_set(err, ERG_EPARSE, "%s:%ld: unknown principal kind '%s'", name,
                                   line, prin);
                goto fail;
            }
            if (out->n == cap) {
                size_t nc = cap ? 2 * cap : 8;
                erg__allow *na = erg__reallocarray(out->allow, nc, sizeof *na);
                if (!na) {
                    st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                    goto fail;
                }
                out->allow = na;
                cap = nc;
            }
            out->allow[out->n++] = a;
            nprin++;
        }
        if (!nprin) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: allow lists no principal", name, line);
            goto fail;
        }
    }
    return ERG_OK;
fail:
    erg__config_free(out);
    return st;
}

void erg__config_free(erg__config *c)
{
    erg__free(c->allow);
    c->allow = NULL;
    c->n = 0;
}

bool erg__config_allows(const erg__config *c, unsigned uid, unsigned gid, int gpu)
{
    return erg__config_allows_groups(c, uid, gid, NULL, 0, gpu);
}

bool erg__config_allows_groups(const erg__config *c, unsigned uid, unsigned gid,
                               const unsigned *groups, unsigned ngroups, int gpu)
{
    if (uid == 0)
        return true;
    if (gpu < 0 || gpu > 63)
        return false;
    for (size_t i = 0; i < c->n; i++) {
        const erg__allow *a = &c->allow[i];
        if (!(a->gpus & ((uint64_t)1 << gpu)))
            continue;
        if ((a->is_gid && a->id == gid) || (!a->is_gid && a->id == uid))
            return true;
        for (unsigned k = 0; a->is_gid && k < ngroups; k++)
            if (groups[k] == a->id)
                return true;
    }
    return false;
}
