"""The depth check: does the tuned lr optimum stay put from the stages' depth to a deeper proxy?

The learning-rate grid at the stages' width (`transfer.verdict.axis_grid`: the width check's centre,
spacing, seeds and edge extension), trained at the stages' depth L0 — the width check's narrow
curve, copied — and at L1 = `validation.depth` (4 × L0 by default), judged by the same pure
verdict (`transfer.verdict.judge.judge`, `Limits(axis="depth")`) with the depth coordinate check
(`transfer.verdict.coord.depth_coord_check`) as its coordinate rule. Its own Optuna study,
`<run>:validation-depth`. Off unless `validation.depth_enabled`.
"""

from __future__ import annotations

import dataclasses
import math

import optuna

from transfer.core.hparams import MODEL_HPARAMS
from transfer.search import Context
from transfer.verdict.axis_grid import Axis, run_axis_grid
from transfer.verdict.coord import CoordResult, depth_coord_check
from transfer.verdict.judge import Verdict, judge
from transfer.verdict.width import (
    curves_from,
    limits_from,
    open_grid_study,
)

STAGE = "validation_depth"


def enabled(cfg) -> bool:
    return bool(cfg.validation.depth_enabled)


def depths(ctx: Context) -> tuple[int, int]:
    """(L0, L1): the stages' depth and the deep proxy's."""
    l0 = int(ctx.proxies.family.n_layers)
    l1 = int(ctx.cfg.validation.depth or 4 * l0)
    return l0, l1


def at_depth(ctx: Context, n_layers: int) -> Context:
    """The context whose family is built `n_layers` deep (base depth, and so m_L, as set)."""
    plan = dataclasses.replace(ctx.proxies, family=ctx.proxies.family.replace(n_layers=n_layers))
    return dataclasses.replace(ctx, proxies=plan, probes={})


DEPTH_STUDY = "validation-depth"


def axis(ctx: Context) -> Axis:
    """The depth grid: L0 (the stages' depth, copied from the width grid) and L1."""
    l0, l1 = depths(ctx)
    return Axis(stage=STAGE, study=DEPTH_STUDY, param="n_layers", values=(l0, l1), copied=l0,
                contexts={l0: at_depth(ctx, l0), l1: at_depth(ctx, l1)}, in_hparams=True)


def open_depth_study(ctx: Context) -> optuna.Study:
    return open_grid_study(ctx, DEPTH_STUDY)


def curves(study: optuna.Study, ds: tuple[int, int]) -> dict:
    """The grid as plain curves: depth -> [(log2 lr, [loss per seed; nan if diverged])]."""
    return curves_from(study, ds, axis="n_layers")


def run_depth_grid(ctx: Context, hp: dict, width_study: optuna.Study) -> optuna.Study:
    """Train this worker's share of the depth grid (`transfer.verdict.axis_grid`), extending it until
    both depths' optima are bracketed or `validation.max_extend` is reached."""
    return run_axis_grid(ctx, hp, width_study, axis(ctx))


def coord_depths(ctx: Context) -> list[int]:
    """The depths the depth coordinate check trains: `validation.coord_depths`, or L0 × 1, 2, 4
    and the deep proxy's (`transfer.run.predict` prices the same list)."""
    l0, l1 = depths(ctx)
    return sorted(set(ctx.cfg.validation.coord_depths or [l0, 2 * l0, 4 * l0, l1]))


def run_depth_coord(ctx: Context, hp: dict) -> CoordResult:
    """The coordinate check across depth at the stages' width, with the tuned multipliers."""
    v = ctx.cfg.validation
    family = ctx.proxies.family.replace(**{k: float(hp[k]) for k in MODEL_HPARAMS})
    return depth_coord_check(family, depths=coord_depths(ctx), width=ctx.proxies.width,
                             corpus=ctx.corpus,
                             steps=v.coord_steps, lr=float(hp["lr"]), seed=ctx.cfg.proxy.seed,
                             max_slope=v.coord_max_slope)


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
    # two depths (the depth grid's): the trajectory to the target depth is reported with its
    # interval, but two points cannot tell the models apart
    limits = dataclasses.replace(limits_from(ctx.cfg.validation, target_width=target_depth),
                                 axis="depth", min_trajectory_widths=2)
    verdict = judge(curves(study, depths(ctx)), None, round(math.log2(float(hp["lr"])), 6),
                    limits, coord)
    return verdict, res


def summary(verdict: Verdict | None, alpha: float) -> dict | None:
    """What target.yaml records of the depth check (None: it did not run)."""
    if verdict is None:
        return None
    return {"outcome": verdict.outcome, "depths": list(verdict.widths), "depth_alpha": alpha,
            "drift_log2": verdict.drift_log2, "drift_ci": list(verdict.drift_ci),
            "tolerance_log2": verdict.tolerance_log2, "loss_gap": verdict.loss_gap,
            "coord_max_abs_slope": verdict.coord_check.get("max_abs_slope"),
            "at_target": _at_target(verdict.trajectory), "reasons": verdict.reasons}


def _at_target(t: dict | None) -> dict | None:
    """The optimum's trajectory across depth at the target depth, as target.yaml records it."""
    if not t:
        return None
    return {"depth": t["target_width"], "log2_lr": t["estimate"], "interval_log2": t["interval"],
            "model": t["model"], "depths": t["widths"], "optima_log2": t["vertices"],
            "confidence": t["confidence"]}


def lines(verdict: Verdict) -> list[str]:
    """The depth verdict in a few printed lines."""
    l0, l1 = verdict.widths
    lo, hi = verdict.drift_ci
    out = [f"   depth check  {verdict.outcome.upper()}: drift {verdict.drift_log2:+.2f} "
           f"[{lo:+.2f}, {hi:+.2f}] log2(lr) ({l0}→{l1} layers, tol ±{verdict.tolerance_log2}), "
           f"gap {verdict.loss_gap:.2%}, curvature S/N {verdict.curvature_snr:.1f}, depth coord "
           f"slope {verdict.coord_check.get('max_abs_slope', math.nan):.2f}"]
    return out + [f"     - {r}" for r in verdict.reasons]
