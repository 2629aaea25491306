#!/usr/bin/env bash
# serve_access_control.sh: a server that can leave loopback safely (issue 21 item 6;
# docs/http-api.md "Access control").
# - With a token, every route but /healthz refuses a request without it or with a wrong one
#   (401, WWW-Authenticate), on the /v1, Perseus and Zeus routes alike; the right token works as
#   a Bearer header and as the password of Basic credentials (what the Zeus and Perseus clients'
#   httpx sends for http://ergon:TOKEN@host:port).
# - --allow-net: the Perseus and Zeus routes from an allowed network need no token, /v1 still
#   does; without a token, a client outside the networks gets 403.
# - A non-loopback --host without a token or --allow-net, or with an --allow-net network that
#   is not a private range (0.0.0.0/0), is refused at start-up unless --insecure; a token file
#   readable by others is refused.
# - TLS with a self-made certificate (openssl req): curl and ergon's C client (libcurl, through
#   the Python binding, with ERGON_SERVE_CA_FILE and ERGON_SERVE_TOKEN) talk https.
set -euo pipefail
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?path of the ergon binary}" "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
command -v curl >/dev/null || skip_or_fail "curl not installed"
work=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"
cat > freqs_pipeline_00001.py <<'PY'
[
[('forward', 1410), ('backward', 1395)],
[('forward', 1395), ('backward', 1410)],
]
PY
tok=$(head -c 24 /dev/urandom | base64 | tr -d '/+=' )
printf '%s\n' "$tok" > token; chmod 600 token
start() { # serve options...
  # synchronously: the background job truncates its output file only once it runs, and a
  # previous server's "listening" line must not be read as this one's
  rm -f "$work/out.txt" "$work/log.txt"
  "$ERGON" serve --port 0 --db "$work/s$RANDOM.db" "$@" >"$work/out.txt" 2>"$work/log.txt" &
  pid=$!
  for _ in $(seq 600); do grep -q listening "$work/out.txt" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/out.txt")
  [ -n "$port" ] || fail "server did not start: $(cat "$work/log.txt")"
  scheme=$(sed -n 's/.*listening on \([a-z]*\):.*/\1/p' "$work/out.txt")
  u="$scheme://127.0.0.1:$port"
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
# code METHOD PATH [curl args...] -> HTTP status
code() { local m=$1 p=$2; shift 2; curl -s -o "$work/body" -w '%{http_code}' -X "$m" "$@" "$u$p"; }
kjob='{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"framework":"f","model_name":"m","partition_method":"p","microbatch_size":1,"num_microbatches":1}'
zjob='{"job_id":"","pp_degree":2,"dp_degree":1,"tp_degree":1,"world_size":2,"job_metadata":null}'

# ---- 1. token only ----
start --token-file token --scheduler PointSolution --scheduler-args '{"solution_path": "freqs_pipeline_00001.py"}' --mode frequency
grep -q 'access: token' "$work/log.txt" || fail "listen line: $(cat "$work/log.txt")"
B=(-H "Authorization: Bearer $tok")
# jobs of each protocol, made with the token, to aim the refused requests at real ids
kj=$(curl -sf "${B[@]}" -X POST "$u/register_job" -d "$kjob"); kj=${kj//\"/}
zj=$(curl -sf -u "ergon:$tok" -X POST "$u/register_job" -d "$zjob"); zj=${zj//\"/}
vj=$(curl -sf "${B[@]}" -X POST "$u/v1/jobs" -d "$kjob" | sed 's/.*"job_id":"\([^"]*\)".*/\1/')
[ -n "$kj" ] && [ -n "$zj" ] && [ -n "$vj" ] || fail "jobs with the token: '$kj' '$zj' '$vj'"
krank="{\"job_id\":\"$kj\",\"rank\":0,\"dp_rank\":0,\"pp_rank\":0,\"tp_rank\":0,\"pipe_schedule\":[\"forward\",\"backward\"],\"power_state_range\":[1410,1395]}"
zrank='{"rank":0,"dp_rank":0,"pp_rank":0,"tp_rank":0,"available_frequencies":[1410,1395]}'
vrank='{"rank":0,"dp_rank":0,"pp_rank":0,"tp_rank":0,"pipe_schedule":["forward","backward"],"power_state_range":[1410,1395]}'
res='{"rank":0,"iter_time":[1.0],"iter_energy":[100.0]}'
routes=(
  "POST /register_job $kjob"                 # Perseus
  "POST /register_rank $krank"
  "GET /schedule/$kj?rank=0 -"
  "POST /result/$kj $res"
  "POST /register_job $zjob"                 # Zeus
  "POST /register_rank/$zj $zrank"
  "GET /schedule/$zj?rank=0 -"
  "POST /result/$zj $res"
  "POST /v1/jobs $kjob"                      # /v1
  "POST /v1/jobs/$vj/ranks $vrank"
  "GET /v1/jobs/$vj/schedule?rank=0&wait=0 -"
  "POST /v1/jobs/$vj/results $res"
  "POST /v1/jobs/$vj/heartbeat {\"rank\":0}"
  "POST /v1/jobs/$vj/straggler {\"slowdown\":1.5}"
  "POST /v1/jobs/$vj/end {}"
  "POST /v1/jobs/$vj/abort {}"
  "GET /v1/jobs -"
  "GET /metrics -"
  "GET /info -"
)
n=0
for r in "${routes[@]}"; do
  read -r m p b <<<"$r"
  data=(); [ "$b" != - ] && data=(-d "$b")
  for cred in none wrong-bearer wrong-basic garbage; do
    case $cred in
      none) c=(); ;;
      wrong-bearer) c=(-H "Authorization: Bearer ${tok}x"); ;;
      wrong-basic) c=(-u "ergon:${tok%?}"); ;;
      garbage) c=(-H "Authorization: Token $tok"); ;;
    esac
    s=$(code "$m" "$p" "${c[@]}" "${data[@]}")
    [ "$s" = 401 ] || fail "$m $p with $cred credentials: $s $(cat "$work/body")"
    grep -q 'Unauthorized' "$work/body" || fail "401 body: $(cat "$work/body")"
    n=$((n + 1))
  done
