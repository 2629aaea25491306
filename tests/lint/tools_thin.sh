#!/usr/bin/env bash
# tools_thin.sh: tools/check_tools_thin.py passes on the tree (no function of tools/ over 150
# lines; no file written by tools/ but the listed reports) and fails, naming file:line, on
# copies with a deliberate breakage: the CLI writing frontier-info.csv itself again (as
# baseline.c did before issue 39), a write call hidden in a helper, a function grown past 150
# lines.
set -u
: "${ERGON_SRC:?}"
source "$(dirname "$0")/../lib/skip_lib.bash"
command -v python3 >/dev/null || skip_or_fail "python3 missing"
check="$ERGON_SRC/tools/check_tools_thin.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
out=$(python3 "$check" --src "$ERGON_SRC" 2>&1) || fail "the tree breaks the rule:
$out"
echo "$out"
copy() { rm -rf "$tmp/t" && mkdir -p "$tmp/t" && cp -r "$ERGON_SRC/tools" "$tmp/t/"; }
# expect_fail NAME PATTERN: the check on $tmp/t must exit 1 with a line matching PATTERN
expect_fail() {
  local got rc
  got=$(python3 "$check" --src "$tmp/t" 2>&1); rc=$?
  [ "$rc" = 1 ] || fail "$1 passed (exit $rc): $got"
  echo "$got" | grep -q -- "$2" || fail "$1: the report does not match '$2': $got"
  echo "ok: $1 refused: $(echo "$got" | grep -- "$2" | head -1)"
}
f=tools/ergon/baseline.c
copy
cat >>"$tmp/t/$f" <<'C'
int cli_baseline_write(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/frontier-info.csv", dir);
    FILE *fp = fopen(path, "w");
    return fp ? fclose(fp) : 1;
}
C
expect_fail "the CLI writing frontier-info.csv" "^$f:[0-9]*: writes a file itself (FILE \*fp = fopen(path, \"w\")"
copy
printf 'static int put(const char *p)\n{\n    return rename(p, "x");\n}\n' >>"$tmp/t/$f"
expect_fail "a rename in a helper" "^$f:[0-9]*: writes a file itself (return rename"
copy
{ printf 'static int long_one(void)\n{\n    int x = 0;\n'
  for i in $(seq 1 151); do printf '    x += %d;\n' "$i"; done
  printf '    return x;\n}\n'; } >>"$tmp/t/$f"
expect_fail "a function of 155 lines" "^$f:[0-9]*: long_one is 155 lines (limit 150): split it"
