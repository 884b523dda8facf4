"""The optimum's trajectory across widths, and where it will be at the target.

The lr grid is measured at ≥ 3 widths. One shared-curvature parabola per width
(`transfer.verdict.shared_curvature.vertex_draws`) gives each width's optimum v_w and a
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

Plain numpy: no Optuna, no config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from transfer.verdict.shared_curvature import interval

__all__ = ["MODELS", "Trajectory", "model_for", "predict", "prior_offset", "trajectory", "weights"]

CONVERGING, LOG_LINEAR = "converging", "log_linear"
MODELS = (CONVERGING, LOG_LINEAR)
MODEL_FORMS = {CONVERGING: "x_inf + c·(w/w0)^-1/2", LOG_LINEAR: "a + b·log2(w/w0)"}


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


def _basis(model: str, widths: Sequence[float], w0: float) -> np.ndarray:
    w = np.asarray(widths, dtype=float) / w0
    if model == CONVERGING:
        return np.stack([np.ones_like(w), w ** -0.5], axis=1)
    if model == LOG_LINEAR:
        return np.stack([np.ones_like(w), np.log2(w)], axis=1)
    raise ValueError(f"unknown trajectory model {model!r}; available: {', '.join(MODELS)}")


def predict(model: str, widths: Sequence[float], vertices: np.ndarray, at: float) -> np.ndarray:
    """Least-squares fit of `model` to `vertices` (shape (n_widths,) or (n_widths, n_draws)),
    evaluated at width `at`; nan where any vertex is nan (a draw without a minimum)."""
    v = np.asarray(vertices, dtype=float)
    col = v.ndim == 1
    v = v.reshape(len(widths), -1)
    w0 = float(min(widths))
    coef = np.linalg.pinv(_basis(model, widths, w0)) @ np.nan_to_num(v)
    out = _basis(model, [at], w0) @ coef
    out = np.where(np.isnan(v).any(axis=0), np.nan, out[0])
    return out[0] if col else out


def weights(model: str, widths: Sequence[float], at: float) -> np.ndarray:
    """The estimate at width `at` as a weighted sum of the widths' optima: `predict` is linear
    in them, estimate = weights · vertices."""
    w0 = float(min(widths))
    return (_basis(model, [at], w0) @ np.linalg.pinv(_basis(model, widths, w0)))[0]


@dataclass(frozen=True)
class Trajectory:
    """Each width's optimum, and the models' estimate of the optimum at the target width."""

    widths: list[int]
    vertices: list[float]  # fitted log2-lr optimum per width
    vertex_ci: list[list[float]]
    target_width: int
    model: str  # the emitted one
    estimate: float  # log2 lr at the target, the emitted model's
    interval: list[float]  # its percentile interval at `confidence`
    models: dict  # model -> {form, estimate, interval}
    disagreement: float  # |emitted − other| at the target, in octaves
    from_widest: float  # estimate − the widest width's optimum: the move still to come
    confidence: float

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def half_width(self) -> float:
        lo, hi = self.interval
        return max(self.estimate - lo, hi - self.estimate)


def trajectory(widths: Sequence[int], vertices: Sequence[float], draws: np.ndarray, *,
               target_width: int, model: str, confidence: float, scale: float = 1.0
               ) -> Trajectory:
    """The trajectory from each width's fitted optimum (`vertices`) and its bootstrap draws
    (`draws`, shape (n_widths, n_boot)); needs ≥ 2 widths (3 to tell the models apart). Each
    model's interval at the target is widened about its estimate by `scale` (the calibration,
    `transfer.verdict.judge.Limits.interval_scale`)."""
    if len(widths) < 2:
        raise ValueError(f"a trajectory needs optima at ≥ 2 widths, got {list(widths)}")
    if model not in MODELS:
        raise ValueError(f"unknown trajectory model {model!r}; available: {', '.join(MODELS)}")
    v = np.asarray(vertices, dtype=float)
    d = np.asarray(draws, dtype=float).reshape(len(widths), -1)
    models = {}
    for m in MODELS:
        est = float(predict(m, widths, v, target_width))
        lo, hi = interval(predict(m, widths, d, target_width), confidence)
        models[m] = {"form": MODEL_FORMS[m], "estimate": est,
                     "interval": [est - scale * (est - lo), est + scale * (hi - est)]}
    other = next(m for m in MODELS if m != model)
    est = models[model]["estimate"]
    return Trajectory(
        widths=[int(w) for w in widths], vertices=[float(x) for x in v],
        vertex_ci=[interval(d[i], confidence) for i in range(len(widths))],
        target_width=int(target_width), model=model, estimate=est,
        interval=models[model]["interval"], models=models,
        disagreement=abs(est - models[other]["estimate"]),
        from_widest=est - float(v[int(np.argmax(widths))]), confidence=confidence)
