"""Decoder-only transformer proxy family in μP (or SP), built with the `mup` package.

`TransformerFamily(...).build(width)` grows width with a fixed head dimension (heads grow with
width) and keeps depth, ffn ratio and kv-group ratio, so the only thing that changes across a
family is width — which is exactly what μP makes hyperparameters invariant to. Depth changes
with `.replace(n_layers=L)`: every residual branch is multiplied by `rules.residual_mult`
(m_L^-α, m_L = n_layers / base_depth; CompleteP at α = 1), and the optimizer groups carry the
depth lr and ε factors (`param_groups`), so hyperparameters tuned at base depth hold deeper too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from mup import MuReadout, MuSharedReadout, make_base_shapes, save_base_shapes, set_base_shapes
from torch import nn

from proxies.layers import (
    MLP,
    QK_NORMS,
    Attention,
    RMSNorm,
    capped_causal_attention,
    make_norm,
    rope_tables,
    softcap,
)
from proxies.source_hash import sources_sha256
from transfer.core import params, rules

NORMS = ("rmsnorm", "layernorm")
MLPS = ("swiglu", "geglu", "gelu")  # geglu: Gemma's gated tanh-GELU
POSITIONS = ("rope", "learned")
# re-exported: tests and benchmarks/capped_attention.py import them from here
__all__ = ["MLPS", "NORMS", "POSITIONS", "Attention", "RMSNorm", "Transformer",
           "TransformerFamily", "capped_causal_attention", "softcap"]


class Block(nn.Module):
    """One residual block, layer `layer` of the family: its norms (before each branch; after
    each too with `sandwich_norm`; only after with `reordered_norm`), and its attention's kind
    (rotary or NoPE, local or global)."""

    def __init__(self, width, d_ff, fam: TransformerFamily, scale: float, layer: int = 0):
        super().__init__()
        off = fam.norm_unit_offset
        self.pre, self.post = not fam.reordered_norm, fam.sandwich_norm or fam.reordered_norm
        if self.pre:
            self.norm1 = make_norm(fam.norm, width, fam.norm_eps, off)
        if self.post:  # Gemma 2 / 3, OLMo 2: a norm on each branch's output
            self.post_norm1 = make_norm(fam.norm, width, fam.norm_eps, off)
        if self.pre:
            self.norm2 = make_norm(fam.norm, width, fam.norm_eps, off)
        if self.post:
            self.post_norm2 = make_norm(fam.norm, width, fam.norm_eps, off)
        local = fam.is_local(layer)
        self.local_rope = local and fam.rope_local_theta is not None  # Gemma 3's local base
        self.attn = Attention(width, fam.d_head, fam.kv_group, scale, fam.uses_rope(layer),
                              fam.qkv_bias, fam.o_bias, fam.attn_softcap, qk_norm=fam.qk_norm,
                              norm_eps=fam.norm_eps, unit_offset=off,
                              window=fam.sliding_window if local else None)
        self.mlp = MLP(width, d_ff, fam.mlp, fam.mlp_bias)
        self.residual_mult = fam.residual_mult  # m_L^-α on both branches (CompleteP Table 1)

    def forward(self, x, cos, sin):
        a = self.attn(self.norm1(x) if self.pre else x, cos, sin)
        x = x + self.residual_mult * (self.post_norm1(a) if self.post else a)
        m = self.mlp(self.norm2(x) if self.pre else x)
        return x + self.residual_mult * (self.post_norm2(m) if self.post else m)


class _FrozenScaleReadout(MuReadout):
    """MuReadout whose logit scale is a plain float fixed after `set_base_shapes`.

    MuReadout reads `weight.infshape` in every forward; dynamo cannot trace that attribute, so
    `torch.compile` breaks. We read it once (`freeze_scale`) and keep a float instead.
    """

    logit_scale: float | None = None

    def freeze_scale(self) -> None:
        self.logit_scale = rules.logits_scale(self.output_mult, self.width_mult())

    def forward(self, x):
        if self.logit_scale is None:
            raise RuntimeError("readout scale not frozen: build models with TransformerFamily.build")
        return F.linear(x * self.logit_scale, self.weight, self.bias)


class _FrozenScaleSharedReadout(MuSharedReadout, _FrozenScaleReadout):
    forward = _FrozenScaleReadout.forward


class _SPReadout(nn.Linear):
    """Standard-parametrization readout: a plain linear layer with a constant output multiplier."""

    def __init__(self, width, vocab, output_mult, weight=None):
        super().__init__(width, vocab, bias=False)
        if weight is not None:
            self.weight = weight
        self.logit_scale = rules.logits_scale(output_mult, 1.0, "sp")

    def forward(self, x):
        return F.linear(x * self.logit_scale, self.weight)


class Transformer(nn.Module):
    """tokens (B, T) int64 -> logits (B, T, vocab)."""

    def __init__(self, fam: TransformerFamily, width: int):
        super().__init__()
        self.fam, self.width = fam, width
        scale = rules.attn_scale(fam.attn_mult, fam.d_head, fam.parametrization)
        self.tok_emb = nn.Embedding(fam.vocab_size, width)
        self.pos_emb = nn.Embedding(fam.seq_len, width) if fam.positions == "learned" else None
        self.blocks = nn.ModuleList(Block(width, fam.d_ff(width), fam, scale, i)
                                    for i in range(fam.n_layers))
        self.norm = make_norm(fam.norm, width, fam.norm_eps, fam.norm_unit_offset)
        tied = self.tok_emb.weight if fam.tied_embeddings else None
        if fam.parametrization == "sp":
            self.readout = _SPReadout(width, fam.vocab_size, fam.output_mult, weight=tied)
        elif tied is not None:
            self.readout = _FrozenScaleSharedReadout(tied, bias=False, output_mult=fam.output_mult)
        else:
            self.readout = _FrozenScaleReadout(width, fam.vocab_size, bias=False,
                                               output_mult=fam.output_mult,
                                               readout_zero_init=fam.readout_zero_init)
        self.register_buffer("rope_cos", torch.empty(0), persistent=False)
        self.register_buffer("rope_sin", torch.empty(0), persistent=False)
        self.register_buffer("rope_local_cos", torch.empty(0), persistent=False)  # Gemma 3
        self.register_buffer("rope_local_sin", torch.empty(0), persistent=False)

    def forward(self, tokens):  # (B, T)
        x = self.tok_emb(tokens) * (self.fam.input_mult * self.fam.embedding_scale)  # (B, T, C)
        if self.pos_emb is not None:
            x = x + self.pos_emb.weight[: tokens.shape[1]]
        for block in self.blocks:
            if block.local_rope:  # a local layer with its own rotary base
                x = block(x, self.rope_local_cos, self.rope_local_sin)
            else:
                x = block(x, self.rope_cos, self.rope_sin)
        return softcap(self.readout(self.norm(x)), self.fam.logit_softcap)  # (B, T, V)


@dataclass(frozen=True)
class TransformerFamily:
    """A width-indexed family of decoder-only transformers sharing every other choice: a
    `transfer.core.protocol.ProxyFamily` that also classifies its own optimizer groups."""

    vocab_size: int = 256  # bytes: the default corpus is raw UTF-8/ASCII source text
    seq_len: int = 128  # long enough for code structure, short enough for 2 CPU cores
    n_layers: int = 2  # the stages' depth; the depth check builds deeper with replace()
    d_head: int = 16  # fixed across widths so heads grow with width, as in real targets
    kv_group: int = 1  # query heads per kv head (GQA); kept across widths
    ffn_ratio: float = 4.0  # d_ff / d_model, kept across widths
    norm: str = "rmsnorm"
    mlp: str = "swiglu"
    positions: str = "rope"
    tied_embeddings: bool = False
    parametrization: str = "mup"  # "mup" or "sp" (the comparison baseline)
    base_width: int = 64  # μP and SP coincide here; tuned values are "at base width"
    attn_mult: float = 1.0  # attention logits × attn_mult / d_head (μP) or / sqrt(d_head) (SP)
    input_mult: float = 1.0  # embedding output multiplier
    output_mult: float = 1.0  # logit multiplier (divided by width_mult under μP)
    init_std: float = 0.02  # σ of hidden matrices at base width (∝ 1/sqrt(fan_in) beyond)
    zero_init_query: bool = True  # uniform attention at init: removes a width-dependent term
    readout_zero_init: bool = True  # μP recommendation: logits start at exactly 0
    # The target's: the sweep passes its model.rope_theta / model.norm_eps. Its rope_scaling
    # (Llama 3's) is not applied: it rescales wavelengths beyond 8192 tokens, ≫ proxy context.
    rope_theta: float = 10000.0
    norm_eps: float = rules.NORM_EPS
    # Depth: branches × (base_depth / n_layers)^α. α = 1 is CompleteP (Dey et al. 2025), the one
    # whose lr optimum holds across depth in their Fig. 1; 0 is width-only μP (no depth rule).
    depth_alpha: float = rules.DEPTH_ALPHA
    base_depth: int | None = None  # None: = n_layers, so the stages tune at m_L = 1
    # The target family's own features (model.*: Qwen2's q/k/v biases; Gemma 2's (1 + w) norms,
    # sandwich norms and soft-capping). Biases are vectors: zero init, lr without width factor.
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    norm_unit_offset: bool = False
    sandwich_norm: bool = False
    attn_softcap: float | None = None  # cap·tanh(s / cap) on attention scores
    logit_softcap: float | None = None  # the same on the output logits, after μP's scale
    # A constant on the embedding output beside input_mult. Gemma's √d_model grows with width,
    # which μP forbids (an input layer's output must not grow with width): the sweep passes
    # √base_width, the normaliser at the base, held at every width.
    embedding_scale: float = 1.0
    # The 2025-26 families' features. q/k RMSNorm before the rotation: "head" over head_dim per
    # head (Qwen3, Gemma 3), "proj" over the whole q / k projection (OLMo 2); gains are vectors.
    qk_norm: str | None = None
    reordered_norm: bool = False  # OLMo 2: a norm on each branch's output only, none before
    # Local attention: each token sees itself and the window − 1 before it, on the local layers.
    # The sweep passes a window only when it is shorter than seq_len (else it changes nothing).
    sliding_window: int | None = None
    # Layer i is global when (i + 1) % pattern == 0, local otherwise (Gemma 3: 6, Gemma 2: 2);
    # None: every layer local. Local layers rotate with rope_local_theta where set (Gemma 3's
    # rope_local_base_freq), global ones with rope_theta.
    sliding_window_pattern: int | None = None
    rope_local_theta: float | None = None
    no_rope_interval: int | None = None  # layer i has no rotary positions when (i + 1) % k == 0

    def __post_init__(self):
        for name, allowed in (("norm", NORMS), ("mlp", MLPS), ("positions", POSITIONS),
                              ("parametrization", rules.PARAMETRIZATIONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"proxy.{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.base_depth is None:
            object.__setattr__(self, "base_depth", self.n_layers)
        if not 0 <= self.depth_alpha <= 1:
            raise ValueError(f"proxy.depth_alpha must be in [0, 1] (0 μP, 0.5 Depth-μP, 1 "
                             f"CompleteP), got {self.depth_alpha}")
        for name in ("vocab_size", "seq_len", "n_layers", "d_head", "kv_group", "base_width",
                     "base_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"proxy.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("ffn_ratio", "attn_mult", "input_mult", "output_mult", "init_std",
                     "rope_theta", "norm_eps", "embedding_scale"):
            if not getattr(self, name) > 0:
                raise ValueError(f"proxy.{name} must be > 0, got {getattr(self, name)}")
        for name in ("attn_softcap", "logit_softcap", "rope_local_theta", "sliding_window",
                     "sliding_window_pattern", "no_rope_interval"):
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                raise ValueError(f"proxy.{name} must be > 0 or None, got {getattr(self, name)}")
        if self.qk_norm not in QK_NORMS:
            raise ValueError(f"proxy.qk_norm must be one of {QK_NORMS}, got {self.qk_norm!r}")
        self.check_width(self.base_width, field="proxy.base_width")

    # ---- shape arithmetic -------------------------------------------------------------
    def d_ff(self, width: int) -> int:
        return round(self.ffn_ratio * width)

    def is_local(self, layer: int) -> bool:
        """Layer `layer` (from 0) is a local one: transformers' rule, every pattern-th global."""
        k = self.sliding_window_pattern
        return k is None or (layer + 1) % k != 0

    def uses_rope(self, layer: int) -> bool:
        """Rotary positions on layer `layer`; SmolLM3 leaves them out every k-th (NoPE)."""
        k = self.no_rope_interval
        return self.positions == "rope" and (k is None or (layer + 1) % k != 0)

    def check_width(self, width: int, *, field: str = "width") -> None:
        """Raise ValueError naming the fix when `width` cannot be built."""
        if width % self.d_head:
            raise ValueError(f"{field}={width} is not divisible by proxy.d_head={self.d_head}; "
                             f"use a multiple of {self.d_head}")
        heads = width // self.d_head
        if heads % self.kv_group:
            raise ValueError(f"{field}={width} gives {heads} heads, not divisible by "
                             f"proxy.kv_group={self.kv_group}; use a width that is a multiple of "
                             f"{self.d_head * self.kv_group}")

    def replace(self, **changes) -> TransformerFamily:
        """The family with `changes`; a new depth keeps `base_depth` (so m_L changes)."""
        return dataclasses.replace(self, **changes)

    @property
    def depth_keywords(self) -> frozenset[str]:
        """Both of the depth hook's keywords: `replace(n_layers=)` changes the depth, and every
        residual branch is multiplied by `residual_mult` (as proxies/custom.py asks of a
        builder)."""
        return frozenset(("n_layers", "residual_mult"))

    @property
    def depth_mult(self) -> float:
        return rules.depth_mult(self.n_layers, self.base_depth)

    @property
    def residual_mult(self) -> float:
        """The branch multiplier; 1 under SP, which has no depth rule."""
        alpha = self.depth_alpha if self.parametrization == "mup" else 0.0
        return rules.residual_mult(self.depth_mult, alpha)

    def param_classes(self, width: int) -> dict[str, params.ParamClass]:
        """Every parameter's class at `width` (transfer.core.params), against the base-width model."""
        base = {n: p.shape for n, p in self._skeleton(self.base_width).named_parameters()}
        shapes = {n: p.shape for n, p in self._skeleton(width).named_parameters()}
        return params.classify_named(shapes, base, depth_mult=self.depth_mult)

    def base_values(self, *, lr: float = 1e-3, weight_decay: float = 0.0, eps: float = 1e-8
                    ) -> params.BaseValues:
        return params.BaseValues(lr=lr, init_std=self.init_std, weight_decay=weight_decay,
                                 eps=eps, depth_alpha=self.depth_alpha,
                                 parametrization=self.parametrization,
                                 readout_zero_init=self.readout_zero_init,
                                 zero_init_query=self.zero_init_query)

    def param_groups(self, model: Transformer, *, lr: float, weight_decay: float = 0.0,
                     eps: float = 1e-8) -> list[dict]:
        """AdamW groups for `model` by the classification: μP's width rules (what MuAdamW
        does), the depth rules and per-group ε."""
        return params.optimizer_groups(model.named_parameters(), self.param_classes(model.width),
                                       self.base_values(lr=lr, weight_decay=weight_decay,
                                                        eps=eps))

    # ---- building ---------------------------------------------------------------------
    def _skeleton(self, width: int) -> Transformer:
        with torch.device("meta"):
            return Transformer(self, width)

    @property
    def delta(self) -> int:
        """The width the base shapes compare `base_width` with: twice it."""
        return self.base_width * 2

    def base_shapes(self):
        """mup base shapes from the base model and a delta model twice as wide."""
        return make_base_shapes(self._skeleton(self.base_width), self._skeleton(self.delta))

    def save_base_shapes(self, path) -> None:
        """Write the base shapes as mup's readable YAML (`.bsh`)."""
        save_base_shapes(self.base_shapes(), str(path))

    def build(self, width: int, *, seed: int = 0, device: str | torch.device = "cpu") -> Transformer:
        """A freshly initialised model of `width`, deterministic for `seed`, global RNG untouched.

        Built on the meta device first so construction draws no random numbers, then
        initialised from a private generator by the μP rules.
        """
        self.check_width(width)
        model = self._skeleton(width).to_empty(device=device)
        if self.tied_embeddings:  # to_empty allocates every parameter anew, breaking the tie
            model.readout.weight = model.tok_emb.weight
        if self.parametrization == "mup":
            set_base_shapes(model, self.base_shapes(), rescale_params=False)
            self._init_weights(model, seed)
            model.readout.freeze_scale()
        else:
            self._init_weights(model, seed)
        cos, sin = rope_tables(self.seq_len, self.d_head, device=device, theta=self.rope_theta)
        model.rope_cos, model.rope_sin = cos, sin
        if self.rope_local_theta is not None:
            model.rope_local_cos, model.rope_local_sin = rope_tables(
                self.seq_len, self.d_head, device=device, theta=self.rope_local_theta)
        return model

    def _init_weights(self, model: Transformer, seed: int) -> None:
        """σ per parameter from its class (transfer.core.params.init_std): the same decision the
        optimizer groups and the emitter read."""
        gen = torch.Generator(device="cpu").manual_seed(seed)
        classes, v = self.param_classes(model.width), self.base_values()
        offset = {f"{n}.weight" for n, m in model.named_modules()
                  if isinstance(m, RMSNorm) and m.unit_offset}  # gain 1 + w: w = 0
        for name, p in model.named_parameters():
            std = params.init_std(classes[name], v, tied=self.tied_embeddings)
            with torch.no_grad():
                if std is None:
                    p.fill_(0.0 if name in offset else 1.0)
                else:
                    p.copy_(torch.randn(p.shape, generator=gen) * std)

    def source_hash(self) -> str:
        """sha256 over the source files of this family and of every module class it builds."""
        modules = self._skeleton(self.base_width).modules()
        return sources_sha256([type(self), *(type(m) for m in modules)])

    # ---- accounting -------------------------------------------------------------------
    def n_params(self, width: int) -> int:
        return sum(p.numel() for p in self._skeleton(width).parameters())

    def flops_per_token(self, width: int) -> float:
        """Training FLOPs per token: 6·N (N without the input embedding table, plus the readout
        matmul when tied) + 6·n_layers·width·seq_len for attention scores and values, counted
        causally (half the seq_len² square), as transfer.core.cost does."""
        n = self.n_params(width) - self.vocab_size * width
        if self.tied_embeddings:
            n += self.vocab_size * width  # the shared table is still used as the readout matmul
        if self.positions == "learned":
            n -= self.seq_len * width  # a lookup, not a matmul
        return 6.0 * n + 6.0 * self.n_layers * width * self.seq_len
