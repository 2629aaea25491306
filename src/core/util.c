/* util.c: buffers, files, Python-compatible number formatting, strict parsing, name tables. */
#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

erg_status erg__buf_append(erg__buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = erg__realloc(b->data, cap);
        if (!d)
            return ERG_ENOMEM;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return ERG_OK;
}

erg_status erg__buf_printf(erg__buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return ERG_EINTERNAL;
    if ((size_t)n < sizeof(small))
        return erg__buf_append(b, small, (size_t)n);
    char *big = erg__malloc((size_t)n + 1);
    if (!big)
        return ERG_ENOMEM;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    erg_status st = erg__buf_append(b, big, (size_t)n);
    erg__free(big);
    return st;
}

void erg__buf_free(erg__buf *b)
{
    erg__free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static erg_status read_stream(FILE *f, const char *path, size_t max_bytes, char **out, size_t *len,
                              erg_error *err);

erg_status erg__read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                          erg_error *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return erg_error_set(err, errno == ENOENT ? ERG_ENOTFOUND : ERG_EIO, "%s: cannot open: %s",
                             path, strerror(errno));
    return read_stream(f, path, max_bytes, out, len, err);
}

erg_status erg__read_regular_file(const char *path, size_t max_bytes, char **out, size_t *len,
                                  erg_error *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return erg_error_set(err, errno == ENOENT ? ERG_ENOTFOUND : ERG_EIO, "%s: cannot open: %s",
                             path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return erg_error_set(err, ERG_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return erg_error_set(err, ERG_EIO, "%s: not a regular file (%s)", path,
                             S_ISFIFO(sb.st_mode)   ? "a FIFO"
                             : S_ISDIR(sb.st_mode)  ? "a directory"
                             : S_ISSOCK(sb.st_mode) ? "a socket"
                             : S_ISCHR(sb.st_mode)  ? "a character device"
                             : S_ISBLK(sb.st_mode)  ? "a block device"
                                                    : "not a plain file");
    }
    int fl = fcntl(fd, F_GETFL);
    FILE *f = fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return erg_error_set(err, ERG_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    return read_stream(f, path, max_bytes, out, len, err);
}

/* Read f to the end (at most max_bytes) and close it. */
static erg_status read_stream(FILE *f, const char *path, size_t max_bytes, char **out, size_t *len,
                              erg_error *err)
{
    erg__buf b = {0};
    char chunk[65536];
    size_t n;
    erg_status st = ERG_OK;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (b.len + n > max_bytes) {
            st = erg_error_set(err, ERG_EINVAL, "%s: file larger than the limit of %zu bytes", path,
                               max_bytes);
            break;
        }
        if (erg__buf_append(&b, chunk, n) != ERG_OK) {
            st = erg_error_set(err, ERG_ENOMEM, "%s: out of memory reading the file", path);
            break;
        }
    }
    if (st == ERG_OK && ferror(f))
        st = erg_error_set(err, ERG_EIO, "%s: read error: %s", path, strerror(errno));
    fclose(f);
    if (st != ERG_OK) {
        erg__buf_free(&b);
        return st;
    }
    if (!b.data) {
        b.data = erg__calloc(1, 1);
        if (!b.data)
            return erg_error_set(err, ERG_ENOMEM, "out of memory");
    }
    *out = b.data;
    if (len)
        *len = b.len;
    return ERG_OK;
}

erg_status erg__mkdir_p(const char *path, erg_error *err)
{
    char *p = erg__strdup(path);
    if (!p)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    for (char *s = p + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                erg_status st = erg_error_set(err, ERG_EIO, "%s: cannot create directory: %s", p,
                                              strerror(errno));
                erg__free(p);
                return st;
            }
            *s = '/';
        }
    }
    erg_status st = ERG_OK;
    if (mkdir(p, 0777) != 0 && errno != EEXIST)
        st = erg_error_set(err, ERG_EIO, "%s: cannot create directory: %s", p, strerror(errno));
    erg__free(p);
    return st;
}

/* CPython's float floor division (Objects/floatobject.c, float_floor_div):
 * it works from fmod so that e.g. 1.0 // 0.1 == 9.0, unlike floor(1.0/0.1). */
