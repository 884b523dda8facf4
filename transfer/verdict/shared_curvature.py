"""The shared-curvature fit of two lr curves and its parametric bootstrap.

loss(x) ≈ a·x² + b_w·x + c_w in x = log2 lr, one curvature shared by the widths (what "the
optimum did not move" is about), fitted by least squares to the seed-mean curves over a window of
points around each width's minimum. The noise that moves a vertex is the point-to-point scatter
of the mean curve about that parabola, *not* the seed-to-seed spread: every grid point is trained
with the same seeds, so a seed's level offset is shared by the whole curve and cancels in the
vertex. The residual standard deviation of the fit estimates that scatter (and any lack of fit,
which is honest to include). Intervals come from a parametric bootstrap: refit on fitted values
plus Gaussian noise at that σ, with σ itself redrawn from its χ² distribution (a t-like interval
for few residual degrees of freedom). A nonparametric bootstrap over seeds was the alternative;
with the 2 seeds a CPU budget affords, it has 3 distinct resamples per point and cannot give a
percentile interval. The bootstrap, not the delta method, because the vertex −b/2a is a ratio
whose distribution is heavy-tailed exactly when the curvature is weak; a draw whose curvature is
not positive has no vertex and counts as outside every limit.

Plain numpy: the verdict (`transfer.verdict.judge.judge`) turns these numbers into its rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["JointFit", "fit_window", "interaction_noise", "interval", "joint_fit", "statistics"]


def fit_window(xs: np.ndarray, ys: np.ndarray, size: int) -> np.ndarray:
    """Indices of the `size` finite points nearest the minimum, in grid order."""
    finite = np.flatnonzero(np.isfinite(ys))
    if finite.size <= size:
        return finite
    pos = int(np.searchsorted(finite, finite[np.argmin(ys[finite])]))
    start = max(0, min(pos - size // 2, finite.size - size))
    return finite[start:start + size]


@dataclass(frozen=True)
class JointFit:
    """loss ≈ a·x² + b_w·x + c_w: one curvature, a position and a level per width."""

    a: float
    b: dict
    c: dict

    def vertex(self, w: int) -> float:
        return -self.b[w] / (2 * self.a) if self.a > 0 else math.nan

    def value(self, w: int, x: float) -> float:
        return self.a * x * x + self.b[w] * x + self.c[w]


def _design(xw: Sequence[tuple[int, float]], widths: Sequence[int]) -> np.ndarray:
    n = len(widths)
    rows = []
    for w, x in xw:
        onehot = [1.0 if v == w else 0.0 for v in widths]
        rows.append([x * x] + [x * o for o in onehot] + onehot)
    return np.asarray(rows).reshape(len(xw), 1 + 2 * n)


def _solve(X: np.ndarray, y: np.ndarray, widths: Sequence[int]) -> JointFit:
    coef = np.linalg.lstsq(X, y, rcond=None)[0]
    n = len(widths)
    return JointFit(float(coef[0]), {w: float(coef[1 + i]) for i, w in enumerate(widths)},
                    {w: float(coef[1 + n + i]) for i, w in enumerate(widths)})


def joint_fit(curves: Mapping[int, Mapping], widths: Sequence[int]) -> JointFit | None:
    """Least squares over every finite point of `curves[w]["log2_lr"/"loss"]`; None unless
    there are enough points and the parabola is convex."""
    xw, ys = [], []
    for w in widths:
        for x, y in zip(curves[w]["log2_lr"], curves[w]["loss"]):
            if math.isfinite(y):
                xw.append((w, x))
                ys.append(y)
    if not widths or len(ys) < 2 * len(widths) + 1:
        return None
    fit = _solve(_design(xw, widths), np.asarray(ys), widths)
    return fit if fit.a > 0 else None


def interval(draws: np.ndarray, confidence: float) -> list[float]:
    """Percentile interval; invalid draws (nan) count against both ends."""
    q = (1 - confidence) / 2
    lo = np.where(np.isnan(draws), -np.inf, draws)
    hi = np.where(np.isnan(draws), np.inf, draws)
    return [float(np.quantile(lo, q, method="lower")),
            float(np.quantile(hi, 1 - q, method="higher"))]


def interaction_noise(table: dict, widths: Sequence[int]) -> tuple[float, int]:
    """(σ, degrees of freedom) of one seed's loss at one point once each seed's level offset is
    removed: the residual of the two-way layout point × seed, pooled over widths, over the
    points every seed trained. This is what repeating the grid would change; nan, 0 with one
    seed."""
    ss, dof = 0.0, 0
    for w in widths:
        rows = [r for r in table[w]["losses"] if len(r) > 1 and np.all(np.isfinite(r))]
        if len(rows) < 2 or len({len(r) for r in rows}) != 1:
            continue
        m = np.asarray(rows)
        e = m - m.mean(axis=1, keepdims=True) - m.mean(axis=0, keepdims=True) + m.mean()
        ss += float((e * e).sum())
        dof += (m.shape[0] - 1) * (m.shape[1] - 1)
    return (math.sqrt(ss / dof), dof) if dof else (math.nan, 0)


def statistics(table: dict, win: dict, widths: list[int], noise: float | None, noise_dof: int,
               tuned: float, *, confidence: float, n_boot: int, boot_seed: int) -> dict:
    """Point estimates and bootstrap intervals of drift, gap, level difference and optimum.

    `table[w]` holds the seed-mean curve (`log2_lr`, `loss`), `win[w]` the indices the parabola
    sees (`fit_window`); `noise` and `noise_dof` the per-point σ when known (else the fit's
    residual); `tuned` the log2 lr whose gap is reported beside the optimum's. With more than
    two widths (the trajectory) the curvature is shared by all of them, and drift, gap and level
    compare the narrowest with the widest; `vertex_draws` holds every width's bootstrap optima
    (n_widths × n_boot) for `transfer.verdict.trajectory`. The bootstrap draws `n_boot` refits
    from its own generator (`boot_seed`): the numbers are reproducible.
    """
    n = len(widths)
    w1 = widths[-1]
    xw = [(w, table[w]["log2_lr"][i]) for w in widths for i in win[w]]
    y = np.array([table[w]["loss"][i] for w in widths for i in win[w]])
    X = _design(xw, widths)
    pinv = np.linalg.pinv(X)  # least squares is linear in y: one pseudo-inverse for every draw
    coef = pinv @ y
    fitted = X @ coef
    fit_dof = len(y) - X.shape[1]
    rss = float((y - fitted) @ (y - fitted))
    residual = math.sqrt(rss / fit_dof) if fit_dof > 0 else math.nan
    # The seed-interaction noise when there is one (see the module docstring: the parabola's
    # lack of fit is shared by both widths when the optimum does not move, so it is reported,
    # not counted as noise); the fit's residual otherwise.
    if noise is not None and noise_dof > 0:
        sigma, dof = float(noise), noise_dof
    else:
        sigma, dof = residual, fit_dof
    a_se = (sigma * math.sqrt(max(float(np.linalg.pinv(X.T @ X)[0, 0]), 0.0))
            if math.isfinite(sigma) else math.inf)
    snr = coef[0] / a_se if a_se > 0 else (math.inf if coef[0] > 0 else -math.inf)

    def summarise(c: np.ndarray) -> dict:
        """Columns of coefficients (a, b per width, c per width) → the quantities judged; nan
        where the parabola is not convex (it has no minimum)."""
        a, b, lv = c[0], c[1:1 + n], c[1 + n:]
        with np.errstate(divide="ignore", invalid="ignore"):
            a_ok = np.where(a > 0, a, np.nan)
            v = -b / (2 * a_ok)
            best = lv - b * b / (4 * a_ok)
            at = a_ok * v[0] * v[0] + b[-1] * v[0] + lv[-1]  # the widest at the narrow optimum
            gap = np.where(best[-1] > 0, (at - best[-1]) / best[-1], np.nan)
        return {"drift": v[-1] - v[0], "gap": gap, "level": best[-1] - best[0],
                "opt": v.mean(axis=0), "v": v, "best": best, "at": at}

    est = summarise(coef.reshape(-1, 1))
    draws = {k: np.full((n, 1) if k in ("v", "best") else 1, np.nan) for k in est}
    if math.isfinite(sigma) and dof > 0:
        rng = np.random.default_rng(boot_seed)
        s = sigma * np.sqrt(dof / rng.chisquare(dof, size=n_boot))
        Y = fitted[:, None] + rng.normal(size=(y.size, n_boot)) * s[None, :]
        draws = summarise(pinv @ Y)
    ci = {k: interval(draws[k], confidence) for k in ("drift", "gap", "level", "opt")}
    fit = JointFit(float(coef[0]), {w: float(coef[1 + i]) for i, w in enumerate(widths)},
                   {w: float(coef[1 + n + i]) for i, w in enumerate(widths)})
    v = {w: float(est["v"][i, 0]) for i, w in enumerate(widths)}
    best = {w: float(est["best"][i, 0]) for i, w in enumerate(widths)}
    best1 = best[w1]
    gap_tuned = ((fit.value(w1, tuned) - best1) / best1
                 if math.isfinite(best1) and best1 > 0 else math.nan)
    return dict(fit=fit, drift=float(est["drift"][0]), drift_ci=ci["drift"],
                gap=float(est["gap"][0]), gap_ci=ci["gap"], gap_tuned=gap_tuned,
                level=float(est["level"][0]), level_ci=ci["level"], a=float(coef[0]),
                a_se=a_se, snr=float(snr), opt=float(est["opt"][0]), opt_ci=ci["opt"],
                sigma=sigma, dof=dof, residual=residual, v=v, best=best,
                at=float(est["at"][0]), vertex_draws=draws["v"])
