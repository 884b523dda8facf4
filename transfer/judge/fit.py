"""Locate the optimum of a learning-rate sweep: a least-squares parabola in log2(lr).

A sweep gives a loss per grid point; the best grid point alone is quantised to the grid step
(half an octave), which is as large as the transfer drift we want to measure. Fitting a
parabola through the points around the empirical minimum resolves the optimum between grid
points. Used by `benchmarks/transfer_fidelity.py` (and tested in `tests/test_fit.py`); the
transfer validator does not use it: its verdicts fit the curves jointly with one shared curvature
(`transfer.judge.shared_curvature`, through `transfer.judge.verdict`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def fit_optimum(log2_lrs: Sequence[float], losses: Sequence[float], *,
                window: int = 5) -> tuple[float, float, bool]:
    """(best log2 lr, best loss, edge_hit) of a sweep.

    The parabola is fitted over the `window` finite points nearest the empirical minimum
    (in grid order). When it is not convex, or its vertex falls outside those points, the best
    grid point is returned instead. Non-finite losses (diverged runs) are never fitted but still
    count as grid points. `edge_hit` is True when the empirical minimum is the lowest or highest
    learning rate of the grid: the true optimum may lie outside, so extend the grid.
    """
    if window < 3:
        raise ValueError(f"window must be >= 3 (a parabola needs three points), got {window=}")
    if len(log2_lrs) != len(losses):
        raise ValueError(f"log2_lrs and losses differ in length: {len(log2_lrs)} != {len(losses)}")
    x = np.asarray(log2_lrs, dtype=float)
    y = np.asarray(losses, dtype=float)
    if x.size == 0 or not np.isfinite(x).all():
        raise ValueError("log2_lrs must be a non-empty sequence of finite numbers")
    order = np.argsort(x)
    x, y = x[order], y[order]
    finite = np.flatnonzero(np.isfinite(y))
    if finite.size == 0:
        raise ValueError("every loss is non-finite (all runs diverged); lower the learning rates")
    best = int(finite[np.argmin(y[finite])])
    edge_hit = best in (0, x.size - 1)

    # The `window` finite points nearest the minimum, by position among the finite points.
    pos = int(np.searchsorted(finite, best))
    lo = max(0, min(pos - window // 2, finite.size - window))
    idx = finite[lo:lo + window]
    if idx.size >= 3:
        a, b, c = np.polyfit(x[idx], y[idx], 2)
        if a > 0:
            vertex = -b / (2 * a)
            if x[idx].min() <= vertex <= x[idx].max():
                return float(vertex), float(c - b * b / (4 * a)), edge_hit
    return float(x[best]), float(y[best]), edge_hit

