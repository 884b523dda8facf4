"""One plan per grid (`transfer.verdict.plan`): each curve's points, step and seeds, and a
focused grid laid out curve by curve, each later curve centred on the best point of the one
before it."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import optuna
import pytest

from transfer.core.compose import as_config, compose
from transfer.core.config import check_config
from transfer.core.errors import UserError
from transfer.verdict.plan import CurvePlan, best_point, grid_plan
from transfer.verdict.width import (
    EARLY,
    add_seed_round,
    centre_of,
    enqueue_grid,
    extend_grid,
    extension_seconds,
    grid_widths,
    judge_study,
    laid_lines,
)

FOCUS = dict(points=3, step_log2=1.0, seeds=2, max_extend=1, focus=True, wide_points=4,
             wide_step_log2=0.75, early_reject=False)


def _v(**kw):
    return SimpleNamespace(**{**FOCUS, **kw})


def _ctx(**kw):
    return SimpleNamespace(cfg=SimpleNamespace(validation=_v(**kw),
                                               proxy=SimpleNamespace(parametrization="mup")),
                           proxies=SimpleNamespace(width=32, validation_width=128,
                                                   widths=lambda: [32, 64, 128]),
                           lock=contextlib.nullcontext)


def _waiting(study: optuna.Study, param: str = "width") -> list[tuple]:
    """The queued points as (curve key, seed, log2 lr)."""
    return sorted((p[param], p["seed"], p["log2_lr"]) for p in
                  (t.system_attrs["fixed_params"] for t in study.get_trials(deepcopy=False)
                   if t.state == optuna.trial.TrialState.WAITING))


def _train(study: optuna.Study, vertex: dict[int, float], param: str = "width",
           seeds: tuple[int, ...] = (0, 1)) -> None:
    """Finish every waiting point: loss 3 + (x − vertex of its curve)² / 10 + seed / 100."""
    for t in study.get_trials(deepcopy=False):
        if t.state != optuna.trial.TrialState.WAITING:
            continue
        trial = study.ask()
        x = trial.suggest_float("log2_lr", -20, 10)
        k = trial.suggest_categorical(param, sorted(vertex))
        s = trial.suggest_categorical("seed", list(seeds))
        study.tell(trial, 3 + (x - vertex[k]) ** 2 / 10 + s / 100)


def test_the_plan_gives_the_first_curve_the_grid_and_the_later_ones_the_wide_design():
    plan = grid_plan(_v(), [2, 4, 8, 16], seeds=3, later_seeds=2)
    assert plan.curves == (CurvePlan(3, 1.0, 3), CurvePlan(4, 0.75, 3), CurvePlan(4, 0.75, 2),
                           CurvePlan(4, 0.75, 2))
    assert plan.before(8) == 4 and plan.before(2) is None
    assert [c.trials for c in plan.curves] == [9, 12, 8, 8]
    # without focus every curve is today's: the same points, step and seeds
    flat = grid_plan(_v(focus=False), [2, 4, 8, 16], seeds=3, later_seeds=2)
    assert set(flat.curves) == {CurvePlan(3, 1.0, 3)} and not flat.focus


def test_the_span_holds_every_point_a_focused_curve_can_reach():
    plan = grid_plan(_v(), [32, 64, 128], seeds=2)
    lo, hi = plan.span(-7.0)
    reach_first = 1.0 * (1 + 1)  # a step beyond a 3-point grid's edge
    reach_wide = 0.75 * (1.5 + 1)
    assert hi - (-7.0) == pytest.approx(reach_first + 2 * reach_wide)
    assert lo == pytest.approx(-7.0 - (reach_first + 2 * reach_wide))
    c = CurvePlan(4, 0.75, 2)
    assert c.xs(-6.0) == [-7.125, -6.375, -5.625, -4.875]
    assert c.bounds(-6.0, 1) == (-7.875, -4.125)


def test_a_focused_width_grid_is_laid_out_width_by_width_around_the_best_point():
    ctx = _ctx()
    study = optuna.create_study()
    enqueue_grid(ctx, study, -7.0)
    assert _waiting(study) == [(32, s, x) for s in (0, 1) for x in (-8.0, -7.0, -6.0)]
    assert extend_grid(ctx, study, -7.0) is None  # its points are not trained yet
    _train(study, {32: -6.8, 64: -6.3, 128: -6.2})
    line = extend_grid(ctx, study, -7.0)
    assert "width 64" in line and "width 32's best point, log2 lr -7.00" in line
    assert centre_of(study, 64, 0.0) == -7.0
    assert _waiting(study) == [(64, s, x) for s in (0, 1) for x in (-8.125, -7.375, -6.625,
                                                                      -5.875)]
    # the worker that shows progress tells what any worker laid out, once
    told: set[str] = set()
    assert laid_lines(study, told) == [line] and laid_lines(study, told) == []
    _train(study, {32: -6.8, 64: -6.3, 128: -6.2})
    assert "centred on width 64's best point, log2 lr -6.62" in extend_grid(ctx, study, -7.0)
    assert laid_lines(optuna.load_study(study_name=study.study_name, storage=study._storage),
                      told) == [study.user_attrs["laid_128"]]
    _train(study, {32: -6.8, 64: -6.3, 128: -6.2})
    assert extend_grid(ctx, study, -7.0) == []  # every width laid out and bracketed


def test_a_focused_curve_at_its_edge_grows_by_its_own_step_within_its_own_bounds():
    ctx = _ctx(max_extend=2)
    study = optuna.create_study()
    enqueue_grid(ctx, study, -7.0)
    _train(study, {32: -7.0, 64: -3.0, 128: -3.0})
    extend_grid(ctx, study, -7.0)  # width 64 around -7: its optimum is far above
    _train(study, {32: -7.0, 64: -3.0, 128: -3.0})
    assert extend_grid(ctx, study, -7.0) == [-5.125]  # one 0.75 step above -5.875
    _train(study, {32: -7.0, 64: -3.0, 128: -3.0})
    assert extend_grid(ctx, study, -7.0) == [-4.375]
    _train(study, {32: -7.0, 64: -3.0, 128: -3.0})
    # capped: max_extend 2 steps beyond the first edges; then width 128, centred on 64's best
    assert "width 128" in extend_grid(ctx, study, -7.0)
    assert centre_of(study, 128, 0.0) == -4.375


def test_the_eta_counts_the_widths_not_laid_out_yet():
    ctx = _ctx()
    ctx.progress = SimpleNamespace(workers=1)
    ctx.probes = {}
    study = optuna.create_study()
    enqueue_grid(ctx, study, -7.0)
    _train(study, {32: -7.0, 64: -7.0, 128: -7.0})
    import transfer.verdict.width as width

    prices = {32: 1.0, 64: 2.0, 128: 4.0}
    old = width.predict_seconds
    width.predict_seconds = lambda c, hp, w: prices[w]
    try:
        span = extension_seconds(ctx, study, -7.0, {})
    finally:
        width.predict_seconds = old
    # widths 64 and 128 are still to come: 4 points × 2 seeds each, at their price
    assert span.low == pytest.approx(8 * 2.0 + 8 * 4.0)


def test_the_eta_leaves_out_the_widths_past_an_expected_early_rejection():
    """SP with the early look: its optimum an octave lower at 64 is expected to be rejected
    there, so width 128 is in the range, not in the expected seconds; once the look has
    rejected, nothing is left."""
    import transfer.verdict.width as width

    ctx = _ctx(early_reject=True, tolerance_log2=0.5)
    ctx.cfg.proxy.parametrization = "sp"
    ctx.progress, ctx.probes = SimpleNamespace(workers=1), {}
    assert width.expected_widths(ctx) == [32, 64]
    study = optuna.create_study()
    enqueue_grid(ctx, study, -7.0)
    _train(study, {32: -7.0, 64: -8.0, 128: -9.0})
    old = width.predict_seconds
    width.predict_seconds = lambda c, hp, w: {32: 1.0, 64: 2.0, 128: 4.0}[w]
    try:
        span = extension_seconds(ctx, study, -7.0, {})
        assert span.low == pytest.approx(8 * 2.0) and span.high >= 8 * 2.0 + 8 * 4.0
        study.set_user_attr(width.EARLY, {"widths": [32, 64]})
        assert extension_seconds(ctx, study, -7.0, {}) == width.Span.certain(0.0)
    finally:
        width.predict_seconds = old


def test_best_point_is_the_lowest_seed_mean():
    assert best_point([(-8.0, [3.0, 3.2]), (-7.0, [3.0, 3.0]), (-6.0, [float("nan"), 2.0])]) \
        == -7.0
    assert best_point([(-8.0, [float("nan")])]) is None


@pytest.mark.parametrize("field, value", [("wide_points", 2), ("wide_step_log2", 0.0),
                                          ("depth_later_seeds", 1)])
def test_a_bad_design_value_is_refused(field, value):
    cfg = as_config(compose(["model=tiny", "budget=smoke", f"validation.{field}={value}"]))
    with pytest.raises(UserError, match=f"validation.{field}"):
        check_config(cfg)


def test_a_focused_depth_grid_goes_shallow_to_deep_with_fewer_seeds_on_its_deeper_half():
    from transfer.verdict.axis_grid import Axis, extend, queue

    ctx = _ctx()
    plan = grid_plan(ctx.cfg.validation, (2, 4, 8), seeds=3, later_seeds=2)
    axis = Axis(stage="validation_depth", study="validation-depth", param="n_layers",
                values=(2, 4, 8), copied=None, contexts={}, width=32, seeds=3, plan=plan)
    study = optuna.create_study()
    queue(ctx, axis, study, None, plan[2].xs(-7.0), -7.0, (2,))

    vertex = {2: -7.2, 4: -6.4, 8: -6.0}

    def waiting():
        return _waiting(study, "n_layers")

    def train(_):
        _train(study, vertex, "n_layers", (0, 1, 2))

    assert waiting() == [(2, s, x) for s in (0, 1, 2) for x in (-8.0, -7.0, -6.0)]
    train({2: -7.2, 4: -6.4, 8: -6.0})
    assert "n_layers 4: 4 points 0.75 octave apart × 3 seeds" in extend(ctx, axis, study, None,
                                                                        -7.0)
    assert waiting() == [(4, s, x) for s in (0, 1, 2) for x in (-8.125, -7.375, -6.625, -5.875)]
    train({2: -7.2, 4: -6.4, 8: -6.0})
    assert "n_layers 8: 4 points 0.75 octave apart × 2 seeds, centred on n_layers 4's best " \
           "point, log2 lr -6.62" in extend(ctx, axis, study, None, -7.0)
    assert {s for _, s, _ in waiting()} == {0, 1}  # the deeper half: 2 seeds
    train({2: -7.2, 4: -6.4, 8: -6.0})
    assert extend(ctx, axis, study, None, -7.0) == []


def test_the_shallowest_depth_curve_gets_its_own_seeds():
    """`validation.depth_first_seeds`: the depth grid's first curve (the cheapest) at its own
    seeds, queued at all of them even where the axis has no seed rounds; the later curves as
    before. The default budget gives it twice the grid's (benchmarks/RESULTS.md)."""
    from transfer.verdict.axis_grid import Axis, queue

    ctx = _ctx()
    plan = grid_plan(ctx.cfg.validation, (2, 4, 8), seeds=3, later_seeds=2, first_seeds=6,
                     axis="depth")
    assert [c.seeds for c in plan.curves] == [6, 3, 2] and plan.max_seeds == 6
    unfocused = grid_plan(_v(focus=False), (2, 4, 8), seeds=3, first_seeds=6, axis="depth")
    assert {c.seeds for c in unfocused.curves} == {3}  # a design of the focused grid only
    axis = Axis(stage="validation_depth", study="validation-depth", param="n_layers",
                values=(2, 4, 8), copied=None, contexts={}, width=32, seeds=3, plan=plan)
    assert axis.max_seeds == 6
    study = optuna.create_study()
    queue(ctx, axis, study, None, plan[2].xs(-7.0), -7.0, (2,))
    assert _waiting(study, "n_layers") == [(2, s, x) for s in range(6) for x in (-8.0, -7.0,
                                                                                  -6.0)]
    default = as_config(compose(["model=3b", "budget=default"])).validation
    depth = grid_plan(default, [2, 4, 8, 16], 3, default.depth_later_seeds,
                      first_seeds=default.depth_first_seeds, axis="depth")
    assert [c.seeds for c in depth.curves] == [6, 3, 2, 2]
    cfg = as_config(compose(["model=tiny", "budget=smoke", "validation.depth_first_seeds=1"]))
    with pytest.raises(UserError, match="validation.depth_first_seeds must be >= 2"):
        check_config(cfg)


