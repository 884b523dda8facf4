"""The emitted full-scale config (`target.yaml`): explicit values at the target width.

Framework-neutral: a trainer needs no mup package, only the numbers here. Every width-dependent
value comes from `transfer.core.rules`; this module only decides which rule applies to which group
and writes down, next to the values, what did not transfer and why. The train block (batch,
horizon, warmup, weight decay: what μP does not carry) is `transfer.outputs.train_block`'s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import yaml

from transfer.core import params, rules
from transfer.core.cost import as_dict, target_params
from transfer.core.hparams import TUNABLE
from transfer.outputs.family_notes import (  # noqa: F401 (SQRT_WIDTH_NOT_MUP: re-exported)
    SQRT_WIDTH_NOT_MUP,
    family_changes,
    family_not_transferred,
)
from transfer.outputs.launch import launch_interval
from transfer.outputs.train_block import train_block

# The families' own features, written to target.yaml's model block where set.
FAMILY_FEATURES = ("qkv_bias", "o_bias", "mlp_bias", "norm_unit_offset", "sandwich_norm",
                   "attn_softcap", "logit_softcap", "embedding_normalizer",
                   "query_pre_attn_scalar", "sliding_window", "qk_norm", "reordered_norm",
                   "sliding_window_pattern", "rope_local_theta", "no_rope_interval")
WINNER_KEYS = TUNABLE + ("weight_decay", "schedule")  # what `winners` must hold: tuned + defaults
DEFAULT_EPS = 1e-8  # torch AdamW / MuAdamW default: what the proxies trained with

HEADER = """\
# Emitted by transfer.outputs.emit: explicit hyperparameters at the target width; no mup package needed.
# Use: one AdamW parameter group per entry of param_groups (weight_decay as in torch.optim.AdamW,
# i.e. the per-step shrink is lr × weight_decay); multiply the embedding output by
# mup.input_mult, the readout input by mup.logits_scale, and the attention logits q·k by
# mup.attn_scale (instead of 1/sqrt(d_head)). provenance says what did not transfer.
"""

NOT_VALIDATED_HEADER = "# WARNING: provenance.validated is false: {warning}\n"
WIDE_LAUNCH_HEADER = "# WARNING: {warning} (provenance.launch_warning, train.lr_interval_parts)\n"


def _warning(parametrization: str, validated: bool) -> str | None:
    if parametrization != "mup":
        return (f"proxy parametrization is {parametrization!r}, not 'mup': hyperparameters do not "
                "transfer across width; these values are a naive copy, not a transfer")
    if not validated:
        return ("the transfer was not validated (the validator rejected it or did not run): do "
                "not start a full-scale run from these values without checking them")
    return None


def _depth(m: dict, proxy: dict) -> tuple[int, float, float]:
    """(base depth, α, m_L at the target). A proxy block without `depth_alpha` predates the depth
    rules: α 0 (width-only μP), as it was trained."""
    base = int(proxy.get("base_depth") or proxy.get("n_layers") or m["n_layers"])
    alpha = float(proxy.get("depth_alpha", rules.NO_DEPTH_ALPHA))
    return base, alpha, rules.depth_mult(int(m["n_layers"]), base)


def _mup_block(m: dict, base_width: int, w: dict, parametrization: str, proxy: dict,
               d_head: int) -> dict:
    mult = rules.width_mult(int(m["d_model"]), base_width)
    base_depth, alpha, m_l = _depth(m, proxy)
    alpha = alpha if parametrization == "mup" else 0.0  # SP has no depth rule
    scale = float(proxy.get("embedding_scale", 1.0))
    out = {
        "parametrization": parametrization, "base_width": base_width,
        "target_width": int(m["d_model"]), "width_mult": mult,
        "input_mult": w["input_mult"], "output_mult": w["output_mult"],
        # the embedding output's whole multiplier: input_mult × the proxies' constant scale
        # (Gemma's normaliser at the base width; 1 elsewhere)
        "embedding_scale": scale, "embedding_multiplier": w["input_mult"] * scale,
        "logits_scale": rules.logits_scale(w["output_mult"], mult, parametrization),
        "attn_mult": w["attn_mult"], "d_head": d_head,
        "attn_scale": rules.attn_scale(w["attn_mult"], d_head, parametrization),
        "readout_zero_init": bool(proxy.get("readout_zero_init", True)),
        "zero_init_query": bool(proxy.get("zero_init_query", True)),
        # depth (CompleteP): every residual branch × residual_mult before the add
        "depth_alpha": alpha, "base_depth": base_depth, "target_depth": int(m["n_layers"]),
        "depth_mult": m_l, "residual_mult": rules.residual_mult(m_l, alpha),
        "hidden_depth_lr_factor": rules.hidden_depth_lr_factor(m_l, alpha),
        "block_vector_lr_factor": rules.block_vector_lr_factor(m_l, alpha),
        "eps_depth_factor": rules.eps_depth_factor(m_l, alpha),
    }
    changes = family_changes(m, out, base_width)
    if changes:
        out["family_changes"] = changes
    return out


def target_classes(m: dict, base_width: int, proxy: dict) -> dict[str, params.ParamClass]:
    """{role: ParamClass} at the target, against the proxies' base model: the same
    classification the proxy family trains with (`transfer.core.params`). The base fan-ins are the
    proxy's own — its ffn ratio, not the target's — so a pinned `proxy.ffn_ratio` gives the MLP
    down-projection its own width multiplier instead of d_model's."""
    base_depth, _, m_l = _depth(m, proxy)
    counts_d_head = int(m["d_model"]) // int(m["n_heads"])
    d_head = int(m.get("d_head") or counts_d_head)
    ffn = float(proxy.get("ffn_ratio") or int(m["d_ff"]) / int(m["d_model"]))
    # the q norm gain: head_dim long, or the whole q projection (OLMo 2); a vector either way
    qk = {"head": (d_head, int(proxy.get("d_head") or d_head)),
          "proj": (int(m["n_heads"]) * d_head, base_width)}.get(m.get("qk_norm"), (None, None))
    common = dict(vocab_size=int(m["vocab_size"]), mlp=m.get("mlp", "swiglu"),
                  positions=m.get("positions", "rope"), seq_len=int(m["seq_len"]),
                  bias=any(m.get(k) for k in ("qkv_bias", "o_bias", "mlp_bias")))
    target = params.role_shapes(d_model=int(m["d_model"]), n_heads=int(m["n_heads"]),
                                n_kv_heads=int(m["n_kv_heads"]), d_head=d_head,
                                d_ff=int(m["d_ff"]), qk_norm=qk[0], **common)
    # the proxy family has heads × d_head = width: only fan-ins (last dims) enter the multipliers
    base = params.role_shapes(d_model=base_width, n_heads=1, n_kv_heads=1, d_head=base_width,
                              d_ff=round(ffn * base_width), qk_norm=qk[1], **common)
    return {r: params.classify(r, s, base[r], depth_mult=m_l) for r, s in target.items()}


