/* frontier_dir.c: what keeps a frontier directory one run's: the frontier's fingerprint, which
 * plans.ergon and frontier-info.csv carry (a reader refuses two different ones: the files of
 * two runs), and the directory's lock, which its writers take exclusively and its readers
 * shared, so that two `plan perseus --out` into one directory never interleave their files
 * (docs/formats.md, "Frontier directory"). */
#include "core/internal.h"
#include "planner/frontier_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * FNV_PRIME;
    return h;
}

static uint64_t fnv_i64(uint64_t h, int64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)v >> (8 * i));
    return fnv_bytes(h, b, 8);
}

static uint64_t fnv_double(uint64_t h, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return fnv_i64(h, (int64_t)u);
}

/* The schedule as plans.ergon's header states it. */
static uint64_t hash_schedule(uint64_t h, const erg_frontier *f)
{
    const erg_schedule *sc = erg__frontier_schedule(f);
    const int *off = erg__frontier_rank_offsets(f);
    int S = erg_frontier_num_stages(f);
    const char *name = erg_schedule_name(sc->kind);
    h = fnv_bytes(h, name, strlen(name) + 1);
    h = fnv_i64(h, S);
    h = fnv_i64(h, erg_frontier_num_microbatches(f));
    h = fnv_i64(h, erg_schedule_chunks(sc));
    h = fnv_double(h, erg_schedule_backward_split(sc));
    h = fnv_i64(h, sc->max_inflight);
    for (int s = 0; s < S && s < ERG_SCHED_MAX_STAGES; s++)
        h = fnv_i64(h, sc->extra_warmup[s]);
    const erg_order *ord = erg__frontier_order(f);
    for (int r = 0; r < S; r++) {
        h = fnv_i64(h, off ? off[r + 1] - off[r] : 0);
        const erg_instr *v;
        int nr = ord ? erg_order_rank(ord, r, &v) : 0;
        for (int j = 0; j < nr; j++) {
            char nm[80];
            erg_instr_format(v[j], nm, sizeof nm);
            h = fnv_bytes(h, nm, strlen(nm) + 1);
        }
    }
    return h;
}

/* Every plan's estimate and the clocks that changed since the plan before (plan 0: all). */
static erg_status hash_plans(const erg_frontier *f, uint64_t *h)
{
    const int *off = erg__frontier_rank_offsets(f);
    size_t n = off ? (size_t)off[erg_frontier_num_stages(f)] : 0, np = erg_frontier_size(f);
    int *cur = erg__calloc(n ? n : 1, sizeof(int)), *prev = erg__calloc(n ? n : 1, sizeof(int));
    if (!cur || !prev) {
        erg__free(cur);
        erg__free(prev);
        return ERG_ENOMEM;
    }
    *h = fnv_i64(*h, (int64_t)np);
    for (size_t k = 0; k < np; k++) {
        erg_frontier_point pt;
        erg_frontier_get(f, k, &pt, NULL);
        erg__frontier_advance(f, k, cur);
        *h = fnv_double(fnv_double(*h, pt.time_s), pt.energy_j);
        for (size_t i = 0; i < n; i++)
            if (k == 0 || cur[i] != prev[i]) {
                *h = fnv_i64(fnv_i64(*h, (int64_t)i), cur[i]);
                prev[i] = cur[i];
            }
        *h = fnv_i64(*h, -1); /* end of the plan */
    }
    erg__free(cur);
    erg__free(prev);
    return ERG_OK;
}

bool erg_frontier_fingerprint(const erg_frontier *f, char out[ERG_FRONTIER_FINGERPRINT_LEN])
{
    out[0] = '\0';
    if (!f)
        return false;
    const char *stored = erg__frontier_stored_fingerprint(f);
    if (stored) {
        snprintf(out, ERG_FRONTIER_FINGERPRINT_LEN, "%s", stored);
        return true;
    }
    if (!erg__frontier_computed(f))
        return false; /* plan files carry none */
    uint64_t h = fnv_bytes(FNV_OFFSET, "ergon-frontier 1", 17);
    h = hash_schedule(h, f);
    if (hash_plans(f, &h))
        return false;
    snprintf(out, ERG_FRONTIER_FINGERPRINT_LEN, "fnv1a64:%016llx", (unsigned long long)h);
    return true;
}

/* ---- the lock ---- */

struct erg_frontier_dir_lock {
    int fd; /* the directory, flock'ed; -1 when unlocked */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

erg_status erg_frontier_dir_lock_take(const char *dir, bool exclusive, double wait_s,
                                      erg_frontier_dir_lock **out, erg_error *err)
{
    if (!dir || !out)
        return erg_error_set(err, ERG_EINVAL, "erg_frontier_dir_lock_take: NULL argument");
    *out = NULL;
    erg_status st;
    if (exclusive && (st = erg__mkdir_p(dir, err)))
        return st;
    erg_frontier_dir_lock *l = erg__calloc(1, sizeof *l);
    if (!l)
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    l->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (l->fd < 0) {
        if (exclusive) {
            int e = errno;
            erg__free(l);
            return erg_error_set(err, ERG_EIO, "%s: cannot open the directory: %s", dir,
                                 strerror(e));
        }
        *out = l; /* a reader of a missing directory: its read names what is missing */
        return ERG_OK;
    }
    double until = now_s() + (wait_s > 0 ? wait_s : 0);
    for (;;) {
        if (flock(l->fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno != EWOULDBLOCK) { /* no flock on this file system: go on unlocked */
            close(l->fd);
            l->fd = -1;
            break;
        }
        if (now_s() >= until) {
            close(l->fd);
            erg__free(l);
            return erg_error_set(err, ERG_ETIMEOUT,
                                 "%s: another process is %s this frontier directory (waited %g "
                                 "s for its lock); try again when it is done",
                                 dir, exclusive ? "writing or reading" : "writing", wait_s);
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    *out = l;
    return ERG_OK;
}

void erg_frontier_dir_lock_release(erg_frontier_dir_lock *l)
{
    if (!l)
        return;
    if (l->fd >= 0)
        close(l->fd); /* closing the last descriptor releases the flock */
    erg__free(l);
}
