"""A Hugging Face config.json → the target's `model.*` fields (`model=hf model.config=PATH`).

Read offline with `transformers.AutoConfig` (the `[hf]` extra, imported on first use), then
mapped field by field: shapes, vocabulary, context, norm and its ε, activation, rotary base and
scaling, tying, biases, and the family's own features (`ModelConf`). A field the proxies cannot
honour is a `UserError` naming it; fields that do not bear on the lr (token ids, dtype, cache,
dropout at 0) are not read. A `model.<field>=` on the command line that differs from the
schema's default wins over the file (one at the default cannot be told from none).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transfer.core.errors import UserError
from transfer.core.hf_families import DEFAULTS, FAMILY_MAPPERS, one_bias, text_config

INSTALL_HINT = "pip install -e '.[hf]'"
# model_type values with a mapping below or in transfer.core.hf_families (gemma3, mistral3: a
# multimodal config.json, whose text_config is read)
SUPPORTED = ("gemma", "gemma2", "gemma3", "gemma3_text", "granite", "llama", "ministral",
             "ministral3", "mistral", "mistral3", "olmo2", "olmo3", "qwen2", "qwen3", "smollm3")
# GraniteForCausalLM (IBM Granite 3.x, and this tool's own hf/config.json read back) is Llama's
# layer with one attention_bias for q, k, v and o, mapped as Llama's; these multipliers are
# hyperparameters, not architecture: the run sets its own (μP's, in its hf/config.json), and
# `source` names the values the file held
GRANITE_MULTIPLIERS = ("embedding_multiplier", "attention_multiplier", "residual_multiplier",
                       "logits_scaling")


def transformers_or_none():
    """The `transformers` module, or None when it is not installed.

    Imported with torchvision hidden: transformers imports torchvision when it is installed, and
    the torchvision that `mup` pulls in need not match the installed torch (CPU torch with the
    default torchvision fails with "operator torchvision::nms does not exist"). Nothing here needs
    it; the hiding ends once transformers has cached "torchvision is absent".
    """
    hide = "torchvision" not in sys.modules
    if hide:
        sys.modules["torchvision"] = None  # importlib.util.find_spec → None: "not installed"
    try:
        import transformers
        from transformers.utils import import_utils

        import_utils.is_torchvision_available()  # computed (and cached) while hidden
        return transformers
    except ImportError:
        return None
    finally:
        if hide and sys.modules.get("torchvision", 0) is None:
            del sys.modules["torchvision"]


def read_config(path: str | Path) -> dict[str, Any]:
    """The config.json at `path` (a file, or a folder holding config.json) as AutoConfig reads
    it, offline; a UserError naming the fix when it cannot be read."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise UserError(f"model.config={str(path)!r}: no such file; pass a config.json or the "
                        "folder that holds one")
    transformers = transformers_or_none()
    if transformers is None:
        raise UserError(f"model=hf needs transformers to read model.config: {INSTALL_HINT}")
    import json

    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"model.config={str(path)!r} is not a JSON config: {e}") from None
    if not isinstance(raw, dict):
        raise UserError(f"model.config={str(path)!r} is not a JSON config: its top level is "
                        f"a {type(raw).__name__}, not an object")
    model_type = raw.get("model_type")
    if model_type not in SUPPORTED:
        raise UserError(f"model.config={str(path)!r} has model_type {model_type!r}; supported: "
                        f"{', '.join(SUPPORTED)} (or describe the target with model.* fields)")
    check_sizes(raw, str(path), complete=False)  # before AutoConfig, which divides by them
    log = transformers.utils.logging
    level = log.get_verbosity()
    log.set_verbosity_error()  # a notice on a legacy value it converts (Gemma 1's "gelu") is
    try:  # not the user's to act on: the mapping reads the converted value
        cfg = transformers.AutoConfig.from_pretrained(str(p), local_files_only=True)
    except Exception as e:  # noqa: BLE001 - a file AutoConfig refuses (transformers 5 checks
        # each field's type: huggingface_hub's StrictDataclassError, not a ValueError) is bad input
        why = " ".join(line.strip() for line in str(e).strip().splitlines()[:2])
        raise UserError(f"model.config={str(path)!r} could not be read by AutoConfig: {why}; "
                        "fix the config.json") from None
    finally:
        log.set_verbosity(level)
    out = cfg.to_dict()
    check_sizes(out, str(path))  # with the config class's defaults for the fields left out
    return out


