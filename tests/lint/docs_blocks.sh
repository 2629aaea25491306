#!/usr/bin/env bash
# docs_blocks.sh: every code block of README.md and docs/*.md runs in CI or says why not
# (tools/docs_blocks.py: a <!-- docs: ... --> marker before each block). The run blocks are run
# with the built ergon; an unmarked block, a marker naming a missing test, and a failing run
# block each fail it (checked on a copy of the docs).
# Skip by design: the ASan build (the same lines run in the Release build's test).
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
if [ -n "${ERGON_SANITIZED:-}" ]; then
  skip_by_design "the documented commands run in the release build's test (they are the same lines)"
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
py=/usr/bin/python3
"$py" "$ERGON_SRC/tools/docs_blocks.py" --run "$ERGON_BIN_DIR" >"$tmp/out" 2>&1 || fail "$(cat "$tmp/out")"
cat "$tmp/out" | grep -v "^ok "
# the check can fail: a copy of the docs with an unmarked block, a bad marker, a failing block
mk() { rm -rf "$tmp/src"; mkdir -p "$tmp/src/tests" "$tmp/src/tools"
  cp -r "$ERGON_SRC/README.md" "$ERGON_SRC/docs" "$tmp/src/"
  for d in cli e2e lint; do mkdir -p "$tmp/src/tests/$d"; cp "$ERGON_SRC/tests/$d"/*.sh "$tmp/src/tests/$d/"; done; }
mk; printf '\nA new example:\n\n```\nergon plan perseus --profile P\n```\n' >>"$tmp/src/docs/planner.md"
"$py" "$ERGON_SRC/tools/docs_blocks.py" --check --src "$tmp/src" >"$tmp/o" 2>&1; [ $? -eq 1 ] || fail "an unmarked block passed"
grep -q "docs/planner.md:[0-9]*: code block without a marker" "$tmp/o" || fail "unmarked: $(cat "$tmp/o")"
mk; printf '\n<!-- docs: run-by no_such_test -->\n```\nergon version\n```\n' >>"$tmp/src/docs/planner.md"
"$py" "$ERGON_SRC/tools/docs_blocks.py" --check --src "$tmp/src" >"$tmp/o" 2>&1; [ $? -eq 1 ] || fail "a missing run-by test passed"
grep -q "no_such_test.sh exists" "$tmp/o" || fail "run-by: $(cat "$tmp/o")"
mk; printf '\n<!-- docs: not-run maybe: later -->\n```\nergon version\n```\n' >>"$tmp/src/docs/planner.md"
"$py" "$ERGON_SRC/tools/docs_blocks.py" --check --src "$tmp/src" >"$tmp/o" 2>&1; [ $? -eq 1 ] || fail "an unknown not-run kind passed"
mk; sed -i 's/<!-- docs: run -->/<!-- docs: not-run output: skipped here -->/' "$tmp/src/README.md" "$tmp/src"/docs/*.md
printf '\n<!-- docs: run -->\n```\nergon plan perseus --no-such-option\n```\n' >>"$tmp/src/docs/planner.md"
"$py" "$ERGON_SRC/tools/docs_blocks.py" --run "$ERGON_BIN_DIR" --src "$tmp/src" >"$tmp/o" 2>&1; [ $? -eq 1 ] || fail "a failing run block passed"
grep -q "^FAIL docs/planner.md:" "$tmp/o" || fail "failing block: $(tail -5 "$tmp/o")"
echo "ok: documented commands run or are marked"
