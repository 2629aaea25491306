/* config.c: ergond's allow list -- which uids and gids may change which GPUs -- parsed from the
 * config file (docs/ergond.md: `allow GPUS PRINCIPAL...`), and the question the endpoints ask of
 * it; also the line reader shared with the lease state parser (state.c). Owns: the parsed
 * erg__config. Trusts: the file only as far as daemon.c's StrictModes read established (owned by
 * root or ergond, not writable by others); the text itself is parsed with bounds, errors name
 * file:line, and the parser is fuzzed. User and group names are resolved once, at start-up. */
#include "daemon/daemon_internal.h"

#include <grp.h>
#include <pwd.h>
#include <string.h>

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
                    st = erg_error_set(err, ERG_EPARSE, "%s:%ld: unknown user '%s'", name, line, v);
                    goto fail;
                }
                a.id = res->pw_uid;
            } else if (!strcmp(prin, "group")) {
                struct group gr, *res = NULL;
                char gbuf[8192];
                if (getgrnam_r(v, &gr, gbuf, sizeof gbuf, &res) || !res) {
                    st =
                        erg_error_set(err, ERG_EPARSE, "%s:%ld: unknown group '%s'", name, line, v);
                    goto fail;
                }
                a.is_gid = 1;
                a.id = res->gr_gid;
            } else {
                st = erg_error_set(err, ERG_EPARSE, "%s:%ld: unknown principal kind '%s'", name,
                                   line, prin);
                goto fail;
            }
            if (!ERG__GROW(out->allow, cap, out->n + 1, 8)) {
                st = erg_error_set(err, ERG_ENOMEM, "out of memory");
                goto fail;
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