done
echo "# $n unauthorized requests on ${#routes[@]} routes refused with 401"
curl -sI -X POST "$u/v1/jobs" | grep -qi '^WWW-Authenticate: Bearer' || fail "no WWW-Authenticate header"
[ "$(code GET /healthz)" = 200 ] || fail "/healthz must stay open"
# nothing the refused requests carried reached the state: the jobs have no rank yet
curl -sf "${B[@]}" "$u/v1/jobs/$kj" | grep -q '"ranks_registered":0' || fail "a refused request changed job $kj"
# the right token, both ways, on every protocol: a full Zeus job over Basic credentials
for r in 0 1; do
  s=$(code POST "/register_rank/$zj" -u "ergon:$tok" -d "{\"rank\":$r,\"dp_rank\":0,\"pp_rank\":$r,\"tp_rank\":0,\"available_frequencies\":[1410,1395]}")
  [ "$s" = 200 ] || fail "Zeus register_rank $r with the token: $s $(cat "$work/body")"
done
curl -s -u "ergon:$tok" "$u/schedule/$zj?rank=0" >s0 & c0=$!
curl -s "http://ergon:$tok@127.0.0.1:$port/schedule/$zj?rank=1" >s1 & c1=$!
wait $c0 $c1
grep -q '"frequencies":\[\["forward",1410\]' s0 && grep -q '"rank":1' s1 || fail "Zeus schedules with the token: $(cat s0 s1)"
s=$(code POST /register_rank "${B[@]}" -d "$krank"); [ "$s" = 200 ] || fail "Perseus register_rank with the token: $s"
s=$(code POST "/v1/jobs/$vj/ranks" "${B[@]}" -d "$vrank"); [ "$s" = 200 ] || fail "/v1 ranks with the token: $s"
s=$(code GET /metrics "${B[@]}"); [ "$s" = 200 ] || fail "/metrics with the token: $s"
grep -q '"event":"access".*refused' "$work/log.txt" || fail "refusals are not logged"
stop

