#!/usr/bin/env bash
# show frontier draws one source of numbers: with the profile the frontier was planned with
# (frontier-info.csv, profile.csv), the line is the plans' profiled values (as choose, compare
# and the markers), labelled so, with an all-max point; the title names the directory, ranks,
# microbatches, schedule and blocking power (GPU). A directory without them is drawn from the
# planner's estimates, labelled so.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan-fontconfig.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
: "${ERGON:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$ERGON" profile sim --gpu a100 --model gpt3-xl --stages 4 -o "$tmp/p.csv" 2>/dev/null || fail "profile sim"
"$ERGON" plan perseus --profile "$tmp/p.csv" --stages 4 --microbatches 8 --gpu A100 \
  --unit-time 0.002 --out "$tmp/front" >/dev/null 2>&1 || fail "plan"
# cairo writes glyphs, not strings: check through the PDF text layer instead when pdftotext exists
if command -v pdftotext >/dev/null; then
  "$ERGON" show frontier --frontier "$tmp/front" -o "$tmp/f.pdf" 2>/dev/null || fail "show pdf"
  t=$(pdftotext "$tmp/f.pdf" - | tr '\n' ' ')
  case $t in *"p.csv in front: 4 ranks, 8 microbatches, 1f1b, 83.64 W blocking, A100 (profiled values)"*) ;;
    *) fail "title: $t" ;; esac
  case $t in *"Perseus frontier (profiled values)"*"all-max clocks"*) ;; *) fail "legend: $t" ;; esac
  rm "$tmp/front/frontier-info.csv"
  "$ERGON" show frontier --frontier "$tmp/front" -o "$tmp/g.pdf" 2>/dev/null || fail "show without info"
  t=$(pdftotext "$tmp/g.pdf" - | tr '\n' ' ')
  case $t in *"planner estimates"*) ;; *) fail "estimates not labelled: $t" ;; esac
  echo "ok: frontier picture labelled"
else
  msg="pdftotext (poppler-utils, in the Makefile's DEB_PACKAGES) not installed to read the picture's text"
  skip_or_fail "$msg"
fi
