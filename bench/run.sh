#!/usr/bin/env bash
# run.sh: run every benchmark of bench/ against a build directory (make bench).
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
for b in "$build"/bench/bench_*; do
  [ -x "$b" ] || continue
  name=$(basename "$b")
  echo "== $name"
  case "$name" in
    bench_client_overhead)
      fake="$build/tests/fake_nvml/libnvidia-ml.so.1"
      "$b"
      if [ -r "$fake" ]; then
        "$b" --nvml "$fake"
        "$b" --nvml "$fake" --iters 20000 --work-us 100
      fi ;;
    *) "$b" ;;
  esac
done
