"""The timing probe: a few steps of a shape, timed before its first full trial, predict it."""

from __future__ import annotations

from datetime import datetime

import numpy as np
from optuna.trial import TrialState

from transfer.search import training  # looked up at call time: see trial.py
from transfer.search.context import Context

PROBE_STEPS = 10  # the "time a few steps before committing" probe, per distinct shape


def predict_seconds(ctx: Context, hp: dict, width: int) -> float:
    """Seconds a full trial should take, from a short probe of the same width and batch size."""
    key = (width, int(hp["batch_size"]))
    if key not in ctx.probes:
        seq = ctx.proxies.family.seq_len
        r = training.run_training(ctx, dict(hp, warmup_fraction=0.0), width=width, seed=0,
                                  tokens=PROBE_STEPS * key[1] * seq, n_evals=2)
        # The first step and the first evaluation pay one-time costs (allocator, kernels), so
        # time the steady state: the median later step, the last of two evaluations.
        step_s = float(np.median(r.step_seconds[2:] or r.step_seconds))
        eval_s = r.eval_seconds[-1] if r.eval_seconds else 0.0
        setup_s = r.seconds - r.train_seconds - sum(r.eval_seconds)  # build, data: once a trial
        ctx.probes[key] = (step_s, eval_s, setup_s)
    step_s, eval_s, setup_s = ctx.probes[key]
    steps = int(ctx.cfg.train.tokens) // (key[1] * ctx.proxies.family.seq_len)
    return setup_s + steps * step_s + ctx.cfg.train.n_evals * eval_s


def measured_ratios(trials, key, predict=None) -> tuple[dict, float]:
    """Measured ÷ predicted seconds of finished trials (every worker's), per `key(params)` and
    over all of them (1.0 before the first). `predict(params)`: the prediction to measure
    against, the one the caller prices with. Without it, each trial's own (`predicted_seconds`),
    which is its worker's probe: a worker probes a shape itself, beside whatever the others
    train, and a ratio to one process's probes scales another's wrongly (a worker's width-256
    probe, taken beside a width-256 trial, priced it at 105 s where the main process's said
    64 s, and the trial took 57 s)."""
    by: dict = {}
    for t in trials:
        s = t.user_attrs.get("seconds")
        if t.state != TrialState.COMPLETE or not s:
            continue
        p = predict(t.params) if predict else t.user_attrs.get("predicted_seconds")
        if p:
            m, q = by.get(key(t.params), (0.0, 0.0))
            by[key(t.params)] = (m + s, q + p)
    total_m, total_p = sum(m for m, _ in by.values()), sum(p for _, p in by.values())
    return {k: m / p for k, (m, p) in by.items()}, total_m / total_p if total_p else 1.0


def running_seconds(trial, now: datetime | None = None) -> float:
    """How long a running trial has run (0 for one that has not started)."""
    start = getattr(trial, "datetime_start", None)
    if trial.state != TrialState.RUNNING or start is None:
        return 0.0
    if start.tzinfo is not None:  # Optuna's storages hand back local naive times; be safe
        start = start.astimezone().replace(tzinfo=None)
    return max(0.0, ((now or datetime.now()) - start).total_seconds())


def unfinished(trials) -> list:
    """The trials still to finish, running ones first, then the waiting ones, each in study
    order: the order the ETA hands them to the workers (`transfer.search.progress.makespan`)."""
    return ([t for t in trials if t.state == TrialState.RUNNING]
            + [t for t in trials if t.state == TrialState.WAITING])


def enqueued_params(trial) -> dict:
    """A grid trial's parameters, also while it waits (enqueued: its fixed ones)."""
    return trial.system_attrs.get("fixed_params", trial.params)


def queued_trials(study, predict, key=None) -> list[tuple[float, float]]:
    """A grid study's trials not finished yet, running ones first, as (seconds, seconds run)
    for `transfer.search.progress`: `predict(params)` for the fixed parameters each was
    enqueued with — with `key` (e.g. the width), scaled by measured ÷ `predict` of the study's
    finished trials of that key (every worker's, against this process's prices:
    `measured_ratios`), or of all of them until one of that key finished: one noisy probe does
    not decide the ETA once a trial of its shape has run."""
    trials = study.get_trials(deepcopy=False)
    ratio, overall = measured_ratios(trials, key, predict) if key else ({}, 1.0)
    now = datetime.now()
    out = []
    for t in unfinished(trials):
        p = enqueued_params(t)
        out.append((predict(p) * (ratio.get(key(p), overall) if key else 1.0),
                    running_seconds(t, now)))
    return out
