"""The μP rules (Adam variant, Tensor Programs V, Table 3), each one small function.

Every width-dependent number in this project comes from here: the proxy family uses these
functions to initialise and scale, and the emitter uses the same functions to write explicit
values at the target width. The proxy family trains with AdamW groups built from these rules
(`transfer.core.params.optimizer_groups`); tests check that at α = 0 they agree with `mup.MuAdamW`'s
(`hidden_lr` / `vector_lr` below), which custom families still train with.

Vocabulary: a *hidden* (matrix-like) parameter has two width dimensions (attention and MLP
projections); *embedding*, *readout* and *vector* (norm gains, biases) parameters have one.
The depth rules (CompleteP, below) add m_L = n_layers / base_depth for parameters inside a
residual block; which parameter gets which rule is decided once, in `transfer.core.params`.
"""

from __future__ import annotations

import math

PARAMETRIZATIONS = ("mup", "sp")
# Defaults that several layers need, each defined here once:
DEPTH_ALPHA = 1.0  # CompleteP (Dey et al. 2025): the depth exponent the proxies are built with
NO_DEPTH_ALPHA = 0.0  # what a proxy that records no depth rule had: width-only μP
NORM_EPS = 1e-5  # RMSNorm/LayerNorm ε when the target names none (Llama 2 and 3.x's)


def width_mult(width: int, base_width: int) -> float:
    """How many times wider than the base model (μP's scaling variable)."""
    return width / base_width


def attn_scale(attn_mult: float, d_head: int, parametrization: str) -> float:
    """Attention-logit scale: μP uses attn_mult / d_head, SP the usual attn_mult / sqrt(d_head)."""
    if parametrization == "mup":
        return attn_mult / d_head
    return attn_mult / math.sqrt(d_head)


def hidden_init_std(init_std: float, mult: float) -> float:
    """Hidden matrices: σ ∝ 1/sqrt(fan_in), i.e. the base-width σ shrunk by 1/sqrt(width_mult)."""
    return init_std / math.sqrt(mult)


def embedding_init_std(init_std: float) -> float:
    """Input embeddings (and learned positions): constant σ, independent of width."""
    return init_std


def readout_init_std(init_std: float, mult: float, parametrization: str) -> float:
    """Readout σ when not zero-initialised: μP keeps it constant (the 1/width_mult is in the
    forward pass, see `logits_scale`), SP shrinks it like any fan-in-scaled matrix."""
    if parametrization == "mup":
        return init_std
    return init_std / math.sqrt(mult)


def logits_scale(output_mult: float, mult: float, parametrization: str = "mup") -> float:
    """Multiplier on the readout input: μP divides by width_mult (MuReadout), SP does not."""
    if parametrization == "mup":
        return output_mult / mult
    return output_mult


def hidden_lr(lr: float, mult: float) -> float:
    """Adam learning rate of hidden matrices: lr / width_mult (what MuAdamW does)."""
    return lr / mult


def vector_lr(lr: float) -> float:
    """Adam learning rate of embeddings, readout, norm gains and biases: unchanged with width."""
    return lr


def hidden_weight_decay(weight_decay: float, mult: float) -> float:
    """Decoupled weight decay of hidden matrices: × width_mult, so lr·wd stays constant
    (what MuAdamW does to keep AdamW's shrink factor width-independent)."""
    return weight_decay * mult


def vector_weight_decay(weight_decay: float) -> float:
    """Weight decay of vector-like parameters: unchanged with width."""
    return weight_decay


def matrix_eps(eps: float, mult: float, depth_mult: float = 1.0, alpha: float = 0.0) -> float:
    """Adam ε of hidden, embedding and readout matrices: ε / width_mult, and for matrices inside
    a residual block also × `eps_depth_factor` = m_L^-α (pass the block's `depth_mult`; the
    embedding and readout sit outside every block: depth_mult 1). μP shrinks these gradients
    ∝ 1/width and the residual multiplier shrinks a block's ∝ m_L^-α; an ε that stays put
    would grow relative to √v and turn Adam into SGD (Everett et al. 2024, arXiv 2407.05872,
    the "epsilon" section; CompleteP Table 1, "AdamW ε (residual blocks)": ε·m_N^-1·m_L^-α)."""
    return eps / mult * eps_depth_factor(depth_mult, alpha)


def vector_eps(eps: float, depth_mult: float = 1.0, alpha: float = 0.0) -> float:
    """Adam ε of norm gains and biases: their gradients do not shrink with width, so ε does
    not either; inside a residual block the branch multiplier m_L^-α scales their gradients,
    so ε takes the same depth factor (CompleteP's ε rule is stated for the residual blocks;
    the final norm, outside every block, keeps ε)."""
    return eps * eps_depth_factor(depth_mult, alpha)


# ---- depth (CompleteP, Dey et al. 2025, arXiv 2505.01618, Table 1; reference code:
# EleutherAI/nanoGPT-mup, branch `completep`, model.py: Block.forward, configure_optimizers).
# α = 1 is CompleteP, α = ½ Depth-μP (Tensor Programs VI, Yang et al. 2023), α = 0 plain μP:
# the depth rules switched off (nanoGPT-mup's `depth_alpha_enabled=False`, Table 1's μP column),
# *not* the α-column formulas evaluated at 0 (those would divide the hidden lr by m_L).


def depth_mult(n_layers: int, base_depth: int) -> float:
    """m_L = n_layers / base_depth: how many times deeper than the depth the values were tuned at
    (nanoGPT-mup's `depth_multiplier = depth / base_depth`)."""
    return n_layers / base_depth


def residual_mult(mult: float, alpha: float) -> float:
    """Multiplier on every residual branch (attention and MLP outputs before the add):
    m_L^-α = (L_base / L)^α. Table 1, "MHA/MLP Residual": X + m_L^-α · MHA(LN(X)); nanoGPT-mup:
    `residual_scaling = 1 / depth_multiplier ** depth_alpha_exp`. α = 0 gives 1 (plain μP)."""
    return mult ** -alpha


def hidden_depth_lr_factor(mult: float, alpha: float) -> float:
    """Adam lr of hidden matrices × m_L^(α-1), on top of μP's 1/width_mult. Table 1, "Hidden LR
    (AdamW)": η·m_N^-1·m_L^(α-1); nanoGPT-mup: `depth_lr_scaling = depth_multiplier **
    (depth_alpha_exp - 1)`. CompleteP (α = 1): 1, no lr change with depth. α = 0: 1 (μP)."""
    return 1.0 if alpha == 0 else mult ** (alpha - 1)


def block_vector_lr_factor(mult: float, alpha: float) -> float:
    """Adam lr of the norm gains and biases inside residual blocks × m_L^(α-1) (Table 1, "Pre-LN
    LR" and "Hidden Bias LR": η·m_L^(α-1)). The embedding, the final norm and the readout are
    outside every block and keep η ("Final-LN LR", "Unembed LR"). α = 0: 1 (μP)."""
    return 1.0 if alpha == 0 else mult ** (alpha - 1)


def eps_depth_factor(mult: float, alpha: float) -> float:
    """Adam ε inside residual blocks × m_L^-α: the branch multiplier scales those gradients by
    m_L^-α (Table 1, "AdamW ε (residual blocks)"; nanoGPT-mup scales its one global ε by
    `depth_multiplier ** -depth_alpha_exp`, here it is per group)."""
    return mult ** -alpha
