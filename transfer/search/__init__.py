"""Training one proxy and the staged Optuna search on the smallest ones, one concept per module.

    family    the μP proxy family derived from the target (ProxyPlan)
    progress  progress lines and the ETA
    context   Context (what every worker carries), BudgetStop
    space     a stage's search space; the one place that reads ParamConf.type
    trainer   one proxy training, measured
    training  one proxy training from the config and a trial's hyperparameters
    probe     the timing probe that predicts a trial's seconds
    storage   journal file or PostgreSQL storage; owner processes of trials
    phases    wall seconds measured per phase
    studies   a stage's study (name, sampler, pruner), orphaned trials, its best trial
    cap       the spending cap, checked before every trial
    trial     taking, training and telling one trial under the run lock
    stages    the stages in order, seeded with what is known, and their summaries

Imports flow down this list: a module imports only modules above it.
"""

from transfer.search.cap import enforce_cap
from transfer.search.context import BudgetStop, Context
from transfer.search.probe import PROBE_STEPS, predict_seconds, queued_trials
from transfer.search.space import (
    choices,
    default_hparams,
    distribution,
    grid_points,
    in_space,
    nearest_choices,
    stage_space,
    suggest,
)
from transfer.search.stages import (
    StageSummary,
    frozen_before,
    run_stages,
    seed_incumbent,
    seed_stage,
    summarize,
)
from transfer.search.studies import (
    FINISHED,
    PRUNER_STARTUP_TRIALS,
    best_trial,
    close_orphans,
    make_pruner,
    n_finished,
    open_study,
    pruner_warmup,
    study_name,
)
from transfer.search.training import run_training, train_spec
from transfer.search.trial import run_branched_one, run_one, take_trial, work

__all__ = [
    "FINISHED",
    "PROBE_STEPS",
    "BudgetStop",
    "Context",
    "StageSummary",
    "best_trial",
    "choices",
    "close_orphans",
    "default_hparams",
    "distribution",
    "enforce_cap",
    "frozen_before",
    "grid_points",
    "in_space",
    "make_pruner",
    "pruner_warmup",
    "PRUNER_STARTUP_TRIALS",
    "n_finished",
    "open_study",
    "predict_seconds",
    "queued_trials",
    "run_branched_one",
    "run_one",
    "run_stages",
    "run_training",
    "seed_incumbent",
    "seed_stage",
    "stage_space",
    "nearest_choices",
    "study_name",
    "suggest",
    "summarize",
    "take_trial",
    "train_spec",
    "work",
]
