/* daemon.h: ergond, the privileged GPU clock daemon: zeusd-compatible HTTP over a Unix socket. */
#ifndef ERGON_DAEMON_H
#define ERGON_DAEMON_H

#include "ergon/ergon.h"
#include "ergon/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The daemon serves HTTP/1.1 on a Unix socket (docs/ergond.md):
 * - zeusd's endpoints for discovery, clocks, power limits and energy,
 *   parameters in the query string;
 * - writes are authorised from the peer's SO_PEERCRED uid/gid against a
 *   per-GPU allow list read from a config file (root is always allowed);
 * - clocks and limits are validated against what the GPU reports (fail
 *   closed), requests are bounded (8 KiB head, 4 KiB body, 16 parameters);
 * - a lease per client process: the GPUs a process changed are reset when
 *   it exits, however it exits (pidfd), and when the daemon stops.
 * Single-threaded; GPU calls run inline. */
typedef struct erg_daemon erg_daemon;

/* Log sink: level 0 info, 1 warning (refusals), 2 error. May be NULL. */
typedef void (*erg_daemon_log_fn)(void *user, int level, const char *msg);

/* Parse a config file (see docs/ergond.md) into a daemon for `gpu`
 * (borrowed: it must outlive the daemon) and create the socket at
 * socket_path with permissions socket_mode (e.g. 0660 with
 * erg_daemon_set_socket_group: root and that group may connect; 0666:
 * everyone may connect; only allowed peers may write). A stale socket file
 * is replaced only if nothing answers on it. Like sshd's StrictModes, the
 * config must be a regular file owned by root or the calling user and not
 * writable by group or others, and so must every directory above it (sticky
 * ones such as /tmp excepted): otherwise ERG_EPERM, with a message naming
 * the file, the culprit and the fix. */
ERG_API erg_status erg_daemon_new(const char *socket_path, unsigned socket_mode,
                                  const char *config_path, erg_gpu *gpu, erg_daemon_log_fn log,
                                  void *log_user, erg_daemon **out, erg_error *err);
/* Admin lock: while the file at `path` exists, every write is refused with
 * 503 (reads still work). Its directory must pass the same StrictModes check
 * as the config (else ERG_EPERM). NULL disables the check. Call before run. */
ERG_API erg_status erg_daemon_set_lock_file(erg_daemon *d, const char *path, erg_error *err);
/* Persist leases in DIR/leases (created 0700 if missing; DIR and its parents
 * must pass the StrictModes check: owned by root or the daemon's user, not
 * writable by group or others). Reads the state an earlier daemon left:
 * holders still alive (same pid and start time) are re-adopted, what dead
 * holders or interrupted changes touched is reset; with no state file (or an
 * unreadable one) every GPU is reset; state from an earlier boot is dropped.
 * Then every lease change is written (temp + fsync + rename) before the
 * client gets its answer. Call before run. Without it leases live in memory
 * only. */
ERG_API erg_status erg_daemon_set_state_dir(erg_daemon *d, const char *dir, erg_error *err);
/* Give the socket file to group gid (its mode is the socket_mode given to
 * erg_daemon_new, e.g. 0660: root and the group may connect). */
ERG_API erg_status erg_daemon_set_socket_group(erg_daemon *d, unsigned gid, erg_error *err);
/* At most per_uid connections at once from one non-root uid (default 8,
 * range 1..56); non-root uids together never take the last 8 of the 64
 * slots, which stay free for root. Call before run. */
ERG_API erg_status erg_daemon_set_conn_limit(erg_daemon *d, int per_uid, erg_error *err);
/* Serve until erg_daemon_stop. Then reset every leased GPU. */
ERG_API erg_status erg_daemon_run(erg_daemon *d, erg_error *err);
/* Ask the loop to stop; async-signal-safe. */
ERG_API void erg_daemon_stop(erg_daemon *d);
/* Close the socket (and remove its file) and free. NULL is a no-op. */
ERG_API void erg_daemon_free(erg_daemon *d);

/* The client side of this protocol, the GPU back-end that goes through a
 * running daemon, is erg_gpu_open_daemon in gpu.h (the gpu module is below
 * the daemon: the daemon drives GPUs through it). */

#ifdef __cplusplus
}
#endif
#endif
