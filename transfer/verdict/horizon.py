"""The horizon check: how does the tuned lr optimum move with the token budget, on the proxies?

The learning-rate grid at the stages' width (`transfer.verdict.axis_grid`: the width check's centre,
spacing, fresh seeds and edge extension), trained at `train.tokens / validation.horizon_ratio`
tokens (¼ of the budget by default), beside the full-budget curve — the width check's narrow
curve, copied in, not trained again: only the short runs cost.

The two curves, keyed by token count, go through the shared-curvature fit of the pure verdict
(`transfer.judge.verdict.judge`, `Limits(axis="tokens")`, no coordinate check). Its drift (vertex at
the full budget − vertex at the short one, log2 lr) and bootstrap interval give the measured
horizon exponent e of η* ∝ D^e: e = drift / log2(ratio), interval likewise. The verdict's
transfer outcome (tolerance, loss gap) is not used: only the fit's numbers.

"Tight" (the emitted lr then uses the measured exponent instead of `scaling.horizon_rule`'s):
both optima bracketed by the grid, curvature S/N ≥ `validation.min_curvature_snr`, and the
exponent's interval (at `validation.confidence`) no wider than `validation.horizon_max_ci`
(0.2 by default: at ratio 4 that is 0.4 octave of drift, about a grid step), and, when the
target's horizon is given, that interval carried to it — (hi − lo) × log2(target tokens / the
proxies') — no wider than twice the lr tolerance (`validation.tolerance_log2`): an exponent
measured over 2 octaves of tokens and applied across 25 (a 3B run's 9T tokens) multiplies its
uncertainty by 12, and an interval 0.19 wide then spans 4.8 octaves of lr.

Its own Optuna study, `<run>:validation-horizon`. Off unless `validation.horizon_enabled`.

`validation.horizon_method=branched` (budget=thorough) measures instead over ≥ 4 horizons
spanning ≥ 16×, each (lr, seed) one wsd run branched into cooldowns
(`transfer.verdict.horizon_branched`), the exponent the slope of the optima over log2 tokens
(`transfer.judge.horizon_law`); the result has this module's keys, and the same tight rule.
"""

from __future__ import annotations

import dataclasses
import math

import optuna

from transfer.core import scaling
from transfer.judge import horizon_law
from transfer.judge.verdict import Verdict, judge
from transfer.search import Context
from transfer.search.training import horizon_tokens
from transfer.verdict import horizon_branched
from transfer.verdict.axis_grid import Axis, run_axis_grid
from transfer.verdict.width import (
    curves_from,
    limits_from,
    open_grid_study,
)

STAGE = "validation_horizon"
DEFAULT_MAX_CI = 0.2


def enabled(cfg) -> bool:
    return bool(cfg.validation.enabled and cfg.validation.horizon_enabled)


