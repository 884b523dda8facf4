"""The lr at the target's width *and* depth: the width trajectory joined to the depth one.

The width grid measures the optimum at widths w0 < … < w_n at the stages' depth L0; the depth
grid at depths L0 < … < L_m at the stages' width w0. Both hold the (w0, L0) curve: the depth
grid's L0 points are the width grid's, copied. The estimate is additive in the two axes:

    v(w_t, L_t) = W(w_t) + (D(L_t) − D(L0))

W the width trajectory's model (`transfer.judge.trajectory`, across width), D the depth
trajectory's (across depth), each fitted to the optima of its own axis. Additive means the
optimum's move with depth does not depend on width; the held-out "both" target (wider *and*
deeper than every proxy) tests it (docs/verdict.md).

Drawn together: each axis keeps its own fit — the width verdict's two-sided shared-curvature
fit of the width curves, the depth verdict's of the depth curves
(`transfer.judge.shared_curvature.statistics`, the same inputs, generators and draws), so the
two parts are the numbers the two verdicts judged — and the bootstrap noise of the (w0, L0)
curve's points is drawn once and used in both fits (`statistics(shared_z=…)`). A draw that
moves that curve's optimum moves it in both trajectories at once: the interval of the sum is
the draws' percentile interval, not two intervals added as if independent. It is widened by
the calibration factor like the width one.

Plain numpy: no Optuna, no config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from transfer.judge.curves import mean_curve
from transfer.judge.shared_curvature import (
    BASIN_EXCESS,
    fit_noise,
    fit_window,
    interval,
    seed_mean_floor,
    separate_statistics,
    statistics,
)
from transfer.judge.trajectory import (
    INTERPOLATED,
    MODEL_FORMS,
    MODELS,
    Estimate,
    beside,
    emitted_model,
    predict,
    quantiles,
)

__all__ = ["Joint", "joint"]


@dataclass(frozen=True)
class Joint(Estimate):
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


def _points(table: Mapping) -> list[tuple[float, list[float]]]:
    """A verdict's curve table ({log2_lr, losses}) back to (log2 lr, [loss per seed]) points."""
    return sorted((float(x), [float(y) for y in ls])
                  for x, ls in zip(table["log2_lr"], table["losses"]))


def _row(points: list) -> dict:
    xs, ys = mean_curve(points)
    return {"log2_lr": xs.tolist(), "loss": ys.tolist(),
            "losses": [list(map(float, p[1])) for p in points]}


def _fit(curves: Mapping[int, Mapping], *, window: int, n_boot: int, boot_seed: int,
         confidence: float, shared_z: Mapping | None = None, shared_shape: bool = True,
         basin_excess: float | None = BASIN_EXCESS) -> dict | None:
    """One axis's fit as its verdict makes it (`transfer.judge.verdict.judge`: seed-mean
    curves, the fit window, the seeds' interaction noise as the floor), with `shared_z`'s
    points drawn from the given normals. None when a curve has fewer than 3 points to fit."""
    keys = sorted(curves)
    raw = {k: _points(curves[k]) for k in keys}
    table = {k: _row(raw[k]) for k in keys}
    win = {k: fit_window(np.asarray(table[k]["log2_lr"]), np.asarray(table[k]["loss"]), window)
           for k in keys}
    if any(len(win[k]) < 3 for k in keys):
        return None
    table, *measured = fit_noise(table, win, keys, basin_excess)  # as the verdict reads it
    floor, dof = seed_mean_floor(table, keys, per_curve=not shared_shape, measured=measured)
    fit = statistics if shared_shape else separate_statistics
    return fit(table, win, keys, floor, dof, float(table[keys[0]]["log2_lr"][0]),
               confidence=confidence, n_boot=n_boot, boot_seed=boot_seed, shared_z=shared_z)


