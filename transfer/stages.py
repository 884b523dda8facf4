"""Staged Optuna sweeps on the smallest proxy: one study per stage, winners frozen in order.

Workers (processes on one machine, or machines sharing a PostgreSQL study) all run `work()`.
Under the run lock a worker counts the stage's trials and takes one only while finished + active
trials are fewer than the stage's count, so counts are exact however many workers there are.
Trials left RUNNING by a dead process are failed (by heartbeat, or by owner pid on one machine)
and re-run with the same parameters.
"""

from __future__ import annotations

import math
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from transfer.errors import UserError
from transfer.family import MODEL_HPARAMS, ProxyPlan
from transfer.progress import Progress
from transfer.storage import OWNER_ATTR, close_orphaned_trials, fail_stale, mark_owner
from transfer.trainer import TrainResult, TrainSpec, train

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
ACTIVE = (TrialState.RUNNING, TrialState.WAITING)
PROBE_STEPS = 10  # the "time a few steps before committing" probe, per distinct shape


class BudgetStop(UserError):
    """The run crossed its spending cap; everything finished so far is kept."""


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


@dataclass
class Context:
    """Everything a worker needs; plain values plus the storage and the lock."""

    cfg: Any  # resolved DictConfig
    plan: ProxyPlan
    corpus: Any
    storage: Any
    lock: Callable
    run_name: str
    device: str = "auto"
    progress: Progress = field(default_factory=lambda: Progress("off"))
    worker: int = 0
    spent: Callable[[], tuple[float, float]] | None = None  # (seconds, flops) so far, all workers
    _probe: dict = field(default_factory=dict)


# ---- trials -------------------------------------------------------------------------------
def default_hparams(cfg) -> dict:
    t, p = cfg.train, cfg.proxy
    return {"lr": t.lr, "batch_size": t.batch_size, "warmup_fraction": t.warmup_fraction,
            **{k: p[k] for k in MODEL_HPARAMS}}


def train_spec(cfg, hp: dict, *, width: int, seed: int, tokens: int | None = None,
               n_evals: int | None = None) -> TrainSpec:
    t = cfg.train
    return TrainSpec(width=width, lr=float(hp["lr"]), batch_size=int(hp["batch_size"]),
                     tokens=int(tokens or t.tokens), warmup_fraction=float(hp["warmup_fraction"]),
                     schedule=t.schedule, min_lr_fraction=t.min_lr_fraction,
                     weight_decay=t.weight_decay, grad_clip=t.grad_clip,
                     n_evals=n_evals or t.n_evals, eval_batches=t.eval_batches,
                     eval_batch_size=t.eval_batch_size, divergence_factor=t.divergence_factor,
                     seed=seed)


def run_training(ctx: Context, hp: dict, *, width: int, seed: int, report=None,
                 tokens: int | None = None, n_evals: int | None = None) -> TrainResult:
    family = ctx.plan.family.replace(**{k: float(hp[k]) for k in MODEL_HPARAMS})
    spec = train_spec(ctx.cfg, hp, width=width, seed=seed, tokens=tokens, n_evals=n_evals)
    try:
        spec.check(family.seq_len)
    except ValueError as e:
        raise UserError(f"train: {e}") from None
    return train(family, spec, ctx.corpus, device=ctx.device, report=report)


def predict_seconds(ctx: Context, hp: dict, width: int) -> float:
    """Seconds a full trial should take, from a short probe of the same width and batch size."""
    key = (width, int(hp["batch_size"]))
    if key not in ctx._probe:
        seq = ctx.plan.family.seq_len
        r = run_training(ctx, dict(hp, warmup_fraction=0.0), width=width, seed=0,
                         tokens=PROBE_STEPS * key[1] * seq, n_evals=2)
        # The first step and the first evaluation pay one-time costs (allocator, kernels), so
        # time the steady state: the median later step, the last of two evaluations.
        step_s = float(np.median(r.step_seconds[2:] or r.step_seconds))
        eval_s = r.eval_seconds[-1] if r.eval_seconds else 0.0
        setup_s = r.seconds - r.train_seconds - sum(r.eval_seconds)  # build, data: once a trial
        ctx._probe[key] = (step_s, eval_s, setup_s, r.seconds)
    step_s, eval_s, setup_s, _ = ctx._probe[key]
    steps = int(ctx.cfg.train.tokens) // (key[1] * ctx.plan.family.seq_len)
    return setup_s + steps * step_s + ctx.cfg.train.n_evals * eval_s


