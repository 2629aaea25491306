#!/usr/bin/env bash
# CLI tests of ergon schedule, --schedule-file and the new schedules downstream
# (plan perseus, baselines, emulate, choose, show), with a simulated profile.
set -u
E=${ERGON:?}
# cairo/fontconfig keep process-lifetime caches that LeakSanitizer reports (show plan)
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan-fontconfig.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
pass=0; fail=0
check() { # name expected_rc grep_text cmd...
  local name=$1 want=$2 text=$3; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" = "$want" ] && { [ -z "$text" ] || grep -qF -- "$text" <<<"$out"; }; then
    pass=$((pass+1)); echo "ok - $name"
  else
    fail=$((fail+1)); echo "not ok - $name (rc $rc, want $want; looking for '$text')"; echo "$out" | sed 's/^/#   /' | head -20
  fi
}
check "help" 0 "usage: ergon schedule NAME" "$E" schedule --help
check "text" 0 "rank 1: 1F0 2F0 1F1 2F1" "$E" schedule zbv --ranks 2 --microbatches 4
check "torch csv" 0 ",1F0,2F0,1F1,2F1,2I0,2W0" "$E" schedule zbv --ranks 2 --microbatches 4 --format torch-csv
check "overlap cell" 0 "(0F3;3B1)OVERLAP_F_B" "$E" schedule dualpipev --ranks 2 --microbatches 4 --format torch-csv
check "refusal zbv chunks" 1 "exactly 2 chunks" "$E" schedule zbv --ranks 2 --chunks 3 --microbatches 4
check "refusal rounds" 1 "multiple of the number of rounds" "$E" schedule interleaved-1f1b --ranks 4 --microbatches 9
check "refusal dualpipev M" 1 "at least as many microbatches as stages" "$E" schedule dualpipev --ranks 4 --microbatches 7
check "unknown schedule" 2 "unknown schedule 'zb2'" "$E" schedule zb2 --ranks 2 --microbatches 4
check "bad format" 2 "--format must be text or torch-csv" "$E" schedule zbv --ranks 2 --microbatches 4 --format xml
check "missing ranks" 2 "--ranks and --microbatches are required" "$E" schedule zbv --microbatches 4
check "write file" 0 "" "$E" schedule interleaved-zb --ranks 2 --chunks 2 --microbatches 4 --format torch-csv -o "$T/izb.csv"
check "read file back" 0 "rank 0: 0F0 0F1 2F0" "$E" schedule --schedule-file "$T/izb.csv"
printf '0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n' > "$T/cycle.csv"
check "cycle rejected" 1 "cycle.csv:1:2 (0B0)" "$E" schedule --schedule-file "$T/cycle.csv"
printf '0F0,0W0,0I0\n1F0,1B0\n' > "$T/wi.csv"
check "W before I" 1 "wi.csv:1:2 (0W0): W before its I" "$E" schedule --schedule-file "$T/wi.csv"
printf '0F0,0Q0,0B0\n' > "$T/unk.csv"
check "unknown action" 1 "unk.csv:1:2: unknown action '0Q0'" "$E" schedule --schedule-file "$T/unk.csv"
printf '0F0,0B0\n1F0\n' > "$T/miss.csv"
check "missing action" 1 "missing action: stage 1 microbatch 0 has no B" "$E" schedule --schedule-file "$T/miss.csv"

# A simulated profile with I/W rows, and one without.
check "profile sim split" 0 "" "$E" profile sim --gpu a100 --stages 2 --split-backward -o "$T/iw.csv"
grep -q "backward_input" "$T/iw.csv" && grep -q "backward_weight" "$T/iw.csv" && { pass=$((pass+1)); echo "ok - sim writes I/W rows"; } || { fail=$((fail+1)); echo "not ok - sim writes I/W rows"; }
check "profile sim plain" 0 "" "$E" profile sim --gpu a100 --stages 2 -o "$T/p.csv"
check "plan perseus zbv states split" 0 "I/W costs derived from the backward rows with --backward-split 0.3" \
  "$E" plan perseus --profile "$T/p.csv" --stages 2 --microbatches 4 --gpu A100 --schedule zbv --backward-split 0.3 --out "$T/fz"
check "plan perseus with I/W rows: no split" 0 "plans in" "$E" plan perseus --profile "$T/iw.csv" --stages 2 --microbatches 4 --gpu A100 --schedule zbv --out "$T/fzi"
if grep -q "backward-split" <("$E" plan perseus --profile "$T/iw.csv" --stages 2 --microbatches 4 --gpu A100 --schedule zbv --out "$T/fzi2" 2>&1); then
  fail=$((fail+1)); echo "not ok - no split note with I/W rows"; else pass=$((pass+1)); echo "ok - no split note with I/W rows"; fi
