#!/usr/bin/env bash
# Plans that know where they came from (issue "Newcomer r3" item 4): choose --out and plan
# envpipe --out record the profile's fingerprint, blocking power and clock table (JSON and .py);
# emulate refuses another profile, another blocking power and a --schedule other than the
# plan's own, naming both sides (--force goes on with a warning); a .py plan read as the wrong
# schedule is refused; a frontier directory whose profile.csv was replaced is refused by choose.
# Plans without provenance (Perseus's own) are still accepted.
set -u
# cairo/fontconfig keep caches LeakSanitizer reports (show plan draws with cairo; as readme_tour)
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan-fontconfig.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages 4 -o "$tmp/a.csv" 2>/dev/null || fail "profile sim a100"
"$ERGON" profile sim --gpu a40 --model gpt3-xl --stages 4 -o "$tmp/b.csv" 2>/dev/null || fail "profile sim a40"
"$ERGON" plan perseus --profile "$tmp/a.csv" --stages 4 --microbatches 8 --blocking-power 83.64 \
  --unit-time 0.002 --out "$tmp/f" >/dev/null 2>&1 || fail "plan perseus"
"$ERGON" choose --frontier "$tmp/f" --slowdown 1.01 --out "$tmp/p.json" >/dev/null || fail "choose --out json"
"$ERGON" choose --frontier "$tmp/f" --slowdown 1.01 --out "$tmp/p.py" >/dev/null || fail "choose --out py"
fpa=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["provenance"]["profile_fingerprint"])' "$tmp/p.json") ||
  fail "no provenance in the JSON plan: $(head -c 400 "$tmp/p.json")"
case $fpa in fnv1a64:????????????????) ;; *) fail "fingerprint '$fpa'" ;; esac
grep -q "^# ergon provenance: {.*\"profile_fingerprint\":\"$fpa\".*\"schedule\":\"1f1b\"" "$tmp/p.py" ||
  fail "no provenance line in the .py plan: $(tail -3 "$tmp/p.py")"
python3 -c 'import ast,sys; ast.literal_eval(open(sys.argv[1]).read())' "$tmp/p.py" ||
  fail "the .py plan is no longer a Python literal (Perseus/Zeus read it so)"
for p in p.json p.py; do
  "$ERGON" emulate --profile "$tmp/a.csv" --plan "$tmp/$p" --blocking-power 83.64 >/dev/null ||
    fail "$p with its own profile refused"
  "$ERGON" emulate --profile "$tmp/b.csv" --plan "$tmp/$p" --blocking-power 83.64 >/dev/null 2>"$tmp/err"
  [ $? -eq 1 ] || fail "$p with another profile accepted"
  fpb=$(sed -n 's/.* is profile \(fnv1a64:[0-9a-f]*\).*/\1/p' "$tmp/err")
  grep -q "planned with profile $fpa" "$tmp/err" && [ -n "$fpb" ] && [ "$fpb" != "$fpa" ] ||
    fail "$p: message does not name both profiles: $(cat "$tmp/err")"
  "$ERGON" emulate --profile "$tmp/a.csv" --plan "$tmp/$p" --blocking-power 70.38 >/dev/null 2>"$tmp/err"
  [ $? -eq 1 ] && grep -q "blocking power of 83.64 W, but this run uses 70.38 W" "$tmp/err" ||
    fail "$p: other blocking power: $(cat "$tmp/err")"
  "$ERGON" emulate --profile "$tmp/a.csv" --plan "$tmp/$p" --blocking-power 83.64 --schedule zbv \
    >/dev/null 2>"$tmp/err"
  [ $? -eq 1 ] && grep -qE "a plan for the 1f1b schedule(, but --schedule| \(its provenance line\), but it was to be read as) zbv" "$tmp/err" ||
    fail "$p: --schedule zbv on a 1f1b plan: $(cat "$tmp/err")"
  "$ERGON" emulate --profile "$tmp/a.csv" --plan "$tmp/$p" --blocking-power 70.38 --force \
    >/dev/null 2>"$tmp/err" || fail "$p: --force refused: $(cat "$tmp/err")"
  grep -q "warning: .*going on (--force)" "$tmp/err" || fail "$p: no warning with --force: $(cat "$tmp/err")"
done
# show plan checks the same
"$ERGON" show plan --profile "$tmp/b.csv" --plan "$tmp/p.json" --blocking-power 83.64 -o "$tmp/x.png" \
  >/dev/null 2>"$tmp/err"; [ $? -eq 1 ] && grep -q "planned with profile $fpa" "$tmp/err" ||
  fail "show plan with another profile: $(cat "$tmp/err")"
"$ERGON" show plan --profile "$tmp/a.csv" --plan "$tmp/p.json" --blocking-power 83.64 -o "$tmp/x.png" \
  >/dev/null 2>"$tmp/err" || fail "show plan with its own profile: $(cat "$tmp/err")"
"$ERGON" show plan --profile "$tmp/b.csv" --plan "$tmp/p.json" --blocking-power 83.64 --force \
  -o "$tmp/x.png" >/dev/null 2>&1 || fail "show plan --force"
# a .py plan whose provenance names another schedule than it is read as
sed 's/"schedule":"1f1b"/"schedule":"gpipe"/' "$tmp/p.py" > "$tmp/q.py"
"$ERGON" emulate --profile "$tmp/a.csv" --plan "$tmp/q.py" --blocking-power 83.64 >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -qE "(names the gpipe schedule but was read as 1f1b: give --schedule gpipe|a plan for the gpipe schedule \(its provenance line\), but it was to be read as 1f1b)" "$tmp/err" ||
  fail ".py read as the wrong schedule: $(cat "$tmp/err")"
# plan envpipe records the clock table
"$ERGON" plan envpipe --profile "$tmp/a.csv" --microbatches 8 --gpu a100 --out "$tmp/e.json" >/dev/null 2>&1 ||
  fail "plan envpipe"
grep -q '"clock_table": *"a100"' "$tmp/e.json" || fail "envpipe plan lacks its clock table: $(grep -A4 provenance "$tmp/e.json")"
# a plan without provenance (Perseus's own literal) is used as it is
sed '/^# ergon provenance/d' "$tmp/p.py" > "$tmp/bare.py"
"$ERGON" emulate --profile "$tmp/b.csv" --plan "$tmp/bare.py" --blocking-power 83.64 >/dev/null ||
  fail "a plan without provenance refused"
# a frontier directory whose profile.csv was replaced
grep -q "^profile_fingerprint,$fpa$" "$tmp/f/frontier-info.csv" || fail "frontier-info lacks the fingerprint"
cp "$tmp/b.csv" "$tmp/f/profile.csv"
"$ERGON" choose --frontier "$tmp/f" --slowdown 1.01 >/dev/null 2>"$tmp/err"; [ $? -eq 1 ] ||
  fail "choose on a replaced profile.csv accepted"
grep -q "was planned with profile $fpa (frontier-info.csv): the profile was replaced" "$tmp/err" ||
  fail "replaced profile message: $(cat "$tmp/err")"
echo "ok: provenance recorded and checked"
