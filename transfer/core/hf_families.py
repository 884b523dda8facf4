"""The 2025-26 families' config.json fields → their `model.*` features (`model=hf`).

`transfer.core.hf_config.map_config` maps what every family shares (shapes, vocabulary,
context, norm ε, rope, tying); each function here adds one family's own features, read as its
`modeling_*.py` uses them: Mistral's sliding window, Qwen3's per-head q/k norms, OLMo 2's
norms after each branch and q/k norms over the whole projection (and OLMo 3's local layers),
Gemma 3's local/global layers with their two rotary bases, SmolLM3's layers without rope,
Ministral's window per layer kind and Ministral 3's long-context query scaling. A pattern the
proxies cannot keep (layers that are not every k-th) is a `UserError` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from transfer.core.errors import UserError

FULL, SLIDING = "full_attention", "sliding_attention"  # transformers' layer_types values


def _fail(field: str, value: Any, why: str) -> None:
    raise UserError(f"model.config: {field}={_short(value)} {why}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# multimodal model_type → its text model's config is `text_config` (Gemma 3; Mistral 3: Mistral
# Small 3.1/3.2 and Ministral 3, whose text models are mistral or ministral3)
MULTIMODAL = ("gemma3", "mistral3")


def text_config(c: Mapping[str, Any]) -> Mapping[str, Any]:
    """A multimodal config's text model (its `text_config`); any other config itself."""
    if c.get("model_type") in MULTIMODAL and isinstance(c.get("text_config"), Mapping):
        return c["text_config"]
    return c


def every_kth(flags: list[bool]) -> int | None:
    """k when `flags[i]` is true exactly for the layers i with (i + 1) % k == 0; None when none
    is; ValueError when the true ones are not every k-th (the proxies keep a period only)."""
    if not any(flags):
        return None
    k = flags.index(True) + 1
    if flags != [(i + 1) % k == 0 for i in range(len(flags))]:
        layers = [i for i, f in enumerate(flags) if f]
        raise ValueError(f"layers {_short(layers)} (from 0), not every {k}-th one")
    return k


def _activation(c: Mapping, want: str, field: str = "hidden_act") -> None:
    act = c.get("hidden_activation") or c.get(field)
    if act != want:
        _fail(field, act, "has no proxy: the proxies' gated MLP is SiLU (swiglu) or tanh-GELU "
              "(Gemma's geglu, gelu_pytorch_tanh)")


def _window(c: Mapping, *, on: bool = True) -> dict[str, Any]:
    """sliding_window and sliding_window_pattern from `layer_types` (transformers 5) or, where a
    config has none, a window on every layer. `on`: the family's own switch
    (use_sliding_window)."""
    w = c.get("sliding_window")
    if not on or w is None:
        return {"sliding_window": None, "sliding_window_pattern": None}
    kinds = c.get("layer_types") or [SLIDING] * int(c["num_hidden_layers"])
    unknown = sorted(set(kinds) - {FULL, SLIDING})
    if unknown:
        _fail("layer_types", unknown, f"has no proxy: the proxies know {FULL} and {SLIDING}")
    try:
        k = every_kth([t == FULL for t in kinds])
    except ValueError as e:
        _fail("layer_types", kinds, f"has global {e}: the proxies keep every k-th layer global "
              "(sliding_window_pattern)")
    if k is not None and k == 1:  # every layer global: no window anywhere
        return {"sliding_window": None, "sliding_window_pattern": None}
    return {"sliding_window": int(w), "sliding_window_pattern": k}


def one_bias(c: Mapping) -> dict[str, bool]:
    """`attention_bias`, where one flag sets the biases of q, k, v and o alike (Llama, Gemma,
    Qwen3, OLMo 2, SmolLM3; not Qwen2, whose o_proj has none)."""
    bias = bool(c.get("attention_bias", False))
    return {"qkv_bias": bias, "o_bias": bias}


def mistral(c: Mapping) -> dict[str, Any]:
    """MistralAttention: Llama's, without biases, every layer over the sliding window
    (MinistralConfig: the layers its layer_types name sliding_attention)."""
    _activation(c, "silu")
    return {"mlp": "swiglu", **_window(c)}


def ministral3(c: Mapping) -> dict[str, Any]:
    """Ministral3Attention (Ministral 3, Devstral 2): Mistral's, with the queries scaled by
    1 + β·ln(1 + ⌊position / original_max_position_embeddings⌋) (rope_parameters'
    llama_4_scaling_beta): 1 on every position below the original context, so on the proxies
    and over the pretraining context; the β stays in rope_scaling, which the proxies do not
    train with (provenance.not_transferred)."""
    _activation(c, "silu")
    beta = (c.get("rope_parameters") or {}).get("llama_4_scaling_beta")
    if beta is not None and not (isinstance(beta, int | float) and math.isfinite(beta)):
        _fail("rope_parameters.llama_4_scaling_beta", beta, "must be a number")
    return {"mlp": "swiglu", **_window(c)}


def qwen3(c: Mapping) -> dict[str, Any]:
    """Qwen3Attention: RMSNorm over head_dim on q and k per head (q_norm, k_norm), before the
    rotation; attention_bias on q, k, v and o alike (false in the published configs)."""
    _activation(c, "silu")
    return {"mlp": "swiglu", "qk_norm": "head", **one_bias(c),
            **_window(c, on=bool(c.get("use_sliding_window")))}


def olmo2(c: Mapping) -> dict[str, Any]:
    """Olmo2DecoderLayer: x + norm(attn(x)), then + norm(mlp(·)): no norm before a branch;
    Olmo2Attention: RMSNorm over the whole q and k projections (heads × head_dim)."""
    _activation(c, "silu")
    return {"mlp": "swiglu", "qk_norm": "proj", "reordered_norm": True, **one_bias(c)}


