/* leases.c: ergond's leases -- which process holds what it changed on which GPU -- and their
 * durability: the state file written before each answer, and recovery at start-up (from
 * erg_daemon_set_state_dir, which checks the directory with StrictModes). Owns: the
 * lease table (d->leases), the pending-change record (d->pending) and STATE_DIR/leases. Trusts:
 * the kernel for process identity (the pid from SO_PEERCRED, pidfds, /proc/PID/stat start
 * times, the boot id), and the state file only after StrictModes (state.c) and a strict parse;
 * a state it cannot trust means every GPU is reset. It resets GPUs only through gpu.h.
 *
 * LEASES. A GPU changed by process P (set clocks / power limit) is leased to P: it moves out of
 * any other lease and into P's, whose pidfd (pidfd_open) the loop polls (loop.c). When P exits,
 * whatever the cause, the pidfd becomes readable and the daemon resets what P changed on the
 * GPUs P still holds. An explicit reset by P releases the GPU. On kernels without pidfd_open the
 * loop checks kill(pid, 0) twice a second instead (PID reuse could then delay a reset;
 * documented). When the daemon stops, all leased GPUs are reset.
 *
 * PERSISTENCE. With a state directory (erg_daemon_set_state_dir), every lease change is written
 * to DIR/leases (temp file, fsync, rename, fsync of the directory) before the client gets its
 * answer; a change about to be made is first recorded as "pending" (endpoints.c). A restarted
 * daemon (after SIGKILL, a crash, an OOM kill) reads it back: a holder that is still alive, the
 * same process (pid and start time from /proc/PID/stat, so a reused pid does not count), is
 * re-adopted with a new pidfd; what a dead holder or a pending change touched is reset. A
 * missing or unreadable state means an earlier daemon may have left anything: every GPU is
 * reset. State from an earlier boot (boot_id) is dropped: the driver reset the GPUs at boot. */
#include "daemon/daemon_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- the lease table ---- */

static int pidfd_open_compat(pid_t pid)
{
#ifdef SYS_pidfd_open
    long fd = syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) {
        fcntl((int)fd, F_SETFD, FD_CLOEXEC);
        return (int)fd;
    }
#endif
    return -1;
}

lease *erg__lease_of(erg_daemon *d, pid_t pid, unsigned uid, bool create)
{
    lease *freel = NULL;
    for (int i = 0; i < MAX_LEASES; i++) {
        if (d->leases[i].used && d->leases[i].pid == pid)
            return &d->leases[i];
        if (!d->leases[i].used && !freel)
            freel = &d->leases[i];
    }
    if (!create || !freel || pid <= 0)
        return NULL; /* pid 0: a process in a PID namespace we cannot see; kill(0, 0) would
                      * "find" our own process group, and the lease would never expire */
    memset(freel, 0, sizeof *freel);
    freel->pid = pid;
    freel->uid = uid;
    freel->pidfd = pidfd_open_compat(pid);
    if (freel->pidfd < 0 && kill(pid, 0) != 0)
        return NULL; /* the process is already gone: nothing to hold */
    if (erg__proc_start_ticks(pid, &freel->start))
        freel->start = 0;
    freel->used = true;
    return freel;
}

void erg__lease_drop_if_empty(erg_daemon *d, lease *l)
{
    for (int g = 0; g < 64; g++)
        if (l->what[g])
            return;
    if (l->pidfd >= 0)
        close(l->pidfd);
    l->used = false;
    d->dirty = true;
}

/* Record that pid changed `what` on gpu: move the GPU into pid's lease. */
void erg__lease_take(erg_daemon *d, lease *l, int gpu, int what)
{
    for (int i = 0; i < MAX_LEASES; i++) {
        lease *o = &d->leases[i];
        if (o->used && o != l && o->what[gpu]) {
            l->what[gpu] |= o->what[gpu];
            o->what[gpu] = 0;
            erg__lease_drop_if_empty(d, o);
            d->dirty = true;
        }
    }
    if ((l->what[gpu] & what) != what)
        d->dirty = true;
    l->what[gpu] |= (uint8_t)what;
}

void erg__lease_release(erg_daemon *d, pid_t pid, int gpu, int what)
{
    lease *l = erg__lease_of(d, pid, 0, false);
    if (!l)
        return;
    if (l->what[gpu] & what)
        d->dirty = true;
    l->what[gpu] &= (uint8_t)~what;
    erg__lease_drop_if_empty(d, l);
}