def param_groups(m: dict, mup: dict, w: dict, train: dict | None = None,
                 proxy: dict | None = None) -> list[dict]:
    """μP's Adam groups at the target: one per distinct (kind, block, fan-in) of
    `transfer.core.params` (e.g. `hidden_attn`, `hidden_mlp_in`, `hidden_mlp_down`, `embedding`,
    `readout`, `vector_block`, `vector_final`), each with its width and depth factors.

    `lr_transferred` is the μP value of the tuned lr; `lr` is what to launch with: the same
    rule applied to the train block's lr (transferred × the horizon and batch rules). Weight
    decay and ε come from the train block when given (the scaling rules), else from `w`.
    """
    t = train or {"lr": w["lr"], "weight_decay": w["weight_decay"],
                  "eps": w.get("eps", DEFAULT_EPS)}
    proxy = dict(proxy or {}, depth_alpha=mup.get("depth_alpha", rules.NO_DEPTH_ALPHA),
                 base_depth=mup.get("base_depth"))
    classes = target_classes(m, mup["base_width"], proxy)
    tied = bool(m.get("tied_embeddings", False))
    v = params.BaseValues(lr=t["lr"], init_std=w["init_std"], weight_decay=t["weight_decay"],
                          eps=t["eps"], depth_alpha=mup.get("depth_alpha", rules.NO_DEPTH_ALPHA),
                          parametrization=mup["parametrization"],
                          readout_zero_init=mup["readout_zero_init"], zero_init_query=False)
    v0 = dataclasses.replace(v, lr=w["lr"])
    names = params.group_names(classes)
    members: dict[tuple, list[params.ParamClass]] = {}
    for pc in classes.values():
        members.setdefault(pc.key, []).append(pc)
    groups = []
    for key, pcs in members.items():
        pc = pcs[0]
        g = {"name": names[key], "lr": params.lr(pc, v), "lr_transferred": params.lr(pc, v0),
             "init_std": params.init_std(pc, v, tied=tied),
             "weight_decay": params.weight_decay(pc, v), "eps": params.eps(pc, v)}
        if pc.kind == "vector":  # gain 1: w = 1, or w = 0 where the gain is (1 + w) (Gemma)
            g["init"] = "zeros" if m.get("norm_unit_offset") else "ones"
            if any(q.role == "bias" for q in pcs):
                g["zero_init"] = ["biases"]
        g.update(fan_in=pc.fan_in if pc.kind == "hidden" else None, width_mult=pc.width_mult,
                 depth_mult=pc.depth_mult,
                 applies_to=", ".join(params.APPLIES_TO[q.role] for q in pcs))
        if mup["zero_init_query"] and any(q.role == "attn_q" for q in pcs):
            g["zero_init"] = ["attention q"]  # uniform attention at init, as on the proxy
        if pc.kind == "readout":
            g["logits_scale"] = mup["logits_scale"]
            if tied:
                g["tied_to"] = "embedding"
        groups.append(g)
    order = {"hidden": 0, "embedding": 1, "readout": 2, "vector": 3}
    groups.sort(key=lambda g: order[classes_kind(g["name"])])
    if train and train.get("betas") is not None:  # one β pair for all: apply.py reads it here
        for g in groups:
            g["betas"] = list(train["betas"])
    return groups


