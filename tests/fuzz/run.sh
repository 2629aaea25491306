#!/usr/bin/env bash
# Run every libFuzzer target for a few seconds, starting from its seed corpus.
set -euo pipefail
build=${1:-build-fuzz}
secs=${2:-15}
here=$(cd "$(dirname "$0")" && pwd)
# Every sanitizer finding fails the run: UBSan only reports and goes on unless
# halt_on_error=1. Ours come last so that they win over a caller's options (the
# fuzz build also compiles with -fno-sanitize-recover=undefined).
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"
fail=0
for bin in "$build"/tests/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin"); corpus=${name#fuzz_}
  work=$(mktemp -d)
  [ -d "$here/corpus/$corpus" ] && cp -r "$here/corpus/$corpus/." "$work/" 2>/dev/null || true
  echo "fuzzing $name for ${secs}s"
  if ! "$bin" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 "$work" >"$work.log" 2>&1; then
    echo "FAILED: $name"; tail -40 "$work.log"; fail=1
  else
    grep -E '^#[0-9]+.*DONE' "$work.log" | tail -1 || true
  fi
  rm -rf "$work" "$work.log"
done
exit $fail
