/* http.c: ergond's HTTP, both directions: the bounded request-head parser, the query-string
 * parser with GPU id lists, and the responses. Owns: nothing but the bytes it is given. Trusts:
 * nothing -- every request byte comes from a local, possibly hostile, process; every parser is
 * bounded (ERG__HTTP_MAX_*, ERG__QUERY_MAX), never reads past its length and is fuzzed
 * (tests/fuzz/fuzz_daemon_request.c). */
#include "daemon/daemon_impl.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
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

/* ---- responses ---- */

const char *erg__http_reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Internal Server Error";
    }
}

void erg__http_respond(erg__buf *resp, int status, const char *body)
{
    resp->len = 0;
    if (resp->data)
        resp->data[0] = '\0';
    erg__buf_printf(resp,
                    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                    "Connection: close\r\n\r\n%s",
                    status, erg__http_reason(status), strlen(body), body);
}

void erg__http_respond_error(erg__buf *resp, int status, const char *fmt, ...)
{
    char msg[600], body[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t o = 0;
    o += (size_t)snprintf(body, sizeof body, "{\"error\": \"");
    for (const char *c = msg; *c && o + 8 < sizeof body; c++) {
        unsigned char ch = (unsigned char)*c;
        if (ch == '"' || ch == '\\') {
            body[o++] = '\\';
            body[o++] = (char)ch;
        } else if (ch < 0x20)
            o += (size_t)snprintf(body + o, sizeof body - o, "\\u%04x", ch);
        else
            body[o++] = (char)ch;
    }
    snprintf(body + o, sizeof body - o, "\"}");
    erg__http_respond(resp, status, body);
}