def classes_kind(group: str) -> str:
    """The μP kind of a target.yaml group name."""
    return "hidden" if group.startswith("hidden") else "vector" if group.startswith(
        "vector") else group


def _mu_label(parametrization: str, validated: bool, trajectory: Mapping | None = None) -> str:
    state = "validated" if validated else "not validated"
    if trajectory:
        lo, hi = trajectory["interval_log2"]
        how = (f"the optimum's trajectory over proxy widths {trajectory['widths']} "
               f"({trajectory['model']} model) at width {trajectory['target_width']}, "
               f"{trajectory['confidence']:.0%} interval 2^[{lo:.2f}, {hi:.2f}]")
        if parametrization != "mup":
            return f"extrapolated from SP proxies ({how}; {state}: SP has no transfer)"
        return f"μP-transferred ({state}): {how}"
    if parametrization != "mup":
        return "copied from SP proxies (no transfer)"
    return f"μP-transferred ({state}): the stages' pick at the proxy width, no trajectory"


def _depth_passed(depth: Mapping | None) -> bool:
    return bool(depth) and depth.get("outcome") == "passed"


def depth_unshown(proxy_layers: int | None, target_layers: int, depth: Mapping | None) -> bool:
    """The target's depth differs from the proxies' and no depth check passed: depth is then
    not transferred (provenance.not_transferred) and the lr interval spans width only."""
    return proxy_layers != target_layers and not _depth_passed(depth)


