"""minimal_jax.py: a plain JAX training step on a 2 x 4 device mesh plus the lines ergon needs
(marked "# ergon"): ergon plans how every argument and result is split (CFP, in this process)
and jax.jit compiles the step with those shardings under JAX's own partitioner (Shardy).
docs/integrations.md shows it; tests/e2e/jax_integration_doc.sh runs it.
"""
import os

# 8 host CPU devices when there is no accelerator (set before jax is imported)
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
import numpy as np
import ergon.jax  # ergon


def loss_fn(params, x, y):
    h = jax.nn.gelu(x @ params["w1"] + params["b1"])
    return jnp.mean(jnp.square(h @ params["w2"] + params["b2"] - y))


def step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return loss, jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)


rng = np.random.default_rng(0)
params = {"w1": rng.standard_normal((128, 512), np.float32) / 11,
          "b1": np.zeros(512, np.float32),
          "w2": rng.standard_normal((512, 128), np.float32) / 23,
          "b2": np.zeros(128, np.float32)}
x = rng.standard_normal((64, 128), np.float32)
y = np.tanh(x @ rng.standard_normal((128, 128), np.float32) / 11)

mesh = jax.make_mesh((2, 4), ("data", "model"), devices=jax.devices()[:8])
plan = ergon.jax.plan(step, params, x, y, mesh=mesh)  # ergon
print(plan.explain())  # ergon (optional)
train = jax.jit(step, in_shardings=plan.in_shardings, out_shardings=plan.out_shardings)  # ergon
for i in range(5):
    loss, params = train(params, x, y)
    print(f"step {i}: loss {float(loss):.5f}, w1 split as {params['w1'].sharding.spec}")