# config.json's size fields (the text model's, as Llama, Qwen, Gemma and the rest name them) and
# the least each may be where present; AutoConfig divides by some of them
SIZE_FIELDS = {"hidden_size": 1, "num_hidden_layers": 1, "num_attention_heads": 1,
               "num_key_value_heads": 1, "intermediate_size": 1, "vocab_size": 2,
               "max_position_embeddings": 1, "head_dim": 1}


def check_sizes(raw: Mapping[str, Any], path: str, *, complete: bool = True) -> None:
    """Each size field of a config a whole number >= 1, heads dividing evenly; a UserError naming
    the field otherwise. A multimodal config's sizes are its `text_config`'s. `complete=False`
    (the file as written, before AutoConfig, which can divide by zero) checks the fields that are
    there: a published config.json leaves out what its config class defaults (Gemma 3's
    text_config holds only what differs from Gemma3TextConfig's), and AutoConfig fills it in."""
    if isinstance(raw.get("text_config"), Mapping):
        raw = raw["text_config"]
    for key, least in SIZE_FIELDS.items():
        v = raw.get(key)
        if v is None and (not complete or key in ("num_key_value_heads", "head_dim")):
            continue  # left to AutoConfig's default (kv heads: the heads; head_dim: width / heads)
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            raise UserError(f"model.config={path!r}: {key}={v!r} must be a whole number >= "
                            f"{least}; fix the config.json")
    heads = raw.get("num_attention_heads")
    if heads is None:
        return  # (complete=False) checked once AutoConfig has filled it in
    kv = raw.get("num_key_value_heads") or heads
    if heads % kv:
        raise UserError(f"model.config={path!r}: num_attention_heads={heads} is not divisible "
                        f"by num_key_value_heads={kv}; fix the config.json")
    if raw.get("head_dim") is None and raw.get("hidden_size") and raw["hidden_size"] % heads:
        raise UserError(f"model.config={path!r}: hidden_size={raw['hidden_size']} is not "
                        f"divisible by num_attention_heads={heads} and no head_dim is given; "
                        "fix the config.json")


def _rope(c: Mapping) -> tuple[float, dict | None]:
    """(θ, scaling) from either layout: transformers 5's `rope_parameters` or 4.x's keys."""
    params = dict(c.get("rope_parameters") or {})
    theta = float(params.pop("rope_theta", c.get("rope_theta", 10000.0)))
    scaling = c.get("rope_scaling") or params
    scaling = {k: v for k, v in dict(scaling or {}).items() if k not in ("rope_theta",)}
    if not scaling or scaling.get("rope_type", scaling.get("type")) == "default":
        return theta, None
    return theta, scaling


def _fail(field: str, value: Any, why: str) -> None:
    raise UserError(f"model.config: {field}={value!r} {why}")


