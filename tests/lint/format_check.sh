#!/usr/bin/env bash
# format_check.sh: every C source and header the repository tracks follows .clang-format
# (`make format` applies it). Skips with a message without clang-format; under CI=true it
# fails instead (the Makefile installs Debian's clang-format).
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
src=${ERGON_SRC:?}
cf=$(command -v clang-format || true)
if [ -z "$cf" ]; then
  skip_or_fail "clang-format not installed (make deps installs it)"
fi
cd "$src" || exit 1
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  skip_or_fail "not a git checkout (the tracked files are the ones checked)"
fi
mapfile -t files < <(git ls-files '*.c' '*.h')
[ ${#files[@]} -gt 50 ] || { echo "FAIL: only ${#files[@]} C files found"; exit 1; }
bad=()
for f in "${files[@]}"; do
  "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "FAIL: ${#bad[@]} of ${#files[@]} files do not follow .clang-format ($("$cf" --version | head -1)):"
  printf '  %s\n' "${bad[@]}"
  echo "run: make format"
  exit 1
fi
# The check can fail: a file with a stray blank before a semicolon is reported.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp .clang-format "$tmp/"; printf 'int f(void)\n{\n    return 0 ;\n}\n' > "$tmp/x.c"
(cd "$tmp" && "$cf" --dry-run --Werror x.c >/dev/null 2>&1) && { echo "FAIL: a misformatted file passed"; exit 1; }
echo "PASS: ${#files[@]} files follow .clang-format"
