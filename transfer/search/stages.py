"""Staged sweeps on the smallest proxy: one study per stage, winners frozen in order.

Stage k searches its own space with every other hyperparameter frozen at the defaults
overwritten by the winners of stages 0..k-1. A stage opens with what is already known (the
incumbent's result, copied in) so it can only improve and never repeats work.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import optuna
from optuna.trial import TrialState

from transfer.core.errors import UserError
from transfer.search.context import Context
from transfer.search.probe import predict_seconds, running_seconds, unfinished
from transfer.search.space import (
    choices,
    default_hparams,
    distribution,
    in_space,
    nearest_choices,
    stage_space,
    suggest,
)
from transfer.search.studies import (
    PRUNER_STARTUP_TRIALS,
    best_trial,
    n_finished,
    open_study,
    pruner_warmup,
)
from transfer.search.trial import run_one, work


@dataclass
class StageSummary:
    name: str
    trials: int
    complete: int
    pruned: int
    failed: int
    best_value: float | None
    best_params: dict
    seconds: float
    flops: float
    predicted_seconds: float  # for the completed trials, predicted from the probe before each
    measured_seconds: float  # the same trials, measured

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def frozen_before(ctx: Context, upto: int) -> dict:
    """Defaults overwritten by the winners of stages 0..upto-1, in order."""
    hp = default_hparams(ctx.cfg)
    for i, name in enumerate(ctx.cfg.stages.order[:upto]):
        best = best_trial(open_study(ctx, i, name))
        if best is None or not best.params:
            raise UserError(f"stage {name!r} has no completed trial (all diverged or were pruned); "
                            f"lower or widen stages.stage.{name}.params and re-run")
        hp.update(best.params)
    return hp


def seed_incumbent(ctx: Context, study: optuna.Study, space: dict, hp: dict) -> None:
    """Queue the values frozen so far as a new study's first trial (to be trained)."""
    with ctx.lock():
        if study.get_trials(deepcopy=False):
            return
        incumbent = incumbent_of(space, hp)
        if len(incumbent) == len(space):
            study.enqueue_trial(incumbent, user_attrs={"incumbent": True})


def incumbent_of(space: dict, hp: dict) -> dict:
    """The frozen values that lie in `space`: a stage's incumbent (complete when it has every
    parameter of the space)."""
    return {k: hp[k] for k in space if in_space(hp[k], space[k])}


def stage_layout(space: dict, hp: dict, trials: int, *, has_previous: bool
                 ) -> tuple[dict | None, list[dict]]:
    """How a stage opens: (the incumbent's params when its first trial is the previous stage's
    best, copied in, else None; the trials queued after it). A stage over one categorical
    parameter (batch size) queues its other choices nearest to the incumbent, as many as its
    trials allow; any other stage queues nothing (its trials are sampled). `seed_stage` lays a
    stage out by this, and `transfer.run.predict` prices it by the same answer."""
    incumbent = incumbent_of(space, hp)
    copied = incumbent if has_previous and len(incumbent) == len(space) else None
    queued: list[dict] = []
    if len(space) == 1:
        name, p = next(iter(space.items()))
        options = choices(p)
        if options is not None:
            queued = [{name: c} for c in nearest_choices(options, incumbent.get(name),
                                                         trials - (copied is not None))]
    return copied, queued


PRUNE_PROBABILITY = 0.5  # a median rule stops about half the trials it may stop


Price = tuple[float, float, float]  # (seconds in full, probability it is stopped, seconds if stopped)


def trial_prices(ctx: Context, hp: dict, index: int, name: str) -> list[Price]:
    """Each of stage `name`'s trials, in the order the stage lays them out (`stage_layout`):
    0 s for the copied incumbent, each queued choice probed at its own shape, the sampled ones
    at `hp`'s; with a pruner, a trial past its start-up is stopped with probability ½ at its
    first eligible evaluation and then costs that share. The stage's ETA reads these (its
    expected makespan, `transfer.search.progress`); `transfer.run.predict` their means."""
    cfg = ctx.cfg
    n = int(cfg.stages.stage[name].trials)
    space = stage_space(cfg, name, hp)
    copied, queued = stage_layout(space, hp, n, has_previous=index > 0)
    full = predict_seconds(ctx, hp, ctx.proxies.width)
    per = ([0.0] if copied is not None else []) + [predict_seconds(ctx, dict(hp, **q), ctx.proxies.width)
                                       for q in queued]
    per += [full] * (n - len(per))
    if cfg.pruner.kind == "none":
        return [(t, 0.0, t) for t in per]
    evals = max(1, int(cfg.train.n_evals))
    share = min(1.0, (pruner_warmup(cfg) + 1) / evals)  # trained before it may be pruned
    return [(t, 0.0, t) if i < PRUNER_STARTUP_TRIALS else (t, PRUNE_PROBABILITY, t * share)
            for i, t in enumerate(per)]