def olmo3(c: Mapping) -> dict[str, Any]:
    """Olmo3 (OLMo 3): OLMo 2's layer, with every 4th layer global and the others over the
    sliding window (layer_types), and the rope scaling (YaRN) on the global layers only; both
    kinds rotate with one θ in the published configs."""
    out = {**olmo2(c), **_per_kind_rope(c), **_window(c)}
    if out["sliding_window_pattern"] is None or out["rope_local_theta"] == out["rope_theta"]:
        out["rope_local_theta"] = None  # no local layer, or the local layers' θ is the global
    return out


def _per_kind_rope(c: Mapping, *, local_default: float | None = None) -> dict[str, Any]:
    """The global layers' θ and scaling, the local layers' θ: transformers 5 keeps them per
    layer type in rope_parameters, 4.x as rope_theta, rope_scaling and (Gemma 3)
    rope_local_base_freq; `local_default`: the local θ where a 4.x config names none (None: the
    global θ, as OLMo 3's)."""
    params = c.get("rope_parameters") or {}
    if FULL in params:
        full, local = dict(params[FULL] or {}), dict(params.get(SLIDING) or {})
    else:
        full = {**(c.get("rope_scaling") or {}), "rope_theta": c.get("rope_theta", 1e6)}
        local = {"rope_theta": c.get("rope_local_base_freq", local_default or full["rope_theta"])}
    if local.get("rope_type", "default") != "default":
        _fail("rope_parameters.sliding_attention", local, "scales the local layers' rotary "
              "wavelengths, which the proxies do not")
    theta = float(full.pop("rope_theta"))
    scaling = None if full.get("rope_type", full.get("type", "default")) == "default" else full
    return {"rope_theta": theta, "rope_scaling": scaling,
            "rope_local_theta": float(local["rope_theta"])}


def gemma3(c: Mapping) -> dict[str, Any]:
    """Gemma3 text model: Gemma 2's (1 + w) and sandwich norms, √d embedding normaliser and
    query_pre_attn_scalar; q/k norms per head where Gemma 2 soft-capped (its caps are still
    read: null in the published configs); local layers with their own rotary base."""
    _activation(c, "gelu_pytorch_tanh", "hidden_activation")
    if c.get("use_bidirectional_attention"):
        _fail("use_bidirectional_attention", True, "is not a causal language model: the "
              "proxies train next-token prediction")
    caps = {}
    for key, field in (("attn_softcap", "attn_logit_softcapping"),
                       ("logit_softcap", "final_logit_softcapping")):
        v = c.get(field)
        if v is not None and not (isinstance(v, int | float) and v > 0):
            _fail(field, v, "must be a positive number or null")
        caps[key] = None if v is None else float(v)
    out = {"mlp": "geglu", **one_bias(c), "norm_unit_offset": True,
           "sandwich_norm": True, "embedding_normalizer": True, "qk_norm": "head",
           "query_pre_attn_scalar": float(c["query_pre_attn_scalar"]), **caps,
           **_per_kind_rope(c, local_default=1e4), **_window(c)}
    if out["sliding_window_pattern"] is None and out["sliding_window"] is None:
        out["rope_local_theta"] = None  # no local layer
    return out


def gemma(c: Mapping) -> dict[str, Any]:
    """GemmaDecoderLayer (Gemma 1, CodeGemma): Llama's layer with (1 + w) RMSNorm gains, the √d
    embedding normaliser and a gated tanh-GELU MLP; no sandwich norms, no soft-capping, no
    window, the attention scaled by head_dim^-½ (no query_pre_attn_scalar). Its published
    config.json says `hidden_act: "gelu"`, which GemmaConfig reads as gelu_pytorch_tanh."""
    _activation(c, "gelu_pytorch_tanh")
    return {"mlp": "geglu", **one_bias(c), "norm_unit_offset": True,
            "embedding_normalizer": True}


def smollm3(c: Mapping) -> dict[str, Any]:
    """SmolLM3Attention: Llama's, with rotary positions only where no_rope_layers[i] is 1 (0
    every no_rope_layer_interval-th layer in the published config)."""
    _activation(c, "silu")
    flags = c.get("no_rope_layers")
    if flags is None:
        k = int(c.get("no_rope_layer_interval") or 0)  # 0: rope on every layer
        flags = [int(not k or (i + 1) % k != 0) for i in range(int(c["num_hidden_layers"]))]
    try:
        interval = every_kth([not f for f in flags])
    except ValueError as e:
        _fail("no_rope_layers", flags, f"leaves rope out of {e}: the proxies leave it out of "
              "every k-th layer (no_rope_layer_interval)")
    return {"mlp": "swiglu", "no_rope_interval": interval, **one_bias(c),
            **_window(c, on=bool(c.get("use_sliding_window")))}


# model_type → its features' mapping (`gemma3` and `mistral3`, the multimodal configs, read
# their text_config)
FAMILY_MAPPERS: dict[str, Callable[[Mapping], dict[str, Any]]] = {
    "mistral": mistral, "ministral": mistral, "ministral3": ministral3, "qwen3": qwen3,
    "olmo2": olmo2, "olmo3": olmo3, "gemma3_text": gemma3, "smollm3": smollm3, "gemma": gemma}
# what a family without the feature has (map_config's defaults for the older families)
DEFAULTS = {"qk_norm": None, "reordered_norm": False, "sliding_window_pattern": None,
            "rope_local_theta": None, "no_rope_interval": None}
