"""The train block of target.yaml: what μP does not carry, each value from a named rule.

Batch size, token horizon, warmup, weight decay and the schedule are not width-transferred; the
emitter (`transfer.outputs.emit`) asks this module for them. Every value comes from a rule of
`transfer.core.scaling` (the set conf/scaling picks), the μP transfer or the proxies' measurements,
and the block's `provenance` names which, key by key.
"""

from __future__ import annotations

from collections.abc import Mapping

from transfer.core import scaling
from transfer.core.config import TrainConf

__all__ = ["train_block"]


def _lr_rules(w: dict, p: dict, s: dict, total_tokens: float, batch_tokens: int,
              horizon: Mapping | None = None) -> tuple[float, dict, str]:
    """(lr factor, its terms, its provenance): the horizon rule from the proxy's trial tokens
    to the target's at the proxy's batch, then the batch rule from that batch to the target's.
    With a tight horizon check (`horizon["used"] == "measured"`) its measured exponent replaces
    the rule's."""
    p_tokens, p_seq = p.get("tokens_per_trial"), p.get("seq_len")
    if not p_tokens or not p_seq:
        return 1.0, {"horizon": 1.0, "batch": 1.0}, (
            "rule: none (the proxy's trial tokens or context are unknown; lr as transferred)")
    p_batch = int(w["batch_size"]) * int(p_seq)
    exponent, h_label = scaling.horizon_exponent(s["horizon_rule"], float(s["horizon_beta"]))
    measured = bool(horizon) and horizon.get("used") == "measured"
    if measured:
        exponent = float(horizon["exponent"])
        lo, hi = horizon["exponent_ci"]
        h_label = (f"measured on proxies (horizon check, exponent {exponent:+.3f} "
                   f"[{lo:+.3f}, {hi:+.3f}])")
    factor_h = (total_tokens / float(p_tokens)) ** exponent
    if s["batch_lr_rule"] == "adam_sqrt":
        batch, b_label = scaling.adam_sqrt_batch_factor(p_batch, batch_tokens), "adam_sqrt_batch"
    elif s["batch_lr_rule"] == "none":
        batch, b_label = 1.0, "no_batch_adjustment"
    else:
        raise ValueError(f"scaling.batch_lr_rule={s['batch_lr_rule']!r}; use adam_sqrt or none")
    terms = {"horizon": factor_h, "horizon_exponent": exponent,
             "horizon_exponent_source": "measured" if measured else "rule", "batch": batch,
             "from_tokens": float(p_tokens), "to_tokens": total_tokens,
             "from_batch_tokens": p_batch, "to_batch_tokens": batch_tokens}
    if measured:
        return factor_h * batch, terms, f"{h_label} × rule: {b_label}, applied to lr_transferred"
    return factor_h * batch, terms, f"rule: {h_label} × {b_label}, applied to lr_transferred"


def _warmup(s: dict, n_params: int, batch_tokens: int, total_steps: int) -> tuple[int, str]:
    if s["warmup_rule"] == "tokens_per_param":
        k = float(s["warmup_tokens_per_param"])
        tokens = scaling.warmup_tokens_per_param(n_params, k)
        steps, label = round(tokens / batch_tokens), f"rule: warmup_tokens_per_param (k={k:g})"
    elif s["warmup_rule"] == "fixed_steps":
        steps, label = int(s["warmup_steps"]), "rule: warmup_fixed_steps (scaling.warmup_steps)"
    else:
        raise ValueError(f"scaling.warmup_rule={s['warmup_rule']!r}; use one of "
                         f"{', '.join(scaling.WARMUP_RULES)}")
    return min(max(1, steps), max(total_steps - 1, 1)), label


def _weight_decay(w: dict, p: dict, s: dict, *, batch_tokens: int, lr: float,
                  total_tokens: float) -> tuple[float, float | None, str]:
    """(λ, τ, provenance) by the rule the proxies trained under (`train.weight_decay_rule`,
    recorded in the proxy block): the same λ (`fixed`), or the AdamW timescale of
    `scaling.tau_recipe` at the target's batch, lr and horizon (`timescale`)."""
    if p.get("weight_decay_rule", TrainConf.weight_decay_rule) == "fixed":
        wd = float(w["weight_decay"])
        return wd, None, (f"rule: train.weight_decay_rule=fixed (λ = {wd:g}, as the proxies "
                          "trained: the lr was measured at it)")
    r = s["tau_recipe"]
    tau = scaling.adamw_timescale(r["batch_tokens"], r["lr"], r["weight_decay"], r["tokens"])
    wd = scaling.weight_decay_for_timescale(tau, batch_tokens, lr, total_tokens)
    return wd, tau, (f"rule: adamw_timescale (τ of {s.get('tau_source', 'a recipe')}, as the "
                     "proxies trained)")


