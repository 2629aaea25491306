#!/usr/bin/env bash
# write_to_a_pipe.sh: a file the library writes whole (temp file + rename) may be a pipe or a
# device (-o /dev/stdout): it is written where it is, never replaced by a regular file. Before
# core/durable.c checked, `ergon schedule -o /dev/stdout` run as root renamed its temp file over
# /dev/stdout (the symlink became a regular file holding the schedule, nothing reached the
# pipe). Checked on a FIFO of our own, never on /dev/stdout itself.
set -u
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'kill $reader 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkfifo "$tmp/fifo" || fail "mkfifo"
timeout 20 cat "$tmp/fifo" >"$tmp/got" &
reader=$!
"$ERGON" schedule 1f1b --ranks 2 --microbatches 2 -o "$tmp/fifo" 2>"$tmp/err" || fail "schedule -o FIFO: $(cat "$tmp/err")"
[ -p "$tmp/fifo" ] || fail "the FIFO was replaced by a regular file: $(ls -l "$tmp")"
wait $reader
grep -q '^rank 1: 1F0 1B0 1F1 1B1$' "$tmp/got" || fail "nothing reached the pipe: '$(cat "$tmp/got")'"
ls "$tmp" | grep -q tmp && fail "a temporary file was left: $(ls "$tmp")"
echo "ok - schedule -o FIFO wrote through the pipe"
