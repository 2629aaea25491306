"""models.py: the two models of the DeepSpeed example as DeepSpeed pipeline layers
(deepspeed.pipe.LayerSpec: each rank builds only the layers of its stage).

  llama  a small Hugging Face Llama built from a LlamaConfig (no weights downloaded): the
         embedding, one LlamaDecoderLayer per layer (with its own rotary embedding, so each
         pipeline layer takes and returns the hidden states only), the final RMSNorm and the
         LM head. "If a Hugging Face model can run with DeepSpeed's pipeline parallelism it is
         compatible": this is how such a model is split.
  gpt    a GPT-style decoder written here (token + position embedding, pre-LN blocks with
         causal self-attention, LM head).

Both are tiny (CPU tests): 8 decoder layers, hidden 64, sequence 16, vocabulary 128.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from deepspeed.pipe import LayerSpec

VOCAB, HIDDEN, SEQ, HEADS, LAYERS = 128, 64, 16, 4, 8


# ---- Hugging Face Llama --------------------------------------------------------------------
def llama_config(layers=LAYERS):
    from transformers import LlamaConfig
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                      num_hidden_layers=layers, num_attention_heads=HEADS,
                      num_key_value_heads=HEADS // 2, max_position_embeddings=SEQ,
                      rms_norm_eps=1e-6)
    cfg._attn_implementation = "sdpa"     # causal (no mask given), deterministic on CPU
    return cfg


class LlamaEmbedPipe(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)

    def forward(self, ids):
        return self.embed_tokens(ids)


class LlamaLayerPipe(nn.Module):
    def __init__(self, cfg, idx):
        super().__init__()
        from transformers.models.llama.modeling_llama import (LlamaDecoderLayer,
                                                              LlamaRotaryEmbedding)
        self.layer = LlamaDecoderLayer(cfg, idx)
        self.rotary = LlamaRotaryEmbedding(cfg)

    def forward(self, h):
        pos = torch.arange(h.shape[1]).unsqueeze(0).expand(h.shape[0], -1)
        out = self.layer(h, attention_mask=None, position_ids=pos,
                         position_embeddings=self.rotary(h, pos))
        return out[0] if isinstance(out, tuple) else out


class LlamaHeadPipe(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaRMSNorm
        self.norm = LlamaRMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def forward(self, h):
        return self.lm_head(self.norm(h))


def llama_layers():
    cfg = llama_config()
    return ([LayerSpec(LlamaEmbedPipe, cfg)]
            + [LayerSpec(LlamaLayerPipe, cfg, i) for i in range(cfg.num_hidden_layers)]
            + [LayerSpec(LlamaHeadPipe, cfg)])


# ---- GPT-style ---------------------------------------------------------------------------
class GptEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Embedding(SEQ, HIDDEN)

    def forward(self, ids):
        return self.tok(ids) + self.pos(torch.arange(ids.shape[1]))


class GptBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)
        self.qkv, self.proj = nn.Linear(HIDDEN, 3 * HIDDEN), nn.Linear(HIDDEN, HIDDEN)
        self.fc1, self.fc2 = nn.Linear(HIDDEN, 4 * HIDDEN), nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GptHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(HIDDEN)
        self.out = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, x):
        return self.out(self.ln(x))


def gpt_layers():
    return [LayerSpec(GptEmbed)] + [LayerSpec(GptBlock) for _ in range(LAYERS)] + \
        [LayerSpec(GptHead)]


def layers(name):
    return {"llama": llama_layers, "gpt": gpt_layers}[name]()


def loss_fn(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


class SyntheticData:
    """Deterministic token batches: the n-th call gives microbatch n of the run (input ids,
    next-token labels), the same on every rank (the first stage reads the ids, the last the
    labels). reset() starts over."""

    def __init__(self, microbatch_size, seed=1234):
        self.mbs, self.seed, self.n = microbatch_size, seed, 0

    def reset(self):
        self.n = 0

    def __iter__(self):
        return self

    def __next__(self):
        g = torch.Generator().manual_seed(self.seed * 1000003 + self.n)
        self.n += 1
        seq = torch.randint(0, VOCAB, (self.mbs, SEQ + 1), generator=g)
        return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
