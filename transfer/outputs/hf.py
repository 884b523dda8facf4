"""target.yaml → a Hugging Face `GraniteConfig` (`hf/config.json` in every run folder).

`GraniteForCausalLM` is a Llama-family model with μP's knobs built in: it multiplies the
embedding output by `embedding_multiplier`, scales q·k by `attention_multiplier` (instead of
1/sqrt(d_head)), multiplies each residual branch (attention and MLP) by `residual_multiplier`
(CompleteP's m_L^-α, `mup.residual_mult`), and *divides* the
logits by `logits_scaling` (modeling_granite.py: `logits = logits / self.config.logits_scaling`).
The values are the ones target.yaml already holds (computed by `transfer.core.rules`); this module only
renames them. Per-group init σ and learning rates do not fit in a config: `transfer.outputs.apply` sets
them. `config_dict` is plain Python; only `granite_config` and `write_config` need transformers.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transfer.core.hf_config import INSTALL_HINT, transformers_or_none  # noqa: F401 (re-exported)

DEFAULT_ROPE_THETA = 10000.0  # Llama 2's base; conf/model/*.yaml may set rope_theta
DEFAULT_NORM_EPS = 1e-5  # Llama 2/3's rms_norm_eps; conf/model/*.yaml may set norm_eps
# What GraniteForCausalLM's fixed architecture can express (pre-norm RMSNorm, gated SiLU MLP,
# rotary positions); anything else has no Granite config.
GRANITE_ARCH = {"norm": "rmsnorm", "mlp": "swiglu", "positions": "rope"}


class NotExpressible(ValueError):
    """The target's architecture has no GraniteConfig (e.g. LayerNorm or learned positions)."""


def _group(target: Mapping, name: str) -> Mapping:
    for g in target["param_groups"]:
        if g["name"] == name:
            return g
    raise KeyError(f"target.yaml has no param group {name!r}")


def _hidden_init_std(target: Mapping) -> float:
    """Granite's single `initializer_range`: the σ of the hidden matrices whose fan-in is
    d_model (attention and the MLP's input projections, the bulk of the parameters). A group
    with another fan-in (the MLP down-projection, whose σ follows its own fan-in) differs:
    `transfer.outputs.apply.init_` sets every group's σ exactly. Older files with one `hidden` group:
    every hidden group must agree."""
    d = int(target["model"]["d_model"])
    hidden = [g for g in target["param_groups"]
              if g["name"] == "hidden" or g["name"].startswith("hidden_")]
    main = [g for g in hidden if g.get("fan_in") == d] or hidden
    stds = {g["init_std"] for g in main}
    if len(stds) != 1:
        raise NotExpressible(f"hidden groups have init σ {sorted(stds)}; Granite's single "
                             "initializer_range cannot hold them: use transfer.outputs.apply.init_")
    return float(stds.pop())


def not_granite(m: Mapping) -> str | None:
    """Why Granite cannot express the target's own family features (None: it can): then
    hf/config.json is the family's own config class (`family_config_dict`)."""
    if m.get("sandwich_norm") or m.get("attn_softcap") or m.get("logit_softcap") or m.get(
            "norm_unit_offset"):
        return "Gemma 2's sandwich norms, (1 + w) gains and soft-capping"
    if bool(m.get("qkv_bias")) != bool(m.get("o_bias")):
        return ("biases on q/k/v but not on the output projection (Granite's one attention_bias "
                "covers all four)")
    if (m.get("rope_scaling") or {}).get("llama_4_scaling_beta"):
        return ("Ministral 3's query scaling past the original context "
                "(rope_parameters.llama_4_scaling_beta)")
    for key, what in (("qk_norm", "q/k norms"), ("reordered_norm", "norms after the branches"),
                      ("sliding_window", "a sliding window"),
                      ("sliding_window_pattern", "local and global layers"),
                      ("rope_local_theta", "a local rotary base"),
                      ("no_rope_interval", "layers without rotary positions")):
        if m.get(key):
            return what
    return None


def config_dict(target: Mapping) -> dict[str, Any]:
    """hf/config.json's keyword arguments for the target of `target` (target.yaml as a dict):
    a GraniteConfig's wherever Granite can express the target, else its family's own."""
    m = target["model"]
    if not_granite(m) and m.get("family") in FAMILY_CLASSES:
        return family_config_dict(target)
    return granite_config_dict(target)


