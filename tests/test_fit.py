"""transfer.judge.fit: the sweep-optimum fit, on synthetic curves with a known answer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from transfer.judge.fit import fit_optimum

GRID = [-9.0 + 0.5 * i for i in range(7)]  # -9 … -6, half-octave steps


def bowl(x, centre, floor=3.0, curvature=0.2):
    return floor + curvature * (np.asarray(x) - centre) ** 2


def test_recovers_an_off_grid_parabola_vertex():
    opt, loss, edge = fit_optimum(GRID, bowl(GRID, -7.3))
    assert opt == pytest.approx(-7.3)
    assert loss == pytest.approx(3.0)
    assert not edge


def test_resolves_better_than_the_grid_point_on_an_asymmetric_curve():
    # A quartic-ish bowl: the fit should land between grid points, closer to the truth than the
    # nearest grid point is.
    truth = -7.2
    losses = 3 + 0.3 * (np.asarray(GRID) - truth) ** 2 + 0.02 * (np.asarray(GRID) - truth) ** 4
    opt, _, _ = fit_optimum(GRID, losses)
    assert abs(opt - truth) < abs(GRID[int(np.argmin(losses))] - truth)


def test_minimum_at_the_grid_edge_is_flagged():
    _, _, low = fit_optimum(GRID, bowl(GRID, -10.0))
    _, _, high = fit_optimum(GRID, bowl(GRID, -5.0))
    assert low and high


def test_non_convex_points_fall_back_to_the_best_grid_point():
    losses = [-((x + 7.5) ** 2) for x in GRID]  # concave: a parabola vertex would be a maximum
    opt, loss, _ = fit_optimum(GRID, losses)
    assert (opt, loss) == (GRID[int(np.argmin(losses))], min(losses))


def test_diverged_points_are_skipped_but_still_bound_the_grid():
    losses = list(bowl(GRID, -7.0))
    losses[-1] = math.inf  # the highest lr diverged
    losses[-2] = math.nan
    opt, _, edge = fit_optimum(GRID, losses)
    assert opt == pytest.approx(-7.0)
    assert not edge


def test_input_order_does_not_matter():
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(GRID))
    losses = bowl(GRID, -7.3)
    assert fit_optimum(np.asarray(GRID)[perm], losses[perm]) == pytest.approx(
        fit_optimum(GRID, losses))


def test_window_restricts_the_fit_to_points_near_the_minimum():
    # Far points follow a different curve; a narrow window must ignore them.
    losses = list(bowl(GRID, -7.0))
    losses[0] = losses[-1] = 100.0
    opt, _, _ = fit_optimum(GRID, losses, window=3)
    assert opt == pytest.approx(-7.0)


@pytest.mark.parametrize("kwargs, match", [
    ({"log2_lrs": [1.0, 2.0], "losses": [1.0]}, "differ in length"),
    ({"log2_lrs": [1.0, 2.0], "losses": [math.inf, math.nan]}, "diverged"),
    ({"log2_lrs": [1.0, 2.0, 3.0], "losses": [1.0, 0.5, 1.0], "window": 2}, "window must be >= 3"),
    ({"log2_lrs": [], "losses": []}, "non-empty"),
])
def test_bad_input_raises_value_error_naming_the_problem(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_optimum(kwargs.pop("log2_lrs"), kwargs.pop("losses"), **kwargs)
