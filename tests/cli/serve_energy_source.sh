#!/usr/bin/env bash
# serve_energy_source.sh: a ProfilingResult's optional "energy_source" (where a rank's energies
# come from: counter, integrated, model, none, mixed) is kept in the server's N.prof.json dumps;
# results without it dump as before; another value is refused with a 422 naming the field (as other malformed results).
set -euo pipefail
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?path of the ergon binary}"
command -v curl >/dev/null || skip_or_fail "curl not installed"
work=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
cat > "$work/plan.py" <<'PY'
[[1200, 1200, 1000, 1000],
 [1000, 1000, 1200, 1200],]
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
job=$(curl -sf -X POST "$u/register_job" -d '{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"framework":"merak","model_name":"gpt3-xl","partition_method":"custom:0,8,14","microbatch_size":8,"num_microbatches":2}')
job=${job//\"/}
for r in 0 1; do
  curl -sf -X POST "$u/register_rank" -d "{\"job_id\":\"$job\",\"rank\":$r,\"dp_rank\":0,\"pp_rank\":$r,\"tp_rank\":0,\"pipe_schedule\":[\"load\",\"forward\",\"p2p\",\"forward\",\"p2p\",\"backward\",\"p2p\",\"backward\",\"step\"],\"power_state_range\":[1410,1200,1000]}" >/dev/null
done
body() { echo "{\"rank\":$1,\"iter_time\":[1.5,1.25],\"iter_energy\":[300,290],\"time_breakdown\":{\"forward\":[[0.1,0.1],[0.1,0.1]],\"backward\":[[0.2,0.2],[0.2,0.2]]},\"energy_breakdown\":{\"forward\":[],\"backward\":[]}$2}"; }
curl -s "$u/schedule/$job?rank=0" >/dev/null & c0=$!
curl -s "$u/schedule/$job?rank=1" >/dev/null & c1=$!
wait $c0 $c1
code=$(curl -s -o "$work/bad" -w '%{http_code}' -X POST "$u/result/$job" -d "$(body 0 ',"energy_source":"guess"')")
[ "$code" = 422 ] && grep -q 'energy_source must be' "$work/bad" || fail "bad energy_source: $code $(cat "$work/bad")"
res=$(curl -sf -X POST "$u/result/$job" -d "$(body 0 ',"energy_source":"integrated"')")
[ "$res" = null ] || fail "result 0: $res"
res=$(curl -sf -X POST "$u/result/$job" -d "$(body 1 '')")
[ "$res" = null ] || fail "result 1: $res"
d="$work/dump/$job"
for _ in $(seq 50); do [ -s "$d/0.prof.json" ] && break; sleep 0.1; done
[ -s "$d/0.prof.json" ] || fail "no 0.prof.json"
python3 - "$d/0.prof.json" <<'PY' || fail "dump: $(cat "$d/0.prof.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d[0]["energy_source"] == "integrated", d[0]
assert "energy_source" not in d[1], d[1]
PY
echo ok
