#!/usr/bin/env bash
# show_frontier_bad_csv_no_leak.sh: `ergon show frontier` on a frontier.csv with a
# bad row after good ones exits 1 naming file and line, and frees the rows it had
# read (they leaked: LeakSanitizer failed the ASan build -- issue 15, fuzz stage).
# The leak itself shows only under ASan (ERGON_SANITIZED, ctest in build-asan).
set -u
: "${ERGON:?ERGON must name the ergon binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$tmp/f"
{ echo "time,energy"; for i in $(seq 1 100); do echo "$i.5,$((1000 - i)).25"; done
  echo "101.5,oops"; } >"$tmp/f/frontier.csv"
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=1" \
  "$ERGON" show frontier --frontier "$tmp/f" -o "$tmp/x.svg" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || fail "exit $rc, expected 1: $(cat "$tmp/err")"
grep -q "frontier.csv:102: expected 2 fields with numeric time and energy" "$tmp/err" \
  || fail "message: $(cat "$tmp/err")"
grep -q "LeakSanitizer" "$tmp/err" && fail "leak: $(head -20 "$tmp/err")"
# the second of two series is bad: the first one's points are freed too
mkdir "$tmp/g"
head -50 "$tmp/f/frontier.csv" >"$tmp/g/frontier.csv"
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=1" \
  "$ERGON" show frontier --frontier "$tmp/g" --frontier "b=$tmp/f/frontier.csv" \
  -o "$tmp/x.svg" 2>"$tmp/err"
[ $? -eq 1 ] || fail "two series: exit: $(cat "$tmp/err")"
grep -q "LeakSanitizer" "$tmp/err" && fail "leak with two series: $(head -20 "$tmp/err")"
[ -e "$tmp/x.svg" ] && fail "a picture was written from a bad frontier"
echo ok
