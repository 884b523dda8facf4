"""The shared-curvature fit of the lr curves and its bootstrap.

loss(x) ≈ a·u(x − v_w)² + c_w in x = log2 lr, u(d) = d below the vertex and √r·d above it: a
parabola with a curvature a below each width's optimum v_w and r·a above it. The curvature a
and the asymmetry r are shared by the widths (what "the optimum did not move" is about); the
optimum and the level are each width's own. Least squares over a window of points around each
width's minimum, on the seed-mean curves.

Why two-sided: real lr curves are steeper above the optimum than below it (the loss climbs
towards divergence), and a symmetric parabola puts its vertex on the shallow side: −0.09 octave
at a 1.5× asymmetry, at every noise level, which the intervals did not hold (docs/verdict.md,
"The fit"). The vertices enter the model non-linearly; for a given r they are found by
Gauss-Newton on the kinks (`_fit_ratio`: with the kinks held at k_w the model is linear,
a·u² + b_w·g + c_w with g = ∂(u²/2)/∂d, and k_w − b_w/2a is the Gauss-Newton step), r by least
squares over `RATIOS` (a profile likelihood; one more parameter in the residual degrees of
freedom). Every bootstrap draw finds its own vertices and its own r, so the uncertainty of
both is in the intervals. At r = 1 the model is the plain parabola.

The noise that moves a vertex is the point-to-point scatter of the mean curve, *not* the
seed-to-seed spread: every grid point is trained with the same seeds, so a seed's level offset
is shared by the whole curve and cancels in the vertex. The draws add Gaussian noise at σ, the
pooled estimate of that scatter from the seeds (when there are two or more) and of the fit's
own residual, so a curve the model does not fit widens its own interval (lack of fit is in the
draws); σ itself is redrawn from its χ² distribution (a t-like interval for few degrees of
freedom). Not a bootstrap over seeds: with the 2 seeds a CPU budget affords it has 3 distinct
resamples per point. Not the delta method: a vertex is a ratio, heavy-tailed exactly when the
curvature is weak; a draw whose curvature is not positive has no vertex and counts as outside
every limit.

Plain numpy: the verdict (`transfer.judge.verdict.judge`) turns these numbers into its rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["BASIN_EXCESS", "RATIOS", "JointFit", "fit_window", "interaction_noise", "interval",
           "joint_fit", "noise_groups", "separate_statistics", "statistics"]

# r, curvature above the optimum / below it: 2^-0.5 (0.71) to 2^1.75 (3.4) in quarter powers
# of two. A step moves a vertex by a few hundredths of an octave, far less than its noise.
RATIOS: tuple[float, ...] = tuple(2.0 ** (0.25 * i) for i in range(-2, 8))
# Where a curve's basin ends on the high-lr side: 6 % above its best loss (`noise_groups`).
BASIN_EXCESS = 0.06
ITERATIONS = 10  # Gauss-Newton steps on the kinks (converged to 1e-6 octave in 3-5)
REACH = 3.0  # octaves beyond the window a kink may move (a weak curve's vertex flies off)


def fit_window(xs: np.ndarray, ys: np.ndarray, size: int) -> np.ndarray:
    """Indices of the `size` finite points nearest the minimum, in grid order."""
    finite = np.flatnonzero(np.isfinite(ys))
    if finite.size <= size:
        return finite
    pos = int(np.searchsorted(finite, finite[np.argmin(ys[finite])]))
    start = max(0, min(pos - size // 2, finite.size - size))
    return finite[start:start + size]


def _u(d: np.ndarray, r: float) -> np.ndarray:
    return np.where(d > 0, math.sqrt(r) * d, d)


@dataclass(frozen=True)
class JointFit:
    """loss ≈ a·u(x − v_w)² + c_w (u: `_u`, asymmetry r): one curvature and one asymmetry, an
    optimum and a level per width."""

    a: float
    v: dict
    c: dict
    r: float = 1.0
    b: dict = field(default_factory=dict)  # the last Gauss-Newton step's slopes (≈ 0)

    def vertex(self, w: int) -> float:
        return self.v[w] if self.a > 0 else math.nan

    def value(self, w: int, x: float) -> float:
        u = float(_u(np.asarray(x - self.v[w]), self.r))
        return self.a * u * u + self.c[w]


class _Points:
    """The window's points as arrays: x, each point's width index, the one-hot per width."""

    def __init__(self, xw: Sequence[tuple[int, float]], widths: Sequence[int],
                 rel: Sequence[float] | None = None):
        self.n = len(widths)
        self.x = np.array([x for _, x in xw], dtype=float)
        self.wi = np.array([list(widths).index(w) for w, _ in xw])
        self.onehot = (self.wi[None, :] == np.arange(self.n)[:, None]).astype(float)  # (n, N)
        self.lo, self.hi = float(self.x.min()) - REACH, float(self.x.max()) + REACH
        # each point's σ relative to the fit's σ (`noise_groups`), its weight 1 / rel²
        self.rel = np.ones(self.x.size) if rel is None else np.asarray(rel, dtype=float)
        self.w = 1.0 / self.rel ** 2


def _columns(p: _Points, K: np.ndarray, r: float) -> tuple[np.ndarray, np.ndarray]:
    """u² and g = u·u′ (d below the kink, r·d above) at every point, kinks K (n, B): (N, B)."""
    d = p.x[:, None] - K[p.wi, :]
    return np.where(d > 0, r * d * d, d * d), np.where(d > 0, r * d, d)


def _normal(p: _Points, K: np.ndarray, r: float, Y: np.ndarray):
    """The normal equations of a·u² + b_w·g + c_w with the kinks at K (n, B), for every column
    of Y (N, B): (XᵀX (B, p, p), XᵀY (B, p))."""
    n, B = p.n, Y.shape[1]
    u2, g = _columns(p, K, r)
    M = p.onehot * p.w[None, :]  # weighted least squares: every sum over points weighs w
    s = {"uu": u2 * u2, "ug": u2 * g, "gg": g * g}
    A = np.zeros((B, 1 + 2 * n, 1 + 2 * n))
    A[:, 0, 0] = (M @ s["uu"]).sum(axis=0)
    ug, u2s, gg, gs = M @ s["ug"], M @ u2, M @ s["gg"], M @ g
    for j in range(n):
        bj, cj = 1 + j, 1 + n + j
        A[:, 0, bj] = A[:, bj, 0] = ug[j]
        A[:, 0, cj] = A[:, cj, 0] = u2s[j]
        A[:, bj, bj] = gg[j]
        A[:, bj, cj] = A[:, cj, bj] = gs[j]
        A[:, cj, cj] = M[j].sum()
    rhs = np.concatenate([(p.w[:, None] * u2 * Y).sum(axis=0)[None], M @ (g * Y), M @ Y],
                         axis=0).T
    return A, rhs


def _fit_ratio(p: _Points, Y: np.ndarray, K0: np.ndarray, r: float):
    """Gauss-Newton on the kinks at asymmetry r for every column of Y: (coef (B, p), kinks
    (n, B), rss (B,), XᵀX (B, p, p))."""
    K = K0.copy()
    yy = (p.w[:, None] * Y * Y).sum(axis=0)
    for _ in range(ITERATIONS):
        A, rhs = _normal(p, K, r, Y)
        coef = np.linalg.solve(A + 1e-12 * np.eye(A.shape[1]), rhs[..., None])[..., 0]
        a, b = coef[:, 0], coef[:, 1:1 + p.n].T
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.nan_to_num(-b / (2 * np.where(a > 0, a, np.nan)))
        Knew = np.clip(K + step, p.lo, p.hi)
        moved = float(np.max(np.abs(Knew - K))) if Knew.size else 0.0
        K = Knew
        if moved < 1e-6:
            break
    A, rhs = _normal(p, K, r, Y)
    coef = np.linalg.solve(A + 1e-12 * np.eye(A.shape[1]), rhs[..., None])[..., 0]
    rss = np.maximum(yy - np.einsum("bp,bp->b", coef, rhs), 0.0)
    return coef, K, rss, A


def _best_ratio(p: _Points, Y: np.ndarray, K0: np.ndarray, ratios: Sequence[float]):
    """Per column of Y, the asymmetry with the least squares: [(r, coef, K, rss, A)], pick."""
    fits = [(r, *_fit_ratio(p, Y, K0, r)) for r in ratios]
    pick = np.argmin(np.stack([f[3] for f in fits]), axis=0)
    return fits, pick


def _summarise(coef: np.ndarray, K: np.ndarray, r: float, n: int) -> dict:
    """Coefficients (B, p) and kinks (n, B) at asymmetry r → the quantities judged; nan where
    the curvature is not positive (no minimum)."""
    a, b, c = coef[:, 0], coef[:, 1:1 + n].T, coef[:, 1 + n:].T
    with np.errstate(divide="ignore", invalid="ignore"):
        a_ok = np.where(a > 0, a, np.nan)
        v = K - b / (2 * a_ok)  # the last Gauss-Newton step (≈ 0 once converged)
        best = c - b * b / (4 * a_ok)
        u = _u(v[0] - v[-1], r)
        at = a_ok * u * u + best[-1]  # the widest at the narrow optimum
        gap = np.where(best[-1] > 0, (at - best[-1]) / best[-1], np.nan)
    return {"drift": v[-1] - v[0], "gap": gap, "level": best[-1] - best[0],
            "opt": v.mean(axis=0), "v": v, "best": best, "at": at}


def _window_points(curves: Mapping[int, Mapping], win: Mapping[int, Sequence[int]],
                   widths: Sequence[int]) -> tuple[_Points, np.ndarray]:
    xw = [(w, curves[w]["log2_lr"][i]) for w in widths for i in win[w]]
    y = np.array([curves[w]["loss"][i] for w in widths for i in win[w]], dtype=float)
    rel = ([curves[w]["rel_sd"][i] for w in widths for i in win[w]]
           if all("rel_sd" in curves[w] for w in widths) else None)
    return _Points(xw, widths, rel), y


def _start(p: _Points, y: np.ndarray) -> np.ndarray:
    """The plain parabola's vertices (r = 1 is linear in the kinks: one step from anywhere)."""
    return _fit_ratio(p, y[:, None], np.full((p.n, 1), float(p.x.mean())), 1.0)[1]


