"""target.yaml → a model's init and its `torch.optim.AdamW` parameter groups.

`init_(model, target)` draws every parameter with its group's μP σ (zero where the proxy had
zero-init: the attention query, the untied readout by default); `param_groups(model, target)`
returns one AdamW group per target.yaml group with its lr, weight decay and ε. Parameters are
matched by role (name pattern, checked against shape) for a Hugging Face `GraniteForCausalLM`
and the families' own (`Qwen2`, `Qwen3`, `Mistral`, `Ministral`, `Ministral3`, `Olmo2`,
`Olmo3`, `SmolLM3`, `Gemma`, `Gemma2`, `Gemma3` `...ForCausalLM`), and for the project's own
family (`proxies/transformer.py`); each role is decided once, in `transfer.core.params`, and
both functions read that one answer. An unknown parameter or group
name is an error that names it. No mup package is needed: the numbers in target.yaml are already explicit.

The families' configs have no field for some μP multipliers (Granite's has them all).
`init_` puts each where the model has one: the attention's `scaling` attribute and Gemma's
embedding `embed_scale` buffer (both set in memory: set them again after reloading the model),
and, where no such knob exists, into the parameter the multiplier multiplies (`multipliers`):
the logits scale into the final norm's gain, CompleteP's residual multiplier into each branch's
last matrix (o_proj, down_proj) or, where a norm follows the branch, into that norm's gain
(Gemma 2 / 3, OLMo 2). A parameter × c trained
with lr × c, ε / c and weight decay / c is the same training under Adam; `param_groups` splits
such parameters into their own groups. What is left for a trainer: `trainer_must_add`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml
from torch import nn

from transfer.core.params import GROUP_ROLES, HIDDEN, MATRIX_ROLES, ROLE_PATTERNS, role_of

# Roles, their name patterns and the group names are decided once, in transfer.core.params.
__all__ = ["GROUP_ROLES", "ROLE_PATTERNS", "Assigned", "assign", "init_", "load_target",
           "param_groups", "role_of"]

# A group's `zero_init` entries (target.yaml words) → roles.
ZERO_INIT_ROLES: dict[str, frozenset[str]] = {
    "attention q": frozenset(("attn_q",)),
    "readout": frozenset(("readout",)),
    "biases": frozenset(("bias",)),
}


@dataclass(frozen=True)
class Assigned:
    """One parameter's decided role and target.yaml group."""

    name: str
    param: nn.Parameter
    role: str
    group: Mapping


def load_target(run_dir: Path | str) -> dict:
    """`run_dir/target.yaml` as a dict (plain YAML; nothing in it is executed)."""
    return yaml.safe_load((Path(run_dir) / "target.yaml").read_text(encoding="utf-8"))


def _group_for_role(groups: list[Mapping]) -> dict[str, Mapping]:
    unknown = [g["name"] for g in groups if g["name"] not in GROUP_ROLES]
    if unknown:
        raise ValueError(f"target.yaml param group {unknown[0]!r} is unknown to transfer.outputs.apply; "
                         f"known: {', '.join(GROUP_ROLES)} (add it to GROUP_ROLES)")
    out: dict[str, Mapping] = {}
    for role in {r for roles in GROUP_ROLES.values() for r in roles}:
        holders = sorted((len(GROUP_ROLES[g["name"]]), g["name"], g) for g in groups
                         if role in GROUP_ROLES[g["name"]])
        if len(holders) > 1 and holders[0][0] == holders[1][0]:
            raise ValueError(f"param groups {holders[0][1]!r} and {holders[1][1]!r} both claim "
                             f"role {role!r}; target.yaml must give each parameter one group")
        if holders:
            out[role] = holders[0][2]
    return out