def interval_spans(proxy_layers: int, target_layers: int, depth: Mapping | None, *,
                   joint: bool = False) -> str:
    """What the emitted lr's interval accounts for (provenance.lr.interval_spans): width and
    depth where the emitted lr is the joint estimate (`joint`: the depth check measured the
    optimum's trajectory across depth, `transfer.judge.joint`); else the width trajectory's
    alone, and the depth rules' effect on the optimum is in it only as far as the depth check
    showed it."""
    if proxy_layers == target_layers:
        return f"width (the target has the proxies' {target_layers} layers)"
    if joint:
        verdict = depth.get("outcome") if depth else "not run"
        return (f"width and depth: the width trajectory plus the optimum's move over depths "
                f"{(depth or {}).get('depths')} carried to {target_layers} layers, drawn "
                f"together (provenance.lr.parts); the depth verdict was {verdict}; the two "
                "axes are assumed additive (docs/verdict.md)")
    if not depth_unshown(proxy_layers, target_layers, depth):
        return (f"width; depth {proxy_layers} → {target_layers} layers rests on the depth check "
                f"over {depth.get('depths')} layers, which passed (its drift is not added to "
                "this interval)")
    ran = "did not run" if not depth else f"was {depth.get('outcome')}"
    return (f"width only: the target has {target_layers} layers, the proxies {proxy_layers}, "
            f"and the depth check {ran}, so what depth does to the optimum is not in this "
            "interval (provenance.not_transferred: depth)")


def _depth_reason(m: dict, proxy: dict, depth: Mapping | None) -> str:
    where = (f"depth differs between proxy ({proxy.get('n_layers')} layers) and target "
             f"({m['n_layers']})")
    if not depth:
        return (f"{where}; the depth check did not run (validation.depth_enabled=false), so the "
                f"depth rules (α = {float(proxy.get('depth_alpha', rules.NO_DEPTH_ALPHA)):g}, mup.residual_mult) "
                "are applied but not shown to hold")
    return (f"{where}; the depth check ({depth.get('depths')}) was {depth.get('outcome')}: "
            + "; ".join(depth.get("reasons") or []))