def joint_fit(curves: Mapping[int, Mapping], widths: Sequence[int],
              ratios: Sequence[float] = RATIOS) -> JointFit | None:
    """Least squares over every finite point of `curves[w]["log2_lr"/"loss"]`; None unless
    there are enough points and the curvature is positive."""
    win = {w: [i for i, y in enumerate(curves[w]["loss"]) if math.isfinite(y)] for w in widths}
    if not widths or sum(map(len, win.values())) < 2 * len(widths) + 1 + (len(ratios) > 1):
        return None
    p, y = _window_points(curves, win, widths)
    fits, pick = _best_ratio(p, y[:, None], _start(p, y), ratios)
    r, coef, K, _, _ = fits[int(pick[0])]
    s = _summarise(coef, K, r, p.n)
    fit = JointFit(float(coef[0, 0]), {w: float(s["v"][i, 0]) for i, w in enumerate(widths)},
                   {w: float(s["best"][i, 0]) for i, w in enumerate(widths)}, float(r),
                   {w: float(coef[0, 1 + i]) for i, w in enumerate(widths)})
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
        e = _two_way([r for r in table[w]["losses"] if len(r) > 1 and np.all(np.isfinite(r))])
        if e is None:
            continue
        ss += float((e * e).sum())
        dof += (e.shape[0] - 1) * (e.shape[1] - 1)
    return (math.sqrt(ss / dof), dof) if dof else (math.nan, 0)


