"""config → proxy family: derive the μP proxy family from the target and the proxy settings.

The proxy keeps the target's architecture choices (norm, MLP kind, positions, ffn ratio, kv
grouping, tying) at a CPU- or GPU-sized depth, head dimension and context. Whatever cannot be
kept is listed in `notes` and ends up in the emitted config's `not_transferred`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from proxies.registry import size as proxy_size
from transfer.core.compose import instantiate
from transfer.core.config import Config
from transfer.core.config import grid_widths as resolved_grid_widths
from transfer.core.config import validation_width as resolved_validation_width
from transfer.core.errors import UserError
from transfer.core.hparams import MODEL_HPARAMS
from transfer.core.protocol import ProxyFamily, missing_members

# Depth-rule settings the sweep passes to the family (CompleteP's α and the base depth).
DEPTH_HPARAMS = ("depth_alpha", "base_depth")


@dataclass(frozen=True)
class ProxyPlan:
    family: ProxyFamily | None  # None until the data (and so the vocabulary) is known
    width: int  # where the stages run
    validation_width: int  # where the validator re-sweeps
    base_width: int
    derived: dict  # every value derived from the target: part of the fingerprint
    notes: list[str] = field(default_factory=list)  # what differs from the target, and why
    grid_widths: tuple[int, ...] = ()  # where the lr grid measures the optimum; () : the two
    target_width: int | None = None  # where the trajectory is carried (None: a custom model's)

    def widths(self) -> list[int]:
        """The lr grid's widths, narrowest first: ≥ 3 for the sweep's trajectory, width and
        validation_width for a custom model's check."""
        return list(self.grid_widths or (self.width, self.validation_width))


