"""A stage's search space, and the one place that reads `ParamConf.type`.

A parameter is a float or int range (`low`, `high`, `log`) or a list of `choices`
(categorical). Everything that depends on which — suggesting a value, Optuna's distribution,
membership, a grid over it — is a function here; callers never branch on the type.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import optuna

from transfer.search.family import MODEL_HPARAMS


def default_hparams(cfg) -> dict:
    """Where the search starts: `train.*` and the proxy's multipliers; stages overwrite them."""
    t, p = cfg.train, cfg.proxy
    return {"lr": t.lr, "batch_size": t.batch_size, "warmup_fraction": t.warmup_fraction,
            **{k: getattr(p, k) for k in MODEL_HPARAMS}}


def stage_space(cfg, stage: str, frozen: dict) -> dict:
    """The stage's search space; `*_refine` stages narrow lr to ±1 octave around the winner."""
    space = {k: cfg.stages.stage[stage].params[k] for k in cfg.stages.stage[stage].params}
    if stage.endswith("_refine") and "lr" in space and "lr" in frozen:
        p, lr = space["lr"], float(frozen["lr"])
        space["lr"] = SimpleNamespace(type="float", low=max(p.low, lr / 2),
                                      high=min(p.high, lr * 2), log=True)
    return space


def choices(p) -> list | None:
    """A categorical parameter's choices in order; None for a float or int range."""
    return list(p.choices) if p.type == "categorical" else None


def nearest_choices(options: list, current, k: int) -> list:
    """Up to `k` of `options` other than `current`, nearest to it in the list first (ties:
    the earlier one): what a one-categorical stage queues after its incumbent."""
    here = options.index(current) if current in options else 0
    others = sorted((c for c in options if c != current),
                    key=lambda c: (abs(options.index(c) - here), options.index(c)))
    return others[:max(0, k)]


def suggest(trial: optuna.Trial, name: str, p) -> Any:
    if p.type == "categorical":
        return trial.suggest_categorical(name, list(p.choices))
    if p.type == "int":
        return trial.suggest_int(name, int(p.low), int(p.high), log=bool(p.log))
    return trial.suggest_float(name, float(p.low), float(p.high), log=bool(p.log))


def distribution(p) -> optuna.distributions.BaseDistribution:
    """The distribution `suggest` samples from (for trials added without sampling)."""
    if p.type == "categorical":
        return optuna.distributions.CategoricalDistribution(list(p.choices))
    if p.type == "int":
        return optuna.distributions.IntDistribution(int(p.low), int(p.high), log=bool(p.log))
    return optuna.distributions.FloatDistribution(float(p.low), float(p.high), log=bool(p.log))


def in_space(value, p) -> bool:
    if p.type == "categorical":
        return value in list(p.choices)
    return p.low <= value <= p.high


def grid_points(p, *, step_log2: float, linear_points: int) -> list:
    """The parameter as a grid: every choice; a log range every `step_log2` octaves (both ends
    kept); a linear range at `linear_points` points; int ranges rounded, each value once."""
    if p.type == "categorical":
        return list(p.choices)
    if p.log:
        n = math.ceil(round(math.log2(p.high / p.low) / step_log2, 6)) + 1
        pts = np.geomspace(p.low, p.high, n)
    else:
        pts = np.linspace(p.low, p.high, linear_points)
    if p.type == "int":
        return sorted({int(round(x)) for x in pts})
    return [float(x) for x in pts]
