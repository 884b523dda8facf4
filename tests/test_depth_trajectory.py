"""The optimum's trajectory across depth and the joint width × depth estimate, on synthetic
curves whose optimum follows a known law of depth (and of width), so the truth at the target is
known: flat, converging (1/L), drifting (log-linear, strong), and one depth whose optimum the
grid does not bracket. Then the joint estimate: additive truths recovered, its interval covers,
and the shared (w0, L0) curve makes the two parts' draws correlated, not independent.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from transfer.judge.curves import grid
from transfer.judge.joint import joint
from transfer.judge.joint import lines as joint_lines
from transfer.judge.trajectory import (
    CONVERGING,
    INTERPOLATED,
    LOG_LINEAR,
    emitted_model,
    predict,
)
from transfer.judge.verdict import INCONCLUSIVE, PASSED, REJECTED, Limits, judge

DEPTHS = (2, 4, 8)
TARGET_DEPTH = 28
COORD_OK = {"passed": True, "max_abs_slope": 0.1}


def curves(law, keys, *, center=-7.0, points=7, a=0.06, noise=0.004, seeds=2, rng_seed=0,
           xs=None) -> dict:
    """Per key (depth or width), a parabola in log2 lr with its vertex at `law(key)`, a level
    offset per seed and independent noise per (point, seed)."""
    rng = np.random.default_rng(rng_seed)
    xs = grid(center, points, 0.5) if xs is None else xs
    out = {}
    for i, k in enumerate(keys):
        offsets = rng.normal(0, 0.05, seeds)
        v = law(k)
        out[k] = [(x, [a * (x - v) ** 2 + 2.6 - 0.05 * i + offsets[s] + rng.normal(0, noise)
                       for s in range(seeds)]) for x in xs]
    return out


def depth_limits(**kw) -> Limits:
    return Limits(**{"target_width": TARGET_DEPTH, "axis": "depth", "judge_drift": False,
                     "min_trajectory_widths": 3, "shared_shape": False, **kw})


def converging(y_inf, d):
    return lambda L: y_inf + d * (2 / L)


def test_depth_models_recover_their_laws_exactly():
    law = converging(-6.5, -0.6)
    v = np.array([law(L) for L in DEPTHS])
    assert predict(CONVERGING, DEPTHS, v, TARGET_DEPTH, "depth") == pytest.approx(law(28))
    slope = [(-7.0 + 0.2 * math.log2(L / 2)) for L in DEPTHS]
    assert predict(LOG_LINEAR, DEPTHS, np.array(slope), 28, "depth") == pytest.approx(
        -7.0 + 0.2 * math.log2(14))


def test_flat_in_depth_passes_and_predicts_the_same_lr():
    v = judge(curves(lambda L: -7.0, DEPTHS), None, -7.0, depth_limits(), COORD_OK)
    assert v.outcome == PASSED, v.reasons
    assert v.trajectory["estimate"] == pytest.approx(-7.0, abs=0.1)
    assert v.trajectory["axis"] == "depth"


def test_a_converging_move_passes_though_the_optimum_moved_more_than_the_tolerance():
    """The question is not whether the optimum is flat in depth, but whether its place at the
    target's depth is predictable: a 0.6-octave 1/L move from 2 to 8 layers passes (the width
    rules would reject that drift), and its estimate at 28 layers is the law's."""
    law = converging(-6.3, -0.8)  # −7.1 at 2 layers, −6.5 at 8, −6.36 at 28
    v = judge(curves(law, DEPTHS, center=-6.8, noise=0.002), None, -7.0, depth_limits(),
              COORD_OK)
    assert v.drift_log2 > 0.5
    assert v.outcome == PASSED, v.reasons
    lo, hi = v.trajectory["interval"]
    assert lo <= law(TARGET_DEPTH) <= hi
    # the same curves judged by the width rules: the drift is outside the tolerance
    width_rules = Limits(target_width=TARGET_DEPTH, axis="depth", min_trajectory_widths=3)
    assert judge(curves(law, DEPTHS, center=-6.8, noise=0.002), None, -7.0, width_rules,
                 COORD_OK).outcome == REJECTED


def test_a_strong_log_linear_drift_is_not_predictable_the_models_disagree():
    law = lambda L: -7.5 + 0.6 * math.log2(L / 2)  # noqa: E731 — 1.2 octaves over 2 → 8
    v = judge(curves(law, DEPTHS, center=-6.9, points=9, noise=0.002), None, -7.0,
              depth_limits(), COORD_OK)
    assert v.outcome == INCONCLUSIVE
    assert any("models disagree" in r for r in v.reasons), v.reasons