def _check_shape(name: str, p: torch.Tensor, role: str, model_block: Mapping | None) -> None:
    want_ndim = 2 if role in MATRIX_ROLES else 1
    if p.ndim != want_ndim:
        raise ValueError(f"parameter {name!r} looks like {role!r} by name but has shape "
                         f"{tuple(p.shape)} (expected {want_ndim} dims)")
    if model_block is None:
        return
    d, vocab = int(model_block["d_model"]), int(model_block["vocab_size"])
    ok = {"embedding": tuple(p.shape) == (vocab, d), "readout": tuple(p.shape) == (vocab, d),
          "norm": tuple(p.shape) == (d,), "final_norm": tuple(p.shape) == (d,),
          "position": p.ndim == 2 and p.shape[1] == d}
    if not ok.get(role, role not in HIDDEN or d in p.shape):
        raise ValueError(f"parameter {name!r} ({role}) has shape {tuple(p.shape)}, which does "
                         f"not fit the target (d_model {d}, vocab {vocab}): target.yaml's σ and lr "
                         "are for the target's width; pass strict=False only for a deliberately "
                         "resized model")


def assign(model: nn.Module, target: Mapping, *, strict: bool = True) -> list[Assigned]:
    """Every parameter of `model` (shared ones once) with its role and target.yaml group.

    `strict` also checks shapes against target.yaml's model block (width and vocabulary).
    """
    by_role = _group_for_role(list(target["param_groups"]))
    model_block = target["model"] if strict else None
    out = []
    for name, p in model.named_parameters():
        role = role_of(name)
        _check_shape(name, p, role, model_block)
        if role not in by_role:
            raise ValueError(f"parameter {name!r} ({role}) is in no target.yaml param group "
                             f"(groups: {', '.join(g['name'] for g in target['param_groups'])})")
        out.append(Assigned(name, p, role, by_role[role]))
    _check_tying(out, target)
    return out


def _check_tying(assigned: list[Assigned], target: Mapping) -> None:
    roles = {a.role for a in assigned}
    readout = next((g for g in target["param_groups"] if g["name"] == "readout"), None)
    target_tied = readout is not None and readout.get("tied_to") == "embedding"
    model_tied = "embedding" in roles and "readout" not in roles  # a shared tensor shows once
    if target_tied != model_tied:
        raise ValueError(f"the model's embeddings are {'tied' if model_tied else 'untied'} but "
                         f"target.yaml's are {'tied' if target_tied else 'untied'}; build the "
                         "model with tie_word_embeddings as in hf/config.json")


def _zero_roles(group: Mapping) -> frozenset[str]:
    out: set[str] = set()
    for what in group.get("zero_init") or []:
        if what not in ZERO_INIT_ROLES:
            raise ValueError(f"param group {group['name']!r}: zero_init entry {what!r} is unknown "
                             f"to transfer.outputs.apply; known: {', '.join(ZERO_INIT_ROLES)}")
        out |= ZERO_INIT_ROLES[what]
    return frozenset(out)


# Hugging Face class-name prefix → family (`multipliers`, `trainer_must_add`, `_set_knobs`)
HF_FAMILIES = {"Qwen2": "qwen2", "Qwen3": "qwen3", "Mistral": "mistral", "Olmo2": "olmo2",
               "Olmo3": "olmo3", "Ministral3": "ministral3", "Ministral": "ministral",
               "SmolLM3": "smollm3", "Gemma2": "gemma2", "Gemma3": "gemma3_text",
               "Gemma": "gemma"}  # in this order: the first prefix a class name starts with
GEMMAS = ("gemma", "gemma2", "gemma3_text")  # an embed_scale buffer, (1 + w) gains


def hf_family(model: nn.Module) -> str | None:
    """The family of a Hugging Face model other than Granite (multipliers set by `init_`),
    else None."""
    name = type(model).__name__
    return next((f for prefix, f in HF_FAMILIES.items() if name.startswith(prefix)), None)


# parameter name → which μP multiplier it absorbs, per family (see the module docstring)
_FINAL_NORM = (r"(^|\.)norm\.weight$", "logits_scale")
_BRANCH_END = (r"(self_attn\.o_proj|mlp\.down_proj)\.(weight|bias)$", "residual_mult")
_POST_NORMS = (r"(post_attention_layernorm|post_feedforward_layernorm)\.weight$",
               "residual_mult")
ABSORB = {**{f: (_FINAL_NORM, _BRANCH_END)
             for f in ("qwen2", "qwen3", "mistral", "ministral", "ministral3", "smollm3",
                       "gemma")},
          **{f: (_FINAL_NORM, _POST_NORMS) for f in ("gemma2", "gemma3_text", "olmo2", "olmo3")}}


