/* state.c: ergond's persistent lease state (its parser; written durably by core's
 * erg__write_file_ex), process identity, and the StrictModes checks on the files and
 * directories it trusts. */
#include "daemon/daemon_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- process identity ---- */

int erg__proc_start_ticks(pid_t pid, unsigned long long *out)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
     * the fields start after the last ')'. starttime is field 22, i.e. the
     * 20th after comm. */
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    p++;
    for (int field = 3; field < 22; field++) {
        while (*p == ' ')
            p++;
        while (*p && *p != ' ')
            p++;
        if (!*p)
            return -1;
    }
    while (*p == ' ')
        p++;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p || errno)
        return -1;
    *out = v;
    return 0;
}

void erg__boot_id(char *buf, size_t size)
{
    buf[0] = '\0';
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char tmp[64];
    ssize_t n = read(fd, tmp, sizeof tmp - 1);
    close(fd);
    if (n <= 0)
        return;
    tmp[n] = '\0';
    size_t o = 0;
    for (ssize_t i = 0; i < n && o + 1 < size && o < ERG__BOOT_ID_MAX; i++)
        if ((tmp[i] >= '0' && tmp[i] <= '9') || (tmp[i] >= 'a' && tmp[i] <= 'f') || tmp[i] == '-')
            buf[o++] = tmp[i];
    buf[o] = '\0';
}

/* ---- the state file ---- */

/* A decimal number made of digits only, at most max. */
static bool parse_num(const char *s, unsigned long long max, unsigned long long *out)
{
    if (!s || !*s || strlen(s) > 20)
        return false;
    for (const char *c = s; *c; c++)
        if (*c < '0' || *c > '9')
            return false;
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno || v > max)
        return false;
    *out = v;
    return true;
}

erg_status erg__state_parse(const char *text, size_t len, const char *name, erg__state *out,
                            erg_error *err)
{
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    long line = 0;
    bool header = false, boot = false;
    const char *p = text, *end = text + len;
    erg_status st = ERG_OK;
    while (p < end) {
        char buf[256];
        if ((st = erg__next_line(&p, end, buf, sizeof buf, &line, name, err)))
            goto fail;
        if (buf[0] == '#')
            continue;
        char *save = NULL, *tok[8];
        int nt = 0;
        for (char *t = strtok_r(buf, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
            if (nt == 7) {
                st = erg_error_set(err, ERG_EPARSE, "%s:%ld: too many fields", name, line);
                goto fail;
            }
            tok[nt++] = t;
        }
        if (nt == 0)
            continue;
        if (!header) {
            if (nt != 2 || strcmp(tok[0], "ergond-leases")) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: not an ergond lease state (expected 'ergond-leases 1')",
                                   name, line);
                goto fail;
            }
            if (strcmp(tok[1], "1")) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: lease state version '%.20s' is not supported (only 1)",
                                   name, line, tok[1]);
                goto fail;
            }
            header = true;
            continue;
        }
        if (!strcmp(tok[0], "boot")) {
            size_t bl = nt == 2 ? strlen(tok[1]) : 0;
            bool okc = bl > 0 && bl <= ERG__BOOT_ID_MAX && !boot;
            for (size_t i = 0; okc && i < bl; i++) {
                char c = tok[1][i];
                okc = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-';
            }
            if (!okc) {
                st = erg_error_set(err, ERG_EPARSE, "%s:%ld: malformed or repeated boot id", name,
                                   line);
                goto fail;
            }
            memcpy(out->boot, tok[1], bl + 1);
            boot = true;
            continue;
        }
        erg__lease_rec r = {0};
        unsigned long long pid = 0, start = 0, uid = 0, gpu = 0, bits = 0;
        if (!strcmp(tok[0], "lease")) {
            if (nt != 6 || !parse_num(tok[1], 0x7fffffff, &pid) || pid == 0 ||
                !parse_num(tok[2], ULLONG_MAX, &start) || !parse_num(tok[3], 0xfffffffe, &uid) ||
                !parse_num(tok[4], 63, &gpu) || !parse_num(tok[5], 7, &bits) || bits == 0) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: expected 'lease PID START_TICKS UID GPU(0-63) "
                                   "BITS(1-7)'",
                                   name, line);
                goto fail;
            }
        } else if (!strcmp(tok[0], "pending")) {
            if (nt != 3 || !parse_num(tok[1], 63, &gpu) || !parse_num(tok[2], 7, &bits) ||
                bits == 0) {
                st = erg_error_set(err, ERG_EPARSE,
                                   "%s:%ld: expected 'pending GPU(0-63) BITS(1-7)'", name, line);
                goto fail;
            }
            r.pending = true;
        } else {
            st = erg_error_set(err, ERG_EPARSE,
                               "%s:%ld: unknown record '%.32s' (expected boot, lease or pending)",
                               name, line, tok[0]);
            goto fail;
        }
        if (out->n >= ERG__STATE_MAX_RECORDS) {
            st = erg_error_set(err, ERG_EPARSE, "%s:%ld: more than %d records", name, line,
                               ERG__STATE_MAX_RECORDS);
            goto fail;
        }
        r.pid = (pid_t)pid;
        r.start = start;
        r.uid = (unsigned)uid;
        r.gpu = (int)gpu;
        r.bits = (unsigned)bits;
        if (!ERG__GROW(out->rec, cap, out->n + 1, 16)) {
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
            goto fail;
        }
        out->rec[out->n++] = r;
    }
    if (!header) {
        st = erg_error_set(err, ERG_EPARSE, "%s: empty (no 'ergond-leases 1' line)", name);
        goto fail;
    }
    return ERG_OK;