def _two_way(rows: Sequence[Sequence[float]]) -> np.ndarray | None:
    """The residuals of the two-way layout point × seed (each point's mean and each seed's
    level offset removed) over `rows`, one per point, each its seeds' finite losses; None
    unless 2 or more points have the same number of seeds."""
    if len(rows) < 2 or len({len(r) for r in rows}) != 1:
        return None
    m = np.asarray(rows, dtype=float)
    return m - m.mean(axis=1, keepdims=True) - m.mean(axis=0, keepdims=True) + m.mean()


def basin_groups(table: Mapping, win: Mapping[int, Sequence[int]], widths: Sequence[int],
                 max_excess: float) -> tuple[dict, dict, dict]:
    """The fit windows' points in `noise_groups`' two groups, past the basin (True) or not:
    (sum of squared two-way residuals, degrees of freedom), each keyed by the group, and each
    curve's indices past the basin."""
    ss = {True: 0.0, False: 0.0}
    dof = {True: 0.0, False: 0.0}
    past_of: dict = {}
    for w in widths:
        ys = np.asarray(table[w]["loss"], dtype=float)
        idx = [i for i in win[w] if np.isfinite(ys[i])]
        past_of[w] = set()
        if idx:
            ib = min(idx, key=lambda i: ys[i])
            past_of[w] = {i for i in idx if i > ib and ys[i] > ys[ib] + abs(ys[ib]) * max_excess}
        rows = [i for i in idx if len(table[w]["losses"][i]) > 1
                and np.all(np.isfinite(table[w]["losses"][i]))]
        e = _two_way([table[w]["losses"][i] for i in rows])
        if e is None:
            continue
        per_row = (e.shape[0] - 1) * (e.shape[1] - 1) / e.shape[0]  # dof each row carries
        for i, ei in zip(rows, e):
            past = i in past_of[w]
            ss[past] += float((ei * ei).sum())
            dof[past] += per_row
    return ss, dof, past_of