double erg__floordiv_py(double a, double b)
{
    double mod = fmod(a, b);
    double div = (a - mod) / b;
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0))
            div -= 1.0;
    }
    double floordiv;
    if (div != 0.0) {
        floordiv = floor(div);
        if (div - floordiv > 0.5)
            floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, a / b);
    }
    return floordiv;
}

/* ---- shortest round-trip digits (free-format, Steele & White / Burger &
 * Dybvig) with exact big-integer arithmetic: no precision search, no libc
 * formatting. v = r / s; the doubles' rounding interval around v is
 * [(r - m-) / s, (r + m+) / s], boundaries included when the mantissa is even
 * (strtod rounds ties to even). Digits are generated until the remainder
 * lies within the interval; when both the truncated and the incremented
 * digit string would read back as v, the nearer one wins, ties to an even
 * digit -- the rule of David Gay's dtoa mode 0, which CPython's repr uses. */
#define BN_LIMBS 40 /* 1280 bits: r, s and m+ stay below 2^1100 */
typedef struct bn {
    int n;                /* limbs in use; no leading zero limbs */
    uint32_t d[BN_LIMBS]; /* little endian */
} bn;

static void bn_set_u64(bn *a, uint64_t v)
{
    a->d[0] = (uint32_t)v;
    a->d[1] = (uint32_t)(v >> 32);
    a->n = a->d[1] ? 2 : a->d[0] ? 1 : 0;
}

static void bn_mul_small(bn *a, uint32_t m)
{
    uint64_t carry = 0;
    for (int i = 0; i < a->n; i++) {
        uint64_t x = (uint64_t)a->d[i] * m + carry;
        a->d[i] = (uint32_t)x;
        carry = x >> 32;
    }
    if (carry && a->n < BN_LIMBS)
        a->d[a->n++] = (uint32_t)carry;
}

static void bn_shl(bn *a, int bits)
{
    if (a->n == 0 || bits <= 0)
        return;
    int w = bits / 32, b = bits % 32;
    int n = a->n + w + 1;
    if (n > BN_LIMBS)
        n = BN_LIMBS;
    for (int i = n - 1; i >= 0; i--) {
        int j = i - w;
        uint64_t hi = j >= 0 && j < a->n ? a->d[j] : 0;
        uint64_t lo = j - 1 >= 0 && j - 1 < a->n ? a->d[j - 1] : 0;
        a->d[i] = b ? (uint32_t)((hi << b) | (lo >> (32 - b))) : (uint32_t)hi;
    }
    a->n = n;
    while (a->n > 0 && a->d[a->n - 1] == 0)
        a->n--;
}

static void bn_mul_pow10(bn *a, int k)
{
    while (k >= 9) {
        bn_mul_small(a, 1000000000u);
        k -= 9;
    }
    static const uint32_t p10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
    if (k > 0)
        bn_mul_small(a, p10[k]);
}

static int bn_cmp(const bn *a, const bn *b)
{
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    for (int i = a->n - 1; i >= 0; i--)
        if (a->d[i] != b->d[i])
            return a->d[i] < b->d[i] ? -1 : 1;
    return 0;
}

/* a + b compared with c */
static int bn_cmp_sum(const bn *a, const bn *b, const bn *c)
{
    bn t;
    int n = a->n > b->n ? a->n : b->n;
    uint64_t carry = 0;
    for (int i = 0; i < n; i++) {
        uint64_t x = (uint64_t)(i < a->n ? a->d[i] : 0) + (i < b->n ? b->d[i] : 0) + carry;
        t.d[i] = (uint32_t)x;
        carry = x >> 32;
    }
    t.n = n;
    if (carry && n < BN_LIMBS)
        t.d[t.n++] = (uint32_t)carry;
    return bn_cmp(&t, c);
}

/* a -= b, with a >= b */
static void bn_sub(bn *a, const bn *b)
{
    int64_t borrow = 0;
    for (int i = 0; i < a->n; i++) {
        int64_t x = (int64_t)a->d[i] - (i < b->n ? b->d[i] : 0) - borrow;
        borrow = x < 0;
        a->d[i] = (uint32_t)(x + (borrow ? ((int64_t)1 << 32) : 0));
    }
    while (a->n > 0 && a->d[a->n - 1] == 0)
        a->n--;
}

