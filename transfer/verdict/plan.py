"""One plan per grid: each curve's points, spacing and seeds, and where it is centred.

A grid (the width grid's widths, the depth grid's depths) is laid out curve by curve from its
plan. Today's design gives every curve the same `validation.points` points `step_log2` apart,
all centred on the stages' pick and queued at once. With `validation.focus` the first curve
(the narrowest, the shallowest: the cheapest) is laid out first; each later one is queued only
once the curve before it is whole and bracketed, centred on that curve's best point, with
`wide_points` points `wide_step_log2` apart (the vertex's variance falls with the points'
spread while the curve stays parabolic there), and on the depth grid the later half of the
depths `depth_later_seeds` seeds. `benchmarks/design_replay.py` chose it on real runs' grids:
0.85 × the width grid's trial-seconds with its interval and coverage kept, 0.59 × the depth
grid's with its curvature S/N raised (benchmarks/RESULTS.md). The runner (queueing and
extending), the ETA and `transfer.run.predict` all read the plan; the verdict reads only the
curves that were measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from transfer.judge.curves import basin_octaves, grid, mean_curve


@dataclass(frozen=True)
class CurvePlan:
    """One curve's design: `points` log2 lrs `step` apart, each trained at `seeds` seeds."""

    points: int
    step: float
    seeds: int

    def xs(self, centre: float) -> list[float]:
        return grid(centre, self.points, self.step)

    def bounds(self, centre: float, max_extend: int) -> tuple[float, float]:
        """The widest this curve may grow: `max_extend` steps beyond its first edges."""
        half = self.step * ((self.points - 1) / 2 + max_extend)
        return round(centre - half, 6), round(centre + half, 6)

    @property
    def trials(self) -> int:
        return self.points * self.seeds


@dataclass(frozen=True)
class GridPlan:
    """A grid's curves in the order they are laid out (the first is the cheapest), each with
    its `CurvePlan`; `focus`: a later curve waits for the one before it and is centred on its
    best point."""

    keys: tuple[int, ...]
    curves: tuple[CurvePlan, ...]
    focus: bool
    max_extend: int
    # A later curve's points span this many of the curve before's basins (`step_after`);
    # None: every curve its planned step
    spread_basins: float | None = None
    max_step: float | None = None  # the widest a spread curve's step grows

    def __getitem__(self, key: int) -> CurvePlan:
        return self.curves[self.keys.index(key)]

    def step_after(self, key: int, before) -> float:
        """The step of the curve `key`, laid out after the curve before it measured `before`
        (its points): with `spread_basins`, its points span that many of the curve before's
        basins (octaves within 1 % of its best seed-mean loss, `curves.basin_octaves`), at
        least the planned step and at most `max_step`. A flatter family's curve is wider in lr
        and its points spread with it: the curvature's S/N grows as the step squared, the
        vertex's precision as the step, while the curve stays parabolic over its points."""
        cp = self[key]
        if not self.spreads:
            return cp.step
        return spread_step(before, cp, self.spread_basins, self.max_step)

    @property
    def spreads(self) -> bool:
        """Whether a later curve's step follows the basin before it (`step_after`)."""
        return bool(self.focus and self.spread_basins and self.max_step)

    def before(self, key: int) -> int | None:
        """The curve laid out before `key` (None for the first)."""
        i = self.keys.index(key)
        return self.keys[i - 1] if i else None

    def span(self, centre: float) -> tuple[float, float]:
        """Bounds that hold every point any curve can reach from `centre`: a focused curve's
        centre may move by its predecessor's reach, so the reaches add up (an Optuna float
        distribution for the grid's log2 lr, wide enough for every trial)."""
        reach = [self.widest_step(i) * ((c.points - 1) / 2 + self.max_extend)
                 for i, c in enumerate(self.curves)]
        half = sum(reach) if self.focus else max(reach)
        return round(centre - half, 6), round(centre + half, 6)

    def widest_step(self, i: int) -> float:
        """The widest step the `i`-th curve may be laid out at (`step_after`)."""
        step = self.curves[i].step
        return max(step, self.max_step) if i and self.spreads else step

    @property
    def max_seeds(self) -> int:
        return max(c.seeds for c in self.curves)


def grid_plan(v, keys: Sequence[int], seeds: int, later_seeds: int | None = None, *,
              first_seeds: int | None = None, axis: str = "width") -> GridPlan:
    """The plan of a grid over `keys` (cheapest first) from the `validation` group `v`: the
    first curve `v.points` points `v.step_log2` apart at `seeds` seeds; with `v.focus`, each
    later one `v.wide_points` × `v.wide_step_log2` (None: the first's), `later_seeds` seeds on
    the later half of the curves (None: `seeds`), and its points spread with the basin before
    it by the `axis` grid's own setting (`v.spread_basins` for the width grid,
    `v.depth_spread_basins` for the depth grid); and the first curve, the cheapest,
    `first_seeds` seeds (None: `seeds`)."""
    keys = tuple(keys)
    focus = bool(getattr(v, "focus", False))
    first = CurvePlan(int(v.points), float(v.step_log2),
                      int(first_seeds) if first_seeds and focus else int(seeds))
    wide_points = getattr(v, "wide_points", None) if focus else None
    wide_step = getattr(v, "wide_step_log2", None) if focus else None
    curves = []
    for i in range(len(keys)):
        if i == 0:
            curves.append(first)
            continue
        n = int(later_seeds) if later_seeds and focus and i >= len(keys) / 2 else int(seeds)
        curves.append(CurvePlan(int(wide_points or first.points),
                                float(wide_step or first.step), n))
    field = "depth_spread_basins" if axis == "depth" else "spread_basins"
    spread = getattr(v, field, None) if focus else None
    return GridPlan(keys=keys, curves=tuple(curves), focus=focus,
                    max_extend=int(v.max_extend), spread_basins=spread and float(spread),
                    max_step=float(getattr(v, "max_step_log2", None) or 0.0) or None)


def spread_step(before, curve: CurvePlan, spread_basins: float, max_step: float) -> float:
    """`curve`'s step when its points span `spread_basins` of the basin the curve `before`
    (its measured points) showed, within [`curve.step`, `max_step`] (`GridPlan.step_after`);
    the planned step where `before` has no basin to measure."""
    if not before or curve.points < 2:
        return curve.step
    xs, ys = mean_curve(before)
    basin, _ = basin_octaves(xs, ys)
    if not math.isfinite(basin):
        return curve.step
    want = spread_basins * basin / (curve.points - 1)
    return round(min(max(curve.step, want), max(max_step, curve.step)), 3)


def best_point(points) -> float | None:
    """A measured curve's best log2 lr (its lowest seed-mean loss), None without a finite one:
    where the next focused curve is centred."""
    xs, ys = mean_curve(points)
    fin = np.flatnonzero(np.isfinite(ys))
    if fin.size == 0:
        return None
    x = float(xs[fin[np.argmin(ys[fin])]])
    return round(x, 6) if math.isfinite(x) else None
