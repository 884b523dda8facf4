"""The μP rules (Adam variant, Tensor Programs V, Table 3), each one small function.

Every width-dependent number in this project comes from here: the proxy family uses these
functions to initialise and scale, and the emitter uses the same functions to write explicit
values at the target width. `mup.MuAdamW` applies the learning-rate rules during proxy training;
tests check that its parameter groups agree with `hidden_lr` / `vector_lr` below.

Vocabulary: a *hidden* (matrix-like) parameter has two width dimensions (attention and MLP
projections); *embedding*, *readout* and *vector* (norm gains, biases) parameters have one.
"""

from __future__ import annotations

import math

PARAMETRIZATIONS = ("mup", "sp")


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


def matrix_eps(eps: float, mult: float, depth_mult: float = 1.0) -> float:
    """Adam ε of hidden, embedding and readout matrices: ε / width_mult (× a depth factor, 1
    until depth transfer exists). μP shrinks these gradients ∝ 1/width; an ε that stays put
    would grow relative to √v and turn Adam into SGD at large width (Everett et al. 2024,
    arXiv 2407.05872, the "epsilon" section: ε must scale like the gradients it is added to)."""
    return eps / mult * depth_mult


def vector_eps(eps: float) -> float:
    """Adam ε of norm gains and biases: their gradients do not shrink with width, so ε does
    not either."""
    return eps
