#!/usr/bin/env bash
# serve.sh: `ergon serve` as a Perseus client sees it: options, start-up errors, and a
# kronos-protocol job (raw job id with + : , in the path) from registration to [profiling-done].
set -euo pipefail
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?path of the ergon binary}"
command -v curl >/dev/null || skip_or_fail "curl not installed"
work=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

help=$("$ERGON" serve --help)
grep -q -- "--rank-timeout" <<<"$help" || fail "--help lacks --rank-timeout"
set +e
"$ERGON" serve --bogus >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option must exit 2"
"$ERGON" serve --port 99999 >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad port must exit 2"
# the option table: every option with its variables in the help; a set variable is checked with
# its option's bounds and named; a flag takes no value; a secret never appears in a message.
# (timeout, own files: a server that wrongly starts would run on)
refused() { timeout 20 "$ERGON" serve --port 0 --db "$work/r.db" --no-dump "$@" 2>&1; }
grep -qF -- "--job-idle-timeout S" <<<"$help" && grep -qF "[ERGON_JOB_IDLE_TIMEOUT, ZEUS_PFO_MAX_JOB_IDLE_TIME]" <<<"$help" ||
  fail "--help lacks --job-idle-timeout and its variables: $help"
out=$(PORT=abc refused); rc=$?
[ $rc -eq 2 ] && grep -qF "PORT expects an integer in [0, 65535], got 'abc'" <<<"$out" || fail "bad PORT ($rc): $out"
# --help answers whatever the environment holds
out=$(PORT=abc "$ERGON" serve --help 2>&1) && grep -q "^usage: ergon serve" <<<"$out" || fail "serve --help with a bad PORT: $out"
out=$(ERGON_MAX_CONNECTIONS_PER_IP=0 refused); rc=$?
[ $rc -eq 2 ] && grep -qF "ERGON_MAX_CONNECTIONS_PER_IP expects an integer in [1, 1000000], got '0'" <<<"$out" ||
  fail "bad ERGON_MAX_CONNECTIONS_PER_IP ($rc): $out"