def expected_trial_seconds(ctx: Context, hp: dict, index: int, name: str) -> list[float]:
    """Each of stage `name`'s trials' expected seconds (`trial_prices`' means), in layout order."""
    return [t - p * (t - short) for t, p, short in trial_prices(ctx, hp, index, name)]


def stage_left(study: optuna.Study, per_trial: list[Price]) -> list[tuple[float, ...]]:
    """The stage's unfinished trials for the ETA (`transfer.search.progress.Left`): each one's
    price from its place in the layout (a trial's number in its study), running ones first
    with how long they have run, then the waiting and the not yet sampled ones."""
    trials = study.get_trials(deepcopy=False)
    now = datetime.now()
    started = [(per_trial[t.number][0], running_seconds(t, now), *per_trial[t.number][1:])
               for t in unfinished(trials) if t.number < len(per_trial)]
    return started + [(s, 0.0, p, short) for s, p, short in per_trial[len(trials):]]


def seed_stage(ctx: Context, study: optuna.Study, space: dict, hp: dict,
               previous: optuna.trial.FrozenTrial | None, trials: int, stage: str) -> None:
    """Open a stage with what is already known, so it can only improve and never repeats work.

    The incumbent (the values frozen so far) was trained by the previous stage's best trial at
    the same width, seed and tokens; training is deterministic, so its result is copied in as
    this stage's first trial instead of being trained again. A stage over one categorical
    parameter (batch size) is not sampled at all: its other choices are queued nearest to the
    incumbent first, as many as the stage has trials, so no choice is ever trained twice
    (`stage_layout`).
    """
    with ctx.lock():
        if study.get_trials(deepcopy=False):
            return
        copied, queued = stage_layout(space, hp, trials, has_previous=previous is not None)
        if copied is not None:
            study.add_trial(optuna.trial.create_trial(
                params=copied, distributions={k: distribution(space[k]) for k in space},
                value=previous.value, intermediate_values=previous.intermediate_values,
                user_attrs={**previous.user_attrs, "incumbent": True, "seconds": 0.0,
                            "flops": 0.0, "tokens": 0, "predicted_seconds": 0.0,
                            "stage": stage, "copied_from_trial": previous.number}))
        for params in queued:
            study.enqueue_trial(params)


def run_stages(ctx: Context) -> dict:
    """Work through every stage in order; returns the final frozen hyperparameters."""
    cfg = ctx.cfg
    for index, name in enumerate(cfg.stages.order):
        hp = frozen_before(ctx, index)
        study = open_study(ctx, index, name)
        total = cfg.stages.stage[name].trials
        space = stage_space(cfg, name, hp)
        previous = best_trial(open_study(ctx, index - 1, cfg.stages.order[index - 1])) \
            if index > 0 else None
        seed_stage(ctx, study, space, hp, previous, total, name)
        done = min(n_finished(study), total)
        # the ETA's prices (probes of every queued shape), where the ETA is shown; a finished
        # stage (a resumed or re-emitted run) must not train even a probe
        per_trial = (trial_prices(ctx, hp, index, name)
                     if done < total and ctx.progress.shown else [(0.0, 0.0, 0.0)] * total)
        ctx.progress.stage_start(name, done, total, stage_left(study, per_trial))
        for trial in work(ctx, study, total):
            trial_hp = dict(hp, **{k: suggest(trial, k, p) for k, p in space.items()})
            run_one(ctx, study, trial, trial_hp, width=ctx.proxies.width, seed=cfg.proxy.seed,
                    stage=name)
            best = best_trial(study)
            done = min(n_finished(study), total)
            ctx.progress.update(done, None if best is None else best.value,
                                {} if best is None else dict(best.params),
                                remaining_seconds=stage_left(study, per_trial))
        ctx.progress.stage_end()
    return frozen_before(ctx, len(cfg.stages.order))


def summarize(ctx: Context) -> list[StageSummary]:
    out = []
    for index, name in enumerate(ctx.cfg.stages.order):
        study = open_study(ctx, index, name)
        trials = study.get_trials(deepcopy=False)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        best = best_trial(study)
        out.append(StageSummary(
            name=name, trials=ctx.cfg.stages.stage[name].trials, complete=len(complete),
            pruned=sum(t.state == TrialState.PRUNED for t in trials),
            failed=sum(t.state == TrialState.FAIL for t in trials),
            best_value=None if best is None else best.value,
            best_params={} if best is None else dict(best.params),
            seconds=sum(t.user_attrs.get("seconds", 0.0) for t in trials),
            flops=sum(t.user_attrs.get("flops", 0.0) for t in trials),
            predicted_seconds=sum(t.user_attrs.get("predicted_seconds", 0.0) for t in complete),
            measured_seconds=sum(t.user_attrs.get("seconds", 0.0) for t in complete)))
    return out