def granite_config_dict(target: Mapping) -> dict[str, Any]:
    """GraniteConfig keyword arguments for the target of `target` (target.yaml as a dict)."""
    m, mup = target["model"], target["mup"]
    if why := not_granite(m):
        raise NotExpressible(f"model.family={m.get('family')!r} has {why}; GraniteForCausalLM "
                             "cannot express it")
    for key, want in GRANITE_ARCH.items():
        if m.get(key, want) != want:
            raise NotExpressible(f"model.{key} is {m[key]!r}; GraniteForCausalLM has only "
                                 f"{key}={want!r}, so no hf/config.json is written")
    d_model, n_heads, d_head = int(m["d_model"]), int(m["n_heads"]), int(mup["d_head"])
    out = {
        "architectures": ["GraniteForCausalLM"], "model_type": "granite",
        "vocab_size": int(m["vocab_size"]), "hidden_size": d_model,
        "intermediate_size": int(m["d_ff"]), "num_hidden_layers": int(m["n_layers"]),
        "num_attention_heads": n_heads, "num_key_value_heads": int(m["n_kv_heads"]),
        "hidden_act": "silu", "max_position_embeddings": int(m["seq_len"]),
        "rope_theta": float(m.get("rope_theta", DEFAULT_ROPE_THETA)),
        "rms_norm_eps": float(m.get("norm_eps", DEFAULT_NORM_EPS)),
        "tie_word_embeddings": bool(m.get("tied_embeddings", False)),
        "attention_bias": bool(m.get("qkv_bias", False)), "mlp_bias": bool(m.get("mlp_bias")),
        # μP, by the same numbers as target.yaml's mup block:
        "embedding_multiplier": float(mup.get("embedding_multiplier", mup["input_mult"])),
        "attention_multiplier": float(mup["attn_scale"]),
        "logits_scaling": 1.0 / float(mup["logits_scale"]),  # Granite divides, μP multiplies
        # CompleteP's m_L^-α; Granite multiplies both the attention and the MLP branch output
        # by it before the residual add (modeling_granite.py, GraniteDecoderLayer.forward)
        "residual_multiplier": float(mup.get("residual_mult", 1.0)),
        "initializer_range": _hidden_init_std(target),
        # The target's tokenizer is not known here; fill these in from it.
        "bos_token_id": None, "eos_token_id": None, "pad_token_id": None,
    }
    if d_head * n_heads != d_model:  # Granite derives head_dim = hidden_size / heads otherwise
        out["head_dim"] = d_head
    scaling = m.get("rope_scaling")
    if scaling:  # e.g. Llama 3's llama3 scaling, as in the published config.json
        out["rope_scaling"] = dict(scaling)
        orig, factor = scaling.get("original_max_position_embeddings"), scaling.get("factor")
        if orig and factor:  # the extended context the scaling is for (Llama 3.2: 8192 × 16)
            out["max_position_embeddings"] = max(out["max_position_embeddings"],
                                                 int(orig * factor))
    return out


# family → (transformers config class, model class) for targets Granite cannot express
FAMILY_CLASSES = {"qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
                  "gemma2": ("Gemma2Config", "Gemma2ForCausalLM"),
                  "mistral": ("MistralConfig", "MistralForCausalLM"),
                  "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
                  "olmo2": ("Olmo2Config", "Olmo2ForCausalLM"),
                  "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
                  "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM"),
                  "gemma": ("GemmaConfig", "GemmaForCausalLM"),
                  "olmo3": ("Olmo3Config", "Olmo3ForCausalLM"),
                  "ministral": ("MinistralConfig", "MinistralForCausalLM"),
                  # Ministral 3's text model (its published config.json is a multimodal
                  # Mistral3Config around it; the vision tower is not this tool's)
                  "ministral3": ("Ministral3Config", "Ministral3ForCausalLM")}


def family_config_dict(target: Mapping) -> dict[str, Any]:
    """The family's own config (Qwen2Config, Gemma2Config, ...) for the target. It holds the
    shapes and the family's features; the μP multipliers it has no field for are set by
    `transfer.outputs.apply.init_` (docs/trainer.md): Gemma's query_pre_attn_scalar holds μP's
    attention scale (scale = scalar^-½) where it is an integer."""
    m, mup = target["model"], target["mup"]
    fam = m.get("family")
    if fam not in FAMILY_CLASSES:
        raise NotExpressible(f"model.family={fam!r} has no config class here; known: "
                             f"{', '.join(FAMILY_CLASSES)}")
    out = {
        "architectures": [FAMILY_CLASSES[fam][1]], "model_type": fam,
        "vocab_size": int(m["vocab_size"]), "hidden_size": int(m["d_model"]),
        "intermediate_size": int(m["d_ff"]), "num_hidden_layers": int(m["n_layers"]),
        "num_attention_heads": int(m["n_heads"]), "num_key_value_heads": int(m["n_kv_heads"]),
        "max_position_embeddings": int(m["seq_len"]),
        "rope_theta": float(m.get("rope_theta", DEFAULT_ROPE_THETA)),
        "rms_norm_eps": float(m.get("norm_eps", DEFAULT_NORM_EPS)),
        "tie_word_embeddings": bool(m.get("tied_embeddings", False)),
        "initializer_range": _hidden_init_std(target),
        "bos_token_id": None, "eos_token_id": None, "pad_token_id": None,
    }
    if fam == "qwen2":  # q/k/v biases are Qwen2Attention's own (o_proj has none)
        out.update(hidden_act="silu", use_sliding_window=bool(m.get("sliding_window")),
                   sliding_window=m.get("sliding_window"))
    elif fam == "gemma2":
        out.update(head_dim=int(mup["d_head"]), hidden_activation="gelu_pytorch_tanh",
                   # an int field: exact at attn_mult 1 ((d_head / attn_mult)²); apply.init_
                   # sets the attention's scaling exactly either way
                   query_pre_attn_scalar=round(float(mup["attn_scale"]) ** -2),
                   attn_logit_softcapping=m.get("attn_softcap"),
                   final_logit_softcapping=m.get("logit_softcap"),
                   sliding_window=m.get("sliding_window"),
                   attention_bias=bool(m.get("qkv_bias", False)))
    else:
        out.update(NEWER_FAMILIES[fam](m, mup))
    return out