fail:
    erg__state_free(out);
    return st;
}

void erg__state_free(erg__state *s)
{
    erg__free(s->rec);
    s->rec = NULL;
    s->n = 0;
}

/* ---- StrictModes ---- */

static void owner_name(uid_t uid, char *buf, size_t size)
{
    struct passwd pw, *res = NULL;
    char pbuf[2048];
    if (getpwuid_r(uid, &pw, pbuf, sizeof pbuf, &res) == 0 && res)
        snprintf(buf, size, "uid %u (%s)", (unsigned)uid, res->pw_name);
    else
        snprintf(buf, size, "uid %u", (unsigned)uid);
}

static bool trusted_owner(uid_t uid)
{
    return uid == 0 || uid == geteuid();
}

static const char *writers(mode_t mode)
{
    if ((mode & 020) && (mode & 002))
        return "its group and everyone";
    return (mode & 020) ? "its group" : "everyone";
}

/* One inode: trusted owner, and not writable by group/others (directories
 * with the sticky bit excepted, like /tmp: nobody can replace what is in
 * them). `path` is what the messages name. */
static erg_status check_inode(const struct stat *sb, const char *what, const char *path,
                              const char *whose, erg_error *err)
{
    bool dir = S_ISDIR(sb->st_mode);
    bool bad_owner = !trusted_owner(sb->st_uid);
    bool bad_mode = (sb->st_mode & 022) && !(dir && (sb->st_mode & S_ISVTX));
    if (!bad_owner && !bad_mode)
        return ERG_OK;
    char owner[200] = "", mode[160] = "", who[96];
    if (bad_owner) {
        owner_name(sb->st_uid, who, sizeof who);
        snprintf(owner, sizeof owner, "is owned by %s, not by root or ergond's own user (uid %u)",
                 who, (unsigned)geteuid());
    }
    if (bad_mode)
        snprintf(mode, sizeof mode, "is writable by %s (mode %04o)", writers(sb->st_mode),
                 (unsigned)(sb->st_mode & 07777));
    char fix[700];
    snprintf(fix, sizeof fix, "%s%s%s%s%s", bad_owner ? "chown root " : "", bad_owner ? path : "",
             bad_owner && bad_mode ? "; " : "", bad_mode ? "chmod go-w " : "",
             bad_mode ? path : "");
    return erg_error_set(err, ERG_EPERM,
                         "refusing %s %s: %s%s %s%s%s; like sshd's StrictModes, ergond only "
                         "trusts what root or its own user alone can change (fix: %s)",
                         what, whose, dir ? "directory " : "", path, owner,
                         bad_owner && bad_mode ? " and " : "", mode, fix);
}

erg_status erg__check_secure_dirs(const char *path, const char *what, const char *whose,
                                  erg_error *err)
{
    char *real = realpath(path, NULL);
    if (!real)
        return erg_error_set(err, ERG_EIO, "%s %s: %s", what, whose, strerror(errno));
    erg_status st = ERG_OK;
    /* path itself, then each parent up to "/" */
    for (;;) {
        struct stat sb;
        if (stat(real, &sb) != 0) {
            st = erg_error_set(err, ERG_EIO, "%s %s: %s: %s", what, whose, real, strerror(errno));
            break;
        }
        if (S_ISDIR(sb.st_mode) && (st = check_inode(&sb, what, real, whose, err)))
            break;
        char *slash = strrchr(real, '/');
        if (!slash || (slash == real && !real[1]))
            break;
        if (slash == real)
            real[1] = '\0';
        else
            *slash = '\0';
    }
    free(real);
    return st;
}

erg_status erg__read_secure_file(const char *path, const char *what, size_t max_bytes, char **out,
                                 size_t *len, erg_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return erg_error_set(err, errno == ENOENT ? ERG_ENOTFOUND : ERG_EIO, "%s %s: %s", what,
                             path, strerror(errno));
    struct stat sb;
    erg_status st = ERG_OK;
    if (fstat(fd, &sb) != 0)
        st = erg_error_set(err, ERG_EIO, "%s %s: %s", what, path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = erg_error_set(err, ERG_EINVAL, "%s %s is not a regular file", what, path);
    else if (!(st = check_inode(&sb, what, path, path, err))) {
        /* the directories that hold it (after symlinks) */
        char *dir = erg__dirname_dup(path);
        if (!dir)
            st = erg_error_set(err, ERG_ENOMEM, "out of memory");
        else {
            char *real = realpath(path, NULL);
            st = erg__check_secure_dirs(dir, what, path, err);
            if (!st && real) {
                char *rs = strrchr(real, '/');
                if (rs && rs != real) {
                    *rs = '\0';
                    st = erg__check_secure_dirs(real, what, path, err);
                }
            }
            free(real);
            erg__free(dir);
        }
    }
    if (!st && (size_t)sb.st_size > max_bytes)
        st =
            erg_error_set(err, ERG_EINVAL, "%s %s is larger than %zu bytes", what, path, max_bytes);
    char *buf = NULL;
    size_t n = 0;
    if (!st && !(buf = erg__malloc((size_t)sb.st_size + 1)))
        st = erg_error_set(err, ERG_ENOMEM, "out of memory");
    while (!st && n < (size_t)sb.st_size) {
        ssize_t r = read(fd, buf + n, (size_t)sb.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            st = erg_error_set(err, ERG_EIO, "%s %s: read failed: %s", what, path, strerror(errno));
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (st) {
        erg__free(buf);
        return st;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return ERG_OK;
}
