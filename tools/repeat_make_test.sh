#!/usr/bin/env bash
# repeat_make_test.sh [N] [REV] [DIR]: the determinism check of `make test` (docs/testing.md).
# Clones this repository at REV (default HEAD) into DIR/main (default a new temporary
# directory; the clone needs nothing beside it: the test data is in the repository), runs `make test` there
# N times (default 3) as CI does (CI=true), and compares the runs: the fuzz stage's verdict per
# target and ctest's verdict per test and stage (Passed / Skipped / Failed...) must be the same
# in every run. Prints one line per run, then "identical" or the differences; exits 1 when the
# runs differ or a run failed. Each run's log stays in DIR/run-K.log.
set -uo pipefail
n=${1:-3}; rev=${2:-HEAD}
src=$(cd "$(dirname "$0")/.." && pwd)
dir=${3:-$(mktemp -d /tmp/ergon-repeat.XXXXXX)}
mkdir -p "$dir"
[ -e "$dir/main" ] || git clone -q "$src" "$dir/main" || exit 1
git -C "$dir/main" checkout -q "$(git -C "$src" rev-parse "$rev")" || exit 1
echo "repeat_make_test: $n runs of make test on $(git -C "$dir/main" rev-parse --short HEAD) in $dir/main"
# verdicts LOG: "stage<TAB>test<TAB>verdict" lines, sorted (stage 0 = fuzz, then one per ctest run)
verdicts() {
  awk '
    /^(replaying|fuzzing|FAILED:) / { print "fuzz\t" $0; next }
    /^Test project / { stage++ }
    /Test +#[0-9]+: / {
      line = $0; sub(/.*Test +#[0-9]+: /, "", line)
      name = line; sub(/ .*/, "", name)
      v = line; sub(/^[^ ]+ [.* ]*/, "", v); sub(/ +[0-9.]+ sec.*/, "", v)
      print "ctest" stage "\t" name "\t" v
    }' "$1" | sort
}
rc_all=0
for ((k = 1; k <= n; k++)); do
  start=$(date +%s)
  (cd "$dir/main" && CI=true make test) >"$dir/run-$k.log" 2>&1
  rc=$?
  verdicts "$dir/run-$k.log" >"$dir/verdicts-$k.txt"
  echo "run $k: make test exit $rc in $(( $(date +%s) - start )) s; $(grep -c . "$dir/verdicts-$k.txt") verdicts:" \
       "$(cut -f3 "$dir/verdicts-$k.txt" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
  [ $rc -eq 0 ] || rc_all=1
done
same=1
for ((k = 2; k <= n; k++)); do
  if ! diff -u "$dir/verdicts-1.txt" "$dir/verdicts-$k.txt" >"$dir/diff-$k.txt"; then
    same=0; echo "run $k differs from run 1:"; cat "$dir/diff-$k.txt"
  fi
done
[ $same -eq 1 ] && echo "identical: $n runs, the same verdict for every test and fuzz target" || rc_all=1
exit $rc_all