/* Reset what `what` says on GPU g; `who` names the cause in error lines. */
static void restore_gpu(erg_daemon *d, int g, int what, const char *who)
{
    erg_error e;
    if (what & CH_SM) {
        if (erg_gpu_reset_sm_clocks(d->gpu, g, &e))
            erg__dlog(d, 2, "%s: GPU %d SM clock reset failed: %s", who, g, e.msg);
    }
    if (what & CH_MEM) {
        erg_status st = erg_gpu_reset_mem_clocks(d->gpu, g, &e);
        if (st && st != ERG_ENOTSUP)
            erg__dlog(d, 2, "%s: GPU %d memory clock reset failed: %s", who, g, e.msg);
    }
    if (what & CH_PL) {
        if (erg_gpu_reset_power_limit(d->gpu, g, &e))
            erg__dlog(d, 2, "%s: GPU %d power limit reset failed: %s", who, g, e.msg);
    }
}

void erg__lease_expire(erg_daemon *d, lease *l, const char *why)
{
    char who[48];
    snprintf(who, sizeof who, "lease of pid %d", (int)l->pid);
    for (int g = 0; g < 64 && g < erg_gpu_count(d->gpu); g++) {
        if (!l->what[g])
            continue;
        restore_gpu(d, g, l->what[g], who);
        erg__dlog(d, 0, "pid %d %s: GPU %d restored", (int)l->pid, why, g);
        l->what[g] = 0;
        d->dirty = true;
    }
    erg__lease_drop_if_empty(d, l);
}

/* ---- persistence ---- */

/* Write the leases (and pending changes) to the state file if they changed
 * (or `force`). Failures are logged once until a write succeeds again. */
erg_status erg__lease_sync(erg_daemon *d, bool force, erg_error *err)
{
    if (!d->state_path || (!d->dirty && !force))
        return ERG_OK;
    erg__buf b = {0};
    erg__buf_printf(&b, "# ergond lease state: rewritten on every lease change; do not edit\n"
                        "ergond-leases 1\n");
    if (d->boot_id[0])
        erg__buf_printf(&b, "boot %s\n", d->boot_id);
    for (int i = 0; i < MAX_LEASES; i++) {
        const lease *l = &d->leases[i];
        if (!l->used)
            continue;
        for (int g = 0; g < 64; g++)
            if (l->what[g])
                erg__buf_printf(&b, "lease %d %llu %u %d %u\n", (int)l->pid, l->start, l->uid, g,
                                (unsigned)l->what[g]);
    }
    for (int g = 0; g < 64; g++)
        if (d->pending[g])
            erg__buf_printf(&b, "pending %d %u\n", g, (unsigned)d->pending[g]);
    erg_error e;
    erg_status st = b.data ? erg__write_file_ex(d->state_path, b.data, b.len,
                                                ERG__WRITE_DURABLE | ERG__WRITE_PRIVATE, &e)
                           : erg_error_set(&e, ERG_ENOMEM, "out of memory");
    erg__buf_free(&b);
    if (st) {
        if (!d->save_failed)
            erg__dlog(d, 2,
                      "cannot record leases in %s: %s (a restarted ergond would not know "
                      "them; retrying)",
                      d->state_path, e.msg);
        d->save_failed = true;
        if (err)
            *err = e;
        return st;
    }
    if (d->save_failed)
        erg__dlog(d, 0, "leases recorded in %s again", d->state_path);
    d->save_failed = false;
    d->dirty = false;
    return ERG_OK;
}

/* ---- start-up: recovery from the state file ---- */

/* Is the process that held a lease (pid, start time) still the same live
 * process? On success *pidfd is a pidfd for it (or -1 without pidfd_open). */
static bool holder_alive(pid_t pid, unsigned long long start, int *pidfd)
{
    *pidfd = -1;
    if (start == 0)
        return false; /* its identity was never known: cannot tell it from a reused pid */
    int fd = pidfd_open_compat(pid);
    if (fd < 0 && kill(pid, 0) != 0 && errno == ESRCH)
        return false;
    /* Read the start time after opening the pidfd: if it matches, the
     * process that has the pid now started before the pidfd was opened, so
     * the pidfd refers to it. */
    unsigned long long now_start;
    if (erg__proc_start_ticks(pid, &now_start) || now_start != start) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    *pidfd = fd;
    return true;
}

static void reset_everything(erg_daemon *d, const char *why)
{
    erg__dlog(d, 1,
              "%s: resetting clocks and power limits of every GPU, since an earlier ergond may "
              "have left changes that nobody would undo",
              why);
    for (int g = 0; g < erg_gpu_count(d->gpu); g++) {
        restore_gpu(d, g, CH_SM | CH_MEM | CH_PL, "start-up reset");
        erg__dlog(d, 0, "start-up: GPU %d restored", g);
    }
}

/* Apply a lease state read at start-up: re-adopt live holders, reset what
 * dead holders and pending changes touched. */
