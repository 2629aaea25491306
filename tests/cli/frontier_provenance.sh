#!/usr/bin/env bash
# frontier_provenance.sh (issue 38 item 8): the files of a frontier directory belong to one run
# of `plan perseus`. plans.ergon and frontier-info.csv carry the frontier's fingerprint (and
# frontier-info.csv the profile's), so choose refuses another model's plans.ergon copied into
# the directory, and a directory whose plans.ergon and frontier-info.csv come from two runs
# (what two concurrent `plan --out` into one directory produced once in 150 tries), naming the
# files; the writers of a directory take its lock, so a second writer waits for the first (and
# gives up, naming the directory, after --lock-wait) instead of interleaving its files.
set -u
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages 4 -o "$tmp/a.csv" 2>/dev/null || fail "profile sim a"
"$ERGON" profile sim --gpu a100 --model gpt3-2.7b --stages 4 -o "$tmp/b.csv" 2>/dev/null || fail "profile sim b"
plan() { "$ERGON" plan perseus --stages 4 --microbatches 8 --blocking-power 83.64 "$@"; }
plan --profile "$tmp/a.csv" --unit-time 0.002 --out "$tmp/a" >/dev/null 2>&1 || fail "plan a"
plan --profile "$tmp/b.csv" --unit-time 0.002 --out "$tmp/b" >/dev/null 2>&1 || fail "plan b"
plan --profile "$tmp/a.csv" --unit-time 0.004 --out "$tmp/a4" >/dev/null 2>&1 || fail "plan a at 4 ms"
"$ERGON" choose --frontier "$tmp/a" --slowdown 1.01 >/dev/null || fail "choose on a whole directory"

# 1. both files carry the fingerprint, the same one
fa=$(sed -n 's/^frontier_fingerprint,//p' "$tmp/a/frontier-info.csv")
case $fa in fnv1a64:????????????????) ;; *) fail "frontier-info.csv: frontier_fingerprint '$fa'" ;; esac
grep -qx "frontier_fingerprint $fa" "$tmp/a/plans.ergon" || fail "plans.ergon lacks $fa: $(head -8 "$tmp/a/plans.ergon")"
fb=$(sed -n 's/^frontier_fingerprint,//p' "$tmp/b/frontier-info.csv")
fa4=$(sed -n 's/^frontier_fingerprint,//p' "$tmp/a4/frontier-info.csv")
[ -n "$fb" ] && [ "$fb" != "$fa" ] && [ -n "$fa4" ] && [ "$fa4" != "$fa" ] || fail "fingerprints $fa $fb $fa4"
# the same inputs give the same fingerprint (it is the frontier's, not a random id)
plan --profile "$tmp/a.csv" --unit-time 0.002 --out "$tmp/a2" >/dev/null 2>&1 || fail "plan a again"
cmp -s "$tmp/a/plans.ergon" "$tmp/a2/plans.ergon" && cmp -s "$tmp/a/frontier-info.csv" "$tmp/a2/frontier-info.csv" ||
  fail "two runs on the same inputs differ"

# 2. another model's plans.ergon in the directory (it was accepted: profiled 2.02 s against a
# stored estimate of 3.75 s, exit 0): alone, its plans are not frontier.csv's rows; with that
# model's frontier.csv, its fingerprint is not frontier-info.csv's
cp -r "$tmp/a" "$tmp/mix"; cp "$tmp/b/plans.ergon" "$tmp/mix/plans.ergon"
"$ERGON" choose --frontier "$tmp/mix" --slowdown 1.5 >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] || fail "another model's plans.ergon accepted (exit $rc): $(cat "$tmp/out")"
grep -qF "$tmp/mix/frontier.csv:2 does not list plan 0 of $tmp/mix/plans.ergon" "$tmp/err" ||
  fail "mix message: $(cat "$tmp/err")"
cp "$tmp/b/frontier.csv" "$tmp/mix/frontier.csv"
"$ERGON" choose --frontier "$tmp/mix" --slowdown 1.5 >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] || fail "another model's plans.ergon and frontier.csv accepted (exit $rc): $(cat "$tmp/out")"
grep -qF "$tmp/mix/plans.ergon is frontier $fb, but $tmp/mix/frontier-info.csv names frontier $fa" "$tmp/err" ||
  fail "mix message: $(cat "$tmp/err")"