def joint(width_curves: Mapping[int, Mapping], depth_curves: Mapping[int, Mapping], *,
          target_width: int, target_depth: int, width_model: str, depth_model: str,
          confidence: float, n_boot: int, boot_seed: int, window: int, scale: float = 1.0,
          width_seed: int | None = None, depth_shared_shape: bool = False,
          depth_width: int | None = None,
          basin_excess: float | None = BASIN_EXCESS, depth_interpolate: bool = False
          ) -> Joint | None:
    """The joint estimate from the width verdict's curves (width → {log2_lr, losses}, at the
    stages' depth) and the depth verdict's (depth → the same, at the stages' width, its
    shallowest the same trials as the width grid's narrowest). `boot_seed` is the depth
    verdict's generator seed, `width_seed` the width verdict's (default the same);
    `depth_shared_shape` the depth verdict's fit (`Limits.shared_shape`: off, each depth's curve
    its own curvature and asymmetry). `depth_width`: the width the depth grid trained at (None:
    the width grid's narrowest); at another width the two grids share no curve and their noise
    is drawn independently. `depth_interpolate`: a target depth inside the depth grid is read
    between its depths (`trajectory.emitted_model`). None when a curve has too few finite points
    to fit."""
    widths, depths = sorted(width_curves), sorted(depth_curves)
    if len(widths) < 2 or len(depths) < 2:
        raise ValueError(f"a joint estimate needs ≥ 2 widths and ≥ 2 depths, got {widths}, "
                         f"{depths}")
    for m in (width_model, depth_model):
        if m not in MODELS:
            raise ValueError(f"unknown trajectory model {m!r}; available: {', '.join(MODELS)}")
    w0, l0 = widths[0], depths[0]
    at_width = w0 if depth_width is None else int(depth_width)
    ws = _fit(width_curves, window=window, n_boot=n_boot, confidence=confidence,
              boot_seed=boot_seed if width_seed is None else width_seed,
              basin_excess=basin_excess)
    if ws is None:
        return None
    shared = ({(l0, x): z for (w, x), z in ws["z"].items() if w == w0} if at_width == w0
              else {})
    ds = _fit(depth_curves, window=window, n_boot=n_boot, confidence=confidence,
              boot_seed=boot_seed, shared_z=shared, shared_shape=depth_shared_shape,
              basin_excess=basin_excess)
    if ds is None:
        return None
    vw = np.array([ws["v"][w] for w in widths])
    vd = np.array([ds["v"][d] for d in depths])
    dw = np.asarray(ws["vertex_draws"]).reshape(len(widths), -1)
    dd = np.asarray(ds["vertex_draws"]).reshape(len(depths), -1)

    fitted, depth_model = depth_model, emitted_model(depth_model, depths, target_depth, "depth",
                                                     depth_interpolate)

    def depth_part(x, model=depth_model):
        return (predict(model, depths, x, target_depth, "depth")
                - predict(model, depths, x, l0, "depth"))

    def scaled(est, ci):
        return [est - scale * (est - ci[0]), est + scale * (ci[1] - est)]

    w_est = float(predict(width_model, widths, vw, target_width, "width"))
    d_est = float(depth_part(vd))
    w_draws = predict(width_model, widths, dw, target_width, "width")
    d_draws = depth_part(dd)
    est = w_est + d_est
    d_models = {}
    for m in MODELS + ((INTERPOLATED,) if depth_model == INTERPOLATED else ()):
        e = float(depth_part(vd, m))
        d_models[m] = {"form": MODEL_FORMS["depth"][m], "estimate": e,
                       "interval": scaled(e, interval(depth_part(dd, m), confidence))}
    other = beside(fitted, depth_model)
    return Joint(
        target_width=int(target_width), target_depth=int(target_depth), estimate=est,
        interval=scaled(est, interval(w_draws + d_draws, confidence)), confidence=confidence,
        width={"model": width_model, "form": MODEL_FORMS["width"][width_model],
               "estimate": w_est, "interval": scaled(w_est, interval(w_draws, confidence)),
               "widths": [int(w) for w in widths], "optima_log2": [float(x) for x in vw],
               "at_depth": int(l0)},
        depth={"model": depth_model, "form": MODEL_FORMS["depth"][depth_model],
               "estimate": d_est, "interval": d_models[depth_model]["interval"],
               "depths": [int(d) for d in depths], "optima_log2": [float(x) for x in vd],
               "at_width": at_width, "from_depth": int(l0),
               "shared_points": sum(k in shared for k in ds["z"])},
        depth_models=d_models,
        depth_disagreement=abs(d_est - d_models[other]["estimate"]),
        draw_quantiles=quantiles(w_draws + d_draws), width_quantiles=quantiles(w_draws),
        depth_quantiles=quantiles(d_draws), scale=float(scale))


def lines(j: Joint) -> list[str]:
    """The joint estimate in printed lines; where a part has no estimate (a curve without an
    optimum left its trajectory unfitted), that, not a NaN."""
    lo, hi = j.interval
    w, d = j.width, j.depth
    missing = [name for name, part in (("width", w), ("depth", d))
               if not math.isfinite(part["estimate"])]
    if missing:
        return [f"   lr at the target  no estimate at width {j.target_width} × {j.target_depth} "
                f"layers: its {' and '.join(missing)} part has none (a curve without an "
                "optimum: the verdicts above say which)"]
    return [f"   lr at the target  log2 {j.estimate:.2f} [{lo:.2f}, {hi:.2f}] at width "
            f"{j.target_width} × {j.target_depth} layers ({j.confidence:.0%}, width and depth "
            f"drawn together): width part {w['estimate']:.2f} [{w['interval'][0]:.2f}, "
            f"{w['interval'][1]:.2f}] ({w['model']}, widths {w['widths']}), depth part "
            f"{d['estimate']:+.2f} [{d['interval'][0]:+.2f}, {d['interval'][1]:+.2f}] "
            f"({d['model']}, depths {d['depths']} → {j.target_depth})"]
