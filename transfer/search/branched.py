"""One constant-lr run branched into cooldowns: the held-out loss at several horizons for the
cost of about one run (Hägele et al. 2024, arXiv 2405.18392, Section 3).

Under the warmup-stable-decay schedule (`TrainSpec.schedule == "wsd"`) a run of horizon D is
warmup, the peak lr until `cooldown_start`, then a linear cooldown over its last
`cooldown_fraction`. Runs of different horizons with one warmup (`TrainSpec.warmup_steps`)
share everything up to their cooldowns. So one run trains at the peak lr and, each time it
reaches a horizon's cooldown start, checkpoints the model, the optimizer and the data order in
memory, trains that horizon's cooldown, evaluates it on the held-out batches, and restores the
checkpoint. Each branch's loss is that of a plain wsd run of its horizon (same seed: the same
steps in the same order; `tests/search/test_branched.py` holds them equal).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from transfer.core.data import Corpus, eval_batches
from transfer.core.protocol import ProxyFamily
from transfer.search.trainer import Stepper, TrainSpec, cooldown_start, lr_multiplier, pick_device

__all__ = ["Branch", "BranchedResult", "branch_specs", "train_branched"]


@dataclass
class Branch:
    tokens: int  # the horizon as asked (the key its loss is found under)
    steps: int  # tokens // (batch × context): what it trained
    val_loss: float  # held-out loss after its cooldown; inf when it or the trunk diverged
    diverged: bool
    reason: str


@dataclass
class BranchedResult:
    branches: list[Branch]  # shortest horizon first
    steps: int  # optimizer steps taken in all: the trunk and every cooldown
    tokens: int  # tokens trained on in all
    seconds: float
    flops: float
    device: str

    def losses(self) -> dict[int, float]:
        """horizon tokens -> held-out loss (inf where diverged)."""
        return {b.tokens: b.val_loss for b in self.branches}

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def branch_specs(spec: TrainSpec, horizons: Sequence[int], seq_len: int) -> list[TrainSpec]:
    """The plain wsd run of each horizon (tokens) that a branch reproduces: `spec` with that
    token budget and `spec`'s warmup, which must be set in steps (shared by every branch)."""
    if spec.schedule != "wsd":
        raise ValueError(f"branched cooldowns need schedule='wsd', got {spec.schedule!r}")
    if spec.warmup_steps is None:
        raise ValueError("branched cooldowns need warmup_steps: one warmup shared by every branch")
    if not horizons:
        raise ValueError("horizons is empty; give at least one token budget")
    specs = [dataclasses.replace(spec, tokens=int(t)) for t in sorted(set(horizons))]
    for s in specs:
        s.check(seq_len)
    return specs


def train_branched(family: ProxyFamily, spec: TrainSpec, corpus: Corpus,
                   horizons: Sequence[int], *, device: str = "auto") -> BranchedResult:
    """Train `family.build(spec.width)` once at the peak lr and cool it down at every horizon
    (tokens): each horizon's held-out loss, as a plain wsd run of that many tokens would give.
    The trunk stops at the first divergence; every horizon not yet reached is then diverged."""
    seq_len = family.seq_len
    specs = branch_specs(spec, horizons, seq_len)
    dev = pick_device(device)
    start = time.perf_counter()
    run = Stepper(family, spec, corpus, dev)
    held_out = eval_batches(corpus.val, spec.eval_batches, spec.eval_batch_size, seq_len)
    plans = [(s, s.steps(seq_len), cooldown_start(s.steps(seq_len), s.cooldown_fraction))
             for s in specs]
    branches: list[Branch] = []
    init_loss, step, taken, trunk_reason = None, 0, 0, None
    for s, total, cool in plans:  # cooldown starts ascend with the horizons
        while trunk_reason is None and step < cool:  # the trunk: warmup, then the peak lr
            value = run.step(lr_multiplier(step, total, s))
            step, taken = step + 1, taken + 1
            init_loss = value if init_loss is None else init_loss
            if not math.isfinite(value) or value > spec.divergence_factor * init_loss:
                trunk_reason = (f"the constant-lr run diverged at step {step}: loss {value:.3g} "
                                f"(initial {init_loss:.3g}, limit ×{spec.divergence_factor})")
        if trunk_reason is not None:
            branches.append(Branch(s.tokens, total, math.inf, True, trunk_reason))
            continue
        checkpoint = run.state()
        loss, reason = _cooldown(run, s, total, cool, init_loss, held_out)
        taken += total - cool
        run.restore(checkpoint)
        branches.append(Branch(s.tokens, total, loss, not math.isfinite(loss), reason))
    trained = taken * spec.batch_size * seq_len
    return BranchedResult(branches=branches, steps=taken, tokens=trained,
                          seconds=time.perf_counter() - start,
                          flops=family.flops_per_token(spec.width) * trained,
                          device=str(dev) if dev.type == "cpu" else torch.cuda.get_device_name(dev))


def _cooldown(run: Stepper, spec: TrainSpec, total: int, start: int, init_loss: float | None,
              held_out) -> tuple[float, str]:
    """Steps `start` .. `total` of `spec`'s schedule from the trunk's state, then the held-out
    loss: (loss, "completed"), or (inf, why) when it diverged."""
    for step in range(start, total):
        value = run.step(lr_multiplier(step, total, spec))
        init = value if init_loss is None else init_loss
        if not math.isfinite(value) or value > spec.divergence_factor * init:
            return math.inf, f"the cooldown diverged at step {step + 1}: loss {value:.3g}"
    val = run.evaluate(held_out)
    if not math.isfinite(val):
        return math.inf, f"held-out loss {val} after the cooldown"
    return val, "completed"