def test_a_flat_curve_spreads_the_next_ones_points_with_its_basin():
    """`validation.spread_basins`: the next curve's points span that many of the curve
    before's basins (octaves within 1 % of its best loss), at least the planned step and at
    most `max_step_log2`; a steep curve keeps the planned step."""
    plan = grid_plan(_v(spread_basins=3.0, max_step_log2=1.5), [32, 64, 128], seeds=2)

    def curve(a):  # loss 3 + a·(x + 7)², seeds 0.01 apart, 1 octave apart
        return [(x, [3 + a * (x + 7) ** 2, 3.01 + a * (x + 7) ** 2]) for x in range(-10, -3)]

    # within 1 % of 3.005 where a·d² ≤ 0.03: half-width √(0.03 / a) (interpolated linearly)
    assert plan.step_after(64, curve(0.3)) == 0.75  # a basin ~0.6 octave: the planned step
    wide = plan.step_after(64, curve(0.01))  # ~3.5 octaves (interpolated): spread, capped
    assert wide == 1.5
    mid = plan.step_after(64, curve(0.06))  # a basin of ~1.4 octaves: 3 × 1.4 / 3 points
    assert 0.75 < mid < 1.5
    assert plan.step_after(64, []) == 0.75  # nothing measured: the plan's
    # the span holds the widest step any later curve may get
    lo, hi = plan.span(-7.0)
    assert hi + 7.0 == pytest.approx(1.0 * 2 + 2 * 1.5 * 2.5)
    off = grid_plan(_v(), [32, 64, 128], seeds=2)
    assert off.step_after(64, curve(0.01)) == 0.75