def _kv_group(target_ratio: int, explicit: int | None, widths, d_head,
              depth_width: tuple[int, ...] = ()) -> tuple[int, str]:
    """Query heads per kv head: `explicit` (it must divide the heads at every one of `widths`;
    a depth grid it cannot build falls back to the stages' width), or the largest that divides
    the heads at every one of `widths` and `depth_width` and is at most the target's."""
    if explicit is not None:
        for w in widths:
            if (w // d_head) % explicit:
                raise UserError(f"proxy.kv_group={explicit} does not divide the {w // d_head} heads "
                                f"of width {w}; use a divisor of {w // d_head} or proxy.kv_group=null")
        return explicit, ""
    narrowest = min((*widths, *depth_width))
    heads = narrowest // d_head
    group = max(g for g in range(1, heads + 1) if heads % g == 0 and g <= target_ratio)
    note = "" if group == target_ratio else (
        f"kv grouping: target has {target_ratio} query heads per kv head, the proxy's {heads} heads "
        f"at width {narrowest} (its narrowest grid) allow {group}")
    return group, note


def _depth_grid_width(cfg: Config, d_head: int) -> tuple[int, ...]:
    """The depth grid's own width when set and the head dimension can build it: the kv grouping
    must divide its heads too, or the grid would fall back to the stages' wider, costlier width
    (`transfer.verdict.depth.grid_width`). Counted whether or not the depth check runs, so one
    target's proxies are the same family with it and without it."""
    w = cfg.validation.depth_width
    if w is None or w < d_head or w % d_head:
        return ()
    return (int(w),)


def family_features(m, base_width: int, seq_len: int) -> dict:
    """The target family's own features the proxies keep (Qwen2's biases, Gemma 2's norms and
    soft-capping, q/k norms, OLMo 2's reordered norms, SmolLM3's NoPE layers, Gemma 3's local
    layers), only those set: a Llama target derives none, so its proxies and fingerprint
    are as before. Gemma's embedding normaliser √d_model grows with width, which μP forbids: the
    proxies hold its value at the base width, √base_width, at every width (emit says so)."""
    out = {k: getattr(m, k) for k in ("qkv_bias", "o_bias", "mlp_bias", "norm_unit_offset",
                                      "sandwich_norm", "attn_softcap", "logit_softcap",
                                      "qk_norm", "reordered_norm", "no_rope_interval")
           if getattr(m, k)}
    if m.embedding_normalizer:
        out["embedding_scale"] = math.sqrt(base_width)
    return {**out, **_local_layers(m, seq_len)}


def _local_layers(m, seq_len: int) -> dict:
    """The local layers' window and rotary base. A window as long as the proxies' context
    (`seq_len`) changes nothing on them and is left out (emit lists it as not transferred), as
    is Qwen2's, whose local layers (max_window_layers) are not kept; Gemma 2's local layers are
    every other one."""
    pattern = m.sliding_window_pattern or (2 if m.family == "gemma2" else None)
    out = {}
    if m.sliding_window and m.sliding_window < seq_len and m.family != "qwen2":
        out["sliding_window"] = int(m.sliding_window)
    if m.rope_local_theta is not None:
        out["rope_local_theta"] = float(m.rope_local_theta)
    if out and pattern:
        out["sliding_window_pattern"] = int(pattern)
    return out


def plan_proxies(cfg: Config) -> ProxyPlan:
    """Instantiate the proxy family named by `proxy.builder._target_` for this target."""
    p, m = cfg.proxy, cfg.model
    try:
        preset = proxy_size(p.size)
    except ValueError as e:
        raise UserError(f"proxy.size: {e}") from None
    n_layers = p.n_layers or preset["n_layers"]
    d_head = p.d_head or preset["d_head"]
    seq_len = p.seq_len or preset["seq_len"]
    width = p.width
    validation_width = resolved_validation_width(p)
    base_width = p.base_width or width
    widths = tuple(resolved_grid_widths(p))
    for name, w in (("proxy.width", width), ("proxy.validation_width", validation_width),
                    ("proxy.base_width", base_width),
                    *(("proxy.grid_widths", w) for w in widths)):
        if w % d_head:
            raise UserError(f"{name}={w} is not divisible by the proxy head dimension {d_head}; "
                            f"use a multiple of {d_head}")
    kv_group, kv_note = _kv_group(m.n_heads // m.n_kv_heads, p.kv_group,
                                  (width, *widths, base_width), d_head,
                                  _depth_grid_width(cfg, d_head))
    def pick(name, from_target):
        return from_target if getattr(p, name) is None else getattr(p, name)

    derived = {
        "n_layers": n_layers, "d_head": d_head, "seq_len": seq_len, "kv_group": kv_group,
        "ffn_ratio": round(float(pick("ffn_ratio", m.d_ff / m.d_model)), 6),
        "norm": pick("norm", m.norm), "mlp": pick("mlp", m.mlp),
        "positions": pick("positions", m.positions),
        "tied_embeddings": bool(pick("tied_embeddings", m.tied_embeddings)),
        # the target's rotary base and norm ε: a family that takes them builds with them
        "rope_theta": float(m.rope_theta),
        "norm_eps": float(m.norm_eps),
        "depth_alpha": float(p.depth_alpha),
        "base_depth": int(p.base_depth or n_layers),
    }
    derived.update(family_features(m, base_width, seq_len))
    # depth, head dimension and context differences are stated by the emitter itself
    notes = [kv_note] if kv_note else []
    return ProxyPlan(None, width, validation_width, base_width, derived, notes, widths,
                     int(m.d_model))


def instantiate_family(cfg: Config, plan: ProxyPlan, vocab_size: int) -> ProxyPlan:
    """Build the family object once the data (and so the vocabulary) is known."""
    builder = dict(cfg.proxy.builder)
    kwargs = dict(plan.derived, vocab_size=vocab_size, base_width=plan.base_width,
                  parametrization=cfg.proxy.parametrization,
                  **{k: getattr(cfg.proxy, k) for k in MODEL_HPARAMS})
    try:
        family = instantiate(builder, **kwargs)
    except Exception as e:  # noqa: BLE001 - Hydra wraps import and argument errors alike
        cause = e.__cause__ or e
        raise UserError(f"proxy.builder._target_={builder.get('_target_')!r} could not be built: "
                        f"{str(cause).splitlines()[0]}") from None
    if missing := missing_members(family):
        raise UserError(f"proxy.builder._target_={builder.get('_target_')!r} built a "
                        f"{type(family).__name__}, which lacks {', '.join(missing)}: a proxy "
                        "family implements every member of transfer.core.protocol.ProxyFamily")
    for name, w in (("proxy.width", plan.width), ("proxy.validation_width", plan.validation_width),
                    *(("proxy.grid_widths", w) for w in plan.grid_widths)):
        try:
            family.check_width(w, field=name)
        except ValueError as e:
            raise UserError(str(e)) from None
    derived = dict(plan.derived, vocab_size=vocab_size)
    return ProxyPlan(family, plan.width, plan.validation_width, plan.base_width, derived,
                     plan.notes, plan.grid_widths, plan.target_width)


