#!/usr/bin/env bash
# no_external_citations.sh: no comment, header, doc or test cites a document the repository does
# not contain: the design notes outside the repo (shared/design, *-spec.md, "spec §N",
# shared/seeds) are background, and what matters of them is said in our own words in docs/
# and ARCHITECTURE.md (issue 25). The published data the tests read is in the repository
# (tests/data/published). A citation added to a copy of a source file must be caught, naming
# file:line.
set -u
: "${ERGON_SRC:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# What counts as citing an outside document.
pattern='shared/design|shared/seeds|\b(lowtime|envpipe|cfp|control-plane)-spec\b|[A-Za-z-]+-spec\.md|\b[Ss]pec §|\b[Ss]pec section [0-9]'
# check ROOT: print every citation as file:line: text; exit 1 when there is one.
check() {
  (cd "$1" && grep -rnIE "$pattern" src include python tools tests docs examples bench data packaging \
       README.md ARCHITECTURE.md 2>/dev/null |
     # this test, and the --help check that greps for these very words
     grep -v '^tests/lint/no_external_citations\.sh:' |
     grep -v '^tests/cli/messages_name_file_and_value\.sh:') && return 1
  return 0
}
if ! out=$(check "$ERGON_SRC"); then
  echo "FAIL: citations of documents the repository does not contain (say it in docs/ instead):"
  echo "$out"
  exit 1
fi
# The check must catch one added on purpose.
mkdir -p "$tmp/t"
cp -r "$ERGON_SRC/src" "$ERGON_SRC/include" "$ERGON_SRC/README.md" "$tmp/t/"
echo '/* the crashing step (lowtime-spec §4.5) */' >>"$tmp/t/src/planner/perseus.c"
line=$(wc -l <"$tmp/t/src/planner/perseus.c")
out=$(check "$tmp/t") && { echo "FAIL: a citation added to perseus.c was not caught"; exit 1; }
echo "$out" | grep -q "^src/planner/perseus.c:$line:" ||
  { echo "FAIL: the report does not name src/planner/perseus.c:$line: $out"; exit 1; }
echo "ok: a planted citation is caught: $out"
echo "ok: no citation of a document outside the repository"