def probe_seconds(ctx: Context) -> float:
    return sum(v[3] for v in ctx._probe.values())


# ---- studies ------------------------------------------------------------------------------
def study_name(run_name: str, index: int, stage: str) -> str:
    return f"{run_name}:{index:02d}-{stage}"


def make_pruner(cfg, steps_in_warmup: int) -> optuna.pruners.BasePruner:
    kind = cfg.pruner.kind
    warm = max(cfg.pruner.warmup_evals, steps_in_warmup)
    if kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=warm)
    if kind == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=warm + 1, reduction_factor=2)
    return optuna.pruners.NopPruner()


def open_study(ctx: Context, index: int, stage: str) -> optuna.Study:
    cfg = ctx.cfg
    evals_in_warmup = math.ceil(cfg.train.warmup_fraction * cfg.train.n_evals)

    def sampler(existing: int) -> optuna.samplers.TPESampler:
        return optuna.samplers.TPESampler(
            seed=(cfg.proxy.seed + 101 * index + 7 * ctx.worker + 1_000_003 * existing) % 2**32,
            n_startup_trials=3, constant_liar=cfg.workers > 1 or cfg.storage.kind == "postgres")

    study = optuna.create_study(study_name=study_name(ctx.run_name, index, stage),
                                storage=ctx.storage, sampler=sampler(0), direction="minimize",
                                pruner=make_pruner(cfg, evals_in_warmup), load_if_exists=True)
    # A resumed process would otherwise replay the killed one's random draws and train
    # finished configurations again; a fresh stage (no trials yet) keeps the plain seed.
    existing = len(study.get_trials(deepcopy=False))
    if existing:
        study.sampler = sampler(existing)
    return study


def stage_space(cfg, stage: str, frozen: dict) -> dict:
    """The stage's search space; `*_refine` stages narrow lr to ±1 octave around the winner."""
    space = {k: cfg.stages.stage[stage].params[k] for k in cfg.stages.stage[stage].params}
    if stage.endswith("_refine") and "lr" in space and "lr" in frozen:
        p, lr = space["lr"], float(frozen["lr"])
        space["lr"] = SimpleNamespace(type="float", low=max(p.low, lr / 2),
                                      high=min(p.high, lr * 2), log=True)
    return space


def _suggest(trial: optuna.Trial, name: str, p) -> Any:
    if p.type == "categorical":
        return trial.suggest_categorical(name, list(p.choices))
    if p.type == "int":
        return trial.suggest_int(name, int(p.low), int(p.high), log=bool(p.log))
    return trial.suggest_float(name, float(p.low), float(p.high), log=bool(p.log))


def stage_winners(study: optuna.Study) -> dict:
    best = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    if not best:
        return {}
    return dict(min(best, key=lambda t: (t.value, t.number)).params)


# ---- worker coordination ------------------------------------------------------------------
def close_orphans(study: optuna.Study) -> int:
    """Fail RUNNING trials whose process is gone and re-queue their parameters. Returns count.

    Called under the run lock, where every trial gets its owner right after `ask`, so a RUNNING
    trial without an owner was left by a process killed inside that window.
    """
    fail_stale(study)  # RDB: heartbeats; the storage's retry callback re-queues those itself
    # Reap local workers (`workers=N`) that died: until reaped, a dead child is a zombie whose
    # pid still answers the liveness probe, and its trial would be waited for forever.
    multiprocessing.active_children()
    closed = set(close_orphaned_trials(study))
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if OWNER_ATTR not in t.user_attrs and OWNER_ATTR not in t.system_attrs:
            study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
            closed.add(t.number)
    for t in study.get_trials(deepcopy=False):
        if t.number in closed:
            study.enqueue_trial(t.params, user_attrs={"retry_of": t.number})
    return len(closed)


