#!/usr/bin/env bash
# private_names.sh: the private-name rule (ARCHITECTURE.md, "Names"). Every symbol with external
# linkage that libergon defines is either public (erg_..., exported by libergon.so, which
# exported_symbols.sh ties to the public headers) or private (erg__...); libergon.so exports no
# erg__ symbol. Run on libergon_static.a (nm -g --defined-only: every object's globals) and on
# libergon.so, and first on a copy of the archive with a deliberately misnamed global, which
# must fail.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_BIN_DIR:?}"
command -v nm >/dev/null && command -v ar >/dev/null || skip_or_fail "nm/ar (binutils) missing"
a="$ERGON_BIN_DIR/libergon_static.a"
so="$ERGON_BIN_DIR/libergon.so"
for f in "$a" "$so"; do [ -r "$f" ] || { echo "FAIL: $f not built"; exit 1; }; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | sort -u >"$tmp/public"
[ "$(grep -c '^erg_' "$tmp/public")" -gt 100 ] || { echo "FAIL: nm -D shows too few erg_ symbols in $so"; exit 1; }

# check ARCHIVE: print "member: symbol" for each global that breaks the rule; status 1 if any.
check() {
  nm -A -g --defined-only "$1" 2>/dev/null \
    | awk 'NF == 3 { sub(/:[0-9a-f]*$/, "", $1); n = split($1, p, ":"); print p[n], $3 }' \
    | sort -u >"$tmp/globals"
  [ "$(wc -l <"$tmp/globals")" -gt 300 ] || { echo "too few globals in $1 ($(wc -l <"$tmp/globals"))"; return 1; }
  # __odr_asan.NAME: AddressSanitizer's one-definition-rule marker of the global NAME (the
  # sanitizer build), checked through NAME itself
  awk 'NR == FNR { pub[$1] = 1; next } { sub(/^__odr_asan\./, "", $2) }
       $2 !~ /^erg__[a-z0-9]/ && !($2 in pub) { print $1 ": " $2 }' \
    "$tmp/public" "$tmp/globals" >"$tmp/bad"
  [ ! -s "$tmp/bad" ]
}

# 1. The check can fail: a global named like the old server prefix, added to a copy.
if command -v "${CC:-cc}" >/dev/null; then
  echo 'int srv_misnamed_for_the_test(void) { return 1; }' >"$tmp/misnamed.c"
  "${CC:-cc}" -c "$tmp/misnamed.c" -o "$tmp/misnamed.o" || { echo "FAIL: cannot compile the probe"; exit 1; }
  cp "$a" "$tmp/copy.a" && ar r "$tmp/copy.a" "$tmp/misnamed.o" 2>/dev/null
  if check "$tmp/copy.a" || ! grep -q 'misnamed.o: srv_misnamed_for_the_test' "$tmp/bad"; then
    echo "FAIL: the check passed an archive with the global srv_misnamed_for_the_test"; exit 1
  fi
  echo "ok: a misnamed global is caught ($(grep misnamed.o "$tmp/bad"))"
else
  note_or_fail "no C compiler: the check's own failure case"
fi

# 2. The library itself.
if ! check "$a"; then
  echo "FAIL: $(wc -l <"$tmp/bad") global symbols of libergon_static.a break the private-name rule" \
    "(public: erg_ and declared in include/ergon/; private: erg__<module>_...; file-local: static):"
  sed 's/^/  /' "$tmp/bad"
  exit 1
fi
grep '^erg__' "$tmp/public" >"$tmp/leak"
[ -s "$tmp/leak" ] && { echo "FAIL: libergon.so exports private symbols: $(tr '\n' ' ' <"$tmp/leak")"; exit 1; }
echo "ok: $(wc -l <"$tmp/globals") globals of libergon_static.a: $(grep -c ' erg__' "$tmp/globals") private (erg__), the rest public; libergon.so exports no erg__"
