"""More lr curves beside the width grid's narrow one, along another axis: the grid of the
depth check (n_layers: the stages' depth and deeper proxies) and of the horizon check (tokens: a
short budget and the full one).

Both use the width grid's centre, spacing, fresh seeds and edge extension, at the axis's width
(the stages' width, or the depth grid's own `validation.depth_width`). When that is the stages'
width, one of the axis values is what the width grid already trained (the stages' depth; the
full budget): those points are copied in from it — same family, width, seed and lr, and
training is deterministic — so only the other values' points cost. The grid lives in its own Optuna
study (`<run>:<study>`), so it resumes and shares work between workers like every stage.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from transfer.judge.rounds import MAX_MULTIPLE
from transfer.judge.verdict import Limits
from transfer.search import Context, predict_seconds, queued_trials, run_one
from transfer.search.progress import Left, Span, makespan
from transfer.verdict.plan import CurvePlan, GridPlan
from transfer.verdict.width import (
    curve_seconds,
    curves_from,
    extend_every_curve,
    finished_at_width,
    grow,
    open_grid_study,
    queue_seed_round,
    seed_choices,
    seeds_at,
    train_grid,
    validation_seed,
)


@dataclass(frozen=True)
class Axis:
    """What a second-axis grid varies, and where each value's trials train."""

    stage: str  # the trials' stage label and the progress lines' name
    study: str  # the grid study's name after "<run>:"
    param: str  # the trial parameter: "n_layers" or "tokens"
    values: tuple[int, ...]  # the curves' keys (≥ 2), in the order the verdict reports them
    # the value the width grid trained at this width, copied, not trained (None: every value
    # is trained, the axis's width is not the stages')
    copied: int | None
    contexts: Mapping[int, Context]  # each value's context (its family or token budget)
    width: int  # the width every curve trains at
    seeds: int  # seeds at every point
    in_hparams: bool = False  # record the value among a trial's hparams (a model shape)
    # The verdict's limits at the k-th look (k → Limits): where set, seed rounds may add seeds
    # to some curves once the grid is whole and bracketed (`add_seed_round`); None: never.
    limits: Callable[[int], Limits] | None = None
    rounds: int = 0  # validation.max_rounds, where `limits` is set
    # each curve's points, step and seeds (`transfer.verdict.plan`; the depth grid's); None:
    # every curve `validation.points` × `step_log2` at `seeds`, laid out at once
    plan: GridPlan | None = None

    @property
    def max_seeds(self) -> int:
        """The most seeds a curve can reach: its own, and each round's at most (one seed at a
        time, up to `MAX_MULTIPLE` × `seeds` a round, `validation.max_rounds` rounds), and
        at least the most its plan gives a curve."""
        most = self.seeds * (1 + MAX_MULTIPLE * self.rounds) if self.limits else self.seeds
        return max(most, self.plan.max_seeds if self.plan is not None else 0)


def plan_of(ctx: Context, axis: Axis) -> GridPlan:
    """The axis's plan, or today's uniform one."""
    if axis.plan is not None:
        return axis.plan
    v = ctx.cfg.validation
    one = CurvePlan(int(v.points), float(v.step_log2), int(axis.seeds))
    return GridPlan(keys=tuple(axis.values), curves=(one,) * len(axis.values), focus=False,
                    max_extend=int(v.max_extend))


def open_axis_study(ctx: Context, axis: Axis) -> optuna.Study:
    return open_grid_study(ctx, axis.study)


def curves(study: optuna.Study, axis: Axis) -> dict:
    """The grid as plain curves: axis value -> [(log2 lr, [loss per seed; nan if diverged])]."""
    return curves_from(study, axis.values, axis=axis.param)


def queue(ctx: Context, axis: Axis, study: optuna.Study, width_study: optuna.Study,
          xs: list[float], center: float, values: tuple[int, ...] | None = None) -> None:
    """Queue (value, seed, lr) points of `values` (every axis value unless given), each at its
    plan's seeds; a point of the copied value that the width grid has already trained is
    copied in as finished."""
    plan = plan_of(ctx, axis)
    lo, hi = plan.span(center)
    dists = {"log2_lr": optuna.distributions.FloatDistribution(lo, hi),
             axis.param: optuna.distributions.CategoricalDistribution(list(axis.values)),
             "seed": optuna.distributions.CategoricalDistribution(
                 seed_choices(study, axis.max_seeds))}
    done = finished_at_width(width_study, axis.width) if axis.copied is not None else {}
    values = axis.values if values is None else values
    for s in range(max(plan[value].seeds for value in values)):
        for x in xs:
            for value in values:
                if s >= plan[value].seeds:
                    continue
                src = done.get((x, s)) if value == axis.copied else None
                params = {"log2_lr": x, axis.param: value, "seed": s}
                if src is None:
                    study.enqueue_trial(params)
                    continue
                attrs = {**src.user_attrs, "stage": axis.stage, "seconds": 0.0, "flops": 0.0,
                         "tokens": 0, "copied_from_trial": src.number}
                if axis.in_hparams:
                    attrs["hparams"] = {**src.user_attrs.get("hparams", {}), axis.param: value}
                study.add_trial(optuna.trial.create_trial(
                    params=params, distributions=dists, state=src.state,
                    value=src.value if src.state == TrialState.COMPLETE else None,
                    user_attrs=attrs))