def test_one_depth_unbracketed_is_inconclusive_not_rejected():
    """The deepest optimum lies beyond the grid's top: not located, whatever the drift."""
    law = {2: -7.0, 4: -6.8, 8: -4.0}.get
    v = judge(curves(law, DEPTHS, points=6), None, -7.0, depth_limits(), COORD_OK)
    assert v.outcome == INCONCLUSIVE
    assert any("depth 8" in r and "not located" in r for r in v.reasons), v.reasons


def test_a_depth_without_an_optimum_says_so_and_no_nan():
    """A curve with 3 finite points (the rest diverged: OLMo 3 7B's 16 layers at 6c7e00f) has no
    optimum, so no trajectory is fitted: the reasons say that, not "disagree by nan octave",
    and the joint line says which part has no estimate, not "log2 nan [nan, nan]"."""
    xs = [-8.0, -7.0, -6.0, -5.0, -4.0]
    c = curves({2: -7.0, 4: -6.9}.get, DEPTHS[:2], xs=xs)
    c[8] = list(zip(xs, [[2.0997, 2.1146], [2.1351, 2.0778], [2.1094, 2.0847],  # OLMo 3's
                         [math.nan] * 2, [math.nan] * 2]))
    v = judge(c, None, -7.0, depth_limits(), COORD_OK)
    assert math.isnan(v.trajectory["disagreement"])
    assert v.outcome == INCONCLUSIVE
    assert any("depth 8: 3 finite points" in r for r in v.reasons), v.reasons
    assert not any("nan" in r for r in v.reasons), v.reasons
    j = run_joint(*joint_curves(lambda w: -7.0, lambda L: 0.0))
    assert "log2 -7" in joint_lines(j)[0]
    nan = math.nan  # a depth part without an estimate, as OLMo 3's run printed it
    j = dataclasses.replace(j, estimate=nan, interval=[nan, nan],
                            depth={**j.depth, "estimate": nan, "interval": [nan, nan]})
    (line,) = joint_lines(j)
    assert "nan" not in line and "its depth part has none" in line, line


def test_two_depths_cannot_check_the_trajectory():
    v = judge(curves(lambda L: -7.0, (2, 8)), None, -7.0, depth_limits(), COORD_OK)
    assert v.outcome == INCONCLUSIVE
    assert any("fewer than 3" in r for r in v.reasons)


# ---- a grid that reaches past the target's depth ------------------------------------------
TURN = {2: -7.0, 8: -6.4, 32: -7.0}  # up, then down: no model of one turn-free form


def turn(L: float) -> float:
    """Linear in log2 L between the TURN depths: −6.7 at 16 layers, −6.94 at 28."""
    return float(np.interp(math.log2(L), [math.log2(k) for k in TURN], list(TURN.values())))


def test_inside_the_grid_the_estimate_is_interpolated_not_extrapolated():
    """With `validation.depth_interpolate`, the emitted model is the interpolation wherever the
    target lies within the measured depths; the fitted models are reported beside it, and their
    disagreement is not judged."""
    assert emitted_model(CONVERGING, (2, 8, 32), 28, "depth", interpolate=True) == INTERPOLATED
    assert emitted_model(CONVERGING, (2, 8, 32), 28, "depth") == CONVERGING  # off by default
    assert emitted_model(CONVERGING, (2, 8, 16), 28, "depth", True) == CONVERGING  # past it
    assert emitted_model(CONVERGING, (64, 128, 256), 128, "width", True) == CONVERGING  # width
    v = np.array([-7.0, -6.4, -7.0])
    assert predict(INTERPOLATED, (2, 8, 32), v, 28, "depth") == pytest.approx(
        -6.4 - 0.6 * math.log2(28 / 8) / 2)
    assert predict(INTERPOLATED, (2, 8, 32), v, 8, "depth") == pytest.approx(-6.4)
    with pytest.raises(ValueError, match="does not extrapolate"):
        predict(INTERPOLATED, (2, 8, 32), v, 64, "depth")


def test_a_turn_the_models_cannot_follow_is_followed_inside_the_grid():
    """The optimum rises from 2 to 16 layers and falls back by 32 (as the 3B's held-out targets
    at width 64 did: +0.08 at 16 layers, +0.65 at 32). A grid stopping at 16 extrapolates a
    model that cannot turn and misses 28 layers by more than its interval; one reaching 32
    interpolates and covers it."""
    deep = judge(curves(turn, (2, 8, 32), center=-6.8, points=7, noise=0.002), None, -7.0,
                 depth_limits(interpolate=True), COORD_OK)
    t = deep.trajectory
    assert t["model"] == INTERPOLATED and set(t["models"]) == {CONVERGING, LOG_LINEAR,
                                                                INTERPOLATED}
    assert t["interval"][0] <= turn(28) <= t["interval"][1]
    assert t["estimate"] == pytest.approx(turn(28), abs=0.1)
    assert not any("models disagree" in r for r in deep.reasons), deep.reasons
    assert deep.outcome == PASSED, deep.reasons
    short = judge(curves(turn, (2, 4, 8, 16), center=-6.8, points=7, noise=0.002), None, -7.0,
                  depth_limits(interpolate=True), COORD_OK)
    assert short.trajectory["model"] == CONVERGING
    lo, hi = short.trajectory["interval"]
    assert not lo <= turn(28) <= hi
    assert short.trajectory["estimate"] - turn(28) > 0.4


