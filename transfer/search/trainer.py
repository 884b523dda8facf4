"""Train one proxy for a token budget and measure it honestly.

The objective is the loss on a fixed held-out set. Intermediate validation losses are reported at
evenly spaced points through `report` (the sweep's pruner listens there; this module knows nothing
of Optuna). A NaN/inf loss or a loss far above the initial loss stops training at once.
"""

from __future__ import annotations

import contextlib
import copy
import math
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

import torch
import torch.nn.functional as F

from transfer.core.config import SCHEDULES
from transfer.core.data import Corpus, eval_batches, sample_batch
from transfer.core.protocol import ProxyFamily

# wsd: warmup, a constant lr, then a linear cooldown over the last `cooldown_fraction` of the
# steps to min_lr_fraction (Hägele et al. 2024, arXiv 2405.18392: constant lr + a cooldown of
# ~20 % of the run matches cosine, and the constant part is shared by every horizon: one run
# branched into cooldowns measures many horizons, `transfer.search.branched`).
DEFAULT_COOLDOWN_FRACTION = 0.2


@dataclass(frozen=True)
class TrainSpec:
    width: int
    lr: float  # base learning rate (μP: as at base width; MuAdamW rescales hidden matrices)
    batch_size: int = 16
    tokens: int = 16 * 128 * 200  # token budget; steps = tokens // (batch_size * seq_len)
    warmup_fraction: float = 0.05  # of total steps, linear from 0
    schedule: str = "cosine"  # decay after warmup, to min_lr_fraction × lr
    min_lr_fraction: float = 0.1
    cooldown_fraction: float = DEFAULT_COOLDOWN_FRACTION  # wsd: the decaying share of the steps
    # Warmup steps when set (else warmup_fraction × steps): wsd runs of several horizons share
    # one warmup, as the branches of one constant-lr run do.
    warmup_steps: int | None = None
    weight_decay: float = 0.0  # regularisation does not transfer under μP; off by default
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8  # Adam ε at base width and depth; per group by the rules (transfer.core.params)
    grad_clip: float = 1.0
    n_evals: int = 4  # intermediate validation points (the last one is the final loss)
    eval_batches: int = 8  # fixed held-out set = eval_batches × eval_batch_size windows
    eval_batch_size: int = 16
    divergence_factor: float = 1.5  # stop when train loss > factor × initial loss
    seed: int = 0

    def steps(self, seq_len: int) -> int:
        return self.tokens // (self.batch_size * seq_len)

    def warmup(self, total: int) -> int:
        """Warmup steps of a run of `total` steps."""
        return self.warmup_steps if self.warmup_steps is not None else int(
            self.warmup_fraction * total)

    def check(self, seq_len: int) -> None:
        """Raise ValueError naming the field when the spec cannot be trained."""
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        steps = self.steps(seq_len)
        if steps < 1:
            raise ValueError(f"tokens={self.tokens} is less than one batch "
                             f"({self.batch_size}×{seq_len}); raise the token budget")
        if not 0 <= self.warmup_fraction < 1 or self.warmup(steps) >= steps:
            raise ValueError(f"warmup_fraction={self.warmup_fraction} leaves no steps after warmup "
                             f"({steps} steps); use a fraction below 1")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.schedule == "wsd":
            if not 0 < self.cooldown_fraction <= 1:
                raise ValueError(f"cooldown_fraction must be in (0, 1], got "
                                 f"{self.cooldown_fraction}")
            if self.warmup(steps) > cooldown_start(steps, self.cooldown_fraction):
                raise ValueError(
                    f"warmup of {self.warmup(steps)} steps runs into the cooldown, which starts "
                    f"at step {cooldown_start(steps, self.cooldown_fraction)} of {steps}; raise "
                    "the token budget or shorten the warmup")
        if self.n_evals < 1:
            raise ValueError(f"n_evals must be >= 1, got {self.n_evals}")