def noise_groups(table: Mapping, win: Mapping[int, Sequence[int]], widths: Sequence[int],
                 max_excess: float) -> tuple[dict, float, float]:
    """The two-way layout's noise (`interaction_noise`) over the fit window's points, in two
    groups: the points past the basin on the high-lr side (above the curve's best point and
    more than `max_excess` of its loss above it: the loss climbing towards divergence) and the
    rest. Returns (`table` with each curve's `rel_sd`: a point's σ over the rest's, 1 within
    the basin and max(1, σ_past / σ_rest) past it, the weights of the fit; σ_rest; its degrees
    of freedom). Past the basin a point's seeds scatter ~4× more (seed sd rms 0.10 against
    0.027, Llama 3.2 and Qwen2.5 at 1ad67d3: benchmarks/RESULTS.md, the basin's noise); pooled
    with the rest they widened every interval, dropped they took the curvature they carry. A
    point is never weighed more than the rest. Without seeds to measure (nan, 0), `table` as
    it is."""
    ss, dof, past_of = basin_groups(table, win, widths, max_excess)
    if dof[False] <= 0:
        return dict(table), math.nan, 0.0
    rest = math.sqrt(ss[False] / dof[False])
    rel = max(1.0, math.sqrt(ss[True] / dof[True]) / rest) if dof[True] > 0 and rest > 0 else 1.0
    out = {w: {**table[w], "rel_sd": [rel if i in past_of[w] else 1.0
                                      for i in range(len(table[w]["loss"]))]} for w in widths}
    return out, rest, dof[False]