static const uint64_t pow10_u64[20] = {1,
                                       10,
                                       100,
                                       1000,
                                       10000,
                                       100000,
                                       1000000,
                                       10000000,
                                       100000000,
                                       1000000000,
                                       10000000000,
                                       100000000000,
                                       1000000000000,
                                       10000000000000,
                                       100000000000000,
                                       1000000000000000,
                                       10000000000000000,
                                       100000000000000000,
                                       1000000000000000000,
                                       10000000000000000000u};

/* The last digit of the shortest string: d (the digit so far) when only the truncated string
 * reads back as v (tc1), d + 1 when only the incremented one does (tc2); when both do, the
 * nearer, ties to an even digit -- half_cmp is the sign of 2 r - s (the remainder against half
 * a unit). */
static int last_digit(int d, bool tc1, bool tc2, int half_cmp)
{
    if (tc1 && tc2)
        return d + (half_cmp > 0 || (half_cmp == 0 && (d & 1)));
    return tc2 ? d + 1 : d;
}

/* The same digits as the big-integer loop below for the magnitudes CSV files are mostly made
 * of (about 0.01 to 2^53): when the scaled s stays below 2^60, every quantity of the loop fits
 * in 64 bits (r < s, m- <= m+ < 10 s, r + m+ < 11 s), and one division gives each digit.
 * Returns the digit count, or 0 where the magnitude needs the wider paths. */
static int shortest_digits_u64(uint64_t f, int e, int bexp, bool even, bool unequal, char *digits,
                               int *decpt)
{
    int shift = unequal ? 2 - e : 1 - e; /* s = 2^shift before the power of ten */
    if (e >= 0 || shift > 59 || bexp == 0)
        return 0;
    uint64_t R = unequal ? f << 2 : f << 1, S = UINT64_C(1) << shift, MP = unequal ? 2 : 1, MM = 1;
    /* k: ceil(log10(v)) estimated from v >= 2^p (p = bexp - 1023), never too high and at most
     * one too low, as the loop below needs; floor(p log10(2)) = (p * 78913) >> 18 exactly for
     * |p| <= 1100, and p log10(2) is an integer only at p = 0. */
    int p = bexp - 1023;
    int k = p == 0 ? 0 : ((p * 78913) >> 18) + 1;
    if (k >= 0) {
        if (k > 19 || __builtin_mul_overflow(S, pow10_u64[k], &S))
            return 0;
    } else {
        if (-k > 19 || __builtin_mul_overflow(R, pow10_u64[-k], &R) ||
            __builtin_mul_overflow(MP, pow10_u64[-k], &MP))
            return 0;
        MM = MP;
        if (unequal)
            MM = MP / 2; /* m- = 10^-k, m+ = 2 * 10^-k */
    }
    if (S >= UINT64_C(1) << 60 || R + MP < R)
        return 0;
    if (even ? R + MP >= S : R + MP > S) {
        if (S >= (UINT64_C(1) << 60) / 10)
            return 0;
        S *= 10;
        k++;
    }
    *decpt = k;
    int nd = 0;
    for (;;) {
        R *= 10;
        MP *= 10;
        MM *= 10;
        int d = (int)(R / S);
        R -= (uint64_t)d * S;
        bool tc1 = even ? R <= MM : R < MM;
        bool tc2 = even ? R + MP >= S : R + MP > S;
        if (!tc1 && !tc2 && nd < 17) {
            digits[nd++] = (char)('0' + d);
            continue;
        }
        digits[nd++] = (char)('0' + last_digit(d, tc1, tc2, (2 * R > S) - (2 * R < S)));
        break;
    }
    digits[nd] = '\0';
    return nd;
}

/* Shortest digits of finite v > 0: digits[0..nd) and decpt such that
 * v reads as 0.d1d2... x 10^decpt. fast = 0: the big-integer paths alone (for tests). */