# ---- 2. token + --allow-net: Perseus/Zeus routes from the allowed network without a token ----
start --token-file token --allow-net 127.0.0.0/8 --allow-net fd00::/8 \
  --scheduler PointSolution --scheduler-args '{"solution_path": "freqs_pipeline_00001.py"}' --mode frequency
s=$(code POST /register_job -d "$zjob"); [ "$s" = 200 ] || fail "Zeus register_job from an allowed network: $s $(cat "$work/body")"
s=$(code POST /register_job -d "$kjob"); [ "$s" = 200 ] || fail "Perseus register_job from an allowed network: $s"
s=$(code POST /v1/jobs -d "$kjob"); [ "$s" = 401 ] || fail "/v1 without the token from an allowed network: $s"
s=$(code POST /v1/jobs "${B[@]}" -d "$kjob"); [ "$s" = 201 ] || fail "/v1 with the token: $s"
stop
# ---- 3. --allow-net without a token: outside the networks, 403 everywhere but /healthz ----
start --allow-net 10.0.0.0/8
s=$(code POST /register_job -d "$kjob"); [ "$s" = 403 ] && grep -q 'not in an --allow-net network (client 127.0.0.1)' "$work/body" || fail "outside the networks: $s $(cat "$work/body")"
s=$(code GET /info); [ "$s" = 403 ] || fail "/info outside the networks: $s"
[ "$(code GET /healthz)" = 200 ] || fail "/healthz must stay open"
stop