def layer_types(m: Mapping) -> list[str] | None:
    """transformers' per-layer attention kinds: every sliding_window_pattern-th layer global,
    the others local; every layer local with a window and no pattern; None: all global."""
    k, n = m.get("sliding_window_pattern"), int(m["n_layers"])
    if not k and not m.get("sliding_window"):
        return None
    return ["full_attention" if k and (i + 1) % int(k) == 0 else "sliding_attention"
            for i in range(n)]


def every_layer_kind(m: Mapping) -> list[str]:
    """`layer_types`, with every layer global where the target has no window (the field the
    Gemma 3, OLMo 3 and Ministral configs always hold)."""
    return layer_types(m) or ["full_attention"] * int(m["n_layers"])


def _llama_like(m: Mapping, mup: Mapping) -> dict[str, Any]:
    """Mistral, Ministral, Qwen3, OLMo 2 and SmolLM3 share Llama's fields: SiLU, head_dim,
    biases and the rope scaling as in the published config.json, with the context it extends
    to as max_position_embeddings (seq_len is the pretraining context)."""
    out = {"hidden_act": "silu", "head_dim": int(mup["d_head"]),
           "attention_bias": bool(m.get("qkv_bias", False))}
    if m.get("rope_scaling"):
        out["rope_scaling"] = dict(m["rope_scaling"])
        out.update(_extended(m))
    return out


def _extended(m: Mapping) -> dict[str, int]:
    """max_position_embeddings where the rope scaling names the context it extends from and
    its factor (original × factor, as Llama 3.x, OLMo 3 and Ministral 3 publish it)."""
    scaling = m.get("rope_scaling") or {}
    orig, factor = scaling.get("original_max_position_embeddings"), scaling.get("factor")
    if not (orig and factor):
        return {}
    return {"max_position_embeddings": max(int(m["seq_len"]), int(orig * factor))}


def _olmo3(m: Mapping, mup: Mapping) -> dict[str, Any]:
    """OLMo 2's fields, plus each layer's kind, the window, and the rope scaling on the global
    layers only (Olmo3Config's rope_parameters per kind; one θ unless rope_local_theta)."""
    theta = float(m.get("rope_theta", DEFAULT_ROPE_THETA))
    full = {"rope_type": "default", **(m.get("rope_scaling") or {}), "rope_theta": theta}
    local = {"rope_type": "default", "rope_theta": float(m.get("rope_local_theta") or theta)}
    return {"hidden_act": "silu", "attention_bias": bool(m.get("qkv_bias", False)),
            "sliding_window": m.get("sliding_window"), "layer_types": every_layer_kind(m),
            "rope_parameters": {"full_attention": full, "sliding_attention": local},
            **_extended(m)}


def _gemma3(m: Mapping, mup: Mapping) -> dict[str, Any]:
    """Gemma 2's fields, plus each layer's kind and the two rotary bases per kind."""
    full = {"rope_type": "default", **(m.get("rope_scaling") or {}),
            "rope_theta": float(m.get("rope_theta", DEFAULT_ROPE_THETA))}
    local = {"rope_type": "default",
             "rope_theta": float(m.get("rope_local_theta") or full["rope_theta"])}
    return {"head_dim": int(mup["d_head"]), "hidden_activation": "gelu_pytorch_tanh",
            "query_pre_attn_scalar": round(float(mup["attn_scale"]) ** -2),
            "attn_logit_softcapping": m.get("attn_softcap"),
            "final_logit_softcapping": m.get("logit_softcap"),
            "sliding_window": m.get("sliding_window"),
            "layer_types": every_layer_kind(m),
            "rope_parameters": {"full_attention": full, "sliding_attention": local},
            "attention_bias": bool(m.get("qkv_bias", False))}


