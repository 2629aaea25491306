#!/usr/bin/env bash
# jax_integration_doc.sh: docs/integrations.md's JAX section is what runs. (1) its script block
# is examples/jax_sharding/minimal_jax.py, byte for byte, with the 3 lines ending in "# ergon"
# that the page counts; (2) its command block runs as written (in a scratch directory that
# sees the repository's examples/ and python/ and the venv as build/venv; `make py-deps` is
# the venv the suite already has): ergon.jax plans the step on 8 CPU devices, w1 is split,
# five steps run, the loss falls.
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv jax
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
DOC="$ERGON_SRC/docs/integrations.md"
EX="$ERGON_SRC/examples/jax_sharding/minimal_jax.py"
# block N: the N-th fenced block marked "<!-- docs: run-by jax_integration_doc -->"
block() {
  awk -v want="$1" '/^<!-- docs: run-by jax_integration_doc -->$/ {k++; t = (k == want); n = 0; next}
    t && /^```/ {n++; if (n == 2) exit; next} t && n == 1' "$DOC"
}
block 1 >"$tmp/doc.py"
cmp -s "$tmp/doc.py" "$EX" || { diff "$tmp/doc.py" "$EX" | head -20
  fail "docs/integrations.md's script differs from examples/jax_sharding/minimal_jax.py"; }
n=$(grep -c '  # ergon$' "$EX")
[ "$n" = 3 ] || fail "the page counts 3 lines ending in '# ergon', the script has $n"
grep -q '^What each integration costs.*' "$DOC" && grep -q 'JAX 3 (`import ergon.jax`' "$DOC" ||
  fail "the page no longer says JAX costs 3 lines"
block 2 >"$tmp/cmds.sh"
[ "$(grep -c . "$tmp/cmds.sh")" -ge 2 ] || fail "command block not found: $(cat "$tmp/cmds.sh")"
mkdir -p "$tmp/run/build" "$tmp/bin"
ln -s "$ERGON_SRC/examples" "$tmp/run/examples"
ln -s "$ERGON_SRC/python" "$tmp/run/python"
ln -s "$ERGON_PY_VENV" "$tmp/run/build/venv"
# `make py-deps` is what gave ERGON_PY_VENV; the suite does not reinstall it.
printf '#!/bin/sh\n[ "$1" = py-deps ] || exit 1\necho "make py-deps: (the suite'"'"'s venv)"\n' \
  >"$tmp/bin/make"
chmod +x "$tmp/bin/make"
export PATH="$tmp/bin:$PATH" JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=2
unset XLA_FLAGS
( cd "$tmp/run" && timeout -k 5 300 bash -e "$tmp/cmds.sh" ) >"$tmp/out.log" 2>&1 || {
  tail -30 "$tmp/out.log"; fail "the command block failed"; }
cat "$tmp/out.log"
grep -q "^ergon.jax plan on mesh {'data': 2, 'model': 4}: modelled step" "$tmp/out.log" ||
  fail "no plan printed"
grep -q "^  input   \[0\]\['w1'\] .*-> P(.*'model'" "$tmp/out.log" || fail "w1 is not split"
"$VPY" - "$tmp/out.log" <<'PY' || fail "five steps with a falling loss, w1 split"
import re, sys
steps = re.findall(r"^step (\d): loss ([0-9.]+), w1 split as (P\(.*\))$", open(sys.argv[1]).read(), re.M)
print(steps)
losses = [float(l) for _, l, _ in steps]
sys.exit(0 if len(steps) == 5 and losses[-1] < losses[0] and all("model" in s for *_, s in steps) else 1)
PY
echo "PASS"
