#!/usr/bin/env bash
# option_tables.sh: every `ergon` command parses its options from one declarative table (cli_opt,
# tools/ergon/opts.c) that also prints its --help (issue 39), so options and help cannot drift.
#   1. source: every tools/ergon/cmd_*.c calls cli_opts_parse or cli_opts_parse_all and has no
#      parser of its own: no getopt/getopt_long, no strcmp of an argument with an option
#      ("--name"; only "--help"/"-h" may pick a subcommand's overview), no loop over argv[i].
#      Shown to fail on copies with a hand-rolled loop, a getopt_long loop, and no table call.
#   2. binary: `ergon CMD --help` of every command (and every subcommand of the commands that
#      dispatch: their overview lists them) ends its option list with the line that only
#      cli_opts_help prints ("  -h, --help           this help"); a command `ergon --help`
#      lists that is neither such a leaf nor a known dispatcher fails.
set -u
: "${ERGON_SRC:?}" "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# check_src DIR: prints "FILE:LINE: why" per violation; exit 1 when there is one.
check_src() {
  local bad=0 f base
  for f in "$1"/cmd_*.c; do
    base=tools/ergon/$(basename "$f")
    if ! grep -qE '\bcli_opts_parse(_all)?\s*\(' "$f"; then
      echo "$base: parses no option table (cli_opts_parse, cli_opts_parse_all)"; bad=1
    fi
    grep -nE '\bgetopt(_long(_only)?)?\s*\(|#include <getopt\.h>' "$f" |
      sed "s|^|$base:|; s|\$|  <- getopt: options belong in a cli_opt table|" | grep . && bad=1
    grep -nE '\bstr(n|case|ncase)?cmp\s*\([^;]*"--?[A-Za-z]' "$f" | grep -vE '"(--help|-h)"' |
      sed "s|^|$base:|; s|\$|  <- an option compared by hand|" | grep . && bad=1
    grep -nE 'argv\[(\+\+)?[a-z_]+(\+\+)?\]|for \([^;]*;[^;]*< *argc *;' "$f" | grep -vE 'argv\[(first|optind)\]' |
      sed "s|^|$base:|; s|\$|  <- a loop over argv|" | grep . && bad=1
  done
  return $bad
}

out=$(check_src "$ERGON_SRC/tools/ergon") || fail "commands that parse options by hand:
$out"
echo "ok: every tools/ergon/cmd_*.c parses its options from its table"

# The check catches each way back to hand parsing (on copies of the tree's files).
expect_fail() {
  local got
  got=$(check_src "$tmp/t") && fail "$1 passed"
  echo "$got" | grep -q -- "$2" || fail "$1: the report does not match '$2': $got"
  echo "ok: $1 refused: $(echo "$got" | grep -- "$2" | head -1)"
}
copy() { rm -rf "$tmp/t" && mkdir -p "$tmp/t" && cp "$ERGON_SRC"/tools/ergon/cmd_*.c "$tmp/t/"; }
copy
cat >>"$tmp/t/cmd_sample.c" <<'C'
static int by_hand(int argc, char **argv, const char **out)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--out"))
            *out = argv[++i];
    return 0;
}
C
expect_fail "a hand-rolled strcmp loop" "^tools/ergon/cmd_sample.c:[0-9]*: .*strcmp(argv\[i\], \"--out\").*by hand"
copy
printf '#include <getopt.h>\nstatic int g(int c, char **v)\n{\n    return getopt_long(c, v, "h", 0, 0);\n}\n' \
  >>"$tmp/t/cmd_choose.c"
expect_fail "a getopt_long loop" "^tools/ergon/cmd_choose.c:[0-9]*: .*getopt_long.*getopt:"
copy
sed -i 's/cli_opts_parse_all(/parse_all_by_hand(/; s/cli_opts_parse(/parse_by_hand(/' "$tmp/t/cmd_emulate.c"
expect_fail "no table call" "^tools/ergon/cmd_emulate.c: parses no option table"

# The binary: every command's and subcommand's --help comes from its table.
TABLE_LINE='  -h, --help           this help'
from_table() { "$ERGON" "$@" --help 2>&1 | grep -qxF -- "$TABLE_LINE"; }
# subcommands of the dispatchers (their overviews name them; plan's are read from its list)
plan_methods=$("$ERGON" plan --help | sed -n '/^methods:/,/^$/s/^  \([a-z-]*\) .*/\1/p')
[ -n "$plan_methods" ] || fail "'ergon plan --help' lists no methods"
declare -A subs=([plan]="$plan_methods" [profile]="sim logs run sparse" [show]="plan frontier power"
                 [shard]="analyze profile comm search" [gpu]="list clocks energy lock reset"
                 [fleet]="simulate")
cmds=$("$ERGON" --help | sed -n '/^commands:/,/^$/s/^  \([a-z-]*\) .*/\1/p')
[ "$(wc -w <<<"$cmds")" -ge 10 ] || fail "'ergon --help' lists too few commands: $cmds"
n=0
for c in $cmds; do
  [ "$c" = version ] && continue  # no options
  if [ -z "${subs[$c]+x}" ]; then
    from_table "$c" || fail "'ergon $c --help' is not printed from an option table"; n=$((n + 1))
    continue
  fi
  # a dispatcher that is also a command of its own (fleet) prints its table too
  [ "$c" = fleet ] && { from_table fleet || fail "'ergon fleet --help' is not from a table"; n=$((n + 1)); }
  for s in ${subs[$c]}; do
    from_table "$c" "$s" || fail "'ergon $c $s --help' is not printed from an option table"
    n=$((n + 1))
  done
done
echo "ok: the --help of $n commands and subcommands is printed from their tables"
