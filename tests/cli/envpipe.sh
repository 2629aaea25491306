#!/usr/bin/env bash
# envpipe.sh: black-box tests of ergon plan envpipe|zeus-*|uniform, compare and show.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}" "${ERGON_TEST_DATA:?}"
P="$ERGON_TEST_DATA/envpipe_toy.csv"
# cairo's text rendering loads fontconfig, whose process-lifetime caches LeakSanitizer reports.
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan-fontconfig.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check NAME EXPECTED_RC COMMAND... ; output in $T/out
  local name=$1 want=$2; shift 2
  "$@" >"$T/out" 2>&1
  local rc=$?
  if [ "$rc" != "$want" ]; then
    echo "not ok - $name: exit $rc, want $want"; sed 's/^/#   /' "$T/out" | head -20; fail=1
  else
    echo "ok - $name"
  fi
}
has() { # has NAME PATTERN: the last output contains PATTERN
  if grep -q -- "$2" "$T/out"; then echo "ok - $1"; else
    echo "not ok - $1: no '$2' in:"; sed 's/^/#   /' "$T/out" | head -20; fail=1; fi
}

# --- ergon show ---
check "show --help" 0 "$ERGON" show --help
has "show help names formats" ".svg"
cat >"$T/plan.json" <<'JSON'
{"format": "ergon-plan", "version": 1, "schedule": "1f1b", "num_stages": 2, "num_microbatches": 2,
 "stages": [{"stage": 0, "freq_mhz": [1410, 1350, 1410, 1410]},
            {"stage": 1, "freq_mhz": [1410, 1410, 1290, 1410]}]}
JSON
for ext in png svg pdf; do
  check "show plan .$ext" 0 "$ERGON" show plan --profile "$P" --plan "$T/plan.json" --blocking-power 60 -o "$T/t.$ext"
  [ -s "$T/t.$ext" ] && echo "ok - t.$ext written" || { echo "not ok - t.$ext missing"; fail=1; }
done
check "show plan --color power" 0 "$ERGON" show plan --profile "$P" --plan "$T/plan.json" --blocking-power 60 --color power -o "$T/p.png"
check "show plan: unknown format" 1 "$ERGON" show plan --profile "$P" --plan "$T/plan.json" --blocking-power 60 -o "$T/t.gif"
has "unknown format message" "use .png, .svg or .pdf"
sed 's/1290/1295/' "$T/plan.json" >"$T/bad.json"
check "show plan: clock missing from the profile" 1 "$ERGON" show plan --profile "$P" --plan "$T/bad.json" --blocking-power 60 -o "$T/b.png"
has "missing clock named" "1295 MHz"
check "show plan: no blocking power" 2 "$ERGON" show plan --profile "$P" --plan "$T/plan.json" -o "$T/b.png"
check "show plan: unknown option" 2 "$ERGON" show plan --bogus -o x.png
check "show: unknown picture" 2 "$ERGON" show nothing
printf 'time,energy\n1.0,100\n0.9,95\n0.8,97\n' >"$T/frontier.csv"
printf 'method,time_s,energy_j\nall-max,0.8,120\nenvpipe,0.8,100\n' >"$T/cmp.csv"
check "show frontier" 0 "$ERGON" show frontier --frontier "$T/frontier.csv" --compare "$T/cmp.csv" --point "x=0.9,99" -o "$T/f.svg"
printf 'time,energy\n1.0,abc\n' >"$T/badf.csv"
check "show frontier: bad number" 1 "$ERGON" show frontier --frontier "$T/badf.csv" -o "$T/f.png"
has "bad number names file and line" "badf.csv:2"

