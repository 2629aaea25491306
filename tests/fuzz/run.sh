#!/usr/bin/env bash
# Run every libFuzzer target of a fuzz build (make fuzz / make fuzz-check).
#
#   run.sh BUILD [SECONDS]          explore: each target for SECONDS (default 15) of random
#                                   exploration from its seed corpus (make fuzz). A finding
#                                   is kept under BUILD/fuzz-findings/; it becomes a corpus
#                                   file in tests/fuzz/corpus/NAME/ plus a fix.
#   run.sh --fixed BUILD [RUNS [SEED]]
#                                   the test command's stage (make fuzz-check, part of make
#                                   test): replay every committed corpus file, then a
#                                   fixed-seed exploration of RUNS inputs (default 2000,
#                                   seed 1). Same code, same corpus: same inputs, same result.
set -euo pipefail
mode=explore
if [ "${1:-}" = "--fixed" ]; then
  mode=fixed
  shift
fi
build=${1:-build-fuzz}
if [ "$mode" = explore ]; then
  secs=${2:-15}
else
  runs=${2:-2000}
  seed=${3:-1}
fi
here=$(cd "$(dirname "$0")" && pwd)
# Every sanitizer finding fails the run: UBSan only reports and goes on unless
# halt_on_error=1. Ours come last so that they win over a caller's options (the
# fuzz build also compiles with -fno-sanitize-recover=undefined).
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"
common=(-max_len=65536 -rss_limit_mb=2048 -timeout=10)
# -reload=0: libFuzzer re-reads its corpus directory once a second by default, which makes
# what it explores depend on timing.
fixed_opts=(-reload=0)
# Address-space randomisation changes pointer values, and with them hash-table layouts and the
# coverage counters libFuzzer steers by: the fixed stage runs without it where it can.
norand=()
if [ "$mode" = fixed ]; then
  if setarch "$(uname -m)" -R true 2>/dev/null; then
    norand=(setarch "$(uname -m)" -R)
  else
    echo "note: setarch -R is not permitted here; the fixed-seed stage runs with ASLR on"
  fi
fi
# Targets whose harness reads the clock: the fixed stage replays their corpus only.
REPLAY_ONLY="${REPLAY_ONLY:-fuzz_server_handlers}"
findings="$build/fuzz-findings"
fail=0
for bin in "$build"/tests/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin"); corpus=${name#fuzz_}
  work=$(mktemp -d)
  [ -d "$here/corpus/$corpus" ] && cp -r "$here/corpus/$corpus/." "$work/" 2>/dev/null || true
  if [ "$mode" = fixed ]; then
    # 1. The committed corpus, every file once (files, not a directory: no mutation).
    files=()
    if [ -d "$here/corpus/$corpus" ]; then
      while IFS= read -r f; do files+=("$f"); done < <(find "$here/corpus/$corpus" -type f | LC_ALL=C sort)
    fi
    if [ ${#files[@]} -gt 0 ]; then
      echo "replaying $name: ${#files[@]} corpus files"
      if ! "${norand[@]}" "$bin" "${common[@]}" "${files[@]}" >"$work.log" 2>&1; then
        echo "FAILED: $name (committed corpus)"; tail -40 "$work.log"; fail=1
        rm -rf "$work" "$work.log"
        continue
      fi
    fi
    # 2. Fixed-seed, fixed-count exploration from that corpus. No time limit: a limit would
    #    make the number of inputs, and so the result, depend on the machine's speed.
    #    A harness whose behaviour depends on the clock (the server: job ids from the time,
    #    deadlines on the monotonic clock) cannot explore reproducibly: replay only, here;
    #    make fuzz explores it.
    case " $REPLAY_ONLY " in *" $name "*)
      echo "fuzzing $name: replay only (its harness reads the clock; make fuzz explores it)"
      rm -rf "$work" "$work.log"
      continue ;;
    esac
    echo "fuzzing $name: $runs inputs, seed $seed"
    if ! "${norand[@]}" "$bin" -seed="$seed" -runs="$runs" "${fixed_opts[@]}" "${common[@]}" -artifact_prefix="$work/" \
         "$work" >"$work.log" 2>&1; then
      echo "FAILED: $name (seed $seed, $runs runs)"; tail -40 "$work.log"; fail=1
    else
      grep -E '^#[0-9]+.*DONE' "$work.log" | tail -1 || true
    fi
  else
    mkdir -p "$findings"
    echo "fuzzing $name for ${secs}s"
    if ! "$bin" -max_total_time="$secs" "${common[@]}" -artifact_prefix="$findings/$name-" \
         "$work" >"$work.log" 2>&1; then
      echo "FAILED: $name"; tail -40 "$work.log"; fail=1
      for a in "$findings/$name-"*; do
        [ -f "$a" ] && echo "finding kept: $a (add it to tests/fuzz/corpus/$corpus/ with the fix)"
      done
    else
      grep -E '^#[0-9]+.*DONE' "$work.log" | tail -1 || true
    fi
  fi
  rm -rf "$work" "$work.log"
done
exit $fail
