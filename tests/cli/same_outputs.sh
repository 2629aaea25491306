#!/usr/bin/env bash
# same_outputs.sh: this build's frontiers, plan files, EnvPipe and Zeus plans, emulations, sparse
# profiling, `ergon shard` output on the published HLO and an `ergon serve` dump are byte for byte
# those recorded in tests/data/same_outputs.digest (tools/same_outputs.sh writes them, --digest
# hashes them). A refactoring keeps the digest; a change meant to change outputs updates it in
# the same commit (ERGON_UPDATE_DIGEST=1 ctest -R cli/same_outputs), and the digest's diff names
# the outputs it changed (tools/same_outputs.sh --rev REV shows how). About 3 s of CPU.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON:?path of the ergon binary}"
src=${ERGON_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
ref=$src/tests/data/same_outputs.digest
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
need_data "$src/tests/data/published/perseus-sosp24/stage_profile" "$src/tests/data/published/hlo"
"$src/tools/same_outputs.sh" "$ERGON" "$T/out" >"$T/log" 2>&1
rc=$?
[ $rc = 0 ] || { echo "FAIL: tools/same_outputs.sh exited $rc"; cat "$T/log"; exit 1; }
if grep -q '^note:' "$T/log"; then
    # a missing part (curl) would change the digest: say which
    grep '^note:' "$T/log"
fi
"$src/tools/same_outputs.sh" --digest "$T/out" >"$T/digest" || { echo "FAIL: digest"; exit 1; }
# the digest must see what was written: every case directory, the dump, the HLO plans
for want in bloom+a100_sxm_bf16/perseus/ serve/dump/ hlo-gpt2_tp-1_n_layer-2/search-2x2.out; do
    grep -q "  $want\$" "$T/digest" || { echo "FAIL: no $want in the digest"; exit 1; }
done
if [ "${ERGON_UPDATE_DIGEST:-}" = 1 ]; then
    cp "$T/digest" "$ref"
    echo "wrote $ref ($(wc -l <"$ref") outputs)"
    exit 0
fi
if diff "$ref" "$T/digest" >"$T/diff"; then
    echo "ok - $(wc -l <"$ref") outputs identical to tests/data/same_outputs.digest"
    exit 0
fi
echo "FAIL: outputs differ from tests/data/same_outputs.digest (< recorded, > this build):"
grep '^[<>]' "$T/diff" | awk '{print $1, $3}' | sort -k2 -s | head -40
echo "If the change is meant: ERGON_UPDATE_DIGEST=1 ctest -R cli/same_outputs, and commit the"
echo "digest with it. To see what changed: tools/same_outputs.sh --rev HEAD $ERGON"
exit 1