def test_a_spread_curve_is_laid_out_extended_and_priced_at_its_own_step():
    ctx = _ctx(spread_basins=3.0, max_step_log2=1.5)
    study = optuna.create_study()
    enqueue_grid(ctx, study, -7.0)

    def flat(study):  # loss 3 + (x − v)² / 100: a basin of 2 octaves on a 1-octave grid
        for t in study.get_trials(deepcopy=False):
            if t.state != optuna.trial.TrialState.WAITING:
                continue
            trial = study.ask()
            x = trial.suggest_float("log2_lr", -20, 10)
            trial.suggest_categorical("width", [32, 64, 128])
            s = trial.suggest_categorical("seed", [0, 1])
            study.tell(trial, 3 + (x + 7) ** 2 / 100 + s / 100)

    flat(study)
    line = extend_grid(ctx, study, -7.0)
    assert "1.5 octave apart (spread to width 32's basin)" in line
    assert study.user_attrs["step_64"] == 1.5
    assert _waiting(study) == [(64, s, x) for s in (0, 1) for x in (-9.25, -7.75, -6.25,
                                                                      -4.75)]
    from transfer.verdict.width import curve_of

    assert curve_of(study, grid_plan(ctx.cfg.validation, [32, 64, 128], 2), 64).step == 1.5


