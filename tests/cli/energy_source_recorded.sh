#!/usr/bin/env bash
# energy_source_recorded.sh: a GPU whose energy counter stalls (the fake libamd_smi.so's
# "stall" quirk, from the start) is integrated by ergon, and the source is recorded end to
# end: the client's time-energy log (energy_source column), the stage profile of
# `ergon profile logs`, and the server's dump of the window's result (Python binding:
# Client.energy_source -> ServerClient.report -> erg_srv_result_set_energy_source).
set -euo pipefail
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}" "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || skip_or_fail "python3 not installed"
[ -n "${ERGON_FAKE_AMDSMI:-}" ] && [ -r "$ERGON_FAKE_AMDSMI" ] || skip_or_fail "fake amdsmi not built"
[ "$(id -u)" = 0 ] || skip_or_fail "needs root (the fake amdsmi refuses clock changes otherwise)"
lib="$ERGON_BIN_DIR/libergon.so"
[ -e "$lib" ] || fail "$lib missing"
work=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
"$ERGON" serve --port 0 --db "$work/s.db" --dump "$work/dump" --scheduler AllMaxFrequency \
  --scheduler-args '{"num_iters": 1}' >"$work/out.txt" 2>"$work/log.txt" &
pid=$!
for _ in $(seq 600); do grep -q listening "$work/out.txt" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out.txt")
[ -n "$port" ] || fail "server did not start: $(cat "$work/log.txt")"
pre=""
if [ -n "${ERGON_SANITIZED:-}" ]; then
  pre=$(gcc -print-file-name=libasan.so 2>/dev/null || true)
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi
export FAKE_AMDSMI_DEVICES=1 FAKE_AMDSMI_QUIRK=stall FAKE_AMDSMI_QUIRK_AFTER_S=0
unset FAKE_AMDSMI_STATE FAKE_AMDSMI_DENY FAKE_AMDSMI_LOG
LD_PRELOAD="$pre" ERGON_LIBRARY="$lib" PYTHONPATH="$ERGON_SRC/python" python3 - \
  "$port" "amdsmi:$ERGON_FAKE_AMDSMI" "$work/logs" >"$work/py.txt" 2>&1 <<'PY' || { cat "$work/py.txt"; fail "python side"; }
import sys, time
import ergon
from ergon.server_client import ServerClient
url, spec, logs = "http://127.0.0.1:%s" % sys.argv[1], sys.argv[2], sys.argv[3]
events = []
gpu = ergon.Gpu(spec)
with ergon.Client(gpu, device=0, rank=0, log_dir=logs) as c:
    c.set_uniform_clock(1700)
    c.sync(10.0)

    def step():
        c.step_begin()
        for k in (ergon.FORWARD, ergon.BACKWARD):
            c.instruction_begin(k, 0)
            time.sleep(0.02)
            c.instruction_end(k, 0)
        return c.step_end()

    # The counter stands still from the start; ergon stops trusting it once it has not
    # moved for 1 s while integrated power drew 5 J. Steps until then read "counter".
    t0 = time.monotonic()
    while gpu.energy_source(0) != "integrated":
        step()
        if time.monotonic() - t0 > 20:
            raise SystemExit("the stalled counter was never replaced: %s" % gpu.energy_source(0))
    sc = ServerClient(url, schedule_wait_s=5)
    job = sc.register_job(pp_degree=1, framework="torch", model_name="stall",
                          partition_method="uniform", microbatch_size=1, num_microbatches=1)
    sc.register_rank(job, rank=0, dp_rank=0, pp_rank=0, tp_rank=0,
                     pipe_schedule=["forward", "backward"], power_states=[1700, 1000])
    windows = 0
    while True:
        got = sc.fetch_schedule(job, 0)
        if got is None:
            break
        window, _ = got
        print("before the window: %r" % c.energy_source(reset=True))
        its = []
        for _ in range(3):
            t, e = step()
            assert e > 0, e  # integrated: a stalled counter would read 0
            its.append((t, e))
        src = c.energy_source(reset=True)
        print("window %d: %s" % (window, src))
        assert src == "integrated", src
        sc.report(job, window, 0, its, energy_source=src)
        windows += 1
        if windows >= 1:
            sc.end_job(job, "test done")
            break
    sc.close()
    print("job", job)
PY
job=$(sed -n 's/^job //p' "$work/py.txt")
# 1. The time-energy log: the column, "integrated" from the replacement on.
head -1 "$work/logs/time-energy-0.csv" | grep -qx "time,energy,energy_source" ||
  fail "time-energy log header: $(head -1 "$work/logs/time-energy-0.csv")"
grep -q ",integrated$" "$work/logs/time-energy-0.csv" || fail "no integrated sample in the log"
# 2. The stage profile from the logs: every row's energy was integrated (the stalled
# counter's first reading is only the baseline).
"$ERGON" profile logs "$work/logs" -o "$work/profile.csv" 2>"$work/err" || { cat "$work/err"; fail "profile logs"; }
head -1 "$work/profile.csv" | grep -qx "stage,instruction,frequency,time,energy,energy_source" ||
  fail "profile header: $(head -1 "$work/profile.csv")"
[ "$(tail -n +2 "$work/profile.csv" | cut -d, -f6 | sort -u)" = integrated ] ||
  fail "profile sources: $(cat "$work/profile.csv")"
# 3. The server's dump of the windows.
d="$work/dump/$job"
for _ in $(seq 50); do [ -s "$d/0.prof.json" ] && break; sleep 0.1; done
for w in 0; do
  [ -s "$d/$w.prof.json" ] || fail "no $w.prof.json in $d: $(ls "$d")"
  python3 - "$d/$w.prof.json" <<'PY' || fail "dump $w: $(cat "$d/$w.prof.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert [r["energy_source"] for r in d] == ["integrated"], d
PY
done
grep -q "^window 0: integrated" "$work/py.txt" || fail "$(cat "$work/py.txt")"
echo "PASS: integrated in the log, the profile and the server's dump"
