#!/usr/bin/env bash
# CLI tests of plan perseus, emulate, sample, choose: exit codes and messages.
set -u
E=${ERGON:?}
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
# A tiny profile: 2 stages, 5 clocks each, energies falling with time.
{
  echo "stage,instruction,frequency,time,energy"
  for s in 0 1; do
    for i in 0 1 2 3 4; do
      f=$((1410 - 15 * i))
      awk -v s=$s -v i=$i -v f=$f 'BEGIN{t=0.0105+0.001*i+0.001*s; e=3.0*exp(-0.2*i)+1.0+0.05*i;
        printf "%d,forward,%d,%.6f,%.6f\n", s, f, t, e;
        printf "%d,backward,%d,%.6f,%.6f\n", s, f, 2*t, 2*e}'
    done
  done
} > "$T/p.csv"

check "help" 0 "usage: ergon plan perseus" "$E" plan perseus --help
check "top-level help" 0 "commands:" "$E" --help
check "unknown command" 2 "unknown command" "$E" frobnicate
check "missing args" 2 "are required" "$E" plan perseus --profile "$T/p.csv"
check "bad stages" 2 "--stages expects an integer" "$E" plan perseus --profile "$T/p.csv" --stages x --microbatches 2 --gpu A40 --out "$T/o"
check "no power" 2 "blocking power is needed" "$E" plan perseus --profile "$T/p.csv" --stages 2 --microbatches 2 --out "$T/o"
check "unknown gpu" 2 "no published blocking power for GPU 'T4'" "$E" plan perseus --profile "$T/p.csv" --stages 2 --microbatches 2 --gpu T4 --out "$T/o"
check "missing profile" 1 "cannot open" "$E" plan perseus --profile "$T/none.csv" --stages 2 --microbatches 2 --gpu A40 --out "$T/o"
printf 'stage,instruction,frequency,time,energy\n0,forward,1410,abc,3\n' > "$T/bad.csv"
check "bad profile names file and line" 1 "bad.csv:2: time 'abc' is not a number" "$E" plan perseus --profile "$T/bad.csv" --stages 1 --microbatches 2 --gpu A40 --out "$T/o"
check "too many stages" 1 "the profile has 2 stages but S=3" "$E" plan perseus --profile "$T/p.csv" --stages 3 --microbatches 2 --gpu A40 --out "$T/o"
check "plan" 0 "plans in" "$E" plan perseus --profile "$T/p.csv" --stages 2 --microbatches 3 --blocking-power 10 --per-plan-files --out "$T/f"
n=$(($(wc -l < "$T/f/frontier.csv") - 1))
npy=$(ls "$T/f"/freqs_pipeline_*.py | wc -l); njs=$(ls "$T/f"/plan_*.json | wc -l)
if [ "$n" -gt 1 ] && [ "$n" = "$npy" ] && [ "$n" = "$njs" ]; then pass=$((pass+1)); echo "ok - one plan file of each format per frontier row ($n)"; else fail=$((fail+1)); echo "not ok - files: $n rows, $npy py, $njs json"; fi
check "emulate py" 0 "iteration time" "$E" emulate --profile "$T/p.csv" --plan "$T/f/freqs_pipeline_00000.py" --blocking-power 10
check "emulate json" 0 '"time_s"' "$E" emulate --profile "$T/p.csv" --plan "$T/f/plan_00000.json" --blocking-power 10 --json
printf '[\n[1410, 999, 1410, 1410, 1410, 1410],\n[1410, 1410, 1410, 1410, 1410, 1410],\n]\n' > "$T/bad.py"
check "emulate missing clock" 1 "999 MHz, which the profile does not have" "$E" emulate --profile "$T/p.csv" --plan "$T/bad.py" --blocking-power 10
printf '[\n[1410, 1410],\n[1410 x],\n]\n' > "$T/bad2.py"
check "emulate bad plan names line:col" 1 "bad2.py:3:7:" "$E" emulate --profile "$T/p.csv" --plan "$T/bad2.py" --blocking-power 10
check "sample" 0 "Sampled" "$E" sample "$T/f" "$T/s" -n 2
check "sample exists" 1 "already exists" "$E" sample "$T/f" "$T/s" -n 2
check "choose slowdown" 0 "plan " "$E" choose --frontier "$T/f" --slowdown 1.05 --out "$T/c.json"
check "choose sampled dir" 0 "plan " "$E" choose --frontier "$T/s" --slowdown 1.5
check "choose impossible deadline" 1 "no plan meets the deadline" "$E" choose --frontier "$T/f" --deadline 0.001
check "choose needs one criterion" 2 "one of --deadline S or --slowdown X is required" "$E" choose --frontier "$T/f"
check "choose bad slowdown" 2 "--slowdown expects a number" "$E" choose --frontier "$T/f" --slowdown 0.5
check "emulate chosen" 0 "iteration time" "$E" emulate --profile "$T/p.csv" --plan "$T/c.json" --blocking-power 10
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
