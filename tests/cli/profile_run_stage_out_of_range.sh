#!/usr/bin/env bash
# profile_run_stage_out_of_range.sh: `ergon profile run --stage S` past the spec's
# stages is a usage error naming the valid range. It used to close the GPU and
# then read its stage count (use-after-free: ASan abort, or "the spec has
# -556564953 stage(s)" in release) -- issue 15 item 1.
set -u
: "${ERGON:?ERGON must name the ergon binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
for s in 4 63; do
  "$ERGON" profile run --gpu sim:a100:bert-large:4 --stage $s -o "$tmp/p.csv" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 2 ] || fail "--stage $s: exit $rc, expected 2: $(cat "$tmp/err")"
  grep -q "stage $s out of range 0\.\.3" "$tmp/err" || fail "--stage $s: message: $(cat "$tmp/err")"
  grep -q "AddressSanitizer" "$tmp/err" && fail "--stage $s: ASan report: $(cat "$tmp/err")"
  [ -e "$tmp/p.csv" ] && fail "--stage $s wrote a profile"
done
"$ERGON" profile run --gpu sim:a100:bert-large:1 --stage 1 -o "$tmp/p.csv" 2>"$tmp/err"
grep -q "stage 1 out of range 0\.\.0" "$tmp/err" || fail "1-stage spec: $(cat "$tmp/err")"
echo ok