def multipliers(model: nn.Module, target: Mapping) -> dict[str, float]:
    """{parameter name: c} for the μP multipliers moved into parameters (only c ≠ 1)."""
    fam = hf_family(model)
    if fam is None:  # Granite holds every multiplier; the proxy family applies its own
        return {}
    mup, out = target["mup"], {}
    for name, _ in model.named_parameters():
        for pattern, key in ABSORB.get(fam, ()):
            if re.search(pattern, name) and float(mup.get(key, 1.0)) != 1.0:
                out[name] = float(mup[key])
    return out


def trainer_must_add(model: nn.Module, target: Mapping) -> list[str]:
    """The μP multipliers `init_` cannot put into `model`: a trainer multiplies these itself."""
    fam = hf_family(model)
    if fam not in (None, *GEMMAS) and float(target["mup"].get(
            "embedding_multiplier", target["mup"]["input_mult"])) != 1.0:
        return [f"the embedding output × {target['mup']['embedding_multiplier']:g} "
                f"({type(model).__name__} has no embedding multiplier, and a tied table is the "
                "readout too)"]
    return []


def _set_knobs(model: nn.Module, target: Mapping) -> None:
    """The multipliers the family's modules hold as plain attributes or buffers."""
    fam = hf_family(model)
    if fam is None:
        return
    mup = target["mup"]
    for m in model.modules():
        if fam and hasattr(m, "scaling") and hasattr(m, "q_proj"):
            m.scaling = float(mup["attn_scale"])  # Qwen2's was head_dim^-½
        if fam in GEMMAS and hasattr(m, "embed_scale"):
            m.embed_scale.fill_(float(mup.get("embedding_multiplier", mup["input_mult"])))
            if hasattr(m, "scalar_embed_scale"):  # Gemma 3 re-fills the buffer from it
                m.scalar_embed_scale = float(m.embed_scale)


def init_(model: nn.Module, target: Mapping, *, seed: int = 0, strict: bool = True) -> nn.Module:
    """Initialise `model` in place by target.yaml's per-group σ; deterministic for `seed`,
    global RNG untouched. Zero where the group's zero_init says (or σ is 0), norm gains 1,
    biases 0; on the families' own models also the multipliers their configs cannot hold."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    factor = multipliers(model, target)
    with torch.no_grad():
        _set_knobs(model, target)
    for a in assign(model, target, strict=strict):
        std, c = a.group.get("init_std"), factor.get(a.name, 1.0)
        with torch.no_grad():
            if a.role == "bias":
                a.param.zero_()
            elif a.role in _zero_roles(a.group) or std == 0:
                a.param.zero_()
            elif std is None:  # a gain of c: w = c, or w = c - 1 where the gain is (1 + w)
                a.param.fill_(c - 1.0 if a.group.get("init") == "zeros" else c)
            else:
                a.param.copy_(torch.randn(a.param.shape, generator=gen) * float(std) * c)
    return model


def param_groups(model: nn.Module, target: Mapping, *, strict: bool = True) -> list[dict]:
    """AdamW parameter groups: one per target.yaml group that holds parameters, in its order,
    with `lr`, `weight_decay` and (when the group has them) `eps` and `betas`; `name` too."""
    members: dict[str, dict[float, list[nn.Parameter]]] = {}
    factor = multipliers(model, target)
    for a in assign(model, target, strict=strict):
        members.setdefault(a.group["name"], {}).setdefault(factor.get(a.name, 1.0), []).append(
            a.param)
    out = []
    for g in target["param_groups"]:
        for c, ps in members.get(g["name"], {}).items():  # none: e.g. a tied readout
            d = {"name": g["name"] if c == 1.0 else f"{g['name']}*{c:.6g}", "params": ps,
                 "lr": float(g["lr"]) * c, "weight_decay": float(g["weight_decay"]) / c}
            for key in ("eps", "betas"):
                if g.get(key) is not None:
                    d[key] = tuple(g[key]) if key == "betas" else float(g[key]) / c
            out.append(d)
    return out
