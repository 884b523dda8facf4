"""The validation grid's extension: only the width whose minimum sits at an edge gets points."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import optuna

from tests.helpers_grid import width_study
from transfer.judge.curves import grid
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


def test_the_extension_odds_are_the_extension_rule_on_a_smeared_optimum():
    """`extension_odds` against `extend_points` itself: noise-free parabolas with their optimum
    spread evenly over one step around `offset`, extended until bracketed, rounds counted."""
    import numpy as np

    from transfer.judge.curves import extend_points, extension_odds

    points, step, cap = 6, 0.5, 3
    xs0 = grid(0.0, points, step)
    lo, hi = xs0[0] - cap * step, xs0[-1] + cap * step
    for offset in (0.0, -0.9, -1.0, -1.4, -2.0, 1.6, -3.5):
        rounds = []
        for d in np.linspace(offset - step / 2, offset + step / 2, 401)[1:-1]:
            xs, k = list(xs0), 0
            while new := extend_points({0: [(x, [(x - d) ** 2]) for x in xs]},
                                       step=step, lo=lo, hi=hi):
                xs, k = sorted(xs + new), k + 1
            rounds.append(k)
        measured = [np.mean(np.array(rounds) >= j) for j in range(1, cap + 1)]
        assert np.allclose(extension_odds(offset, points=points, step=step, max_extend=cap),
                           measured, atol=0.01), offset


def test_rounds_left_follow_what_the_curve_measured():
    from transfer.judge.curves import rounds_left

    odds = [1.0, 0.5, 0.0]
    assert rounds_left(odds, 0, None) == odds  # nothing measured: the theory's odds
    assert rounds_left(odds, 0, False) == []  # measured whole, bracketed: no growth
    assert rounds_left(odds, 1, None) == [0.5, 0.0]  # one round queued: the rest given it
    assert rounds_left(odds, 1, True) == [1.0, 0.0]  # still at the edge: one more is certain
    assert rounds_left([0.0, 0.0], 0, True) == [1.0, 0.0]  # at an edge the theory did not expect
    assert rounds_left(odds, 3, None) == []  # capped


def _sp_ctx(parametrization: str):
    v = SimpleNamespace(points=4, seeds=2, step_log2=1.0, max_extend=3, early_reject=False)
    return SimpleNamespace(cfg=SimpleNamespace(validation=v, proxy=SimpleNamespace(
        parametrization=parametrization)), proxies=SimpleNamespace(widths=lambda: [32, 128]),
                           lock=contextlib.nullcontext)


def test_growth_is_priced_where_the_theory_puts_the_optimum_until_measured():
    from transfer.verdict.width import extension_rounds

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    xs = grid(-7.0, 4, 1.0)  # -8.5 .. -5.5: half-width 1.5 octaves
    # SP: 2 octaves lower at 4× the width, ½ octave past the edge: 1 round, then 2 with odds ½
    assert extension_rounds(_sp_ctx("sp"), None, -7.0) == {32: [0.0, 0.0, 0.0],
                                                            128: [1.0, 0.5, 0.0]}
    assert extension_rounds(_sp_ctx("mup"), None, -7.0) == {32: [0.0] * 3, 128: [0.0] * 3}
    study = optuna.create_study()
    enqueue_grid(_sp_ctx("sp"), study, -7.0)
    assert extension_rounds(_sp_ctx("sp"), study, -7.0)[128] == [1.0, 0.5, 0.0]  # queued only
    d = {"log2_lr": optuna.distributions.FloatDistribution(-12, 0),
         "width": optuna.distributions.CategoricalDistribution([32, 128]),
         "seed": optuna.distributions.CategoricalDistribution([0, 1])}
    bracketed = optuna.create_study()
    for s in (0, 1):  # width 128 measured whole, its minimum inside: nothing to grow there
        for x in xs:
            bracketed.add_trial(optuna.trial.create_trial(
                params={"log2_lr": x, "width": 128, "seed": s}, distributions=d,
                value=(x + 7.5) ** 2 + s))
    assert extension_rounds(_sp_ctx("sp"), bracketed, -7.0)[128] == []
    edge = optuna.create_study()
    for s in (0, 1):  # at the low edge, then one round queued beyond it
        for x in xs:
            edge.add_trial(optuna.trial.create_trial(
                params={"log2_lr": x, "width": 128, "seed": s}, distributions=d,
                value=(x + 9.0) ** 2 + s))
    assert extension_rounds(_sp_ctx("sp"), edge, -7.0)[128] == [1.0, 0.5, 0.0]
    assert extend_grid(_sp_ctx("sp"), edge, -7.0) == [-9.5]
    assert extension_rounds(_sp_ctx("sp"), edge, -7.0)[128] == [0.5, 0.0]


def test_each_points_losses_are_in_seed_order_whatever_the_trial_numbers():
    """The verdict reads a point's losses as one column per seed (its seed offsets): a trial
    re-queued after its worker died comes later in the study but keeps its seed's column."""
    from transfer.verdict.width import curves_from

    d = {"log2_lr": optuna.distributions.FloatDistribution(-10, 0),
         "width": optuna.distributions.CategoricalDistribution([32]),
         "seed": optuna.distributions.CategoricalDistribution([0, 1])}
    study = optuna.create_study()
    for x, s in ((-7.0, 0), (-7.0, 1), (-6.0, 1), (-6.0, 0)):  # seed 0 at -6 re-ran last
        study.add_trial(optuna.trial.create_trial(
            params={"log2_lr": x, "width": 32, "seed": s}, distributions=d, value=10.0 * s + x))
    assert curves_from(study, [32]) == {32: [(-7.0, [-7.0, 3.0]), (-6.0, [-6.0, 4.0])]}


def test_growth_seconds_range_from_the_certain_rounds_to_every_possible_one(monkeypatch):
    from transfer.search.progress import Span
    from transfer.verdict import width

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    monkeypatch.setattr(width, "predict_seconds", lambda ctx, hp, w: {32: 1.0, 128: 10.0}[w])
    ctx = _sp_ctx("sp")
    ctx.progress = SimpleNamespace(workers=2)
    study = optuna.create_study()
    enqueue_grid(ctx, study, -7.0)
    # width 128: one round certain, a second at odds ½; a round is 2 seeds of 10 s on 2 workers
    assert width.extension_seconds(ctx, study, -7.0, {}) == Span(15.0, 10.0, 20.0)
    ctx.cfg.proxy.parametrization = "mup"
    assert width.extension_seconds(ctx, study, -7.0, {}) == Span.certain(0.0)
