"""transfer.search.space: the one reader of `ParamConf.type`; its helpers agree with each other."""

from __future__ import annotations

import math
from types import SimpleNamespace

import optuna
import pytest

from transfer.search.space import choices, distribution, grid_points, in_space, suggest

LOG_FLOAT = SimpleNamespace(type="float", low=2.0**-10, high=2.0**-6, log=True)
LIN_FLOAT = SimpleNamespace(type="float", low=0.0, high=0.3, log=False)
INT = SimpleNamespace(type="int", low=1, high=4, log=False)
CAT = SimpleNamespace(type="categorical", choices=[32, 8, 16])


@pytest.mark.parametrize("p", [LOG_FLOAT, LIN_FLOAT, INT, CAT], ids=lambda p: p.type)
def test_suggest_samples_from_distribution(p):
    """A suggested value lies in the space, and the trial records `distribution(p)` for it
    (what `seed_stage` gives trials it adds without sampling)."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(5):
        trial = study.ask()
        value = suggest(trial, "x", p)
        assert in_space(value, p)
        assert trial.distributions["x"] == distribution(p)
        study.tell(trial, 0.0)


def test_choices_only_for_categorical():
    assert choices(CAT) == [32, 8, 16]  # config order kept: seed_stage orders by it
    assert choices(LOG_FLOAT) is None and choices(INT) is None


def test_in_space_bounds_inclusive_and_choices_exact():
    assert in_space(LIN_FLOAT.low, LIN_FLOAT) and in_space(LIN_FLOAT.high, LIN_FLOAT)
    assert not in_space(0.31, LIN_FLOAT)
    assert in_space(8, CAT) and not in_space(64, CAT)


def test_grid_points_log_range_keeps_both_ends_at_the_step():
    pts = grid_points(LOG_FLOAT, step_log2=1.0, linear_points=7)
    assert pts[0] == pytest.approx(LOG_FLOAT.low) and pts[-1] == pytest.approx(LOG_FLOAT.high)
    assert [math.log2(b / a) for a, b in zip(pts, pts[1:])] == pytest.approx([1.0] * 4)


def test_grid_points_int_and_categorical():
    assert grid_points(INT, step_log2=1.0, linear_points=7) == [1, 2, 3, 4]  # each value once
    assert grid_points(CAT, step_log2=1.0, linear_points=7) == [32, 8, 16]
    assert len(grid_points(LIN_FLOAT, step_log2=1.0, linear_points=7)) == 7

