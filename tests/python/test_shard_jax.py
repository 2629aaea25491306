"""test_shard_jax.py: ergon.jax on the four models of tools/shard_models.py (GPT-2, LLaMA-2,
GShard MoE, BERT training steps) and meshes 1x4, 2x2, 1x8, 2x4 of host CPU devices.

For each model and mesh: ergon.jax.plan plans the step in process (no file, no subprocess);
jax.jit(step, in_shardings=..., out_shardings=...) compiles under JAX's default partitioner
(Shardy: asserted to be the default of the installed JAX, not set here); the compiled input
and output shardings are ergon's, ergon shards something, and the loss and every updated
parameter and Adam moment equal the single-device step within tools/shard_xla.py's fp32
tolerance; and those input shardings, as XLA HloShardings, are the ones `ergon shard search`
(the CLI, $ERGON) writes into the same module. Then shapes ergon cannot split: a replicated plan with a message, never an error.
Run by tests/e2e/shard_jax.sh inside the venv (XLA_FLAGS gives 8 CPU devices).
"""
import os
import shutil
import sys
import tempfile
import unittest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_force_host_platform_device_count=8").strip()

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.environ.get("ERGON_SRC", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..")), "tools"))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from jaxlib import _hlo  # noqa: E402

import ergon.jax  # noqa: E402
import shard_models  # noqa: E402
import shard_xla  # noqa: E402  (RTOL, ATOL and compare: the tolerance of the XLA check)

MODELS = os.environ.get("ERGON_JAX_MODELS", ",".join(shard_models.MODELS)).split(",")
ERGON = os.environ.get("ERGON", "")  # the CLI, for the cross-check only
MESHES = os.environ.get("ERGON_JAX_MESHES", ",".join(shard_xla.MESHES)).split(",")


def make_mesh(text):
    a, b = (int(x) for x in text.split("x"))
    return Mesh(np.asarray(jax.devices()[:a * b]).reshape(a, b), ("data", "model"))


def fast_compile(lowered):
    """Compile as jit would, with the CPU backend's optimisations cut (the partitioner, the
    thing under test, runs in full; shard_xla.py --fast does the same)."""
    return lowered.compile(compiler_options={"xla_backend_optimization_level": 0,
                                             "xla_llvm_disable_expensive_passes": True})


class ModelsOnMeshes(unittest.TestCase):
    def setUp(self):
        self.assertTrue(ERGON and os.access(ERGON, os.X_OK),
                        "ERGON=%r: the built ergon is needed to cross-check" % ERGON)
        self.tmp = tempfile.mkdtemp(prefix="ergon-jax-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_default_partitioner_is_shardy(self):
        # Not set by this test: the partitioner every jit below uses is JAX's default.
        self.assertTrue(jax.config.jax_use_shardy_partitioner,
                        "JAX %s does not default to Shardy" % jax.__version__)

    def test_models_x_meshes_equal_single_device(self):
        self.assertTrue(jax.config.jax_use_shardy_partitioner)
        self.assertGreaterEqual(len(jax.devices()), 8, "XLA_FLAGS: need 8 CPU devices")
        for model in MODELS:
            text, args, arg_names, step1 = shard_models.build(model)
            ref = [np.asarray(x) for x in jax.block_until_ready(step1(*args))]
            n = len(arg_names[:-2]) // 3
            out_names = ["loss"] + arg_names[:3 * n]
            fn = shard_models.make_step(model, arg_names[:n])
            hlo_path = os.path.join(self.tmp, model + ".hlo")
            with open(hlo_path, "w") as f:
                f.write(text)
            for mesh_text in MESHES:
                with self.subTest(model=model, mesh=mesh_text):
                    mesh = make_mesh(mesh_text)
                    p = ergon.jax.plan(fn, *args, mesh=mesh)
                    self.assertEqual(p.message, "", p.explain())
                    ins = jax.tree_util.tree_leaves(p.in_shardings)
                    outs = jax.tree_util.tree_leaves(p.out_shardings)
                    self.assertEqual(len(ins), len(args))
                    self.assertEqual(len(outs), len(ref))
                    self.assertTrue(all(isinstance(s, NamedSharding) and s.mesh is mesh
                                        for s in ins + outs))
                    split = [s for s in ins if any(e is not None for e in s.spec)]
                    self.assertTrue(split, "ergon shards no argument:\n" + p.explain())
                    jitted = jax.jit(fn, in_shardings=p.in_shardings,
                                     out_shardings=p.out_shardings)
                    compiled = fast_compile(jitted.lower(*args))
                    got_in = jax.tree_util.tree_leaves(compiled.input_shardings)
                    got_out = jax.tree_util.tree_leaves(compiled.output_shardings)
                    self.assertEqual(len(got_in), len(ins))
                    for i, (g, e) in enumerate(zip(got_in, ins)):
                        self.assertTrue(g == e and g.is_equivalent_to(e, np.ndim(args[i])),
                                        "%s: compiled %s, ergon %s" % (arg_names[i], g, e))
                    # ... and they are the shardings `ergon shard search` writes into the same
                    # module's parameters (the annotations tools/shard_xla.py runs), as XLA
                    # HloShardings: the binding maps parameters, dims and axes as the CLI does
                    _, cli = shard_xla.ergon_plan(ERGON, hlo_path, mesh_text, self.tmp)
                    for i, (g, q) in enumerate(zip(got_in, cli["parameters"])):
                        hs = g._to_xla_hlo_sharding(np.ndim(args[i]))
                        self.assertEqual(hs, _hlo.HloSharding.from_string(q["sharding"]),
                                         "%s: compiled %s, ergon shard %s"
                                         % (arg_names[i], hs, q["sharding"]))
                    for i, (g, e) in enumerate(zip(got_out, outs)):
                        self.assertTrue(g.is_equivalent_to(e, ref[i].ndim),
                                        "%s: compiled %s, ergon %s" % (out_names[i], g, e))
                    res = [np.asarray(x) for x in jax.block_until_ready(compiled(*args))]
                    (max_abs, _), bad = shard_xla.compare(res, ref, out_names)
                    self.assertIsNone(bad)
                    print("ok   %s %s: %d of %d arguments split, max |diff| %.2e"
                          % (model, mesh_text, len(split), len(ins), max_abs), flush=True)


class CannotSplit(unittest.TestCase):
    def test_non_divisible_shapes_are_replicated_with_a_message(self):
        mesh = make_mesh("2x4")

        def f(x, w):
            return jnp.tanh(x @ w)

        x = np.ones((3, 5), np.float32)
        w = np.ones((5, 7), np.float32)
        p = ergon.jax.plan(f, x, w, mesh=mesh)
        self.assertIn("ergon found no plan", p.message)
        self.assertIn("ENOTFOUND", p.message)
        self.assertTrue(all(s.spec == P() for s in
                            jax.tree_util.tree_leaves((p.in_shardings, p.out_shardings))))
        self.assertTrue(all(r["why"] for r in p.rows))
        self.assertIn("replicated", p.explain())
        out = jax.jit(f, in_shardings=p.in_shardings, out_shardings=p.out_shardings)(x, w)
        np.testing.assert_allclose(np.asarray(out), np.tanh(x @ w), rtol=1e-6)

    def test_one_unsplittable_value_among_split_ones(self):
        mesh = make_mesh("1x4")

        def f(params, x):
            h = x @ params["w"]  # x [8,16] splits on the batch; w [16,8] too
            return (h @ params["odd"]).sum() * params["scale"], h  # odd [8,3]

        params = {"w": np.ones((16, 8), np.float32), "odd": np.ones((8, 3), np.float32),
                  "scale": np.float32(2)}
        x = np.ones((8, 16), np.float32)
        p = ergon.jax.plan(f, params, x, mesh=mesh)
        self.assertEqual(p.message, "")
        rows = {r["path"]: r for r in p.rows}
        self.assertEqual(rows["[0]['scale']"]["why"], "a scalar")
        self.assertEqual(p.in_shardings[0]["scale"].spec, P())
        self.assertNotEqual(p.in_shardings[1].spec, P(None, None), p.explain())
        self.assertIn("[0]['odd']", p.explain())
        out = jax.jit(f, in_shardings=p.in_shardings, out_shardings=p.out_shardings)(params, x)
        ref = f(params, x)
        for a, b in zip(out, ref):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)

    def test_one_device_and_three_axes_replicate(self):
        def f(x, w):
            return x @ w
        x, w = np.ones((8, 8), np.float32), np.ones((8, 8), np.float32)
        one = Mesh(np.asarray(jax.devices()[:1]).reshape(1, 1), ("a", "b"))
        self.assertIn("one device", ergon.jax.plan(f, x, w, mesh=one).message)
        three = Mesh(np.asarray(jax.devices()[:8]).reshape(2, 2, 2), ("a", "b", "c"))
        p = ergon.jax.plan(f, x, w, mesh=three)
        self.assertIn("3 axes of size > 1", p.message)
        self.assertEqual(p.in_shardings[0].spec, P())


class MeshKinds(unittest.TestCase):
    def test_explicit_mesh_is_planned_on_its_auto_twin(self):
        # jax.make_mesh gives Explicit axes; the step must still run step after step
        mesh = jax.make_mesh((2, 4), ("data", "model"), devices=jax.devices()[:8])

        def step(w, x):
            g = jax.grad(lambda w: jnp.sum(jnp.square(x @ w)))(w)
            return w - 0.01 * g

        w, x = np.ones((16, 32), np.float32) / 16, np.ones((8, 16), np.float32)
        p = ergon.jax.plan(step, w, x, mesh=mesh)
        self.assertEqual(p.message, "")
        self.assertIn("Auto axes", " ".join(p.notes))
        f = jax.jit(step, in_shardings=p.in_shardings, out_shardings=p.out_shardings)
        w1 = f(f(w, x), x)  # the second call takes the first one's sharded result
        np.testing.assert_allclose(np.asarray(w1), np.asarray(step(step(w, x), x)), rtol=1e-5)

    def test_one_axis_no_dim_divides_is_planned_on_a_2d_view(self):
        mesh = Mesh(np.asarray(jax.devices()[:8]), ("x",))

        def f(a, b):
            return jnp.tanh(a @ b)

        a, b = np.ones((4, 12), np.float32) / 3, np.ones((12, 20), np.float32) / 5
        p = ergon.jax.plan(f, a, b, mesh=mesh)
        self.assertEqual(p.message, "", p.explain())
        self.assertIn("view of the mesh", " ".join(p.notes))
        self.assertEqual(p.mesh.axis_names, ("x_0", "x_1"))
        self.assertEqual(sorted(d.id for d in p.mesh.devices.flat),
                         sorted(d.id for d in mesh.devices.flat))
        out = jax.jit(f, in_shardings=p.in_shardings, out_shardings=p.out_shardings)(a, b)
        np.testing.assert_allclose(np.asarray(out), np.tanh(a @ b), rtol=1e-5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
