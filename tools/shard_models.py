#!/usr/bin/env python3
"""shard_models.py: the CFP workloads as JAX training steps, written as unpartitioned HLO text.

Four models, each one full training step (forward, loss, backward, Adam update) in plain JAX
(no Flax/Optax: only jax and numpy, as pinned in requirements.txt):
  gpt    GPT-2 style: learned positions, pre-LayerNorm, GELU MLP, tied output embedding
  llama  LLaMA-2 style: RMSNorm, rotary position embedding, SwiGLU MLP, untied head
  moe    GShard MoE: the seed's MoEModelConfig fields (seq_len, hidden_size, num_layers,
         num_heads, vocab_size, num_experts, expert_group_size) scaled down; every other
         layer's MLP is a top-2 gated mixture of experts (dispatch/combine einsums, capacity)
  bert   BERT: post-LayerNorm encoder, GELU, masked-LM head (tied embedding)
Sizes are small so that each compiles and runs in seconds on a CPU, and divisible by 8 so
that every strategy of meshes 1x4, 2x2, 1x8, 2x4 has a plan.

  python tools/shard_models.py --out DIR [--models gpt,llama,moe,bert]
writes DIR/MODEL.hlo (the module `jax.jit(step).lower(...).compiler_ir('hlo')` gives, the
input of `ergon shard`), and with --reference also DIR/MODEL.npz: the step's inputs
(arg0..argN-1, in HLO parameter order) and its single-device outputs (out0..outM-1).
The step takes (params..., adam_m..., adam_v..., tokens, targets) as flat arguments so that
HLO parameter i is argument i; it returns (loss, params'..., m'..., v'...).
"""
import argparse
import os
import sys

import numpy as np


def _jax():
    import jax
    import jax.numpy as jnp
    return jax, jnp


# ---------------------------------------------------------------- configurations
# MoEModelConfig(seq_len, hidden_size, num_layers, num_heads, vocab_size, num_experts,
# expert_group_size): the seed runs (1024, 1280, 16, 4, 32000, 32, 2048), batch 32-128.
CONFIGS = {
    "gpt": dict(batch=8, seq_len=16, hidden_size=64, num_layers=2, num_heads=8,
                vocab_size=256, ffn=256),
    "llama": dict(batch=8, seq_len=16, hidden_size=64, num_layers=2, num_heads=8,
                  vocab_size=256, ffn=128),
    "moe": dict(batch=8, seq_len=16, hidden_size=64, num_layers=2, num_heads=8,
                vocab_size=256, ffn=128, num_experts=8, expert_group_size=32),
    "bert": dict(batch=8, seq_len=16, hidden_size=64, num_layers=2, num_heads=8,
                 vocab_size=256, ffn=256),
}
MODELS = list(CONFIGS)


def init_params(model, seed=0):
    """Named parameters (a list of (name, array)) in a fixed order."""
    c = CONFIGS[model]
    rng = np.random.default_rng(seed)
    H, F, V, S = c["hidden_size"], c["ffn"], c["vocab_size"], c["seq_len"]

    def w(*shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[-2] if len(shape) > 1 else 1)
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    p = [("wte", w(V, H, scale=0.02))]
    if model in ("gpt", "bert"):
        p.append(("wpe", w(S, H, scale=0.02)))
    if model == "bert":
        p += [("emb_ln_g", np.ones(H, np.float32)), ("emb_ln_b", np.zeros(H, np.float32))]
    for i in range(c["num_layers"]):
        L = f"l{i}_"
        if model == "llama":
            p.append((L + "attn_norm", np.ones(H, np.float32)))
        elif model != "bert":
            p += [(L + "ln1_g", np.ones(H, np.float32)), (L + "ln1_b", np.zeros(H, np.float32))]
        p += [(L + "wq", w(H, H)), (L + "wk", w(H, H)), (L + "wv", w(H, H)), (L + "wo", w(H, H))]
        if model in ("gpt", "moe", "bert"):
            p += [(L + "bq", np.zeros(H, np.float32)), (L + "bo", np.zeros(H, np.float32))]
        if model == "bert":
            p += [(L + "ln1_g", np.ones(H, np.float32)), (L + "ln1_b", np.zeros(H, np.float32))]
        if model == "llama":
            p.append((L + "mlp_norm", np.ones(H, np.float32)))
            p += [(L + "w_gate", w(H, F)), (L + "w_up", w(H, F)), (L + "w_down", w(F, H))]
            continue
        if model != "bert":
            p += [(L + "ln2_g", np.ones(H, np.float32)), (L + "ln2_b", np.zeros(H, np.float32))]
        if model == "moe" and i % 2 == 1:
            E = c["num_experts"]
            p += [(L + "gate", w(H, E)), (L + "e_w1", w(E, H, F)), (L + "e_w2", w(E, F, H))]
        else:
            p += [(L + "w1", w(H, F)), (L + "b1", np.zeros(F, np.float32)),
                  (L + "w2", w(F, H)), (L + "b2", np.zeros(H, np.float32))]
        if model == "bert":
            p += [(L + "ln2_g", np.ones(H, np.float32)), (L + "ln2_b", np.zeros(H, np.float32))]
    if model == "llama":
        p += [("final_norm", np.ones(H, np.float32)), ("lm_head", w(H, V))]
    elif model == "bert":
        p += [("mlm_w", w(H, H)), ("mlm_b", np.zeros(H, np.float32)),
              ("mlm_ln_g", np.ones(H, np.float32)), ("mlm_ln_b", np.zeros(H, np.float32))]
    else:
        p += [("lnf_g", np.ones(H, np.float32)), ("lnf_b", np.zeros(H, np.float32))]
    return p