def test_a_spread_without_its_cap_is_refused():
    for field in ("spread_basins", "depth_spread_basins"):
        cfg = as_config(compose(["model=tiny", "budget=smoke", f"validation.{field}=3"]))
        with pytest.raises(UserError, match=f"validation.max_step_log2 must be > 0 with "
                                            f"validation.{field}"):
            check_config(cfg)
    cfg = as_config(compose(["model=tiny", "budget=smoke", "validation.depth_spread_basins=0",
                             "validation.max_step_log2=1.5"]))
    with pytest.raises(UserError, match="validation.depth_spread_basins must be > 0"):
        check_config(cfg)


def test_each_grid_spreads_by_its_own_setting():
    """`spread_basins` spreads the width grid, `depth_spread_basins` the depth grid: the
    default budget spreads the depth grid only (benchmarks/RESULTS.md)."""
    v = _v(spread_basins=None, depth_spread_basins=4.0, max_step_log2=1.5)
    assert grid_plan(v, [2, 4, 8], seeds=3, axis="depth").spreads
    assert not grid_plan(v, [32, 64, 128], seeds=2).spreads
    v = _v(spread_basins=3.0, depth_spread_basins=None, max_step_log2=1.5)
    assert grid_plan(v, [32, 64, 128], seeds=2).spreads
    assert not grid_plan(v, [2, 4, 8], seeds=3, axis="depth").spreads
    default = as_config(compose(["model=3b", "budget=default"])).validation
    assert grid_plan(default, [2, 4, 8, 16], 3, 2, axis="depth").spreads
    assert not grid_plan(default, [64, 128, 256], 2).spreads


