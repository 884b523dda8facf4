"""One trial: taking it under the run lock, training it with heartbeats, telling its outcome.

Workers (processes on one machine, or machines sharing a PostgreSQL study) all loop over
`work()`. Under the run lock a worker counts the study's trials and takes one only while
finished + running trials are fewer than the stage's count, so counts are exact however many
workers there are. Trials left RUNNING by a dead process are failed (`close_orphans`) and re-run
with the same parameters.
"""

from __future__ import annotations

import math
import threading
import time
import warnings
from collections.abc import Iterator

import optuna
from optuna.trial import TrialState

# training.run_training is looked up at call time (here and in probe.py), so replacing it once
# (tests count and gate trainings that way) reaches every proxy training.
from transfer.search import training
from transfer.search.cap import enforce_cap
from transfer.search.context import Context
from transfer.search.probe import predict_seconds
from transfer.search.storage import mark_owner
from transfer.search.studies import FINISHED, close_orphans


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
            with warnings.catch_warnings():
                # Optuna warns that heartbeats are meant for Study.optimize; _Heartbeat below
                # records them for our own loop, so the warning is noise in every job's log
                warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
                trial = study.ask()
            mark_owner(trial)
            return trial
        return "wait" if running else "done"


def work(ctx: Context, study: optuna.Study, total: int | None) -> Iterator[optuna.Trial]:
    """This worker's trials of `study`, one at a time, until the study needs no more; waits
    while other workers finish the last ones, and stops at the spending cap."""
    while True:
        enforce_cap(ctx)
        trial = take_trial(ctx, study, total)
        if trial == "done":
            return
        if trial == "wait":
            time.sleep(1.0)
            continue
        yield trial


def run_one(ctx: Context, study: optuna.Study, trial: optuna.Trial, hp: dict, *, width: int,
            seed: int, stage: str, prune: bool = True) -> None:
    """Train one trial, report intermediates to the pruner, tell the outcome."""
    predicted = predict_seconds(ctx, hp, width)

    def report(index: int, value: float) -> bool:
        trial.report(value, index)
        return prune and trial.should_prune()

    try:
        with _Heartbeat(study._storage, trial._trial_id):
            res = training.run_training(ctx, hp, width=width, seed=seed, report=report)
    except BaseException:
        study.tell(trial, state=TrialState.FAIL)
        raise
    for k, v in {"stage": stage, "width": width, "seed": seed, "seconds": res.seconds,
                 "tokens": res.tokens, "flops": res.flops, "diverged": res.diverged,
                 "reason": res.reason, "predicted_seconds": predicted, "device": res.device,
                 "tokens_per_s": res.tokens_per_s, "hparams": {k: hp[k] for k in sorted(hp)}
                 }.items():
        trial.set_user_attr(k, v)
    ctx.progress.trial_done(predicted, res.seconds)  # the ETA's measured/predicted ratio
    if res.diverged:
        if math.isfinite(res.last_finite_loss):  # the pruner and TPE still learn from it
            trial.report(res.last_finite_loss, len(res.curve))
        study.tell(trial, state=TrialState.PRUNED)
    elif res.stopped:
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, res.val_loss)


def run_branched_one(ctx: Context, study: optuna.Study, trial: optuna.Trial, hp: dict, *,
                     width: int, seed: int, stage: str, horizons: list[int],
                     predicted: float) -> None:
    """Train one branched wsd run (`training.run_branched`): every horizon's held-out loss in
    `branch_losses` (tokens -> loss, None where diverged); the value is the longest horizon's,
    the state PRUNED where that one diverged (the shorter ones' losses still count)."""
    try:
        with _Heartbeat(study._storage, trial._trial_id):
            res = training.run_branched(ctx, hp, width=width, seed=seed, horizons=horizons)
    except BaseException:
        study.tell(trial, state=TrialState.FAIL)
        raise
    losses = {str(b.tokens): (b.val_loss if math.isfinite(b.val_loss) else None)
              for b in res.branches}
    last = res.branches[-1]
    for k, v in {"stage": stage, "width": width, "seed": seed, "seconds": res.seconds,
                 "tokens": res.tokens, "flops": res.flops, "diverged": last.diverged,
                 "reason": "; ".join(sorted({b.reason for b in res.branches})),
                 "predicted_seconds": predicted, "device": res.device,
                 "branch_losses": losses, "hparams": {k: hp[k] for k in sorted(hp)}}.items():
        trial.set_user_attr(k, v)
    ctx.progress.trial_done(predicted, res.seconds)
    if last.diverged:
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, last.val_loss)