def _not_transferred(m: dict, w: dict, proxy: dict, d_head: int, train: dict,
                     depth: Mapping | None = None) -> list[dict]:
    p_seq, t_seq = proxy.get("seq_len"), int(m["seq_len"])
    prov = train["provenance"]
    items = [
        {"name": "weight_decay", "value": train["weight_decay"],
         "reason": f"not a μP quantity: set by {prov['weight_decay']}, ×width_mult on hidden "
                   "matrices so lr·wd is the same in every group; proxies and target share the "
                   "rule, and adding decay the proxies did not see moves the optimum (under "
                   "the AdamW-timescale rule the proxies' optimum sat 3.5 octaves higher and "
                   "their loss was nearly flat in lr: benchmarks/RESULTS.md)"},
        {"name": "batch_size", "value": train["batch_size"],
         "reason": f"transfers only empirically, so the proxies' batch-stage winner "
                   f"({int(w['batch_size'])} sequences of {p_seq}) is never copied: "
                   f"{prov['batch_tokens']}; the winner is only the batch the lr was measured "
                   "at (train.proxy_reference)"},
        {"name": "warmup_fraction", "value": train["warmup_fraction"],
         "reason": f"μP says nothing about the schedule's shape; the proxies' fraction "
                   f"({w['warmup_fraction']}) is not copied: {prov['warmup_steps']}"},
        {"name": "token_horizon", "value": float(m["train_tokens"]),
         "reason": f"each proxy trial trained on {proxy.get('tokens_per_trial', 'far fewer')} "
                   f"tokens, the target on {float(m['train_tokens']):.3g}; the lr is "
                   f"multiplied by {train['lr_factor']:.3g} ({prov['lr']}), an extrapolation "
                   "far outside every law's fitted range (train.extrapolation)"},
        {"name": "data", "value": proxy.get("data"),
         "reason": f"proxy vocabulary ({proxy.get('vocab_size')}) and data ({proxy.get('data')}) "
                   f"differ from the target's ({m['vocab_size']}); losses are not comparable"},
    ]
    if depth_unshown(proxy.get("n_layers"), int(m["n_layers"]), depth):
        items.append({"name": "depth", "value": int(m["n_layers"]),
                      "reason": _depth_reason(m, proxy, depth)})
    if p_seq != t_seq:
        items.append({"name": "seq_len", "value": t_seq,
                      "reason": f"context differs between proxy ({p_seq}) and target ({t_seq})"})
    if proxy.get("d_head") != d_head:
        items.append({"name": "attn_scale", "value": None,
                      "reason": f"head dim differs between proxy ({proxy.get('d_head')}) and "
                                f"target ({d_head}): attn_scale follows μP's 1/d_head rule, "
                                "which the proxy family (fixed d_head) never exercises"})
    attn_width = int(m["n_heads"]) * d_head
    if attn_width != int(m["d_model"]):
        items.append({"name": "attention_width", "value": attn_width,
                      "reason": f"the target's heads × head_dim = {m['n_heads']} × {d_head} = "
                                f"{attn_width} ≠ d_model {m['d_model']}; the proxies keep heads × "
                                "d_head = width (their d_head is fixed, heads grow): the output "
                                "projection's μP factors follow its own fan-in at the target"})
    if m.get("rope_scaling"):
        items.append({"name": "rope_scaling", "value": dict(m["rope_scaling"]),
                      "reason": "rescales rotary wavelengths for contexts past the original "
                                f"pretraining one, far beyond the proxies' {p_seq} tokens: the "
                                "proxies use the plain rope_theta, and it does not bear on the "
                                "lr (hf/config.json carries it)"})
    items += family_not_transferred(m, proxy)
    target_group = int(m["n_heads"]) // int(m["n_kv_heads"])
    if proxy.get("kv_group") is not None and proxy["kv_group"] != target_group:
        items.append({"name": "kv_group", "value": target_group,
                      "reason": f"query heads per kv head differ between proxy "
                                f"({proxy['kv_group']}) and target ({target_group})"})
    return items


def _transferred(mup: dict, w: dict, depth: Mapping | None = None) -> list[dict]:
    how = ("μP: hidden lr / width_mult, other groups unchanged" if mup["parametrization"] == "mup"
           else "SP: unchanged with width (no transfer guarantee)")
    out = [{"name": "lr", "value": w["lr"], "rule": how},
           {"name": "init_std", "value": w["init_std"],
            "rule": "hidden σ / sqrt(fan-in width_mult); embedding σ unchanged"},
           {"name": "input_mult", "value": w["input_mult"], "rule": "unchanged"},
           {"name": "output_mult", "value": w["output_mult"],
            "rule": "logits_scale = output_mult / width_mult"},
           {"name": "attn_mult", "value": w["attn_mult"],
            "rule": "attn_scale = attn_mult / target d_head"}]
    if _depth_passed(depth):
        out.append({"name": "depth", "value": mup["target_depth"],
                    "rule": f"CompleteP α = {mup['depth_alpha']:g}: residual branches × "
                            f"m_L^-α = {mup['residual_mult']:.4g}, hidden lr × m_L^(α-1), "
                            f"block ε × m_L^-α (m_L = {mup['depth_mult']:.4g}); the depth check "
                            f"passed over {depth.get('depths')} layers"})
    return out


def _normalise_extra(extra: list | None) -> list[dict]:
    return [x if isinstance(x, Mapping) else {"name": "note", "value": None, "reason": str(x)}
            for x in extra or []]


