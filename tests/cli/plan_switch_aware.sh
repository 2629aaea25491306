#!/usr/bin/env bash
# plan_switch_aware.sh: `ergon plan perseus --switch-latency L` plans for the latency
# (issue 26 item 4). On a small profile whose forward pass gains little from a fast clock and
# whose backward pass gains much (so the latency-free plans switch at every instruction), with
# L = 0.2 s (a fifth of a forward pass):
#  - the latency-free 1%-slowdown plan, emulated at L, runs late (past 1.01 x all-max);
#  - the switch-aware 1%-slowdown plan, emulated at L by `ergon emulate`, meets the deadline,
#    with fewer clock switches, still saving energy, and `choose` reports exactly the emulated
#    time and energy (the frontier is honest at L);
#  - --switch-latency 0 writes byte for byte the frontier of a run without the option.
set -u
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
awk 'BEGIN { print "stage,instruction,frequency,time,energy"
  split("1400 1300 1200 1100 1000 900 800", F, " ")
  for (s = 0; s < 2; s++) for (k = 0; k < 2; k++) for (i = 1; i <= 7; i++) {
    f = F[i]; base = k ? 2.0 : 1.0; cb = k ? 0.9 : 0.5
    t = base * (1 + 0.1 * s) * ((1 - cb) + cb * 1400 / f); p = 100 + 200 * (f / 1400) ^ 2.5
    printf "%d,%s,%d,%.6f,%.6f\n", s, k ? "backward" : "forward", f, t, p * t } }' >"$tmp/p.csv"
L=0.2
plan() { "$ERGON" plan perseus --profile "$tmp/p.csv" --blocking-power 60 --stages 2 \
  --microbatches 8 --unit-time 0.01 --quiet "$@" 2>"$tmp/err" || fail "plan $*: $(cat "$tmp/err")"; }
plan --out "$tmp/u"
plan --out "$tmp/z" --switch-latency 0
plan --out "$tmp/a" --switch-latency $L
for f in frontier.csv plans.ergon; do
  cmp -s "$tmp/u/$f" "$tmp/z/$f" || fail "--switch-latency 0 changed $f"
done
grep -q "^switch_latency_s,0.2" "$tmp/a/frontier-info.csv" || fail "frontier-info.csv: no latency"
grep -q "^switch_latency_s" "$tmp/u/frontier-info.csv" && fail "a latency-free frontier-info.csv names a latency"
for d in u a; do
  "$ERGON" choose --frontier "$tmp/$d" --slowdown 1.01 --out "$tmp/$d.json" --json \
    >"$tmp/$d.choice" 2>"$tmp/err" || fail "choose $d: $(cat "$tmp/err")"
  "$ERGON" emulate --profile "$tmp/p.csv" --plan "$tmp/$d.json" --blocking-power 60 \
    --switch-latency $L --json >"$tmp/$d.em" 2>/dev/null || fail "emulate $d"
done
num() { sed -n "s/.*\"$2\": \([-0-9.e+]*\).*/\1/p" "$1"; }
tmax=$(num "$tmp/a.choice" all_max_time_s); emax=$(num "$tmp/a.choice" all_max_energy_j)
tu=$(num "$tmp/u.em" time_s); ta=$(num "$tmp/a.em" time_s)
su=$(num "$tmp/u.em" num_switches); sa=$(num "$tmp/a.em" num_switches)
ea=$(num "$tmp/a.em" energy_j)
echo "deadline $(awk -v t="$tmax" 'BEGIN{print 1.01*t}') s: latency-free plan at L=$L: $tu s," \
  "$su switches; switch-aware: $ta s, $sa switches, $ea J (all-max $emax J)"
awk -v t="$tu" -v m="$tmax" 'BEGIN { exit !(t > 1.01 * m) }' ||
  fail "the latency-free plan meets the deadline at L (no case to make): $tu vs $tmax"
awk -v t="$ta" -v m="$tmax" 'BEGIN { exit !(t <= 1.01 * m * (1 + 1e-12)) }' ||
  fail "the switch-aware plan runs late at L: $ta s vs 1.01 x $tmax s"
[ "$sa" -lt "$su" ] || fail "the switch-aware plan switches as often: $sa vs $su"
awk -v e="$ea" -v m="$emax" 'BEGIN { exit !(e < 0.97 * m) }' ||
  fail "the switch-aware plan saves less than 3%: $ea J vs all-max $emax J"
# honest: choose's values are the emulation's
for k in time_s energy_j; do
  c=$(num "$tmp/a.choice" $k); e=$(num "$tmp/a.em" $k)
  awk -v c="$c" -v e="$e" 'BEGIN { d = c - e; exit !(d < 1e-9 * e && d > -1e-9 * e) }' ||
    fail "choose says $k $c, emulate at L says $e"
done
echo "OK"
