#!/usr/bin/env bash
# serve_one_config_one_protocol.sh: one configuration serves both protocols, and one job speaks
# one protocol (issue 21 item 5, issue 22 item 4; docs/zeus-protocol.md "One configuration",
# docs/http-api.md "One job, one protocol").
# - The README's start line (--scheduler PointSolution --scheduler-args with a Zeus .py plan)
#   serves a Zeus client that plan (it answered 500 "no Zeus scheduler is configured" before),
#   and says in its log and /info that the Zeus plan loaded; an ergon JSON plan works too.
# - ZEUS_PFO_SCHEDULER(_ARGS) configure Perseus clients as well; a conflict is refused at
#   start-up with a message naming both.
# - A Zeus job refuses the Perseus and /v1 rank routes (409 naming the job, its protocol and the
#   route), so the genuine Zeus register_rank still works afterwards; and the reverse.
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
cat > freqs_pipeline_00003.py <<'PY'
[
[('forward', 1410), ('forward', 1395), ('backward', 1380), ('backward', 1395)],
[('forward', 1380), ('backward', 1380), ('forward', 1365), ('backward', 1365)],
]
# Iteration 3 cost change: -0.25
PY
start() { # [env assignments...] -- serve options...
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  # synchronously: the background job truncates its output file only once it runs, and a
  # previous server's "listening" line must not be read as this one's
  rm -f "$work/out.txt" "$work/log.txt"
  env "${envs[@]}" "$ERGON" serve --port 0 --db "$work/s$RANDOM.db" "$@" >"$work/out.txt" 2>"$work/log.txt" &
  pid=$!
  for _ in $(seq 600); do grep -q listening "$work/out.txt" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out.txt")
  [ -n "$port" ] || fail "server did not start: $(cat "$work/log.txt")"
  u="http://127.0.0.1:$port"
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
zeus_job() {
  local j
  j=$(curl -s -w ' %{http_code}' -X POST "$u/register_job" -H 'Content-Type: application/json' \
    -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"job_metadata":null}')
  [ "${j##* }" = 200 ] || fail "Zeus register_job: $j"
  j=${j% *}; echo "${j//\"/}"
}
zeus_rank() { # job rank -> "body code"
  curl -s -w ' %{http_code}' -X POST "$u/register_rank/$1" -H 'Content-Type: application/json' \
    -d "{\"rank\":$2,\"dp_rank\":0,\"pp_rank\":$2,\"tp_rank\":0,\"available_frequencies\":[1410,1395,1380,1365]}"
}
want0='{"rank":0,"frequencies":[["forward",1410],["forward",1395],["backward",1380],["backward",1395]]}'
want1='{"rank":1,"frequencies":[["forward",1380],["backward",1380],["forward",1365],["backward",1365]]}'
zeus_schedules() { # job
  curl -s "$u/schedule/$1?rank=0" >s0 & local c0=$!
  curl -s "$u/schedule/$1?rank=1" >s1 & local c1=$!
  wait $c0 $c1
  [ "$(cat s0)" = "$want0" ] || fail "rank 0 schedule: $(cat s0)"
  [ "$(cat s1)" = "$want1" ] || fail "rank 1 schedule: $(cat s1)"
}

# 1. The README's line: Perseus options, a Zeus client.
start -- --scheduler PointSolution --scheduler-args '{"solution_path": "freqs_pipeline_00003.py"}' --mode frequency
grep '"event":"zeus"' "$work/log.txt" | grep -F 'Zeus PFO jobs run PointSolution {\"solution_path\":\"freqs_pipeline_00003.py\"} from the server'"'"'s scheduler' \
  | grep -qF "plan $work/freqs_pipeline_00003.py loaded (Zeus (name, clock) plan, 2 stages)" \
  || fail "no Zeus plan line in the log: $(cat "$work/log.txt")"
info=$(curl -sf "$u/info")
grep -q '"zeus":{.*"served":true' <<<"$info" && grep -q '"format":"Zeus (name, clock) plan"' <<<"$info" \
  && grep -q "\"path\":\"$work/freqs_pipeline_00003.py\"" <<<"$info" || fail "/info: $info"
job=$(zeus_job)
case "$job" in *+dp1+pp2+tp1+PointSolution) ;; *) fail "job id $job";; esac
# Issue 21 item 5's reproducer: the kronos register_rank on the Zeus job is refused, so the
# genuine Zeus register_rank for that rank is not a conflict afterwards.
out=$(curl -s -w ' %{http_code}' -X POST "$u/register_rank" -H 'Content-Type: application/json' \
  -d "{\"job_id\":\"$job\",\"rank\":0,\"dp_rank\":0,\"pp_rank\":0,\"tp_rank\":0,\"pipe_schedule\":[\"forward\",\"backward\"],\"power_state_range\":[1410,1395]}")
[ "${out##* }" = 409 ] || fail "kronos register_rank on a Zeus job: $out"
for w in "job $job" "speaks the Zeus PFO protocol" "POST /register_rank is a Perseus route"; do
  grep -qF "$w" <<<"$out" || fail "message lacks '$w': $out"
done
for route in "ranks" "results"; do
  out=$(curl -s -w ' %{http_code}' -X POST "$u/v1/jobs/$job/$route" -d '{"rank":0,"iter_time":[1],"iter_energy":[1]}')
  [ "${out##* }" = 409 ] && grep -qF "POST /v1/jobs/{job_id}/$route is a /v1 route" <<<"$out" || fail "/v1 $route on a Zeus job: $out"
