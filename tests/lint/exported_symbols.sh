#!/usr/bin/env bash
# exported_symbols.sh: libergon.so exports exactly the public API: every dynamic symbol it
# defines starts with erg_, every function a public header declares (ERG_API, include/ergon/)
# is exported, every exported function is declared in a public header, and the SONAME is
# libergon.so.MAJOR (what libergon0 and the binding load).
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_BIN_DIR:?}" "${ERGON_SRC:?}"
command -v nm >/dev/null && command -v readelf >/dev/null || skip_or_fail "nm/readelf (binutils) missing"
lib="$ERGON_BIN_DIR/libergon.so"
[ -r "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libergon.so.0 ] || fail "SONAME is '$soname', not libergon.so.0"

# Defined dynamic symbols (functions and data), without the linker's own.
nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"
[ -s "$tmp/exported" ] || fail "nm -D shows no symbol in $lib"
grep -v '^erg_' "$tmp/exported" >"$tmp/bad"
[ -s "$tmp/bad" ] && fail "exported symbols outside the erg_ API ($(wc -l <"$tmp/bad")): $(head -20 "$tmp/bad" | tr '\n' ' ')"

# Functions the public headers declare (ERG_API ... erg_name( ), possibly over several lines.
python3 - "$ERGON_SRC"/include/ergon/*.h >"$tmp/declared" <<'PY' || fail "cannot read the headers"
import re, sys
names = set()
for path in sys.argv[1:]:
    text = open(path).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    for m in re.finditer(r"\bERG_API\b([^;{]*?)\b(erg_[A-Za-z0-9_]+)\s*\(", text):
        names.add(m.group(2))
    # A public function declared without ERG_API would be hidden: find those too.
    for m in re.finditer(r"^(?!\s*(?:#|typedef|return|\*))[A-Za-z_][^;{}()#]*?\b(erg_[a-z0-9_]+)\s*\([^;{}]*\)\s*(?:ERG_PRINTF\([^)]*\)\s*)?;",
                         text, flags=re.M):
        if "ERG_API" not in m.group(0) and "(*" not in m.group(0):
            print("NOAPI " + m.group(1))
for n in sorted(names):
    print(n)
PY
grep '^NOAPI ' "$tmp/declared" && fail "public functions declared without ERG_API (hidden, unusable): $(grep '^NOAPI ' "$tmp/declared" | cut -d' ' -f2 | tr '\n' ' ')"
[ "$(wc -l <"$tmp/declared")" -gt 50 ] || fail "found only $(wc -l <"$tmp/declared") declarations in include/ergon/"
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
[ -z "$missing" ] || fail "declared in include/ergon/ but not exported: $(echo $missing)"
# Exported functions that no public header declares (internal helpers marked ERG_API).
nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort -u >"$tmp/functions"
extra=$(comm -23 "$tmp/functions" "$tmp/declared")
[ -z "$extra" ] || fail "exported but not declared in include/ergon/: $(echo $extra)"
echo "ok: $(wc -l <"$tmp/exported") symbols exported, all erg_, all $(wc -l <"$tmp/declared") declared functions among them; SONAME $soname"
