"""The horizon check's grid by branched wsd cooldowns (`validation.horizon_method=branched`).

The lr grid of the width check (its centre, spacing, fresh seeds and edge extension) at the
stages' width, each (lr, seed) trained once under warmup-stable-decay and branched into a
cooldown at every horizon, train.tokens × `validation.horizon_multiples` (≥ 4 spanning ≥ 16×;
`transfer.search.branched`): one run gives that lr's point on every horizon's curve. The curves
go to `transfer.judge.horizon_law`, whose exponent is the slope of the optima over log2
tokens. Needs `scaling.schedule=wsd` (config check): the stages, the width grid and the target
train under the schedule this measures, so the exponent is applied to the schedule it was
measured under.

Its own Optuna study (the horizon check's, `<run>:validation-horizon`): resumes and shares work
between workers like every grid.
"""

from __future__ import annotations

import dataclasses
import math

import optuna
from optuna.trial import TrialState

from transfer.judge.curves import grid
from transfer.search import Context, predict_seconds, queued_trials, run_branched_one
from transfer.search.progress import Left
from transfer.search.training import horizon_tokens
from transfer.verdict.width import extend_every_curve, lr_bounds, train_grid, validation_seed

__all__ = ["curves", "enabled", "run_grid", "run_tokens"]


def enabled(cfg) -> bool:
    return cfg.validation.horizon_method == "branched"


def run_tokens(cfg, batch_size: int, seq_len: int) -> int:
    """Tokens one branched run trains: the trunk to the longest horizon's cooldown, then every
    horizon's cooldown (`transfer.search.trainer.cooldown_start`'s rounding, near enough)."""
    step = batch_size * seq_len
    steps = [t // step for t in horizon_tokens(cfg)]
    c = float(cfg.scaling.wsd_cooldown_fraction)
    cool = [max(1, round(c * n)) for n in steps]
    return (steps[-1] - cool[-1] + sum(cool)) * step


def cost_context(ctx: Context, hp: dict) -> Context:
    """A context whose trial trains as many tokens as one branched run (its predicted seconds)."""
    tokens = run_tokens(ctx.cfg, int(hp["batch_size"]), ctx.proxies.family.seq_len)
    cfg = dataclasses.replace(ctx.cfg, train=dataclasses.replace(ctx.cfg.train, tokens=tokens))
    return dataclasses.replace(ctx, cfg=cfg, probes=ctx.probes)


def curves(study: optuna.Study, horizons: list[int]) -> dict:
    """tokens -> [(log2 lr, [loss per seed, in seed order; nan if diverged])]."""
    by: dict = {}
    for t in study.get_trials(deepcopy=False):
        losses = t.user_attrs.get("branch_losses")
        if t.state not in (TrialState.COMPLETE, TrialState.PRUNED) or losses is None:
            continue
        for h in horizons:
            loss = losses.get(str(h))
            by.setdefault(h, {}).setdefault(t.params["log2_lr"], []).append(
                (t.params.get("seed", 0), math.nan if loss is None else float(loss)))
    return {h: sorted((x, [y for _, y in sorted(ys, key=lambda p: p[0])])
                      for x, ys in by.get(h, {}).items()) for h in horizons}


def _queue(ctx: Context, study: optuna.Study, xs: list[float]) -> None:
    for s in range(ctx.cfg.validation.seeds):
        for x in xs:
            study.enqueue_trial({"log2_lr": x, "seed": s})


def _extend(ctx: Context, study: optuna.Study, center: float, horizons: list[int]
            ) -> list[float] | None:
    """Points beyond the edge where any horizon's minimum sits at it; None while other workers
    still have points to finish."""
    return extend_every_curve(ctx, study, center, lambda: curves(study, horizons),
                              lambda new: _queue(ctx, study, new))


def run_grid(ctx: Context, hp: dict, study: optuna.Study, stage: str) -> optuna.Study:
    """Train this worker's share of the branched grid in `study`, extending it until every
    horizon's optimum is bracketed or `validation.max_extend` is reached."""
    v = ctx.cfg.validation
    center = round(math.log2(hp["lr"]), 6)
    lo, hi = lr_bounds(center, v)
    horizons = horizon_tokens(ctx.cfg)
    width = ctx.proxies.width
    with ctx.lock():
        if not study.get_trials(deepcopy=False):
            _queue(ctx, study, grid(center, v.points, v.step_log2))
    cost = cost_context(ctx, hp)

    def run(trial: optuna.Trial) -> None:
        x = trial.suggest_float("log2_lr", lo, hi)
        seed = trial.suggest_categorical("seed", list(range(v.seeds)))
        run_branched_one(ctx, study, trial, dict(hp, lr=2.0 ** x), width=width,
                         seed=validation_seed(ctx.cfg.proxy.seed, seed), stage=stage,
                         horizons=horizons, predicted=predict_seconds(cost, hp, width))

    def left() -> Left:
        return queued_trials(study, lambda p: predict_seconds(cost, hp, width))

    train_grid(ctx, study, stage, run, lambda: _extend(ctx, study, center, horizons), left)
    return study
