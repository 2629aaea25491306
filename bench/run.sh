#!/usr/bin/env bash
# Run every benchmark binary of a build (bench/bench_*), short settings; results on stdout.
set -euo pipefail
build=${1:-build}
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b"
done
