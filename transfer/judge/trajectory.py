"""The optimum's trajectory across widths, and where it will be at the target.

The lr grid is measured at ≥ 3 widths. One shared-curvature parabola per width
(`transfer.judge.shared_curvature.vertex_draws`) gives each width's optimum v_w and a
parametric-bootstrap draw of all of them at once. Two named models of v against width are
fitted to every draw and evaluated at the target width:

- `converging`: v = x∞ + c·(w/w0)^−½. μP's claim is that the optimum converges as width grows
  (Tensor Programs V, §5: finite-width fluctuations shrink like 1/√n); the leading correction is
  taken as w^−½. It extrapolates tamely: from 64-256 to 3072 the remaining move is 0.71× the
  move measured from 64 to 256.
- `log_linear`: v = α + β·log2(w/w0), a power law lr ∝ w^β. SP's optimum moves this way
  (β ≈ −1 for Adam's hidden lr); for μP it is the pessimistic alternative: 1.79× the measured
  move from 256 to 3072.

The emitted lr is the parametrization's own model at the target (`converging` for μP,
`log_linear` for SP), with the percentile interval of its bootstrap draws. The other model is
reported beside it: where the two disagree at the target by more than the tolerance, the
extrapolation depends on a choice the measurement cannot make, and the verdict says so.
See docs/verdict.md for the failure modes.

Across depth, where the target lies within the measured depths and `validation.depth_interpolate`
is on, the emitted depth part is `interpolated`, linear in log2 L between the two measured
depths around it, so it follows a turn the data shows and no model form is carried there
(`emitted_model`). The two models are reported beside it, and their disagreement is not judged.

Plain numpy: no Optuna, no config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from transfer.judge.shared_curvature import interval

__all__ = ["INTERPOLATED", "MODELS", "Trajectory", "beside", "coefficients", "emitted_model",
           "model_for", "predict", "prior_offset", "quantiles", "trajectory", "weights"]

CONVERGING, LOG_LINEAR = "converging", "log_linear"
MODELS = (CONVERGING, LOG_LINEAR)
# Not a model of the optimum against depth: its measured optima joined linearly in log2 L, read
# only inside the measured depths (`emitted_model`).
INTERPOLATED = "interpolated"
# Each axis's forms of the two models. Across depth the converging model's correction is 1/L:
# CompleteP's depth limit has corrections of order 1/L (Chizat 2025, arXiv 2509.10167); L0 is
# the stages' depth (docs/depth.md).
MODEL_FORMS = {
    "width": {CONVERGING: "x_inf + c·(w/w0)^-1/2", LOG_LINEAR: "a + b·log2(w/w0)"},
    "depth": {CONVERGING: "y_inf + d·(L0/L)", LOG_LINEAR: "a + b·log2(L/L0)",
              INTERPOLATED: "linear in log2 L between the measured depths around L"},
}
QUANTILES = np.linspace(0.0, 1.0, 201)  # what target.yaml keeps of a draw distribution


def model_for(parametrization: str) -> str:
    """The trajectory model a parametrization's theory predicts: μP converges, SP drifts as a
    power of width."""
    return CONVERGING if parametrization == "mup" else LOG_LINEAR


# The optimum's move per doubling of width that each parametrization's theory predicts (log2
# lr): none under μP (Tensor Programs V); −1 under SP with Adam: μP scales the hidden weights'
# Adam lr by 1/fan_in (README, Rules: `lr / width_mult`) and SP does not, so SP's one global lr
# has to follow it (the default run measures −1.78 over 64 → 256: benchmarks/RESULTS.md).
# It prices the grid's growth only (`prior_offset`); the emitted lr is always the measured
# trajectory's.
PRIOR_DRIFT_PER_DOUBLING = {"mup": 0.0, "sp": -1.0}


def prior_offset(parametrization: str, width: float, w0: float) -> float:
    """Where the theory expects the optimum at `width`, in log2 lr from its place at `w0`
    (`PRIOR_DRIFT_PER_DOUBLING`): what a grid centred on `w0`'s optimum is priced for before
    its curve at `width` is measured."""
    return PRIOR_DRIFT_PER_DOUBLING.get(parametrization, 0.0) * float(np.log2(width / w0))


def emitted_model(model: str, widths: Sequence[float], at: float, axis: str = "width",
                  interpolate: bool = False) -> str:
    """The model the estimate at `at` is read from: with `interpolate`, `INTERPOLATED` on the
    depth axis where `at` lies within the measured depths (≥ 2 of them), else `model` (the
    parametrization's own, `model_for`). A model that cannot turn misses a turn between the
    measured depths (the 3B's held-out targets at width 64: +0.08 at 16 layers, +0.65 at 32,
    benchmarks/RESULTS.md); read between them, the data's own shape is used, and each optimum's
    noise with it (`validation.depth_interpolate`)."""
    if (interpolate and axis == "depth" and len(widths) >= 2
            and min(widths) <= at <= max(widths)):
        return INTERPOLATED
    return model


def beside(model: str, emitted: str) -> str:
    """The model reported beside the `emitted` one, whose disagreement with it is measured:
    beside an interpolation, the parametrization's `model` it stands in for; beside a model,
    the other one."""
    return model if emitted == INTERPOLATED else next(m for m in MODELS if m != model)


def _interpolation(widths: Sequence[float], at: float) -> np.ndarray:
    """The weights of linear interpolation in log2 at `at` between the two measured points
    around it (`widths` need not be sorted)."""
    x = np.log2(np.asarray(widths, dtype=float))
    if not x.min() <= np.log2(at) <= x.max():
        raise ValueError(f"{at} lies outside the measured {sorted(widths)}: interpolation "
                         "does not extrapolate")
    return np.array([np.interp(np.log2(at), np.sort(x), np.eye(len(x))[i][np.argsort(x)])
                     for i in range(len(x))])


def _basis(model: str, widths: Sequence[float], w0: float, axis: str = "width") -> np.ndarray:
    w = np.asarray(widths, dtype=float) / w0
    if axis not in MODEL_FORMS:
        raise ValueError(f"unknown trajectory axis {axis!r}; available: {', '.join(MODEL_FORMS)}")
    if model == CONVERGING:
        return np.stack([np.ones_like(w), w ** (-0.5 if axis == "width" else -1.0)], axis=1)
    if model == LOG_LINEAR:
        return np.stack([np.ones_like(w), np.log2(w)], axis=1)
    raise ValueError(f"unknown trajectory model {model!r}; available: {', '.join(MODELS)}")


def predict(model: str, widths: Sequence[float], vertices: np.ndarray, at: float,
            axis: str = "width") -> np.ndarray:
    """Least-squares fit of `model` (its form on `axis`) to `vertices` (shape (n_widths,) or
    (n_widths, n_draws)), evaluated at `at`; nan where any vertex is nan (a draw without a
    minimum)."""
    v = np.asarray(vertices, dtype=float)
    col = v.ndim == 1
    v = v.reshape(len(widths), -1)
    out = weights(model, widths, at, axis) @ np.nan_to_num(v)
    out = np.where(np.isnan(v).any(axis=0), np.nan, out)
    return out[0] if col else out


def weights(model: str, widths: Sequence[float], at: float, axis: str = "width") -> np.ndarray:
    """The estimate at `at` as a weighted sum of the widths' optima: `predict` is linear
    in them, estimate = weights · vertices."""
    if model == INTERPOLATED:
        return _interpolation(widths, at)
    w0 = float(min(widths))
    return (_basis(model, [at], w0, axis) @ np.linalg.pinv(_basis(model, widths, w0, axis)))[0]


def coefficients(model: str, widths: Sequence[float], vertices: Sequence[float],
                 axis: str = "width") -> list[float]:
    """The fitted model's two coefficients (x_inf and c, or a and b, in `MODEL_FORMS` order)."""
    w0 = float(min(widths))
    v = np.nan_to_num(np.asarray(vertices, dtype=float))
    return [float(c) for c in np.linalg.pinv(_basis(model, widths, w0, axis)) @ v]


def quantiles(draws: np.ndarray) -> list[float]:
    """`QUANTILES` of a draw distribution, a draw without a minimum (nan) counting as −inf for
    half of them and +inf for the other half: what target.yaml keeps for a later joint draw
    (the launch interval)."""
    d = np.asarray(draws, dtype=float).ravel()
    bad = np.isnan(d)
    d = d.copy()
    d[np.flatnonzero(bad)[::2]] = -np.inf
    d[np.flatnonzero(bad)[1::2]] = np.inf
    return [float(x) for x in np.quantile(d, QUANTILES, method="nearest")]


class Estimate:
    """An estimate with its interval (`estimate`, `interval`): a trajectory's at the target, the
    joint width × depth one (`transfer.judge.joint.Joint`)."""

    estimate: float
    interval: list[float]

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def half_width(self) -> float:
        lo, hi = self.interval
        return max(self.estimate - lo, hi - self.estimate)


@dataclass(frozen=True)
class Trajectory(Estimate):
    """Each width's optimum, and the models' estimate of the optimum at the target width."""

    widths: list[int]
    vertices: list[float]  # fitted log2-lr optimum per width
    vertex_ci: list[list[float]]
    target_width: int
    model: str  # the emitted one (`emitted_model`: `INTERPOLATED` inside a depth grid)
    estimate: float  # log2 lr at the target, the emitted model's
    interval: list[float]  # its percentile interval at `confidence`
    models: dict  # model -> {form, estimate, interval}
    disagreement: float  # |emitted − other| at the target, in octaves (other: the
    # parametrization's model beside an interpolation)
    from_widest: float  # estimate − the widest width's optimum: the move still to come
    confidence: float
    axis: str = "width"  # what `widths` count: "width" (d_model) or "depth" (layers)


def trajectory(widths: Sequence[int], vertices: Sequence[float], draws: np.ndarray, *,
               target_width: int, model: str, confidence: float, scale: float = 1.0,
               axis: str = "width", interpolate: bool = False) -> Trajectory:
    """The trajectory from each width's fitted optimum (`vertices`) and its bootstrap draws
    (`draws`, shape (n_widths, n_boot)); needs ≥ 2 widths (3 to tell the models apart). Each
    model's interval at the target is widened about its estimate by `scale` (the calibration,
    `transfer.judge.verdict.Limits.interval_scale`). `axis` picks the models' forms
    (`MODEL_FORMS`): across width, or across depth with `widths` the depths."""
    if len(widths) < 2:
        raise ValueError(f"a trajectory needs optima at ≥ 2 widths, got {list(widths)}")
    if model not in MODELS:
        raise ValueError(f"unknown trajectory model {model!r}; available: {', '.join(MODELS)}")
    v = np.asarray(vertices, dtype=float)
    d = np.asarray(draws, dtype=float).reshape(len(widths), -1)
    emitted = emitted_model(model, widths, target_width, axis, interpolate)
    models = {}
    for m in MODELS + ((INTERPOLATED,) if emitted == INTERPOLATED else ()):
        est = float(predict(m, widths, v, target_width, axis))
        lo, hi = interval(predict(m, widths, d, target_width, axis), confidence)
        models[m] = {"form": MODEL_FORMS[axis][m], "estimate": est,
                     "interval": [est - scale * (est - lo), est + scale * (hi - est)]}
        if m in MODELS:
            models[m]["coefficients"] = coefficients(m, widths, v, axis)
    other = beside(model, emitted)
    est = models[emitted]["estimate"]
    return Trajectory(
        widths=[int(w) for w in widths], vertices=[float(x) for x in v],
        vertex_ci=[interval(d[i], confidence) for i in range(len(widths))],
        target_width=int(target_width), model=emitted, estimate=est,
        interval=models[emitted]["interval"], models=models,
        disagreement=abs(est - models[other]["estimate"]),
        from_widest=est - float(v[int(np.argmax(widths))]), confidence=confidence, axis=axis)