# ---------------------------------------------------------------- model pieces
def forward_loss(model, P, tokens, targets):
    jax, jnp = _jax()
    c = CONFIGS[model]
    B, S, H, NH = c["batch"], c["seq_len"], c["hidden_size"], c["num_heads"]
    D = H // NH

    def layernorm(x, g, b):
        mu = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean(jnp.square(x - mu), -1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b

    def rmsnorm(x, g):
        return x * jax.lax.rsqrt(jnp.mean(jnp.square(x), -1, keepdims=True) + 1e-6) * g

    def rotary(x):  # x: [B, S, NH, D]
        half = D // 2
        freq = 1.0 / (10000.0 ** (np.arange(half, dtype=np.float32) / half))
        ang = np.arange(S, dtype=np.float32)[:, None] * freq[None, :]
        cos, sin = jnp.asarray(np.cos(ang))[None, :, None, :], jnp.asarray(np.sin(ang))[None, :, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)

    def attention(x, L, causal):
        q = x @ P[L + "wq"]
        if L + "bq" in P:
            q = q + P[L + "bq"]
        k, v = x @ P[L + "wk"], x @ P[L + "wv"]
        q, k, v = (t.reshape(B, S, NH, D) for t in (q, k, v))
        if model == "llama":
            q, k = rotary(q), rotary(k)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(D)
        if causal:
            s = jnp.where(jnp.asarray(np.tril(np.ones((S, S), bool))), s, -1e9)
        a = jax.nn.softmax(s, -1)
        o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, S, H) @ P[L + "wo"]
        return o + P[L + "bo"] if L + "bo" in P else o

    def mlp(x, L):
        return jax.nn.gelu(x @ P[L + "w1"] + P[L + "b1"]) @ P[L + "w2"] + P[L + "b2"]

    def moe(x, L):
        # GShard top-2 gating over groups of expert_group_size tokens, capacity 2*G/E.
        E, G = c["num_experts"], c["expert_group_size"]
        T = B * S
        xs = x.reshape(T // G, G, H)
        gates = jax.nn.softmax(jnp.einsum("gsm,me->gse", xs, P[L + "gate"]), -1)
        cap = 2 * G // E
        idx1 = jnp.argmax(gates, -1)
        mask1 = jax.nn.one_hot(idx1, E)
        g2 = gates * (1 - mask1)
        idx2 = jnp.argmax(g2, -1)
        mask2 = jax.nn.one_hot(idx2, E)
        pos1 = jnp.cumsum(mask1, 1) * mask1 - mask1
        mask1 = mask1 * (pos1 < cap)
        pos2 = (jnp.cumsum(mask2, 1) + jnp.sum(mask1, 1, keepdims=True)) * mask2 - mask2
        mask2 = mask2 * (pos2 < cap)
        w1 = jnp.sum(gates * mask1, -1, keepdims=True)
        w2 = jnp.sum(gates * mask2, -1, keepdims=True)
        den = jnp.maximum(w1 + w2, 1e-9)
        w1, w2 = w1 / den, w2 / den
        p1 = jax.nn.one_hot(jnp.sum(pos1 * mask1, -1).astype(jnp.int32), cap)
        p2 = jax.nn.one_hot(jnp.sum(pos2 * mask2, -1).astype(jnp.int32), cap)
        combine = (w1[..., None] * mask1[..., None] * p1[:, :, None, :]
                   + w2[..., None] * mask2[..., None] * p2[:, :, None, :])   # [g, s, e, c]
        dispatch = (combine > 0).astype(x.dtype)
        xe = jnp.einsum("gsec,gsm->egcm", dispatch, xs)
        h = jax.nn.relu(jnp.einsum("egcm,emh->egch", xe, P[L + "e_w1"]))
        ye = jnp.einsum("egch,ehm->egcm", h, P[L + "e_w2"])
        return jnp.einsum("gsec,egcm->gsm", combine, ye).reshape(B, S, H)

    x = P["wte"][tokens]
    if "wpe" in P:
        x = x + P["wpe"][None]
    if model == "bert":
        x = layernorm(x, P["emb_ln_g"], P["emb_ln_b"])
    for i in range(c["num_layers"]):
        L = f"l{i}_"
        if model == "bert":
            x = layernorm(x + attention(x, L, False), P[L + "ln1_g"], P[L + "ln1_b"])
            x = layernorm(x + mlp(x, L), P[L + "ln2_g"], P[L + "ln2_b"])
        elif model == "llama":
            x = x + attention(rmsnorm(x, P[L + "attn_norm"]), L, True)
            h = rmsnorm(x, P[L + "mlp_norm"])
            x = x + (jax.nn.silu(h @ P[L + "w_gate"]) * (h @ P[L + "w_up"])) @ P[L + "w_down"]
        else:
            x = x + attention(layernorm(x, P[L + "ln1_g"], P[L + "ln1_b"]), L, True)
            h = layernorm(x, P[L + "ln2_g"], P[L + "ln2_b"])
            x = x + (moe(h, L) if L + "gate" in P else mlp(h, L))
    if model == "llama":
        logits = rmsnorm(x, P["final_norm"]) @ P["lm_head"]
    elif model == "bert":
        h = layernorm(jax.nn.gelu(x @ P["mlm_w"] + P["mlm_b"]), P["mlm_ln_g"], P["mlm_ln_b"])
        logits = h @ P["wte"].T
    else:
        logits = layernorm(x, P["lnf_g"], P["lnf_b"]) @ P["wte"].T
    logp = jax.nn.log_softmax(logits, -1)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], -1))


