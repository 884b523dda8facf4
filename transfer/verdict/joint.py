"""The lr at the target's width *and* depth: the width trajectory joined to the depth one.

The width grid measures the optimum at widths w0 < … < w_n at the stages' depth L0; the depth
grid at depths L0 < … < L_m at the stages' width w0. Both hold the (w0, L0) curve: the depth
grid's L0 points are the width grid's, copied. The estimate is additive in the two axes:

    v(w_t, L_t) = W(w_t) + (D(L_t) − D(L0))

W the width trajectory's model (`transfer.verdict.trajectory`, across width), D the depth
trajectory's (across depth), each fitted to the optima of its own axis. Additive means the
optimum's move with depth does not depend on width; the held-out "both" target (wider *and*
deeper than every proxy) tests it (docs/verdict.md).

One fit, one bootstrap: every curve of both grids goes through the same two-sided
shared-curvature fit (`transfer.verdict.shared_curvature.statistics`), the (w0, L0) curve once,
so each bootstrap draw moves that curve's optimum in both trajectories at once — the two axes
are drawn together, not as two intervals added up. The interval is the draws' percentile
interval, widened by the calibration factor like the width one.

Plain numpy: no Optuna, no config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from transfer.verdict.curves import mean_curve
from transfer.verdict.shared_curvature import (
    fit_window,
    interaction_noise,
    interval,
    statistics,
)
from transfer.verdict.trajectory import MODEL_FORMS, MODELS, predict, quantiles

__all__ = ["Joint", "joint"]


@dataclass(frozen=True)
class Joint:
    """The optimum at (target width, target depth) and each axis's part of it."""

    target_width: int
    target_depth: int
    estimate: float  # log2 lr
    interval: list[float]
    confidence: float
    width: dict  # the width part W(w_t): model, form, estimate, interval, widths, optima
    depth: dict  # the depth part D(L_t) − D(L0): model, form, estimate, interval, depths, optima
    # the depth part under each model (the emitted one and the other), and how far apart
    depth_models: dict
    depth_disagreement: float
    draw_quantiles: list[float]  # of the estimate's draws (`trajectory.QUANTILES`)
    width_quantiles: list[float]
    depth_quantiles: list[float]
    scale: float

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def half_width(self) -> float:
        lo, hi = self.interval
        return max(self.estimate - lo, hi - self.estimate)


def _points(table: Mapping) -> list[tuple[float, list[float]]]:
    """A verdict's curve table ({log2_lr, losses}) back to (log2 lr, [loss per seed]) points."""
    return [(float(x), [float(y) for y in ls]) for x, ls in zip(table["log2_lr"], table["losses"])]


def _merge(a: list, b: list) -> list:
    """One curve from two copies of it (the width grid's and the depth grid's points of the
    (w0, L0) curve: the same trials, each grid perhaps extended differently); at an lr both hold,
    the one with more seeds."""
    out = {round(x, 6): (x, ls) for x, ls in b}
    for x, ls in a:
        k = round(x, 6)
        if k not in out or len(ls) >= len(out[k][1]):
            out[k] = (x, ls)
    return sorted(out.values())


def _row(points: list) -> dict:
    xs, ys = mean_curve(points)
    return {"log2_lr": xs.tolist(), "loss": ys.tolist(),
            "losses": [list(map(float, p[1])) for p in points]}