def fit_noise(table: Mapping, win: Mapping[int, Sequence[int]], widths: Sequence[int],
              basin_excess: float | None) -> tuple[dict, float, float]:
    """(the table the fit reads, the interaction σ its intervals use, its degrees of freedom):
    with `basin_excess`, weighed by the basin's noise (`noise_groups`); else every point alike
    (`interaction_noise`). The verdict and the joint estimate both read their noise here."""
    if basin_excess is not None:
        return noise_groups(table, win, widths, basin_excess)
    return dict(table), *interaction_noise(table, widths)


def seed_mean_floor(table: dict, widths: Sequence[int], *, per_curve: bool,
                    noise: float | None = None,
                    measured: tuple[float, float] | None = None) -> tuple[float | dict | None, int]:
    """(the floor of the seed-mean curve's point σ, its degrees of freedom): the seeds'
    interaction noise (`interaction_noise`, or `measured`: (σ, dof) from `noise_groups`) over
    √(seeds at every point), at least `noise`.
    `per_curve` (curves fitted alone, `separate_statistics`): each curve's over its own seeds,
    a dict — a seed round adds seeds to some curves only (`transfer.judge.rounds`); else one
    value, over the fewest seeds of any point. None where the seeds measure no noise."""
    pure, dof = measured if measured is not None else interaction_noise(table, widths)
    seeds = {w: min((len(r) for r in table[w]["losses"]), default=0) for w in widths}
    fewest = min(seeds.values(), default=0)
    if dof <= 0 or fewest < 1:
        return (float(noise) if noise is not None else None), dof
    if per_curve:
        return {w: max(pure / math.sqrt(seeds[w]), float(noise or 0.0)) for w in widths}, dof
    return max(pure / math.sqrt(fewest), float(noise or 0.0)), dof


