#!/usr/bin/env bash
# compare's best row, perseus-ours (the Perseus frontier on EnvPipe's ours schedule, with
# EnvPipe's extra warm-up forwards r_s), can be run: `plan perseus --schedule ours` plans on the
# same schedule (EnvPipe's r_s by default, or --extra-warmup), and `choose --deadline` at
# compare's all-max time gives the same energy. --schedule envpipe is refused with a hint
# (it used to be read as ours without a word), and --extra-warmup is checked.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages 4 -o "$tmp/p.csv" 2>/dev/null || fail "profile sim"
check() { # NAME PROFILE GPU-ARGS...
  local name=$1 prof=$2; shift 2
  "$ERGON" compare --profile "$prof" "$@" --microbatches 12 --format json -o "$tmp/c.json" \
    >/dev/null 2>"$tmp/err" || fail "$name: compare: $(cat "$tmp/err")"
  read -r T PE < <(python3 -c 'import json,sys
m = {r["method"]: r for r in json.load(open(sys.argv[1]))["methods"]}
print(repr(m["all-max"]["time_s"]), repr(m["perseus-ours"]["energy_j"]))' "$tmp/c.json") ||
    fail "$name: no perseus-ours row: $(cat "$tmp/c.json")"
  "$ERGON" plan perseus --profile "$prof" "$@" --microbatches 12 --schedule ours \
    --out "$tmp/$name" >"$tmp/sum" 2>"$tmp/err" || fail "$name: plan --schedule ours: $(cat "$tmp/err")"
  grep -q "^schedule ours" "$tmp/sum" || fail "$name: summary: $(cat "$tmp/sum")"
  E=$("$ERGON" choose --frontier "$tmp/$name" --deadline "$T" --json |
      python3 -c 'import json,sys; print(repr(json.load(sys.stdin)["energy_j"]))') ||
    fail "$name: choose --deadline $T"
  awk -v a="$E" -v b="$PE" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-9 * b) }' ||
    fail "$name: compare's perseus-ours has $PE J at $T s, plan --schedule ours + choose $E J"
  echo "ok: $name perseus-ours $PE J reproduced"
}
check sim "$tmp/p.csv" --gpu A100 --stages 4
data=$ERGON_TEST_DATA/published/perseus-sosp24/stage_profile
need_data "$data/bloom+a40_bf16.csv"
check bloom-a40 "$data/bloom+a40_bf16.csv" --gpu A40 --stages 8
# explicit r_s: accepted with one value per stage, refused otherwise; only with ours
"$ERGON" plan perseus --profile "$tmp/p.csv" --gpu A100 --stages 4 --microbatches 12 --schedule ours \
  --extra-warmup 2,1,1,0 --out "$tmp/x" >/dev/null 2>"$tmp/err" || fail "--extra-warmup 2,1,1,0: $(cat "$tmp/err")"
"$ERGON" plan perseus --profile "$tmp/p.csv" --gpu A100 --stages 4 --microbatches 12 --schedule ours \
  --extra-warmup 2,1 --out "$tmp/y" >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] || fail "2 values for 4 stages accepted"
grep -q "2 values for 4 stages" "$tmp/err" || fail "message: $(cat "$tmp/err")"
"$ERGON" plan perseus --profile "$tmp/p.csv" --gpu A100 --stages 4 --microbatches 12 \
  --extra-warmup 1,1,1,0 --out "$tmp/z" >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] || fail "--extra-warmup without ours accepted"
"$ERGON" plan perseus --profile "$tmp/p.csv" --gpu A100 --stages 4 --microbatches 12 --schedule envpipe \
  --out "$tmp/e" >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] || fail "--schedule envpipe accepted"
grep -q "called 'ours'" "$tmp/err" && grep -q "ergon plan envpipe" "$tmp/err" || fail "envpipe hint: $(cat "$tmp/err")"
"$ERGON" plan perseus --profile "$tmp/p.csv" --gpu A100 --stages 4 --microbatches 12 --schedule nosuch \
  --out "$tmp/n" >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] || fail "unknown schedule accepted"
grep -q "unknown schedule 'nosuch'" "$tmp/err" || fail "unknown schedule message: $(cat "$tmp/err")"
echo "ok: perseus-ours runnable"
