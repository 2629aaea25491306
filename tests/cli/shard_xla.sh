#!/bin/bash
# shard_xla.sh: ergon's sharding plans run by the real XLA (jax/jaxlib from requirements.txt).
# GPT-2, LLaMA-2, GShard MoE and BERT training steps (tools/shard_models.py, small sizes)
# are lowered by JAX to HLO text; `ergon shard search --out-hlo` annotates each for meshes
# 1x4, 2x2, 1x8 and 2x4; XLA's SPMD partitioner compiles that text for 4 or 8 CPU devices;
# the loss and every updated parameter and Adam moment must equal the single-device step
# (fp32 tolerance), XLA must take each parameter in the sharding ergon wrote, and an
# annotation XLA rejects must fail the run (checked by breaking one on purpose). GPT and MoE
# on 2x4 also go through Shardy.
# Skip by design: the ASan build (the venv's Python cannot load an instrumented libergon;
# venv_lib.bash).
set -u
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv jax
fail() { echo "FAIL: $*" >&2; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
X="$ERGON_SRC/tools/shard_xla.py"

out=$("$VPY" "$X" --ergon "$ERGON" --fast --json "$T/rows.json" 2>&1); rc=$?
echo "$out"
[ $rc = 0 ] || fail "XLA did not run every plan (exit $rc)"
[ "$(echo "$out" | grep -c '^ok ')" = 16 ] || fail "expected 16 model x mesh runs"
# Every plan shards something, and XLA's module holds the collectives that follow from it.
"$VPY" - "$T/rows.json" <<'PY' || fail "plans or collectives"
import json, sys
rows = json.load(open(sys.argv[1]))
for r in rows:
    p, x = r["plan"], r["xla"]
    assert p["communication"]["bytes_per_device"] > 0, (r["model"], r["mesh"], "no comm charged")
    assert sum(v["ops"] for v in x.values()) > 0, (r["model"], r["mesh"], "XLA has no collective")
    assert r["max_abs"] < 1e-4, (r["model"], r["mesh"], r["max_abs"])
PY
# The same annotations through Shardy, JAX's default partitioner (XLA imports them).
out=$("$VPY" "$X" --ergon "$ERGON" --fast --shardy --models gpt,moe --meshes 2x4 2>&1); rc=$?
[ $rc = 0 ] || fail "Shardy did not run ergon's plans (exit $rc): $out"
[ "$(echo "$out" | grep -c '^ok ')" = 2 ] || fail "expected 2 Shardy runs: $out"
# A rejected annotation is a failure, never a skip.
out=$("$VPY" "$X" --ergon "$ERGON" --fast --models gpt --meshes 1x4 --corrupt 2>&1); rc=$?
[ $rc = 1 ] || fail "a broken annotation did not fail the run (exit $rc): $out"
echo "$out" | grep -q "FAIL gpt 1x4: XLA compile: .*device 9[0-9] >= num_devices (4)" \
  || fail "rejection message: $out"
echo "ok: 16 plans compiled and matched; a rejected annotation fails"
