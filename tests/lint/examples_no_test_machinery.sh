#!/usr/bin/env bash
# examples_no_test_machinery.sh: examples/ holds what a user runs and nothing only the tests
# need (issue 39; the tests' pacer, fake kernels, deadlock and kill controls and the story's
# checks live in tests/e2e/harness/). tools/check_examples_clean.py passes on the tree and
# fails, naming file:line, on copies with a deliberate breakage: an example pacing the
# simulated GPU by hand (the pacer examples/pytorch_pipeline/train.py had before), an example
# importing from tests/, a file in examples/ that no user-facing text names (crosscheck.py
# was one), a function of an example that nothing but a test calls (torch_runtime.py's
# broadcast_losses was one), a multi-case runner only the tests launch (the DeepSpeed
# examples' --case runners, now tests/e2e/harness/deepspeed_cases.py and megatron_cases.py).
set -u
: "${ERGON_SRC:?}"
source "$(dirname "$0")/../lib/skip_lib.bash"
command -v python3 >/dev/null || skip_or_fail "python3 missing"
check="$ERGON_SRC/tools/check_examples_clean.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
out=$(python3 "$check" --src "$ERGON_SRC" 2>&1) || fail "examples/ carries test machinery:
$out"
echo "$out"
copy() { rm -rf "$tmp/t" && mkdir -p "$tmp/t" && cp -r "$ERGON_SRC/examples" "$ERGON_SRC/docs" \
  "$ERGON_SRC/README.md" "$ERGON_SRC/ARCHITECTURE.md" "$ERGON_SRC/Makefile" "$tmp/t/"; }
# expect_fail NAME PATTERN: the check on $tmp/t must exit 1 with a line matching PATTERN
expect_fail() {
  local got rc
  got=$(python3 "$check" --src "$tmp/t" 2>&1); rc=$?
  [ "$rc" = 1 ] || fail "$1 passed (exit $rc): $got"
  echo "$got" | grep -q -- "$2" || fail "$1: the report does not match '$2': $got"
  echo "ok: $1 refused: $(echo "$got" | grep -- "$2" | head -1)"
}
f=examples/pytorch_pipeline/train.py
copy
printf '\n\ndef pace(gpu, dev, kind):\n    return gpu.sim_set_activity(dev, True, kind)\n' >>"$tmp/t/$f"
expect_fail "an example pacing the simulated GPU" "^$f:[0-9]*: names 'sim_set_activity'"
copy
printf '\nsys.path.insert(0, os.path.join(ROOT, "tests", "e2e", "harness"))\n' >>"$tmp/t/$f"
expect_fail "an example reaching into tests/" "^$f:[0-9]*: the string 'tests' reaches into tests/"
copy
printf 'import os\nprint(os.getcwd())\n' >"$tmp/t/examples/pytorch_pipeline/compare_runs.py"
expect_fail "a file no user-facing text names" \
  "^examples/pytorch_pipeline/compare_runs.py:1: named by no user-facing text"
copy
printf '#!/bin/sh\nexec python3 ../../tests/e2e/harness/trainer.py "$@"\n' \
  >"$tmp/t/examples/pytorch_pipeline/run.sh"
echo 'run.sh' >>"$tmp/t/examples/pytorch_pipeline/README.md"
expect_fail "a script running the test harness" "^examples/pytorch_pipeline/run.sh:2: reaches into tests/"
copy
printf '\n\ndef broadcast_losses(losses, placement):\n    return losses\n' \
  >>"$tmp/t/examples/pytorch_pipeline/torch_runtime.py"
expect_fail "a helper only a test calls" \
  "^examples/pytorch_pipeline/torch_runtime.py:[0-9]*: broadcast_losses is used by no example"
copy
d=examples/deepspeed_pipeline/train.py
printf '\n\ndef run_cases(args, client, gpu, rank, out):\n    return main(args)\n' >>"$tmp/t/$d"
expect_fail "a multi-case runner only the tests launch" "^$d:[0-9]*: names 'run_cases'"
copy
m=examples/megatron_pipeline/train.py
printf '\n\ndef parse_cases(p):\n    p.add_argument("--case", action="append")\n' >>"$tmp/t/$m"
expect_fail "a --case option only the tests use" "^$m:[0-9]*: names '--case'"
echo "PASS"