static int shortest_digits(double v, char *digits, int *decpt, bool fast)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint64_t frac = bits & ((UINT64_C(1) << 52) - 1);
    int bexp = (int)((bits >> 52) & 0x7FF);
    uint64_t f;
    int e;
    if (bexp == 0) {
        f = frac;
        e = -1074;
    } else {
        f = frac | (UINT64_C(1) << 52);
        e = bexp - 1075;
    }
    bool even = (f & 1) == 0;
    bool unequal = frac == 0 && bexp > 1; /* lower gap half the upper one */
    if (fast) {
        int nd = shortest_digits_u64(f, e, bexp, even, unequal, digits, decpt);
        if (nd)
            return nd;
    }
    bn r, s, mp, mm;
    bn_set_u64(&r, f);
    if (e >= 0) {
        bn_set_u64(&mm, 1);
        bn_shl(&mm, e);
        mp = mm;
        if (unequal) {
            bn_shl(&mp, 1);
            bn_shl(&r, e + 2);
            bn_set_u64(&s, 4);
        } else {
            bn_shl(&r, e + 1);
            bn_set_u64(&s, 2);
        }
    } else {
        bn_set_u64(&mm, 1);
        bn_set_u64(&s, 1);
        if (unequal) {
            bn_set_u64(&mp, 2);
            bn_shl(&r, 2);
            bn_shl(&s, 2 - e);
        } else {
            bn_set_u64(&mp, 1);
            bn_shl(&r, 1);
            bn_shl(&s, 1 - e);
        }
    }
    /* k: estimate of ceil(log10(v)), never too high; fixed up below. */
    int k = (int)ceil(log10(v) - 1e-10);
    if (k >= 0) {
        bn_mul_pow10(&s, k);
    } else {
        bn_mul_pow10(&r, -k);
        bn_mul_pow10(&mp, -k);
        bn_mul_pow10(&mm, -k);
    }
    int c = bn_cmp_sum(&r, &mp, &s);
    if (even ? c >= 0 : c > 0) {
        bn_mul_small(&s, 10);
        k++;
    }
    *decpt = k;
    int nd = 0;
    if (s.n <= 3) {
        /* Fast path (the usual magnitudes): s < 2^96, so 10 r, 10 s and
         * r + m+ all fit in 128 bits; the same loop on native integers. */
        unsigned __int128 R = 0, Sv = 0, MP = 0, MM = 0;
        for (int i = r.n - 1; i >= 0; i--)
            R = (R << 32) | r.d[i];
        for (int i = s.n - 1; i >= 0; i--)
            Sv = (Sv << 32) | s.d[i];
        for (int i = mp.n - 1; i >= 0; i--)
            MP = (MP << 32) | mp.d[i];
        for (int i = mm.n - 1; i >= 0; i--)
            MM = (MM << 32) | mm.d[i];
        for (;;) {
            R *= 10;
            MP *= 10;
            MM *= 10;
            int d = 0; /* R < 10 Sv: at most 9 subtractions, no 128-bit division */
            while (R >= Sv) {
                R -= Sv;
                d++;
            }
            bool tc1 = even ? R <= MM : R < MM;
            bool tc2 = even ? R + MP >= Sv : R + MP > Sv;
            if (!tc1 && !tc2 && nd < 17) {
                digits[nd++] = (char)('0' + d);
                continue;
            }
            digits[nd++] = (char)('0' + last_digit(d, tc1, tc2, (2 * R > Sv) - (2 * R < Sv)));
            break;
        }
        digits[nd] = '\0';
        return nd;
    }
    for (;;) {
        bn_mul_small(&r, 10);
        bn_mul_small(&mp, 10);
        bn_mul_small(&mm, 10);
        int d = 0;
        while (bn_cmp(&r, &s) >= 0) {
            bn_sub(&r, &s);
            d++;
        }
        int lo = bn_cmp(&r, &mm);
        int hi = bn_cmp_sum(&r, &mp, &s);
        bool tc1 = even ? lo <= 0 : lo < 0;
        bool tc2 = even ? hi >= 0 : hi > 0;
        if (!tc1 && !tc2 && nd < 17) {
            digits[nd++] = (char)('0' + d);
            continue;
        }
        /* 2r vs s, needed only when both digits would read back */
        digits[nd++] =
            (char)('0' + last_digit(d, tc1, tc2, tc1 && tc2 ? bn_cmp_sum(&r, &r, &s) : 0));
        break;
    }
    digits[nd] = '\0';
    return nd;
}