def train_block(m: dict, w: dict, *, p: dict, s: dict, counts: dict, n_gpus: int,
                 mu_label: str, horizon: Mapping | None = None) -> dict:
    """The launchable train block: every value from a named rule, the μP transfer or the
    proxies' measurements, with `provenance` naming which for each key."""
    seq_len, total_tokens = int(m["seq_len"]), float(m["train_tokens"])
    compute = scaling.deepseek_flops_per_token(int(m["n_layers"]), int(m["d_model"]),
                                               seq_len) * total_tokens
    raw, b_label, b_out = scaling.batch_rule(s["batch_rule"], d=total_tokens, c=compute,
                                             fixed_tokens=s.get("batch_tokens"))
    batch_tokens = scaling.round_batch_tokens(raw, seq_len, n_gpus)
    total_steps = max(1, round(total_tokens / batch_tokens))  # nearest whole step
    factor, terms, lr_label = _lr_rules(w, p, s, total_tokens, batch_tokens, horizon)
    lr = w["lr"] * factor
    warmup_steps, w_label = _warmup(s, counts["n_params"], batch_tokens, total_steps)
    wd, tau, wd_label = _weight_decay(w, p, s, batch_tokens=batch_tokens, lr=lr,
                                      total_tokens=total_tokens)
    n_emb = counts["n_params"] - counts["embedding"] - counts["readout"] - counts["positions"]
    batch_rule = f"rule: {b_label}, rounded to whole multiples of n_gpus × seq_len = " \
                 f"{n_gpus} × {seq_len}"
    target = (f"rule: target ({m['config']})" if m.get("config")
              else f"rule: target (conf/model/{m.get('name')}.yaml)")
    train = {
        "optimizer": "adamw", "lr": lr, "lr_transferred": w["lr"], "lr_factor": factor,
        "lr_factor_terms": terms, "batch_tokens": batch_tokens,
        "batch_size": batch_tokens // seq_len, "seq_len": seq_len, "n_gpus": n_gpus,
        "total_tokens": total_tokens, "total_steps": total_steps,
        "warmup_steps": warmup_steps, "warmup_tokens": warmup_steps * batch_tokens,
        "warmup_fraction": warmup_steps / total_steps, "schedule": s["schedule"],
        "min_lr_fraction": float(s["min_lr_fraction"]), "betas": [float(b) for b in s["betas"]],
        "eps": float(s["eps"]), "weight_decay": wd, "tau": tau,
        "grad_clip": float(s["grad_clip"]),
        "proxy_reference": {"batch_tokens": terms.get("from_batch_tokens"),
                            "tokens": terms.get("from_tokens"),
                            "batch_stage_winner_sequences": int(w["batch_size"])},
        "extrapolation": {
            "batch_rule": b_out,
            "horizon_rule_target": scaling.outside(scaling.BJORCK_RANGE, n=n_emb,
                                                   d=total_tokens),
            "horizon_rule_proxy": scaling.outside(scaling.BJORCK_RANGE,
                                                  d=terms.get("from_tokens"))},
        "scaling_rules": s.get("name", "default"),
    }
    if s["schedule"] == "wsd":  # the cooldown is the schedule's own: emitted beside it
        train["cooldown_fraction"] = float(s.get("wsd_cooldown_fraction", 0.2))
    warm = f"{w_label}; steps = warmup tokens / batch_tokens"
    train["provenance"] = {
        "optimizer": "rule: adamw (the proxies' optimizer, MuAdamW without mup)",
        "lr": lr_label, "lr_transferred": mu_label, "lr_factor": lr_label,
        "lr_factor_terms": lr_label, "batch_tokens": batch_rule, "batch_size": batch_rule,
        "seq_len": target, "n_gpus": "rule: cost.n_gpus (the target's data parallelism)",
        "total_tokens": target, "total_steps": "rule: total_tokens / batch_tokens, rounded",
        "warmup_steps": warm, "warmup_tokens": warm, "warmup_fraction": warm,
        "schedule": _schedule_label(s, horizon),
        "min_lr_fraction": "rule: scaling.min_lr_fraction (Llama 2: 10 % of the peak)",
        "betas": "rule: scaling.betas (those the proxies trained with; Llama 2's)",
        "eps": "rule: adam_eps_width (base ε as the proxies'; per group in param_groups)",
        "weight_decay": wd_label, "tau": wd_label,
        "grad_clip": "rule: scaling.grad_clip (Llama 2 recipe; the proxies clip at 1.0)",
        "proxy_reference": "measured on proxies",
        "extrapolation": "rule: scaling.outside (fitted ranges in transfer/core/scaling.py)",
        "scaling_rules": "rule: conf/scaling",
    }
    if "cooldown_fraction" in train:
        train["provenance"]["cooldown_fraction"] = (
            "rule: scaling.wsd_cooldown_fraction (a cooldown of ~20 % of the run matches cosine: "
            "Hägele et al. 2024, arXiv 2405.18392; the proxies trained with it)")
    return train


def _schedule_label(s: dict, horizon: Mapping | None) -> str:
    if s["schedule"] != "wsd":
        return f"rule: scaling.schedule ({s['schedule']}, Llama 2 recipe)"
    label = ("rule: scaling.schedule (wsd: warmup, constant lr, linear cooldown to "
             "min_lr_fraction; Hägele et al. 2024, arXiv 2405.18392; the proxies trained under it")
    if horizon and horizon.get("method") == "branched":
        label += ", and the horizon check measured its exponent by branched wsd cooldowns"
    return label + ")"