def joint(width_curves: Mapping[int, Mapping], depth_curves: Mapping[int, Mapping], *,
          target_width: int, target_depth: int, width_model: str, depth_model: str,
          confidence: float, n_boot: int, boot_seed: int, window: int, scale: float = 1.0,
          min_seeds: int = 2) -> Joint | None:
    """The joint estimate from the width verdict's curves (width → {log2_lr, losses}, at the
    stages' depth) and the depth verdict's (depth → the same, at the stages' width, its
    shallowest the width grid's narrowest). None when a curve has too few finite points to fit.
    """
    widths, depths = sorted(width_curves), sorted(depth_curves)
    if len(widths) < 2 or len(depths) < 2:
        raise ValueError(f"a joint estimate needs ≥ 2 widths and ≥ 2 depths, got {widths}, "
                         f"{depths}")
    for m in (width_model, depth_model):
        if m not in MODELS:
            raise ValueError(f"unknown trajectory model {m!r}; available: {', '.join(MODELS)}")
    w0, l0 = widths[0], depths[0]
    keys = [("width", w) for w in widths] + [("depth", d) for d in depths[1:]]
    raw = {("width", w): _points(width_curves[w]) for w in widths}
    raw[("width", w0)] = _merge(raw[("width", w0)], _points(depth_curves[l0]))
    raw.update({("depth", d): _points(depth_curves[d]) for d in depths[1:]})
    table = {k: _row(raw[k]) for k in keys}
    win = {k: fit_window(np.asarray(table[k]["log2_lr"]), np.asarray(table[k]["loss"]), window)
           for k in keys}
    if any(len(win[k]) < 3 for k in keys):
        return None
    n_seeds = min(len(ls) for k in keys for _, ls in raw[k])
    pure, dof = interaction_noise(table, keys)
    floor = pure / math.sqrt(n_seeds) if dof > 0 and n_seeds >= min_seeds else None
    st = statistics(table, win, keys, floor, dof, float(table[keys[0]]["log2_lr"][0]),
                    confidence=confidence, n_boot=n_boot, boot_seed=boot_seed)
    v = np.array([st["v"][k] for k in keys])
    draws = np.asarray(st["vertex_draws"]).reshape(len(keys), -1)
    nw = len(widths)
    dv_idx = [0] + list(range(nw, len(keys)))  # the depth trajectory's rows: (w0, L0) first

    def width_part(x):
        return predict(width_model, widths, x[:nw], target_width, "width")

    def depth_part(x, model=depth_model):
        rows = x[dv_idx]
        return (predict(model, depths, rows, target_depth, "depth")
                - predict(model, depths, rows, l0, "depth"))

    def scaled(est, ci):
        return [est - scale * (est - ci[0]), est + scale * (ci[1] - est)]

    w_est, d_est = float(width_part(v)), float(depth_part(v))
    w_draws, d_draws = width_part(draws), depth_part(draws)
    est = w_est + d_est
    both = w_draws + d_draws
    d_models = {}
    for m in MODELS:
        e = float(depth_part(v, m))
        d_models[m] = {"form": MODEL_FORMS["depth"][m], "estimate": e,
                       "interval": scaled(e, interval(depth_part(draws, m), confidence))}
    other = next(m for m in MODELS if m != depth_model)
    return Joint(
        target_width=int(target_width), target_depth=int(target_depth), estimate=est,
        interval=scaled(est, interval(both, confidence)), confidence=confidence,
        width={"model": width_model, "form": MODEL_FORMS["width"][width_model],
               "estimate": w_est, "interval": scaled(w_est, interval(w_draws, confidence)),
               "widths": [int(w) for w in widths], "optima_log2": [float(x) for x in v[:nw]],
               "at_depth": int(l0)},
        depth={"model": depth_model, "form": MODEL_FORMS["depth"][depth_model],
               "estimate": d_est, "interval": d_models[depth_model]["interval"],
               "depths": [int(d) for d in depths],
               "optima_log2": [float(x) for x in v[dv_idx]], "at_width": int(w0),
               "from_depth": int(l0)},
        depth_models=d_models,
        depth_disagreement=abs(d_est - d_models[other]["estimate"]),
        draw_quantiles=quantiles(both), width_quantiles=quantiles(w_draws),
        depth_quantiles=quantiles(d_draws), scale=float(scale))


def lines(j: Joint) -> list[str]:
    """The joint estimate in printed lines."""
    lo, hi = j.interval
    w, d = j.width, j.depth
    return [f"   lr at the target  log2 {j.estimate:.2f} [{lo:.2f}, {hi:.2f}] at width "
            f"{j.target_width} × {j.target_depth} layers ({j.confidence:.0%}, width and depth "
            f"drawn together): width part {w['estimate']:.2f} [{w['interval'][0]:.2f}, "
            f"{w['interval'][1]:.2f}] ({w['model']}, widths {w['widths']}), depth part "
            f"{d['estimate']:+.2f} [{d['interval'][0]:+.2f}, {d['interval'][1]:+.2f}] "
            f"({d['model']}, depths {d['depths']} → {j.target_depth})"]
