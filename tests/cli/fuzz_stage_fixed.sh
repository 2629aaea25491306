#!/usr/bin/env bash
# fuzz_stage_fixed.sh: the fuzz stage of `make test` (tests/fuzz/run.sh --fixed) gives the
# same answer on the same code: it replays every committed corpus file, then runs a fixed-seed,
# fixed-count exploration with no time limit and no periodic corpus reload (both make what is
# explored depend on timing), while `make fuzz` (run.sh BUILD SECONDS) explores for a time.
# A stand-in "fuzz target" records the arguments it gets; run twice, the stage's output must
# be identical.
set -u
: "${ERGON_SRC:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$tmp/build/tests/fuzz"
# Named like the HLO target so that run.sh finds its committed corpus (tests/fuzz/corpus/hlo).
probe="$tmp/build/tests/fuzz/fuzz_hlo"
cat >"$probe" <<'P'
#!/usr/bin/env bash
printf '%s\n' "$*" >>"$PROBE_LOG"
P
chmod +x "$probe"
corpus="$ERGON_SRC/tests/fuzz/corpus/hlo"
ncorpus=$(find "$corpus" -type f | wc -l)
[ "$ncorpus" -gt 0 ] || fail "no committed corpus in $corpus"

for i in 1 2; do
  PROBE_LOG="$tmp/args$i" bash "$ERGON_SRC/tests/fuzz/run.sh" --fixed "$tmp/build" 123 7 >"$tmp/out$i" 2>&1 \
    || fail "run.sh --fixed failed: $(cat "$tmp/out$i")"
done
cmp -s "$tmp/out1" "$tmp/out2" || fail "two fixed runs printed different output: $(diff "$tmp/out1" "$tmp/out2")"
[ "$(wc -l <"$tmp/args1")" -eq 2 ] || fail "expected a replay and an exploration call: $(cat "$tmp/args1")"
replay=$(sed -n 1p "$tmp/args1"); explore=$(sed -n 2p "$tmp/args1")
# 1. the replay names every committed file, in a fixed order, and does not fuzz
for f in $(find "$corpus" -type f | LC_ALL=C sort); do
  case " $replay " in *" $f "*) ;; *) fail "replay misses $f: $replay" ;; esac
done
case "$replay" in *-runs=*|*-max_total_time*) fail "replay call fuzzes: $replay" ;; esac
grep -q "replaying fuzz_hlo: $ncorpus corpus files" "$tmp/out1" || fail "no replay line: $(cat "$tmp/out1")"
# 2. the exploration: the seed and count asked for, no time limit, no reload
case "$explore" in *-seed=7*) ;; *) fail "no -seed=7: $explore" ;; esac
case "$explore" in *-runs=123*) ;; *) fail "no -runs=123: $explore" ;; esac
case "$explore" in *-reload=0*) ;; *) fail "no -reload=0: $explore" ;; esac
case "$explore" in *-max_total_time*) fail "a time limit in the fixed stage: $explore" ;; esac
# 3. make fuzz: open-ended, for a time
PROBE_LOG="$tmp/args3" bash "$ERGON_SRC/tests/fuzz/run.sh" "$tmp/build" 3 >"$tmp/out3" 2>&1 \
  || fail "run.sh (explore) failed: $(cat "$tmp/out3")"
grep -q -- '-max_total_time=3' "$tmp/args3" || fail "explore mode has no time limit: $(cat "$tmp/args3")"
grep -q -- '-seed=' "$tmp/args3" && fail "explore mode fixes the seed: $(cat "$tmp/args3")"
# 4. the Makefile: make test runs the fixed stage, not the open one
grep -qE '^test: fuzz-check ' "$ERGON_SRC/Makefile" || fail "make test does not run fuzz-check"
echo ok
