"""Named rules for what μP does not carry: batch size, token horizon, warmup, weight decay.

μP moves the learning rate, init and multipliers across *width*. How the batch, the lr and the
weight decay should change with the token horizon D (and the batch) is a separate, empirical
question: each function here is one published fit, with its formula, its source, its units and
the range it was fitted on, so `outside` can say how far a target is extrapolated.

Units: batch sizes and horizons in **tokens** unless a name says `_seq` (sequences); compute in
training FLOPs. Constants are the papers' own; a constant this module could not confirm is
named as such and has no default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class FitRange:
    """Where a law was fitted. None: the bound was not found in the source; unknown."""

    n_min: float | None = None  # parameters (as the law counts them)
    n_max: float | None = None
    d_min: float | None = None  # tokens
    d_max: float | None = None
    c_min: float | None = None  # training FLOPs
    c_max: float | None = None
    note: str = ""


def _factor(x: float, lo: float | None, hi: float | None) -> float | None:
    """How many times outside [lo, hi] x is (1.0 inside); None when a needed bound is unknown."""
    if lo is not None and x < lo:
        return lo / x
    if hi is not None and x > hi:
        return x / hi
    return None if lo is None or hi is None else 1.0


def outside(fit: FitRange, *, n: float | None = None, d: float | None = None,
            c: float | None = None) -> dict:
    """How far (n, d, c) lies outside a law's fitted range: a factor per axis, 1.0 = inside,
    10.0 = ten times beyond the nearest bound, None = that bound was not found."""
    out = {}
    for name, x, lo, hi in (("n", n, fit.n_min, fit.n_max), ("d", d, fit.d_min, fit.d_max),
                            ("c", c, fit.c_min, fit.c_max)):
        if x is not None:
            out[name] = _factor(float(x), lo, hi)
    return out


# ---- batch size ---------------------------------------------------------------------------
# Step Law: Li et al. 2025, "Predictable Scale: Part I", arXiv 2503.04715 (the fitted laws of
# its Section 3; constants as used by public re-evaluations of the paper).
STEP_LAW_RANGE = FitRange(n_min=2.15e8, n_max=1.07e9,
                          note="non-embedding N of the fitted cells; the token range of the fit "
                               "was not found in the stored material")


def step_law_batch_tokens(d: float) -> float:
    """Optimal batch in tokens B(D) = 0.58 · D^0.571 (Step Law; independent of N)."""
    return 0.58 * float(d) ** 0.571


def step_law_lr(n_non_embedding: float, d: float) -> float:
    """Optimal peak lr η(N, D) = 1.79 · N^−0.713 · D^0.307 at B(D) (Step Law, SP AdamW with a
    fixed final lr of 1e-5). Here it only supplies an exponent: μP already carries N."""
    return 1.79 * float(n_non_embedding) ** -0.713 * float(d) ** 0.307


# DeepSeek LLM: Bi et al. 2024, arXiv 2401.02954, §3.1 (hyperparameter scaling laws).
DEEPSEEK_RANGE = FitRange(c_min=1e17, c_max=2e20,
                          note="compute budgets of the grid searches, as quoted from §3.1")


def deepseek_flops_per_token(n_layers: int, d_model: int, seq_len: int) -> float:
    """DeepSeek's model scale M = 72·n_layer·d² + 12·n_layer·d·l_seq: non-embedding training
    FLOPs per token, attention included (their §3.2); compute C = M·D."""
    return 72.0 * n_layers * d_model**2 + 12.0 * n_layers * d_model * seq_len


def deepseek_batch_tokens(c: float) -> float:
    """Optimal batch in tokens B_opt = 0.2920 · C^0.3271 (DeepSeek LLM §3.1, C = M·D)."""
    return 0.2920 * float(c) ** 0.3271


def deepseek_lr(c: float) -> float:
    """Optimal lr η_opt = 0.3118 · C^−0.1250 (DeepSeek LLM §3.1), at B_opt."""
    return 0.3118 * float(c) ** -0.1250


# Power Lines: Bergsma et al. 2025, arXiv 2505.13738. B_opt and B_crit are power laws in D
# alone, and the optimal AdamW timescale τ a power law in tokens per parameter. Their fitted
# constants were NOT found in the stored material: the functions take them as arguments and
# no rule set uses them until someone copies them from the paper.
POWER_LINES_RANGE = FitRange(n_min=1.11e8, n_max=3.3e9,
                             note="111M-3.3B parameters, 20-1280 tokens per parameter")


def power_law(x: float, c: float, m: float) -> float:
    """c · x^m: the form of every Power Lines law (B_opt(D), B_crit(D), τ_opt(D/N))."""
    return c * float(x) ** m


# ---- learning rate: horizon and batch -----------------------------------------------------
# Bjorck et al. 2025 (ICLR), "Scaling Optimal LR Across Token Horizons", arXiv 2409.19913.
BJORCK_RANGE = FitRange(n_min=5e7, n_max=7e9, d_max=8e11,
                        note="50M-2.7B swept, 7B held out, horizons up to 800B tokens; the "
                             "shortest horizon of the fit was not found; β≈0.32 is for models "
                             "≥760M, smaller ones showed 0.40-0.70 (their Sec. 3)")
BJORCK_BETA = 0.32


def bjorck_horizon_factor(d_from: float, d_to: float, beta: float = BJORCK_BETA) -> float:
    """lr multiplier for a longer run at a fixed batch: η*(D) ∝ D^−β (Bjorck et al.), so
    η_to / η_from = (D_to / D_from)^−β."""
    return (float(d_to) / float(d_from)) ** -beta


def step_law_fixed_batch_exponent() -> float:
    """Horizon exponent of Step Law at a fixed batch, through Adam's square-root rule: η ∝
    D^0.307 · (B / B(D))^½ with B(D) ∝ D^0.571 gives η ∝ D^(0.307 − 0.2855) = D^0.0215."""
    return 0.307 - 0.571 / 2


def adam_sqrt_batch_factor(b_from: float, b_to: float) -> float:
    """lr multiplier when the batch changes, Adam below the critical batch: η ∝ √B (the
    square-root scaling rule, Malladi et al. 2022, arXiv 2205.10287, from Adam's SDE). Above the
    critical batch the optimum stops rising (Power Lines' B_crit), so use it up to B_opt only."""
    return math.sqrt(float(b_to) / float(b_from))


# ---- weight decay through the AdamW timescale ---------------------------------------------
def adamw_timescale(batch: float, lr: float, weight_decay: float, tokens: float) -> float:
    """τ = B / (η·λ·D): the EMA timescale of AdamW as a fraction of the run (Wang & Aitchison
    2024, arXiv 2405.13698; Power Lines eq. for τ_EMA). B and D in the same unit."""
    return float(batch) / (float(lr) * float(weight_decay) * float(tokens))


def weight_decay_for_timescale(tau: float, batch: float, lr: float, tokens: float) -> float:
    """λ = B / (τ·η·D): the weight decay that keeps τ (the AdamW timescale) at `tau`."""
    return float(batch) / (float(tau) * float(lr) * float(tokens))


# Llama 2 (Touvron et al. 2023, §2.2 and Table 1): 7B, 4M-token batch, peak lr 3e-4, weight
# decay 0.1, 2T tokens. Its τ is the anchor of the default rule set.
LLAMA2_7B_RECIPE = {"batch_tokens": 4.0e6, "lr": 3.0e-4, "weight_decay": 0.1, "tokens": 2.0e12}


# ---- warmup -------------------------------------------------------------------------------
def warmup_tokens_per_param(n_params: float, tokens_per_param: float = 1.0) -> float:
    """Warmup as a token count tied to model size: tokens = k · N. k = 1 is the short warmup
    Porian et al. 2024 (arXiv 2406.19146, §3) found needed to reconcile Kaplan's and Hoffmann's
    laws; k = 1 as stated here is recalled, not confirmed from the stored material."""
    return float(tokens_per_param) * float(n_params)


# ---- what the target's parallelism can use ------------------------------------------------
def round_batch_tokens(batch_tokens: float, seq_len: int, n_gpus: int) -> int:
    """The nearest whole number of (n_gpus × seq_len)-token units, at least one: every device
    gets the same number of full sequences per step (micro-batching and accumulation within)."""
    unit = int(seq_len) * int(n_gpus)
    if unit < 1:
        raise ValueError(f"seq_len × n_gpus must be >= 1, got {seq_len=} {n_gpus=}")
    return max(1, round(float(batch_tokens) / unit)) * unit


# ---- rule sets (conf/scaling/*.yaml) ------------------------------------------------------
BATCH_RULES = ("step_law", "deepseek", "fixed")
HORIZON_RULES = ("bjorck", "step_law", "none")
WARMUP_RULES = ("tokens_per_param", "fixed_steps")


def batch_rule(rule: str, *, d: float, c: float | None = None,
               fixed_tokens: float | None = None) -> tuple[float, str, dict]:
    """(batch tokens before rounding, rule label, extrapolation) for the named batch rule."""
    if rule == "step_law":
        return step_law_batch_tokens(d), "step_law_batch (Li et al. 2025)", outside(
            STEP_LAW_RANGE, d=d)
    if rule == "deepseek":
        if c is None:
            raise ValueError("the deepseek batch rule needs the compute C = M·D")
        return deepseek_batch_tokens(c), "deepseek_batch (Bi et al. 2024 §3.1)", outside(
            DEEPSEEK_RANGE, c=c)
    if rule == "fixed":
        if not fixed_tokens:
            raise ValueError("scaling.batch_rule=fixed needs scaling.batch_tokens")
        return float(fixed_tokens), "fixed_batch (scaling.batch_tokens)", {}
    raise ValueError(f"scaling.batch_rule={rule!r}; use one of {', '.join(BATCH_RULES)}")


def horizon_exponent(rule: str, beta: float = BJORCK_BETA) -> tuple[float, str]:
    """(exponent e of η ∝ D^e at a fixed batch, label) for the named horizon rule."""
    if rule == "bjorck":
        return -float(beta), f"bjorck_horizon (Bjorck et al. 2025, β={beta:g})"
    if rule == "step_law":
        return step_law_fixed_batch_exponent(), "step_law_horizon (Li et al. 2025, via √B)"
    if rule == "none":
        return 0.0, "no_horizon_adjustment"
    raise ValueError(f"scaling.horizon_rule={rule!r}; use one of {', '.join(HORIZON_RULES)}")
