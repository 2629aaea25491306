#!/usr/bin/env bash
# plans_ergon_carries_every_schedule.sh: plans.ergon (the default output of `plan perseus`)
# carries every schedule as the JSON plans do: schedule name, chunks, backward split, each
# rank's instruction count and, for a --schedule-file, the order itself. For a zbv, an
# interleaved-1f1b and a DualPipeV schedule file frontier (2 ranks x 2 chunks, M=4):
# `choose --slowdown 1.01` agrees with the summary; the plans choose writes from plans.ergon
# equal, byte for byte, those it writes from the `--per-plan-files` JSON plans (several
# deadlines); sample keeps them; the chosen plan emulates to choose's profiled values (the
# baseline uses emulate's DAG); frontier-info.csv names schedule, chunks and split; damaged
# schedule lines are errors naming file and line. (Before the merge fix the writer assumed
# 2*M clocks per stage: 'base has 24 clocks, expected 2 x 2 x 4 = 16'.)
set -u
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan-fontconfig.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$tmp" || exit 1
"$ERGON" profile sim --gpu a100 --stages 2 --split-backward -o p.csv 2>/dev/null || fail "profile sim"
"$ERGON" schedule dualpipev --ranks 2 --microbatches 4 --format torch-csv -o dpv.csv || fail "schedule"
for case in zbv interleaved-1f1b file; do
  case $case in
  file) sched=(--schedule-file dpv.csv) ;;
  *) sched=(--schedule "$case" --chunks 2) ;;
  esac
  plan() { "$ERGON" plan perseus --profile p.csv --stages 2 --microbatches 4 --gpu a100 "${sched[@]}" "$@"; }
  plan --out "$case" >sum 2>err || fail "$case: plan: $(cat err)"
  [ "$(ls "$case" | sort | tr '\n' ' ')" = "frontier-info.csv frontier.csv plans.ergon profile.csv " ] ||
    fail "$case: files: $(ls "$case")"
  plan --per-plan-files --out "$case-pp" >/dev/null 2>err || fail "$case: plan --per-plan-files: $(cat err)"
  # a directory with only the JSON plans (plans.ergon is read in preference)
  mkdir "$case-json" && cp "$case-pp"/plan_*.json "$case-pp"/frontier.csv "$case-pp"/profile.csv \
    "$case-pp"/frontier-info.csv "$case-json"/ || fail "copy"
  # the header names what the JSON plans name
  j0="$case-pp/plan_00000.json"
  hdr=$(sed -n '1,/^base/p' "$case/plans.ergon")
  name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["schedule"])' "$j0")
  grep -qx "schedule $name" <<<"$hdr" || fail "$case: schedule: $hdr"
  grep -qx "num_chunks 2" <<<"$hdr" && grep -qx "backward_split 0.5" <<<"$hdr" || fail "$case: chunks/split: $hdr"
  counts=$(python3 -c 'import json,sys; print(" ".join(str(len(s["order"])) for s in json.load(open(sys.argv[1]))["stages"]))' "$j0")
  grep -qx "instructions $counts" <<<"$hdr" || fail "$case: instructions (JSON: $counts): $hdr"
  [ "$case" = file ] && { grep -q "^order 1 .*OVERLAP_F_B" <<<"$hdr" || fail "file: order lines: $hdr"; }
  grep -qx "schedule,$name" "$case/frontier-info.csv" && grep -qx "num_chunks,2" "$case/frontier-info.csv" &&
    grep -qx "backward_split,0.5" "$case/frontier-info.csv" || fail "$case: frontier-info: $(cat "$case/frontier-info.csv")"
  # choose --slowdown 1.01 is the summary's plan
  sum_k=$(sed -n 's/^within 1% slowdown *plan \([0-9]*\):.*/\1/p' sum)
  sum_e=$(sed -n 's/^within 1% slowdown.*J (\([-+0-9.]*\)% vs all-max.*/\1/p' sum)
  "$ERGON" choose --frontier "$case" --slowdown 1.01 --out c.json >ch 2>err || fail "$case: choose: $(cat err)"
  grep -q "^plan $sum_k: " ch && grep -qF -- "$sum_e% energy vs all-max" ch || fail "$case: summary $sum_k ($sum_e%): $(cat ch)"
  "$ERGON" choose --frontier "$case-json" --slowdown 1.01 --out cj.json >/dev/null 2>err || fail "$case: choose json: $(cat err)"
  cmp -s c.json cj.json || fail "$case: plan $sum_k from plans.ergon differs from plan_$sum_k.json: $(diff c.json cj.json | head)"
  # the chosen plan emulates to the profiled values choose printed
  read -r t e < <(sed -n 's/^plan [0-9]*: \([0-9.e+-]*\) s, \([0-9.e+-]*\) J.*/\1 \2/p' ch)
  "$ERGON" emulate --profile p.csv --plan c.json --gpu a100 >em 2>err || fail "$case: emulate: $(cat err)"
  awk -v t="$t" -v e="$e" '/^iteration time/ { tt = $3; ee = $6; gsub(",", "", ee) }
    END { exit !(tt + 0 > 0 && (tt - t) ^ 2 < 1e-10 * t * t && (ee - e) ^ 2 < 1e-10 * e * e) }' em ||
    fail "$case: choose says $t s, $e J; emulate: $(cat em)"
  # more plans, through choose's reader: byte-identical JSON either way
  n=$(($(wc -l <"$case/frontier.csv") - 1))
  for k in 0 $((n / 3)) $((n / 2)) $((n - 1)); do
    dl=$(sed -n "$((k + 2))p" "$case/frontier.csv" | cut -d, -f1)
    "$ERGON" choose --frontier "$case" --deadline "$dl" --out a.json >/dev/null 2>&1
    ra=$?
    "$ERGON" choose --frontier "$case-json" --deadline "$dl" --out b.json >/dev/null 2>&1
    rb=$?
    [ $ra -eq $rb ] || fail "$case: deadline $dl: exit $ra from plans.ergon, $rb from JSON"
    [ $ra -ne 0 ] || cmp -s a.json b.json || fail "$case: deadline $dl: plans differ: $(diff a.json b.json | head)"
  done
  # sample keeps the schedule (a sampled plans.ergon)
  "$ERGON" sample "$case" "$case-s" -n 5 >/dev/null 2>err || fail "$case: sample: $(cat err)"
  sed -n '1,/^num_plans/p' "$case-s/plans.ergon" | grep -v num_plans >h1
  sed -n '1,/^num_plans/p' "$case/plans.ergon" | grep -v num_plans >h2
  cmp -s h1 h2 || fail "$case: sample changed the header: $(diff h1 h2)"
  "$ERGON" choose --frontier "$case-s" --slowdown 1.5 --out s.json >/dev/null 2>err || fail "$case: choose sampled: $(cat err)"
  "$ERGON" emulate --profile p.csv --plan s.json --gpu a100 >/dev/null 2>err || fail "$case: sampled plan: $(cat err)"
  "$ERGON" show frontier --frontier "$case" -o "$case.svg" >/dev/null 2>err || fail "$case: show: $(cat err)"
done
# damaged schedule lines: file and line named
bad() { # $1 dir, $2 sed script, $3 expected message
  cp -r "$1" damaged && sed -i "$2" damaged/plans.ergon
  "$ERGON" choose --frontier damaged --slowdown 1.01 >/dev/null 2>err && fail "damaged ($2) accepted"
  grep -qF -- "$3" err || fail "damaged ($2): $(cat err)"
  rm -rf damaged
}
bad zbv 's/^instructions 24 24$/instructions 24 23/' "damaged/plans.ergon:7: instructions:"
bad zbv 's/^num_chunks 2$/num_chunks 3/' "damaged/plans.ergon: the header's schedule:"
bad file '/^order /d' "damaged/plans.ergon:10: schedule file needs its order"
bad file 's/^order 1 1F0 /order 1 1F0 1F0 /' "damaged/plans.ergon:10:"
bad zbv 's/^schedule zbv$/schedule zbw/' "damaged/plans.ergon:2: unknown schedule 'zbw'"
echo "ok: plans.ergon carries zbv, interleaved-1f1b and a schedule file like the JSON plans"
