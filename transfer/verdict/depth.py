"""The depth check: where does the tuned lr optimum go as the proxies deepen, and can its place
at the target's depth be predicted?

The learning-rate grid at one width (`transfer.verdict.axis_grid`: the width check's centre,
spacing, seeds and edge extension), trained at the stages' depth L0 and at L0 doubled up to
L1 = `validation.depth` (4 × L0 unless set: L0, 2·L0, 4·L0). The width is
`validation.depth_width` (narrower than the stages' is cheaper per layer, so the grid reaches
deeper in the same seconds; `grid_width`), or the stages' width, where the L0 curve is the
width check's narrow one, copied. Judged by the same pure verdict (`transfer.judge.verdict.judge`,
`Limits(axis="depth", judge_drift=False)`) with the depth coordinate check
(`transfer.verdict.coord.depth_coord_check`) as its coordinate rule. The optimum may move with
depth; what is judged is its trajectory to the target's depth (`transfer.judge.trajectory`,
the depth forms: converging y∞ + d·(L0/L), log-linear in log2 L): an interval inside the
tolerance there and two models that agree. Its own Optuna study, `<run>:validation-depth`. Off
unless `validation.depth_enabled`.
"""

from __future__ import annotations

import dataclasses
import math

import optuna

from transfer.core.hparams import MODEL_HPARAMS
from transfer.judge.joint import Joint, joint
from transfer.judge.trajectory import (
    INTERPOLATED,
    MODEL_FORMS,
    MODELS,
    coefficients,
    model_for,
)
from transfer.judge.verdict import Limits, Verdict, coord_text, judge
from transfer.search import Context
from transfer.verdict.axis_grid import Axis, run_axis_grid
from transfer.verdict.coord import CoordResult, depth_coord_check
from transfer.verdict.plan import GridPlan, grid_plan
from transfer.verdict.width import (
    curves_from,
    limits_from,
    looks_taken,
    open_grid_study,
    with_hint,
)

STAGE = "validation_depth"


def enabled(cfg) -> bool:
    return bool(cfg.validation.depth_enabled)


def depths(ctx: Context) -> tuple[int, ...]:
    """The depths the grid trains: the stages' L0, times `validation.depth_ratio` (2 unless
    set) while under the deepest proxy's L1 (`validation.depth`, 4 × L0 unless set), then L1:
    (2, 4, 8, 16) for the cpu proxies at budget=default (`validation.depth: 16`)."""
    l0 = int(ctx.proxies.family.n_layers)
    l1 = int(ctx.cfg.validation.depth or 4 * l0)
    r = int(ctx.cfg.validation.depth_ratio)
    out, d = [l0], r * l0
    while d < l1:
        out.append(d)
        d *= r
    return tuple(out + [l1]) if l1 > l0 else (l0,)


def grid_width(ctx: Context) -> int:
    """The width the depth grid trains at: `validation.depth_width` when set and the family can
    build it, else the stages' width (where its L0 curve is the width grid's, copied)."""
    w = ctx.cfg.validation.depth_width
    if w is None:
        return int(ctx.proxies.width)
    try:
        ctx.proxies.family.check_width(int(w), field="validation.depth_width")
    except ValueError:
        return int(ctx.proxies.width)
    return int(w)


def grid_seeds(ctx: Context) -> int:
    """Seeds at every point of the depth grid: `validation.depth_seeds`, else the width grid's."""
    v = ctx.cfg.validation
    return int(v.depth_seeds or v.seeds)


def depth_plan(ctx: Context) -> GridPlan:
    """The depth grid's plan (`transfer.verdict.plan`): its depths, shallowest first, at
    `grid_seeds`; with `validation.focus`, the deeper half at `validation.depth_later_seeds`,
    the shallowest at `validation.depth_first_seeds`, and each deeper curve spread with the
    basin before it by `validation.depth_spread_basins`."""
    v = ctx.cfg.validation
    return grid_plan(v, depths(ctx), grid_seeds(ctx), v.depth_later_seeds,
                     first_seeds=v.depth_first_seeds, axis="depth")


def at_depth(ctx: Context, n_layers: int) -> Context:
    """The context whose family is built `n_layers` deep (base depth, and so m_L, as set)."""
    plan = dataclasses.replace(ctx.proxies, family=ctx.proxies.family.replace(n_layers=n_layers))
    return dataclasses.replace(ctx, proxies=plan, probes={})


DEPTH_STUDY = "validation-depth"


def axis(ctx: Context) -> Axis:
    """The depth grid: L0 (the stages' depth; copied from the width grid at the stages' width)
    and the deeper ones, at `grid_width`."""
    ds, w = depths(ctx), grid_width(ctx)
    target = target_depth(ctx)
    return Axis(stage=STAGE, study=DEPTH_STUDY, param="n_layers", values=ds,
                copied=ds[0] if w == ctx.proxies.width else None,
                contexts={d: at_depth(ctx, d) for d in ds}, width=w, seeds=grid_seeds(ctx),
                in_hparams=True, limits=lambda looks: depth_limits(ctx, target, looks),
                rounds=int(ctx.cfg.validation.max_rounds), plan=depth_plan(ctx))


