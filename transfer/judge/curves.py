"""The log2-lr grid and the curves measured on it: points, seed means, bracketing, extension.

A curve is, per width (or depth, or token budget), the log2 lrs of a grid and every seed's
held-out loss at each point. The validator, the depth check and the horizon check lay out and
extend their grids with these; the verdict (`transfer.judge.verdict.judge`) reads the curves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

# width -> [(log2 lr, [loss of each seed; nan where it diverged]), ...]
Curves = Mapping[int, Sequence[tuple[float, Sequence[float]]]]

__all__ = ["BASIN_TOL", "Curves", "basin_octaves", "bracket", "extend_each", "extend_points", "extension_odds", "grid",
           "mean_curve", "rounds_left"]


def grid(center: float, points: int, step: float) -> list[float]:
    """`points` log2 lrs `step` apart, centred on `center`; rounded, as trials are keyed."""
    return [round(center + step * (i - (points - 1) / 2), 6) for i in range(points)]


def mean_curve(points: Sequence[tuple[float, Sequence[float]]]) -> tuple[np.ndarray, np.ndarray]:
    """(x, seed-mean loss) sorted by x; nan where any seed diverged."""
    pts = sorted(points, key=lambda p: p[0])
    xs = np.array([p[0] for p in pts], dtype=float)
    ys = np.array([float(np.mean(p[1])) if len(p[1]) and np.all(np.isfinite(p[1])) else math.nan
                   for p in pts])
    return xs, ys


def bracket(xs: np.ndarray, ys: np.ndarray) -> tuple[bool, bool]:
    """(needs a point below, needs a point above): the grid's minimum sits at its low or high
    end. A diverged point above the minimum brackets it (the loss only grows towards it)."""
    finite = np.flatnonzero(np.isfinite(ys))
    if finite.size == 0:
        return False, False
    best = int(finite[np.argmin(ys[finite])])
    return best == 0, best == xs.size - 1


def extend_points(curves: Curves, *, step: float, lo: float, hi: float) -> list[float]:
    """The log2 lrs to add (at every width) so that each width's minimum is bracketed, one step
    beyond the current edge on the side that needs it, never outside [lo, hi]."""
    new = set()
    for pts in curves.values():
        xs, ys = mean_curve(pts)
        if xs.size == 0:
            continue
        below, above = bracket(xs, ys)
        if below and xs[0] - step >= lo - 1e-9:
            new.add(round(float(xs[0] - step), 6))
        if above and xs[-1] + step <= hi + 1e-9:
            new.add(round(float(xs[-1] + step), 6))
    have = {round(float(p[0]), 6) for pts in curves.values() for p in pts}
    return sorted(new - have)


def extend_each(curves: Curves, *, step: float,
                bounds: Mapping[int, tuple[float, float]]) -> dict[int, list[float]]:
    """Per curve, the log2 lrs to add so that its own minimum is bracketed: one step beyond
    its edge on the side that needs it, within that curve's (lo, hi). Only the curves whose
    minimum sits at an edge get points; the others are left as they are."""
    out = {}
    for key, pts in curves.items():
        lo, hi = bounds[key]
        new = extend_points({key: pts}, step=step, lo=lo, hi=hi)
        if new:
            out[key] = new
    return out


def extension_odds(offset: float, *, points: int, step: float, max_extend: int) -> list[float]:
    """P(a curve's grid grows by at least j points), j = 1..`max_extend`, when its optimum is
    expected `offset` (log2 lr) from the grid's centre. The rule is `bracket`'s, noise-free: the
    grid grows on a side while its edge is the point nearest the optimum, so k points are
    needed when |offset| > half-width + (k − ½)·step. The optimum is taken as spread evenly
    over one grid step (the grid places it no finer), which makes P(≥ j) linear in |offset|.
    For pricing time only (the ETA and the prediction); no verdict reads it."""
    half = step * (points - 1) / 2
    reach = (abs(offset) - half) / step + 2.0
    return [min(1.0, max(0.0, reach - j)) for j in range(1, int(max_extend) + 1)]


def rounds_left(odds: Sequence[float], done: int, at_edge: bool | None) -> list[float]:
    """The probability of each growth round still to come (rounds done+1..len(odds)), given
    `odds` (`extension_odds`: P(≥ j) before anything was measured), the `done` rounds already
    queued, and the curve's own word: `at_edge` True when it is measured whole and its minimum
    sits at an edge (one more round is certain), False when whole and bracketed (no more), None
    while points are still to finish (the odds, given that `done` happened)."""
    if at_edge is False or done >= len(odds):
        return []
    known = done + 1 if at_edge else done  # rounds that are certain by now
    base = odds[known - 1] if known >= 1 else 1.0
    return [1.0 if j <= known else (odds[j - 1] / base if base > 0 else 0.0)
            for j in range(done + 1, len(odds) + 1)]


BASIN_TOL = 0.01  # a point is in the basin when its loss is within 1 % of the best


def basin_octaves(xs: np.ndarray, mean: np.ndarray, tol: float = BASIN_TOL) -> tuple[float, bool]:
    """Octaves of lr around the best point whose loss stays within `tol` of the best, the edges
    placed by linear interpolation between grid points; and whether the basin reaches an edge
    of the grid (then the width is a lower bound)."""
    ok = np.isfinite(mean)
    if ok.sum() < 2:
        return math.nan, True
    x, y = xs[ok], mean[ok]
    i = int(np.argmin(y))
    limit = y[i] * (1 + tol)
    edges, open_ = [], False
    for step in (-1, 1):
        j = i
        while 0 <= j + step < len(x) and y[j + step] <= limit:
            j += step
        if not 0 <= j + step < len(x):
            edges.append(x[j])
            open_ = True
            continue
        k = j + step  # the first point outside: interpolate the crossing between j and k
        edges.append(x[j] + (x[k] - x[j]) * (limit - y[j]) / (y[k] - y[j]))
    return float(abs(edges[1] - edges[0])), open_