def make_step(model, names):
    """step(*params, *m, *v, tokens, targets) -> (loss, *params', *m', *v'): one Adam step."""
    jax, jnp = _jax()
    n = len(names)
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8

    def step(*args):
        params, m, v = args[:n], args[n:2 * n], args[2 * n:3 * n]
        tokens, targets = args[3 * n], args[3 * n + 1]
        loss, grads = jax.value_and_grad(
            lambda ps: forward_loss(model, dict(zip(names, ps)), tokens, targets))(list(params))
        m2 = [b1 * a + (1 - b1) * g for a, g in zip(m, grads)]
        v2 = [b2 * a + (1 - b2) * g * g for a, g in zip(v, grads)]
        p2 = [p - lr * (a / (1 - b1)) / (jnp.sqrt(b / (1 - b2)) + eps)
              for p, a, b in zip(params, m2, v2)]
        return (loss, *p2, *m2, *v2)
    return step


def build(model, seed=0):
    """(hlo_text, args, names, step): the module, its numpy inputs and the jitted step."""
    jax, jnp = _jax()
    c = CONFIGS[model]
    named = init_params(model, seed)
    names = [k for k, _ in named]
    params = [a for _, a in named]
    rng = np.random.default_rng(seed + 1)
    tokens = rng.integers(0, c["vocab_size"], (c["batch"], c["seq_len"]), dtype=np.int32)
    targets = rng.integers(0, c["vocab_size"], (c["batch"], c["seq_len"]), dtype=np.int32)
    # Adam moments start at a small non-zero value so that the update is not sign(g) only.
    m = [np.full_like(p, 1e-3) for p in params]
    v = [np.full_like(p, 1e-4) for p in params]
    args = params + m + v + [tokens, targets]
    step = jax.jit(make_step(model, names))
    text = step.lower(*args).compiler_ir("hlo").as_hlo_text(print_large_constants=True)
    arg_names = names + ["m_" + k for k in names] + ["v_" + k for k in names] + ["tokens", "targets"]
    return text, args, arg_names, step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for MODEL.hlo (and MODEL.npz)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma list of " + ",".join(MODELS))
    ap.add_argument("--reference", action="store_true",
                    help="also run the step on one device and write MODEL.npz")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    for model in a.models.split(","):
        if model not in CONFIGS:
            sys.exit(f"shard_models.py: unknown model '{model}' (known: {', '.join(MODELS)})")
        text, args, arg_names, step = build(model)
        with open(os.path.join(a.out, model + ".hlo"), "w") as f:
            f.write(text)
        if a.reference:
            outs = step(*args)
            np.savez(os.path.join(a.out, model + ".npz"),
                     **{f"arg{i}": x for i, x in enumerate(args)},
                     **{f"out{i}": np.asarray(y) for i, y in enumerate(outs)},
                     names=np.array(arg_names))
        print(f"{model}: {os.path.join(a.out, model + '.hlo')} ({len(text)} bytes, "
              f"{len(args)} parameters)")


if __name__ == "__main__":
    main()