def target_depth(ctx: Context) -> int | None:
    """The target's depth (`model.n_layers`) where the run has a target; None for a custom
    model's check (no target width either)."""
    if ctx.proxies.target_width is None:
        return None
    n = getattr(getattr(ctx.cfg, "model", None), "n_layers", None)
    return int(n) if n else None


def open_depth_study(ctx: Context) -> optuna.Study:
    return open_grid_study(ctx, DEPTH_STUDY)


def curves(study: optuna.Study, ds: tuple[int, ...]) -> dict:
    """The grid as plain curves: depth -> [(log2 lr, [loss per seed; nan if diverged])]."""
    return curves_from(study, ds, axis="n_layers")


def run_depth_grid(ctx: Context, hp: dict, width_study: optuna.Study) -> optuna.Study:
    """Train this worker's share of the depth grid (`transfer.verdict.axis_grid`), extending it until
    every depth's optimum is bracketed or `validation.max_extend` is reached, then adding seeds
    where only they decide the verdict (`axis_grid.add_seed_round`)."""
    return run_axis_grid(ctx, hp, width_study, axis(ctx))


def coord_depths(ctx: Context) -> list[int]:
    """The depths the depth coordinate check trains: `validation.coord_depths`, or L0 × 1, 2, 4
    and the deep proxy's (`transfer.run.predict` prices the same list)."""
    ds = depths(ctx)
    l0 = ds[0]
    return sorted(set(ctx.cfg.validation.coord_depths or [l0, 2 * l0, 4 * l0, *ds]))


def run_depth_coord(ctx: Context, hp: dict) -> CoordResult:
    """The coordinate check across depth at the depth grid's width, with the tuned
    multipliers."""
    v = ctx.cfg.validation
    family = ctx.proxies.family.replace(**{k: float(hp[k]) for k in MODEL_HPARAMS})
    return depth_coord_check(family, depths=coord_depths(ctx), width=grid_width(ctx),
                             corpus=ctx.corpus,
                             steps=v.coord_steps, lr=float(hp["lr"]), seed=ctx.cfg.proxy.seed,
                             seeds=v.coord_seeds, max_slope=v.coord_max_slope,
                             confidence=v.confidence)


def validate_depth(ctx: Context, hp: dict, width_study: optuna.Study, *,
                   target_depth: int | None = None) -> tuple[Verdict, CoordResult | None]:
    """The depth grid (resumed: already trained when every worker ran it), the depth
    coordinate check (once: kept in the study; returned only when it ran now, for its figure)
    and the verdict."""
    study = run_depth_grid(ctx, hp, width_study)
    res = None
    coord = study.user_attrs.get("coord_check")
    if coord is None:
        res = run_depth_coord(ctx, hp)
        coord = res.to_dict()
        study.set_user_attr("coord_check", coord)
    limits = depth_limits(ctx, target_depth, looks_taken(ctx, study))
    measured = curves(study, depths(ctx))
    verdict = judge(measured, None, round(math.log2(float(hp["lr"])), 6), limits, coord)
    v = ctx.cfg.validation
    knob = (lambda k: f"validation.depth_first_seeds={k * int(v.depth_first_seeds)} "
                      f"validation.depth_later_seeds={k * int(v.depth_later_seeds)} "
                      f"validation.depth_seeds={k * grid_seeds(ctx)}")
    deepest = max(measured)
    return with_hint(verdict, study, measured, "n_layers", knob, limits, depth_plan(ctx),
                     farther=(f"validation.depth={2 * deepest}", 2.0)), res


def depth_limits(ctx: Context, target_depth: int | None, looks: int = 1) -> Limits:
    """The depth grid's limits for this run (`depth_limits_from`)."""
    return depth_limits_from(ctx.cfg.validation, target_depth, ctx.cfg.proxy.parametrization,
                             looks)


def depth_limits_from(v, target_depth: int | None, parametrization: str = "mup",
                      looks: int = 1) -> Limits:
    """The width check's limits (the `validation` group `v`), read along depth: the drift and
    gap from L0 to the deepest proxy are reported, not judged (the optimum may move with
    depth); the trajectory to the target's depth is, with its depth models (three depths to
    tell them apart). The `looks`-th look (after seed rounds) is judged at a stricter
    confidence (`rounds.look_confidence`)."""
    return dataclasses.replace(limits_from(v, target_width=target_depth, looks=looks),
                               axis="depth", judge_drift=False, min_trajectory_widths=3,
                               shared_shape=False, interpolate=bool(v.depth_interpolate),
                               trajectory_model=model_for(parametrization))