class _Heartbeat:
    """Record Optuna heartbeats for one trial while it trains (RDB storage only)."""

    def __init__(self, storage, trial_id: int):
        interval = getattr(storage, "get_heartbeat_interval", lambda: None)()
        self.storage, self.trial_id, self.interval = storage, trial_id, interval
        self.stop = threading.Event()

    def __enter__(self):
        if self.interval:
            self.storage.record_heartbeat(self.trial_id)
            self.thread = threading.Thread(target=self._beat, daemon=True)
            self.thread.start()
        return self

    def _beat(self):
        while not self.stop.wait(self.interval):
            self.storage.record_heartbeat(self.trial_id)

    def __exit__(self, *exc):
        self.stop.set()


def take_trial(ctx: Context, study: optuna.Study, total: int | None) -> optuna.Trial | str:
    """Under the run lock: a trial to run, or "done" (stage finished) or "wait" (others busy).

    `total` None means: run only queued (WAITING) trials — the validator enqueues its grid.
    """
    with ctx.lock():
        close_orphans(study)
        trials = study.get_trials(deepcopy=False)
        finished = sum(t.state in FINISHED for t in trials)
        waiting = sum(t.state == TrialState.WAITING for t in trials)
        running = sum(t.state == TrialState.RUNNING for t in trials)
        # Queued trials (incumbent, retries, the validator's grid) are popped first by `ask`;
        # with a stage count, a leftover duplicate retry never pushes the stage past it.
        if (waiting if total is None else finished + running < total):
            trial = study.ask()
            mark_owner(trial)
            return trial
        return "wait" if running else "done"


def n_finished(study: optuna.Study) -> int:
    return sum(t.state in FINISHED for t in study.get_trials(deepcopy=False))


def work(ctx: Context, study: optuna.Study, total: int | None) -> Iterator[optuna.Trial]:
    """This worker's trials of `study`, one at a time, until the study needs no more; waits
    while other workers finish the last ones, and stops at the spending cap."""
    while True:
        check_cap(ctx)
        trial = take_trial(ctx, study, total)
        if trial == "done":
            return
        if trial == "wait":
            time.sleep(1.0)
            continue
        yield trial


def check_cap(ctx: Context) -> None:
    c = ctx.cfg.cost
    if ctx.spent is None or (c.max_tuning_gpu_hours is None and c.max_wall_seconds is None):
        return
    seconds, device_hours = ctx.spent()
    if c.max_wall_seconds is not None and seconds > c.max_wall_seconds:
        raise BudgetStop(f"stopped: tuning took {seconds:.0f} s > cost.max_wall_seconds="
                         f"{c.max_wall_seconds}; finished trials are kept, raise the cap and re-run "
                         "the same command to continue")
    if c.max_tuning_gpu_hours is not None and device_hours > c.max_tuning_gpu_hours:
        raise BudgetStop(f"stopped: tuning used {device_hours:.3g} device-hours > "
                         f"cost.max_tuning_gpu_hours={c.max_tuning_gpu_hours}; finished trials are "
                         "kept, raise the cap and re-run the same command to continue")


def run_one(ctx: Context, study: optuna.Study, trial: optuna.Trial, hp: dict, *, width: int,
            seed: int, stage: str, prune: bool = True) -> None:
    """Train one trial, report intermediates to the pruner, tell the outcome."""
    predicted = predict_seconds(ctx, hp, width)

    def report(index: int, value: float) -> bool:
        trial.report(value, index)
        return prune and trial.should_prune()

    try:
        with _Heartbeat(study._storage, trial._trial_id):
            res = run_training(ctx, hp, width=width, seed=seed, report=report)
    except BaseException:
        study.tell(trial, state=TrialState.FAIL)
        raise
    for k, v in {"stage": stage, "width": width, "seed": seed, "seconds": res.seconds,
                 "tokens": res.tokens, "flops": res.flops, "diverged": res.diverged,
                 "reason": res.reason, "predicted_seconds": predicted, "device": res.device,
                 "tokens_per_s": res.tokens_per_s, "hparams": {k: hp[k] for k in sorted(hp)}
                 }.items():
        trial.set_user_attr(k, v)
    if res.diverged:
        if math.isfinite(res.last_finite_loss):  # the pruner and TPE still learn from it
            trial.report(res.last_finite_loss, len(res.curve))
        study.tell(trial, state=TrialState.PRUNED)
    elif res.stopped:
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, res.val_loss)