def _scaling(scaling_conf: Mapping | Any | None) -> dict:
    """The scaling rule set as a plain dict: conf/scaling's, or ScalingConf's defaults."""
    # the schema's defaults are the one source; imported here, not at the top, because
    # transfer.core.config registers with Hydra and the emitter is plain Python without it
    from transfer.core.config import ScalingConf

    if scaling_conf is None:
        return as_dict(ScalingConf())
    return dict(as_dict(ScalingConf()), **as_dict(scaling_conf))


def _launch(train: dict, trajectory: Mapping, s: dict, horizon: Mapping | None) -> str | None:
    """The transferred lr's interval and the launch lr's (`transfer.outputs.launch`: the
    transferred lr's draws and the rules' exponents drawn jointly), with their provenance; the
    one line that says the launch interval is wide, or None."""
    lo, hi = (float(x) for x in trajectory["interval"])
    launch = launch_interval(estimate_log2=math.log2(train["lr_transferred"]),
                             trajectory=trajectory, terms=train["lr_factor_terms"], scaling=s,
                             horizon=horizon)
    train["lr_transferred_interval"] = [lo, hi]
    train.update({k: launch[k] for k in ("lr_interval", "lr_interval_log2", "lr_interval_parts")})
    train["lr_trajectory"] = {k: trajectory[k] for k in (
        "model", "model_form", "widths", "optima_log2", "target_width", "confidence")}
    parts = launch["lr_interval_parts"]
    how = (f"the launch lr's {parts['confidence']:.0%} interval: log2 lr_transferred's draws + "
           "e_h·log2(D_target/D_proxy) + e_b·log2(B_target/B_proxy), drawn jointly "
           "(transfer.outputs.launch); each part's source: lr_interval_parts")
    train["provenance"].update(
        lr_transferred_interval=train["provenance"]["lr_transferred"],
        lr_interval=how, lr_interval_log2=how,
        lr_interval_parts=("each part's own central interval's half-width in octaves of lr and its "
                           "share of the launch lr's variance (half-width² over their sum); each "
                           "part's `source` says where it came from"),
        lr_trajectory="measured on proxies (transfer.judge.trajectory)")
    return launch["warning"]


