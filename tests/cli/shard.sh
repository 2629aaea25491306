#!/bin/bash
# shard.sh: `ergon shard` end to end: usage errors, golden analysis of the 2-layer BERT,
# search with DP and ILP, annotated output that re-parses, JSON (parameters' shardings), comm
# report, the cost file (profile --out-profiles, search --profiles --profiles-only).
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
fail() { echo "FAIL: $*" >&2; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
E=$ERGON
D=$ERGON_TEST_DATA

$E shard --help | grep -q "ergon shard analyze" || fail "help"
$E shard analyze --hlo "$D/shard_mlp.hlo" >/dev/null 2>&1; [ $? = 2 ] || fail "missing --mesh must be a usage error"
$E shard analyze --hlo "$D/shard_mlp.hlo" --mesh 1x1 >/dev/null 2>&1; [ $? = 2 ] || fail "1x1 mesh"
$E shard frob --hlo x --mesh 1x2 >/dev/null 2>&1; [ $? = 2 ] || fail "unknown action"
printf 'HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] add(a, zz)\n}\n' > "$T/bad.hlo"
out=$($E shard analyze --hlo "$T/bad.hlo" --mesh 1x2 2>&1); [ $? = 1 ] || fail "bad module exit"
echo "$out" | grep -q "bad.hlo:4:3: operand 'zz'" || fail "error message: $out"
$E shard analyze --hlo "$T/nope.hlo" --mesh 1x2 >/dev/null 2>&1; [ $? = 1 ] || fail "missing file"
# Each action has its own --help.
h1=$($E shard analyze --help); h2=$($E shard search --help); h3=$($E shard profile --help)
echo "$h1" | grep -q "^usage: ergon shard analyze" && echo "$h2" | grep -q "^usage: ergon shard search" \
  && echo "$h3" | grep -q "^usage: ergon shard profile" || fail "per-action help"
echo "$h1" | grep -q -- "--time-limit" && fail "analyze help lists search options"
echo "$h2" | grep -q -- "--time-limit" || fail "search help lacks --time-limit"
# ... and takes only what its help lists (one table per action), naming the action.
out=$($E shard analyze --hlo "$D/shard_mlp.hlo" --mesh 1x2 --method ilp 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -qF "ergon shard analyze: unknown option '--method'" || fail "analyze --method ($rc): $out"
out=$($E shard comm --hlo "$D/shard_mlp.hlo" --mesh 1x2 --keep 0 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -qF "ergon shard comm: --keep expects an integer in [1, 4096], got '0'" || fail "comm --keep 0 ($rc): $out"
# Malformed modules: file:line and exit 1.
printf 'HloModule m\nENTRY e {\n  a = f32[2,3] parameter(0)\n  b = f32[3,4] parameter(1)\n  ROOT d = f32[2,4] dott(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n' > "$T/dott.hlo"
out=$($E shard analyze --hlo "$T/dott.hlo" --mesh 1x2 2>&1); [ $? = 1 ] || fail "unknown opcode exit"
echo "$out" | grep -q "dott.hlo:5:21: unknown opcode 'dott'" || fail "unknown opcode message: $out"
sed 's/dott/dot/; s/f32\[2,4\] dot/f32[2,5] dot/' "$T/dott.hlo" > "$T/shape.hlo"
out=$($E shard analyze --hlo "$T/shape.hlo" --mesh 1x2 2>&1); [ $? = 1 ] || fail "dot shape exit"
echo "$out" | grep -q "shape.hlo:5:3: dot 'd': declared result shape" || fail "dot shape message: $out"
sed 's/dott/dot/; s/lhs_contracting_dims={1}/lhs_contracting_dims={3}/' "$T/dott.hlo" > "$T/cdim.hlo"
out=$($E shard analyze --hlo "$T/cdim.hlo" --mesh 1x2 2>&1); [ $? = 1 ] || fail "contracting dim exit"
echo "$out" | grep -q "cdim.hlo:5:3: dot 'd': lhs_contracting_dims names dim 3" || fail "contracting message: $out"
printf 'HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] add(a, c)\n  c = f32[2] add(b, a)\n  ROOT r = f32[2] negate(c)\n}\n' > "$T/cyc.hlo"
out=$($E shard analyze --hlo "$T/cyc.hlo" --mesh 1x2 2>&1); [ $? = 1 ] || fail "cycle exit"
echo "$out" | grep -Eq "cyc.hlo:[45]:3: '[bc]' depends on itself" || fail "cycle message: $out"
printf 'HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT b = f32[4] exponential(a)\n}\n' > "$T/nodot.hlo"
out=$($E shard analyze --hlo "$T/nodot.hlo" --mesh 1x2 2>&1); [ $? = 1 ] || fail "no-dot exit"
echo "$out" | grep -q "has no dot or convolution, nothing to shard" || fail "no-dot message: $out"
# A shape whose element count overflows 64 bits is a parse error naming it (2^32 x 2^32 f32
# elements wrapped to 0, and search reported 0 MB per device with exit 0).
printf 'HloModule m\nENTRY e {\n  x = f32[4294967296,4294967296] parameter(0)\n  w = f32[4294967296,4294967296] parameter(1)\n  ROOT d = f32[4294967296,4294967296] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n' > "$T/huge.hlo"
out=$($E shard search --hlo "$T/huge.hlo" --mesh 1x2 2>&1); [ $? = 1 ] || fail "overflowing shape exit: $out"
echo "$out" | grep -qF "huge.hlo:3:7: shape 'f32[4294967296,4294967296]' is too large" || fail "overflowing shape message: $out"
# A convolution with a zero-size dim is an empty GEMM: costed, not divided by (a zero batch
# dim stopped `shard search` with SIGFPE, exit 136; a zero output-feature dim gave 187 TFLOP/s).
for d in '0,32,32,64:3,3,64,128:0,32,32,128' '16,32,32,64:3,3,64,0:16,32,32,0'; do
  IFS=: read -r xs ws cs <<<"$d"
  printf 'HloModule c\nENTRY %%main {\n  %%x = f32[%s] parameter(0)\n  %%w = f32[%s] parameter(1)\n  ROOT %%c = f32[%s] convolution(%%x, %%w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n}\n' "$xs" "$ws" "$cs" > "$T/conv0.hlo"
  out=$($E shard search --hlo "$T/conv0.hlo" --mesh 1x2 2>&1); rc=$?
  [ $rc = 0 ] && echo "$out" | grep -q "^modelled throughput 0.000 TFLOP/s" || fail "conv with a zero dim ($d): exit $rc: $out"
done
# An already partitioned module is refused with its line.
out=$($E shard search --hlo "$D/shard_partitioned.hlo" --mesh 1x4 2>&1); [ $? = 1 ] || fail "partitioned exit"
echo "$out" | grep -q "shard_partitioned.hlo:17: the module is already partitioned" || fail "partitioned message: $out"
# No plan fits: the message says what the smallest plan needs.
out=$($E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --mem-gb 0.1 2>&1); [ $? = 1 ] || fail "budget exit"
echo "$out" | grep -q "the smallest plan needs 0.218 GB per device" || fail "budget message: $out"
$E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --mem-gb 0.219 >/dev/null || fail "the stated smallest budget must fit"

# Hand-checkable MLP (spec 1.5): data parallel with memory, Megatron under a tight budget.
$E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --method both --devices "$ERGON_SRC/data/shard_devices.csv" \
   --out-hlo "$T/mlp.hlo" --out-json "$T/mlp.json" > "$T/s.txt" || fail "search"
grep -q "solution vector: \[0,0\]" "$T/s.txt" || fail "mlp plan: $(cat $T/s.txt)"
grep -q "gap DP - ILP: 0.000000 ms" "$T/s.txt" || fail "dp/ilp gap"
grep -q "^DP exact: every resharding edge is in its state" "$T/s.txt" || fail "exact DP line"
$E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --mem-gb 0.235 | grep -q "solution vector: \[1,2\]" || fail "megatron under budget"
$E shard analyze --hlo "$T/mlp.hlo" --mesh 1x2 >/dev/null 2>&1 || fail "annotated module does not re-parse"
grep -q "num_partitions=2" "$T/mlp.hlo" || fail "num_partitions"
grep -q '%h     = f32\[8192,4096\]{1,0} dot(%x, %w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=\[2,1\]0,1}' "$T/mlp.hlo" || fail "h sharding"
python3 -c "import json,sys; d=json.load(open('$T/mlp.json')); assert d['mesh']==[1,2] and [b['strategy'] for b in d['blocks']]==[0,0] and d['dp_kind']=='frontier'" || fail "json"
$E shard comm --hlo "$D/shard_mlp.hlo" --mesh 1x2 | grep -E "^1 +0-0 +33.554" >/dev/null || fail "comm report"
# The plan JSON's "communication": data/data all-reduces dw1 and dw2 (16 MiB each, n = 2).
python3 -c "import json; c=json.load(open('$T/mlp.json'))['communication']; assert c['all-reduce']=={'count':2.0,'bytes':33554432.0} and c['bytes_per_device']==33554432.0, c" || fail "json communication"
# --strategies: no search, the given plan costed and written (Megatron column/row by hand).
$E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --strategies 1,2 --out-json "$T/given.json" > "$T/g.txt" || fail "given plan"
grep -q "^method given" "$T/g.txt" && grep -q "solution vector: \[1,2\]" "$T/g.txt" || fail "given plan output: $(cat $T/g.txt)"
python3 -c "import json; d=json.load(open('$T/given.json')); assert d['method']=='given' and [b['strategy'] for b in d['blocks']]==[1,2] and d['communication']['all-reduce']['bytes']==67108864.0, d" || fail "given plan json"
# The plan JSON's "parameters": each parameter's sharding by number and name (Megatron: w1 by
# columns, w2 by rows), as --out-hlo writes it, and the block that owns it.
python3 -c "import json; p=json.load(open('$T/given.json'))['parameters']; assert [(q['number'], q['name'], q['sharding'], q['block']) for q in p]==[(0,'x','{replicated}',0),(1,'w1','{devices=[1,2]0,1}',0),(2,'w2','{devices=[2,1]0,1}',1),(3,'dout','{replicated}',-1)], p" || fail "json parameters"
# profile --out-profiles writes the kept combinations as the cost file --profiles reads;
# --profiles-only searches only the listed ones (here the second fastest, Megatron 1-2).
$E shard profile --hlo "$D/shard_mlp.hlo" --mesh 1x2 --keep 2 --out-profiles "$T/cand.csv" >/dev/null || fail "out-profiles"
head -1 "$T/cand.csv" | grep -qx "segment,strategies,time_s,memory_bytes" && grep -q "^0,1-2," "$T/cand.csv" || fail "out-profiles: $(cat "$T/cand.csv")"
$E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --profiles "$T/cand.csv" --profiles-only | grep -q "solution vector: \[0,0\]" || fail "modelled rows read back"
grep -E "^(segment|0,1-2,)" "$T/cand.csv" > "$T/one.csv"
$E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --profiles "$T/one.csv" --profiles-only | grep -q "solution vector: \[1,2\]" || fail "--profiles-only chose an unlisted combination"
$E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --profiles "$T/one.csv" | grep -q "solution vector: \[0,0\]" || fail "without --profiles-only, unlisted combinations keep their modelled time"
out=$($E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --profiles "$T/one.csv" --profiles-only --method ilp 2>&1); [ $? = 2 ] || fail "--profiles-only with the ILP: $out"
out=$($E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --out-profiles "$T/x.csv" 2>&1); [ $? = 2 ] || fail "--out-profiles on search: $out"
# The memory a search reports is the memory it used: with --profiles, an imported row's
# memory_bytes (plus the replicated values outside every block), not the modelled figure
# (it printed the modelled 268 MB against a 100 MB budget, exit 0, after choosing [0,0] on
# the imported 60 MB).
$E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --strategies 0,0 --out-json "$T/m00.json" >/dev/null || fail "modelled [0,0]"
outside=$(python3 -c "
import csv, json
row = [r for r in csv.DictReader(open('$T/cand.csv')) if r['strategies'] == '0-0'][0]
print(json.load(open('$T/m00.json'))['memory_bytes'] - float(row['memory_bytes']))") || fail "memory outside the segment"
awk -F, -v OFS=, 'NR > 1 && $2 == "0-0" { $4 = 60000000 } 1' "$T/cand.csv" > "$T/imp60.csv"
$E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --profiles "$T/imp60.csv" --mem-gb 0.1 --out-json "$T/imp60.json" > "$T/imp60.txt" || fail "imported 60 MB under a 100 MB budget: $(cat "$T/imp60.txt")"
want=$(python3 -c "print('%.3f' % (($outside + 60e6) / 1e6))")
grep -q "solution vector: \[0,0\]" "$T/imp60.txt" && grep -qx "memory per device $want MB (budget 100.000 MB)" "$T/imp60.txt" || fail "reported memory is not the imported one ($want MB): $(cat "$T/imp60.txt")"
python3 -c "import json; m = json.load(open('$T/imp60.json'))['memory_bytes']; assert abs(m - ($outside + 60e6)) < 1, m" || fail "json memory_bytes is not the imported one"
# The budget check uses the imported figure too: 70 MB imported + what lies outside the
# blocks is above 0.1 GB (and no other combination is a candidate), below 0.104 GB.
printf 'segment,strategies,time_s,memory_bytes\n0,0-0,0.0015,70000000\n' > "$T/imp70.csv"
out=$($E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --profiles "$T/imp70.csv" --profiles-only --mem-gb 0.1 2>&1); [ $? = 1 ] || fail "imported 70 MB must not fit 0.1 GB: $out"
echo "$out" | grep -q "no plan fits the memory budget of 0.100 GB" || fail "imported budget message: $out"
want=$(python3 -c "print('%.3f' % (($outside + 70e6) / 1e6))")
$E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --profiles "$T/imp70.csv" --profiles-only --mem-gb 0.104 | grep -qx "memory per device $want MB (budget 104.000 MB)" || fail "imported 70 MB under 0.104 GB"
out=$($E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --strategies 1,3 2>&1); [ $? = 1 ] || fail "out-of-range strategy exit"
echo "$out" | grep -q "block 1 (anchor y): strategy 3 given, it has 0 to 2" || fail "out-of-range message: $out"
for bad in 1 1,2,0 1,x -1,2 1,,2; do
  $E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --strategies "$bad" >/dev/null 2>&1; [ $? = 2 ] || fail "--strategies '$bad' must be a usage error"
done
$E shard profile --hlo "$D/shard_mlp.hlo" --mesh 1x2 > "$T/p.txt" || fail "profile"
grep -q "unique segment 0: blocks (0, 2), 9 combinations, 9 kept" "$T/p.txt" || fail "profile report"
# data/data: 0.1318 ms of gradient all-reduces, no resharding; Megatron: 0.2437 ms, none either
grep -E "^  0-0 +[0-9.]+ +[0-9.]+ +0.1318 +0.0000 +33.554" "$T/p.txt" >/dev/null || fail "profile row 0-0: $(cat $T/p.txt)"
grep -E "^  1-2 +[0-9.]+ +[0-9.]+ +0.2437 +0.0000 +67.109" "$T/p.txt" >/dev/null || fail "profile row 1-2"
printf 'segment,strategies,time_s,memory_bytes\n3,0-0,1,1\n' > "$T/prof.csv"
out=$($E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --profiles "$T/prof.csv" 2>&1); [ $? = 1 ] || fail "bad profiles exit"
echo "$out" | grep -q "prof.csv:2: segment 3 is not a unique segment" || fail "profiles message: $out"
# cuBLAS: works on a GPU machine, a clean error elsewhere. Skipped under ASan: NVIDIA's
# libraries leak their own start-up allocations when loaded without a GPU.
if [ -z "${ERGON_SANITIZED:-}" ]; then
  $E shard search --hlo "$D/shard_mlp.hlo" --mesh 1x2 --compute cublas >/dev/null 2>"$T/e.txt"
  rc=$?; [ $rc = 0 ] || { [ $rc = 1 ] && grep -q "cuBLAS unavailable" "$T/e.txt"; } || fail "cublas: $(cat $T/e.txt)"
fi

# Scanned layers: the ENTRY points at the loop body; the body is analysed with its trip count.
out=$($E shard analyze --hlo "$D/shard_scan.hlo" --mesh 1x2 2>&1); [ $? = 1 ] || fail "scan entry exit"
echo "$out" | grep -q "analyse that with --computation body" || fail "scan hint: $out"
$E shard analyze --hlo "$D/shard_scan.hlo" --mesh 1x2 --computation body 2>/dev/null \
  | grep -q "loop body of 'loop': 8 iterations" || fail "scan body analysis"
$E shard analyze --hlo "$D/shard_scan.hlo" --mesh 1x2 --computation nope >/dev/null 2>&1; [ $? = 1 ] || fail "unknown computation"

# Golden analysis of the 2-layer BERT module (published data, tests/data/published).
B="$ERGON_TEST_DATA/published/hlo/bert_single_device_training_fwd_bwd.hlo"
need_data "$B"
$E shard analyze --hlo "$B" --mesh 1x2 > "$T/a.txt" 2>/dev/null || fail "analyze bert"
diff -u "$D/shard_bert2_analyze_1x2.golden" "$T/a.txt" || fail "golden analysis differs"
# A timed-out ILP prints no infinite objective and no speed ratio.
$E shard search --hlo "$B" --mesh 1x4 --method both --time-limit 0.001 > "$T/tl.txt" || fail "timed-out ILP run"
grep -qi "inf" "$T/tl.txt" && fail "timed-out ILP printed inf: $(cat $T/tl.txt)"
grep -Eq "^(ILP \(GLPK\): no plan found within the time limit|gap DP - ILP)" "$T/tl.txt" || fail "ILP line: $(cat $T/tl.txt)"

# BERT-base on 1x8: the segment frontier is too large (forward attention blocks tied to
# backward blocks a dozen segments later); block elimination finds the ILP's plan.
BB="$ERGON_TEST_DATA/published/hlo/baseline_bert_1.hlo"
need_data "$BB"
$E shard search --hlo "$BB" --mesh 1x8 --method dp > "$T/d8.txt" || fail "bert-base dp"
$E shard search --hlo "$BB" --mesh 1x8 --method ilp --time-limit 60 > "$T/i8.txt" || fail "bert-base ilp"
grep -q "blocks eliminated one by one" "$T/d8.txt" || fail "bert-base 1x8 dp kind: $(head -5 $T/d8.txt)"
td=$(sed -n 's/^iteration time \([0-9.]*\) ms.*/\1/p' "$T/d8.txt")
ti=$(sed -n 's/^iteration time \([0-9.]*\) ms.*/\1/p' "$T/i8.txt")
[ -n "$td" ] && [ "$td" = "$ti" ] || fail "bert-base 1x8: DP $td ms, ILP $ti ms"
exit 0
