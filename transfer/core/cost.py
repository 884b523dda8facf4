"""What the target run costs, what tuning cost, and what tuning on the target would have cost.

Plain Python on plain dicts (or the dataclasses of `transfer.core.config`): the orchestrator measures,
this module does the arithmetic and writes down every assumption next to the numbers.

FLOPs convention (the same as `proxies.TransformerFamily.flops_per_token`): training FLOPs per
token = 6·N + 6·n_layers·d_model·seq_len, where N is every parameter except the input embedding
table (a lookup, not a matmul), and the attention term counts QKᵀ and A·V causally: half of the
full seq_len² square, as a causal kernel (FlashAttention) computes it. With tied embeddings the shared table is still the readout
matmul, so it is counted once. Norm gains stay in N: they are ~0.01 % of it and dropping them
would make the count disagree with the published parameter totals it is checked against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, is_dataclass
from typing import Any

from transfer.core.errors import BudgetExceeded

SECONDS_PER_HOUR = 3600.0
PREDICTION_TOLERANCE = 0.10  # the drill's goal: predicted stage seconds within ±10 %


def as_dict(obj: Any) -> dict:
    """A plain dict from a mapping or a config dataclass."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"expected a dict or a config dataclass, got {type(obj).__name__}")


# ---- the target model ---------------------------------------------------------------------
def target_params(model: Mapping | Any) -> dict:
    """Exact parameter count of a Llama-layout decoder (Llama, Qwen2 / 3, Gemma 2 / 3, Mistral,
    OLMo 2, SmolLM3) from ModelConf fields.

    Returns n_params (everything), n_params_flops (the N of 6·N·D: all but the input embedding
    table; a tied table counts once, as the readout), and the pieces they are made of.
    """
    m = as_dict(model)
    d, n_heads, n_kv = int(m["d_model"]), int(m["n_heads"]), int(m["n_kv_heads"])
    d_head = m.get("d_head")
    if d_head is None and d % n_heads:
        raise ValueError(f"model.d_model={d} is not divisible by model.n_heads={n_heads}")
    d_head = int(d_head or d // n_heads)  # Gemma 2: its own head_dim, not d / heads
    mlp = m.get("mlp", "swiglu")
    if mlp not in ("swiglu", "geglu", "gelu"):
        raise ValueError(f"model.mlp={mlp!r}; use swiglu, geglu or gelu")
    q, kv = n_heads * d_head, n_kv * d_head
    attention = d * q + 2 * d * kv + q * d
    attention += (q + 2 * kv) * bool(m.get("qkv_bias")) + d * bool(m.get("o_bias"))
    d_ff = int(m["d_ff"])
    ffn = (2 if mlp == "gelu" else 3) * d * d_ff
    ffn += (d_ff * (1 if mlp == "gelu" else 2) + d) * bool(m.get("mlp_bias"))
    # pre-attention, pre-MLP (none: OLMo 2), + after each branch (Gemma 2 / 3, OLMo 2)
    norms = 2 * (not m.get("reordered_norm")) + 2 * bool(
        m.get("sandwich_norm") or m.get("reordered_norm"))
    qk_norm = {"head": 2 * d_head, "proj": q + kv}.get(m.get("qk_norm"), 0)  # q and k gains
    per_layer = attention + ffn + norms * d + qk_norm
    embedding = int(m["vocab_size"]) * d
    tied = bool(m.get("tied_embeddings", False))
    readout = 0 if tied else embedding  # a tied readout reuses the embedding table
    positions = int(m["seq_len"]) * d if m.get("positions", "rope") == "learned" else 0
    blocks = int(m["n_layers"]) * per_layer + d  # + final norm
    n_params = embedding + readout + positions + blocks
    # N for FLOPs: drop the embedding lookup (and learned positions, also a lookup) but keep
    # one V·d readout matmul, which a tied model still performs with the shared table.
    n_params_flops = blocks + embedding
    return {"n_params": n_params, "n_params_flops": n_params_flops, "embedding": embedding,
            "readout": readout, "positions": positions, "per_layer": per_layer,
            "d_head": d_head}


def flops_per_token(model: Mapping | Any) -> dict:
    """Training FLOPs per token, the two terms apart: 6·N and 6·n_layers·d_model·seq_len."""
    m = as_dict(model)
    n = target_params(m)["n_params_flops"]
    dense = 6.0 * n  # forward 2·N + backward 4·N per token
    # QKᵀ and A·V: 2·seq_len·d_model each per layer forward over the full square, ×3 for
    # forward + backward = 12·L·d·T; causal: a token attends to the ones before it, half of it
    attention = 6.0 * int(m["n_layers"]) * int(m["d_model"]) * int(m["seq_len"])
    return {"dense": dense, "attention": attention, "total": dense + attention}


def gpu_hours(flops: float, hardware: Mapping | Any) -> float:
    """FLOPs as GPU-hours on `hardware` at its assumed utilisation (MFU)."""
    h = as_dict(hardware)
    return flops / (float(h["peak_flops"]) * float(h["utilization"])) / SECONDS_PER_HOUR


def target_run_cost(model: Mapping | Any, hardware: Mapping | Any,
                    cost_conf: Mapping | Any) -> dict:
    """Pretraining the target on model.train_tokens tokens: FLOPs, GPU-hours, days, money."""
    m, h, c = as_dict(model), as_dict(hardware), as_dict(cost_conf)
    tokens = float(m["train_tokens"])
    per_token = flops_per_token(m)
    flops_6nd, flops_attention = per_token["dense"] * tokens, per_token["attention"] * tokens
    total = flops_6nd + flops_attention
    hours = gpu_hours(total, h)
    buffered = hours * (1.0 + float(c["buffer"]))
    n_gpus, price = int(c["n_gpus"]), float(h["price_per_gpu_hour"])
    counts = target_params(m)
    return {
        "model": m.get("name"), "hardware": h.get("name"), "n_gpus": n_gpus,
        "n_params": counts["n_params"], "n_params_flops": counts["n_params_flops"],
        "tokens": tokens,
        "flops_6nd": flops_6nd, "flops_attention": flops_attention, "flops_total": total,
        "gpu_hours": hours, "gpu_hours_with_buffer": buffered,
        "wall_days": hours / n_gpus / 24.0, "wall_days_with_buffer": buffered / n_gpus / 24.0,
        "usd": hours * price, "usd_with_buffer": buffered * price,
    }


# ---- tuning, as run -----------------------------------------------------------------------
def device_hours(seconds: float, n_devices: int = 1) -> float:
    """Hours held on the device actually used: what a spending cap is measured in."""
    return float(seconds) * n_devices / SECONDS_PER_HOUR


def tuning_cost(measured: Mapping, hardware: Mapping | Any) -> dict:
    """The proxy work as actually run, and its FLOPs re-expressed on the target hardware.

    measured: {"device": str, "n_devices": int (optional, 1),
               "<part>": {"seconds": wall s on that device, "flops": float}, ...}
    where the parts are e.g. "sweep" and "validation" (any key whose value is a dict).
    """
    h = as_dict(hardware)
    n_devices = int(measured.get("n_devices", 1))
    parts = {k: v for k, v in measured.items() if isinstance(v, Mapping)}
    if not parts:
        raise ValueError("measured has no parts; give e.g. {'sweep': {'seconds': s, 'flops': f}}")
    out_parts = {}
    for name, p in parts.items():
        seconds, flops = float(p["seconds"]), float(p["flops"])
        out_parts[name] = {"seconds": seconds, "device_hours": device_hours(seconds, n_devices),
                           "flops": flops, "gpu_hours": gpu_hours(flops, h)}
    seconds = sum(p["seconds"] for p in out_parts.values())
    flops = sum(p["flops"] for p in out_parts.values())
    hours = gpu_hours(flops, h)
    return {"device": measured.get("device"), "n_devices": n_devices, "hardware": h.get("name"),
            "parts": out_parts, "seconds": seconds,
            "device_hours": device_hours(seconds, n_devices), "flops": flops,
            "gpu_hours": hours, "usd": hours * float(h["price_per_gpu_hour"])}


def naive_cost(model: Mapping | Any, hardware: Mapping | Any, cost_conf: Mapping | Any,
               trials_per_stage: Mapping[str, int]) -> dict:
    """The same staged search run on the target itself: every trial trains the full model from
    scratch on naive_token_fraction × D tokens (no pruning, no validation needed)."""
    m, h, c = as_dict(model), as_dict(hardware), as_dict(cost_conf)
    fraction = float(c["naive_token_fraction"])
    if not 0 < fraction <= 1:
        raise ValueError(f"cost.naive_token_fraction must be in (0, 1], got {fraction}")
    tokens = fraction * float(m["train_tokens"])
    trial_flops = flops_per_token(m)["total"] * tokens
    trial_hours = gpu_hours(trial_flops, h)
    stages = {name: {"trials": int(n), "gpu_hours": int(n) * trial_hours}
              for name, n in trials_per_stage.items()}
    trials = sum(s["trials"] for s in stages.values())
    hours = trials * trial_hours
    return {"token_fraction": fraction, "tokens_per_trial": tokens,
            "flops_per_trial": trial_flops, "gpu_hours_per_trial": trial_hours,
            "stages": stages, "trials": trials, "flops": trials * trial_flops,
            "gpu_hours": hours, "usd": hours * float(h["price_per_gpu_hour"]),
            "wall_days": hours / int(c["n_gpus"]) / 24.0}


def own_laws_baseline(model: Mapping | Any, hardware: Mapping | Any,
                      cost_conf: Mapping | Any) -> dict:
    """The realistic alternative to μP proxies: fit your own lr and batch laws from short
    sweeps at smaller scales. At each scale f·N (f in cost.baseline_scales), a grid of
    cost.baseline_grid (lr × batch) runs, each on cost.baseline_tokens_per_param tokens per
    parameter (Chinchilla's 20). Dense FLOPs 6·N_k·D_k per run; attention left out (small at
    these sizes, and leaving it out keeps the baseline, and so the saving, conservative)."""
    m, c = as_dict(model), as_dict(cost_conf)
    n = target_params(m)["n_params_flops"]
    grid, tpp = int(c.get("baseline_grid", 16)), float(c.get("baseline_tokens_per_param", 20.0))
    scales = [float(f) for f in c.get("baseline_scales", (1 / 8, 1 / 16, 1 / 32, 1 / 64))]
    runs = []
    for f in scales:
        n_k = f * n
        flops = grid * 6.0 * n_k * (tpp * n_k)
        runs.append({"scale": f, "n_params": n_k, "tokens_per_run": tpp * n_k, "runs": grid,
                     "flops": flops, "gpu_hours": gpu_hours(flops, hardware)})
    flops = sum(r["flops"] for r in runs)
    hours = gpu_hours(flops, hardware)
    return {"kind": "own_laws", "scales": runs, "runs": grid * len(scales), "flops": flops,
            "gpu_hours": hours, "usd": hours * float(as_dict(hardware)["price_per_gpu_hour"])}


# ---- prediction against measurement ------------------------------------------------------
def prediction_error(predicted: float | None, measured: float | None) -> float | None:
    """(predicted − measured) / measured; None when either is missing."""
    if predicted is None or measured is None or measured <= 0:
        return None
    return (predicted - measured) / measured


# ---- the spending cap ---------------------------------------------------------------------
def cap_message(gpu_hours_: float | None, wall_seconds: float | None,
                cost_conf: Mapping | Any, *, what: str = "predicted") -> str | None:
    """One line naming every limit `gpu_hours_`/`wall_seconds` is over, or None when within."""
    c = as_dict(cost_conf)
    cap_h, cap_s = c.get("max_tuning_gpu_hours"), c.get("max_wall_seconds")
    over = []
    if cap_h is not None and gpu_hours_ is not None and gpu_hours_ > cap_h:
        over.append(f"{what} tuning cost {gpu_hours_:.4g} GPU-hours > "
                    f"cost.max_tuning_gpu_hours={cap_h:g}")
    if cap_s is not None and wall_seconds is not None and wall_seconds > cap_s:
        over.append(f"{what} wall time {wall_seconds:.4g} s > cost.max_wall_seconds={cap_s:g}")
    return "; ".join(over) if over else None


def check_cap(predicted_gpu_hours: float | None, predicted_wall_seconds: float | None,
              cost_conf: Mapping | Any) -> None:
    """Refuse to start a sweep whose predicted cost is over the cap (GPU-hours are hours on
    the device actually used, see `device_hours`)."""
    msg = cap_message(predicted_gpu_hours, predicted_wall_seconds, cost_conf)
    if msg:
        raise BudgetExceeded(f"{msg}; raise the cap or pick a smaller budget (e.g. budget=smoke)")


# ---- cost.json ----------------------------------------------------------------------------
def _stage_rows(stages: list[Mapping]) -> list[dict]:
    rows = []
    for s in stages:
        measured = s.get("measured_seconds", s.get("seconds"))
        err = prediction_error(s.get("predicted_seconds"), measured)
        rows.append({"name": s["name"], "trials": int(s["trials"]),
                     "predicted_seconds": s.get("predicted_seconds"),
                     "measured_seconds": measured, "prediction_error": err,
                     "within_tolerance": None if err is None else abs(err) <= PREDICTION_TOLERANCE})
    return rows


def _why(value: Any, why: str) -> dict:
    return {"value": value, "why": why}


def assumptions(hardware: Mapping | Any, cost_conf: Mapping | Any, model: Mapping | Any) -> dict:
    """Every constant behind cost.json, each with a one-line reason."""
    h, c, m = as_dict(hardware), as_dict(cost_conf), as_dict(model)
    name = h.get("name")
    # float(): PyYAML (YAML 1.1) reads "9.89e14" as a string, OmegaConf as a float
    return {
        "peak_flops": _why(float(h["peak_flops"]), h.get("source") or
                           f"dense BF16 FLOP/s per {name}, vendor datasheet without sparsity "
                           f"(conf/hardware/{name}.yaml)"),
        "utilization": _why(float(h["utilization"]), "model FLOPs utilisation assumed for the "
                            "target run; ~40 % is typical of large dense pretraining"),
        "price_per_gpu_hour": _why(float(h["price_per_gpu_hour"]),
                                   "USD, a common on-demand cloud list price"),
        "n_gpus": _why(int(c["n_gpus"]), "devices of the target run; sets wall days only"),
        "buffer": _why(float(c["buffer"]), "contingency for restarts, failed nodes, evals and "
                       "ablations on top of the ideal FLOPs estimate"),
        "train_tokens": _why(float(m["train_tokens"]),
                             m.get("source") or "pretraining tokens D of the target"),
        "flops_formula": _why("6·N·D + 6·n_layers·d_model·seq_len·D",
                              "6 FLOPs per parameter per token (forward 2, backward 4) plus "
                              "attention scores and values counted causally (half of the "
                              "seq_len² square: 12·L·d·T for the full square, halved)"),
        "n_params_flops": _why("all parameters except the input embedding table",
                               "the embedding is a lookup, not a matmul; a tied table is counted "
                               "once as the readout matmul; norm gains are kept (~0.01 %)"),
        "tuning_gpu_hours": _why("proxy FLOPs / (peak × utilization) of the target hardware",
                                 "puts tuning and pretraining in one unit; tiny proxies reach far "
                                 "lower MFU, so measured device seconds are reported beside it"),
        "naive_token_fraction": _why(float(c["naive_token_fraction"]),
                                     "each naive full-scale trial trains this share of D, "
                                     "enough for a short-horizon comparison of settings"),
        "baseline": _why("own_laws: a (lr × batch) grid at smaller scales, 20 tokens/param",
                         "what a team would otherwise run to fit its own lr/batch laws: "
                         "cost.baseline_grid trials at each of cost.baseline_scales × N on "
                         "cost.baseline_tokens_per_param × N_k tokens (dense 6·N_k·D_k FLOPs)"),
        "saved_gpu_hours": _why("baseline GPU-hours − tuning device-hours, validated runs only",
                                "a device-hour of the proxies' device is counted as a GPU-hour "
                                "(conservative: it was one CPU or one GPU); not written when "
                                "the transfer was not validated: nothing was saved then"),
        "naive_trials": _why("the proxy sweep's trial counts per stage",
                             "the same staged search on the target; no pruning, no validation "
                             "(there is nothing to transfer to)"),
        "tuning_fraction": _why("tuning gpu_hours / target gpu_hours (without buffer)",
                                "share of the pretraining compute spent on tuning"),
        "cap_units": _why("hours on the device actually used (wall seconds × devices)",
                          "what the tuning run is billed for, predicted from a timed probe"),
        "prediction_tolerance": _why(PREDICTION_TOLERANCE,
                                     "goal of the probe-based stage-seconds prediction"),
    }


def _cap_note(crossed: str | None, stopped: bool, c: dict) -> str:
    if crossed:
        return f"{crossed}; the run stopped and kept the results it had"
    if stopped:
        return "stopped before crossing the cap; the results so far are kept"
    if c.get("max_tuning_gpu_hours") is None and c.get("max_wall_seconds") is None:
        return "no cap set"
    return "within the cap"


def cost_report(model: Mapping | Any, hardware: Mapping | Any, cost_conf: Mapping | Any, *,
                measured: Mapping, stages: list[Mapping], predicted_seconds: float | None = None,
                stopped_by_cap: bool = False, cap_note: str | None = None,
                validated: bool = False) -> dict:
    """The content of cost.json.

    stages: [{"name", "trials", "predicted_seconds", "measured_seconds" (else "seconds")}] in run
    order; their trial counts also size the naive alternative. predicted_seconds: the whole-run
    prediction checked against the cap before training (None: the sum of the stages' ones).
    stopped_by_cap: the run crossed the cap while running and stopped early.
    validated: the transfer passed the validator; only then is anything "saved".
    """
    c = as_dict(cost_conf)
    target = target_run_cost(model, hardware, c)
    tuning = tuning_cost(measured, hardware)
    naive = naive_cost(model, hardware, c, {s["name"]: s["trials"] for s in stages})
    baseline = own_laws_baseline(model, hardware, c)
    rows = _stage_rows(stages)
    if predicted_seconds is None:
        known = [r["predicted_seconds"] for r in rows if r["predicted_seconds"] is not None]
        predicted_seconds = sum(known) if known else None
    n_devices = tuning["n_devices"]
    predicted_hours = None if predicted_seconds is None else device_hours(predicted_seconds,
                                                                          n_devices)
    crossed = cap_message(tuning["device_hours"], tuning["seconds"], c, what="spent")
    exceeded = bool(stopped_by_cap or crossed)
    note = cap_note or _cap_note(crossed, stopped_by_cap, c)
    return {
        "target": target, "tuning": tuning, "naive": naive, "baseline": baseline,
        "saved_gpu_hours": (baseline["gpu_hours"] - tuning["device_hours"]) if validated
        else None,
        "saved_note": ("own-laws baseline GPU-hours − tuning device-hours (docs/cost.md)"
                       if validated else "not validated: no saving is claimed"),
        "tuning_fraction": tuning["gpu_hours"] / target["gpu_hours"],
        "stages": rows,
        "cap": {"max_tuning_gpu_hours": c.get("max_tuning_gpu_hours"),
                "max_wall_seconds": c.get("max_wall_seconds"),
                "predicted_seconds": predicted_seconds, "predicted_device_hours": predicted_hours,
                "spent_seconds": tuning["seconds"], "spent_device_hours": tuning["device_hours"],
                "exceeded": exceeded, "note": note},
        "assumptions": assumptions(hardware, c, model),
    }


def phase_report(measured: dict[str, float], prediction: Mapping | None,
                 wall_seconds: float) -> dict:
    """cost.json's `phases` (wall seconds measured per phase; `finalize` is the rest of the
    launch: planning, fits, plots, writes), `prediction` (made before training: what was spent
    by then, startup and probes, plus the predicted phases; `after_stages`: the rest predicted
    again at the stages' winners) and `prediction_error` (predicted ÷ measured − 1, whole
    launch, startup included; `prediction_error_after_stages` the same for the re-prediction)."""
    spent_before = {k: measured[k] for k in ("startup", "probes") if k in measured}
    total = measured.get("startup", 0.0) + wall_seconds
    phases = dict(measured)
    phases["finalize"] = max(0.0, total - sum(v for k, v in measured.items()
                                              if k != "finalize"))
    out: dict = {"phases": {k: round(v, 3) for k, v in phases.items()},
                 "measured_seconds": total}
    if prediction is not None:
        predicted = sum(spent_before.values()) + float(prediction["seconds"])
        out["prediction"] = {**dict(prediction), "spent_before": spent_before,
                             "total_seconds": predicted}
        out["prediction_error"] = predicted / total - 1 if total > 0 else None
        after = prediction.get("after_stages")
        if after is not None:  # re-predicted once the stages had picked the grids' batch
            out["prediction_error_after_stages"] = (after["total_seconds"] / total - 1
                                                    if total > 0 else None)
    return out


def budget_summary(cost: Mapping) -> dict:
    """The short `budget` block of target.yaml, from a `cost_report` result."""
    t, tu, nv = cost["target"], cost["tuning"], cost["naive"]
    return {"hardware": t["hardware"], "n_gpus": t["n_gpus"],
            "flops_6nd": t["flops_6nd"], "flops_attention": t["flops_attention"],
            "flops_total": t["flops_total"], "gpu_hours": t["gpu_hours"],
            "gpu_hours_with_buffer": t["gpu_hours_with_buffer"], "wall_days": t["wall_days"],
            "wall_days_with_buffer": t["wall_days_with_buffer"], "usd": t["usd"],
            "usd_with_buffer": t["usd_with_buffer"], "tuning_gpu_hours": tu["gpu_hours"],
            "tuning_device_seconds": tu["seconds"], "tuning_device": tu["device"],
            "tuning_device_hours": tu["device_hours"],
            "baseline_gpu_hours": cost["baseline"]["gpu_hours"],
            "naive_gpu_hours": nv["gpu_hours"], "saved_gpu_hours": cost["saved_gpu_hours"],
            "tuning_fraction": cost["tuning_fraction"], "details": "cost.json"}