def map_config(c: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConf fields from a config dict (AutoConfig's `to_dict()`; a multimodal Gemma 3's
    text model)."""
    c = text_config(c)
    kind = c.get("model_type")
    if kind not in SUPPORTED:
        raise UserError(f"model.config: model_type {kind!r} is not supported; supported: "
                        f"{', '.join(SUPPORTED)}")
    if float(c.get("attention_dropout") or 0.0) != 0.0:
        _fail("attention_dropout", c["attention_dropout"], "is not 0: the proxies train without "
              "dropout, which moves the lr optimum; set it to 0.0")
    d, heads = int(c["hidden_size"]), int(c["num_attention_heads"])
    d_head = c.get("head_dim")
    theta, scaling = _rope(c)
    out: dict[str, Any] = {
        "family": kind, "d_model": d, "n_layers": int(c["num_hidden_layers"]),
        "n_heads": heads, "n_kv_heads": int(c.get("num_key_value_heads") or heads),
        "d_ff": int(c["intermediate_size"]), "vocab_size": int(c["vocab_size"]),
        "seq_len": int(c["max_position_embeddings"]),
        "tied_embeddings": bool(c.get("tie_word_embeddings", False)),
        "norm": "rmsnorm", "positions": "rope", "rope_theta": theta, "rope_scaling": scaling,
        "norm_eps": float(c["rms_norm_eps"]),
        "d_head": None if d_head is None or int(d_head) * heads == d else int(d_head),
        "qkv_bias": False, "o_bias": False, "mlp_bias": bool(c.get("mlp_bias", False)),
        "norm_unit_offset": False, "sandwich_norm": False, "attn_softcap": None,
        "logit_softcap": None, "embedding_normalizer": False, "query_pre_attn_scalar": None,
        "sliding_window": None, **DEFAULTS,
    }
    if kind in FAMILY_MAPPERS:  # the newer families: transfer.core.hf_families
        out.update(FAMILY_MAPPERS[kind](c))
    if kind in ("llama", "granite", "qwen2"):
        if c.get("hidden_act") != "silu":
            _fail("hidden_act", c.get("hidden_act"), "has no proxy: the proxies' gated MLP is "
                  "SiLU (swiglu) or tanh-GELU (Gemma's geglu)")
        out["mlp"] = "swiglu"
    if out["rope_scaling"] and out["rope_scaling"].get("original_max_position_embeddings"):
        # Llama 3.x, OLMo 3, Ministral 3: max_position_embeddings is the context the scaling
        # extends to; the pretraining context (what the cost and the emitted config mean by
        # seq_len) is this
        out["seq_len"] = int(out["rope_scaling"]["original_max_position_embeddings"])
    if kind in ("llama", "granite"):
        out.update(one_bias(c))
        if scaling and (scaling.get("rope_type") or scaling.get("type")) not in (
                "llama3", "linear", "dynamic", "yarn"):
            _fail("rope_scaling", scaling, "is of a type the proxies do not know")
    if kind == "qwen2":  # Qwen2Attention: q, k, v with bias, o without (modeling_qwen2.py)
        out.update(qkv_bias=True, o_bias=False)
        if c.get("use_sliding_window"):
            out["sliding_window"] = int(c["sliding_window"])
    if kind == "gemma2":
        act = c.get("hidden_activation") or c.get("hidden_act")
        if act != "gelu_pytorch_tanh":
            _fail("hidden_activation", act, "has no proxy: Gemma 2's MLP is gated tanh-GELU "
                  "(gelu_pytorch_tanh)")
        out.update(mlp="geglu", **one_bias(c), norm_unit_offset=True,
                   sandwich_norm=True, embedding_normalizer=True,
                   attn_softcap=_cap(c.get("attn_logit_softcapping")),
                   logit_softcap=_cap(c.get("final_logit_softcapping")),
                   query_pre_attn_scalar=float(c["query_pre_attn_scalar"]),
                   sliding_window=None if c.get("sliding_window") is None
                   else int(c["sliding_window"]))
    return out


def _cap(value: Any) -> float | None:
    if value is None:
        return None
    if not (isinstance(value, int | float) and value > 0 and math.isfinite(value)):
        _fail("softcapping", value, "must be a positive number or null")
    return float(value)


def resolve_hf(config: str, train_tokens_set: bool, unset) -> dict[str, Any]:
    """The `model.*` values to fill in from the config.json at `config`: every mapped field for
    which `unset(key)` (left `???`, or at the schema's default: a value the command line set
    keeps it). `model.train_tokens` is required: a config.json does not hold it."""
    if not train_tokens_set:
        raise UserError("model=hf needs model.train_tokens (the target's pretraining tokens, "
                        "e.g. model.train_tokens=2e12): a config.json does not hold it")
    raw = read_config(config)
    try:
        mapped = map_config(raw)
    except (ValueError, TypeError, KeyError) as e:  # a field of the wrong kind ("abc" for θ)
        raise UserError(f"model.config={config!r}: a field could not be read "
                        f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                        "fix the config.json") from None
    filled = {k: v for k, v in mapped.items() if unset(k)}
    if unset("source"):
        filled["source"] = f"config.json at {config} (model_type {mapped['family']})"
        held = [f"{k} {raw[k]:g}" for k in GRANITE_MULTIPLIERS
                if mapped["family"] == "granite" and raw.get(k) not in (None, 1.0)]
        if held:
            filled["source"] += (f"; its multipliers ({', '.join(held)}) are not carried over: "
                                 "hf/config.json holds this run's μP ones")
    return filled