out=$(refused --durable=yes); rc=$?
[ $rc -eq 2 ] && grep -qF "option '--durable' takes no value" <<<"$out" || fail "--durable=yes ($rc): $out"
out=$(refused --max-jobs); rc=$?
[ $rc -eq 2 ] && grep -qF "option '--max-jobs' needs a value" <<<"$out" || fail "--max-jobs without a value ($rc): $out"
out=$(refused stray); rc=$?
[ $rc -eq 2 ] && grep -qF "unexpected argument 'stray'" <<<"$out" || fail "an operand ($rc): $out"
out=$(ERGON_PLANS_DIR="$(printf 'd%.0s:' $(seq 65))" refused); rc=$?
[ $rc -eq 2 ] && grep -qF "ERGON_PLANS_DIR names more than 64 entries" <<<"$out" || fail "65 plan dirs ($rc): $out"
args=(); for i in $(seq 65); do args+=(--plans-dir "d$i"); done
out=$(refused "${args[@]}"); rc=$?
[ $rc -eq 2 ] && grep -qF "at most 64 --plans-dir" <<<"$out" || fail "65 --plans-dir ($rc): $out"
secret=0123456789abcdef-not-printed
out=$(ERGON_SERVE_TOKEN=$secret ERGON_DURABLE=maybe refused); rc=$?
[ $rc -eq 2 ] && grep -qF "ERGON_DURABLE='maybe' is not a boolean" <<<"$out" || fail "bad ERGON_DURABLE ($rc): $out"
grep -qF "$secret" <<<"$out" && fail "the token appears in a message: $out"
# a host name is resolved (localhost is loopback: no access control needed); an unknown one is named
out=$("$ERGON" serve --host no-such-host.invalid --port 0 --db "$work/h.db" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "host 'no-such-host.invalid' is neither a numeric IPv4/IPv6 address nor a name" <<<"$out" ||
  fail "unknown host: $rc $out"
"$ERGON" serve --host localhost --port 0 --db "$work/h.db" >"$work/h.out" 2>"$work/h.err" & hp=$!
for _ in $(seq 600); do grep -q listening "$work/h.out" 2>/dev/null && break; sleep 0.1; done
hport=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/h.out")
[ -n "$hport" ] && curl -sf "http://127.0.0.1:$hport/healthz" >/dev/null || fail "--host localhost: $(cat "$work/h.err")"
kill $hp; wait $hp 2>/dev/null
out=$("$ERGON" serve --db "$work/x.db" --scheduler PointSolution --mode frequency \
      --scheduler-args '{"solution_path": "/nonexistent"}' 2>&1); rc=$?
[ $rc -eq 1 ] || fail "bad solution_path must exit 1 (got $rc)"
grep -q "/nonexistent" <<<"$out" || fail "message must name the path: $out"
out=$("$ERGON" serve --db "$work/x.db" --scheduler InstructionProfiler 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "mode" <<<"$out" || fail "knob-agnostic scheduler without mode: $out"
set -e

# A 2-stage plan: 2 microbatches, so 4 clocks per stage (kronos literal).
cat > "$work/plan.py" <<'PY'
[[1200, 1200, 1000, 1000],
 [1000, 1000, 1200, 1200],]
# estimated: 1.23 s
PY
cd "$work"
"$ERGON" serve --port 0 --db "$work/s.db" --dump "$work/dump" --scheduler PointSolution \
  --scheduler-args "{\"solution_path\": \"$work/plan.py\", \"warmup_iters\": 1}" --mode frequency \
  >"$work/out.txt" 2>"$work/log.txt" &
pid=$!
for _ in $(seq 600); do grep -q listening "$work/out.txt" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out.txt")
[ -n "$port" ] || fail "server did not start: $(cat "$work/log.txt")"
u="http://127.0.0.1:$port"

info=$(curl -sf "$u/info")
grep -q '"mode":"frequency"' <<<"$info" || fail "/info: $info"
job=$(curl -sf -X POST "$u/register_job" -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"framework":"merak","model_name":"gpt3-xl","partition_method":"custom:0,8,14","microbatch_size":8,"num_microbatches":2}')
job=${job//\"/}
case "$job" in *+merak+gpt3-xl+custom:0,8,14+dp1+pp2+tp1+mbs8+nmb2+PointSolution) ;; *) fail "job id $job";; esac
for r in 0 1; do
  curl -sf -X POST "$u/register_rank" -d "{\"job_id\":\"$job\",\"rank\":$r,\"dp_rank\":0,\"pp_rank\":$r,\"tp_rank\":0,\"pipe_schedule\":[\"load\",\"forward\",\"p2p\",\"forward\",\"p2p\",\"backward\",\"p2p\",\"backward\",\"step\"],\"power_state_range\":[1410,1200,1000]}" >/dev/null
done
# Two windows (warm-up, plan), then [profiling-done] as HTTP 500.
for w in 0 1; do
  curl -s "$u/schedule/$job?rank=0" >"$work/s0" & c0=$!
  curl -s "$u/schedule/$job?rank=1" >"$work/s1" & c1=$!
  wait $c0 $c1
  if [ $w = 0 ]; then
    grep -q '"power_states":\[1410, 1410, 1410, 1410, 1410, 1410, 1410, 1410, 1410\]' "$work/s0" || fail "warm-up: $(cat "$work/s0")"
  else
    grep -q '"power_states":\[1200, 1200, 1200, 1200, 1200, 1000, 1000, 1000, 1000\]' "$work/s0" || fail "plan stage 0: $(cat "$work/s0")"
    grep -q '"power_states":\[1000, 1000, 1000, 1000, 1000, 1200, 1200, 1200, 1200\]' "$work/s1" || fail "plan stage 1: $(cat "$work/s1")"
  fi
  for r in 0 1; do
    res=$(curl -sf -X POST "$u/result/$job" -d "{\"rank\":$r,\"iter_time\":[1.5,1.25],\"iter_energy\":[300,290],\"time_breakdown\":{\"forward\":[[0.1,0.1],[0.1,0.1]],\"backward\":[[0.2,0.2],[0.2,0.2]]},\"energy_breakdown\":{\"forward\":[],\"backward\":[]}}")
    [ "$res" = null ] || fail "result: $res"
  done
done
code=$(curl -s -o "$work/end" -w '%{http_code}' "$u/schedule/$job?rank=0")
[ "$code" = 500 ] && grep -q '\[profiling-done\]' "$work/end" || fail "end of job: $code $(cat "$work/end")"
metrics=$(curl -sf "$u/metrics")
grep -q '^ergon_jobs{state="done"} 1$' <<<"$metrics" || fail "metrics: $metrics"
# every schedule request is counted, those that waited at the barrier too (2 + 2 + the end)
grep -q '^ergon_request_duration_seconds_count{route="schedule"} 5$' <<<"$metrics" ||
  fail "schedule requests counted: $(grep 'count{route="schedule"}' <<<"$metrics")"
d="$work/dump/$job"
for f in perseus.json ranks.json 0.sched.json 0.prof.json 1.sched.json 1.prof.json; do
  [ -s "$d/$f" ] || fail "missing dump $f"
done
grep -q '"iter_time": \[1.5, 1.25\]' "$d/1.prof.json" || fail "prof dump format: $(head -c 200 "$d/1.prof.json")"
grep -q '"solution_path"' "$d/perseus.json" || fail "perseus.json"
# Structured logs: one JSON object per line.
first=$(head -n 1 "$work/log.txt")
grep -q '^{"ts":' <<<"$first" || fail "log format: $first"

# A rank waiting at a barrier longer than the connection timeout keeps its
# connection (Perseus clients wait without a timeout of their own).
kill "$pid"; wait "$pid" 2>/dev/null || true
"$ERGON" serve --port 0 --db "$work/s2.db" --no-dump --connection-timeout 1 \
  >"$work/out2.txt" 2>"$work/log2.txt" &
pid=$!
for _ in $(seq 600); do grep -q listening "$work/out2.txt" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out2.txt")
u="http://127.0.0.1:$port"
job=$(curl -sf -X POST "$u/register_job" -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"framework":"m","model_name":"g","partition_method":"c","microbatch_size":1,"num_microbatches":1}')
job=${job//\"/}
for r in 0 1; do
  curl -sf -X POST "$u/register_rank" -d "{\"job_id\":\"$job\",\"rank\":$r,\"dp_rank\":0,\"pp_rank\":$r,\"tp_rank\":0,\"pipe_schedule\":[\"forward\",\"backward\"],\"power_state_range\":[1410]}" >/dev/null
done
curl -s "$u/schedule/$job?rank=0" >"$work/w0" & c0=$!
sleep 2.5
curl -s "$u/schedule/$job?rank=1" >"$work/w1"
wait $c0
grep -q '"power_states":\[1410, 1410\]' "$work/w0" || fail "rank 0 lost its barrier wait: $(cat "$work/w0")"
echo "ok"
