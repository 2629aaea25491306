#!/usr/bin/env bash
# example_readme.sh: examples/pytorch_pipeline/README.md's "Run it" commands run as written. The
# block marked "<!-- docs: run-by example_readme -->" runs with bash -e from a scratch copy of the
# repository root (symlinks to examples/, python/, the built libergon and the venv as
# build/venv; `make py-deps` is the venv the suite already has), on the simulated GPU: the
# 4-rank pipeline through launch.py, the same on zbv through torchrun, and the one-process
# reference. Each run prints its 4 steps' losses, and the pipeline's losses equal the
# reference's (the README: the pipeline computes the one-process math bitwise).
# Skip by design: the ASan build (need_venv, tests/lib/venv_lib.bash).
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv torch torch.distributed.pipelining
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
DOC="$ERGON_SRC/examples/pytorch_pipeline/README.md"
# The indented block after the marker (blank lines between allowed), its 4-space indent removed.
awk '/^<!-- docs: run-by example_readme -->$/ {m = 1; next}
  m == 1 && /^$/ {next} m == 1 && /^    / {m = 2} m == 2 && !/^    / {exit}
  m == 2 {print substr($0, 5)}' "$DOC" >"$tmp/cmds.sh"
[ "$(grep -c . "$tmp/cmds.sh")" -ge 4 ] || fail "command block not found: $(cat "$tmp/cmds.sh")"
mkdir -p "$tmp/run/build"
ln -s "$ERGON_SRC/examples" "$tmp/run/examples"
ln -s "$ERGON_SRC/python" "$tmp/run/python"
ln -s "$ERGON_BIN_DIR/libergon.so.0" "$tmp/run/build/libergon.so.0"
ln -s "$ERGON_PY_VENV" "$tmp/run/build/venv"
( cd "$tmp/run" && timeout -k 5 800 bash -e "$tmp/cmds.sh" ) >"$tmp/out.log" 2>&1 || {
  tail -30 "$tmp/out.log"; fail "the command block failed"; }
# step N loss X (the last rank of each pipeline run), then reference step N loss X
grep -E '^step [0-9]+ loss ' "$tmp/out.log" | awk '{print $4}' >"$tmp/pipe.txt"
grep -E '^reference step [0-9]+ loss ' "$tmp/out.log" | awk '{print $5}' >"$tmp/ref.txt"
[ "$(wc -l <"$tmp/pipe.txt")" -eq 8 ] || { cat "$tmp/out.log"; fail "expected 4 steps of each pipeline run"; }
[ "$(wc -l <"$tmp/ref.txt")" -eq 4 ] || { cat "$tmp/out.log"; fail "expected 4 reference steps"; }
head -4 "$tmp/pipe.txt" | cmp -s - "$tmp/ref.txt" || {
  paste "$tmp/pipe.txt" "$tmp/ref.txt"; fail "the 4-rank pipeline's losses differ from the reference's"; }
grep -E '^(reference )?step [0-9]+ loss ' "$tmp/out.log"
echo "PASS"