def frozen_before(ctx: Context, upto: int) -> dict:
    """Defaults overwritten by the winners of stages 0..upto-1, in order."""
    hp = default_hparams(ctx.cfg)
    for i, name in enumerate(ctx.cfg.stages.order[:upto]):
        study = open_study(ctx, i, name)
        won = stage_winners(study)
        if not won:
            raise UserError(f"stage {name!r} has no completed trial (all diverged or were pruned); "
                            f"lower or widen stages.stage.{name}.params and re-run")
        hp.update(won)
    return hp


def _in_space(value, p) -> bool:
    if p.type == "categorical":
        return value in list(p.choices)
    return p.low <= value <= p.high


def _distribution(p) -> optuna.distributions.BaseDistribution:
    if p.type == "categorical":
        return optuna.distributions.CategoricalDistribution(list(p.choices))
    if p.type == "int":
        return optuna.distributions.IntDistribution(int(p.low), int(p.high), log=bool(p.log))
    return optuna.distributions.FloatDistribution(float(p.low), float(p.high), log=bool(p.log))


def best_trial(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return min(done, key=lambda t: (t.value, t.number)) if done else None


def seed_incumbent(ctx: Context, study: optuna.Study, space: dict, hp: dict) -> None:
    """Queue the values frozen so far as a new study's first trial (to be trained)."""
    with ctx.lock():
        if study.get_trials(deepcopy=False):
            return
        incumbent = {k: hp[k] for k in space if _in_space(hp[k], space[k])}
        if len(incumbent) == len(space):
            study.enqueue_trial(incumbent, user_attrs={"incumbent": True})


def seed_stage(ctx: Context, study: optuna.Study, space: dict, hp: dict,
               previous: optuna.trial.FrozenTrial | None, trials: int, stage: str) -> None:
    """Open a stage with what is already known, so it can only improve and never repeats work.

    The incumbent (the values frozen so far) was trained by the previous stage's best trial at
    the same width, seed and tokens; training is deterministic, so its result is copied in as
    this stage's first trial instead of being trained again. A stage over one categorical
    parameter (batch size) is not sampled at all: its other choices are queued nearest to the
    incumbent first, as many as the stage has trials, so no choice is ever trained twice.
    """
    with ctx.lock():
        if study.get_trials(deepcopy=False):
            return
        incumbent = {k: hp[k] for k in space if _in_space(hp[k], space[k])}
        if previous is not None and len(incumbent) == len(space):
            study.add_trial(optuna.trial.create_trial(
                params=incumbent, distributions={k: _distribution(space[k]) for k in space},
                value=previous.value, intermediate_values=previous.intermediate_values,
                user_attrs={**previous.user_attrs, "incumbent": True, "seconds": 0.0,
                            "flops": 0.0, "tokens": 0, "predicted_seconds": 0.0,
                            "stage": stage, "copied_from_trial": previous.number}))
        if len(space) == 1:
            name, p = next(iter(space.items()))
            if p.type == "categorical":
                choices = list(p.choices)
                here = choices.index(incumbent[name]) if name in incumbent else 0
                others = sorted((c for c in choices if c != incumbent.get(name)),
                                key=lambda c: (abs(choices.index(c) - here), choices.index(c)))
                for choice in others[:trials - len(study.get_trials(deepcopy=False))]:
                    study.enqueue_trial({name: choice})


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
        ctx.progress.stage_start(name, min(n_finished(study), total), total)
        for trial in work(ctx, study, total):
            trial_hp = dict(hp, **{k: _suggest(trial, k, p) for k, p in space.items()})
            run_one(ctx, study, trial, trial_hp, width=ctx.plan.width, seed=cfg.proxy.seed,
                    stage=name)
            done = n_finished(study)
            best = stage_winners(study)
            best_v = study.best_value if best else None
            ctx.progress.update(min(done, total), best_v, best)
        ctx.progress.stage_end()
    return frozen_before(ctx, len(cfg.stages.order))


def summarize(ctx: Context) -> list[StageSummary]:
    out = []
    for index, name in enumerate(ctx.cfg.stages.order):
        study = open_study(ctx, index, name)
        trials = study.get_trials(deepcopy=False)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        best = min(complete, key=lambda t: (t.value, t.number)) if complete else None
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
