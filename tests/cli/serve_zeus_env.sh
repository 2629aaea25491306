#!/usr/bin/env bash
# serve_zeus_env.sh: the Zeus docs' start line with `ergon serve` in place of uvicorn
# (ZEUS_PFO_SCHEDULER_ARGS='{"solution_path": ...}') serves that plan to a Zeus client;
# PERSEUS_*/ZEUS_PFO_* are read in any case with pydantic's booleans; look-alike variables
# are reported at start-up; bad values stop it. docs/zeus-protocol.md §5, docs/http-api.md.
set -euo pipefail
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?path of the ergon binary}"
command -v curl >/dev/null || skip_or_fail "curl not installed"
work=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"

# A plan as Zeus's run_optimization.py writes it (2 stages).
cat > freqs_pipeline_00007.py <<'PY'
[
[('forward', 1410), ('forward', 1395), ('backward', 1380), ('backward', 1395)],
[('forward', 1380), ('backward', 1380), ('forward', 1365), ('backward', 1365)],
]
# Iteration 7 cost change: -0.25
# Iteration 7 total cost: 10.0
# Iteration 7 total cost with P2P: 12.0
PY

start() { # env assignments..., then waits for "listening"
  # synchronously: the background job truncates its output file only once it runs, and a
  # previous server's "listening" line must not be read as this one's
  rm -f "$work/out.txt" "$work/log.txt"
  env "$@" "$ERGON" serve --port 0 --db "$work/s.db" >"$work/out.txt" 2>"$work/log.txt" &
  pid=$!
  for _ in $(seq 600); do grep -q listening "$work/out.txt" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out.txt")
  [ -n "$port" ] || fail "server did not start: $(cat "$work/log.txt")"
  u="http://127.0.0.1:$port"
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

# The docs' line (plus a misspelt variable, which must be reported, and a lower-case
# Perseus boolean in one of pydantic's spellings).
start ZEUS_PFO_SCHEDULER_ARGS='{"solution_path": "freqs_pipeline_00007.py"}' \
      ZEUS_PFO_DUMP_DIRR=x perseus_dump_data=Yes
grep -q 'ZEUS_PFO_DUMP_DIRR is not read by ergon serve (did you mean ZEUS_PFO_DUMP_DIR?)' "$work/log.txt" \
  || fail "look-alike not reported: $(cat "$work/log.txt")"
job=$(curl -sf -X POST "$u/register_job" -H 'Content-Type: application/json' \
  -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"job_metadata":null}')
job=${job//\"/}
case "$job" in *+dp1+pp2+tp1+PointSolution) ;; *) fail "job id $job";; esac
for r in 0 1; do
  out=$(curl -s -X POST "$u/register_rank/$job" -H 'Content-Type: application/json' \
    -d "{\"rank\":$r,\"dp_rank\":0,\"pp_rank\":$r,\"tp_rank\":0,\"available_frequencies\":[1410,1395,1380,1365]}")
  [ "$out" = null ] || fail "register_rank: $out"
done
curl -s "$u/schedule/$job?rank=0" >s0 & c0=$!
curl -s "$u/schedule/$job?rank=1" >s1 & c1=$!
wait $c0 $c1
[ "$(cat s0)" = '{"rank":0,"frequencies":[["forward",1410],["forward",1395],["backward",1380],["backward",1395]]}' ] \
  || fail "rank 0 schedule: $(cat s0)"
# PointSolution (not 3D) gives rank r entry r; a rank on another stage is refused, saying why.
job2=$(curl -sf -X POST "$u/register_job" -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2}')
job2=${job2//\"/}
out=$(curl -s -w ' %{http_code}' -X POST "$u/register_rank/$job2" \
  -d '{"rank":0,"dp_rank":0,"pp_rank":1,"tp_rank":0,"available_frequencies":[1410]}')
case "$out" in *"PointSolution3D"*" 500") ;; *) fail "rank 0 on stage 1: $out";; esac
[ "$(cat s1)" = '{"rank":1,"frequencies":[["forward",1380],["backward",1380],["forward",1365],["backward",1365]]}' ] \
  || fail "rank 1 schedule: $(cat s1)"
[ -f "dump/$job/ranks.json" ] || fail "dumps are on (perseus_dump_data=Yes)"
# kill -9 and restart: the Zeus job is restored from SQLite and serves the same schedule.
kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""
start ZEUS_PFO_SCHEDULER_ARGS='{"solution_path": "freqs_pipeline_00007.py"}'
grep -q '"event":"restore"' "$work/log.txt" || fail "no restore: $(cat "$work/log.txt")"
curl -s "$u/schedule/$job?rank=0" >s0 & c0=$!
curl -s "$u/schedule/$job?rank=1" >s1 & c1=$!
wait $c0 $c1
[ "$(cat s0)" = '{"rank":0,"frequencies":[["forward",1410],["forward",1395],["backward",1380],["backward",1395]]}' ] \
  || fail "rank 0 schedule after the restart: $(cat s0)"
# A Perseus client on the same port still gets the kronos protocol, with the same
# configuration: Zeus's variables configure Perseus jobs too (PointSolution on that plan).
info=$(curl -sf "$u/info")
grep -q '"scheduler":"PointSolution","scheduler_args":{"solution_path":"freqs_pipeline_00007.py"}' <<<"$info" || fail "/info: $info"
stop

# Lower-case Zeus names, dumps off by a Zeus boolean spelling; the plan named in the args.
rm -rf dump
start zeus_pfo_scheduler=PointSolution3D \
      Zeus_Pfo_Scheduler_Args='{"solution_path": "freqs_pipeline_00007.py"}' ZEUS_PFO_DUMP_DATA=off
job=$(curl -sf -X POST "$u/register_job" \
  -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"job_metadata":"r1"}')
job=${job//\"/}
case "$job" in *+dp1+pp2+tp1+PointSolution3D+r1) ;; *) fail "job id $job";; esac
[ ! -d dump ] || fail "ZEUS_PFO_DUMP_DATA=off must turn dumps off"
stop

# Bad values stop it with the variable named.
set +e
out=$(PERSEUS_DUMP_DATA=maybe "$ERGON" serve --port 0 --db "$work/x.db" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "PERSEUS_DUMP_DATA='maybe' is not a boolean" <<<"$out" || fail "bad boolean ($rc): $out"
out=$(ZEUS_PFO_SCHEDULER_ARGS='{"solution_path": "freqs_pipeline_00007.py", "warmup_iters": 2}' \
      "$ERGON" serve --port 0 --db "$work/x.db" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "Invalid scheduler args" <<<"$out" || fail "unknown Zeus argument ($rc): $out"
out=$(ZEUS_PFO_SCHEDULER_ARGS='{"solution_path": "nope.py"}' "$ERGON" serve --port 0 --db "$work/x.db" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "Solution file not found: nope.py" <<<"$out" || fail "missing plan ($rc): $out"
out=$(ZEUS_PFO_MAX_JOB_IDLE_TIME=1.5 "$ERGON" serve --port 0 --db "$work/x.db" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "ZEUS_PFO_MAX_JOB_IDLE_TIME" <<<"$out" || fail "non-integer idle time ($rc): $out"
set -e
echo "ok"
