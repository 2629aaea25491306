#!/bin/bash
# shard_measure.sh: measured segment costs (CFP's profiling pass) with the real XLA.
# tools/shard_measure.py cuts each unique segment of the GPT training step (tools/
# shard_models.py) out of ergon's annotated module under its fastest modelled strategy
# combinations, partitions it with XLA's SPMD partitioner on 4 CPU devices, checks it against
# one device, times it and writes the cost file; `ergon shard search --profiles FILE
# --profiles-only` must then choose among the measured combinations only, follow the
# measured times, refuse a file that misses a unique segment; `profile --out-profiles`
# must read back; the plan JSON names every parameter's sharding as the module says.
# Skip by design: the ASan build (the venv's Python cannot load an instrumented libergon;
# venv_lib.bash).
set -u
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv jax
fail() { echo "FAIL: $*" >&2; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
M="$ERGON_SRC/tools/shard_measure.py"

out=$("$VPY" "$M" --ergon "$ERGON" --model gpt --mesh 1x4 --top 3 --reps 3 --fast \
      --keep "$T" --out "$T/costs.csv" --json "$T/rows.json" 2>&1); rc=$?
echo "$out" | tail -4
[ $rc = 0 ] || fail "shard_measure.py failed (exit $rc): $out"
H="$T/gpt.hlo"
"$ERGON" shard search --hlo "$H" --mesh 1x4 --out-json "$T/plan.json" --out-hlo "$T/plan.hlo" \
  > /dev/null || fail "modelled search"
# The cost file: every unique segment, ergon's choice among >= 3 candidates, real times.
"$VPY" - "$T/costs.csv" "$T/plan.json" "$T/rows.json" <<'PY' || fail "cost file or rows"
import csv, json, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
plan = json.load(open(sys.argv[2]))
res = json.load(open(sys.argv[3]))[0]
k = [b["strategy"] for b in plan["blocks"]]
for u, g in enumerate(plan["segments"]):
    if g["unique"] != u:
        continue
    mine = [r for r in rows if int(r["segment"]) == u]
    assert len(mine) >= 3, (u, mine)
    combo = "-".join(map(str, k[g["first_block"]:g["first_block"] + g["num_blocks"]]))
    assert combo in [r["strategies"] for r in mine], (u, combo, "ergon's choice not measured")
    for r in mine:
        assert len(r["strategies"].split("-")) == g["num_blocks"], r
        assert 1e-6 < float(r["time_s"]) < 10 and float(r["memory_bytes"]) > 0, r
for r in res["rows"]:
    assert math.isfinite(r["rho"]) and -1 <= r["rho"] <= 1, r
print("cost file:", len(rows), "rows;", [(r["segment"], round(r["rho"], 2)) for r in res["rows"]])
PY
# Measured costs drive the search: make one combination that is not ergon's choice the
# cheapest of its segment; --profiles-only must choose it, and only listed combinations.
"$VPY" - "$T/costs.csv" "$T/plan.json" "$T/cheap.csv" "$T/want" <<'PY' || fail "rewrite"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
plan = json.load(open(sys.argv[2]))
k = [b["strategy"] for b in plan["blocks"]]
g = plan["segments"][0]
combo = "-".join(map(str, k[g["first_block"]:g["first_block"] + g["num_blocks"]]))
other = next(r for r in rows if r["segment"] == "0" and r["strategies"] != combo)
other["time_s"] = "1e-9"
with open(sys.argv[3], "w") as f:
    w = csv.DictWriter(f, ["segment", "strategies", "time_s", "memory_bytes"])
    w.writeheader(); w.writerows(rows)
open(sys.argv[4], "w").write(other["strategies"].replace("-", ","))
# only that combination listed for segment 0, and slow: still the only candidate
other["time_s"] = "1.0"
with open(sys.argv[3] + ".only", "w") as f:
    w = csv.DictWriter(f, ["segment", "strategies", "time_s", "memory_bytes"])
    w.writeheader(); w.writerows([other] + [r for r in rows if r["segment"] != "0"])
PY
want=$(cat "$T/want")
out=$("$ERGON" shard search --hlo "$H" --mesh 1x4 --profiles "$T/cheap.csv" --profiles-only) \
  || fail "search with measured costs"
echo "$out" | grep -q "^solution vector: \[$want\]" || fail "measured costs not followed ($want): $out"
echo "$out" | grep -q "imported profiles" || fail "cost source not named: $out"
out=$("$ERGON" shard search --hlo "$H" --mesh 1x4 --profiles "$T/cheap.csv.only" --profiles-only) \
  || fail "search with one listed combination"
echo "$out" | grep -q "^solution vector: \[$want\]" || fail "an unlisted combination was chosen: $out"
# A file that misses a unique segment is refused, naming it.
grep -v '^2,' "$T/costs.csv" > "$T/missing.csv"
out=$("$ERGON" shard search --hlo "$H" --mesh 1x4 --profiles "$T/missing.csv" --profiles-only 2>&1)
[ $? = 1 ] || fail "a cost file without segment 2 was accepted: $out"
echo "$out" | grep -q "missing.csv: unique segment 2 has no row" || fail "message: $out"
out=$("$ERGON" shard search --hlo "$H" --mesh 1x4 --profiles-only 2>&1)
[ $? = 2 ] || fail "--profiles-only without --profiles: $out"
# What profile writes, search reads back: the modelled rows give the modelled plan.
"$ERGON" shard profile --hlo "$H" --mesh 1x4 --keep 4 --out-profiles "$T/mod.csv" > /dev/null \
  || fail "profile --out-profiles"
a=$("$ERGON" shard search --hlo "$H" --mesh 1x4 | grep '^solution vector')
b=$("$ERGON" shard search --hlo "$H" --mesh 1x4 --profiles "$T/mod.csv" --profiles-only \
    | grep '^solution vector')
[ -n "$a" ] && [ "$a" = "$b" ] || fail "modelled rows read back: '$a' vs '$b'"
# The plan JSON's parameter shardings are the module's, by number and name.
"$VPY" - "$T/plan.json" "$T/plan.hlo" <<'PY' || fail "plan JSON parameters"
import json, re, sys
plan = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read()
entry = text[text.index("\nENTRY"):]
written = {int(n): (name, s) for name, n, s in re.findall(
    r"\n\s*([\w.\-]+) = [^\n]*?parameter\((\d+)\)[^\n]*?sharding=(\{[^{}]*\})", entry)}
ps = plan["parameters"]
assert [p["number"] for p in ps] == sorted(written), "numbers"
for p in ps:
    assert written[p["number"]] == (p["name"], p["sharding"]), (p, written[p["number"]])
assert any("devices" in p["sharding"] and p["block"] >= 0 for p in ps), "no split weight"
assert all(len(b["member_names"]) == b["members"] for b in plan["blocks"])
PY
echo "ok: measured segment costs written, read back and followed by the search"