def budgets(cfg) -> tuple[int, int]:
    """(short, full): the token budgets of the two curves."""
    full = int(cfg.train.tokens)
    ratio = float(cfg.validation.horizon_ratio)
    return int(full // ratio), full


def at_tokens(ctx: Context, tokens: int) -> Context:
    """The context whose trials train on `tokens` tokens (everything else as set)."""
    train = dataclasses.replace(ctx.cfg.train, tokens=int(tokens))
    cfg = dataclasses.replace(ctx.cfg, train=train)
    # the same shapes: the probe's step and eval times hold, only the step count differs
    return dataclasses.replace(ctx, cfg=cfg, probes=ctx.probes)


HORIZON_STUDY = "validation-horizon"


def axis(ctx: Context) -> Axis:
    """The horizon grid: the short budget and the full one (copied from the width grid)."""
    short, full = budgets(ctx.cfg)
    return Axis(stage=STAGE, study=HORIZON_STUDY, param="tokens", values=(short, full),
                copied=full, contexts={short: at_tokens(ctx, short), full: ctx},
                width=ctx.proxies.width, seeds=int(ctx.cfg.validation.seeds))


def open_horizon_study(ctx: Context) -> optuna.Study:
    return open_grid_study(ctx, HORIZON_STUDY)


def curves(study: optuna.Study, ts: tuple[int, int]) -> dict:
    """The grid as plain curves: tokens -> [(log2 lr, [loss per seed; nan if diverged])]."""
    return curves_from(study, ts, axis="tokens")


def run_horizon_grid(ctx: Context, hp: dict, width_study: optuna.Study) -> optuna.Study:
    """Train this worker's share of the horizon grid (`transfer.verdict.axis_grid`), extending it
    until both budgets' optima are bracketed or `validation.max_extend` is reached; under
    `validation.horizon_method=branched`, the branched grid (`horizon_branched.run_grid`)."""
    if horizon_branched.enabled(ctx.cfg):
        return horizon_branched.run_grid(ctx, hp, open_horizon_study(ctx), STAGE)
    return run_axis_grid(ctx, hp, width_study, axis(ctx))


def judge_horizon(curves_: dict, tuned_log2: float, v) -> Verdict:
    """The shared-curvature fit of the two budgets' curves (keys: token counts), every point
    weighed alike: the basin's weighted fit was measured on the width and depth grids only,
    and where the noise is alike it can cost precision (a synthetic D^−0.5 horizon's exponent
    interval 0.15 → 0.22 wide, tests/test_launch.py)."""
    limits = dataclasses.replace(limits_from(v), axis="tokens", target_width=None,
                                 basin_excess=None)
    return judge(curves_, None, tuned_log2, limits, None)


def measure(verdict: Verdict, *, rule: str = "bjorck", beta: float = scaling.BJORCK_BETA,
            max_ci: float = DEFAULT_MAX_CI, target_tokens: float | None = None,
            max_lr_spread: float = 1.0) -> dict:
    """The measured exponent of η* ∝ D^e, its interval, the rule's over the same range, and
    which of the two the emitted lr uses (`used`: measured | rule). With `target_tokens`, the
    interval carried to the target's horizon (octaves of lr) must be ≤ `max_lr_spread`."""
    short, full = verdict.widths
    octaves = math.log2(full / short)
    e = verdict.drift_log2 / octaves
    lo, hi = (d / octaves for d in verdict.drift_ci)
    rule_e, rule_label = scaling.horizon_exponent(rule, beta)
    snr, min_snr = verdict.curvature_snr, verdict.min_curvature_snr
    why, spread = horizon_law.not_tight(
        e, lo, hi, unbracketed=None if all(verdict.bracketed.values())
        else "an optimum is at the grid's edge (not bracketed)", snr=snr, min_snr=min_snr,
        max_ci=max_ci, target_tokens=target_tokens, reference_tokens=float(full),
        max_lr_spread=max_lr_spread)
    tight = not why
    return {"tokens": [short, full], "ratio": full / short, "octaves": octaves,
            "exponent": e, "exponent_ci": [lo, hi], "confidence": verdict.confidence,
            "drift_log2": verdict.drift_log2, "drift_ci": list(verdict.drift_ci),
            "optima_log2": {str(k): x for k, x in verdict.best_log2_lr.items()},
            "curvature_snr": snr, "min_curvature_snr": min_snr, "max_ci": max_ci,
            "target_tokens": target_tokens, "lr_spread_at_target": spread,
            "max_lr_spread": max_lr_spread if target_tokens else None,
            "rule": rule_label, "rule_exponent": rule_e, "rule_drift_log2": rule_e * octaves,
            "tight": tight, "used": "measured" if tight else "rule",
            "reasons": why,
            "criterion": f"tight: both optima bracketed, curvature S/N ≥ {min_snr:g} and the "
                         f"exponent's {verdict.confidence:.0%} interval ≤ {max_ci:g} wide"
                         + (f", and ≤ {max_lr_spread:g} octave of lr carried to the target's "
                            "horizon" if target_tokens else "")}


def validate_horizon(ctx: Context, hp: dict, width_study: optuna.Study
                     ) -> tuple[Verdict, dict]:
    """The horizon grid (resumed: already trained when every worker ran it), its fit, and the
    measured exponent against the configured rule's."""
    v = ctx.cfg.validation
    study = run_horizon_grid(ctx, hp, width_study)
    if horizon_branched.enabled(ctx.cfg):
        return _validate_branched(ctx, hp, study)
    verdict = judge_horizon(curves(study, budgets(ctx.cfg)),
                            round(math.log2(float(hp["lr"])), 6), v)
    s = ctx.cfg.scaling
    result = measure(verdict, rule=s.horizon_rule, beta=float(s.horizon_beta),
                     max_ci=float(v.horizon_max_ci),
                     target_tokens=float(ctx.cfg.model.train_tokens),
                     max_lr_spread=2 * float(v.tolerance_log2))
    return verdict, result


def _validate_branched(ctx: Context, hp: dict, study: optuna.Study) -> tuple[Verdict, dict]:
    """The branched grid's curves: the judge's fit of them (its figure and `fit` record) and
    the law through every horizon's optimum (`horizon_law.measure_law`, the same limits)."""
    v, s = ctx.cfg.validation, ctx.cfg.scaling
    tuned = round(math.log2(float(hp["lr"])), 6)
    curves_ = horizon_branched.curves(study, horizon_tokens(ctx.cfg))
    verdict = judge_horizon(curves_, tuned, v)
    limits = limits_from(v)
    result = horizon_law.measure_law(
        curves_, tuned, reference_tokens=float(ctx.cfg.train.tokens),
        target_tokens=float(ctx.cfg.model.train_tokens), rule=s.horizon_rule,
        beta=float(s.horizon_beta), max_ci=float(v.horizon_max_ci),
        min_curvature_snr=float(v.min_curvature_snr),
        confidence=float(v.confidence), n_boot=limits.n_boot, boot_seed=limits.boot_seed,
        window=limits.fit_window, schedule=s.schedule)
    return verdict, result


def line(h: dict) -> str:
    """The horizon check in one printed line."""
    if h.get("method") == horizon_law.METHOD:
        return horizon_law.line(h)
    lo, hi = h["exponent_ci"]
    short, full = h["tokens"]
    used = ("measured" if h["used"] == "measured"
            else f"the rule ({'; '.join(h['reasons'])})")
    return (f"   horizon check: lr ∝ D^{h['exponent']:+.2f} [{lo:+.2f}, {hi:+.2f}] measured "
            f"over {short}→{full} tokens (curvature S/N {h['curvature_snr']:.1f}) vs rule "
            f"{h['rule_exponent']:+.2f} ({h['rule']}); the emitted lr uses {used}")
