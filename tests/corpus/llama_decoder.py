"""A Llama decoder layer in plain PyTorch, random weights: RMSNorm, RoPE, grouped-query attention, SwiGLU MLP.

The file convention of `irforge compile FILE`: it defines `model` and `example_inputs`.
"""

import torch
from torch import nn
from torch.nn import functional as F

HIDDEN, HEADS, KV_HEADS, FFN, SEQ = 64, 4, 2, 172, 11


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim) * 0.1 + 1)
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, base=10000.0):
        super().__init__()
        self.head_dim = HIDDEN // HEADS
        self.q_proj = nn.Linear(HIDDEN, HEADS * self.head_dim, bias=False)
        self.k_proj = nn.Linear(HIDDEN, KV_HEADS * self.head_dim, bias=False)
        self.v_proj = nn.Linear(HIDDEN, KV_HEADS * self.head_dim, bias=False)
        self.o_proj = nn.Linear(HEADS * self.head_dim, HIDDEN, bias=False)
        inv_freq = 1.0 / (base ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rope(self, seq, dtype):
        t = torch.arange(seq, dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def repeat_kv(self, x):
        b, kv, s, d = x.shape
        n_rep = HEADS // KV_HEADS
        return x[:, :, None, :, :].expand(b, kv, n_rep, s, d).reshape(b, kv * n_rep, s, d)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, HEADS, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, KV_HEADS, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, KV_HEADS, self.head_dim).transpose(1, 2)
        cos, sin = self.rope(s, x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        out = F.scaled_dot_product_attention(q, self.repeat_kv(k), self.repeat_kv(v), is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, HIDDEN))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.up_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm(HIDDEN)
        self.self_attn = Attention()
        self.post_attention_layernorm = RMSNorm(HIDDEN)
        self.mlp = MLP()

    def forward(self, hidden_states):
        h = hidden_states + self.self_attn(self.input_layernorm(hidden_states))
        return h + self.mlp(self.post_attention_layernorm(h))


torch.manual_seed(0)
model = DecoderLayer()
example_inputs = (torch.randn(2, SEQ, HIDDEN),)
