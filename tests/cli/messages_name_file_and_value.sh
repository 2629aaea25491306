#!/usr/bin/env bash
# messages_name_file_and_value.sh: issue 16 item 5. An unsupported clock names the clock
# step and the nearest clocks; a plan's bad max_inflight names the file; a missing NVML
# library says "library not found" and what to do; no --help cites "lowtime-spec" (a document
# users do not have); the Python binding reports a missing libergon as such, not "ENOGPU";
# `ergon serve` logs its shutdown with ts and level, and logs a database locked by another
# process while /healthz keeps answering.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}"
tmp=$(mktemp -d); pid=""
cleanup() { [ -n "$pid" ] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$ERGON" gpu lock --gpu sim:a100 --clock 1201 2>"$tmp/err"; [ $? -eq 1 ] || fail "unsupported clock exit"
grep -q "supported: 210..1410 MHz in steps of 15 MHz; nearest: 1200 or 1215 MHz" "$tmp/err" || fail "clock step: $(cat "$tmp/err")"

cat >"$tmp/bad.json" <<'J'
{"format": "ergon-plan", "version": 1, "schedule": "ours", "max_inflight": -1,
 "num_stages": 1, "num_microbatches": 1, "stages": [{"freq_mhz": [1410, 1410]}]}
J
"$ERGON" profile sim --gpu a100 --stages 1 -o "$tmp/p.csv" 2>/dev/null || fail "profile sim"
"$ERGON" emulate --profile "$tmp/p.csv" --plan "$tmp/bad.json" --gpu a100 2>"$tmp/err"; [ $? -eq 1 ] || fail "bad max_inflight exit"
grep -q "bad.json: max_inflight must be an integer in \[0, 65536\]" "$tmp/err" || fail "max_inflight: $(cat "$tmp/err")"

ERGON_NVML_LIBRARY= "$ERGON" gpu list --gpu nvml:/nonexistent/libnvidia-ml.so.1 2>"$tmp/err"
grep -q "library not found: cannot load /nonexistent/libnvidia-ml.so.1" "$tmp/err" || fail "nvml: $(cat "$tmp/err")"

for c in plan "plan perseus" "plan envpipe" "plan zeus-global" "plan zeus-stage" "plan uniform" \
         choose emulate compare show sample profile gpu serve shard; do
  # shellcheck disable=SC2086
  "$ERGON" $c --help >"$tmp/h" 2>&1
  grep -qi "lowtime-spec\|-spec [0-9]\|spec section" "$tmp/h" && fail "ergon $c --help cites a spec: $(grep -i spec "$tmp/h")"
done

if command -v python3 >/dev/null && [ -n "${ERGON_SRC:-}" ]; then
  PYTHONPATH="$ERGON_SRC/python" python3 - <<'PY' || fail "python: missing libergon"
import ergon, ergon._libfind as lf
lf.candidates = lambda path=None: ["/nonexistent/libergon.so.0"]
try:
    ergon.load_library("/nonexistent/libergon.so.0")
except ergon.LibraryMissing as e:
    assert "ENOGPU" not in str(e) and "libergon missing" in str(e) and "/nonexistent" in str(e), str(e)
    assert isinstance(e, ergon.ErgonError)
else:
    raise SystemExit("no error")
PY
fi

# scheduler_args values out of range are named with the value
"$ERGON" serve --port 0 --db "$tmp/a.db" --scheduler AllMaxFrequency --mode frequency \
  --scheduler-args '{"num_iters": 0}' >/dev/null 2>"$tmp/err"; [ $? -eq 1 ] || fail "num_iters 0 accepted"
grep -q "scheduler_args: num_iters must be >= 1 and warmup_iters >= 0, got num_iters 0" "$tmp/err" || fail "num_iters: $(cat "$tmp/err")"

command -v curl >/dev/null && command -v python3 >/dev/null || { note_or_fail "curl/python3 missing: the server part cannot run"; echo ok; exit 0; }
"$ERGON" serve --port 0 --db "$tmp/s.db" --scheduler AllMaxFrequency --mode frequency \
  >"$tmp/out" 2>"$tmp/log" & pid=$!
for _ in $(seq 600); do grep -q listening "$tmp/out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$tmp/out")
[ -n "$port" ] || fail "server did not start: $(cat "$tmp/log")"
u="http://127.0.0.1:$port"
# another process holds a write lock on the database for 3 s
python3 -c "
import sqlite3, time, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN IMMEDIATE')
open(sys.argv[2], 'w').close(); time.sleep(3); c.execute('ROLLBACK')" "$tmp/s.db" "$tmp/locked" &
lk=$!
for _ in $(seq 50); do [ -e "$tmp/locked" ] && break; sleep 0.1; done
curl -s -m 10 -X POST "$u/register_job" -d '{"job_id":"","pp_degree":1,"dp_degree":1,"tp_degree":1,"world_size":1,"framework":"merak","model_name":"m","partition_method":"p","microbatch_size":1,"num_microbatches":1}' >"$tmp/reg" 2>&1 &
cj=$!
sleep 0.5
t0=$(date +%s.%N)
h=$(curl -s -m 5 "$u/healthz")
t1=$(date +%s.%N)
[[ "$h" == *'"ok"'* ]] || fail "/healthz while the database is locked: '$h'"
awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 1.0) }' || fail "/healthz took $(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}') s"
wait $lk $cj
grep -q '"level":"warning","event":"db_busy".*locked by another process' "$tmp/log" || fail "lock not logged: $(cat "$tmp/log")"
kill "$pid"; wait "$pid" 2>/dev/null; pid=""
tail -1 "$tmp/log" | grep -q '^{"ts":"[0-9T:.-]*Z","level":"info","event":"shutdown","msg":"signal 15"}$' \
  || fail "shutdown line: $(tail -1 "$tmp/log")"
echo "ok"
