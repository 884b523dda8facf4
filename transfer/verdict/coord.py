"""Numeric coordinate check: do activation sizes stay flat as width grows?

Under μP every activation coordinate stays Θ(1) with width during training; under SP with Adam
at a fixed learning rate, hidden activations and logits grow roughly ∝ width. We train each width
for a few steps on one fixed batch with `mup.coord_check.get_coord_data`, take the mean |x| (l1)
of every module's output at the last step, averaged over `seeds` initialisations (each with its
own batch), and fit the slope of log2(l1) against log2(width). A flat family has slopes near 0;
the check passes when every slope is within `max_slope`. One seed's slope scatters by ±0.1 or
more around the mean (Llama 3.2's proxies: 0.09-0.33 over 8 seeds, their mean's 0.05; SP's
2.1-3.0), so a single-seed check passes or fails by the draw (benchmarks/RESULTS.md, the
coordinate check over seeds).

Works for any family exposing `.build(width, seed=...)`, `.parametrization`, `.seq_len` and
`.vocab_size`.

Across depth (`depth_coord_check`): the same measurement at one width over depths, of the final
residual stream (the last block's output) and the logits — CompleteP's Fig. 7 (Dey et al. 2025;
nanoGPT-mup `completep_examples/coord_check_shakespeare_char`): under width-only μP the final
residual grows about ∝ depth after a few Adam steps, under α = ½ or 1 it stays flat. Trained with
the family's own optimizer groups, so the depth lr and ε rules are in the measurement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from transfer.core.data import Corpus, sample_batch
from transfer.judge.verdict import MIN_SIZES_TO_REJECT
from transfer.search.trainer import TrainSpec, make_optimizer

LOGITS = "logits"  # kind name of the model's own output (the root module)
COORD_BATCH = 8  # sequences in the coordinate checks' one fixed batch


PASSED, REJECTED, INCONCLUSIVE = "passed", "rejected", "inconclusive"
CONFIDENCE = 0.90  # of the max |slope| interval, as the lr verdict's (validation.confidence)
N_BOOT = 2000  # seed resamples of the interval


@dataclass
class CoordResult:
    df: pd.DataFrame  # raw records from get_coord_data: width, module, t, l1
    slopes: dict[str, float]  # module kind -> d log2(l1) / d log2(width) at the last step
    max_abs_slope: float  # over every kind in `slopes`
    logits_slope: float
    passed: bool  # status == "passed"
    widths: list[int]  # the sizes along `axis` (depths for a depth check)
    steps: int
    max_slope: float
    axis: str = "width"
    seeds: int = 1  # initialisations (and batches) whose l1 is averaged before the fit
    # the max |slope|'s interval over the seeds (percentile bootstrap, `confidence`), and what
    # it says: passed (all of it within max_slope), rejected (all of it above), inconclusive
    # (it straddles the limit, or one seed gives no interval)
    slope_ci: tuple[float, float] = (float("nan"), float("nan"))
    status: str = PASSED
    confidence: float = CONFIDENCE

    def to_dict(self) -> dict:
        return {"passed": self.passed, "status": self.status,
                "max_abs_slope": self.max_abs_slope, "max_abs_slope_ci": list(self.slope_ci),
                "confidence": self.confidence, "max_slope": self.max_slope,
                "logits_slope": self.logits_slope, "slopes": dict(self.slopes),
                "widths" if self.axis == "width" else "depths": list(self.widths),
                "steps": self.steps, "seeds": self.seeds, "axis": self.axis}


def coord_status(ci: tuple[float, float], max_slope: float, n_sizes: int | None = None) -> str:
    """The check's answer from its interval: a rejection needs the whole interval above the
    limit (and, where `n_sizes` is given, at least MIN_SIZES_TO_REJECT sizes), a pass the whole
    interval within it; one that straddles it cannot tell."""
    lo, hi = ci
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return INCONCLUSIVE
    if hi <= max_slope:
        return PASSED
    if lo > max_slope and (n_sizes is None or n_sizes >= MIN_SIZES_TO_REJECT):
        return REJECTED
    return INCONCLUSIVE


def slope_interval(df: pd.DataFrame, step: int, axis: str = "width",
                   confidence: float = CONFIDENCE, n_boot: int = N_BOOT,
                   seed: int = 0) -> tuple[float, float]:
    """The percentile-bootstrap interval of max |slope| over the kinds, seeds resampled with
    replacement (each draw's l1 the mean over its seeds, as `slopes_at` takes it). NaN with
    fewer than 2 seeds: one initialisation says nothing of the spread."""
    rows = df[df["t"] == step].assign(kind=lambda d: d["module"].map(module_kind))
    table = rows.groupby(["seed", "kind", axis])["l1"].mean()
    seeds = table.index.get_level_values("seed").unique()
    if len(seeds) < 2:
        return (float("nan"), float("nan"))
    kinds = sorted(table.index.get_level_values("kind").unique())
    sizes = sorted(table.index.get_level_values(axis).unique())
    full = table.reindex(pd.MultiIndex.from_product([seeds, kinds, sizes]))
    l1 = full.to_numpy(dtype=float).reshape(len(seeds), len(kinds), len(sizes))
    ok = np.all(np.isfinite(l1) & (l1 > 0), axis=(0, 2))  # kinds with a slope at every draw
    l1 = l1[:, ok, :]
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(len(seeds), np.full(len(seeds), 1 / len(seeds)), size=n_boot)
    means = np.einsum("bs,skw->bkw", counts, l1) / len(seeds)  # (draws, kinds, sizes)
    x = np.log2(np.asarray(sizes, dtype=float))
    xc = x - x.mean()
    slopes = (np.log2(means) * xc).sum(-1) / (xc * xc).sum()  # least squares, each kind
    worst = np.abs(slopes).max(axis=1)
    a = (1 - confidence) / 2
    lo, hi = np.quantile(worst, [a, 1 - a])
    return (float(lo), float(hi))


def module_kind(name: str) -> str:
    """'blocks.3.attn.q' -> 'blocks.*.attn.q': layers of one kind are averaged together."""
    return LOGITS if name == "" else re.sub(r"(?<=\.)\d+(?=\.|$)", "*", name)


def slopes_at(df: pd.DataFrame, step: int, axis: str = "width") -> dict[str, float]:
    """Least-squares slope of log2(mean l1) vs log2(width) (or `axis`) per module kind at `step`;
    the mean over the kind's layers and over every seed in `df`.

    Kinds whose l1 is zero or non-finite at some width (e.g. a zero-initialised layer before its
    first update) have no slope and are left out.
    """
    rows = df[df["t"] == step].assign(kind=lambda d: d["module"].map(module_kind))
    table = rows.groupby(["kind", axis])["l1"].mean().unstack(axis)  # (kinds, sizes)
    log_w = np.log2(table.columns.to_numpy(dtype=float))
    out = {}
    for kind, l1 in table.iterrows():
        l1 = l1.to_numpy(dtype=float)
        if np.all(np.isfinite(l1)) and np.all(l1 > 0):
            out[kind] = float(np.polyfit(log_w, np.log2(l1), 1)[0])
    return out


def _check_args(widths: list[int], steps: int, lr: float, batch_size: int,
                max_slope: float, what: str = "widths", seeds: int = 1) -> None:
    if len(set(widths)) < 2:
        raise ValueError(f"{what} needs at least two distinct {what}, got {what}={widths}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps=}")
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds=}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size=}")
    if not lr > 0 or not max_slope > 0:
        raise ValueError(f"lr and max_slope must be > 0, got {lr=}, {max_slope=}")


def coord_check(family, *, widths: list[int], corpus: Corpus, steps: int = 4, lr: float = 1e-2,
                batch_size: int = COORD_BATCH, seed: int = 0, seeds: int = 1,
                max_slope: float = 0.35, confidence: float = CONFIDENCE) -> CoordResult:
    """Train each width for `steps` AdamW steps on one batch, for each of `seeds` seeds (seed,
    seed + 1, …: the initialisation and the batch); fit activation-size slopes to the l1 averaged
    over them.

    μP families use mup's MuAdamW, SP families torch's AdamW, both at the same `lr`.
    The global torch RNG is left untouched (get_coord_data seeds it; we fork around it).
    """
    from mup.coord_check import get_coord_data

    widths = sorted(widths)
    _check_args(widths, steps, lr, batch_size, max_slope, seeds=seeds)
    for w in widths:
        if hasattr(family, "check_width"):
            family.check_width(w)
    frames = []
    for s in range(seed, seed + seeds):
        gen = torch.Generator().manual_seed(s)
        x, y = sample_batch(corpus.train, batch_size, family.seq_len, gen)  # (B, T) each
        batch = (x, y.flatten())  # get_coord_data flattens logits to (B*T, V); targets to match
        models = {w: (lambda w=w, s=s: family.build(w, seed=s)) for w in widths}
        with torch.random.fork_rng():
            df = get_coord_data(models, [batch], optimizer="adamw", lr=lr,
                                mup=family.parametrization == "mup", nsteps=steps,
                                flatten_output=True, lossfn="xent", cuda=False,
                                show_progress=False)
        frames.append(df.assign(seed=s))
    df = pd.concat(frames, ignore_index=True)
    return _result(df, steps, widths, max_slope, seeds, "width", confidence)


FINAL_RESIDUAL = "final_residual"  # the last block's output: what depth must keep Θ(1)


def _final_block(model):
    """The last residual block when the family exposes them (`blocks`), else None."""
    blocks = getattr(model, "blocks", None)
    return blocks[-1] if blocks is not None and len(blocks) else None


def depth_coord_check(family, *, depths: list[int], width: int, corpus: Corpus, steps: int = 4,
                      lr: float = 1e-2, batch_size: int = COORD_BATCH, seed: int = 0,
                      seeds: int = 1, max_slope: float = 0.35,
                      confidence: float = CONFIDENCE) -> CoordResult:
    """Train `family.replace(n_layers=d).build(width)` for `steps` AdamW steps on one batch
    (its own optimizer groups), for each of `seeds` seeds as `coord_check` does, record mean |x|
    of the final residual and the logits at every step, and fit slopes against log2(depth) to
    their mean over the seeds."""
    depths = sorted(depths)
    _check_args(depths, steps, lr, batch_size, max_slope, what="depths", seeds=seeds)
    rows = []
    for s in range(seed, seed + seeds):
        gen = torch.Generator().manual_seed(s)
        x, y = sample_batch(corpus.train, batch_size, family.seq_len, gen)  # (B, T) each
        rows += _depth_rows(family, depths, width, x, y, steps, lr, s)
    df = pd.DataFrame(rows)
    return _result(df, steps, depths, max_slope, seeds, "depth", confidence)


def _result(df, steps: int, sizes: list[int], max_slope: float, seeds: int, axis: str,
            confidence: float) -> CoordResult:
    """Both checks' verdict: the worst |slope|'s interval over the seeds against `max_slope`
    (`coord_status`); the logits must have a slope. The depth check's rows name the logits
    "logits" rather than the root module's ""."""
    named = df.assign(module=df["module"].map(lambda k: "" if k == LOGITS else k))
    slopes = slopes_at(named, steps, axis)
    if LOGITS not in slopes:
        raise ValueError(f"the logits are zero at step {steps} at some {axis}; use steps >= 2 "
                         "so a zero-initialised readout has been updated")
    worst = max(abs(s) for s in slopes.values())
    ci = slope_interval(named, steps, axis, confidence)
    status = coord_status(ci, max_slope, len(sizes))
    return CoordResult(df=df, slopes=slopes, max_abs_slope=worst, logits_slope=slopes[LOGITS],
                       passed=status == PASSED, widths=sizes, steps=steps,
                       max_slope=max_slope, axis=axis, seeds=seeds, slope_ci=ci, status=status,
                       confidence=confidence)


def _depth_rows(family, depths: list[int], width: int, x, y, steps: int, lr: float,
                seed: int) -> list[dict]:
    """One seed of the depth check: l1 of the final residual and the logits, every depth, step."""
    rows = []
    for d in depths:
        fam = family.replace(n_layers=d)
        model = fam.build(width, seed=seed)
        opt = make_optimizer(model, TrainSpec(width=width, lr=lr), fam.parametrization, fam)
        seen: dict[str, float] = {}
        block = _final_block(model)
        if block is not None:
            block.register_forward_hook(lambda m, a, out, seen=seen: seen.__setitem__(
                FINAL_RESIDUAL, out.detach().abs().mean().item()))
        for t in range(1, steps + 1):
            logits = model(x)  # (B, T, V)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            seen[LOGITS] = logits.detach().abs().mean().item()
            rows += [{"depth": d, "module": k, "t": t, "l1": v, "seed": seed}
                     for k, v in seen.items()]
    return rows