static char *fmt_double_py(double v, char *buf, size_t size, bool fast)
{
    if (isnan(v)) {
        snprintf(buf, size, "nan");
        return buf;
    }
    if (isinf(v)) {
        snprintf(buf, size, v < 0 ? "-inf" : "inf");
        return buf;
    }
    if (v == 0.0) {
        snprintf(buf, size, signbit(v) ? "-0.0" : "0.0");
        return buf;
    }
    char digits[24];
    bool neg = v < 0;
    int decpt;
    int nd = shortest_digits(neg ? -v : v, digits, &decpt, fast);
    int exp10 = decpt - 1;
    char out[64];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (decpt <= -4 || decpt > 16) {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++)
                out[o++] = digits[i];
        }
        o += (size_t)snprintf(out + o, sizeof(out) - o, "e%c%02d", exp10 < 0 ? '-' : '+',
                              exp10 < 0 ? -exp10 : exp10);
    } else if (decpt <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -decpt; i++)
            out[o++] = '0';
        for (int i = 0; i < nd; i++)
            out[o++] = digits[i];
    } else if (decpt >= nd) {
        for (int i = 0; i < nd; i++)
            out[o++] = digits[i];
        for (int i = nd; i < decpt; i++)
            out[o++] = '0';
        out[o++] = '.';
        out[o++] = '0';
    } else {
        for (int i = 0; i < decpt; i++)
            out[o++] = digits[i];
        out[o++] = '.';
        for (int i = decpt; i < nd; i++)
            out[o++] = digits[i];
    }
    out[o] = '\0';
    /* snprintf(buf, size, "%s", out) without printf's cost (a frontier writes two numbers per
     * plan): at most size - 1 bytes and the terminator */
    if (size) {
        size_t len = o < size - 1 ? o : size - 1;
        memcpy(buf, out, len);
        buf[len] = '\0';
    }
    return buf;
}

char *erg__fmt_double_py(double v, char *buf, size_t size)
{
    return fmt_double_py(v, buf, size, true);
}

char *erg__fmt_double_py_exact(double v, char *buf, size_t size)
{
    return fmt_double_py(v, buf, size, false);
}

/* snprintf's "%.17g" for the magnitudes where the 64-bit loop above holds (v = f 2^e with
 * 2^-e <= 2^59 after the power of ten): 17 digits of the exact value, rounded half to even as
 * glibc rounds, in %g's layout; elsewhere snprintf itself. */
char *erg__fmt_double_g17(double v, char *buf, size_t size)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    int bexp = (int)((bits >> 52) & 0x7FF);
    int e = bexp - 1075;
    uint64_t R = (bits & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
    int p = bexp - 1023;
    int k = p == 0 ? 0 : ((p * 78913) >> 18) + 1; /* as in shortest_digits_u64 */
    bool ok = bexp != 0 && bexp != 0x7FF && e < 0 && -e <= 59 && k <= 19 && -k <= 19;
    uint64_t S = ok ? UINT64_C(1) << -e : 1;
    if (ok && k >= 0)
        ok = !__builtin_mul_overflow(S, pow10_u64[k], &S);
    else if (ok)
        ok = !__builtin_mul_overflow(R, pow10_u64[-k], &R);
    if (ok && R >= S) { /* v >= 10^k: the estimate was one low */
        ok = S < (UINT64_C(1) << 60) / 10;
        S *= 10;
        k++;
    }
    if (!ok || S >= UINT64_C(1) << 60) {
        snprintf(buf, size, "%.17g", v);
        return buf;
    }
    char d[18];
    for (int i = 0; i < 17; i++) {
        R *= 10;
        int q = (int)(R / S);
        R -= (uint64_t)q * S;
        d[i] = (char)('0' + q);
    }
    if (2 * R > S || (2 * R == S && ((d[16] - '0') & 1))) {
        int i = 16;
        while (i >= 0 && d[i] == '9')
            d[i--] = '0';
        if (i >= 0) {
            d[i]++;
        } else {
            d[0] = '1'; /* 99...9 rounded up: 10...0, one more decimal place */
            k++;
        }
    }
    int nd = 17;
    while (nd > 1 && d[nd - 1] == '0')
        nd--;
    char out[48];
    size_t o = 0;
    if (bits >> 63)
        out[o++] = '-';
    int x = k - 1; /* the exponent of the e-style form */
    if (x < -4 || x >= 17) {
        out[o++] = d[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++)
                out[o++] = d[i];
        }
        out[o++] = 'e';
        out[o++] = x < 0 ? '-' : '+';
        int ax = x < 0 ? -x : x;
        if (ax >= 100)
            out[o++] = (char)('0' + ax / 100);
        out[o++] = (char)('0' + ax / 10 % 10);
        out[o++] = (char)('0' + ax % 10);
    } else if (x < 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -x - 1; i++)
            out[o++] = '0';
        for (int i = 0; i < nd; i++)
            out[o++] = d[i];
    } else {
        for (int i = 0; i <= x; i++)
            out[o++] = i < nd ? d[i] : '0';
        if (nd > x + 1) {
            out[o++] = '.';
            for (int i = x + 1; i < nd; i++)
                out[o++] = d[i];
        }
    }
    if (size) {
        size_t len = o < size - 1 ? o : size - 1;
        memcpy(buf, out, len);
        buf[len] = '\0';
    }
    return buf;
}

