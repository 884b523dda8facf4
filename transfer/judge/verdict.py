"""The transfer verdict: a pure function of learning-rate curves and limits.

`judge(curves, noise, tuned, limits)` takes, per width, the log2-lr grid and every seed's
held-out loss at each point, and answers one of three things:

- `passed`: the optimum stays put — the whole confidence interval of the drift is inside the
  tolerance, the loss gap's interval is under its limit, the curves are curved well beyond
  their noise, and the coordinate check holds;
- `rejected`: evidence against transfer — an interval wholly outside its limit, the wide model
  diverging where the narrow one trains, or activations that change with width;
- `inconclusive`: the measurement cannot tell — a flat or too-noisy curve, too few finite
  points or seeds, an optimum never bracketed by the grid, or an interval that straddles a limit.

No Optuna, no config: plain numbers in, a `Verdict` out, so every rule has a test built with
numbers (tests/test_verdict.py) and its power is measured on synthetic curves
(benchmarks/validator_power.py).

The statistics (a two-sided shared-curvature parabola, a parametric bootstrap for its intervals, why
not a bootstrap over seeds) live in `transfer.judge.shared_curvature`; the grid and its curves in
`transfer.judge.curves`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from transfer.judge.curves import Curves, bracket, mean_curve
from transfer.judge.shared_curvature import (
    BASIN_EXCESS,
    fit_noise,
    fit_window,
    seed_mean_floor,
    separate_statistics,
    statistics,
)
from transfer.judge.trajectory import CONVERGING, INTERPOLATED, MODELS, trajectory

# the fewest sizes (widths, depths) a coordinate check's rejection is read over (coord.py): a
# slope between two sizes is one step of the smallest ones, whose pre-asymptotic change it cannot
# tell from a μP violation (Mistral Nemo's config.json at budget=smoke, widths 32 and 64 with
# 4-head proxies: 0.78 [0.36, 1.46]; at the default budget's 32-256, 0.11-0.12; docs/verdict.md)
MIN_SIZES_TO_REJECT = 3
DISAGREE = "the trajectory models disagree"  # how the models' disagreement reason begins

PASSED, REJECTED, INCONCLUSIVE = "passed", "rejected", "inconclusive"
INTERVAL_SCALE = 1.0  # measured: see `Limits.interval_scale`


@dataclass(frozen=True)
class Limits:
    """What the verdict asks of the curves; every field has the reason for its default."""

    tolerance_log2: float = 0.5  # |drift| of the optimum allowed over the measured widths
    max_gap: float = 0.01  # relative loss the narrow optimum may cost on the wide model
    min_seeds: int = 2  # one seed cannot tell noise from signal
    min_points: int = 4  # finite points per width in the fit (3 fix a parabola; one to spare)
    fit_window: int = 7  # grid points around each width's minimum that the parabola sees
    # Weighted fit: the points past the basin on the high-lr side (more than this fraction of
    # the best loss above it) weighed by their own noise (`shared_curvature.noise_groups`;
    # docs/verdict.md "The basin's noise"); None: every point alike
    basin_excess: float | None = BASIN_EXCESS
    min_curvature_snr: float = 3.0  # curvature / its standard error: a flat curve never passes
    confidence: float = 0.90  # two-sided: 5 % of each tail outside the interval
    n_boot: int = 2000
    boot_seed: int = 0  # the bootstrap's own generator: the verdict is reproducible
    coord_max_slope: float = 0.35
    can_pass: bool = True  # False for budgets too small to mean anything (budget=smoke)
    target_width: int | None = None  # where the trajectory puts the optimum (None: not asked)
    trajectory_model: str = CONVERGING  # the emitted model (transfer.judge.trajectory)
    min_trajectory_widths: int = 3  # two widths fit either model exactly: nothing to tell them apart
    # Read a target inside the measured keys between the two around it (depth only,
    # `trajectory.emitted_model`); off: the model, which smooths the optima's noise (on the 3B's
    # held-out targets inside the grid it came closer: benchmarks/RESULTS.md)
    interpolate: bool = False
    decide_hint: str = "budget=thorough (more seeds, longer runs)"  # printed when inconclusive
    axis: str = "width"  # what the curves differ in: "width" or "depth" (the trajectory's
    # model forms, `transfer.judge.trajectory.MODEL_FORMS`), "tokens" (messages only)
    # Judge the drift and the loss gap from the first curve to the last against their limits.
    # Off for depth: the optimum may move with depth, as long as where it moves to is
    # predictable (the trajectory's rules judge that; docs/depth.md).
    judge_drift: bool = True
    # One curvature and asymmetry for every curve (the two-sided shared-curvature fit): μP's
    # claim across width. Off for depth, whose deeper curves are steeper above their optimum:
    # each curve then has its own (`shared_curvature.separate_statistics`).
    shared_shape: bool = True
    # The optimum's interval at the target, widened about its estimate by this factor: the
    # calibration measured on synthetic curves with known optima (benchmarks/validator_power.py
    # --coverage, docs/verdict.md "Coverage"), recorded in validation.json: fit.calibration.
    interval_scale: float = INTERVAL_SCALE


@dataclass
class Verdict:
    outcome: str  # passed | rejected | inconclusive
    widths: list[int]
    tuned_log2_lr: float
    n_seeds: int
    curves: dict  # width -> {log2_lr, loss (seed mean), std, losses (per seed)}
    best_log2_lr: dict  # width -> fitted vertex
    best_loss: dict  # width -> fitted minimum
    bracketed: dict  # width -> the grid's minimum has a higher point on both sides
    edge_hit: dict  # width -> not bracketed
    drift_log2: float
    drift_ci: list[float]
    tolerance_log2: float
    loss_at_transferred: float  # wide model's fitted loss at the narrow optimum
    loss_best_w1: float
    loss_gap: float  # (loss_at_transferred − loss_best_w1) / loss_best_w1
    loss_gap_ci: list[float]
    loss_gap_at_tuned: float  # the same at the stages' pick (the grid centre)
    max_gap: float
    wider_minus_narrow: float  # fitted best loss, wide − narrow
    wider_minus_narrow_ci: list[float]
    curvature: float
    curvature_se: float
    curvature_snr: float
    min_curvature_snr: float
    # each curve's own S/N where each has its own curvature (depth); empty where one is shared
    curvature_snr_by: dict
    optimum_log2_lr: float  # the emitted optimum: at the target width (the trajectory's
    # estimate) when one is asked for, else the mean of the widths' vertices
    optimum_ci: list[float]
    noise: dict
    extrapolation: dict
    coord_check: dict
    confidence: float
    trajectory: dict | None = None  # transfer.judge.trajectory.Trajectory.to_dict()
    rejected_because: list[str] = field(default_factory=list)
    inconclusive_because: list[str] = field(default_factory=list)
    decide_with: str | None = None
    fit: dict = field(default_factory=dict)  # the curve model, its asymmetry, the calibration
    more_data_decides: bool = False  # inconclusive only on what more seeds can decide
    # inconclusive on the trajectory models' disagreement at the target, and otherwise only on
    # what more seeds can decide: a curve nearer the target may (`rounds.farther_hint`)
    farther_decides: bool = False
    straddling: list[str] = field(default_factory=list)  # drift, gap, target, snr, flat (unbounded by a low S/N)
    best_log2_lr_ci: dict = field(default_factory=dict)  # width -> each vertex's interval

    @property
    def passed(self) -> bool:
        return self.outcome == PASSED

    @property
    def reasons(self) -> list[str]:
        return self.rejected_because + self.inconclusive_because

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("curves", "best_log2_lr", "best_loss", "bracketed", "edge_hit",
                  "best_log2_lr_ci", "curvature_snr_by"):
            d[k] = {str(w): v for w, v in d[k].items()}
        d["passed"] = self.passed
        d["reasons"] = self.reasons
        return d



def _fmt_ci(ci: Sequence[float], pct: bool = False) -> str:
    f = (lambda v: f"{v:.2%}") if pct else (lambda v: f"{v:+.2f}")
    return f"[{f(ci[0])}, {f(ci[1])}]"



def judge(curves: Curves, noise: float | None, tuned: float, limits: Limits,
          coord: Mapping | None = None) -> Verdict:
    """The verdict on a learning-rate grid at ≥ 2 widths (the narrowest is the reference;
    drift, gap and level compare it with the widest). With `limits.target_width`, the optimum's
    trajectory across the widths is extrapolated to the target (`transfer.judge.trajectory`):
    the emitted `optimum_log2_lr` and `optimum_ci` are its estimate and interval there.

    `noise` is an optional floor for the per-point σ of the seed-mean curve (None: estimated
    from the fit's residuals only); `tuned` is the log2 lr the stages picked; `coord` the
    coordinate check's result (`status`, `max_abs_slope` and its interval), None when it did
    not run.
    """
    widths = sorted(curves)
    if len(widths) < 2:
        raise ValueError(f"judge needs curves at two or more widths, got {widths}")
    if limits.trajectory_model not in MODELS:
        raise ValueError(f"unknown trajectory model {limits.trajectory_model!r}; available: "
                         f"{', '.join(MODELS)}")
    w0, w1 = widths[0], widths[-1]
    ax = limits.axis
    rej, unk = [], []
    n_seeds = min((len(p[1]) for w in widths for p in curves[w]), default=0)
    table, bracketed, win = {}, {}, {}
    seed_vars = []
    for w in widths:
        pts = sorted(curves[w], key=lambda p: p[0])
        xs, ys = mean_curve(pts)
        stds = [float(np.std(p[1], ddof=1)) if len(p[1]) > 1 and np.all(np.isfinite(p[1]))
                else math.nan for p in pts]
        seed_vars += [s * s for s in stds if math.isfinite(s)]
        table[w] = {"log2_lr": xs.tolist(), "loss": ys.tolist(), "std": stds,
                    "losses": [list(map(float, p[1])) for p in pts]}
        below, above = bracket(xs, ys)
        bracketed[w] = not (below or above) and np.isfinite(ys).any()
        win[w] = fit_window(xs, ys, limits.fit_window)
    if n_seeds < limits.min_seeds:
        unk.append(f"{n_seeds} seed(s) per point, fewer than {limits.min_seeds}: noise cannot be "
                   "told from signal")
    n_fin = {w: int(np.isfinite(table[w]["loss"]).sum()) for w in widths}
    diverged = []  # a rejection on divergence needs the seeds of the floor, not a fit
    if n_fin[w1] < 3 <= n_fin[w0]:
        diverged.append(f"{ax} {w1}: fewer than 3 grid points trained without diverging, while "
                        f"{ax} {w0} trained at {n_fin[w0]}: the larger model diverges where the "
                        "smaller one learns (SP-like)")
    for w in widths:
        if len(win[w]) < limits.min_points and not (w != w0 and diverged):
            unk.append(f"{ax} {w}: {len(win[w])} finite points to fit, fewer than "
                       f"{limits.min_points}")
    coord = dict(coord or {})
    _coord_rules(coord, ax, limits.coord_max_slope, rej, unk)
    octaves = math.log2(w1 / w0)
    table, pure, pure_dof = fit_noise(table, win, widths, limits.basin_excess)
    floor, _ = seed_mean_floor(table, widths, per_curve=not limits.shared_shape, noise=noise,
                               measured=(pure, pure_dof))
    fit = statistics if limits.shared_shape else separate_statistics
    stats = fit(table, win, widths, floor, pure_dof, tuned, confidence=limits.confidence,
                       n_boot=limits.n_boot, boot_seed=limits.boot_seed) if all(
        len(win[w]) >= 3 for w in widths) else None
    traj = None
    curve_rej: list[str] = []  # rejections read off the fitted curves: the evidence floor applies
    straddle: dict[str, str] = {}  # quantity (drift, gap, target) -> its straddling reason
    if stats is None:
        nan2 = [math.nan, math.nan]
        stats = dict(fit=None, drift=math.nan, drift_ci=nan2, gap=math.nan, gap_ci=nan2,
                     gap_tuned=math.nan, level=math.nan, level_ci=nan2, a=math.nan,
                     a_se=math.nan, snr=math.nan, opt=math.nan, opt_ci=nan2,
                     sigma=math.nan, dof=0, residual=math.nan, v=dict.fromkeys(widths, math.nan),
                     best=dict.fromkeys(widths, math.nan), at=math.nan)
        if limits.target_width:
            unk.append(f"no optimum at the target {ax} {limits.target_width}: the curves have "
                       "too few finite points to fit")
    else:
        _rules(stats, bracketed, table, widths, limits, curve_rej, unk, straddle)
        if limits.target_width:
            traj = trajectory(widths, [stats["v"][w] for w in widths], stats["vertex_draws"],
                              target_width=limits.target_width, model=limits.trajectory_model,
                              confidence=limits.confidence, scale=limits.interval_scale,
                              axis=limits.axis if limits.axis == "depth" else "width",
                              interpolate=limits.interpolate)
            _trajectory_rules(traj, limits, unk, straddle)
            stats["opt"], stats["opt_ci"] = traj.estimate, traj.interval
    calibration = {"interval_scale": limits.interval_scale,
                   "applies_to": "the optimum's interval at the target (trajectory.interval)",
                   "measured_by": "benchmarks/validator_power.py --coverage"}
    # Every rejection read off the lr curves needs the evidence a pass needs (the coordinate
    # check is its own measurement and keeps its rejection): below it, "cannot tell".
    missing = _below_floor(n_seeds, stats, limits)
    if curve_rej and missing:
        unk += [f"not rejected on this evidence ({'; '.join(missing)}), though {r}"
                for r in curve_rej]
        curve_rej = []
    if diverged and n_seeds < limits.min_seeds:
        unk += [f"not rejected on {n_seeds} seed(s), fewer than {limits.min_seeds}, though {r}"
                for r in diverged]
        diverged = []
    rej[:] = diverged + rej + curve_rej
    drift, drift_ci = stats["drift"], stats["drift_ci"]
    extrap = {"measured_octaves": octaves,
              "drift_per_octave": drift / octaves,
              "drift_per_octave_ci": [d / octaves for d in drift_ci]}
    if limits.target_width:
        t_oct = math.log2(limits.target_width / w0)
        extrap.update(target_width=limits.target_width, target_octaves=t_oct,
                      extrapolated_octaves=math.log2(limits.target_width / w1))
    outcome = REJECTED if rej else INCONCLUSIVE if unk else PASSED
    # Only intervals straddling their limits, or a curvature S/N under its limit, stand between
    # this run and a verdict: more seeds where they narrow those intervals most can decide it
    # (transfer.judge.rounds, planned by the width and depth grids).
    more_data_decides = outcome == INCONCLUSIVE and set(unk) <= set(straddle.values())
    disagree = {r for r in unk if r.startswith(DISAGREE)}
    farther_decides = bool(outcome == INCONCLUSIVE and disagree
                           and set(unk) <= set(straddle.values()) | disagree)
    if outcome == PASSED and not limits.can_pass:
        unk.append("this budget is a plumbing check (too few seeds, points and tokens): it never "
                   "validates a transfer")
        outcome = INCONCLUSIVE
    seed_std = math.sqrt(float(np.mean(seed_vars))) if seed_vars else math.nan
    return Verdict(
        outcome=outcome, widths=list(widths), tuned_log2_lr=float(tuned), n_seeds=n_seeds,
        curves=table, best_log2_lr=stats["v"], best_loss=stats["best"], bracketed=bracketed,
        edge_hit={w: not b for w, b in bracketed.items()}, drift_log2=drift, drift_ci=drift_ci,
        tolerance_log2=limits.tolerance_log2, loss_at_transferred=stats["at"],
        loss_best_w1=stats["best"][w1], loss_gap=stats["gap"], loss_gap_ci=stats["gap_ci"],
        loss_gap_at_tuned=stats["gap_tuned"], max_gap=limits.max_gap,
        wider_minus_narrow=stats["level"], wider_minus_narrow_ci=stats["level_ci"],
        curvature=stats["a"], curvature_se=stats["a_se"], curvature_snr=stats["snr"],
        min_curvature_snr=limits.min_curvature_snr,
        curvature_snr_by={w: float(x) for w, x in (stats.get("snr_by") or {}).items()},
        optimum_log2_lr=stats["opt"],
        optimum_ci=stats["opt_ci"],
        noise={"seed_std": seed_std, "interaction_std": pure, "interaction_dof": pure_dof,
               "point_sigma": stats["sigma"], "point_sigma_dof": stats["dof"],
               "residual_std": stats["residual"],
               "lack_of_fit": (stats["residual"] / stats["sigma"]) ** 2
               if stats["sigma"] and math.isfinite(stats["sigma"]) else math.nan,
               "floor": noise,
               "fit": "two-sided shared-curvature parabola, parametric bootstrap"},
        fit={"model": "two-sided parabola: curvature a below each optimum, r·a above, shared "
                      "by the widths (transfer.judge.shared_curvature)" if limits.shared_shape
                      else "two-sided parabola, each curve its own curvature a and asymmetry r "
                           "(transfer.judge.shared_curvature.separate_statistics)",
             "asymmetry": stats.get("asymmetry", math.nan),
             "asymmetry_by_curve": stats.get("asymmetry_by_curve"),
             "asymmetry_ci": stats.get("asymmetry_ci", [math.nan, math.nan]),
             "calibration": calibration},
        extrapolation=extrap, coord_check=coord, confidence=limits.confidence,
        trajectory=None if traj is None else traj.to_dict(), rejected_because=rej,
        inconclusive_because=unk, more_data_decides=more_data_decides,
        farther_decides=farther_decides, straddling=list(straddle),
        best_log2_lr_ci=stats.get("v_ci", dict.fromkeys(widths, [math.nan, math.nan])),
        decide_with=limits.decide_hint if outcome == INCONCLUSIVE else None)


def _coord_rules(coord: Mapping, ax: str, max_slope: float, rej: list[str],
                 unk: list[str]) -> None:
    """The coordinate check's answer: rejected only when its whole interval over seeds is above
    the limit; an interval straddling it (or one seed, no interval) cannot tell. A record
    without a status (written before the interval) reads its pass flag."""
    if not coord:
        return
    status = coord.get("status") or ("passed" if coord.get("passed") else "rejected")
    ci = _coord_ci(coord)
    said = (f"max |slope| {coord.get('max_abs_slope', math.nan):.2f} "
            f"[{ci[0]:.2f}, {ci[1]:.2f}] over {coord.get('seeds', 1)} seed(s) in log2-log2, "
            f"allowed {coord.get('max_slope', max_slope)}")
    if status == "rejected":
        rej.append(f"coordinate check failed: activation size changes with {ax} ({said})")
    elif status == "inconclusive":
        sizes = coord.get("widths") or coord.get("depths") or []
        if not all(map(math.isfinite, ci)):
            why, fix = "one seed gives no interval", "more seeds (validation.coord_seeds) narrow it"
        elif ci[0] > coord.get("max_slope", max_slope) and len(sizes) < MIN_SIZES_TO_REJECT:
            why = (f"its interval is above the limit over {len(sizes)} {ax}s "
                   f"({', '.join(map(str, sizes))}), fewer than {MIN_SIZES_TO_REJECT}: one step "
                   f"between the smallest sizes is not a trend in {ax}")
            fix = f"more {ax}s the family can build (validation.coord_{ax}s) decide it"
        else:
            why, fix = "its interval straddles the limit", \
                "more seeds (validation.coord_seeds) narrow it"
        unk.append(f"coordinate check cannot tell: {why} ({said}); {fix}")


def _below_floor(n_seeds: int, st: dict, limits: Limits) -> list[str]:
    """What a rejection read off the curves lacks of the evidence a pass needs: enough seeds,
    curvature clear of its noise, a finite interval of the drift. Empty when it has it all."""
    out = []
    if n_seeds < limits.min_seeds:
        out.append(f"{n_seeds} seed(s), fewer than {limits.min_seeds}")
    if not st["snr"] >= limits.min_curvature_snr:
        out.append(f"curvature S/N {st['snr']:.1f}, under {limits.min_curvature_snr:g}")
    if not all(math.isfinite(x) for x in st["drift_ci"]):
        out.append(f"the drift's {limits.confidence:.0%} interval is not finite")
    return out


def _rules(st: dict, bracketed: dict, table: dict, widths: list[int], limits: Limits,
           rej: list[str], unk: list[str], straddle: dict[str, str]) -> None:
    """Every statistical rule, each adding a rejection or an inconclusive reason (and to
    `straddle`, by quantity, the reasons that are an interval straddling its limit: more data
    decides)."""
    w0, w1 = widths[0], widths[-1]
    ax = limits.axis
    tol, conf = limits.tolerance_log2, f"{limits.confidence:.0%}"
    if not st["snr"] >= limits.min_curvature_snr:
        unk.append(f"the curves are too flat for their noise: curvature {st['a']:.4f} ± "
                   f"{st['a_se']:.4f} per octave² (signal-to-noise {st['snr']:.1f}, needs "
                   f"≥ {limits.min_curvature_snr:g}); the lr barely matters at this budget")
        if st["snr"] > 0 and math.isfinite(st["snr"]):  # a curvature more seeds can resolve
            straddle["snr"] = unk[-1]
    unbracketed = [w for w in widths if not bracketed[w]]
    for w in unbracketed:
        xs, ys = np.array(table[w]["log2_lr"]), np.array(table[w]["loss"])
        below, _ = bracket(xs, ys)
        side, edge = ("lowest", xs[0]) if below else ("highest", xs[-1])
        if w not in (w0, w1):  # a middle width bounds nothing the rules below judge
            unk.append(f"{ax} {w}: the optimum is at the {side} lr of the grid even after "
                       f"extending it ({xs[0]:.2f}..{xs[-1]:.2f} in log2 lr): not located")
            continue
        # The grid minimum at an edge puts a convex curve's vertex beyond the midpoint to its
        # neighbour (not beyond the edge itself): the honest bound.
        mid = (xs[0] + xs[1]) / 2 if below else (xs[-2] + xs[-1]) / 2
        other = w1 if w == w0 else w0
        # When the other width is located, the edge bounds the drift: the optimum lies beyond it.
        if limits.judge_drift and bracketed[other] and math.isfinite(st["v"][other]):
            sign = 1 if w == w1 else -1  # drift = v1 − v0
            bound = sign * (mid - st["v"][other])
            upper = below == (w == w1)  # the bound is an upper one on the drift
            if (upper and bound < -tol) or (not upper and bound > tol):
                rej.append(f"the optimum moved: at {ax} {w} the loss is lowest at the {side} lr of "
                           f"the grid ({edge:.2f} in log2 lr), so the drift from {ax} {w0} to {w1} "
                           f"is {'below' if upper else 'above'} {bound:+.2f}, tolerance ±{tol}")
                continue
        unk.append(f"{ax} {w}: the optimum is at the {side} lr of the grid even after "
                   f"extending it ({xs[0]:.2f}..{xs[-1]:.2f} in log2 lr): not located")
    if unbracketed:
        return
    if limits.judge_drift:
        _drift_rules(st, w0, w1, limits, rej, unk, straddle)
    llo = st["level_ci"][0]
    if llo > 0:
        big = "wider" if ax == "width" else "deeper"
        rej.append(f"{big} is worse: fitted best loss {st['best'][w1]:.4f} at {ax} {w1} vs "
                   f"{st['best'][w0]:.4f} at {ax} {w0} ({conf} interval of the difference "
                   f"{_fmt_ci(st['level_ci'])} wholly above 0)")


def _drift_rules(st: dict, w0: int, w1: int, limits: Limits, rej: list[str], unk: list[str],
                 straddle: dict[str, str]) -> None:
    """The drift from the first curve to the last inside ± tolerance, and the loss the first
    curve's optimum costs on the last, under its limit."""
    ax = limits.axis
    tol, conf = limits.tolerance_log2, f"{limits.confidence:.0%}"
    lo, hi = st["drift_ci"]
    if lo > tol or hi < -tol:
        rej.append(f"the optimum moved: drift {st['drift']:+.2f} log2(lr) from {ax} {w0} to "
                   f"{w1}, {conf} interval {_fmt_ci(st['drift_ci'])} wholly outside ±{tol}")
    elif not (-tol <= lo and hi <= tol) and st["snr"] >= limits.min_curvature_snr:
        straddle["drift"] = (f"drift {st['drift']:+.2f} log2(lr), {conf} interval "
                             f"{_fmt_ci(st['drift_ci'])} is not inside ±{tol}: too noisy to tell")
        unk.append(straddle["drift"])
    glo, ghi = st["gap_ci"]
    if glo > limits.max_gap:
        small = "narrow" if ax == "width" else "shallow"
        rej.append(f"the {small} optimum costs {st['gap']:.2%} at {ax} {w1} ({conf} interval "
                   f"{_fmt_ci(st['gap_ci'], True)}), over the {limits.max_gap:.0%} allowed")
    elif not ghi <= limits.max_gap and st["snr"] >= limits.min_curvature_snr:
        straddle["gap"] = (f"loss gap at {ax} {w1} {st['gap']:.2%}, {conf} interval "
                           f"{_fmt_ci(st['gap_ci'], True)} not under {limits.max_gap:.0%}")
        unk.append(straddle["gap"])


def _trajectory_rules(t, limits: Limits, unk: list[str], straddle: dict[str, str]) -> None:
    """What the optimum at the target must show to pass: an interval inside ± tolerance of its
    estimate, models that agree there, and enough widths to tell them apart."""
    tol, conf = limits.tolerance_log2, f"{limits.confidence:.0%}"
    at = f"{limits.axis} {t.target_width}"
    if len(t.widths) < limits.min_trajectory_widths:
        unk.append(f"the optimum was measured at {len(t.widths)} {limits.axis}s, fewer than "
                   f"{limits.min_trajectory_widths}: its trajectory to {at} cannot be checked")
    lo, hi = t.interval
    if not (math.isfinite(lo) and math.isfinite(hi)):
        unk.append(f"the optimum at {at} has no finite {conf} interval: some bootstrap fits "
                   "have no minimum (a flat curve)")
        if "snr" in straddle:  # the flat curve's: the seeds that lift its S/N bound it
            straddle["flat"] = unk[-1]
    elif not t.half_width <= tol:
        straddle["target"] = (f"the optimum at {at} is log2 lr {t.estimate:.2f}, {conf} "
                              f"interval {_fmt_ci(t.interval)} ({t.model}): wider than ±{tol} around it")
        unk.append(straddle["target"])
    # inside the grid: no model; NaN: a curve without an optimum left no trajectory to fit
    # (said above), so no disagreement was measured
    if t.model != INTERPOLATED and not math.isnan(t.disagreement) and t.disagreement > tol:
        other = next(m for m in t.models if m != t.model)
        unk.append(f"{DISAGREE} at {at} by {t.disagreement:.2f} octave "
                   f"({t.model} {t.estimate:.2f}, {other} {t.models[other]['estimate']:.2f}), "
                   f"more than ±{tol}: the extrapolation depends on the model")


def _coord_ci(coord: Mapping) -> list[float]:
    """The coordinate check's max |slope| interval as floats (NaN where absent, or null in JSON)."""
    return [math.nan if c is None else float(c)
            for c in (coord.get("max_abs_slope_ci") or [math.nan, math.nan])]


def coord_text(coord: Mapping) -> str:
    """The coordinate check's max |slope| with its interval where it has one, e.g.
    '0.12 [0.08, 0.19]'."""
    ci = _coord_ci(coord)
    at = f"{coord.get('max_abs_slope', math.nan):.2f}"
    return at + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if all(map(math.isfinite, ci)) else "")