def extend(ctx: Context, axis: Axis, study: optuna.Study, width_study: optuna.Study,
           center: float) -> list[float] | str | None:
    """Points on the side where a curve's minimum sits at the edge, queued for every curve
    (unlike the width grid's per-width `extend_grid`: `queue` lays out every value at every
    lr, and the copied value's points are mostly free copies of the width grid's); None while
    other workers still have points to finish. A focused plan grows curve by curve instead
    (`width.grow`): each curve's own edge, then the next curve centred on its predecessor's
    best point."""
    plan = plan_of(ctx, axis)
    if plan.focus:
        return grow(ctx, study, plan, center, lambda: curves(study, axis),
                    lambda k, xs: queue(ctx, axis, study, width_study, xs, center, (k,)),
                    name=axis.param)
    return extend_every_curve(ctx, study, center, lambda: curves(study, axis),
                              lambda new: queue(ctx, axis, study, width_study, new, center))


def run_axis_grid(ctx: Context, hp: dict, width_study: optuna.Study, axis: Axis
                  ) -> optuna.Study:
    """Train this worker's share of the grid, extending it until every curve's optimum is
    bracketed or `validation.max_extend` is reached."""
    center = round(math.log2(hp["lr"]), 6)
    plan = plan_of(ctx, axis)
    lo, hi = plan.span(center)
    study = open_axis_study(ctx, axis)
    with ctx.lock():
        if not study.get_trials(deepcopy=False):
            first = plan.keys[:1] if plan.focus else plan.keys
            queue(ctx, axis, study, width_study, plan[plan.keys[0]].xs(center), center, first)

    choices = seed_choices(study, axis.max_seeds)

    def run(trial: optuna.Trial) -> None:
        x = trial.suggest_float("log2_lr", lo, hi)
        n = trial.suggest_categorical(axis.param, list(axis.values))
        seed = trial.suggest_categorical("seed", choices)
        trial_hp = dict(hp, lr=2.0 ** x, **({axis.param: n} if axis.in_hparams else {}))
        run_one(axis.contexts[n], study, trial, trial_hp, width=axis.width,
                seed=validation_seed(ctx.cfg.proxy.seed, seed), stage=axis.stage, prune=False)

    def left() -> Left:  # predicted seconds of the queued points, each in its own context
        return queued_trials(study, lambda p: predict_seconds(axis.contexts[p[axis.param]], hp,
                                                              axis.width),
                             key=lambda p: p[axis.param])

    def grow_grid() -> list[float] | str | None:
        new = extend(ctx, axis, study, width_study, center)
        return new if new is None or new else add_seed_round(ctx, axis, study, center, hp)

    def after() -> Span:  # a focused plan's curves not laid out yet: their planned points
        laid = seeds_at(study, plan.keys, axis.param)
        return Span.certain(sum(
            makespan([predict_seconds(axis.contexts[k], hp, axis.width)] * plan[k].trials,
                     ctx.progress.workers) for k in plan.keys if not laid[k]))

    train_grid(ctx, study, axis.stage, run, grow_grid, left, after)
    return study


def axis_seconds(ctx: Context, axis: Axis, study: optuna.Study, hp: dict
                 ) -> Callable[[int, int], float]:
    """The axis grid's `width.curve_seconds`: (axis value, trials) → predicted wall seconds,
    each value's probe at its own context."""
    return curve_seconds(ctx, study, axis.param,
                         lambda k: predict_seconds(axis.contexts[k], hp, axis.width))


def add_seed_round(ctx: Context, axis: Axis, study: optuna.Study, center: float, hp: dict
                   ) -> str | list | None:
    """The axis grid's seed round (`width.queue_seed_round`) where its axis has `limits` (the
    depth grid): one seed at a time, up to `MAX_MULTIPLE` × `axis.seeds` a round; each later
    look judged at a stricter confidence (`rounds.look_confidence`: the verdict reads
    `looks_taken`)."""
    if axis.limits is None:
        return []
    return queue_seed_round(ctx, study, stage=axis.stage, param=axis.param, keys=axis.values,
                            center=center, limits=axis.limits, add=1,
                            max_seeds=axis.max_seeds, max_multiple=MAX_MULTIPLE * axis.seeds,
                            pricing=lambda: axis_seconds(ctx, axis, study, hp))
