#!/usr/bin/env bash
# emulate_plan_stages_match_profile.sh: JSON plans against a profile (issue 15 item 15).
# - a plan with fewer stages than the profile is an error (exit 1 naming both files),
#   not an emulation of the profile's first stages with exit 0;
# - the "stage" field places each entry's clocks, so swapped entries give the
#   same iteration as ordered ones;
# - an unknown "version" is refused.
set -u
: "${ERGON:?ERGON must name the ergon binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ERGON" profile sim --gpu a100 --stages 4 --model bert-large --min-freq 1200 -o "$tmp/p4.csv" 2>/dev/null \
  || fail "profile sim"
"$ERGON" profile sim --gpu a100 --stages 2 --model bert-large --min-freq 1200 -o "$tmp/p2.csv" 2>/dev/null \
  || fail "profile sim"
plan() { # plan FILE VERSION STAGE_ENTRIES...
  local f=$1 v=$2; shift 2
  local n=$#; local IFS=,
  echo "{\"format\": \"ergon-plan\", \"version\": $v, \"schedule\": \"1f1b\", \"num_stages\": $n,
   \"num_microbatches\": 2, \"stages\": [$*]}" >"$f"
}
s() { echo "{\"stage\": $1, \"freq_mhz\": [$2, $2, $2, $2]}"; }
plan "$tmp/three.json" 1 "$(s 0 1410)" "$(s 1 1410)" "$(s 2 1410)"
"$ERGON" emulate --profile "$tmp/p4.csv" --plan "$tmp/three.json" --gpu a100 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || fail "3-stage plan on a 4-stage profile: exit $rc: $(cat "$tmp/out" "$tmp/err")"
grep -q "three.json: the plan has 3 stages but the profile .*p4.csv has 4" "$tmp/err" \
  || fail "message: $(cat "$tmp/err")"
[ -s "$tmp/out" ] && fail "printed a result: $(cat "$tmp/out")"
# "stage" is honoured: stage 1 runs slow; listing it first changes nothing
plan "$tmp/ordered.json" 1 "$(s 0 1410)" "$(s 1 1200)"
plan "$tmp/swapped.json" 1 "$(s 1 1200)" "$(s 0 1410)"
plan "$tmp/other.json" 1 "$(s 0 1200)" "$(s 1 1410)"
for f in ordered swapped other; do
  "$ERGON" emulate --profile "$tmp/p2.csv" --plan "$tmp/$f.json" --gpu a100 --json >"$tmp/$f.out" 2>"$tmp/err" \
    || fail "emulate $f: $(cat "$tmp/err")"
done
cmp -s "$tmp/ordered.out" "$tmp/swapped.out" \
  || fail "swapped stage entries emulate differently: $(cat "$tmp/ordered.out" "$tmp/swapped.out")"
cmp -s "$tmp/ordered.out" "$tmp/other.out" && fail "the test cannot tell the stages apart"
# unknown version
plan "$tmp/v2.json" 2 "$(s 0 1410)" "$(s 1 1410)"
"$ERGON" emulate --profile "$tmp/p2.csv" --plan "$tmp/v2.json" --gpu a100 >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "version 2 accepted: $(cat "$tmp/err")"
grep -q 'v2.json: unknown "version": 2' "$tmp/err" || fail "version message: $(cat "$tmp/err")"
echo ok