def verdict_lines(verdict: Verdict) -> list[str]:
    """The verdict in a few printed lines: drift and gap with their intervals, curvature,
    coordinate slope, the optimum's trajectory to the target, then every reason."""
    w0, w1 = verdict.widths[0], verdict.widths[-1]
    (lo, hi), (glo, ghi) = verdict.drift_ci, verdict.loss_gap_ci
    ex = verdict.extrapolation
    lines = [f"   validation   {verdict.outcome.upper()}: drift {verdict.drift_log2:+.2f} "
             f"[{lo:+.2f}, {hi:+.2f}] log2(lr) ({w0}→{w1}, tol ±{verdict.tolerance_log2}), "
             f"gap {verdict.loss_gap:.2%} [{glo:.2%}, {ghi:.2%}] "
             f"({verdict.confidence:.0%} intervals), curvature S/N "
             f"{verdict.curvature_snr:.1f}, coord slope {coord_text(verdict.coord_check)}"]
    t = verdict.trajectory
    if t:
        optima = ", ".join(f"{w}: {x:.2f}" for w, x in zip(t["widths"], t["vertices"]))
        lo, hi = t["interval"]
        lines.append(f"     optimum (log2 lr) by width {optima}; at width {t['target_width']} "
                     f"({ex['extrapolated_octaves']:.1f} octaves past the widest) "
                     f"{t['estimate']:.2f} [{lo:.2f}, {hi:.2f}] ({t['model']}), "
                     f"models {t['disagreement']:.2f} octave apart")
    lines += [f"     - {r}" for r in verdict.reasons]
    if verdict.decide_with:
        lines.append(f"     to decide it: {verdict.decide_with}")
    return lines
