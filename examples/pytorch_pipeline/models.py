"""models.py: the example's two models (a Llama-style decoder, a torchvision ResNet), split
into pipeline stages, with their synthetic, seeded data. Nothing is downloaded.

Every rank builds the *whole* model from the same seed and keeps its own stage, so the
initial weights are identical on every rank, in every run and in the one-process reference.
"""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# --------------------------------------------------------------------------------------
# A small decoder-only transformer in the Llama style: RMSNorm, rotary position
# embeddings, SwiGLU feed-forward, no biases, pre-norm residual blocks.
# --------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(seq_len, head_dim, base=10000.0):
    """cos/sin of the rotary embedding, each (seq_len, head_dim/2)."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    ang = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    """Rotate consecutive pairs (x0, x1) of the last dimension of x (B, H, T, hd)."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, dim, heads, seq_len):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        cos, sin = rope_tables(seq_len, self.hd)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.full((seq_len, seq_len), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, D = x.shape
        q = self.wq(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        k = self.wk(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        v = self.wv(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        cos, sin = self.cos[:T], self.sin[:T]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd) + self.mask[:T, :T]
        y = att.softmax(-1) @ v
        return self.wo(y.transpose(1, 2).reshape(B, T, D))


class SwiGLU(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, heads, seq_len):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.attn = Attention(dim, heads, seq_len)
        self.mlp = SwiGLU(dim, 4 * dim * 2 // 3)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Embedding(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)

    def forward(self, tokens):
        return self.tok(tokens)


class LMHead(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.norm = RMSNorm(dim)
        self.out = nn.Linear(dim, vocab, bias=False)

    def forward(self, x):
        return self.out(self.norm(x))


LLAMA = dict(vocab=256, dim=64, heads=4, layers=8, seq_len=32)


def llama_units(cfg):
    """The model as a list of pieces: [embedding] + blocks, the head is added to the last."""
    return ([Embedding(cfg["vocab"], cfg["dim"])]
            + [Block(cfg["dim"], cfg["heads"], cfg["seq_len"]) for _ in range(cfg["layers"])])


# --------------------------------------------------------------------------------------
# torchvision ResNet (BasicBlock, one block per layer: a "ResNet-10") for 10 classes.
# --------------------------------------------------------------------------------------

def resnet_units(cfg):
    import torchvision
    from torchvision.models.resnet import BasicBlock, ResNet
    net = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10, width_per_group=64)
    assert isinstance(net, torchvision.models.ResNet)
    stem = nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool)
    head = nn.Sequential(net.avgpool, nn.Flatten(1), net.fc)
    return [stem, net.layer1, net.layer2, net.layer3, net.layer4, head]


RESNET = dict(image=32, classes=10)


def split_even(n, parts):
    """Sizes of `parts` contiguous groups of n items, the first n % parts one larger."""
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def build_stages(model, num_stages, seed):
    """All stages of the model (nn.Sequential each), built from one seed."""
    torch.manual_seed(seed)
    if model == "llama":
        units = llama_units(LLAMA)
        head = LMHead(LLAMA["vocab"], LLAMA["dim"])
        # Embedding and every block are spread over the stages; the head goes last.
        if num_stages > len(units):
            raise ValueError("llama has %d pieces, cannot make %d stages" % (len(units), num_stages))
        sizes = split_even(len(units), num_stages)
        stages, i = [], 0
        for n in sizes:
            stages.append(list(units[i:i + n]))
            i += n
        stages[-1].append(head)
    elif model == "resnet":
        units = resnet_units(RESNET)
        if num_stages > len(units):
            raise ValueError("resnet has %d pieces, cannot make %d stages" % (len(units), num_stages))
        sizes = split_even(len(units), num_stages)
        stages, i = [], 0
        for n in sizes:
            stages.append(list(units[i:i + n]))
            i += n
    else:
        raise ValueError("unknown model %r (llama, resnet)" % model)
    return [nn.Sequential(*s) for s in stages]


class SyntheticData:
    """Seeded synthetic microbatches that a model can learn from.

    llama: sequences of an affine recurrence t[k+1] = (a*t[k] + c) mod V from random
    starts (next-token prediction is learnable); resnet: random images whose class is
    set by a class-specific mean pattern. Batches cycle over a fixed pool of `pool`."""

    def __init__(self, model, microbatch_size, seed, pool=8):
        g = torch.Generator().manual_seed(seed + 1)
        self.model, self.pool = model, []
        for _ in range(pool):
            if model == "llama":
                V, T = LLAMA["vocab"], LLAMA["seq_len"]
                t = torch.empty(microbatch_size, T + 1, dtype=torch.long)
                t[:, 0] = torch.randint(0, V, (microbatch_size,), generator=g)
                for k in range(T):
                    t[:, k + 1] = (5 * t[:, k] + 3) % V
                self.pool.append((t[:, :-1].contiguous(), t[:, 1:].contiguous()))
            else:
                n, s = RESNET["classes"], RESNET["image"]
                if not hasattr(self, "means"):
                    self.means = torch.randn(n, 3, s, s, generator=g)
                y = torch.randint(0, n, (microbatch_size,), generator=g)
                x = self.means[y] + 0.5 * torch.randn(microbatch_size, 3, s, s, generator=g)
                self.pool.append((x, y))

    def microbatch(self, step, mb, num_microbatches):
        return self.pool[(step * num_microbatches + mb) % len(self.pool)]

    def loss(self, out, target):
        if self.model == "llama":
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
        return F.cross_entropy(out, target)


def boundary_shapes(stages, data, num_microbatches):
    """Shape of each stage's output for one microbatch, found by running copies of the
    stages (so BatchNorm statistics of the real ones are not touched)."""
    x = data.microbatch(0, 0, num_microbatches)[0]
    shapes = []
    with torch.no_grad():
        for st in stages:
            x = copy.deepcopy(st)(x)
            shapes.append(tuple(x.shape))
    return shapes