# 3. two runs of one model (same profile.csv, other unit time): plans.ergon of one, the
# frontier-info.csv of the other -- what interleaved writers leave
cp -r "$tmp/a" "$tmp/mix2"; cp "$tmp/a4/plans.ergon" "$tmp/a4/frontier.csv" "$tmp/mix2/"
"$ERGON" choose --frontier "$tmp/mix2" --slowdown 1.01 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -qF "is frontier $fa4, but $tmp/mix2/frontier-info.csv names frontier $fa" "$tmp/err" ||
  fail "two runs' files accepted (exit $rc): $(cat "$tmp/err")"
"$ERGON" show frontier --frontier "$tmp/mix2" -o "$tmp/x.png" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -qF "names frontier $fa" "$tmp/err" || fail "show frontier on a mix: $(cat "$tmp/err")"
# frontier.csv of another run beside the right plans.ergon: its rows are not the plans'
cp -r "$tmp/a" "$tmp/mix3"; cp "$tmp/a4/frontier.csv" "$tmp/mix3/"
"$ERGON" choose --frontier "$tmp/mix3" --slowdown 1.01 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -qF "$tmp/mix3/frontier.csv" "$tmp/err" && grep -qF "$tmp/mix3/plans.ergon" "$tmp/err" ||
  fail "a foreign frontier.csv accepted (exit $rc): $(cat "$tmp/err")"
# a plans.ergon without a fingerprint (older ergon) beside a frontier-info.csv with one
cp -r "$tmp/a" "$tmp/old"; sed -i '/^frontier_fingerprint /d' "$tmp/old/plans.ergon"
"$ERGON" choose --frontier "$tmp/old" --slowdown 1.01 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -qF "$tmp/old/plans.ergon carries no frontier fingerprint, but $tmp/old/frontier-info.csv names frontier $fa" "$tmp/err" ||
  fail "unfingerprinted plans.ergon accepted (exit $rc): $(cat "$tmp/err")"
# an older directory (neither file has one) is used as it is
sed -i '/^frontier_fingerprint,/d' "$tmp/old/frontier-info.csv"
"$ERGON" choose --frontier "$tmp/old" --slowdown 1.01 >/dev/null || fail "an older directory refused"
# a sample keeps its source's fingerprint (its plans come from that run)
"$ERGON" sample "$tmp/a" "$tmp/s" -n 5 >/dev/null || fail "sample"
grep -qx "frontier_fingerprint $fa" "$tmp/s/plans.ergon" || fail "sample: $(head -8 "$tmp/s/plans.ergon")"
"$ERGON" choose --frontier "$tmp/s" --slowdown 1.01 >/dev/null || fail "choose on a sample"

# 4. the writers' lock: while another process holds DIR's lock, plan waits --lock-wait seconds,
# then fails naming DIR and leaves the earlier frontier as it was; once the lock is free it
# writes. (The lock is held for the whole run, so the verdict does not depend on timing.)
cp -r "$tmp/a" "$tmp/keep"
python3 - "$ERGON" "$tmp" <<'EOF' || fail "lock"
import fcntl, os, subprocess, sys
ergon, tmp = sys.argv[1:3]
d = os.path.join(tmp, "a")
fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
r = subprocess.run([ergon, "plan", "perseus", "--profile", os.path.join(tmp, "b.csv"), "--stages", "4",
                    "--microbatches", "8", "--blocking-power", "83.64", "--unit-time", "0.002",
                    "--out", d, "--lock-wait", "0.3"], capture_output=True, text=True)
if r.returncode != 1 or "%s: another process is writing or reading this frontier directory" % d not in r.stderr:
    sys.exit("plan under a held lock: exit %d: %s" % (r.returncode, r.stderr))
fcntl.flock(fd, fcntl.LOCK_UN)
os.close(fd)
EOF
for f in plans.ergon frontier.csv frontier-info.csv profile.csv; do
  cmp -s "$tmp/a/$f" "$tmp/keep/$f" || fail "a refused writer changed $f"
done
plan --profile "$tmp/b.csv" --unit-time 0.002 --out "$tmp/a" --lock-wait 0.3 >/dev/null 2>"$tmp/err" ||
  fail "plan once the lock is free: $(cat "$tmp/err")"
cmp -s "$tmp/a/plans.ergon" "$tmp/b/plans.ergon" || fail "the rewritten directory is not b's frontier"
"$ERGON" choose --frontier "$tmp/a" --slowdown 1.01 >/dev/null || fail "choose after the rewrite"
echo "ok: a frontier directory's files are one run's"