def joint_estimate(ctx: Context, width: Verdict, deep: Verdict, *, target_width: int,
                   target_depth: int) -> Joint | None:
    """The lr at the target's width and depth at once (`joint_from`), from this run's two
    verdicts. None when the width verdict has no trajectory or a curve cannot be fitted."""
    if not width.trajectory or len(deep.widths) < 2:
        return None
    return joint_from(ctx.cfg.validation, ctx.cfg.proxy.parametrization, width.curves,
                      deep.curves, width_model=width.trajectory["model"],
                      confidence=max(width.confidence, deep.confidence),
                      target_width=target_width, target_depth=target_depth,
                      depth_width=grid_width(ctx))


def joint_from(v, parametrization: str, width_curves: dict, depth_curves: dict, *,
               width_model: str, confidence: float, target_width: int, target_depth: int,
               depth_width: int | None) -> Joint | None:
    """`transfer.judge.joint.joint` on the two grids' curves (the `validation` group `v`):
    each grid's fit as its verdict made it, their shared curve's bootstrap noise drawn once for
    both, at `confidence` (the stricter of the two verdicts': seed rounds make it stricter),
    with the width verdict's model and the depth limits' (`depth_limits_from`). What a run
    emits, and what benchmarks/target_check.py --rejudge re-emits from an archived run."""
    limits = depth_limits_from(v, target_depth, parametrization)
    return joint(width_curves, depth_curves, target_width=target_width,
                 target_depth=target_depth, width_model=width_model,
                 depth_model=limits.trajectory_model, confidence=confidence,
                 n_boot=limits.n_boot, boot_seed=limits.boot_seed, window=limits.fit_window,
                 scale=limits.interval_scale, depth_shared_shape=limits.shared_shape,
                 depth_width=depth_width, basin_excess=limits.basin_excess,
                 depth_interpolate=limits.interpolate)


def summary(verdict: Verdict | None, alpha: float, width: int | None = None) -> dict | None:
    """What target.yaml records of the depth check (None: it did not run); `width`: the
    width its grid trained at."""
    if verdict is None:
        return None
    return {"outcome": verdict.outcome, "depths": list(verdict.widths), "depth_alpha": alpha,
            "width": width,
            "optima_log2": [verdict.best_log2_lr[d] for d in verdict.widths],
            "optima_ci": [verdict.best_log2_lr_ci.get(d) for d in verdict.widths],
            "models": models(verdict),
            "drift_log2": verdict.drift_log2, "drift_ci": list(verdict.drift_ci),
            "tolerance_log2": verdict.tolerance_log2, "loss_gap": verdict.loss_gap,
            "coord_max_abs_slope": verdict.coord_check.get("max_abs_slope"),
            "coord_max_abs_slope_ci": verdict.coord_check.get("max_abs_slope_ci"),
            "at_target": _at_target(verdict.trajectory), "reasons": verdict.reasons,
            "decide_with": verdict.decide_with if verdict.outcome == "inconclusive" else None}


def models(verdict: Verdict) -> dict:
    """Each depth model's form and fitted coefficients (with no target depth too: what
    `python -m transfer.validate` reports)."""
    ds, v = list(verdict.widths), [verdict.best_log2_lr[d] for d in verdict.widths]
    if len(ds) < 2 or not all(math.isfinite(x) for x in v):
        return {}
    return {m: {"form": MODEL_FORMS["depth"][m], "coefficients": coefficients(m, ds, v, "depth")}
            for m in MODELS}


def _at_target(t: dict | None) -> dict | None:
    """The optimum's trajectory across depth at the target depth, as target.yaml records it."""
    if not t:
        return None
    return {"depth": t["target_width"], "log2_lr": t["estimate"], "interval_log2": t["interval"],
            "model": t["model"], "depths": t["widths"], "optima_log2": t["vertices"],
            "confidence": t["confidence"]}


def lines(verdict: Verdict) -> list[str]:
    """The depth verdict in a few printed lines."""
    ds = verdict.widths
    lo, hi = verdict.drift_ci
    optima = ", ".join(f"{d}: {verdict.best_log2_lr[d]:.2f}" for d in ds)
    out = [f"   depth check  {verdict.outcome.upper()}: optimum (log2 lr) by layers {optima}; "
           f"move {verdict.drift_log2:+.2f} [{lo:+.2f}, {hi:+.2f}] ({ds[0]}→{ds[-1]} layers), "
           f"curvature S/N {verdict.curvature_snr:.1f}, depth coord slope "
           f"{coord_text(verdict.coord_check)}"]
    t = verdict.trajectory
    if t:
        tlo, thi = t["interval"]
        others = "; ".join(f"{m} {d['estimate']:.2f}" for m, d in t["models"].items()
                           if m != t["model"])
        apart = ("inside the grid: the models not judged" if t["model"] == INTERPOLATED
                 else f"{t['disagreement']:.2f} octave apart")
        out.append(f"     at {t['target_width']} layers {t['estimate']:.2f} [{tlo:.2f}, "
                   f"{thi:.2f}] ({t['model']}; {others}, {apart}; "
                   f"tol ±{verdict.tolerance_log2})")
    out += [f"     - {r}" for r in verdict.reasons]
    if verdict.outcome == "inconclusive" and verdict.decide_with:
        out.append(f"     to decide it: {verdict.decide_with}")
    return out
