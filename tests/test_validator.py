"""Validator arithmetic on synthetic curves: the shared-curvature fit and the parabola gap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from transfer.validator import grid, joint_fit, parabola_at


def _curves(vertices: dict, *, a: float = 0.05, noise: float = 0.0, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    xs = grid(-7.0, 7, 0.5)
    return {w: {"log2_lr": xs,
                "loss": [a * (x - v) ** 2 + 2.5 - 0.1 * i + rng.normal(0, noise) for x in xs]}
            for i, (w, v) in enumerate(vertices.items())}


def test_grid_is_centred_and_evenly_spaced():
    g = grid(-7.0, 7, 0.5)
    assert g[3] == -7.0 and len(g) == 7
    assert np.allclose(np.diff(g), 0.5)


@pytest.mark.parametrize("drift", [0.0, 0.4, -1.2])
def test_joint_fit_recovers_exact_vertices(drift):
    fit = joint_fit(_curves({64: -7.0, 256: -7.0 + drift}), [64, 256])
    assert fit is not None
    assert fit.vertex(256) - fit.vertex(64) == pytest.approx(drift, abs=1e-9)
    assert fit.a == pytest.approx(0.05)


def test_joint_fit_is_less_noisy_than_separate_parabolas():
    """Over many noisy draws the shared curvature gives a tighter drift estimate."""
    joint, separate = [], []
    for seed in range(200):
        c = _curves({64: -7.0, 256: -7.0}, noise=0.02, seed=seed)
        f = joint_fit(c, [64, 256])
        joint.append(f.vertex(256) - f.vertex(64))
        sep = []
        for w in (64, 256):
            a, b, _ = np.polyfit(c[w]["log2_lr"], c[w]["loss"], 2)
            sep.append(-b / (2 * a))
        separate.append(sep[1] - sep[0])
    assert np.std(joint) < np.std(separate)
    assert abs(np.mean(joint)) < 0.1


def test_joint_fit_refuses_a_concave_curve():
    c = {64: {"log2_lr": [0.0, 1.0, 2.0], "loss": [1.0, 2.0, 1.0]}}
    assert joint_fit(c, [64]) is None


def test_parabola_gap_is_zero_at_the_vertex_and_grows_away_from_it():
    c = _curves({256: -7.0})[256]
    at, best = parabola_at(c, -7.0)
    assert at == pytest.approx(best)
    far, best = parabola_at(c, -6.0)
    assert far - best == pytest.approx(0.05, rel=1e-6)


def test_parabola_falls_back_to_measured_when_not_convex():
    c = {"log2_lr": [0.0, 1.0, 2.0], "loss": [1.0, 2.0, math.nan]}
    at, best = parabola_at(c, 0.0)
    assert (at, best) == (1.0, 1.0)
