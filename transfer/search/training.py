"""One proxy training from the config and a trial's hyperparameters (trials and probes alike)."""

from __future__ import annotations

from dataclasses import replace

from transfer.core import scaling
from transfer.core.errors import UserError
from transfer.search.branched import BranchedResult, train_branched
from transfer.search.context import Context
from transfer.search.family import MODEL_HPARAMS
from transfer.search.trainer import TrainResult, TrainSpec, train

# Below this many steps the timescale rule's per-step decay η·λ = 1/(τ·steps) exceeds ½ at the
# peak lr and the weights are rebuilt from a couple of updates: no longer the regime it models.
MIN_TIMESCALE_STEPS = 2


def proxy_weight_decay(cfg, *, lr: float, steps: int) -> float:
    """λ for a proxy trial of `steps` steps at base lr `lr`: the target's AdamW timescale τ (a
    fraction of the run: λ = B/(τ·η·D) = 1/(τ·η·steps)), or `train.weight_decay` under
    `train.weight_decay_rule=fixed`."""
    t = cfg.train
    if t.weight_decay_rule == "fixed":
        return float(t.weight_decay)
    if t.weight_decay_rule != "timescale":
        raise UserError(f"train.weight_decay_rule={t.weight_decay_rule!r}; use timescale or fixed")
    r = cfg.scaling.tau_recipe
    tau = scaling.adamw_timescale(r["batch_tokens"], r["lr"], r["weight_decay"], r["tokens"])
    if not tau * steps >= MIN_TIMESCALE_STEPS:
        raise UserError(
            f"train.weight_decay_rule=timescale: the target's AdamW timescale (τ = {tau:.3g} of "
            f"the run) is {tau * steps:.2g} steps of a {steps}-step trial, under "
            f"{MIN_TIMESCALE_STEPS}: the decay would swamp every update; raise train.tokens or "
            "use train.weight_decay_rule=fixed")
    return scaling.weight_decay_for_timescale(tau, 1.0, lr, float(steps))


def train_spec(cfg, hp: dict, *, width: int, seed: int, seq_len: int, tokens: int | None = None,
               n_evals: int | None = None) -> TrainSpec:
    """The trial's training: its hyperparameters, the budget's tokens and evaluations, and the
    target's recipe (`scaling`: schedule, betas, ε, clipping, the weight-decay timescale)."""
    t, s = cfg.train, cfg.scaling
    lr, batch, tokens = float(hp["lr"]), int(hp["batch_size"]), int(tokens or t.tokens)
    # the decay of a trial of train.tokens (a timing probe's few steps time that trial)
    steps = int(t.tokens) // (batch * seq_len)
    return TrainSpec(width=width, lr=lr, batch_size=batch, tokens=tokens,
                     warmup_fraction=float(hp["warmup_fraction"]), schedule=s.schedule,
                     min_lr_fraction=float(s.min_lr_fraction),
                     cooldown_fraction=float(s.wsd_cooldown_fraction),
                     betas=(float(s.betas[0]), float(s.betas[1])), eps=float(s.eps),
                     weight_decay=proxy_weight_decay(cfg, lr=lr, steps=steps),
                     grad_clip=float(s.grad_clip), n_evals=n_evals or t.n_evals,
                     eval_batches=t.eval_batches, eval_batch_size=t.eval_batch_size,
                     divergence_factor=t.divergence_factor, seed=seed)


def horizon_tokens(cfg) -> list[int]:
    """The branched horizons: train.tokens × each of `validation.horizon_multiples`, shortest
    first."""
    return sorted({int(round(float(m) * int(cfg.train.tokens)))
                   for m in cfg.validation.horizon_multiples})


def branched_spec(cfg, hp: dict, *, width: int, seed: int, seq_len: int,
                  horizons: list[int]) -> TrainSpec:
    """The trial's wsd training for `run_branched`: its recipe (`train_spec`) at the longest
    horizon, with one warmup for every branch: the trial's warmup fraction of the shortest
    horizon's steps, held fixed in steps beyond it (Hägele et al. 2024 keep the warmup fixed
    across run lengths; a target's own warmup is a vanishing share of its run)."""
    spec = train_spec(cfg, hp, width=width, seed=seed, seq_len=seq_len, tokens=max(horizons))
    shortest = min(horizons) // (spec.batch_size * seq_len)
    return replace(spec, warmup_steps=int(spec.warmup_fraction * shortest))


def run_branched(ctx: Context, hp: dict, *, width: int, seed: int,
                 horizons: list[int] | None = None) -> BranchedResult:
    """One wsd run at `hp` branched into a cooldown at every horizon (tokens; default
    `horizon_tokens`): each horizon's held-out loss (`transfer.search.branched`)."""
    family = ctx.proxies.family.replace(**{k: float(hp[k]) for k in MODEL_HPARAMS})
    horizons = horizons or horizon_tokens(ctx.cfg)
    spec = branched_spec(ctx.cfg, hp, width=width, seed=seed, seq_len=family.seq_len,
                         horizons=horizons)
    try:
        return train_branched(family, spec, ctx.corpus, horizons, device=ctx.device)
    except ValueError as e:
        raise UserError(f"train (branched horizons {horizons}): {e}") from None


def run_training(ctx: Context, hp: dict, *, width: int, seed: int, report=None,
                 tokens: int | None = None, n_evals: int | None = None) -> TrainResult:
    family = ctx.proxies.family.replace(**{k: float(hp[k]) for k in MODEL_HPARAMS})
    spec = train_spec(ctx.cfg, hp, width=width, seed=seed, seq_len=family.seq_len, tokens=tokens,
                      n_evals=n_evals)
    try:
        spec.check(family.seq_len)
    except ValueError as e:
        raise UserError(f"train: {e}") from None
    return train(family, spec, ctx.corpus, device=ctx.device, report=report)
