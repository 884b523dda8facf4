"""The depth check: does the tuned lr optimum stay put from the stages' depth to a deeper proxy?

The same learning-rate grid as the width check (same centre, spacing, seeds and edge extension)
at the stages' width, trained at the stages' depth L0 and at L1 = `validation.depth` (4 × L0 by
default), judged by the same pure verdict (`transfer.verdict.judge`, `Limits(axis="depth")`)
with the depth coordinate check (`transfer.coord.depth_coord_check`) as its coordinate rule.
The L0 curve is the width check's narrow curve — same family, width, seeds and lrs, and training
is deterministic — so its finished trials are copied in, not trained again; only L1 costs.

The grid lives in its own Optuna study (`<run>:validation-depth`), so it resumes and shares
work between workers like every stage. Off unless `validation.depth_enabled`.
"""

from __future__ import annotations

import dataclasses
import math

import optuna
from optuna.trial import TrialState

from transfer.coord import CoordResult, coord_png, depth_coord_check
from transfer.curves import extend_points, grid
from transfer.hparams import MODEL_HPARAMS
from transfer.search import Context, n_finished, predict_seconds, queued_seconds, run_one, work
from transfer.validator import (
    curves_from,
    finished_at_width,
    limits_from,
    lr_bounds,
    open_grid_study,
    transfer_png,
    validation_seed,
)
from transfer.verdict import Verdict, judge

STAGE = "validation_depth"


def enabled(cfg) -> bool:
    return bool(cfg.validation.depth_enabled)


def depths(ctx: Context) -> tuple[int, int]:
    """(L0, L1): the stages' depth and the deep proxy's."""
    l0 = int(ctx.plan.family.n_layers)
    l1 = int(ctx.cfg.validation.depth or 4 * l0)
    return l0, l1


def at_depth(ctx: Context, n_layers: int) -> Context:
    """The context whose family is built `n_layers` deep (base depth, and so m_L, as set)."""
    plan = dataclasses.replace(ctx.plan, family=ctx.plan.family.replace(n_layers=n_layers))
    return dataclasses.replace(ctx, plan=plan, _probe={})


def open_depth_study(ctx: Context) -> optuna.Study:
    return open_grid_study(ctx, "validation-depth")


def _queue(ctx: Context, study: optuna.Study, width_study: optuna.Study, xs: list[float],
           center: float) -> None:
    """Queue (depth, seed, lr) points; an L0 point the width grid has already trained is
    copied in (same family, width, seed and lr: the same deterministic run)."""
    v, (l0, l1) = ctx.cfg.validation, depths(ctx)
    lo, hi = lr_bounds(center, v)
    dists = {"log2_lr": optuna.distributions.FloatDistribution(lo, hi),
             "n_layers": optuna.distributions.CategoricalDistribution([l0, l1]),
             "seed": optuna.distributions.CategoricalDistribution(list(range(v.seeds)))}
    done = finished_at_width(width_study, ctx.plan.width)
    for s in range(v.seeds):
        for x in xs:
            params = {"log2_lr": x, "n_layers": l0, "seed": s}
            src = done.get((x, s))
            if src is None:
                study.enqueue_trial(params)
            else:
                study.add_trial(optuna.trial.create_trial(
                    params=params, distributions=dists, state=src.state,
                    value=src.value if src.state == TrialState.COMPLETE else None,
                    user_attrs={**src.user_attrs, "stage": STAGE, "seconds": 0.0, "flops": 0.0,
                                "tokens": 0, "copied_from_trial": src.number,
                                "hparams": {**src.user_attrs.get("hparams", {}),
                                            "n_layers": l0}}))
            study.enqueue_trial({"log2_lr": x, "n_layers": l1, "seed": s})


def curves(study: optuna.Study, ds: tuple[int, int]) -> dict:
    """The grid as plain curves: depth -> [(log2 lr, [loss per seed; nan if diverged])]."""
    return curves_from(study, ds, axis="n_layers")


def _extend(ctx: Context, study: optuna.Study, width_study: optuna.Study, center: float
            ) -> list[float] | None:
    """As the width grid's `extend_grid`: points on the side where a depth's minimum sits at
    the edge; None while other workers still have points to finish."""
    v = ctx.cfg.validation
    lo, hi = lr_bounds(center, v)
    with ctx.lock():
        if any(t.state in (TrialState.WAITING, TrialState.RUNNING)
               for t in study.get_trials(deepcopy=False)):
            return None
        new = extend_points(curves(study, depths(ctx)), step=v.step_log2, lo=lo, hi=hi)
        _queue(ctx, study, width_study, new, center)
    return new