bool erg__parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return false;
    /* Decimal only: strtod would also read hexadecimal ("0x10" = 16). */
    if (strchr(s, 'x') || strchr(s, 'X'))
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v))
        return false;
    /* ERANGE: an overflow is not a number we can hold; an underflow (1e-320,
     * 1e-400) is the nearest double, subnormal or zero, for range checks. */
    if (errno == ERANGE && fabs(v) > DBL_MIN)
        return false;
    *out = v;
    return true;
}

bool erg__parse_long(const char *s, long *out)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE)
        return false;
    *out = v;
    return true;
}

/* ---- CSV ---- */

void erg__csv_init(erg__csv *c, const char *text, size_t len)
{
    memset(c, 0, sizeof(*c));
    /* A UTF-8 byte order mark (spreadsheet exports) is not part of the header. */
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) {
        text += 3;
        len -= 3;
    }
    c->p = text;
    c->end = text + len;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

int erg__csv_next(erg__csv *c)
{
    while (c->p < c->end) {
        const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
        const char *le = nl ? nl : c->end;
        size_t n = (size_t)(le - c->p);
        const char *start = c->p;
        c->p = nl ? nl + 1 : c->end;
        c->line++;
        if (n + 1 > c->fields_cap) {
            size_t cap = n + 1 > 256 ? n + 1 : 256;
            char *d = erg__realloc(c->fields_buf, cap);
            if (!d)
                return -1;
            c->fields_buf = d;
            c->fields_cap = cap;
        }
        memcpy(c->fields_buf, start, n);
        c->fields_buf[n] = '\0';
        /* A NUL byte inside the line truncates it; treat the rest as gone. */
        char *line = c->fields_buf;
        char *t = trim(line);
        if (*t == '\0')
            continue;
        c->nfields = 0;
        char *f = line;
        for (;;) {
            if (c->nfields == c->fields_alloc) {
                size_t na = c->fields_alloc ? c->fields_alloc * 2 : 16;
                char **d = erg__reallocarray(c->fields, na, sizeof(char *));
                if (!d)
                    return -1;
                c->fields = d;
                c->fields_alloc = na;
            }
            char *q = f;
            while (*q == ' ' || *q == '\t')
                q++;
            char *next;
            if (*q == '"') {
                /* Quoted field: "" is a literal quote. */
                char *w = q, *r = q + 1;
                for (;;) {
                    if (*r == '\0')
                        break;
                    if (*r == '"') {
                        if (r[1] == '"') {
                            *w++ = '"';
                            r += 2;
                            continue;
                        }
                        r++;
                        break;
                    }
                    *w++ = *r++;
                }
                char *comma = strchr(r, ',');
                *w = '\0';
                c->fields[c->nfields++] = trim(q);
                if (!comma)
                    break;
                next = comma + 1;
            } else {
                char *comma = strchr(q, ',');
                if (comma)
                    *comma = '\0';
                c->fields[c->nfields++] = trim(q);
                if (!comma)
                    break;
                next = comma + 1;
            }
            f = next;
        }
        return 1;
    }
    return 0;
}

void erg__csv_free(erg__csv *c)
{
    erg__free(c->fields_buf);
    erg__free(c->fields);
    memset(c, 0, sizeof(*c));
}

/* ---- names ---- */

bool erg__name_lookup(const erg__name *table, size_t n, const char *name, int *value)
{
    for (size_t i = 0; name && i < n; i++)
        if (!strcasecmp(name, table[i].name)) {
            *value = table[i].value;
            return true;
        }
    return false;
}

const char *erg__name_of(const erg__name *table, size_t n, int value)
{
    for (size_t i = 0; i < n; i++)
        if (table[i].value == value)
            return table[i].name;
    return NULL;
}
