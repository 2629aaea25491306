#!/usr/bin/env bash
# bench_wide_small.sh: the wide-job load generator (bench/bench_wide.c, docs/benchmarks.md "The
# largest jobs") at 256 ranks (pp 4 x dp 64) on the Perseus, Zeus PFO and /v1 protocols, so
# that it cannot rot: on each, every rank registers, waits at the barrier and gets its
# schedule (a 200 for that rank with a non-empty list of clocks, checked by the generator);
# Perseus and /v1 ranks also report a result, then pass the second barrier as a burst (every
# connection opened and held idle first, then every request written at once; once closed
# unanswered after the connection timeout by libmicrohttpd's epoll loop, unit/test_server_burst).
# Its timings are printed, never judged.
set -euo pipefail
: "${ERGON:?path of the ergon binary}" "${ERGON_BIN_DIR:?the build directory}"
fail() { echo "FAIL: $*"; exit 1; }
gen="$ERGON_BIN_DIR/bench/bench_wide"
if [ ! -x "$gen" ]; then
  [ "${CI:-}" = true ] && fail "$gen is not built (configure with -DERGON_BENCH=ON)"
  echo "# SKIP: $gen is not built (configure with -DERGON_BENCH=ON)"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
set +e
"$gen" --ergon "$ERGON" --pp 4 --dp 64 --timeout 120 --log "$work/server.log" >"$work/out" 2>&1
rc=$?
set -e
cat "$work/out"
[ $rc -eq 0 ] || fail "bench_wide exit $rc; server log: $(tail -5 "$work/server.log")"
for p in perseus zeus v1; do
  grep -q "^$p: 256 of 256 ranks got their schedule;" "$work/out" || fail "$p: not every rank got its schedule"
done
echo "PASS: 256 ranks on each protocol, every rank got its schedule"
