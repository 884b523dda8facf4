"""The timing probe: a few steps of a shape, timed before its first full trial, predict it."""

from __future__ import annotations

import numpy as np
from optuna.trial import TrialState

from transfer.search import training  # looked up at call time: see trial.py
from transfer.search.context import Context

PROBE_STEPS = 10  # the "time a few steps before committing" probe, per distinct shape


def predict_seconds(ctx: Context, hp: dict, width: int) -> float:
    """Seconds a full trial should take, from a short probe of the same width and batch size."""
    key = (width, int(hp["batch_size"]))
    if key not in ctx._probe:
        seq = ctx.plan.family.seq_len
        r = training.run_training(ctx, dict(hp, warmup_fraction=0.0), width=width, seed=0,
                                  tokens=PROBE_STEPS * key[1] * seq, n_evals=2)
        # The first step and the first evaluation pay one-time costs (allocator, kernels), so
        # time the steady state: the median later step, the last of two evaluations.
        step_s = float(np.median(r.step_seconds[2:] or r.step_seconds))
        eval_s = r.eval_seconds[-1] if r.eval_seconds else 0.0
        setup_s = r.seconds - r.train_seconds - sum(r.eval_seconds)  # build, data: once a trial
        ctx._probe[key] = (step_s, eval_s, setup_s)
    step_s, eval_s, setup_s = ctx._probe[key]
    steps = int(ctx.cfg.train.tokens) // (key[1] * ctx.plan.family.seq_len)
    return setup_s + steps * step_s + ctx.cfg.train.n_evals * eval_s


def queued_seconds(study, predict) -> float:
    """Predicted seconds of a grid study's trials not finished yet: `predict(params)` for the
    fixed parameters each queued (waiting or running) trial was enqueued with."""
    return sum(predict(t.system_attrs.get("fixed_params", t.params))
               for t in study.get_trials(deepcopy=False)
               if t.state in (TrialState.WAITING, TrialState.RUNNING))