def statistics(table: dict, win: dict, widths: list[int], noise: float | None, noise_dof: int,
               tuned: float, *, confidence: float, n_boot: int, boot_seed: int,
               ratios: Sequence[float] = RATIOS,
               shared_z: Mapping[tuple, np.ndarray] | None = None) -> dict:
    """Point estimates and bootstrap intervals of drift, gap, level difference and optimum.

    `table[w]` holds the seed-mean curve (`log2_lr`, `loss`), `win[w]` the indices the fit
    sees (`fit_window`); `noise` and `noise_dof` the seed-mean curve's point σ measured from the
    seeds, when known; `tuned` the log2 lr whose gap is reported beside the optimum's; `ratios`
    the asymmetries tried (`(1.0,)`: the plain parabola); `shared_z` the standard normal draws
    of points another fit shares ((width, round(log2 lr, 6)) → (n_boot,)): those points get
    them instead of their own, so two fits of one curve move together (`transfer.judge.joint`);
    `z` in the result holds every window point's. With more than two widths (the
    trajectory) the curvature is shared by all of them, and drift, gap and level compare the
    narrowest with the widest; `vertex_draws` holds every width's bootstrap optima (n_widths ×
    n_boot) for `transfer.judge.trajectory`. The bootstrap draws `n_boot` refits from its own
    generator (`boot_seed`): the numbers are reproducible.
    """
    n = len(widths)
    w1 = widths[-1]
    p, y = _window_points(table, win, widths)
    fits, pick = _best_ratio(p, y[:, None], _start(p, y), ratios)
    r, coef, K, rss, A = fits[int(pick[0])]
    est = _summarise(coef, K, r, n)
    fitted = _values(coef[0], K, r, p)
    fit_dof = len(y) - (1 + 2 * n) - (len(ratios) > 1)  # r counts when it is chosen
    residual = math.sqrt(float(rss[0]) / fit_dof) if fit_dof > 0 else math.nan
    # σ of the draws: the seeds' point scatter pooled with the fit's residual, so that a curve
    # the model misses by more than its noise widens its own interval.
    if noise is not None and noise_dof > 0 and math.isfinite(noise):
        if fit_dof > 0 and math.isfinite(residual):
            dof = noise_dof + fit_dof
            sigma = math.sqrt((noise_dof * noise ** 2 + fit_dof * residual ** 2) / dof)
        else:
            sigma, dof = float(noise), noise_dof
    else:
        sigma, dof = residual, fit_dof
    cov = np.linalg.pinv(A[0])
    a_se = sigma * math.sqrt(max(float(cov[0, 0]), 0.0)) if math.isfinite(sigma) else math.inf
    a = float(coef[0, 0])
    snr = a / a_se if a_se > 0 else (math.inf if a > 0 else -math.inf)

    draws = {key: np.full((n, 1) if key in ("v", "best") else 1, np.nan) for key in est}
    r_draws = np.full(1, np.nan)
    point_keys = [(widths[i], round(float(x), 6)) for i, x in zip(p.wi, p.x)]
    Z = np.full((y.size, 1), np.nan)
    if math.isfinite(sigma) and dof > 0:
        rng = np.random.default_rng(boot_seed)
        s = sigma * np.sqrt(dof / rng.chisquare(dof, size=n_boot))
        Z = rng.normal(size=(y.size, n_boot))
        for i, key in enumerate(point_keys):
            if shared_z is not None and key in shared_z:
                Z[i] = shared_z[key]
        Y = fitted[:, None] + Z * s[None, :] * p.rel[:, None]
        dfits, dpick = _best_ratio(p, Y, np.repeat(K, n_boot, axis=1), ratios)
        summ = [_summarise(f[1], f[2], f[0], n) for f in dfits]
        draws = {key: np.choose(dpick, [sm[key] for sm in summ]) if summ[0][key].ndim == 1
                 else np.stack([np.choose(dpick, [sm[key][i] for sm in summ])
                                for i in range(n)])
                 for key in summ[0]}
        r_draws = np.asarray(ratios)[dpick]
    ci = {key: interval(draws[key], confidence) for key in ("drift", "gap", "level", "opt")}
    v = {w: float(est["v"][i, 0]) for i, w in enumerate(widths)}
    v_ci = {w: interval(draws["v"][i], confidence) for i, w in enumerate(widths)}
    best = {w: float(est["best"][i, 0]) for i, w in enumerate(widths)}
    fit = JointFit(a, v, best, float(r), {w: float(coef[0, 1 + i]) for i, w in enumerate(widths)})
    best1 = best[w1]
    gap_tuned = ((fit.value(w1, tuned) - best1) / best1
                 if math.isfinite(best1) and best1 > 0 and a > 0 else math.nan)
    return dict(fit=fit, drift=float(est["drift"][0]), drift_ci=ci["drift"],
                gap=float(est["gap"][0]), gap_ci=ci["gap"], gap_tuned=gap_tuned,
                level=float(est["level"][0]), level_ci=ci["level"], a=a, a_se=a_se,
                snr=float(snr), opt=float(est["opt"][0]), opt_ci=ci["opt"], sigma=sigma,
                dof=dof, residual=residual, v=v, v_ci=v_ci, best=best, at=float(est["at"][0]),
                vertex_draws=draws["v"], best_draws=draws["best"], asymmetry=float(r),
                asymmetry_ci=interval(r_draws, confidence),
                z={k: Z[i] for i, k in enumerate(point_keys)})


