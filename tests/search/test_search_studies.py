"""transfer.search.studies.best_trial: the one rule for a stage's winner."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from transfer.search.studies import best_trial


def _study(outcomes: list[tuple[TrialState, float | None]]) -> optuna.Study:
    study = optuna.create_study()
    dist = {"x": optuna.distributions.FloatDistribution(0.0, 10.0)}
    for i, (state, value) in enumerate(outcomes):
        study.add_trial(optuna.trial.create_trial(
            params={"x": float(i)}, distributions=dist, state=state, value=value,
            intermediate_values={0: 0.1} if state == TrialState.PRUNED else None))
    return study


def test_lowest_loss_wins_and_the_earliest_among_equals():
    study = _study([(TrialState.COMPLETE, 2.0), (TrialState.COMPLETE, 1.0),
                    (TrialState.COMPLETE, 1.0)])
    assert best_trial(study).number == 1


def test_pruned_and_failed_never_win():
    study = _study([(TrialState.PRUNED, None), (TrialState.FAIL, None),
                    (TrialState.COMPLETE, 3.0)])
    assert best_trial(study).number == 2


def test_none_without_a_completed_trial():
    assert best_trial(_study([(TrialState.PRUNED, None), (TrialState.FAIL, None)])) is None