done
out=$(curl -s -w ' %{http_code}' "$u/v1/jobs/$job/schedule?rank=0&wait=0")
[ "${out##* }" = 409 ] && grep -qF "speaks the Zeus PFO protocol" <<<"$out" || fail "/v1 schedule on a Zeus job: $out"
for r in 0 1; do
  out=$(zeus_rank "$job" $r); [ "$out" = "null 200" ] || fail "Zeus register_rank $r after the refused kronos one: $out"
done
zeus_schedules "$job"
# Management routes stay open on a Zeus job.
curl -sf "$u/v1/jobs/$job" | grep -q '"scheduler":"zeus:PointSolution"' || fail "/v1 status of a Zeus job"
# The reverse: a Perseus job refuses Zeus's register_rank/{id}.
pj=$(curl -sf -X POST "$u/register_job" -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"framework":"f","model_name":"m","partition_method":"p","microbatch_size":1,"num_microbatches":2}')
pj=${pj//\"/}
out=$(zeus_rank "$pj" 0)
[ "${out##* }" = 409 ] && grep -qF "job $pj speaks the Perseus protocol" <<<"$out" \
  && grep -qF "POST /register_rank/{job_id} is a Zeus PFO route" <<<"$out" || fail "Zeus register_rank on a Perseus job: $out"
curl -sf -X POST "$u/v1/jobs/$pj/end" >/dev/null
curl -sf -X POST "$u/v1/jobs/$job/end" >/dev/null || fail "/v1 end of a Zeus job"
stop

# 2. An ergon JSON plan through --scheduler-args: format detected from the content.
cat > plan.json <<'JS'
{"format": "ergon-plan", "version": 1, "schedule": "1f1b", "num_stages": 2, "num_microbatches": 2,
 "stages": [{"stage": 0, "freq_mhz": [1410, 1395, 1380, 1395]},
            {"stage": 1, "freq_mhz": [1380, 1380, 1365, 1365]}]}
JS
start -- --scheduler PointSolution --scheduler-args '{"solution_path": "plan.json"}' --mode frequency
if grep -q '"event":"zeus".*Zeus PFO jobs run PointSolution' "$work/log.txt"; then
  grep -q 'plan .*plan.json loaded (ergon JSON plan, 2 stages)' "$work/log.txt" || fail "JSON plan line: $(cat "$work/log.txt")"
  job=$(zeus_job)
  for r in 0 1; do out=$(zeus_rank "$job" $r); [ "$out" = "null 200" ] || fail "register_rank (JSON plan) $r: $out"; done
  # 1F1B names in each stage's order, the plan's clocks
  want0='{"rank":0,"frequencies":[["forward",1410],["forward",1395],["backward",1380],["backward",1395]]}'
  want1='{"rank":1,"frequencies":[["forward",1380],["backward",1380],["forward",1365],["backward",1365]]}'
  zeus_schedules "$job"
else
  fail "JSON plan not served to Zeus jobs: $(cat "$work/log.txt")"
fi
stop

# 3. The Zeus way configures Perseus clients too.
start ZEUS_PFO_SCHEDULER_ARGS='{"solution_path": "freqs_pipeline_00003.py"}' --
info=$(curl -sf "$u/info")
grep -q '"scheduler":"PointSolution","scheduler_args":{"solution_path":"freqs_pipeline_00003.py"},"log_level":"INFO","mode":"frequency"' <<<"$info" \
  || fail "Perseus side of a Zeus-configured server: $info"
grep -q '"from":"the Zeus configuration' <<<"$info" || fail "/info zeus.from: $info"
grep -q 'Zeus PFO jobs run PointSolution .*plan .*freqs_pipeline_00003.py loaded' "$work/log.txt" || fail "log: $(cat "$work/log.txt")"
stop

# 4. Conflicts are refused at start-up, naming both; the same plan twice is not a conflict.
cp freqs_pipeline_00003.py other.py
set +e
out=$(ZEUS_PFO_SCHEDULER_ARGS='{"solution_path": "other.py"}' "$ERGON" serve --port 0 --db "$work/c.db" \
  --scheduler PointSolution --scheduler-args '{"solution_path": "freqs_pipeline_00003.py"}' --mode frequency 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q 'conflicting configuration: Perseus and /v1 jobs would run PointSolution {"solution_path":"freqs_pipeline_00003.py"}.*but Zeus jobs PointSolution {"solution_path":"other.py"}' <<<"$out" \
  || fail "conflict ($rc): $out"
set +e
out=$(ZEUS_PFO_SCHEDULER=InstructionProfiler "$ERGON" serve --port 0 --db "$work/c.db" --scheduler AllMaxFrequency 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q 'conflicting configuration' <<<"$out" || fail "AllMax vs InstructionProfiler ($rc): $out"
start ZEUS_PFO_SCHEDULER_ARGS="{\"solution_path\": \"$work/freqs_pipeline_00003.py\"}" -- \
  --scheduler PointSolution --scheduler-args '{"solution_path": "freqs_pipeline_00003.py", "warmup_iters": 1}' --mode frequency
job=$(zeus_job)
stop

# 5. A server Zeus cannot be served by says why when a Zeus client comes.
start -- --scheduler AllMaxFrequency
out=$(curl -s -w ' %{http_code}' -X POST "$u/register_job" -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"job_metadata":null}')
[ "${out##* }" = 500 ] && grep -q "does not serve Zeus PFO jobs: this server's scheduler is AllMaxFrequency" <<<"$out" || fail "AllMax server, Zeus job: $out"
grep -q '"event":"zeus".*not served' "$work/log.txt" || fail "no 'not served' log line"
stop
echo ok