def separate_statistics(table: dict, win: dict, widths: list[int],
                        noise: float | Mapping[int, float] | None,
                        noise_dof: int, tuned: float, *, confidence: float, n_boot: int,
                        boot_seed: int, ratios: Sequence[float] = RATIOS,
                        shared_z: Mapping[tuple, np.ndarray] | None = None) -> dict:
    """`statistics` with a curvature and an asymmetry of each curve's own: every curve fitted
    alone (its own generator, `boot_seed` + its index; the noise floor shared), the results
    combined into the same keys. For curves whose shape is not claimed to be shared — across
    depth, the deeper proxies' curves are steeper above their optimum (r 3.4 at 8 layers, 0.7 at
    2 on the main run), and one shared r moved the 2-layer optimum 0.3 octave (docs/depth.md).
    Drift and level compare the first curve with the last draw by draw; the gap is the last
    curve's, at its own curvature and asymmetry, of the first curve's optimum; the curvature S/N
    the least of the curves' (each one's in `snr_by`). `noise` may be per curve: the seed
    mean's σ of a curve with more seeds than the others (a seed round's) is its own."""
    floors = noise if isinstance(noise, Mapping) else dict.fromkeys(widths, noise)
    per = {w: statistics({w: table[w]}, {w: win[w]}, [w], floors[w], noise_dof, tuned,
                         confidence=confidence, n_boot=n_boot, boot_seed=boot_seed + i,
                         ratios=ratios, shared_z=shared_z)
           for i, w in enumerate(widths)}
    w0, w1 = widths[0], widths[-1]
    v = {w: per[w]["v"][w] for w in widths}
    best = {w: per[w]["best"][w] for w in widths}
    vd = np.concatenate([np.asarray(per[w]["vertex_draws"]).reshape(1, -1) for w in widths])
    bd = np.concatenate([np.asarray(per[w]["best_draws"]).reshape(1, -1) for w in widths])
    last = per[w1]
    fit1 = last["fit"]
    with np.errstate(invalid="ignore"):
        u = _u(vd[0] - vd[-1], fit1.r) if fit1 is not None else np.full(vd.shape[1], np.nan)
        at_d = last["a"] * u * u + bd[-1]
        gap_d = np.where(bd[-1] > 0, (at_d - bd[-1]) / bd[-1], np.nan)
    at = fit1.value(w1, v[w0]) if fit1 is not None and math.isfinite(v[w0]) else math.nan
    gap = (at - best[w1]) / best[w1] if math.isfinite(at) and best[w1] > 0 else math.nan
    weakest = min(widths, key=lambda w: per[w]["snr"])
    sig = [per[w]["sigma"] for w in widths if math.isfinite(per[w]["sigma"])]
    res = [per[w]["residual"] for w in widths if math.isfinite(per[w]["residual"])]
    return dict(
        fit=fit1, drift=v[w1] - v[w0], drift_ci=interval(vd[-1] - vd[0], confidence),
        gap=gap, gap_ci=interval(gap_d, confidence), gap_tuned=last["gap_tuned"],
        level=best[w1] - best[w0], level_ci=interval(bd[-1] - bd[0], confidence),
        a=per[weakest]["a"], a_se=per[weakest]["a_se"], snr=per[weakest]["snr"],
        opt=float(np.mean(list(v.values()))), opt_ci=interval(vd.mean(axis=0), confidence),
        sigma=float(np.sqrt(np.mean(np.square(sig)))) if sig else math.nan,
        dof=sum(per[w]["dof"] for w in widths),
        residual=float(np.sqrt(np.mean(np.square(res)))) if res else math.nan,
        v=v, v_ci={w: per[w]["v_ci"][w] for w in widths}, best=best, at=at,
        vertex_draws=vd, best_draws=bd, asymmetry=last["asymmetry"],
        asymmetry_ci=last["asymmetry_ci"],
        asymmetry_by_curve={w: per[w]["asymmetry"] for w in widths},
        snr_by={w: float(per[w]["snr"]) for w in widths},
        z={k: z for w in widths for k, z in per[w]["z"].items()})


def _values(coef: np.ndarray, K: np.ndarray, r: float, p: _Points) -> np.ndarray:
    """The fitted losses at the window's points (one fit: coef (p,), kinks K (n, 1))."""
    n = p.n
    u2, g = (c[:, 0] for c in _columns(p, K, r))
    return coef[0] * u2 + coef[1:1 + n][p.wi] * g + coef[1 + n:][p.wi]
