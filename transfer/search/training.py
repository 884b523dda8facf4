"""One proxy training from the config and a trial's hyperparameters (trials and probes alike)."""

from __future__ import annotations

from transfer.plan.errors import UserError
from transfer.plan.family import MODEL_HPARAMS
from transfer.search.context import Context
from transfer.search.trainer import TrainResult, TrainSpec, train


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
