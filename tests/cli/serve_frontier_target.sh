#!/usr/bin/env bash
# The server's Frontier scheduler answers the same question as `ergon choose`: a slowdown of
# 1.0 on a frontier from `plan perseus` is served (the frontier always holds a plan no slower
# than all-max clocks), and a target no plan meets fails the job when its ranks have registered
# (its status says why), with the
# fastest plan's time and what to do, instead of running the fastest plan without a word.
set -u
: "${ERGON:?}"
command -v curl >/dev/null || { echo "FAIL: curl missing"; exit 1; }
tmp=$(mktemp -d); pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages 4 -o "$tmp/p.csv" 2>/dev/null || fail "profile sim"
"$ERGON" plan perseus --profile "$tmp/p.csv" --stages 4 --microbatches 8 --gpu A100 \
  --unit-time 0.002 --out "$tmp/front" >/dev/null 2>&1 || fail "plan"
start() { # ARGS_JSON
  [ -n "$pid" ] && { kill $pid; wait $pid 2>/dev/null; }
  # synchronously: the background job truncates its output file only once it runs, and a
  # previous server's "listening" line must not be read as this one's
  rm -f "$tmp/out" "$tmp/log"
  "$ERGON" serve --port 0 --db "$tmp/s$RANDOM.db" --scheduler Frontier --scheduler-args "$1" \
    >"$tmp/out" 2>"$tmp/log" & pid=$!
  for _ in $(seq 600); do grep -q listening "$tmp/out" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$tmp/out")
  [ -n "$port" ] || fail "server did not start: $(cat "$tmp/log")"
}
job='{"pp_degree":4,"dp_degree":1,"tp_degree":1,"world_size":4,"framework":"f","model_name":"m","partition_method":"p","microbatch_size":1,"num_microbatches":8}'
sched=$(python3 -c 'import json; print(json.dumps(["forward"] * 8 + ["backward"] * 8))')
register() { # -> the job's state and message once every rank registered
  local u="http://127.0.0.1:$port" id
  id=$(curl -sf -X POST "$u/v1/jobs" -d "$job" | python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])') ||
    fail "job registration: $(cat "$tmp/log")"
  for r in 0 1 2 3; do
    curl -sf -o /dev/null -X POST "$u/v1/jobs/$id/ranks" \
      -d "{\"rank\":$r,\"dp_rank\":0,\"pp_rank\":$r,\"tp_rank\":0,\"pipe_schedule\":$sched,\"power_state_range\":[1410,1200,1000]}" ||
      fail "rank $r registration"
  done
  curl -sf "$u/v1/jobs/$id"
}
start "{\"frontier_dir\": \"$tmp/front\", \"slowdown\": 1.0}"
st=$(register)
case $st in *'"state": "running"'*|*'"state":"running"'*) ;; *) fail "slowdown 1.0: $st" ;; esac
start "{\"frontier_dir\": \"$tmp/front\", \"deadline_s\": 0.001}"
st=$(register)
case $st in *'"state": "failed"'*|*'"state":"failed"'*) ;; *) fail "an impossible deadline served: $st" ;; esac
case $st in *"no plan meets the deadline of 0.001 s"*"the fastest plan takes"*"plan the frontier again"*) ;;
  *) fail "message: $st" ;; esac
echo "ok: Frontier targets checked at registration"
