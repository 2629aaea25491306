#!/bin/bash
# shard_jax.sh: ergon.jax, ergon's sharding plan of a JAX function as jax.jit shardings,
# planned in process through the binding (tests/python/test_shard_jax.py, in the venv with
# jax from requirements.txt). GPT-2, LLaMA-2, GShard MoE and BERT training steps
# (tools/shard_models.py) on meshes 1x4, 2x2, 1x8, 2x4 of 8 host CPU devices: jax.jit with
# ergon's in/out shardings under JAX's default partitioner (Shardy, asserted to be the
# default) compiles with exactly ergon's input shardings and equals the single-device step
# within tools/shard_xla.py's tolerance; shapes ergon cannot split get a replicated plan with
# a message. An ASan build skips (by design: see venv_lib.bash); CI=true never skips.
set -u
source "$(dirname "$0")/../lib/venv_lib.bash"
need_venv jax
export XLA_FLAGS="--xla_force_host_platform_device_count=8" JAX_PLATFORMS=cpu \
  TF_CPP_MIN_LOG_LEVEL=2 ERGON_SRC
out=$(cd "$ERGON_SRC/tests/python" && "$VPY" -m unittest -v test_shard_jax 2>&1); rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL: tests/python/test_shard_jax.py (exit $rc)"; exit 1; }
# all 16 model x mesh runs happened (a subTest that never ran would not fail by itself)
n=$(echo "$out" | grep -o 'ok   [a-z]* [0-9]x[0-9]: ' | sort -u | wc -l)
[ "$n" = 16 ] || { echo "FAIL: expected 16 model x mesh runs, saw $n"; exit 1; }
echo "ok: ergon.jax planned 16 model x mesh steps that compiled under Shardy and matched"
