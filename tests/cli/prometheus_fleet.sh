#!/usr/bin/env bash
# The fleet seen from outside (docs/fleet.md, "Seen from outside"): `ergon serve` with a fleet of
# two jobs under a cap, scraped by a real Prometheus (Debian's prometheus package, started here
# on a free port with a 1 s scrape interval), and every query of every panel of the Grafana
# dashboard in the repository (packaging/grafana/ergon-fleet.json) returns data from it. Before
# Prometheus, every metric a query names must be on /metrics. Without the prometheus program the
# test says so and skips (exit 77), and fails under CI=true (make test installs it: Makefile).
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}" "${ERGON_SRC:?}"
dash=$ERGON_SRC/packaging/grafana/ergon-fleet.json
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ERGON" profile sim --gpu a100 --stages 4 -o "$tmp/profile.csv" >/dev/null 2>&1 || fail "profile sim"
mkdir -p "$tmp/plans"
"$ERGON" plan perseus --profile "$tmp/profile.csv" --gpu A100 --stages 4 --microbatches 8 --quiet \
  --out "$tmp/plans/fr" >/dev/null || fail "plan perseus"
"$ERGON" serve --port 0 --db "$tmp/s.db" --dump "$tmp/dump" --plans-dir "$tmp/plans" --scheduler Frontier \
  --scheduler-args "{\"frontier_dir\": \"$tmp/plans/fr\"}" >"$tmp/sout" 2>"$tmp/slog" & pids+=($!)
for _ in $(seq 600); do grep -q listening "$tmp/sout" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$tmp/sout")
[ -n "$port" ] || fail "the server did not start: $(cat "$tmp/slog")"
python3 - "http://127.0.0.1:$port" "$tmp" "$dash" <<'PYEOF' || fail "the fleet or the dashboard's metrics"
import csv, json, re, sys, urllib.request
url, tmp, dash = sys.argv[1:4]
def req(method, path, body=None):
    r = urllib.request.Request(url + path, method=method,
                               data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(r) as f:
        return json.loads(f.read())
clocks = sorted({int(float(x["frequency"])) for x in csv.DictReader(open(f"{tmp}/profile.csv"))}, reverse=True)
for dp in (1, 2):
    S, M = 4, 8
    j = req("POST", "/v1/jobs", {"pp_degree": S, "dp_degree": dp, "tp_degree": 1, "world_size": S * dp,
            "framework": "f", "model_name": "m", "partition_method": "p", "microbatch_size": 1,
            "num_microbatches": M})
    for d in range(dp):
        for r in range(S):
            w = min(S - r - 1, M)
            order = ["forward"] * w + ["forward", "backward"] * (M - w) + ["backward"] * w
            req("POST", f"/v1/jobs/{j['job_id']}/ranks", {"rank": d * S + r, "dp_rank": d, "pp_rank": r,
                "tp_rank": 0, "pipe_schedule": order, "power_state_range": clocks})
fl = req("GET", "/v1/fleet")
lo = sum(x["min_power_w"] for x in fl["jobs"]); hi = sum(x["max_power_w"] for x in fl["jobs"])
fl = req("POST", "/v1/fleet", {"cap_w": lo + 0.5 * (hi - lo)})
assert fl["members"] == 2 and fl["power_w"] <= fl["cap_w"], fl
metrics = urllib.request.urlopen(url + "/metrics").read().decode()
names = set(re.findall(r"^([a-z_]+)", metrics, re.M))
exprs = [t["expr"] for p in json.load(open(dash))["panels"] for t in p["targets"]]
missing = []
for e in exprs:
    for n in re.findall(r"\b(ergon_[a-z_]+)\b", e):
        if n not in names:
            missing.append(n)
if missing:
    print("FAIL: the dashboard names metrics /metrics does not have:", sorted(set(missing))); sys.exit(1)
json.dump(exprs, open(f"{tmp}/exprs.json", "w"))
print(f"ok: {len(exprs)} dashboard queries name only metrics of /metrics")
PYEOF
command -v prometheus >/dev/null ||
  skip_or_fail "prometheus is not installed (Debian package prometheus; make test installs it)"
pport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$tmp/prometheus.yml" <<EOF2
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ergon
    static_configs:
      - targets: ["127.0.0.1:$port"]
EOF2
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$pport" >"$tmp/prom.log" 2>&1 & pids+=($!)
python3 - "http://127.0.0.1:$pport" "$tmp/exprs.json" <<'PYEOF' || fail "Prometheus: $(tail -5 "$tmp/prom.log")"
import json, sys, time, urllib.parse, urllib.request
prom, exprs = sys.argv[1], json.load(open(sys.argv[2]))
def query(e):
    u = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": e})
    with urllib.request.urlopen(u, timeout=5) as f:
        return json.loads(f.read())["data"]["result"]
empty = list(exprs)
deadline = time.monotonic() + 90
while empty and time.monotonic() < deadline:
    time.sleep(1)
    left = []
    for e in empty:
        try:
            if not query(e):
                left.append(e)
        except OSError:
            left.append(e)
    empty = left
if empty:
    print("FAIL: no data from Prometheus for:", empty); sys.exit(1)
print(f"ok: every one of the {len(exprs)} dashboard queries returns data from Prometheus")
PYEOF
