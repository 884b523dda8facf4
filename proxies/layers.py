"""The proxy transformer's layers: norms, soft-capping, rotary positions, attention and MLP.

Each keeps one target family's feature the way its Hugging Face model computes it: (1 + w)
gains (Gemma), q/k norms per head (Qwen3, Gemma 3) or over the whole projection (OLMo 2),
soft-capped scores (Gemma 2), a sliding window (Mistral, Gemma's local layers) and layers
without rotary positions (SmolLM3's NoPE). `proxies.transformer` assembles them into blocks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

QK_NORMS = (None, "head", "proj")  # q/k RMSNorm: none, over head_dim per head, over q / k whole


class RMSNorm(nn.Module):
    """RMSNorm; `unit_offset`: the gain is stored as w and applied as (1 + w), w starting at 0
    (Gemma's). Under Adam the two are one parametrization shifted by a constant."""

    def __init__(self, d: int, eps: float = 1e-6, unit_offset: bool = False):
        super().__init__()
        self.eps, self.unit_offset = eps, unit_offset
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        gain = 1.0 + self.weight if self.unit_offset else self.weight
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * gain


def make_norm(kind: str, d: int, eps: float = 1e-6, unit_offset: bool = False) -> nn.Module:
    if kind == "rmsnorm":
        return RMSNorm(d, eps, unit_offset)
    return nn.LayerNorm(d, eps=eps, bias=False)


def softcap(x: torch.Tensor, cap: float | None) -> torch.Tensor:
    """cap · tanh(x / cap) (Gemma 2's logit soft-capping); x itself when cap is None.

    Computed as 2·cap·σ(2x / cap) − cap, the same function (tanh y = 2σ(2y) − 1; |Δ| ≤ 2e-7·cap
    in float32): torch's CPU tanh takes ~6× the time of its sigmoid (benchmarks/RESULTS.md,
    Gemma 2's soft-capped attention)."""
    return x if cap is None else torch.sigmoid(x * (2.0 / cap)) * (2.0 * cap) - cap


def window_keep(t: int, window: int, device=None) -> torch.Tensor:
    """(T, T) bool, True where query i may attend key j: causal and i − j < window (a token and
    the window − 1 before it, as transformers' sliding_window_overlay)."""
    return torch.ones(t, t, dtype=torch.bool, device=device).tril_().triu_(-(window - 1))


def capped_causal_attention(q, k, v, scale: float, cap: float, window: int | None = None
                            ) -> torch.Tensor:
    """softmax(causal(cap · tanh(q·kᵀ·scale / cap))) · v: Gemma 2's soft-capped attention, which
    no fused kernel takes. softmax is blind to a constant shift, so the scores are formed as
    `softcap` + cap = 2·cap·σ(2·q·kᵀ·scale / cap): the 2·scale / cap is applied to q (T × d_head
    per head, not T × T), and the causal mask is added in the same pass (−inf above the
    diagonal, and `window` tokens back and beyond where set): four passes over the T × T
    scores (matmul, sigmoid, add, softmax) where `softcap` then `masked_fill` take seven."""
    t = q.shape[-2]
    mask = torch.full((t, t), float("-inf"), dtype=q.dtype, device=q.device).triu_(1)
    if window is not None and window < t:
        mask.masked_fill_(~window_keep(t, window, q.device), float("-inf"))
    z = torch.sigmoid((q * (2.0 * scale / cap)) @ k.transpose(-2, -1))  # (B, H, T, T)
    return torch.add(mask, z, alpha=2.0 * cap).softmax(-1) @ v  # (B, H, T, dh)


def rope_tables(seq_len: int, d_head: int, device=None, theta: float = 10000.0
                ) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (theta ** (torch.arange(0, d_head, 2, device=device).float() / d_head))
    angles = torch.outer(torch.arange(seq_len, device=device).float(), inv_freq)  # (T, d_head/2)
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):  # x: (B, H, T, d_head)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    t = x.shape[-2]
    cos, sin = cos[:t], sin[:t]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    """Causal multi-head attention with grouped kv heads. `rope`: rotary positions on q and k
    (False: a NoPE layer); `qk_norm`: RMSNorm on q and k before the rotation, per head over
    head_dim ("head", Qwen3 / Gemma 3) or over the whole projection ("proj", OLMo 2); `window`:
    each token attends to itself and the window − 1 before it (a local layer)."""

    def __init__(self, width: int, d_head: int, kv_group: int, scale: float, rope: bool,
                 qkv_bias: bool = False, o_bias: bool = False, softcap: float | None = None,
                 *, qk_norm: str | None = None, norm_eps: float = 1e-6,
                 unit_offset: bool = False, window: int | None = None):
        super().__init__()
        self.n_heads, self.d_head = width // d_head, d_head
        self.n_kv = self.n_heads // kv_group
        self.scale, self.rope, self.softcap = scale, rope, softcap
        self.qk_norm, self.window = qk_norm, window
        self.q = nn.Linear(width, self.n_heads * d_head, bias=qkv_bias)
        self.k = nn.Linear(width, self.n_kv * d_head, bias=qkv_bias)
        self.v = nn.Linear(width, self.n_kv * d_head, bias=qkv_bias)
        self.o = nn.Linear(self.n_heads * d_head, width, bias=o_bias)
        if qk_norm is not None:
            q_dim, k_dim = ((d_head, d_head) if qk_norm == "head"
                            else (self.n_heads * d_head, self.n_kv * d_head))
            self.q_norm = RMSNorm(q_dim, norm_eps, unit_offset)
            self.k_norm = RMSNorm(k_dim, norm_eps, unit_offset)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q, k = self.q(x), self.k(x)  # (B, T, H·dh), (B, T, Hkv·dh)
        if self.qk_norm == "proj":
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.view(b, t, self.n_heads, self.d_head), k.view(b, t, self.n_kv, self.d_head)
        if self.qk_norm == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, H, T, dh), (B, Hkv, T, dh)
        v = self.v(x).view(b, t, self.n_kv, self.d_head).transpose(1, 2)
        if self.rope:
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.n_kv != self.n_heads:  # grouped-query attention: share each kv head
            rep = self.n_heads // self.n_kv
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        windowed = self.window is not None and self.window < t
        if self.softcap is not None:
            y = capped_causal_attention(q, k, v, self.scale, self.softcap, self.window)
        elif windowed:
            y = F.scaled_dot_product_attention(q, k, v, scale=self.scale,
                                               attn_mask=window_keep(t, self.window, x.device))
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, width: int, d_ff: int, kind: str, bias: bool = False):
        super().__init__()
        self.kind = kind
        self.up = nn.Linear(width, d_ff, bias=bias)
        self.gate = nn.Linear(width, d_ff, bias=bias) if kind in ("swiglu", "geglu") else None
        self.down = nn.Linear(d_ff, width, bias=bias)

    def forward(self, x):
        if self.kind == "swiglu":
            return self.down(F.silu(self.gate(x)) * self.up(x))
        if self.kind == "geglu":  # Gemma's gelu_pytorch_tanh, gated
            return self.down(F.gelu(self.gate(x), approximate="tanh") * self.up(x))
        return self.down(F.gelu(self.up(x)))
