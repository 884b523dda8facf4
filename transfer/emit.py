"""The emitted full-scale config (`target.yaml`): explicit values at the target width.

Framework-neutral: a trainer needs no mup package, only the numbers here. Every width-dependent
value comes from `transfer.rules`; this module only decides which rule applies to which group
and writes down, next to the values, what did not transfer and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import yaml

from transfer import rules
from transfer.cost import as_dict, target_params

WINNER_KEYS = ("lr", "batch_size", "warmup_fraction", "input_mult", "output_mult", "init_std",
               "attn_mult", "weight_decay", "schedule")
OPTIONAL_TRAIN_KEYS = ("min_lr_fraction", "grad_clip", "betas")

HEADER = """\
# Emitted by transfer.emit: explicit hyperparameters at the target width; no mup package needed.
# Use: one AdamW parameter group per entry of param_groups (weight_decay as in torch.optim.AdamW,
# i.e. the per-step shrink is lr × weight_decay); multiply the embedding output by
# mup.input_mult, the readout input by mup.logits_scale, and the attention logits q·k by
# mup.attn_scale (instead of 1/sqrt(d_head)). provenance says what did not transfer.
"""

NOT_VALIDATED_HEADER = "# WARNING: provenance.validated is false: {warning}\n"


def _warning(parametrization: str, validated: bool) -> str | None:
    if parametrization != "mup":
        return (f"proxy parametrization is {parametrization!r}, not 'mup': hyperparameters do not "
                "transfer across width; these values are a naive copy, not a transfer")
    if not validated:
        return ("the transfer was not validated (the validator rejected it or did not run): do "
                "not start a full-scale run from these values without checking them")
    return None


def _mup_block(m: dict, base_width: int, w: dict, parametrization: str, proxy: dict,
               d_head: int) -> dict:
    mult = rules.width_mult(int(m["d_model"]), base_width)
    return {
        "parametrization": parametrization, "base_width": base_width,
        "target_width": int(m["d_model"]), "width_mult": mult,
        "input_mult": w["input_mult"], "output_mult": w["output_mult"],
        "logits_scale": rules.logits_scale(w["output_mult"], mult, parametrization),
        "attn_mult": w["attn_mult"], "d_head": d_head,
        "attn_scale": rules.attn_scale(w["attn_mult"], d_head, parametrization),
        "readout_zero_init": bool(proxy.get("readout_zero_init", True)),
        "zero_init_query": bool(proxy.get("zero_init_query", True)),
    }


def param_groups(m: dict, mup: dict, w: dict) -> list[dict]:
    """The four Adam groups of μP (Tensor Programs V, Table 3) at the target width."""
    mult, param = mup["width_mult"], mup["parametrization"]
    lr, std, wd = w["lr"], w["init_std"], w["weight_decay"]
    if param == "mup":
        hidden_lr, hidden_wd = rules.hidden_lr(lr, mult), rules.hidden_weight_decay(wd, mult)
    else:  # SP: plain AdamW, one lr and weight decay for every group
        hidden_lr, hidden_wd = rules.vector_lr(lr), rules.vector_weight_decay(wd)
    hidden = {"name": "hidden", "lr": hidden_lr, "init_std": rules.hidden_init_std(std, mult),
              "weight_decay": hidden_wd,
              "applies_to": "attention q, k, v, o and MLP matrices (two width dimensions)"}
    if mup["zero_init_query"]:
        hidden["zero_init"] = ["attention q"]  # uniform attention at init, as on the proxy
    embedding_std = rules.embedding_init_std(std)
    embedding = {"name": "embedding", "lr": rules.vector_lr(lr), "init_std": embedding_std,
                 "weight_decay": rules.vector_weight_decay(wd),
                 "applies_to": "input token embedding table"}
    tied = bool(m.get("tied_embeddings", False))
    if tied:  # the shared table keeps the embedding's init; only the forward scale differs
        readout_std = embedding_std
    elif mup["readout_zero_init"]:
        readout_std = 0.0
    else:
        readout_std = rules.readout_init_std(std, mult, param)
    readout = {"name": "readout", "lr": rules.vector_lr(lr), "init_std": readout_std,
               "weight_decay": rules.vector_weight_decay(wd),
               "logits_scale": mup["logits_scale"],
               "applies_to": "output projection to the vocabulary"}
    if tied:
        readout["tied_to"] = "embedding"
    vector = {"name": "vector", "lr": rules.vector_lr(lr), "init_std": None, "init": "ones",
              "weight_decay": 0.0, "applies_to": "norm gains and biases"}
    return [hidden, embedding, readout, vector]


def _train_block(m: dict, w: dict) -> dict:
    seq_len, batch_size = int(m["seq_len"]), int(w["batch_size"])
    batch_tokens = batch_size * seq_len
    total_tokens = float(m["train_tokens"])
    total_steps = round(total_tokens / batch_tokens)  # nearest whole step
    train = {"optimizer": "adamw", "lr": w["lr"], "batch_size": batch_size, "seq_len": seq_len,
             "batch_tokens": batch_tokens, "total_tokens": total_tokens,
             "total_steps": total_steps, "warmup_fraction": w["warmup_fraction"],
             "warmup_steps": round(w["warmup_fraction"] * total_steps),
             "schedule": w["schedule"]}
    for key in OPTIONAL_TRAIN_KEYS:
        if key in w:
            train[key] = list(w[key]) if key == "betas" else w[key]
    return train


def _not_transferred(m: dict, w: dict, proxy: dict, d_head: int) -> list[dict]:
    p_seq, t_seq = proxy.get("seq_len"), int(m["seq_len"])
    items = [
        {"name": "weight_decay", "value": w["weight_decay"],
         "reason": "regularisation does not transfer under μP (its optimum depends on data size "
                   "and horizon, not only width); the proxy value is emitted with μP's AdamW "
                   "scaling, re-tune it or take it from the target's recipe"},
        {"name": "batch_size", "value": int(w["batch_size"]),
         "reason": f"transfers only empirically, μP gives no guarantee: the tuned number of "
                   f"sequences is kept ({int(w['batch_size'])} × {t_seq} target tokens per batch "
                   f"vs × {p_seq} on the proxy); the useful batch grows with scale"},
        {"name": "warmup_fraction", "value": w["warmup_fraction"],
         "reason": "transfers only empirically: μP says nothing about the schedule's shape"},
        {"name": "token_horizon", "value": float(m["train_tokens"]),
         "reason": f"transfers only empirically: each proxy trial trained on "
                   f"{proxy.get('tokens_per_trial', 'far fewer')} tokens, the target on "
                   f"{float(m['train_tokens']):.3g}; the optimal lr tends to fall with "
                   "longer runs"},
        {"name": "data", "value": proxy.get("data"),
         "reason": f"proxy vocabulary ({proxy.get('vocab_size')}) and data ({proxy.get('data')}) "
                   f"differ from the target's ({m['vocab_size']}); losses are not comparable"},
    ]
    if proxy.get("n_layers") != int(m["n_layers"]):
        items.append({"name": "depth", "value": int(m["n_layers"]),
                      "reason": f"depth differs between proxy ({proxy.get('n_layers')} layers) and "
                                f"target ({m['n_layers']}); μP transfers across width only"})
    if p_seq != t_seq:
        items.append({"name": "seq_len", "value": t_seq,
                      "reason": f"context differs between proxy ({p_seq}) and target ({t_seq})"})
    if proxy.get("d_head") != d_head:
        items.append({"name": "attn_scale", "value": None,
                      "reason": f"head dim differs between proxy ({proxy.get('d_head')}) and "
                                f"target ({d_head}): attn_scale follows μP's 1/d_head rule, "
                                "which the proxy family (fixed d_head) never exercises"})
    target_group = int(m["n_heads"]) // int(m["n_kv_heads"])
    if proxy.get("kv_group") is not None and proxy["kv_group"] != target_group:
        items.append({"name": "kv_group", "value": target_group,
                      "reason": f"query heads per kv head differ between proxy "
                                f"({proxy['kv_group']}) and target ({target_group})"})
    return items


def _transferred(mup: dict, w: dict) -> list[dict]:
    how = ("μP: hidden lr / width_mult, other groups unchanged" if mup["parametrization"] == "mup"
           else "SP: unchanged with width (no transfer guarantee)")
    return [{"name": "lr", "value": w["lr"], "rule": how},
            {"name": "init_std", "value": w["init_std"],
             "rule": "hidden σ / sqrt(width_mult); embedding σ unchanged"},
            {"name": "input_mult", "value": w["input_mult"], "rule": "unchanged"},
            {"name": "output_mult", "value": w["output_mult"],
             "rule": "logits_scale = output_mult / width_mult"},
            {"name": "attn_mult", "value": w["attn_mult"],
             "rule": "attn_scale = attn_mult / target d_head"}]


def _normalise_extra(extra: list | None) -> list[dict]:
    return [x if isinstance(x, Mapping) else {"name": "note", "value": None, "reason": str(x)}
            for x in extra or []]


def emit_target(model: Mapping | Any, *, base_width: int, winners: Mapping, proxy: Mapping,
                validated: bool, drift_log2: float | None, fingerprint: str, budget: Mapping,
                created: str, not_transferred_extra: list | None = None) -> dict:
    """The target.yaml content: model, mup, param_groups, train, budget, provenance."""
    m, w, p = as_dict(model), dict(winners), dict(proxy)
    missing = [k for k in WINNER_KEYS if k not in w]
    if missing:
        raise ValueError(f"winners lacks {', '.join(missing)}; pass the tuned or default value "
                         "of each")
    if base_width < 1:
        raise ValueError(f"base_width must be >= 1, got {base_width=}")
    parametrization = p.get("parametrization", "mup")
    counts = target_params(m)
    d_head = counts["d_head"]
    mup = _mup_block(m, base_width, w, parametrization, p, d_head)
    ok = bool(validated) and parametrization == "mup"
    model_block = {k: m[k] for k in ("name", "source", "d_model", "n_layers", "n_heads",
                                     "n_kv_heads", "d_ff", "vocab_size", "seq_len",
                                     "tied_embeddings", "norm", "mlp", "positions", "rope_theta",
                                     "norm_eps") if k in m}
    model_block.update(d_head=d_head, n_params=counts["n_params"],
                       n_params_flops=counts["n_params_flops"])
    proxy_block = {"parametrization": parametrization, "base_width": base_width}
    proxy_block.update({k: v for k, v in p.items() if k != "parametrization"})
    provenance = {
        "validated": ok, "warning": _warning(parametrization, bool(validated)),
        "drift_log2": None if drift_log2 is None else float(drift_log2),
        "fingerprint": fingerprint, "created": created, "proxy": proxy_block,
        "transferred": _transferred(mup, w),
        "not_transferred": _not_transferred(m, w, p, d_head) + _normalise_extra(
            not_transferred_extra),
    }
    return {"model": model_block, "mup": mup, "param_groups": param_groups(m, mup, w),
            "train": _train_block(m, w), "budget": dict(budget), "provenance": provenance}


def _plain(obj: Any) -> Any:
    """YAML-safe builtins: numpy/torch scalars → Python numbers, tuples → lists."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalar
        return obj.item()
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
    text = header + yaml.safe_dump(_plain(obj), sort_keys=False, allow_unicode=True,
                                   default_flow_style=False, width=100)
    if hasattr(path_or_stream, "write"):
        path_or_stream.write(text)
    else:
        Path(path_or_stream).write_text(text, encoding="utf-8")
