"""The validation grid's extension: only the width whose minimum sits at an edge gets points."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import optuna

from tests.helpers_grid import width_study
from transfer.verdict.curves import grid
from transfer.verdict.width import enqueue_grid, extend_grid

XS = grid(-7.0, 3, 1.0)  # -8, -7, -6


def _ctx():
    v = SimpleNamespace(points=3, seeds=2, step_log2=1.0, max_extend=1)
    return SimpleNamespace(cfg=SimpleNamespace(validation=v),
                           proxies=SimpleNamespace(width=32, validation_width=128,
                                                   widths=lambda: [32, 128]),
                           lock=contextlib.nullcontext)


def _queue_order(study: optuna.Study) -> list[tuple]:
    fixed = [t.system_attrs["fixed_params"] for t in study.get_trials(deepcopy=False)
             if t.state == optuna.trial.TrialState.WAITING]
    return [(p["width"], p["seed"], p["log2_lr"]) for p in fixed]


def _queued(study: optuna.Study) -> list[tuple]:
    return sorted(_queue_order(study))


def test_the_grid_is_queued_widest_first():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study()
    enqueue_grid(_ctx(), study, -7.0)
    assert _queue_order(study) == [(w, s, x) for w in (128, 32) for s in (0, 1) for x in XS]


def test_both_widths_at_the_edge_are_both_extended():
    study = width_study(XS)  # loss 3 + x²/100: minimum at -6, the top edge, at both widths
    assert extend_grid(_ctx(), study, -7.0) == [-5.0]
    assert _queue_order(study) == [(w, s, -5.0) for w in (128, 32) for s in (0, 1)]  # widest first


def test_only_the_edge_width_is_extended():
    study = width_study(XS, widths=(32,))  # narrow: minimum at -6 (edge)
    d = {"log2_lr": optuna.distributions.FloatDistribution(-10, 0),
         "width": optuna.distributions.CategoricalDistribution([32, 128]),
         "seed": optuna.distributions.CategoricalDistribution([0, 1])}
    for s in (0, 1):  # wide: minimum at -7, bracketed
        for x, y in zip(XS, (3.2, 3.0, 3.1)):
            study.add_trial(optuna.trial.create_trial(
                params={"log2_lr": x, "width": 128, "seed": s}, distributions=d, value=y + s))
    assert extend_grid(_ctx(), study, -7.0) == [-5.0]
    assert _queued(study) == [(32, 0, -5.0), (32, 1, -5.0)]  # nothing at width 128
    assert extend_grid(_ctx(), study, -7.0) is None  # the queued points are not trained yet
