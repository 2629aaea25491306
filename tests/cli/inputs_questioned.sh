#!/usr/bin/env bash
# Inputs that are accepted but should be questioned (issue "Newcomer r3" item 7), each with the
# message a user needs: a profile in milliseconds, --slowdown 101 (a percentage written as a
# factor), --switch-latency 10 (10 s a switch), a profile from another GPU than --gpu, and
# --stages fewer than the profile's (planned, said, and choose/emulate work on the result).
set -u
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ERGON" profile sim --gpu a40 --model gpt3-xl --stages 4 -o "$tmp/a40.csv" 2>/dev/null || fail "profile sim"
# times in milliseconds
awk -F, 'NR == 1 { print; next } { printf "%s,%s,%s,%.9g,%s\n", $1, $2, $3, $4 * 1000, $5 }' \
  "$tmp/a40.csv" > "$tmp/ms.csv"
"$ERGON" plan perseus --profile "$tmp/ms.csv" --gpu A40 --stages 4 --microbatches 8 --out "$tmp/ms" \
  >/dev/null 2>"$tmp/err"; [ $? -eq 1 ] || fail "a millisecond profile planned"
grep -q "are the profile's times in milliseconds" "$tmp/err" || fail "no unit hint: $(cat "$tmp/err")"
# a profile from another GPU
"$ERGON" plan envpipe --profile "$tmp/a40.csv" --microbatches 8 --gpu A100 --out "$tmp/e.json" \
  >/dev/null 2>"$tmp/err"; [ $? -eq 1 ] || fail "an A40 profile planned as an A100"
grep -q "has clocks up to 1740 MHz, above the A100's highest (1410 MHz" "$tmp/err" ||
  fail "another GPU: $(cat "$tmp/err")"
"$ERGON" plan envpipe --profile "$tmp/a40.csv" --microbatches 8 --gpu A40 --out "$tmp/e.json" \
  >/dev/null 2>&1 || fail "the A40 profile with --gpu A40 refused"
# fewer stages than the profile: a note, and the frontier's profile is the one planned
"$ERGON" plan perseus --profile "$tmp/a40.csv" --gpu A40 --stages 2 --microbatches 4 \
  --unit-time 0.002 --out "$tmp/s2" >/dev/null 2>"$tmp/err" || fail "plan --stages 2: $(cat "$tmp/err")"
grep -q "has 4 stages; planning its first 2" "$tmp/err" || fail "no note on --stages 2: $(cat "$tmp/err")"
"$ERGON" choose --frontier "$tmp/s2" --slowdown 1.01 --out "$tmp/s2.json" >/dev/null 2>"$tmp/err" ||
  fail "choose on a --stages 2 frontier: $(cat "$tmp/err")"
"$ERGON" emulate --profile "$tmp/s2/profile.csv" --plan "$tmp/s2.json" --gpu A40 >/dev/null ||
  fail "emulate with the frontier's profile"
# --slowdown 101
"$ERGON" choose --frontier "$tmp/s2" --slowdown 101 >/dev/null 2>"$tmp/err" || fail "choose --slowdown 101"
grep -q "warning: --slowdown 101 allows 101x the all-max time (+10000 %): it is a factor (for a 1 % slowdown write 1.01)" "$tmp/err" ||
  fail "--slowdown 101: $(cat "$tmp/err")"
"$ERGON" choose --frontier "$tmp/s2" --slowdown 1.01 >/dev/null 2>"$tmp/err"
[ -s "$tmp/err" ] && fail "--slowdown 1.01 warned: $(cat "$tmp/err")"
# --switch-latency 10
"$ERGON" emulate --profile "$tmp/s2/profile.csv" --plan "$tmp/s2.json" --gpu A40 --switch-latency 10 \
  >/dev/null 2>"$tmp/err" || fail "emulate --switch-latency 10"
grep -q "warning: --switch-latency 10 is 10 s per clock switch; .* for 10 ms write 0.01" "$tmp/err" ||
  fail "--switch-latency 10: $(cat "$tmp/err")"
"$ERGON" emulate --profile "$tmp/s2/profile.csv" --plan "$tmp/s2.json" --gpu A40 --switch-latency 0.01 \
  >/dev/null 2>"$tmp/err"
[ -s "$tmp/err" ] && fail "--switch-latency 0.01 warned: $(cat "$tmp/err")"
# an unknown option: one message, with the nearest option
for c in "plan perseus --profle x:--profile" "choose --slowdwn 1:--slowdown" \
         "emulate --switch-latncy 1:--switch-latency" "compare --frontier-dri x:--frontier-dir" \
         "plan envpipe --microbatchs 4:--microbatches" "schedule 1f1b --rnaks 2:--ranks" \
         "sample --evry 2:--every"; do
  args=${c%%:*}; want=${c##*:}
  # shellcheck disable=SC2086
  "$ERGON" $args >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] || fail "ergon $args: exit status"
  grep -q "did you mean '$want'?" "$tmp/err" || fail "ergon $args: $(cat "$tmp/err")"
  [ "$(wc -l <"$tmp/err")" -eq 2 ] || fail "ergon $args: not one message and the help pointer: $(cat "$tmp/err")"
done
"$ERGON" choose --frontier >/dev/null 2>"$tmp/err"
grep -q "option '--frontier' needs a value" "$tmp/err" || fail "missing value: $(cat "$tmp/err")"
# shard: a mesh too large says which bound; --method both compares the objectives first
hlo="${ERGON_TEST_DATA:?}/shard_mlp.hlo"
"$ERGON" shard analyze --hlo "$hlo" --mesh 99999x99999 >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] || fail "mesh 99999x99999"
grep -q "each side is at most 1024 devices (got 99999 x 99999)" "$tmp/err" || fail "mesh bound: $(cat "$tmp/err")"
"$ERGON" shard search --hlo "$hlo" --mesh 2x2 --method both >"$tmp/out" 2>&1 || fail "search --method both: $(cat "$tmp/out")"
grep -qE "per-operator ILP .*objective [0-9.]+ ms, (the same as the DP's|[0-9.]+% (better|worse) than the DP's [0-9.]+ ms) on the same costs; search" "$tmp/out" ||
  fail "--method both does not compare the objectives: $(tail -2 "$tmp/out")"
echo "ok: inputs questioned"
