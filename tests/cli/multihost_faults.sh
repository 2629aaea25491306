#!/usr/bin/env bash
# multihost_faults.sh: faults across hosts (issue 21 item 3), with network namespaces as hosts.
#
#   server host S: `ergon serve` (SQLite state, dump directory on a 1 MiB tmpfs)
#   host A: ergond over the fake NVML (its own GPU state file) + ranks 0, 1 (stage 0, GPUs 0, 1)
#   host B: ergond over the fake NVML (its own GPU state file) + ranks 2, 3 (stage 1, GPUs 0, 1)
#   links: veth S<->A 10.77.1.0/24, S<->B 10.77.2.0/24 (addresses exist only in these namespaces)
#
# Ranks are tests/cli/multihost_rank.py (ergon.server_client + ergon.Client through ergond); the
# test paces every window with go files, so each fault lands at a chosen point of a window:
#   window 0  normal: every GPU at the scheduled clock, results acknowledged;
#   window 1  the server is SIGKILLed after B's results were acknowledged and restarted on the
#             same database: A's results (posted while it is down) and B's barrier wait are
#             retried, the job goes on, no acknowledged result is lost;
#   window 2  the dump disk is full (blocks and inodes): the server logs a clear `dump` warning
#             (ENOSPC), keeps serving, acknowledges every result; SIGKILLed and restarted while
#             the disk is still full, it starts (a warning) and serves; freed, the dumps are
#             written;
#   window 3  B's ergond is SIGKILLed mid-window: B's GPUs keep the clock their live ranks
#             hold, the restarted ergond re-adopts the leases, the next window's clocks apply;
#   window 4  A's link is cut for 2 s mid-window: its ranks retry and resume; then cut for 2 s
#             again while A's ranks wait at the barrier and B's results open it (the server's
#             answers go into the cut link): A's ranks get window 5, once; nothing is lost;
#   window 5  A's link is cut for good mid-window (the server's end set down: A's packets vanish):
#             A's ranks give up after their retry budget with a clear error and A's GPUs are
#             back at default clocks; B's ranks, acknowledged, are told at the barrier that the
#             job was aborted (--rank-timeout) instead of hanging; B's ergond is SIGKILLed
#             before they exit, so their reset cannot reach it, and the restarted ergond resets
#             B's GPUs at start-up (holders exited while it was down).
# Finally every (window, rank) a rank saw acknowledged is in the database, and nothing else.
#
# Needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN: `ip netns add`, a tmpfs mount); skips (77) with a
# message where namespaces cannot be made or a tool is missing, and fails under CI=true. Runs in the sanitizer
# build too (the ranks' python preloads the ASan runtime; server and ergonds must stop cleanly).
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}" "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
ERGOND="$ERGON_BIN_DIR/tools/ergond/ergond"
T0=$(date +%s)

