# skip_lib.bash: the one way a CLI test skips (sourced, not a test itself; docs/testing.md,
# "Skips"). Under CI=true nothing skips but what is skipped by design.
#   skip_or_fail MSG    a missing prerequisite (a tool, a fake library, root): "SKIP: MSG" and
#                       exit 77; under CI=true "FAIL: ... MSG" and exit 1.
#   skip_by_design MSG  a skip docs/testing.md lists (the ASan build's "Python cannot load an
#                       instrumented library", ...): exit 77, CI or not.
#   note_or_fail MSG    a part of the test cannot run here: "note: MSG" and go on; under CI=true
#                       fail instead.
#   need_data PATH...   test data (tests/data, tests/data/published) is part of the repository:
#                       a missing file fails the test, CI or not.
skip_or_fail() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL: CI=true: a missing prerequisite fails, it does not skip: $*"; exit 1
  fi
  echo "SKIP: $*"; exit 77
}
skip_by_design() { echo "SKIP (by design): $*"; exit 77; }
note_or_fail() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL: CI=true: a missing prerequisite fails, it does not skip part of the test: $*"; exit 1
  fi
  echo "note: $* (this part skipped)"
}
need_data() {
  local p
  for p in "$@"; do
    [ -r "$p" ] || { echo "FAIL: $p is missing: the test data is part of the repository" \
      "(tests/data/published/README.md names each published file)"; exit 1; }
  done
}
