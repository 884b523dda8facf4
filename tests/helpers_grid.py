"""Shared by tests/test_depth.py and tests/test_horizon.py: a finished width grid to copy from."""

from __future__ import annotations

import optuna


def width_study(xs: list[float], widths=(32, 128)) -> optuna.Study:
    """A width grid with every (width, seed, lr) point finished: loss 3 + x²/100 + w/1000 + s."""
    study = optuna.create_study()
    d = {"log2_lr": optuna.distributions.FloatDistribution(-10, 0),
         "width": optuna.distributions.CategoricalDistribution(list(widths)),
         "seed": optuna.distributions.CategoricalDistribution([0, 1])}
    for w in widths:
        for s in (0, 1):
            for x in xs:
                study.add_trial(optuna.trial.create_trial(
                    params={"log2_lr": x, "width": w, "seed": s}, distributions=d,
                    value=3.0 + x * x / 100 + w / 1000 + s, user_attrs={"seconds": 5.0}))
    return study
