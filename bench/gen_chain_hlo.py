#!/usr/bin/env python3
"""gen_chain_hlo.py: write N chained dots as an XLA HLO text module, for the scaling benchmark
of `ergon shard analyze` (bench/shard_chain.sh).

usage: gen_chain_hlo.py N [--size D] [--weights shared|distinct] > chain.hlo

x_i = dot(x_{i-1}, w) for i = 1..N, all D x D. With --weights shared (the default) every dot
reads the same weight w, so w has N users: each anchor's backward-twin search meets every
later dot that reads w. Before the search was bounded this was cubic in N (1,000 dots 1.2 s,
2,000 9.4 s, 4,000 over a minute). With --weights distinct every dot has its own weight.
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--weights", choices=("shared", "distinct"), default="shared")
    a = ap.parse_args()
    if a.n < 1 or a.size < 1:
        sys.exit("N >= 1 and size >= 1")
    sh = "f32[%d,%d]" % (a.size, a.size)
    out = ["HloModule chain_%d_dots" % a.n, "", "ENTRY %main {", "  %%x0 = %s parameter(0)" % sh]
    if a.weights == "shared":
        out.append("  %%w = %s parameter(1)" % sh)
    for i in range(1, a.n + 1):
        w = "%w"
        if a.weights == "distinct":
            out.append("  %%w%d = %s parameter(%d)" % (i, sh, i))
            w = "%%w%d" % i
        out.append("  %s%%x%d = %s dot(%%x%d, %s), lhs_contracting_dims={1}, "
                   "rhs_contracting_dims={0}" % ("ROOT " if i == a.n else "", i, sh, i - 1, w))
    out.append("}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