@dataclass
class TrainResult:
    val_loss: float  # final held-out loss; inf when diverged or stopped before the end
    diverged: bool
    stopped: bool  # stopped early by `report` (pruned)
    reason: str
    curve: list[tuple[int, float]]  # (step, held-out loss) at each evaluation
    train_losses: list[float]
    last_finite_loss: float
    steps: int
    tokens: int  # tokens actually trained on
    seconds: float  # wall seconds, evaluation included
    train_seconds: float  # forward/backward/step only
    step_seconds: list[float]  # each step's wall time (the first ones include warm-up)
    eval_seconds: list[float]  # each held-out evaluation's wall time
    tokens_per_s: float
    peak_memory_bytes: int
    flops: float  # 6·N·tokens + attention term, for the tokens actually trained on
    device: str
    n_params: int

    def to_dict(self) -> dict:
        return asdict(self)


def pick_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but CUDA is not available; use device=auto or cpu")
    return torch.device(device)


@runtime_checkable
class GroupedFamily(Protocol):
    """A family that classifies its own parameters (proxies.TransformerFamily): its AdamW groups
    carry the width and depth rules and per-group ε (transfer.core.params)."""

    def param_groups(self, model: torch.nn.Module, *, lr: float, weight_decay: float = 0.0,
                     eps: float = 1e-8) -> list[dict]: ...


def make_optimizer(model: torch.nn.Module, spec: TrainSpec, parametrization: str,
                   family: object | None = None):
    """AdamW on the family's classified groups when it has them (`GroupedFamily`); otherwise
    μP-scaled (MuAdamW, width rules only) or plain. Decay only on matrices, as is usual."""
    if isinstance(family, GroupedFamily):
        groups = family.param_groups(model, lr=spec.lr, weight_decay=spec.weight_decay,
                                     eps=spec.eps)
        return torch.optim.AdamW(groups, lr=spec.lr, betas=spec.betas)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": spec.weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    if parametrization == "mup":
        from mup import MuAdamW

        return MuAdamW(groups, lr=spec.lr, betas=spec.betas)
    return torch.optim.AdamW(groups, lr=spec.lr, betas=spec.betas)


def cooldown_start(total: int, fraction: float) -> int:
    """The first step of a wsd run's cooldown: the last round(fraction × total) steps decay."""
    return total - max(1, round(fraction * total))


def lr_multiplier(step: int, total: int, spec: TrainSpec) -> float:
    """Linear warmup from 0, then cosine or linear decay to `min_lr_fraction`; or (wsd) the
    peak until `cooldown_start`, then linearly down to `min_lr_fraction` at the last step."""
    warmup = spec.warmup(total)
    if step < warmup:
        return (step + 1) / warmup
    if spec.schedule == "wsd":
        start = cooldown_start(total, spec.cooldown_fraction)
        if step < start:
            return 1.0
        progress = (step - start + 1) / (total - start)
        return 1 - (1 - spec.min_lr_fraction) * progress
    progress = (step - warmup) / max(1, total - warmup)
    if spec.schedule == "cosine":
        shape = 0.5 * (1 + math.cos(math.pi * progress))
    else:
        shape = 1 - progress
    return spec.min_lr_fraction + (1 - spec.min_lr_fraction) * shape


@torch.no_grad()
def evaluate(model, batches, device, autocast) -> float:
    model.eval()
    total, n = 0.0, 0
    for x, y in batches:
        with autocast():
            logits = model(x.to(device))
        total += F.cross_entropy(logits.float().flatten(0, 1), y.to(device).flatten(),
                                 reduction="sum").item()
        n += y.numel()
    model.train()
    return total / n


def _autocast_for(device: torch.device):
    if device.type == "cuda":
        return lambda: torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext


class Stepper:
    """One training's moving parts: the model, its optimizer, the data order. `step(mult)`
    trains one step at `mult` × the peak lr; `state()` / `restore()` checkpoint all three in
    memory (a branched run's cooldowns start from one constant-lr run: `transfer.search.branched`)."""

    def __init__(self, family: ProxyFamily, spec: TrainSpec, corpus: Corpus, dev: torch.device,
                 model=None):
        self.spec, self.corpus, self.dev = spec, corpus, dev
        self.seq_len = family.seq_len
        self.autocast = _autocast_for(dev)
        self.model = model if model is not None else family.build(spec.width, seed=spec.seed,
                                                                   device=dev)
        self.model.train()
        self.opt = make_optimizer(self.model, spec, family.parametrization, family)
        self.base_lrs = [g["lr"] for g in self.opt.param_groups]
        self.gen = torch.Generator().manual_seed(spec.seed + 7919)  # data order, not init

    def step(self, mult: float) -> float:
        """One optimizer step at lr × `mult`; the training loss before it."""
        for g, lr in zip(self.opt.param_groups, self.base_lrs):
            g["lr"] = lr * mult
        x, y = sample_batch(self.corpus.train, self.spec.batch_size, self.seq_len, self.gen)
        x, y = x.to(self.dev, non_blocking=True), y.to(self.dev, non_blocking=True)
        with self.autocast():
            logits = self.model(x)  # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.spec.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.spec.grad_clip)
        self.opt.step()
        return loss.item()

    def evaluate(self, batches) -> float:
        return evaluate(self.model, batches, self.dev, self.autocast)

    def state(self) -> tuple:
        """A copy of the model's and optimizer's state and of the data order."""
        return (copy.deepcopy(self.model.state_dict()), copy.deepcopy(self.opt.state_dict()),
                self.gen.get_state())

    def restore(self, state: tuple) -> None:
        model, opt, gen = state
        self.model.load_state_dict(model)
        self.opt.load_state_dict(opt)
        self.gen.set_state(gen)


def train(family: ProxyFamily, spec: TrainSpec, corpus: Corpus, *, device: str = "auto",
          report: Callable[[int, float], bool] | None = None, model=None) -> TrainResult:
    """Train `family.build(spec.width)` on `corpus` for `spec.tokens` tokens.

    `report(eval_index, val_loss)` is called at each intermediate evaluation; returning True
    stops training (pruning). `model` may be passed pre-built (custom architectures).
    """
    seq_len = family.seq_len
    spec.check(seq_len)
    dev = pick_device(device)
    start = time.perf_counter()
    run = Stepper(family, spec, corpus, dev, model)
    model = run.model
    held_out = eval_batches(corpus.val, spec.eval_batches, spec.eval_batch_size, seq_len)
    total = spec.steps(seq_len)
    eval_at = {max(1, round(total * (k + 1) / spec.n_evals)) for k in range(spec.n_evals)}
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)

    curve, losses, step_times, eval_times = [], [], [], []
    diverged = stopped = False
    reason, init_loss, last_finite, train_s = "completed", None, math.nan, 0.0
    step = 0
    for step in range(1, total + 1):
        t0 = time.perf_counter()
        value = run.step(lr_multiplier(step - 1, total, spec))
        step_times.append(time.perf_counter() - t0)
        train_s += step_times[-1]
        losses.append(value)
        init_loss = value if init_loss is None else init_loss
        if not math.isfinite(value) or value > spec.divergence_factor * init_loss:
            diverged = True
            reason = (f"diverged at step {step}: loss {value:.3g} "
                      f"(initial {init_loss:.3g}, limit ×{spec.divergence_factor})")
            break
        last_finite = value
        if step in eval_at:
            t_eval = time.perf_counter()
            val = run.evaluate(held_out)
            eval_times.append(time.perf_counter() - t_eval)
            if not math.isfinite(val):
                diverged, reason = True, f"diverged at step {step}: held-out loss {val}"
                break
            curve.append((step, val))
            if report is not None and step < total and report(len(curve) - 1, val):
                stopped, reason = True, f"stopped at step {step} by the pruner"
                break
    seconds = time.perf_counter() - start
    trained = step * spec.batch_size * seq_len
    final = curve[-1][1] if curve and not (diverged or stopped) else math.inf
    peak = (torch.cuda.max_memory_allocated(dev) if dev.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return TrainResult(
        val_loss=final, diverged=diverged, stopped=stopped, reason=reason, curve=curve,
        train_losses=losses, last_finite_loss=last_finite, steps=step, tokens=trained,
        seconds=seconds, train_seconds=train_s, step_seconds=step_times,
        eval_seconds=eval_times, tokens_per_s=trained / max(train_s, 1e-9),
        peak_memory_bytes=int(peak), flops=family.flops_per_token(spec.width) * trained,
        device=str(dev) if dev.type == "cpu" else torch.cuda.get_device_name(dev),
        n_params=sum(p.numel() for p in model.parameters()))