def _window(m: Mapping) -> dict[str, Any]:
    """Qwen3's and SmolLM3's window switch and layer kinds."""
    kinds = layer_types(m)
    return {"use_sliding_window": kinds is not None, "sliding_window": m.get("sliding_window"),
            **({"layer_types": kinds} if kinds else {})}


def _mistral(m: Mapping, mup: Mapping) -> dict[str, Any]:
    """Mistral's and Ministral 3's fields: Llama's, and the window."""
    return {**_llama_like(m, mup), "sliding_window": m.get("sliding_window")}


def _smollm3(m: Mapping, mup: Mapping) -> dict[str, Any]:
    k, n = m.get("no_rope_interval"), int(m["n_layers"])
    return {**_llama_like(m, mup), **_window(m), "mlp_bias": bool(m.get("mlp_bias")),
            "no_rope_layer_interval": int(k or n + 1),
            "no_rope_layers": [int(not k or (i + 1) % int(k) != 0) for i in range(n)]}


# family → its own fields beyond the shapes (the older two are written in family_config_dict)
NEWER_FAMILIES = {
    "mistral": _mistral,
    "qwen3": lambda m, mup: {**_llama_like(m, mup), **_window(m)},
    "olmo2": _llama_like,
    "olmo3": _olmo3,
    "ministral": lambda m, mup: {**_mistral(m, mup), "layer_types": every_layer_kind(m)},
    "ministral3": _mistral,
    "gemma3_text": _gemma3,
    "smollm3": _smollm3,
    # Gemma 1: no field for μP's attention scale (head_dim^-½ built in): apply.init_ sets it
    "gemma": lambda m, mup: {"head_dim": int(mup["d_head"]), "hidden_act": "gelu_pytorch_tanh",
                             "attention_bias": bool(m.get("qkv_bias", False))},
}


def hf_config(target: Mapping, **overrides: Any):
    """hf/config.json as a transformers config object: Granite's, or the family's own."""
    transformers = transformers_or_none()
    if transformers is None:
        raise ImportError(f"transformers is not installed: {INSTALL_HINT}")
    if "num_hidden_layers" in overrides:  # per-layer lists (layer_types, ...) follow the depth
        target = {**target, "model": {**target["model"],
                                      "n_layers": int(overrides["num_hidden_layers"])}}
    d = {**config_dict(target), **overrides}
    cls = ("GraniteConfig" if d["model_type"] == "granite"
           else FAMILY_CLASSES[d["model_type"]][0])
    return getattr(transformers, cls)(**d)


def hf_model(run_dir: Path | str, **overrides: Any):
    """The model class hf/config.json names (Granite or the family's own), freshly drawn from
    `run_dir / "hf"` with `overrides`; `transfer.outputs.apply.init_` then sets the μP init and
    the multipliers the config has no field for. Nothing is downloaded."""
    transformers = transformers_or_none()
    if transformers is None:
        raise ImportError(f"transformers is not installed: {INSTALL_HINT}")
    cfg = transformers.AutoConfig.from_pretrained(Path(run_dir) / "hf", **overrides)
    return transformers.AutoModelForCausalLM.from_config(cfg)


def granite_config(target: Mapping, **overrides: Any):
    """A validated `transformers.GraniteConfig` for the target; `overrides` replace fields
    (e.g. smaller shapes for a test). Raises ImportError naming the install command."""
    transformers = transformers_or_none()
    if transformers is None:
        raise ImportError(f"transformers is not installed: {INSTALL_HINT}")
    return transformers.GraniteConfig(**{**granite_config_dict(target), **overrides})


def granite_model(run_dir: Path | str, **overrides: Any):
    """`GraniteForCausalLM(AutoConfig.from_pretrained(run_dir / "hf"))`, with `overrides` on the
    config (e.g. shapes for a smaller test model). Weights are freshly drawn: `transfer.outputs.apply`
    then sets the μP init; nothing is downloaded."""
    transformers = transformers_or_none()
    if transformers is None:
        raise ImportError(f"transformers is not installed: {INSTALL_HINT}")
    cfg = transformers.AutoConfig.from_pretrained(Path(run_dir) / "hf", **overrides)
    return transformers.GraniteForCausalLM(cfg)


def write_config(archive, name: str, target: Mapping) -> str | None:
    """Write `hf/config.json` into run `name` through the archive; returns a one-line note when
    it was skipped (transformers missing, or an architecture Granite cannot express)."""
    if transformers_or_none() is None:
        return f"hf/config.json not written: transformers is not installed ({INSTALL_HINT})"
    try:
        cfg = hf_config(target)
    except NotExpressible as e:
        return f"hf/config.json not written: {e}"
    with tempfile.TemporaryDirectory() as tmp:
        cfg.save_pretrained(tmp)  # transformers' own file format, whatever its version
        archive.copy_into(name, "hf/config.json", Path(tmp) / "config.json")
    return None