def run_depth_grid(ctx: Context, hp: dict, width_study: optuna.Study) -> optuna.Study:
    """Train this worker's share of the depth grid, extending it until both depths'
    optima are bracketed or `validation.max_extend` is reached."""
    v = ctx.cfg.validation
    center = round(math.log2(hp["lr"]), 6)
    lo, hi = lr_bounds(center, v)
    l0, l1 = depths(ctx)
    study = open_depth_study(ctx)
    with ctx.lock():
        if not study.get_trials(deepcopy=False):
            _queue(ctx, study, width_study, grid(center, v.points, v.step_log2), center)
    contexts = {l0: at_depth(ctx, l0), l1: at_depth(ctx, l1)}

    def left() -> float:  # predicted seconds of the queued points, each at its own depth
        return queued_seconds(study, lambda p: predict_seconds(contexts[p["n_layers"]], hp,
                                                               ctx.plan.width))

    ctx.progress.stage_start(STAGE, n_finished(study), len(study.get_trials(deepcopy=False)),
                             left())
    while True:
        for trial in work(ctx, study, None):
            x = trial.suggest_float("log2_lr", lo, hi)
            n = trial.suggest_categorical("n_layers", [l0, l1])
            seed = trial.suggest_categorical("seed", list(range(v.seeds)))
            run_one(contexts[n], study, trial, dict(hp, lr=2.0 ** x, n_layers=n),
                    width=ctx.plan.width, seed=validation_seed(ctx.cfg.proxy.seed, seed),
                    stage=STAGE, prune=False)
            ctx.progress.update(n_finished(study), None, remaining_seconds=left())
        new = _extend(ctx, study, width_study, center)
        if new is None:
            continue
        if not new:
            break
        ctx.progress.line(f"{STAGE}: optimum at the grid's edge; extending to log2 lr "
                          f"{', '.join(f'{x:.2f}' for x in new)}")
    ctx.progress.stage_end()
    return study


def run_depth_coord(ctx: Context, hp: dict) -> CoordResult:
    """The coordinate check across depth at the stages' width, with the tuned multipliers."""
    v = ctx.cfg.validation
    l0, l1 = depths(ctx)
    family = ctx.plan.family.replace(**{k: float(hp[k]) for k in MODEL_HPARAMS})
    ds = sorted(set(v.coord_depths or [l0, 2 * l0, 4 * l0, l1]))
    return depth_coord_check(family, depths=ds, width=ctx.plan.width, corpus=ctx.corpus,
                             steps=v.coord_steps, lr=float(hp["lr"]), seed=ctx.cfg.proxy.seed,
                             max_slope=v.coord_max_slope)


def validate_depth(ctx: Context, hp: dict, width_study: optuna.Study, *,
                   target_depth: int | None = None) -> tuple[Verdict, dict[str, bytes]]:
    """The depth grid (resumed: already trained when every worker ran it), the depth
    coordinate check (once: kept in the study), the verdict, and its plots (file name under
    plots/ → PNG: the coordinate check's only when it ran now) for `transfer.outputs`."""
    study = run_depth_grid(ctx, hp, width_study)
    plots = {}
    coord = study.user_attrs.get("coord_check")
    if coord is None:
        res = run_depth_coord(ctx, hp)
        coord = res.to_dict()
        study.set_user_attr("coord_check", coord)
        plots["coord_check_depth.png"] = coord_png(res)
    limits = dataclasses.replace(limits_from(ctx.cfg.validation, target_width=target_depth),
                                 axis="depth")
    verdict = judge(curves(study, depths(ctx)), None, round(math.log2(float(hp["lr"])), 6),
                    limits, coord)
    plots["lr_transfer_depth.png"] = transfer_png(verdict, label="layers")
    return verdict, plots


def summary(verdict: Verdict | None, alpha: float) -> dict | None:
    """What target.yaml records of the depth check (None: it did not run)."""
    if verdict is None:
        return None
    return {"outcome": verdict.outcome, "depths": list(verdict.widths), "depth_alpha": alpha,
            "drift_log2": verdict.drift_log2, "drift_ci": list(verdict.drift_ci),
            "tolerance_log2": verdict.tolerance_log2, "loss_gap": verdict.loss_gap,
            "coord_max_abs_slope": verdict.coord_check.get("max_abs_slope"),
            "reasons": verdict.reasons}


def lines(verdict: Verdict) -> list[str]:
    """The depth verdict in a few printed lines."""
    l0, l1 = verdict.widths
    lo, hi = verdict.drift_ci
    out = [f"   depth check  {verdict.outcome.upper()}: drift {verdict.drift_log2:+.2f} "
           f"[{lo:+.2f}, {hi:+.2f}] log2(lr) ({l0}→{l1} layers, tol ±{verdict.tolerance_log2}), "
           f"gap {verdict.loss_gap:.2%}, curvature S/N {verdict.curvature_snr:.1f}, depth coord "
           f"slope {verdict.coord_check.get('max_abs_slope', math.nan):.2f}"]
    return out + [f"     - {r}" for r in verdict.reasons]
