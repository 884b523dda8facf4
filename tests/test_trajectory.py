"""The optimum's trajectory across widths and its estimate at the target, on synthetic curves:
a fixed optimum, a linear drift, a converging drift, noise, a width that misses its bracket;
and the emitted interval's coverage of the true optimum at the target.

Curves are parabolas in log2 lr whose vertex follows a known law of width, so the true optimum
at the target is known exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from transfer.judge.curves import grid
from transfer.judge.trajectory import CONVERGING, LOG_LINEAR, model_for, predict, trajectory
from transfer.judge.verdict import INCONCLUSIVE, PASSED, REJECTED, Limits, judge

WIDTHS = (64, 128, 256)
TARGET = 3072
COORD_OK = {"passed": True, "max_abs_slope": 0.1}


def converging(x_inf: float, c: float):
    return lambda w: x_inf + c * (w / 64) ** -0.5


def log_linear(x0: float, slope: float):
    return lambda w: x0 + slope * math.log2(w / 64)


def curves(law, *, widths=WIDTHS, center=-7.0, points=9, a=0.06, point_noise=0.004,
           seed_offset=0.05, seeds=2, rng_seed=0) -> dict:
    """Per width, a parabola with its vertex at `law(width)`, a level offset per seed and
    independent noise per (point, seed)."""
    rng = np.random.default_rng(rng_seed)
    xs = grid(center, points, 0.5)
    out = {}
    for i, w in enumerate(widths):
        offsets = rng.normal(0, seed_offset, seeds)
        v = law(w)
        out[w] = [(x, [a * (x - v) ** 2 + 2.6 - 0.1 * i + offsets[s] + rng.normal(0, point_noise)
                       for s in range(seeds)]) for x in xs]
    return out


def limits(**kw) -> Limits:
    return Limits(target_width=TARGET, **kw)


def verdict(c, lim=None, tuned=-7.0):
    return judge(c, None, tuned, lim or limits(), COORD_OK)


# ---- the models themselves -------------------------------------------------------------------
@pytest.mark.parametrize("model, law", [(CONVERGING, converging(-7.2, 0.8)),
                                        (LOG_LINEAR, log_linear(-7.0, -0.3))])
def test_each_model_recovers_its_own_law_exactly(model, law):
    ws = [64, 128, 256, 512]
    assert predict(model, ws, np.array([law(w) for w in ws]), TARGET) == pytest.approx(law(TARGET))


def test_the_parametrizations_models():
    assert model_for("mup") == CONVERGING and model_for("sp") == LOG_LINEAR


def test_a_draw_without_a_minimum_has_no_prediction():
    draws = np.array([[-7.0, np.nan], [-7.1, -7.0], [-7.2, -7.1]])
    out = predict(CONVERGING, WIDTHS, draws, TARGET)
    assert math.isfinite(out[0]) and math.isnan(out[1])


def test_trajectory_needs_two_widths():
    with pytest.raises(ValueError, match="≥ 2 widths"):
        trajectory([64], [-7.0], np.zeros((1, 3)), target_width=TARGET, model=CONVERGING,
                   confidence=0.9)


# ---- outcomes ---------------------------------------------------------------------------------
def test_a_fixed_optimum_passes_and_is_emitted_at_the_target():
    v = verdict(curves(lambda w: -7.0))
    assert v.outcome == PASSED, v.reasons
    t = v.trajectory
    assert t["widths"] == list(WIDTHS) and t["target_width"] == TARGET
    assert t["model"] == CONVERGING
    assert v.optimum_log2_lr == t["estimate"] == pytest.approx(-7.0, abs=0.2)
    lo, hi = v.optimum_ci
    assert lo <= -7.0 <= hi and hi - lo <= 1.0


def test_a_converging_drift_is_followed_to_the_target():
    """The optimum moves 0.5 octave from 64 to 256, converging: the emitted lr is where the law
    puts it at the target, not between the proxies."""
    law = converging(-7.6, 1.0)
    v = verdict(curves(law))
    t = v.trajectory
    lo, hi = t["interval"]
    assert lo <= law(TARGET) <= hi
    assert t["estimate"] == pytest.approx(law(TARGET), abs=0.15)
    midpoint = (t["vertices"][0] + t["vertices"][-1]) / 2
    assert abs(t["estimate"] - midpoint) > 0.3  # the midpoint rule would have missed


def test_a_linear_drift_too_big_for_the_models_to_agree_is_not_passed():
    """0.45 octave per doubling: the models part by more than the tolerance at the target."""
    v = verdict(curves(log_linear(-7.5, 0.45)), limits(tolerance_log2=1.0))
    assert v.outcome != PASSED
    assert any("models disagree" in r for r in v.inconclusive_because)
    assert v.trajectory["disagreement"] > 1.0


def test_sp_like_drift_is_rejected_and_extrapolated_log_linearly():
    law = log_linear(-6.0, -1.0)
    v = verdict(curves(law, center=-7.0, points=13), limits(trajectory_model=LOG_LINEAR))
    assert v.outcome == REJECTED
    assert v.trajectory["model"] == LOG_LINEAR
    assert v.trajectory["estimate"] == pytest.approx(law(TARGET), abs=0.2)


def test_noise_widens_the_interval_until_it_cannot_tell():
    v = verdict(curves(lambda w: -7.0, point_noise=0.06, rng_seed=3))
    assert v.outcome == INCONCLUSIVE
    quiet = verdict(curves(lambda w: -7.0, rng_seed=3))
    assert (v.trajectory["interval"][1] - v.trajectory["interval"][0]
            > quiet.trajectory["interval"][1] - quiet.trajectory["interval"][0])


def test_a_middle_width_missing_its_bracket_cannot_tell():
    c = curves(lambda w: -7.0)
    c[128] = [(x, ys) for x, ys in c[128] if x <= -7.5]  # its minimum at the grid's top edge
    c[128] = [(x, [2.5 - 0.1 * x + 0.001 * s for s in range(2)]) for x, _ in c[128]]
    v = verdict(c)
    assert v.outcome == INCONCLUSIVE
    assert any("width 128" in r and "not located" in r for r in v.inconclusive_because)


def test_two_widths_cannot_check_the_trajectory():
    v = verdict(curves(lambda w: -7.0, widths=(64, 256)))
    assert v.outcome == INCONCLUSIVE
    assert any("fewer than 3" in r for r in v.inconclusive_because)
    assert verdict(curves(lambda w: -7.0, widths=(64, 256)),
                   limits(min_trajectory_widths=2)).outcome == PASSED


def test_without_a_target_the_verdict_is_the_pairwise_one():
    v = judge(curves(lambda w: -7.0), None, -7.0, Limits(), COORD_OK)
    assert v.trajectory is None and v.outcome == PASSED
    assert v.optimum_log2_lr == pytest.approx(np.mean(list(v.best_log2_lr.values())))


# ---- coverage ---------------------------------------------------------------------------------
@pytest.mark.parametrize("law", [lambda w: -7.0, converging(-7.5, 0.8)])
def test_the_emitted_interval_covers_the_true_optimum_at_the_target(law):
    """Over 40 noisy draws the 90 % interval covers the truth at least 80 % of the time (the
    binomial 5th percentile of 90 % coverage in 40 draws is ~82 %)."""
    hits = 0
    for r in range(40):
        t = verdict(curves(law, point_noise=0.01, rng_seed=100 + r)).trajectory
        lo, hi = t["interval"]
        hits += lo <= law(TARGET) <= hi
    assert hits >= 32, hits

