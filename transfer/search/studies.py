"""A stage's Optuna study: its name, sampler and pruner, the trials dead workers left, and its best.

Every study of a run is named `<run>:<index>-<stage>`; a resumed or second worker opens the
same study. `best_trial` is the one rule for "the stage's winner", whoever asks.
"""

from __future__ import annotations

import math
import multiprocessing

import optuna
from optuna.trial import FrozenTrial, TrialState

from transfer.search.context import Context
from transfer.search.storage import OWNER_ATTR, close_orphaned_trials, fail_stale

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def study_name(run_name: str, index: int, stage: str) -> str:
    return f"{run_name}:{index:02d}-{stage}"


PRUNER_STARTUP_TRIALS = 2  # the median pruner compares against this many finished trials first


def pruner_warmup(cfg) -> int:
    """Evaluations before a trial can be pruned: `pruner.warmup_evals`, and never inside the lr
    warmup."""
    evals_in_warmup = math.ceil(cfg.train.warmup_fraction * cfg.train.n_evals)
    return max(cfg.pruner.warmup_evals, evals_in_warmup)


def make_pruner(cfg) -> optuna.pruners.BasePruner:
    kind = cfg.pruner.kind
    warm = pruner_warmup(cfg)
    if kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=PRUNER_STARTUP_TRIALS,
                                           n_warmup_steps=warm)
    if kind == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=warm + 1, reduction_factor=2)
    return optuna.pruners.NopPruner()


def open_study(ctx: Context, index: int, stage: str) -> optuna.Study:
    cfg = ctx.cfg

    def sampler(existing: int) -> optuna.samplers.TPESampler:
        return optuna.samplers.TPESampler(
            seed=(cfg.proxy.seed + 101 * index + 7 * ctx.worker + 1_000_003 * existing) % 2**32,
            n_startup_trials=3, constant_liar=cfg.workers > 1 or cfg.storage.kind == "postgres")

    study = optuna.create_study(study_name=study_name(ctx.run_name, index, stage),
                                storage=ctx.storage, sampler=sampler(0), direction="minimize",
                                pruner=make_pruner(cfg), load_if_exists=True)
    # A resumed process would otherwise replay the killed one's random draws and train
    # finished configurations again; a fresh stage (no trials yet) keeps the plain seed.
    existing = len(study.get_trials(deepcopy=False))
    if existing:
        study.sampler = sampler(existing)
    return study


def best_trial(study: optuna.Study) -> FrozenTrial | None:
    """The completed trial of lowest loss, the earliest among equals; None if none completed.
    Pruned and diverged trials never win."""
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return min(done, key=lambda t: (t.value, t.number)) if done else None


def n_finished(study: optuna.Study) -> int:
    return sum(t.state in FINISHED for t in study.get_trials(deepcopy=False))


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