def emit_target(model: Mapping | Any, *, base_width: int, winners: Mapping, proxy: Mapping,
                validated: bool, drift_log2: float | None, fingerprint: str, budget: Mapping,
                created: str, not_transferred_extra: list | None = None,
                scaling: Mapping | Any | None = None, n_gpus: int = 1,
                depth: Mapping | None = None, horizon: Mapping | None = None,
                lr_trajectory: Mapping | None = None) -> dict:
    """The target.yaml content: model, mup, param_groups, train, budget, provenance.

    lr_trajectory: where `winners["lr"]` came from when the validator extrapolated it to the
    target width (`interval` [lo, hi] of that lr, `interval_log2`, `confidence`, `model`,
    `widths`, `target_width`; optionally `draw_quantiles_log2`, the 201 quantiles of its
    bootstrap draws at the target, and `parts` {width, depth: {draw_quantiles_log2}}); None when
    the stages' pick is emitted. Its interval is written beside the lr
    (`train.lr_transferred_interval`); `train.lr_interval` is the launch lr's, drawn jointly with
    the rules' exponents (`transfer.outputs.launch`), with its parts (`lr_interval_parts`).

    horizon: the horizon check's result (`transfer.verdict.horizon.measure`), None when it did not
    run; where it is tight (`used: measured`) the lr's horizon factor uses its measured
    exponent instead of `scaling.horizon_rule`'s, and the lr's provenance says so.

    depth: the depth check's summary (`outcome`, `depths`, `reasons`, `drift_log2`), None when
    it did not run; depth is listed as transferred only when it passed.

    scaling: the rule set for what μP does not carry (conf/scaling; None: its defaults).
    n_gpus: the target's data-parallel devices; the batch is a whole multiple of n_gpus ×
    seq_len tokens.
    """
    m, w, p = as_dict(model), dict(winners), dict(proxy)
    missing = [k for k in WINNER_KEYS if k not in w]
    if missing:
        raise ValueError(f"winners lacks {', '.join(missing)}; pass the tuned or default value "
                         "of each")
    if base_width < 1:
        raise ValueError(f"base_width must be >= 1, got {base_width=}")
    if n_gpus < 1:
        raise ValueError(f"n_gpus must be >= 1, got {n_gpus=}")
    parametrization = p.get("parametrization", "mup")
    counts = target_params(m)
    d_head = counts["d_head"]
    mup = _mup_block(m, base_width, w, parametrization, p, d_head)
    ok = bool(validated) and parametrization == "mup"
    model_block = {k: m[k] for k in ("name", "source", "d_model", "n_layers", "n_heads",
                                     "n_kv_heads", "d_ff", "vocab_size", "seq_len",
                                     "tied_embeddings", "norm", "norm_eps", "mlp", "positions",
                                     "rope_theta", "rope_scaling", "family") if k in m}
    model_block.update({k: m[k] for k in FAMILY_FEATURES if m.get(k)})
    model_block.update(d_head=d_head, n_params=counts["n_params"],
                       n_params_flops=counts["n_params_flops"])
    train = train_block(m, w, p=p, s=_scaling(scaling), counts=counts, n_gpus=int(n_gpus),
                         mu_label=_mu_label(parametrization, ok, lr_trajectory), horizon=horizon)
    launch_warning = None
    if lr_trajectory:
        launch_warning = _launch(train, lr_trajectory, _scaling(scaling), horizon)
    proxy_block = {"parametrization": parametrization, "base_width": base_width}
    proxy_block.update({k: v for k, v in p.items() if k != "parametrization"})
    provenance = {
        "validated": ok, "warning": _warning(parametrization, bool(validated)),
        "launch_warning": launch_warning,
        "drift_log2": None if drift_log2 is None else float(drift_log2),
        "fingerprint": fingerprint, "created": created, "proxy": proxy_block,
        "transferred": _transferred(mup, w, depth),
        "depth": dict(depth) if depth else None,
        "horizon": dict(horizon) if horizon else None,
        "not_transferred": _not_transferred(m, w, p, d_head, train, depth) + _normalise_extra(
            not_transferred_extra),
    }
    return {"model": model_block, "mup": mup, "param_groups": param_groups(m, mup, w, train, p),
            "train": train, "budget": dict(budget), "provenance": provenance}


def _plain(obj: Any) -> Any:
    """YAML-safe builtins: numpy/torch scalars → Python numbers, tuples → lists, and NaN (no
    estimate: a depth curve without an optimum) → null, as the run's JSON files write it. ±inf
    stays YAML's ±.inf: an interval unbounded on that side."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalar
        obj = obj.item()
    if isinstance(obj, float) and math.isnan(obj):
        return None
    return obj


def dump_yaml(obj: Mapping, path_or_stream: str | Path | IO[str],
              header: str | None = None) -> None:
    """Write `obj` as YAML in its own key order, under a header comment (HEADER by default,
    plus a warning line when provenance.validated is false)."""
    if header is None:
        header = HEADER
        prov = obj.get("provenance") or {}
        if prov.get("validated") is False:
            header += NOT_VALIDATED_HEADER.format(warning=prov.get("warning"))
        if prov.get("launch_warning"):
            header += WIDE_LAUNCH_HEADER.format(warning=prov["launch_warning"])
    text = header + yaml.safe_dump(_plain(obj), sort_keys=False, allow_unicode=True,
                                   default_flow_style=False, width=100)
    if hasattr(path_or_stream, "write"):
        path_or_stream.write(text)
    else:
        Path(path_or_stream).write_text(text, encoding="utf-8")
