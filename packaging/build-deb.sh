#!/usr/bin/env bash
# build-deb.sh OUTDIR [--no-lintian]: build the Debian packages of ergon (libergon0,
# libergon-dev, ergon, ergond, python3-ergon) with dpkg-buildpackage/debhelper, then check
# them with lintian (overrides: packaging/debian/*.lintian-overrides). Used by `make deb`
# and tests/cli/install_packages.sh.
#
# The build happens in a copy of the source tree (git-tracked and untracked, not ignored
# files: no build directories) under OUTDIR/src, with packaging/debian as debian/, so it
# never touches the working tree or its build directories. The .deb files land in OUTDIR.
# Needs: debhelper, dpkg-dev, lintian (`make deb-deps`) and the build packages of `make deps`.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: build-deb.sh OUTDIR [--no-lintian]}
lintian=1
[ "${2:-}" = --no-lintian ] && lintian=0
for t in dpkg-buildpackage dh; do
  command -v "$t" >/dev/null || { echo "build-deb.sh: $t missing: run 'make deb-deps' (Debian packages dpkg-dev debhelper)" >&2; exit 1; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
version=$(sed -n 's/^ergon (\([^)]*\)).*/\1/p;q' "$here/packaging/debian/changelog")
src="$out/src/ergon-$version"
rm -rf "$out/src"
mkdir -p "$src"
# The source as git sees it (tracked + untracked, not ignored), else everything but builds.
if git -C "$here" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$here" && git ls-files -z --cached --others --exclude-standard | \
     xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh | \
     tar --null -T - -cf -) | tar -xf - -C "$src"
else
  (cd "$here" && tar --exclude='./build*' --exclude=./.git -cf - .) | tar -xf - -C "$src"
fi
rm -rf "$src/debian"
cp -a "$src/packaging/debian" "$src/debian"
# Reproducible dates in the generated files (man pages): the changelog's.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(date -d "$(sed -n 's/^ -- .*>  //p' "$src/debian/changelog" | head -1)" +%s)}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
echo "build-deb.sh: building ergon $version in $src (-j$jobs)"
(cd "$src" && dpkg-buildpackage -b -us -uc -j"$jobs") >"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log" >&2
  echo "build-deb.sh: dpkg-buildpackage failed (log: $out/build.log)" >&2
  exit 1
}
changes=$(ls "$out"/src/ergon_"$version"_*.changes)
mv "$out"/src/*.deb "$out"/src/*.buildinfo "$changes" "$out"/
changes="$out/$(basename "$changes")"
ls -1 "$out"/*.deb
if [ $lintian = 1 ]; then
  if ! command -v lintian >/dev/null; then
    echo "build-deb.sh: lintian missing: run 'make deb-deps'" >&2
    exit 1
  fi
  # Errors and warnings fail the build; overrides are in packaging/debian/*.lintian-overrides.
  echo "build-deb.sh: lintian $(basename "$changes")"
  lintian --fail-on error,warning --tag-display-limit 0 "$changes"
fi
rm -rf "$out/src"