def test_the_joint_depth_part_is_interpolated_inside_the_grid():
    f = lambda w: -7.2 + 0.4 * (w / 64) ** -0.5  # noqa: E731
    w = tables(curves(lambda x: f(x) + turn(2), WIDTHS, noise=0.001))
    d = tables(curves(lambda L: f(32) + turn(L), (2, 8, 32), center=-6.8, noise=0.001,
                      rng_seed=7))
    j = joint(w, d, target_width=3072, target_depth=TARGET_DEPTH, width_model=CONVERGING,
              depth_model=CONVERGING, confidence=0.9, n_boot=400, boot_seed=0, window=7,
              depth_width=32, depth_interpolate=True)
    assert j.depth["model"] == INTERPOLATED
    assert set(j.depth_models) == {CONVERGING, LOG_LINEAR, INTERPOLATED}
    assert j.depth["estimate"] == pytest.approx(turn(28) - turn(2), abs=0.08)
    assert j.depth_disagreement == pytest.approx(
        abs(j.depth["estimate"] - j.depth_models[CONVERGING]["estimate"]))
    lo, hi = j.interval
    assert lo <= f(3072) + turn(28) <= hi


# ---- the joint estimate ----------------------------------------------------------------------
WIDTHS = (64, 128, 256)


def tables(c: dict) -> dict:
    """Curves as a verdict holds them ({log2_lr, losses} per key)."""
    return {k: {"log2_lr": [p[0] for p in pts], "losses": [p[1] for p in pts]}
            for k, pts in c.items()}


def joint_curves(f, g, *, rng_seed=0, noise=0.004):
    """Width curves at depth 2 with optimum f(w) + g(2); depth curves at width 64 with
    f(64) + g(L); the (64, 2) curve is the same trials in both grids."""
    w = curves(lambda x: f(x) + g(2), WIDTHS, rng_seed=rng_seed, noise=noise)
    d = curves(lambda L: f(64) + g(L), DEPTHS[1:], rng_seed=rng_seed + 1000, noise=noise)
    d[2] = w[64]
    return tables(w), tables(d)


def run_joint(w, d, **kw):
    return joint(w, d, target_width=3072, target_depth=TARGET_DEPTH, width_model=CONVERGING,
                 depth_model=CONVERGING, confidence=0.9, n_boot=400, boot_seed=0, window=7, **kw)


def test_joint_recovers_an_additive_truth():
    f = lambda w: -7.2 + 0.4 * (w / 64) ** -0.5  # noqa: E731
    g = lambda L: -0.8 * (2 / L)  # noqa: E731
    w, d = joint_curves(f, g, noise=0.001)
    j = run_joint(w, d)
    truth = f(3072) + g(28)
    assert j.estimate == pytest.approx(truth, abs=0.05)
    assert j.width["estimate"] + j.depth["estimate"] == pytest.approx(j.estimate)
    assert j.depth["estimate"] == pytest.approx(g(28) - g(2), abs=0.08)
    assert len(j.draw_quantiles) == 201 and j.draw_quantiles == sorted(j.draw_quantiles)


def test_joint_interval_covers_on_repeated_noise():
    """Coverage of the nominal 90 % interval over 40 noise draws: not below 75 % (a small-sample
    floor for 90 %; benchmarks/validator_power.py measures it at scale)."""
    f = lambda w: -7.0  # noqa: E731
    g = lambda L: -0.5 * (2 / L)  # noqa: E731
    truth = f(3072) + g(28)
    hits = 0
    for s in range(40):
        w, d = joint_curves(f, g, rng_seed=s, noise=0.01)
        j = run_joint(w, d)
        hits += j.interval[0] <= truth <= j.interval[1]
    assert hits >= 30, hits