static void recover(erg_daemon *d, const erg__state *s)
{
    int count = erg_gpu_count(d->gpu);
    uint8_t reset[64] = {0};
    for (size_t i = 0; i < s->n; i++) {
        const erg__lease_rec *r = &s->rec[i];
        if (r->gpu >= count) {
            erg__dlog(d, 1, "%s: GPU %d is not present any more; its lease is dropped",
                      d->state_path, r->gpu);
            continue;
        }
        if (r->pending) {
            erg__dlog(d, 1, "a change on GPU %d was in progress when ergond stopped: resetting it",
                      r->gpu);
            reset[r->gpu] |= (uint8_t)r->bits;
            continue;
        }
        lease *l = NULL;
        for (int k = 0; k < MAX_LEASES && !l; k++)
            if (d->leases[k].used && d->leases[k].pid == r->pid && d->leases[k].start == r->start)
                l = &d->leases[k];
        int fd = -1;
        if (!l && holder_alive(r->pid, r->start, &fd)) {
            for (int k = 0; k < MAX_LEASES && !l; k++)
                if (!d->leases[k].used)
                    l = &d->leases[k];
            if (!l) {
                if (fd >= 0)
                    close(fd);
            } else {
                memset(l, 0, sizeof *l);
                l->pid = r->pid;
                l->start = r->start;
                l->uid = r->uid;
                l->pidfd = fd;
                l->used = true;
            }
        }
        if (l) {
            erg__lease_take(d, l, r->gpu, (int)r->bits);
            erg__dlog(d, 0, "pid %d (uid %u) still holds GPU %d: lease re-adopted", (int)r->pid,
                      r->uid, r->gpu);
        } else {
            reset[r->gpu] |= (uint8_t)r->bits;
            erg__dlog(d, 0, "pid %d (uid %u) exited while ergond was down: resetting GPU %d",
                      (int)r->pid, r->uid, r->gpu);
        }
    }
    for (int g = 0; g < count; g++) {
        if (!reset[g])
            continue;
        restore_gpu(d, g, reset[g], "start-up reset");
        /* what was reset is nobody's any more */
        for (int k = 0; k < MAX_LEASES; k++)
            if (d->leases[k].used && (d->leases[k].what[g] & reset[g])) {
                d->leases[k].what[g] &= (uint8_t)~reset[g];
                erg__lease_drop_if_empty(d, &d->leases[k]);
            }
        erg__dlog(d, 0, "start-up: GPU %d restored", g);
    }
}

erg_status erg_daemon_set_state_dir(erg_daemon *d, const char *dir, erg_error *err)
{
    if (!d || !dir || !*dir)
        return erg_error_set(err, ERG_EINVAL, "erg_daemon_set_state_dir: NULL argument");
    if (d->state_path)
        return erg_error_set(err, ERG_ESTATE, "the state directory is already set");
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno != ENOENT || mkdir(dir, 0700) != 0)
            return erg_error_set(err, ERG_EIO, "state directory %s: %s", dir, strerror(errno));
        erg__dlog(d, 0, "created state directory %s", dir);
    } else if (!S_ISDIR(sb.st_mode))
        return erg_error_set(err, ERG_EINVAL, "state directory %s is not a directory", dir);
    erg_status st = erg__check_secure_dirs(dir, "state directory", dir, err);
    if (st)
        return st;
    size_t n = strlen(dir) + sizeof "/leases";
    if (!(d->state_path = erg__malloc(n)))
        return erg_error_set(err, ERG_ENOMEM, "out of memory");
    snprintf(d->state_path, n, "%s/leases", dir);
    erg__boot_id(d->boot_id, sizeof d->boot_id);

    char *text = NULL;
    size_t len = 0;
    erg_error e;
    st = erg__read_secure_file(d->state_path, "lease state", 4 << 20, &text, &len, &e);
    if (st == ERG_ENOTFOUND) {
        char why[600];
        snprintf(why, sizeof why, "no lease state in %s (first start, or it was removed)", dir);
        reset_everything(d, why);
    } else if (st) {
        erg__dlog(d, 2, "%s", e.msg);
        reset_everything(d, "the lease state cannot be trusted");
    } else {
        erg__state s;
        st = erg__state_parse(text, len, d->state_path, &s, &e);
        if (st) {
            erg__dlog(d, 2, "%s", e.msg);
            reset_everything(d, "the lease state cannot be read");
        } else if (s.boot[0] && d->boot_id[0] && strcmp(s.boot, d->boot_id)) {
            erg__dlog(d, 0,
                      "%s was written before the last boot: its %zu lease record(s) are dropped "
                      "(the GPUs were reset when the driver loaded)",
                      d->state_path, s.n);
        } else
            recover(d, &s);
        erg__state_free(&s);
    }
    erg__free(text);
    int held = 0;
    for (int k = 0; k < MAX_LEASES; k++)
        held += d->leases[k].used;
    erg__dlog(d, 0, "lease state in %s: %d live holder%s re-adopted", d->state_path, held,
              held == 1 ? "" : "s");
    /* Write it now: a failure here (read-only or full disk) is a start-up
     * error rather than a daemon that silently cannot keep its promise. */
    st = erg__lease_sync(d, true, err);
    if (st) {
        erg__free(d->state_path);
        d->state_path = NULL;
    }
    return st;
}
