#!/usr/bin/env bash
# torchtitan_doc.sh: docs/integrations.md's torchtitan command block runs as written (in a
# scratch directory that sees the repository's examples/ and python/ and the venv as
# build/venv; `make py-deps` is the venv the suite already has): torchrun from the venv,
# ergon's entry point around torchtitan's train.main(), 4 CPU ranks, the CSV of `ergon schedule
# ours` and a plan. Checks: every rank ran 2 steps in the CSV's order (the hooks' record,
# --ergon.out) and the plan's clocks (clock changes on every rank); rank 3 has the losses.
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv torch torchtitan.trainer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
DOC="$ERGON_SRC/docs/integrations.md"
awk '/^<!-- docs: run-by torchtitan_doc -->$/ {t = 1; n = 0; next}
  t && /^```/ {n++; if (n == 2) exit; next} t && n == 1' "$DOC" >"$tmp/cmds.sh"
grep -q 'ergon.integration.torchtitan' "$tmp/cmds.sh" || fail "command block not found"
mkdir -p "$tmp/run/build" "$tmp/bin"
ln -s "$ERGON_SRC/examples" "$tmp/run/examples"
ln -s "$ERGON_SRC/python" "$tmp/run/python"
ln -s "$ERGON_PY_VENV" "$tmp/run/build/venv"
ln -s "$ERGON" "$tmp/bin/ergon"
printf '#!/bin/sh\n[ "$1" = py-deps ] || exit 1\necho "make py-deps: (the suite'"'"'s venv)"\n' \
  >"$tmp/bin/make"
chmod +x "$tmp/bin/make"
export PATH="$tmp/bin:$PATH" OMP_NUM_THREADS=1 HF_HOME="$tmp/hf" HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1
( cd "$tmp/run" && timeout -k 5 400 bash -e "$tmp/cmds.sh" ) >"$tmp/out.log" 2>&1 || {
  grep -v '^\[titan\]' "$tmp/out.log" | tail -30; fail "the command block failed"; }
"$VPY" - "$tmp/run" <<'PY' || fail "the run did not do what the doc says"
import json, sys
from ergon.integration.torchtitan import csv_order
d = sys.argv[1]
for r in range(4):
    x = json.load(open("%s/ergon-out/ergon-rank-%d.json" % (d, r)))
    want = ["%d%s%d" % (s, k, m) for k, s, m in csv_order(d + "/ours.csv", r)]
    assert x["csv"] and len(x["steps"]) == 2, (r, x["csv"], len(x["steps"]))
    assert all(st["order"] == want for st in x["steps"]), (r, x["steps"][0]["order"], want)
    assert x["clock_changes"] >= 1, (r, x["clock_changes"])
    assert (r == 3) == all(len(st.get("losses", [])) == 8 for st in x["steps"]), r
    print("rank %d: 2 steps in the order of ours.csv (%d instructions), %d clock changes"
          % (r, len(want), x["clock_changes"]))
PY
echo "PASS"