check "plan perseus schedule file" 0 "schedule $T/izb.csv: 2 ranks, 4 pipeline stages, 4 microbatches" \
  "$E" plan perseus --profile "$T/p.csv" --schedule-file "$T/izb.csv" --gpu A100 --out "$T/ff"
check "file ranks disagree" 2 "has 2 ranks, not 3" "$E" plan perseus --profile "$T/p.csv" --stages 3 --schedule-file "$T/izb.csv" --gpu A100 --out "$T/ff2"
check "json plan names schedule" 0 "" grep -q '"schedule": "zbv"' "$T/fz/plan_00000.json"
check "json plan has actions" 0 "" grep -q '"3I0"' "$T/fz/plan_00000.json"
# .py: one clock list per rank, 3VM clocks each for zbv (V=2, M=4: 24)
n=$(sed -n 2p "$T/fz/freqs_pipeline_00000.py" | tr -cd ',' | wc -c)
[ "$n" = 24 ] && { pass=$((pass+1)); echo "ok - py row has 24 clocks"; } || { fail=$((fail+1)); echo "not ok - py row has 24 clocks (commas $n)"; }
check "choose on zbv frontier" 0 "plan " "$E" choose --frontier "$T/fz" --slowdown 1.05 --out "$T/c.json"
check "emulate chosen" 0 "zbv" "$E" emulate --profile "$T/p.csv" --plan "$T/c.json" --gpu A100 --backward-split 0.3
check "emulate py of another schedule" 1 "clocks" "$E" emulate --profile "$T/p.csv" --plan "$T/fz/freqs_pipeline_00000.py" --gpu A100 --schedule dualpipev
check "emulate py with schedule" 0 "S=2, M=4, zbv" "$E" emulate --profile "$T/p.csv" --plan "$T/fz/freqs_pipeline_00000.py" --gpu A100 --schedule zbv
check "emulate p2p json states split" 0 '"schedule": "zbv", "backward_split": 0.29999' "$E" emulate --profile "$T/p.csv" --plan "$T/c.json" --gpu A100 --p2p-time 0.001 --json
t0=$("$E" emulate --profile "$T/p.csv" --plan "$T/c.json" --gpu A100 --json | sed 's/.*"time_s": \([0-9.e-]*\),.*/\1/')
t1=$("$E" emulate --profile "$T/p.csv" --plan "$T/c.json" --gpu A100 --json --p2p-time 0.01 | sed 's/.*"time_s": \([0-9.e-]*\),.*/\1/')
awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b > a + 0.01) }' && { pass=$((pass+1)); echo "ok - p2p time lengthens the iteration ($t0 -> $t1 s)"; } || { fail=$((fail+1)); echo "not ok - p2p time lengthens the iteration ($t0 -> $t1)"; }
check "emulate file plan" 0 "file" "$E" emulate --profile "$T/p.csv" --plan "$T/ff/plan_00000.json" --gpu A100
check "show plan zbv" 0 "" "$E" show plan --profile "$T/p.csv" --plan "$T/c.json" --gpu A100 -o "$T/z.svg"
[ -s "$T/z.svg" ] && { pass=$((pass+1)); echo "ok - timeline written"; } || { fail=$((fail+1)); echo "not ok - timeline written"; }
check "zeus-global dualpipev" 0 "schedule dualpipev" "$E" plan zeus-global --profile "$T/p.csv" --stages 2 --microbatches 4 --gpu A100 --schedule dualpipev
check "uniform schedule file" 0 "schedule file" "$E" plan uniform --profile "$T/p.csv" --schedule-file "$T/izb.csv" --gpu A100
check "envpipe refuses zbv" 1 "EnvPipe runs on the 1f1b or ours schedule, not zbv" "$E" plan envpipe --profile "$T/p.csv" --stages 2 --microbatches 4 --gpu A100 --schedule zbv
check "envpipe refuses schedule file" 2 "EnvPipe is defined only for the 1f1b and ours" "$E" plan envpipe --profile "$T/p.csv" --schedule-file "$T/izb.csv" --gpu A100
check "compare with a schedule" 0 "zeus-stage-interleaved-zb" "$E" compare --profile "$T/p.csv" --microbatches 4 --gpu A100 --schedule interleaved-zb --no-frontier
check "compare states split" 0 "--backward-split 0.5" "$E" compare --profile "$T/p.csv" --microbatches 4 --gpu A100 --schedule zbv --no-frontier
check "compare json states split" 0 '"backward_split": 0.5' "$E" compare --profile "$T/p.csv" --microbatches 4 --gpu A100 --schedule zbv --no-frontier --format json
check "compare perseus row" 0 "perseus-dualpipev" "$E" compare --profile "$T/p.csv" --microbatches 4 --gpu A100 --schedule dualpipev
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
