"""Shared by tests/test_hf.py, tests/test_apply.py, tests/test_targets.py and
tests/test_hf_families.py: an emitted target.yaml, no sweep."""

from __future__ import annotations

import dataclasses

from transfer.core.compose import as_config, compose
from transfer.outputs.emit import emit_target
from transfer.search.family import plan_proxies

BASE_WIDTH = 32
# d_head 16 (the proxy family's), width_mult 4; unlike the defaults so a swapped field shows up.
MODEL = {"name": "small", "source": "test target", "d_model": 128, "n_layers": 2, "n_heads": 8,
         "n_kv_heads": 4, "d_ff": 512, "vocab_size": 256, "seq_len": 32,
         "tied_embeddings": False, "norm": "rmsnorm", "mlp": "swiglu", "positions": "rope",
         "train_tokens": 1.0e6}
WINNERS = {"lr": 3e-3, "batch_size": 8, "warmup_fraction": 0.1, "input_mult": 0.5,
           "output_mult": 2.0, "init_std": 0.05, "attn_mult": 1.5, "weight_decay": 0.1,
           "schedule": "cosine"}
PROXY = {"parametrization": "mup", "width": 32, "validation_width": 128, "n_layers": 1,
         "d_head": 16, "seq_len": 32, "vocab_size": 256, "data": "stdlib", "kv_group": 2,
         "tokens_per_trial": 5120}


def small_target(*, proxy: dict | None = None, winners: dict | None = None,
                 **model_changes) -> dict:
    """target.yaml (as a dict) for MODEL with `model_changes`, emitted as a sweep would."""
    return emit_target({**MODEL, **model_changes}, base_width=BASE_WIDTH,
                       winners={**WINNERS, **(winners or {})}, proxy={**PROXY, **(proxy or {})},
                       validated=True, drift_log2=0.0, fingerprint="f00d", budget={},
                       created="2025-01-01T00:00:00+00:00")


def group(target: dict, name: str) -> dict:
    return next(g for g in target["param_groups"] if g["name"] == name)


def emitted(overrides: list[str]) -> dict:
    """target.yaml's content for a composed target, with fixed winners (no training)."""
    cfg = as_config(compose(overrides))
    # what names the target, not what it is: the name and the file it came from
    cfg.model.name, cfg.model.source, cfg.model.config = "target", "", None
    plan = plan_proxies(cfg)
    proxy = {**plan.derived, "vocab_size": 256, "data": "stdlib", "parametrization": "mup",
             "tokens_per_trial": 1000, "width": 64, "validation_width": 256}
    winners = {"lr": 2 ** -6.5, "batch_size": 16, "warmup_fraction": 0.05, "input_mult": 1.0,
               "output_mult": 1.0, "init_std": 0.02, "attn_mult": 1.0, "weight_decay": 0.0,
               "schedule": "cosine"}
    return emit_target(dataclasses.asdict(cfg.model), base_width=64, winners=winners,
                       proxy=proxy, validated=True, drift_log2=0.0, fingerprint="f", budget={},
                       created="now")