# ---- 4. start-up rules ----
set +e
out=$("$ERGON" serve --host 0.0.0.0 --port 0 --db "$work/x.db" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'refusing to listen on 0.0.0.0 without access control' <<<"$out" || fail "0.0.0.0 without a token ($rc): $out"
out=$("$ERGON" serve --host :: --port 0 --db "$work/x.db" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'refusing to listen on ::' <<<"$out" || fail ":: without a token ($rc): $out"
chmod 644 token
out=$("$ERGON" serve --host 0.0.0.0 --port 0 --db "$work/x.db" --token-file token 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'token is readable by other users\|readable by other users (mode 0644): chmod 600' <<<"$out" || fail "world-readable token file ($rc): $out"
chmod 600 token
out=$(ERGON_SERVE_TOKEN=short "$ERGON" serve --host 0.0.0.0 --port 0 --db "$work/x.db" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'the token must be 16 to 4096 printable' <<<"$out" || fail "short token ($rc): $out"
out=$("$ERGON" serve --host 0.0.0.0 --port 0 --db "$work/x.db" --allow-net 10.1.2.3/8 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'host bits set' <<<"$out" || fail "bad network ($rc): $out"
# (timeout: a server that starts would run on)
out=$(timeout 20 "$ERGON" serve --host 0.0.0.0 --port 0 --db "$work/x.db" --allow-net 0.0.0.0/0 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'with --allow-net 0.0.0.0/0: that network is not a private' <<<"$out" || fail "public network without --insecure ($rc): $out"
out=$("$ERGON" serve --port 0 --db "$work/x.db" --tls-cert token 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q 'TLS needs both --tls-cert and --tls-key' <<<"$out" || fail "half TLS ($rc): $out"
set -e
for ok in "--insecure" "--token-file token" "--allow-net 192.168.0.0/16"; do
  # shellcheck disable=SC2086
  start --host 0.0.0.0 $ok
  [ "$(code GET /healthz)" = 200 ] || fail "0.0.0.0 with $ok"
  if [ "$ok" = --insecure ]; then
    grep -q '"level":"warning","event":"access","msg":"--insecure: listening on 0.0.0.0 without access control' "$work/log.txt" || fail "no --insecure warning"
  fi
  if [ "$ok" = "--token-file token" ]; then
    grep -q 'the token travels in clear text on 0.0.0.0' "$work/log.txt" || fail "no clear-text warning"
  fi
  stop
done
ERGON_SERVE_TOKEN="$tok" start --host 0.0.0.0
[ "$(code GET /v1/jobs)" = 401 ] && [ "$(code GET /v1/jobs "${B[@]}")" = 200 ] || fail "ERGON_SERVE_TOKEN"
stop

# ---- 5. TLS with a self-made certificate ----
command -v openssl >/dev/null || fail "openssl is needed for the TLS test (Debian: openssl)"
openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 2 \
  -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" 2>/dev/null
start --token-file token --tls-cert cert.pem --tls-key key.pem \
  --scheduler PointSolution --scheduler-args '{"solution_path": "freqs_pipeline_00001.py"}' --mode frequency
[ "$scheme" = https ] || fail "not https: $(cat "$work/out.txt")"
s=$(code GET /v1/jobs --cacert cert.pem "${B[@]}"); [ "$s" = 200 ] || fail "https with the CA: $s"
s=$(code GET /v1/jobs --cacert cert.pem); [ "$s" = 401 ] || fail "https without the token: $s"
curl -s -o /dev/null "$u/healthz" && fail "https accepted without the CA (certificate not checked?)"
# requests parked at a window barrier over TLS: rank 0 waits until rank 1 asks
T=(--cacert cert.pem -u "ergon:$tok")
zj=$(curl -sf "${T[@]}" -X POST "$u/register_job" -d "$zjob"); zj=${zj//\"/}
for r in 0 1; do
  s=$(code POST "/register_rank/$zj" "${T[@]}" -d "{\"rank\":$r,\"dp_rank\":0,\"pp_rank\":$r,\"tp_rank\":0,\"available_frequencies\":[1410,1395]}")
  [ "$s" = 200 ] || fail "Zeus register_rank over https: $s $(cat "$work/body")"
done
curl -s "${T[@]}" "$u/schedule/$zj?rank=0" >s0 & c0=$!
sleep 0.3
curl -s "${T[@]}" "$u/schedule/$zj?rank=1" >s1 & c1=$!
wait $c0 $c1
grep -q '"rank":0,"frequencies":\[\["forward",1410\],\["backward",1395\]\]' s0 && grep -q '"rank":1' s1 \
  || fail "parked schedules over https: $(cat s0 s1)"
# ergon's C client (libcurl) through the Python binding: token and CA from the environment
pre=""
if [ -n "${ERGON_SANITIZED:-}" ]; then
  pre=$(gcc -print-file-name=libasan.so 2>/dev/null || true)
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi
if command -v python3 >/dev/null; then
  LD_PRELOAD="$pre" ERGON_LIBRARY="$ERGON_BIN_DIR/libergon.so" PYTHONPATH="$ERGON_SRC/python" \
  ERGON_SERVE_TOKEN="$tok" ERGON_SERVE_CA_FILE="$work/cert.pem" python3 - "$u" <<'PY' || fail "C client over https"
import sys
from ergon.server_client import ServerClient, ServerError
c = ServerClient(sys.argv[1], max_retries=0)
job = c.register_job(pp_degree=1, framework="f", model_name="tls", partition_method="u",
                     microbatch_size=1, num_microbatches=1, scheduler="AllMaxFrequency")
c.register_rank(job, rank=0, dp_rank=0, pp_rank=0, tp_rank=0,
                pipe_schedule=["forward", "backward"], power_states=[1410, 1395])
w, states = c.fetch_schedule(job, rank=0)
assert w == 0 and states == [1410, 1410], (w, states)
print("C client over https ok")
PY
  LD_PRELOAD="$pre" ERGON_LIBRARY="$ERGON_BIN_DIR/libergon.so" PYTHONPATH="$ERGON_SRC/python" \
  ERGON_SERVE_CA_FILE="$work/cert.pem" python3 - "$u" <<'PY' || fail "C client without the token"
import sys
from ergon.server_client import ServerClient, ServerError
c = ServerClient(sys.argv[1], max_retries=0)
try:
    c.register_job(pp_degree=1, framework="f", model_name="tls", partition_method="u",
                   microbatch_size=1, num_microbatches=1)
except ServerError as e:
    assert "EPERM" in str(e) and "401" in str(e), str(e)
else:
    raise SystemExit("registered without the token")
PY
else
  echo "# python3 absent: the C client's https path is not exercised here"
fi
stop
echo ok