def _early_ctx(early_reject: bool = True):
    """The default budget's validation (its limits, early_reject on) on widths 32, 64, 128."""
    cfg = as_config(compose(["model=tiny", "budget=default", "validation.points=5",
                             "validation.wide_points=5", "validation.max_extend=2",
                             f"validation.early_reject={str(early_reject).lower()}"]))
    return SimpleNamespace(cfg=cfg, proxies=SimpleNamespace(width=32, validation_width=128,
                                                            widths=lambda: [32, 64, 128]),
                           lock=contextlib.nullcontext)


def test_an_early_look_that_rejects_stops_the_width_grid_before_its_widest_curve():
    """SP-like: the optimum falls 1.5 octaves from width 32 to 64, past ±0.5 at the early
    look's 95 %: width 128 is never laid out, the verdict is the two widths' (rejected), and
    no seed round follows."""
    ctx = _early_ctx()
    vertex = {32: -6.0, 64: -7.5, 128: -9.0}
    study = optuna.create_study()
    enqueue_grid(ctx, study, -6.0)
    _train(study, vertex)
    assert "width 64" in extend_grid(ctx, study, -6.0)
    for _ in range(8):  # width 64 trained and grown to its bracket
        _train(study, vertex)
        if (new := extend_grid(ctx, study, -6.0)) == []:
            break
    assert new == [] and EARLY in study.user_attrs
    assert study.user_attrs[EARLY]["widths"] == [32, 64]
    assert study.user_attrs[EARLY]["confidence"] == pytest.approx(0.95)
    [line] = [v for k, v in study.user_attrs.items() if k == "laid_128"]
    assert line.startswith("validation: rejected on widths 32, 64 at 95% before width 128")
    assert not any(t.params.get("width") == 128 for t in study.get_trials(deepcopy=False))
    assert extend_grid(ctx, study, -6.0) == []  # stopped for every worker, every time
    assert add_seed_round(ctx, study, -6.0, {"lr": 2.0 ** -6}) == []
    assert grid_widths(ctx, study) == [32, 64]
    verdict = judge_study(ctx, study, 2.0 ** -6, {})
    assert verdict.outcome == "rejected" and verdict.widths == [32, 64]
    assert verdict.drift_ci[1] < -0.5


def test_an_early_look_that_does_not_reject_lays_out_the_next_curve():
    """μP-like (the optimum stays), and the same moving optimum with early_reject off: the grid
    goes on to width 128."""
    for early, vertex in ((True, {32: -6.0, 64: -6.0, 128: -6.0}),
                          (False, {32: -6.0, 64: -7.5, 128: -9.0})):
        ctx = _early_ctx(early)
        study = optuna.create_study()
        enqueue_grid(ctx, study, -6.0)
        laid = []
        for _ in range(12):
            _train(study, vertex)
            new = extend_grid(ctx, study, -6.0)
            if isinstance(new, str):
                laid.append(new)
            if new == []:
                break
        assert len(laid) == 2 and "width 128" in laid[1], (early, laid)
        assert EARLY not in study.user_attrs and grid_widths(ctx, study) == [32, 64, 128]
