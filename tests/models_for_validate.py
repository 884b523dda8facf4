"""Architectures a user might bring to `python -m transfer.validate`, each a `build(width)`.

Two families unlike the built-in transformer, each in a μP and an SP version, plus the broken
builders the CLI must turn into one-line errors. The builders use PyTorch's default init
(hidden matrices ∝ 1/sqrt(fan_in)), which is what `mup.set_base_shapes` assumes when it rescales.

The SP versions are audit-clean on purpose: their output layer *is* a `mup.MuReadout`, so no
shape analysis can tell them from μP. `SPReadout.forward` skips MuReadout's 1/width_mult, the
mistake of someone who subclasses MuReadout and re-implements `forward` with a plain `F.linear`.
Under MuAdamW the readout then keeps a width-independent learning rate while its logits grow
∝ width after the first updates: the logit scale of SP with Adam. Only training can show that,
so the validator (coordinate check, lr drift, loss gap) has to reject these numerically.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from mup import MuReadout
from torch import nn

VOCAB = 256  # the default corpus: bytes
MAX_SEQ = 256  # learned positions of the transformer cover any proxy.seq_len up to this
D_HEAD = 8  # fixed head dimension: heads grow with width


class SPReadout(MuReadout):
    """A MuReadout whose forward forgets the 1/width_mult: SP logits with a μP-looking layer."""

    def forward(self, x):
        return F.linear(x * self.output_mult, self.weight, self.bias)


# ---- an MLP language model ------------------------------------------------------------------
class MLPLM(nn.Module):
    """tokens (B, T) -> logits (B, T, V). Each position sees its own and the previous token
    (two embedding tables, summed), then `depth` residual width×width ReLU layers and a final
    LayerNorm. (Without that norm the readout sees a residual stream whose size drifts during
    training, and the narrow model's optimum sits ~0.25 octave above the wide one's at these
    tiny widths: a finite-width effect, not an SP one, that eats half the tolerance.)"""

    def __init__(self, width: int, readout: nn.Module, depth: int = 2):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, width)
        self.prev = nn.Embedding(VOCAB, width)
        self.hidden = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.readout = readout

    def forward(self, tokens):  # (B, T)
        prev = F.pad(tokens[:, :-1], (1, 0))  # (B, T): token t-1, 0 before the start
        x = self.tok(tokens) + self.prev(prev)  # (B, T, C)
        for layer in self.hidden:
            x = x + F.relu(layer(x))
        return self.readout(self.norm(x))  # (B, T, V)


def mlp_mup(width: int) -> nn.Module:
    return MLPLM(width, MuReadout(width, VOCAB, readout_zero_init=True))


def mlp_sp(width: int) -> nn.Module:
    return MLPLM(width, SPReadout(width, VOCAB, readout_zero_init=True))


def mlp_plain_readout(width: int) -> nn.Module:
    """The commonest mistake: the output layer is a plain nn.Linear (named `readout` here)."""
    return MLPLM(width, nn.Linear(width, VOCAB))


# ---- a transformer variant: parallel attention + MLP, LayerNorm, learned positions ----------
class ParallelBlock(nn.Module):
    """x + attn(ln(x)) + mlp(ln(x)) (GPT-J/PaLM style): one norm, both branches side by side."""

    def __init__(self, width: int, mup: bool):
        super().__init__()
        self.n_heads = width // D_HEAD
        self.scale = 1 / D_HEAD if mup else D_HEAD ** -0.5  # μP: 1/d, SP: 1/sqrt(d)
        self.ln = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)
        if mup:  # zero queries: uniform attention at init, as μP recommends
            with torch.no_grad():
                self.qkv.weight[:width].zero_()

    def forward(self, x):  # (B, T, C)
        b, t, c = x.shape
        h = self.ln(x)
        q, k, v = self.qkv(h).view(b, t, 3, self.n_heads, D_HEAD).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)  # (B,H,T,d)
        a = self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + a + self.down(F.gelu(self.up(h)))


class ParallelTransformer(nn.Module):
    """tokens (B, T) -> logits (B, T, V)."""

    def __init__(self, width: int, readout: nn.Module, mup: bool, n_layers: int = 1):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, width)
        self.pos = nn.Embedding(MAX_SEQ, width)
        self.blocks = nn.ModuleList(ParallelBlock(width, mup) for _ in range(n_layers))
        self.ln = nn.LayerNorm(width)
        self.readout = readout

    def forward(self, tokens):  # (B, T)
        x = self.tok(tokens) + self.pos.weight[: tokens.shape[1]]  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        return self.readout(self.ln(x))  # (B, T, V)


def parallel_mup(width: int) -> nn.Module:
    return ParallelTransformer(width, MuReadout(width, VOCAB, readout_zero_init=True), mup=True)


def parallel_sp(width: int) -> nn.Module:
    return ParallelTransformer(width, SPReadout(width, VOCAB, readout_zero_init=True), mup=False)


# ---- builders the CLI must refuse with one line -------------------------------------------
def two_arguments(width: int, depth: int) -> nn.Module:
    """Wrong signature: `build(width)` alone cannot be called."""
    return MLPLM(width, MuReadout(width, VOCAB), depth=depth)


def last_token_only(width: int) -> nn.Module:
    """Wrong output: logits (B, V) for the last position instead of (B, T, V)."""

    class LastToken(MLPLM):
        def forward(self, tokens):
            return super().forward(tokens)[:, -1]

    return LastToken(width, MuReadout(width, VOCAB, readout_zero_init=True))


def not_a_module(width: int):
    return {"width": width}