[ -n "${ERGON_FAKE_NVML:-}" ] && [ -r "$ERGON_FAKE_NVML" ] || skip_or_fail "fake NVML not built"
command -v ip >/dev/null || skip_or_fail "no ip (Debian package iproute2)"
command -v python3 >/dev/null || skip_or_fail "no python3"
command -v sqlite3 >/dev/null || skip_or_fail "no sqlite3 (Debian package sqlite3)"
command -v curl >/dev/null || skip_or_fail "no curl"
# The ranks' python loads libergon: in the sanitizer build, with the ASan runtime preloaded.
py_env=()
if [ -n "${ERGON_SANITIZED:-}" ]; then
  asan=$(gcc -print-file-name=libasan.so 2>/dev/null)
  [ -f "$asan" ] || skip_or_fail "no libasan.so to preload into python (gcc)"
  py_env=(env LD_PRELOAD="$asan" ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0")
fi
if [ "$(id -u)" != 0 ]; then
  skip_or_fail "network namespaces cannot be made: not root (needs CAP_NET_ADMIN and CAP_SYS_ADMIN)"
fi

tag="erg$$"
NS_S="${tag}s" NS_A="${tag}a" NS_B="${tag}b"
tmp=$(mktemp -d); chmod 755 "$tmp"
pids_rank=""; pid_srv=""; pid_da=""; pid_db=""; mounted=""; t_a=""; t_b=""
cleanup() {
  for p in $pids_rank $pid_srv $pid_da $pid_db ${watchdog:-}; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  for ns in "$NS_S" "$NS_A" "$NS_B"; do ip netns del "$ns" 2>/dev/null; done
  [ -n "$mounted" ] && umount "$tmp/dumpfs" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "FAIL: interrupted (or past the test'"'"'s own 100 s limit)"; exit 1' INT TERM
# Our own time limit, below CTest's 120 s, so that the EXIT trap always removes the namespaces.
( sleep 100; kill -TERM $$ ) >/dev/null 2>&1 & watchdog=$!
# Namespaces a killed earlier run left behind (its shell's pid is in their name and is gone).
for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(erg[0-9]*[sab]\)\( .*\)\{0,1\}$/\1/p'); do
  p=${ns#erg}; p=${p%?}
  kill -0 "$p" 2>/dev/null || ip netns del "$ns" 2>/dev/null
done
while read -r src dir _; do  # and their dump disks (mounted as ergdumpPID)
  p=${src#ergdump}
  case "$src:$dir" in ergdump[0-9]*:/*/dumpfs) kill -0 "$p" 2>/dev/null || { umount "$dir" && rm -rf "${dir%/dumpfs}"; } ;; esac
done </proc/mounts

if ! out=$(ip netns add "$NS_S" 2>&1); then
  skip_or_fail "network namespaces cannot be made here: ip netns add: $out"
fi
if ! out=$(ip -n "$NS_S" link set lo up 2>&1); then
  skip_or_fail "network namespaces cannot be configured here (CAP_NET_ADMIN?): ip link: $out"
fi

dump_logs() {
  echo "--- server log"; tail -40 "$tmp/srv.log" 2>/dev/null
  for h in A B; do
    echo "--- ergond $h"; cat "$tmp/$h"/dlog* 2>/dev/null
    echo "--- GPUs $h"; cat "$tmp/$h/gpu.state" 2>/dev/null
  done
  for f in "$tmp"/rank*.log; do echo "--- $(basename "$f")"; cat "$f"; done
}
fail() { echo "FAIL: $*"; dump_logs; exit 1; }
now() { date +%s.%N; }
# wait_for SECONDS CMD...: poll CMD every 0.1 s; every wait is bounded.
wait_for() {
  local end=$(($(date +%s) + $1)); shift
  while ! "$@"; do [ "$(date +%s)" -ge "$end" ] && return 1; sleep 0.1; done
}
# count_lines PATTERN N FILES...: at least N lines match across FILES.
count_lines() { local pat=$1 n=$2; shift 2; [ "$(cat "$@" 2>/dev/null | grep -c -- "$pat")" -ge "$n" ]; }
# gpu HOST DEV: "LOCK_MIN LOCK_MAX" of that host's fake GPU ("0 0" = default clocks).
gpu() { grep "^$2 " "$tmp/$1/gpu.state" 2>/dev/null | cut -d' ' -f2-3; }
gpu_is() { [ "$(gpu "$1" "$2")" = "$3" ]; }
both_gpus() { gpu_is "$1" 0 "$2" && gpu_is "$1" 1 "$2"; }

# --- hosts and links --------------------------------------------------------------------------
ip netns add "$NS_A" && ip netns add "$NS_B" || fail "ip netns add"
link() { # link NS IF_S IF_H NET: veth between S and host NS, S = NET.1, host = NET.2
  ip link add "$2" netns "$NS_S" type veth peer name "$3" netns "$1" &&
    ip -n "$NS_S" addr add "$4.1/24" dev "$2" && ip -n "$NS_S" link set "$2" up &&
    ip -n "$1" addr add "$4.2/24" dev "$3" && ip -n "$1" link set "$3" up &&
    ip -n "$1" link set lo up
}
link "$NS_A" "${tag}sa" "${tag}as" 10.77.1 || fail "veth S<->A"
link "$NS_B" "${tag}sb" "${tag}bs" 10.77.2 || fail "veth S<->B"

# --- the server's dump disk: a 1 MiB tmpfs ----------------------------------------------------
mkdir -p "$tmp/dumpfs"
mount -t tmpfs -o size=1m,nr_inodes=256,mode=0755 "ergdump$$" "$tmp/dumpfs" || skip_or_fail "cannot mount a tmpfs for the dump disk"
mounted=1

# --- the server: its command line is here only -------------------------------------------------
PORT=7787  # the server namespace is fresh: no other process can hold the port
srv_args=(serve --host 0.0.0.0 --port "$PORT" --db "$tmp/srv.db" --dump "$tmp/dumpfs/dump"
  --scheduler TwoFrequencies --scheduler-args '{"forward_freq": 1200, "backward_freq": 1005}'
  --rank-timeout 8)
# Binding a non-loopback address may need --insecure (bearer tokens and TLS, issue 21 item 6).
if "$ERGON" serve --help 2>&1 | grep -q -- --insecure; then srv_args+=(--insecure); fi
nsrv=0
start_server() {
  nsrv=$((nsrv + 1))
  : >"$tmp/srv.out$nsrv"
  ip netns exec "$NS_S" "$ERGON" "${srv_args[@]}" >"$tmp/srv.out$nsrv" 2>>"$tmp/srv.log" &
  pid_srv=$!
  up() { grep -q listening "$tmp/srv.out$nsrv" || ! kill -0 "$pid_srv" 2>/dev/null; }
  wait_for 20 up && grep -q listening "$tmp/srv.out$nsrv" || fail "server $nsrv did not start"
}
start_server
for h in a b; do
  net=10.77.1; [ $h = b ] && net=10.77.2
  ip netns exec "${tag}$h" curl -sf -m 5 "http://$net.1:$PORT/v1/info" >/dev/null ||
    fail "host $h cannot reach the server at $net.1:$PORT"
done

# --- ergond on A and B: one fake GPU pair per host ---------------------------------------------
printf 'allow * uid:54321\n' >"$tmp/ergond.conf"
declare -A nd=([A]=0 [B]=0)
start_ergond() { # start_ergond A|B
  local h=$1 ns="$NS_A"; [ "$1" = B ] && ns="$NS_B"
  mkdir -p "$tmp/$h"; chmod 755 "$tmp/$h"
  nd[$h]=$((nd[$h] + 1))
  FAKE_NVML_STATE="$tmp/$h/gpu.state" FAKE_NVML_LOG="$tmp/$h/nvml.log" FAKE_NVML_DEVICES=2 \
    ip netns exec "$ns" "$ERGOND" --socket "$tmp/$h/ergond.sock" --config "$tmp/ergond.conf" \
    --gpu "nvml:$ERGON_FAKE_NVML" --state-dir "$tmp/$h/state" --socket-mode 0600 \
    2>"$tmp/$h/dlog${nd[$h]}" &
  if [ "$h" = A ]; then pid_da=$!; else pid_db=$!; fi
  wait_for 20 curl -s -o /dev/null --unix-socket "$tmp/$h/ergond.sock" http://x/time ||
    fail "ergond $h did not start"
}
kill9_ergond() { # kill9_ergond A|B
  local p=$pid_da; [ "$1" = B ] && p=$pid_db
  kill -KILL "$p"; wait "$p" 2>/dev/null
  if [ "$1" = A ]; then pid_da=""; else pid_db=""; fi
}
start_ergond A
start_ergond B
for h in A B; do wait_for 10 both_gpus $h "0 0" || fail "GPUs of $h not at default at start"; done

# --- ranks: 0, 1 on A (stage 0), 2, 3 on B (stage 1) -------------------------------------------
# Client timeouts (docs/multi-host.md): one exchange 1.5 s, 8 retries with backoff 0.1 s doubling
# to 1 s: a refused connection (server restarting) is retried for ~5.5 s, a silent link gives up
# after ~9 x 1.5 + 5.5 = ~19 s.
export ERGON_LIBRARY="$ERGON_BIN_DIR/libergon.so.0" PYTHONPATH="$ERGON_SRC/python"
export PYTHONDONTWRITEBYTECODE=1
mkdir -p "$tmp/ctl"
declare -A rank_pid
start_rank() { # start_rank RANK HOST PP DP DEVICE
  local ns="$NS_A" url="http://10.77.1.1:$PORT"
  [ "$2" = B ] && ns="$NS_B" url="http://10.77.2.1:$PORT"
  ip netns exec "$ns" "${py_env[@]}" python3 "$ERGON_SRC/tests/cli/multihost_rank.py" --url "$url" \
    --job-file "$tmp/job" --ctl "$tmp/ctl" --host "$2" --rank "$1" --pp-rank "$3" \
    --dp-rank "$4" --pp 2 --dp 2 --gpu "daemon:$tmp/$2/ergond.sock" --device "$5" \
    --request-timeout 1.5 --max-retries 8 --backoff-max 1.0 --schedule-wait 2 \
    --schedule-timeout 60 >"$tmp/rank$1.log" 2>&1 &
  rank_pid[$1]=$!
  pids_rank="$pids_rank $!"
}
start_rank 0 A 0 0 0
start_rank 1 A 0 1 1
start_rank 2 B 1 0 0
start_rank 3 B 1 1 1
RA=("$tmp/rank0.log" "$tmp/rank1.log") RB=("$tmp/rank2.log" "$tmp/rank3.log")
ALL=("${RA[@]}" "${RB[@]}")
go() { touch "$tmp/ctl/go.$1.$2"; } # go WINDOW HOST: that host's ranks end the window

# window W runs on the ranks whose logs are FILES, each GPU at the window's last clock
in_window() { # in_window W FILES...
  local w=$1; shift
  wait_for 30 count_lines ": window $w clock 1005" $# "$@" || fail "window $w did not start on $*"
}

# === window 0: normal =========================================================================
in_window 0 "${ALL[@]}"
job=$(cat "$tmp/job")
for h in A B; do both_gpus $h "1005 1005" || fail "GPUs of $h not at the scheduled 1005 MHz"; done
go 0 A; go 0 B
wait_for 30 count_lines ": acked 0" 4 "${ALL[@]}" || fail "window 0 not acknowledged"
echo "ok: window 0: 4 ranks on 2 hosts at the scheduled clocks, results acknowledged"

# === window 1: server SIGKILLed and restarted on the same database ============================
in_window 1 "${ALL[@]}"
go 1 B
wait_for 30 count_lines ": acked 1" 2 "${RB[@]}" || fail "B's window 1 not acknowledged"
kill -KILL "$pid_srv"; wait "$pid_srv" 2>/dev/null; pid_srv=""
go 1 A # A reports while the server is down: retried
start_server
wait_for 30 count_lines ": acked 1" 4 "${ALL[@]}" || fail "window 1 not acknowledged after the restart"
in_window 2 "${ALL[@]}"
grep -q '"event": *"restore"' "$tmp/srv.log" || fail "restarted server did not restore the job"
echo "ok: window 1: server SIGKILLed and restarted, results posted meanwhile acknowledged, job goes on"

# === window 2: the dump disk is full ==========================================================
dd if=/dev/zero of="$tmp/dumpfs/filler" bs=64k 2>/dev/null  # no block left
mkdir -p "$tmp/dumpfs/inodes"; i=0
while [ $i -lt 1000 ] && : 2>/dev/null >"$tmp/dumpfs/inodes/$i"; do i=$((i + 1)); done  # no inode left
[ "$(df --output=avail "$tmp/dumpfs" | tail -1)" -lt 8 ] && [ "$(df --output=iavail "$tmp/dumpfs" | tail -1)" -eq 0 ] ||
  fail "could not fill the dump disk: $(df "$tmp/dumpfs"; df -i "$tmp/dumpfs")"
go 2 A; go 2 B
wait_for 30 count_lines ": acked 2" 4 "${ALL[@]}" || fail "window 2 not acknowledged with a full dump disk"
in_window 3 "${ALL[@]}"
wait_for 10 grep -q "dump 2.prof.json deferred.*No space left on device" "$tmp/srv.log" ||
  fail "no clear dump error for the full disk"
jd="$tmp/dumpfs/dump/$job"
[ ! -s "$jd/2.prof.json" ] || fail "2.prof.json written to a full disk?"
# A server restarted while the disk is still full starts (a warning), restores the job from the
# database and serves; the deferred dumps it lost with the old process are rebuilt from there.
kill -KILL "$pid_srv"; wait "$pid_srv" 2>/dev/null; pid_srv=""
start_server
grep -q "dump directory .* is full (No space left on device): starting anyway" "$tmp/srv.log" ||
  fail "no start-up warning for the full dump disk"
ip netns exec "$NS_A" curl -sf -m 5 "http://10.77.1.1:$PORT/v1/jobs" | grep -q '"running"' ||
  fail "server does not answer (or the job is not running) with a full dump disk"
rm -rf "$tmp/dumpfs/filler" "$tmp/dumpfs/inodes"
wait_for 15 test -s "$jd/2.sched.json" || fail "dumps not written once the disk had room"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert sorted(r["rank"] for r in d) == [0,1,2,3], d' \
  "$jd/2.prof.json" || fail "2.prof.json is not the 4 ranks' results"
echo "ok: window 2: full dump disk reported ('$(grep -o 'dump 2.prof.json deferred[^"]*' "$tmp/srv.log" | head -1 | cut -c1-90)...')," \
  "results acknowledged, server restarted while full, dumps written once there was room"

# === window 3: B's ergond SIGKILLed mid-window and restarted ==================================
kill9_ergond B
sleep 0.5
both_gpus B "1005 1005" || fail "B's GPUs changed while ergond was dead and its holders alive"
start_ergond B
for r in 2 3; do
  grep -q "pid ${rank_pid[$r]} (uid 0) still holds GPU $((r - 2)): lease re-adopted" "$tmp/B/dlog2" ||
    fail "lease of rank $r (pid ${rank_pid[$r]}) not re-adopted"
done
both_gpus B "1005 1005" || fail "B's GPUs reset though their holders are alive"
go 3 A; go 3 B
wait_for 30 count_lines ": acked 3" 4 "${ALL[@]}" || fail "window 3 not acknowledged"
in_window 4 "${ALL[@]}"  # clocks 1200 then 1005 set through the restarted ergond
echo "ok: window 3: ergond of B SIGKILLed: clocks kept under the persisted lease, re-adopted"

# === window 4: A's link cut for 2 s mid-window, then back =====================================
# The cable is pulled at the server's end: A keeps its address and route (linkdown) and its
# packets vanish (no carrier), so its ranks see timeouts, not a refused connection.
cut_a() { ip -n "$NS_S" link set "${tag}sa" "$1" || fail "cannot set A's link $1"; }
cut_a down
sleep 2
for h in A B; do both_gpus $h "1005 1005" || fail "GPUs of $h left their clock during a short cut"; done
cut_a up
go 4 A
wait_for 30 count_lines ": acked 4" 2 "${RA[@]}" || fail "A's window 4 not acknowledged after its link came back"
echo "ok: window 4: A's link cut for 2 s mid-window: its ranks retried and resumed"

# === window 4 -> 5: A's link cut for 2 s while A waits at the barrier and it opens ============
sleep 0.5  # A's ranks are waiting at the barrier of window 5 (their requests held by the server)
cut_a down
go 4 B  # B's results open the barrier: the server answers A's held requests into the cut link
wait_for 30 count_lines ": acked 4" 2 "${RB[@]}" || fail "B's window 4 not acknowledged"
sleep 2
cut_a up
in_window 5 "${ALL[@]}"  # A's ranks asked again (or got the answer late): the same window 5
! count_lines ": exit" 1 "${ALL[@]}" || fail "a rank gave up over a 2 s cut"
for f in "${ALL[@]}"; do
  [ "$(grep -c ': window 5 clock' "$f")" = 1 ] || fail "window 5 started twice or not at all: $f"
done
echo "ok: window 4->5: A's link cut for 2 s while the barrier opened: A's ranks got window 5 once"

# === window 5: A's link cut for good mid-window ================================================
for h in A B; do both_gpus $h "1005 1005" || fail "GPUs of $h not at 1005 MHz in window 5"; done
cut_a down
t_cut=$(now)
go 5 B  # B acknowledges window 5 and waits at the next barrier for A, which never comes
wait_for 30 count_lines ": acked 5" 2 "${RB[@]}" || fail "B's window 5 not acknowledged"
kill9_ergond B  # B's ranks will exit while their ergond is down
# Every rank exits within its bound (no hang): A's after their retry budget (~19 s), B's when
# the server's rank timeout (8 s, checked every second) aborts the job.
wait_for 60 count_lines ": exit [0-9]* at" 4 "${ALL[@]}" || fail "ranks still running 60 s after the cut"
since_cut() { awk -v a="$t_cut" -v b="$(sed -n 's/.*: exit [0-9]* at //p' "$1")" 'BEGIN { printf "%.1f", b - a }'; }
for f in "${RA[@]}"; do
  grep -q ": exit 3 at" "$f" || fail "A's rank did not exit with the server error status: $f"
  grep -q "server error: ENET: .*(gave up after 9 attempts in [0-9.]* s: request_timeout_s 1.5, max_retries 8)" "$f" ||
    fail "no clear network error on A: $f"
  t=$(since_cut "$f")
  awk -v t="$t" 'BEGIN { exit !(t >= 10 && t <= 40) }' || fail "A's rank gave up after $t s (budget ~19 s): $f"
  t_a="${t_a:+$t_a and }$t"
done
wait_for 10 both_gpus A "0 0" || fail "A's GPUs not back at default after its ranks gave up"
for f in "${RB[@]}"; do
  grep -q ": exit 3 at" "$f" || fail "B's rank did not exit with the server error status: $f"
  grep -q "server error: ECANCELED: .*rank [01] was silent" "$f" || fail "B's rank did not say the job was aborted: $f"
  t=$(since_cut "$f")
  awk -v t="$t" 'BEGIN { exit !(t >= 6 && t <= 25) }' || fail "B's rank told after $t s (rank timeout 8 s): $f"
  t_b="${t_b:+$t_b and }$t"
done
# B's ranks could not reach their (dead) ergond to reset: the clocks stay until it is back.
both_gpus B "1005 1005" || fail "B's GPUs changed without ergond?"
start_ergond B
wait_for 10 both_gpus B "0 0" || fail "B's GPUs not reset by the restarted ergond"
for r in 2 3; do
  grep -q "pid ${rank_pid[$r]} (uid 0) exited while ergond was down: resetting GPU $((r - 2))" "$tmp/B/dlog3" ||
    fail "no start-up reset of rank $r's GPU in B's log"
done
echo "ok: window 5: A cut: A's ranks gave up after ${t_a} s and their GPUs are at default;" \
  "B's ranks told the job was aborted after ${t_b} s; B's GPUs reset by the restarted ergond"
sed -n 's/.*server error: /  A: /p' "$tmp/rank0.log" | sed 's|http://[^ ]*/heartbeat|http://.../heartbeat|' | head -1
sed -n 's/.*server error: /  B: /p' "$tmp/rank2.log" | head -1 | cut -c1-160

# Every window's two clocks (forward 1200, backward 1005) reached each GPU through ergond.
for h in A B; do
  for d in 0 1; do
    for f in 1200 1005; do
      n=$(grep -c "^nvmlDeviceSetGpuLockedClocks $d $f $f = 0$" "$tmp/$h/nvml.log")
      [ "$n" -ge 6 ] || fail "GPU $d of $h was set to $f MHz $n times in 6 windows"
    done
  done
done

# === no acknowledged result lost ==============================================================
# Everything stops cleanly (exit 0; in the sanitizer build: no leak or error report).
stop() { kill -TERM "$1"; wait "$1"; local rc=$?; [ $rc -eq 0 ] || fail "$2 exited $rc on SIGTERM"; }
stop "$pid_srv" server; pid_srv=""
stop "$pid_da" "ergond A"; pid_da=""
stop "$pid_db" "ergond B"; pid_db=""
acked=$(for r in 0 1 2 3; do sed -n "s/^rank $r: acked \([0-9]*\)$/\1 $r/p" "$tmp/rank$r.log"; done | sort)
stored=$(sqlite3 "$tmp/srv.db" "SELECT window, rank FROM results WHERE job_id = '$job'" | tr '|' ' ' | sort)
expected=$(for w in 0 1 2 3 4; do for r in 0 1 2 3; do echo "$w $r"; done; done; echo "5 2"; echo "5 3")
[ "$acked" = "$(echo "$expected" | sort)" ] || fail "acknowledged results: $(echo $acked)"
[ "$stored" = "$acked" ] || fail "stored results differ from acknowledged ones: stored $(echo $stored)"
echo "ok: all $(echo "$acked" | wc -l) acknowledged results are in the database after 2 server restarts, nothing else"
echo "total $(($(date +%s) - T0)) s"