# --- ergon plan envpipe|zeus-global|zeus-stage|uniform (registered by cmd_plan.c) ---
if "$ERGON" plan envpipe --help >/dev/null 2>&1; then
  check "plan envpipe" 0 "$ERGON" plan envpipe --profile "$P" --microbatches 6 --blocking-power 60 --out "$T/e.json" --print-iterations
  has "printed plan format" "Stage 0 | \[F0 1410"
  has "summary" "iteration time:"
  [ -s "$T/e.json" ] && echo "ok - plan written" || { echo "not ok - plan not written"; fail=1; }
  check "plan envpipe .py" 0 "$ERGON" plan envpipe --profile "$P" --microbatches 6 --blocking-power 60 --type uniform --schedule 1f1b --reconfig default --out "$T/e.py" --quiet
  head -1 "$T/e.py" | grep -q '^\[' && echo "ok - .py plan" || { echo "not ok - .py plan"; fail=1; }
  check "plan envpipe perseus-emulation" 0 "$ERGON" plan envpipe --profile "$P" --microbatches 6 --blocking-power 60 --variant perseus-emulation --schedule 1f1b --unit-time 0.0001
  check "plan envpipe: M < S with ours" 1 "$ERGON" plan envpipe --profile "$P" --microbatches 3 --blocking-power 60
  has "M < S message" "M=3 < S=4"
  # stage 0 made the bottleneck and its 1245 MHz rows removed: the +15 MHz raise from 1230 fails
  awk -F, 'NR == 1 { print; next } $1 == 0 && $3 == 1245 { next }
           $1 == 0 { printf "%s,%s,%s,%.6f,%.6f\n", $1, $2, $3, $4 * 1.6, $5 * 1.6; next } { print }' "$P" >"$T/gap.csv"
  check "plan envpipe: +15 MHz step off the profile" 1 "$ERGON" plan envpipe --profile "$T/gap.csv" --microbatches 6 --blocking-power 60 --variant perseus-emulation --unit-time 0.0001
  has "missing clock message" "1245 MHz"
  check "plan envpipe: bad type" 2 "$ERGON" plan envpipe --profile "$P" --microbatches 6 --blocking-power 60 --type fancy
  check "plan envpipe: eta is not an envpipe option" 2 "$ERGON" plan envpipe --profile "$P" --microbatches 6 --blocking-power 60 --eta 0.3
  check "plan envpipe: a100 clock table" 0 "$ERGON" plan envpipe --profile "$P" --microbatches 6 --blocking-power 60 --gpu a100 --gpu-table "${ERGON_SRC:-.}/data/gpus.csv"
  has "a100 max is 1350" "1350"
  check "plan envpipe: unknown GPU falls back to the profile" 0 "$ERGON" plan envpipe --profile "$P" --microbatches 6 --blocking-power 60 --gpu tpu9
  has "note on unknown GPU" "using the profile's clocks"
  # one measured reconfiguration step on EnvPipe's README plan (docs/envpipe.md, --from-plan)
  R="$ERGON_TEST_DATA/envpipe_rtx3090_toy.csv"
  check "measured step: README plan" 0 "$ERGON" plan envpipe --profile "$R" --gpu rtx3090 --blocking-power 60 \
    --from-plan "$ERGON_TEST_DATA/envpipe_readme_plan.json" --waits "$ERGON_TEST_DATA/envpipe_readme_waits.csv"
  has "README brackets" "Stage 3 | \[F0 1980 59.5\] \[B0 1980 0.0\] \[F1 1980 0.6\]"
  has "README plan unchanged" "unchanged"
  sed 's/^1,B,1,63.0/1,B,1,1.0/; s/^1,B,2,62.2/1,B,2,1.0/; s/^1,B,3,50.9/1,B,3,1.0/' \
    "$ERGON_TEST_DATA/envpipe_readme_waits.csv" >"$T/mw.csv"
  check "measured step: modified, balanced" 0 "$ERGON" plan envpipe --profile "$R" --gpu rtx3090 --blocking-power 60 \
    --from-plan "$ERGON_TEST_DATA/envpipe_readme_plan.json" --waits "$T/mw.csv" --out "$T/mp.json"
  has "balanced raises S1 B0-B2 and S2 B0 to 1290" "Stage 1 | .*\[B0 1290 109.1\] \[B1 1290 1.0\] \[B2 1290 1.0\]"
  has "S2 B0 raised" "Stage 2 | .*\[B0 1290 32.8\]"
  check "measured step: modified, greedy" 0 "$ERGON" plan envpipe --profile "$R" --gpu rtx3090 --blocking-power 60 \
    --from-plan "$ERGON_TEST_DATA/envpipe_readme_plan.json" --waits "$T/mw.csv" --reconfig greedy
  has "greedy raises S1 B2 to 1350" "\[B1 1260 1.0\] \[B2 1350 1.0\]"
  head -n 10 "$ERGON_TEST_DATA/envpipe_readme_waits.csv" >"$T/short.csv"
  check "measured step: missing waits" 1 "$ERGON" plan envpipe --profile "$R" --blocking-power 60 \
    --from-plan "$ERGON_TEST_DATA/envpipe_readme_plan.json" --waits "$T/short.csv"
  has "missing waits message" "9 waits for a plan with 32 instructions"
  check "measured step: --waits alone" 2 "$ERGON" plan envpipe --profile "$R" --blocking-power 60 --waits "$T/short.csv"
  for m in zeus-global zeus-stage uniform; do
    check "plan $m" 0 "$ERGON" plan $m --profile "$P" --microbatches 6 --blocking-power 60
  done
  check "plan zeus-global --eta out of range" 2 "$ERGON" plan zeus-global --profile "$P" --microbatches 6 --blocking-power 60 --eta 2
  check "plan zeus-stage: missing profile" 1 "$ERGON" plan zeus-stage --profile "$T/none.csv" --microbatches 6 --blocking-power 60
else
  note_or_fail "ergon plan envpipe is not registered in this build"
fi

# --- ergon compare ---
if "$ERGON" compare --help >/dev/null 2>&1; then
  check "compare (no frontier)" 0 "$ERGON" compare --profile "$P" --microbatches 6 --blocking-power 60 --no-frontier
  has "compare lists envpipe" "envpipe-perseus-emulation"
  check "compare csv with frontiers" 0 "$ERGON" compare --profile "$P" --microbatches 6 --blocking-power 60 --format csv -o "$T/c.csv"
  head -1 "$T/c.csv" | grep -q '^method,time_s,energy_j,saving_pct,slowdown_pct,perseus_energy_j' && echo "ok - compare csv header" || { echo "not ok - compare csv header"; fail=1; }
  grep -q '^perseus-ours,' "$T/c.csv" && echo "ok - perseus-ours row" || { echo "not ok - perseus-ours row"; cat "$T/c.csv"; fail=1; }
  check "compare --ablation" 0 "$ERGON" compare --profile "$P" --microbatches 6 --blocking-power 60 --no-frontier --ablation
  has "ablation rows" "envpipe-no-reconfig"
  check "compare json" 0 "$ERGON" compare --profile "$P" --microbatches 6 --blocking-power 60 --format json --no-frontier
  has "json methods" '"methods"'
  check "show frontier from compare" 0 "$ERGON" show frontier --compare "$T/c.csv" -o "$T/c.png"
  check "compare: M < S still compares the 1F1B methods" 0 "$ERGON" compare --profile "$P" --microbatches 2 --blocking-power 60 --no-frontier
else
  note_or_fail "ergon compare is not registered in this build"
fi
exit $fail
