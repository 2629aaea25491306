#!/usr/bin/env bash
# torch_integration_doc.sh: docs/integrations.md's PyTorch-pipelining section is what runs.
# (1) its script block is examples/pytorch_pipeline/minimal_torch.py, byte for byte; (2) its
# command block runs as written (in a scratch directory that sees the repository's examples/
# and python/ and the venv as build/venv; `make py-deps` is the venv the suite already has),
# with torchrun from the venv on 4 ranks and the simulated GPU: every rank prints every step
# with ergon's time and energy, and every instruction of every rank ran at the plan's clock
# (the client logs' freq_run, checked one by one by tests/e2e/check_clocks.py).
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv torch torch.distributed.pipelining
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
DOC="$ERGON_SRC/docs/integrations.md"
# block N: the N-th fenced block marked "<!-- docs: run-by torch_integration_doc -->"
block() {
  awk -v want="$1" '/^<!-- docs: run-by torch_integration_doc -->$/ {k++; t = (k == want); n = 0; next}
    t && /^```/ {n++; if (n == 2) exit; next} t && n == 1' "$DOC"
}
block 1 >"$tmp/doc.py"
cmp -s "$tmp/doc.py" "$ERGON_SRC/examples/pytorch_pipeline/minimal_torch.py" || {
  diff "$tmp/doc.py" "$ERGON_SRC/examples/pytorch_pipeline/minimal_torch.py" | head -20
  fail "docs/integrations.md's script differs from examples/pytorch_pipeline/minimal_torch.py"; }
block 2 >"$tmp/cmds.sh"
[ "$(grep -c . "$tmp/cmds.sh")" -ge 5 ] || fail "command block not found: $(cat "$tmp/cmds.sh")"
mkdir -p "$tmp/run/build" "$tmp/bin"
ln -s "$ERGON_SRC/examples" "$tmp/run/examples"
ln -s "$ERGON_SRC/python" "$tmp/run/python"
ln -s "$ERGON_PY_VENV" "$tmp/run/build/venv"
ln -s "$ERGON" "$tmp/bin/ergon"
# `make py-deps` is what gave ERGON_PY_VENV; the suite does not reinstall it.
printf '#!/bin/sh\n[ "$1" = py-deps ] || exit 1\necho "make py-deps: (the suite'"'"'s venv)"\n' \
  >"$tmp/bin/make"
chmod +x "$tmp/bin/make"
export PATH="$tmp/bin:$PATH" OMP_NUM_THREADS=1
( cd "$tmp/run" && timeout -k 5 300 bash -e "$tmp/cmds.sh" ) >"$tmp/out.log" 2>&1 || {
  tail -30 "$tmp/out.log"; fail "the command block failed"; }
grep -q "rank 0 step 3: .* J (ergon), loss" "$tmp/out.log" || {
  tail -20 "$tmp/out.log"; fail "no ergon-measured step with a loss in the output"; }
[ "$(grep -c '^rank [0-3] step [0-3]: .* J (ergon)' "$tmp/out.log")" -eq 16 ] ||
  fail "expected 16 rank-step lines: $(grep '^rank' "$tmp/out.log")"
# What ran: the clock of each instruction of each rank (4 steps at the plan's clocks), not a
# count of clock changes (how many the clock thread applied depends on how often it ran).
"$VPY" "$ERGON_SRC/tests/e2e/check_clocks.py" "$tmp/run/logs" --ranks 4 \
  --segment "4:$tmp/run/plan.json" || fail "an instruction did not run at the plan's clock"
grep '^rank 0' "$tmp/out.log"
echo "PASS"
