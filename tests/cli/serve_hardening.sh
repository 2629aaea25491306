#!/usr/bin/env bash
# serve_hardening.sh: `ergon serve` against a second server and hostile clients (issue 15):
# a busy port exits 1 "in use", a second server on the same database names the holder's pid,
# --plans-dir confines the files clients may name, a bad dump directory stops the start-up.
set -euo pipefail
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?path of the ergon binary}"
command -v curl >/dev/null || skip_or_fail "curl not installed"
work=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

help=$("$ERGON" serve --help)  # captured: grep -q would close the pipe early (SIGPIPE under pipefail)
grep -q -- "--plans-dir" <<<"$help" || fail "--help lacks --plans-dir"
mkdir "$work/plans"
printf '[[1410, 1410], [1200, 1200]]\n' >"$work/plans/p.py"
cd "$work"
"$ERGON" serve --port 0 --db "$work/s.db" --dump "$work/dump" --plans-dir "$work/plans" \
  >"$work/out.txt" 2>"$work/log.txt" &
pid=$!
for _ in $(seq 600); do grep -q listening "$work/out.txt" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out.txt")
[ -n "$port" ] || fail "server did not start: $(cat "$work/log.txt")"
u="http://127.0.0.1:$port"

# Item 2: a second server on the busy port exits 1 saying so (no SO_REUSEPORT sharing).
set +e
out=$("$ERGON" serve --port "$port" --db "$work/other.db" --no-dump 2>&1); rc=$?
set -e
[ $rc -eq 1 ] || fail "second server on busy port $port: exit $rc, want 1 ($out)"
grep -q "in use" <<<"$out" || fail "busy port message: $out"
# ... and a second server on the same database names the process holding it.
set +e
out=$("$ERGON" serve --port 0 --db "$work/s.db" --no-dump 2>&1); rc=$?
set -e
[ $rc -eq 1 ] || fail "second server on the same database: exit $rc, want 1 ($out)"
grep -q "process $pid" <<<"$out" || fail "database lock message must name pid $pid: $out"

# Item 8: per-job file names only inside --plans-dir; nothing leaks from outside.
job='"pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"framework":"t","model_name":"m","partition_method":"u","microbatch_size":1,"num_microbatches":1'
code=$(curl -s -o "$work/r1" -w '%{http_code}' -X POST "$u/v1/jobs" \
  -d "{$job,\"scheduler\":\"PointSolution\",\"mode\":\"frequency\",\"scheduler_args\":{\"solution_path\":\"/etc/passwd\"}}")
[ "$code" = 400 ] || fail "solution_path /etc/passwd: HTTP $code $(cat "$work/r1")"
grep -q "root" "$work/r1" && fail "file content leaked: $(cat "$work/r1")"
ln -s /etc/passwd "$work/plans/evil.py"
code=$(curl -s -o "$work/r2" -w '%{http_code}' -X POST "$u/v1/jobs" \
  -d "{$job,\"scheduler\":\"PointSolution\",\"mode\":\"frequency\",\"scheduler_args\":{\"solution_path\":\"evil.py\"}}")
[ "$code" = 400 ] || fail "symlink out of --plans-dir: HTTP $code $(cat "$work/r2")"
code=$(curl -s -o "$work/r3" -w '%{http_code}' -X POST "$u/v1/jobs" \
  -d "{$job,\"scheduler\":\"PointSolution\",\"mode\":\"frequency\",\"scheduler_args\":{\"solution_path\":\"p.py\"}}")
[ "$code" = 201 ] || fail "plan inside --plans-dir: HTTP $code $(cat "$work/r3")"
kill "$pid"; wait "$pid" 2>/dev/null || true
pid=""

# Item 4: the dump directory is checked at start-up.
printf 'x' >"$work/notadir"
set +e
out=$("$ERGON" serve --port 0 --db "$work/d.db" --dump "$work/notadir" 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "notadir" <<<"$out" || fail "dump dir that is a file: exit $rc: $out"
set +e
out=$("$ERGON" serve --port 0 --db "$work/d.db" --dump /proc/self 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "not writable" <<<"$out" || fail "unwritable dump dir: exit $rc: $out"
echo "ok"
