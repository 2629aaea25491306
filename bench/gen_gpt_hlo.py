#!/usr/bin/env python3
"""gen_gpt_hlo.py: write a GPT-style training step (forward and backward of N transformer
layers) as an XLA HLO text module, for ergon shard's scaling benchmark (bench/shard_scaling.sh).

usage: gen_gpt_hlo.py LAYERS [--batch B] [--seq S] [--hidden H] [--heads N] > gpt.hlo

Per layer: fused QKV projection, heads by reshape/transpose, Q·Kᵀ and P·V batched dots, the
output projection with a residual add, a two-dot FFN with a residual add. The backward pass
has each projection's weight-gradient and input-gradient dots (the attention backward is
abbreviated: the QKV gradient is the output-projection gradient repeated three times). All
layers have the same shapes, so ergon finds one unique segment repeated LAYERS times.
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layers", type=int)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    a = ap.parse_args()
    L, B, S, H, NH = a.layers, a.batch, a.seq, a.hidden, a.heads
    if L < 1 or H % NH:
        sys.exit("layers >= 1 and hidden divisible by heads")
    T, D, F = B * S, H // NH, 4 * H
    f = lambda *d: "f32[%s]" % ",".join(str(x) for x in d)
    out = []
    w = out.append
    params = ["x: %s" % f(T, H), "dout: %s" % f(T, H)]
    for l in range(L):
        params += ["wqkv%d: %s" % (l, f(H, 3 * H)), "wo%d: %s" % (l, f(H, H)),
                   "w1%d: %s" % (l, f(H, F)), "w2%d: %s" % (l, f(F, H))]
    grads = []
    for l in range(L):
        grads += [f(H, 3 * H), f(H, H), f(H, F), f(F, H)]
    grads.append(f(T, H))
    w("HloModule gpt_%d_layers\n" % L)
    w("ENTRY %%main (%s) -> (%s) {" % (", ".join(params), ", ".join(grads)))
    w("  %%x = %s parameter(0)" % f(T, H))
    w("  %%dout = %s parameter(1)" % f(T, H))
    for l in range(L):
        w("  %%wqkv%d = %s parameter(%d)" % (l, f(H, 3 * H), 2 + 4 * l))
        w("  %%wo%d = %s parameter(%d)" % (l, f(H, H), 3 + 4 * l))
        w("  %%w1%d = %s parameter(%d)" % (l, f(H, F), 4 + 4 * l))
        w("  %%w2%d = %s parameter(%d)" % (l, f(F, H), 5 + 4 * l))
    x = "x"
    c = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    tn = "lhs_contracting_dims={0}, rhs_contracting_dims={0}"
    nt = "lhs_contracting_dims={1}, rhs_contracting_dims={1}"
    for l in range(L):
        p = "l%d_" % l
        w("  %%%sln = %s multiply(%%%s, %%%s)" % (p, f(T, H), x, x))
        w("  %%%sqkv = %s dot(%%%sln, %%wqkv%d), %s" % (p, f(T, 3 * H), p, l, c))
        for i, n in enumerate("qkv"):
            w("  %%%s%s = %s slice(%%%sqkv), slice={[0:%d], [%d:%d]}" % (p, n, f(T, H), p, T, i * H, (i + 1) * H))
            w("  %%%s%s4 = %s reshape(%%%s%s)" % (p, n, f(B, S, NH, D), p, n))
        w("  %%%sqh = %s transpose(%%%sq4), dimensions={0,2,1,3}" % (p, f(B, NH, S, D), p))
        w("  %%%skh = %s transpose(%%%sk4), dimensions={0,2,3,1}" % (p, f(B, NH, D, S), p))
        w("  %%%svh = %s transpose(%%%sv4), dimensions={0,2,1,3}" % (p, f(B, NH, S, D), p))
        w("  %%%ss = %s dot(%%%sqh, %%%skh), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, "
          "rhs_batch_dims={0,1}, rhs_contracting_dims={2}" % (p, f(B, NH, S, S), p, p))
        w("  %%%sp = %s exponential(%%%ss)" % (p, f(B, NH, S, S), p))
        w("  %%%so = %s dot(%%%sp, %%%svh), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, "
          "rhs_batch_dims={0,1}, rhs_contracting_dims={2}" % (p, f(B, NH, S, D), p, p))
        w("  %%%sot = %s transpose(%%%so), dimensions={0,2,1,3}" % (p, f(B, S, NH, D), p))
        w("  %%%so2 = %s reshape(%%%sot)" % (p, f(T, H), p))
        w("  %%%sproj = %s dot(%%%so2, %%wo%d), %s" % (p, f(T, H), p, l, c))
        w("  %%%sr1 = %s add(%%%s, %%%sproj)" % (p, f(T, H), x, p))
        w("  %%%sf1 = %s dot(%%%sr1, %%w1%d), %s" % (p, f(T, F), p, l, c))
        w("  %%%sg = %s tanh(%%%sf1)" % (p, f(T, F), p))
        w("  %%%sf2 = %s dot(%%%sg, %%w2%d), %s" % (p, f(T, H), p, l, c))
        w("  %%%sout = %s add(%%%sr1, %%%sf2)" % (p, f(T, H), p, p))
        x = p + "out"
    dy = "dout"
    gnames = []
    for l in reversed(range(L)):
        p = "l%d_" % l
        w("  %%%sdw2 = %s dot(%%%sg, %%%s), %s" % (p, f(F, H), p, dy, tn))
        w("  %%%sdg = %s dot(%%%s, %%w2%d), %s" % (p, f(T, F), dy, l, nt))
        w("  %%%sdf1 = %s multiply(%%%sdg, %%%sg)" % (p, f(T, F), p, p))
        w("  %%%sdw1 = %s dot(%%%sr1, %%%sdf1), %s" % (p, f(H, F), p, p, tn))
        w("  %%%sdr1a = %s dot(%%%sdf1, %%w1%d), %s" % (p, f(T, H), p, l, nt))
        w("  %%%sdr1 = %s add(%%%s, %%%sdr1a)" % (p, f(T, H), dy, p))
        w("  %%%sdwo = %s dot(%%%so2, %%%sdr1), %s" % (p, f(H, H), p, p, tn))
        w("  %%%sdo2 = %s dot(%%%sdr1, %%wo%d), %s" % (p, f(T, H), p, l, nt))
        w("  %%%sdqkv = %s concatenate(%%%sdo2, %%%sdo2, %%%sdo2), dimensions={1}" % (p, f(T, 3 * H), p, p, p))
        w("  %%%sdwqkv = %s dot(%%%sln, %%%sdqkv), %s" % (p, f(H, 3 * H), p, p, tn))
        w("  %%%sdln = %s dot(%%%sdqkv, %%wqkv%d), %s" % (p, f(T, H), p, l, nt))
        w("  %%%sdx = %s add(%%%sdr1, %%%sdln)" % (p, f(T, H), p, p))
        gnames.append((l, ["%sdwqkv" % p, "%sdwo" % p, "%sdw1" % p, "%sdw2" % p]))
        dy = p + "dx"
    order = [n for _, ns in sorted(gnames) for n in ns] + [dy]
    w("  ROOT %%grads = (%s) tuple(%s)" % (", ".join(grads), ", ".join("%" + n for n in order)))
    w("}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