def test_each_part_is_its_verdicts_and_the_shared_curve_is_drawn_once_for_both():
    """The width part is the width verdict's trajectory at the target, to the digit, and the
    depth part the depth verdict's move; the (w0, L0) curve's bootstrap noise is shared, so
    the joint interval differs from the two parts' intervals added as if independent."""
    f = lambda w: -7.0 + 0.3 * (w / 64) ** -0.5  # noqa: E731
    g = lambda L: -0.4 * (2 / L)  # noqa: E731
    w, d = joint_curves(f, g, noise=0.01)
    j = run_joint(w, d)
    raw = {k: list(zip(t["log2_lr"], t["losses"])) for k, t in w.items()}
    wv = judge(raw, None, -7.0, Limits(target_width=3072, n_boot=400, fit_window=7),
               COORD_OK)
    assert j.width["estimate"] == pytest.approx(wv.trajectory["estimate"], abs=1e-9)
    assert j.width["interval"] == pytest.approx(wv.trajectory["interval"], abs=1e-9)
    rawd = {k: list(zip(t["log2_lr"], t["losses"])) for k, t in d.items()}
    dv = judge(rawd, None, -7.0, depth_limits(n_boot=400, fit_window=7), COORD_OK)
    t = dv.trajectory
    assert j.depth["estimate"] == pytest.approx(
        t["estimate"] - predict(CONVERGING, DEPTHS, np.array(t["vertices"]), 2, "depth"))
    assert j.depth["shared_points"] == 7
    half = lambda ci, e: max(e - ci[0], ci[1] - e)  # noqa: E731
    independent = math.hypot(half(j.width["interval"], j.width["estimate"]),
                             half(j.depth["interval"], j.depth["estimate"]))
    assert abs(j.half_width - independent) > 0.005, (j.half_width, independent)


def test_joint_reads_the_shared_curves_extension_points_in_its_own_fit():
    """The depth grid extended its copy of the (w0, L0) curve by a point the width grid never
    trained: each fit reads its own copy; the points both hold share their noise."""
    f = lambda w: -7.0  # noqa: E731
    g = lambda L: 0.0  # noqa: E731
    w, d = joint_curves(f, g)
    d[2] = {"log2_lr": d[2]["log2_lr"] + [-7.25], "losses": d[2]["losses"] + [[2.61, 2.62]]}
    j = run_joint(w, d)
    # the depth fit's window (7 points nearest its minimum) holds the new point, which the
    # width fit never drew; the others it shares
    assert j is not None and j.depth["shared_points"] == 6


def test_a_depth_grid_at_its_own_width_shares_no_curve_and_still_recovers_the_truth():
    """validation.depth_width: the depth grid trains its own L0 curve at width 32 (the width
    grid's narrowest is 64). No curve is the same trials in both grids, so nothing is drawn
    once for both; the additive estimate is still the truth when the move is width-free."""
    f = lambda w: -7.2 + 0.4 * (w / 64) ** -0.5  # noqa: E731
    g = lambda L: -0.8 * (2 / L)  # noqa: E731
    w = tables(curves(lambda x: f(x) + g(2), WIDTHS, noise=0.001))
    d = tables(curves(lambda L: f(32) + g(L), DEPTHS, rng_seed=1000, noise=0.001))
    j = run_joint(w, d, depth_width=32)
    assert j.depth["shared_points"] == 0 and j.depth["at_width"] == 32
    assert j.estimate == pytest.approx(f(3072) + g(28), abs=0.05)
    same = run_joint(w, d)  # read as if at width 64: its L0 curve's noise is then shared
    assert same.depth["shared_points"] > 0 and same.depth["at_width"] == 64


def test_joint_needs_two_of_each():
    w, d = joint_curves(lambda w: -7.0, lambda L: 0.0)
    with pytest.raises(ValueError, match="≥ 2 depths"):
        run_joint(w, {2: d[2]})


def test_each_depths_own_shape_keeps_a_symmetric_curve_where_it_is():
    """Across depth the curves' shapes differ (the 8-layer curve is much steeper above its
    optimum than the 2-layer one): one shared asymmetry moves the symmetric curve's optimum,
    each curve's own does not (shared_curvature.separate_statistics)."""
    xs = grid(-6.5, 9, 0.5)

    def curve(v, r):
        return [(x, [0.05 * ((x - v) ** 2) * (r if x > v else 1.0) + 2.6 + o for o in (0.0, 0.03)])
                for x in xs]

    c = {2: curve(-7.0, 1.0), 4: curve(-6.6, 2.0), 8: curve(-6.0, 3.4)}
    shared = judge(c, None, -7.0, depth_limits(shared_shape=True), COORD_OK)
    own = judge(c, None, -7.0, depth_limits(), COORD_OK)
    assert own.best_log2_lr[2] == pytest.approx(-7.0, abs=0.03)
    assert own.best_log2_lr[8] == pytest.approx(-6.0, abs=0.05)
    assert abs(shared.best_log2_lr[2] - (-7.0)) > 2 * abs(own.best_log2_lr[2] - (-7.0)) + 0.05
    assert own.fit["asymmetry_by_curve"][2] < own.fit["asymmetry_by_curve"][8]
