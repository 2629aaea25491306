/* daemon_internal.h: ergond's bounded HTTP request parser, query parser and config parser. */
#ifndef ERGON_DAEMON_INTERNAL_H
#define ERGON_DAEMON_INTERNAL_H

#include "core/internal.h"
#include "ergon/daemon.h"

#include <sys/types.h>

#define ERG__HTTP_MAX_HEAD 8192
#define ERG__HTTP_MAX_BODY 4096
#define ERG__HTTP_MAX_HEADERS 32
#define ERG__QUERY_MAX 16

typedef struct erg__http_req {
    char method[8];        /* "GET", "POST". */
    char path[256];        /* Percent-decoded path. */
    char query[1024];      /* Raw query string (after '?'), may be empty. */
    size_t head_len;       /* Bytes of the request line and headers, blank line included. */
    size_t content_length; /* Body bytes that follow. */
} erg__http_req;

/* Parse the head of a request in buf[0..len). Returns 1 when the head and
 * its body are complete, 0 when more bytes are needed, or a negative HTTP
 * status (-400 malformed, -413 body too large, -414 target too long, -431
 * head too large, -501 method not implemented, -505 version) on error. Never
 * reads past len. */
int erg__http_parse(const char *buf, size_t len, erg__http_req *req);

typedef struct erg__query {
    int n;
    char key[ERG__QUERY_MAX][32];
    char val[ERG__QUERY_MAX][256];
} erg__query;

/* Split and percent-decode a query string. -1 on malformed escapes, NUL
 * bytes, too many or too long parameters, duplicate keys; 0 otherwise. */
int erg__query_parse(const char *q, erg__query *out);
/* Value of key or NULL. */
const char *erg__query_get(const erg__query *q, const char *key);

/* One allow-list entry: a principal allowed on a set of GPUs. */
typedef struct erg__allow {
    uint64_t gpus; /* Bit i = GPU i; all ones for '*'. */
    int is_gid;    /* 1: id is a gid, 0: a uid. */
    unsigned id;
} erg__allow;

typedef struct erg__config {
    erg__allow *allow;
    size_t n;
} erg__config;

/* The next line of a line-oriented text file (config, lease state): copies
 * it into buf (cap bytes, NUL-terminated, without the newline), advances *p
 * and *line. Returns ERG_OK, ERG_ENOTFOUND at the end of the text, or
 * ERG_EPARSE ("name:line: line too long" / "NUL byte"). */
erg_status erg__next_line(const char **p, const char *end, char *buf, size_t cap, long *line,
                          const char *name, erg_error *err);

/* Parse config text (docs/ergond.md). Errors name file:line. */
erg_status erg__config_parse(const char *text, size_t len, const char *name, erg__config *out,
                             erg_error *err);
void erg__config_free(erg__config *c);
/* May (uid, gid) change GPU `gpu`? Root always may. */
bool erg__config_allows(const erg__config *c, unsigned uid, unsigned gid, int gpu);
/* The same, also matching group: entries against the supplementary groups. */
bool erg__config_allows_groups(const erg__config *c, unsigned uid, unsigned gid,
                               const unsigned *groups, unsigned ngroups, int gpu);

/* Parse "0,1,3" into a bit mask of GPUs below count; -1 on empty entries,
 * out-of-range or non-numeric ids. Duplicates collapse. */
int erg__parse_gpu_ids(const char *s, int count, uint64_t *mask);

/* The credentials of a connected peer, from SO_PEERCRED and SO_PEERGROUPS
 * at accept time: uid, primary gid, pid and the supplementary groups. */
#define ERG__PEER_MAX_GROUPS 64
typedef struct erg__peer {
    unsigned uid, gid;
    pid_t pid;
    unsigned ngroups; /* supplementary groups known */
    unsigned groups[ERG__PEER_MAX_GROUPS];
} erg__peer;

/* Handle one parsed request from peer and write the full HTTP response
 * into resp. Used by the server loop and the fuzz target. */
void erg__daemon_handle(erg_daemon *d, const erg__http_req *req, const erg__peer *peer,
                        erg__buf *resp);

/* A daemon with no socket, for the fuzz target: config text + back-end. */
erg_status erg__daemon_new_detached(const char *config_text, erg_gpu *gpu, erg_daemon **out,
                                    erg_error *err);

/* ---- lease state, process identity, StrictModes (state.c) ---- */

#define ERG__BOOT_ID_MAX 36
#define ERG__STATE_MAX_RECORDS (256 * 64 + 64)

/* One line of the lease state file: "lease PID START UID GPU BITS" (a
 * process holds what BITS says on GPU) or "pending GPU BITS" (a change that
 * was being made when the state was written). */
typedef struct erg__lease_rec {
    pid_t pid;
    unsigned long long start; /* start time of pid, clock ticks after boot */
    unsigned uid;
    int gpu;
    unsigned bits; /* 1 SM clocks, 2 memory clocks, 4 power limit */
    bool pending;
} erg__lease_rec;

typedef struct erg__state {
    char boot[ERG__BOOT_ID_MAX + 1]; /* boot id the state was written in; "" if unknown */
    erg__lease_rec *rec;
    size_t n;
} erg__state;

/* Parse a lease state file (docs/ergond.md). Errors name file:line. */
erg_status erg__state_parse(const char *text, size_t len, const char *name, erg__state *out,
                            erg_error *err);
void erg__state_free(erg__state *s);
/* Start time of pid in clock ticks after boot (/proc/PID/stat field 22); -1 if unknown. */
int erg__proc_start_ticks(pid_t pid, unsigned long long *out);
/* This boot's id (/proc/sys/kernel/random/boot_id), "" if unknown. */
void erg__boot_id(char *buf, size_t size);

/* StrictModes: `path` (a directory) and each directory above it must be
 * owned by root or the daemon's euid and not writable by group or others
 * (sticky directories such as /tmp excepted). `what`/`whose` name the file
 * in the message ("config file", "/etc/ergond.conf"). */
erg_status erg__check_secure_dirs(const char *path, const char *what, const char *whose,
                                  erg_error *err);
/* Read a regular file that passes StrictModes itself (owner root or euid, not
 * group/world-writable) and whose directories do (erg__check_secure_dirs). */
erg_status erg__read_secure_file(const char *path, const char *what, size_t max_bytes, char **out,
                                 size_t *len, erg_error *err);

#endif
