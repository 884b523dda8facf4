"""Measure more where it decides: which widths get more seeds, and the looks' confidence.

When a grid is whole and bracketed and the verdict is inconclusive only because intervals
straddle their limits, or because a curvature S/N is under its limit
(`Verdict.more_data_decides`), more seeds at every point of some widths (or depths: the depth
grid's curves, `transfer.verdict.axis_grid`) narrow them. Seeds, not points: every point of a
width is trained with the same seeds, so a seed's level offset cancels in the vertex only when
it is at every point (`shared_curvature`).
`add` more seeds at a width that has s scale its vertex's variance by s / (s + add); each
width's vertex moves the straddling quantities by a known weight: −1, +1 at the narrowest and
widest for the drift (and the gap, which follows it), the emitted trajectory model's
prediction weights for the optimum at the target.

A round is planned only where it is predicted to decide: the cheapest set of widths (any of
them) and number of seeds (`validation.seeds` or a multiple of it) whose extra seeds, within
the seconds left, shrink every straddling interval enough to fall inside its limit or wholly
outside it — at the next look's stricter confidence — and lift a short curvature S/N to its
limit (S/N grows as √seeds). The k-th look is judged at 1 − α/k (α = 1 −
`validation.confidence`; Bonferroni over the looks taken), so a run that looks again does not
get more chances at a false verdict for free; `benchmarks/validator_power.py --rounds`
measures the false-pass rate with the rounds (docs/verdict.md). The prediction assumes the
estimates stay where they are; the next look judges what was measured.

Pure numpy: the width grid (`transfer.verdict.width`) and the depth grid
(`transfer.verdict.axis_grid`) train what this chooses.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from statistics import NormalDist

from transfer.judge.trajectory import weights as trajectory_weights
from transfer.judge.verdict import Verdict

__all__ = ["HINT_MULTIPLE", "MAX_MULTIPLE", "decide_hint", "farther_hint", "look_confidence",
           "look_of", "plan_round", "seeds_to_decide"]

MAX_MULTIPLE = 4  # a round adds at most this many times validation.seeds at a width
HINT_MULTIPLE = 16  # the most seeds `seeds_to_decide` prices, as a multiple of the grid's


def look_confidence(confidence: float, looks: int) -> float:
    """The confidence the `looks`-th look (1-based) is judged at: 1 − α/looks."""
    return 1.0 - (1.0 - confidence) / max(1, int(looks))


def look_of(confidence: float, judged_at: float, most: int = 8) -> int:
    """The look (1-based) a verdict judged at `judged_at` was (`look_confidence`'s inverse,
    for an archived verdict); 1 where none up to `most` matches."""
    return next((n for n in range(1, most + 1)
                 if abs(look_confidence(confidence, n) - judged_at) < 1e-9), 1)


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def _straddling(v: Verdict) -> list[tuple[str, float, list[float], dict]]:
    """(name, estimate, interval, weight per width) of every interval the verdict found
    straddling its limit (`Verdict.straddling`)."""
    w0, w1 = v.widths[0], v.widths[-1]
    edges = {w0: -1.0, w1: 1.0}
    out = []
    for name in v.straddling:
        # not an interval: `_snr_after`; an interval unbounded only because a curvature S/N
        # is under its limit ("flat") is bounded by the seeds that lift it
        if name in ("snr", "flat"):
            continue
        if name == "drift":
            out.append((name, v.drift_log2, list(v.drift_ci), edges))
        elif name == "gap":
            out.append((name, v.loss_gap, list(v.loss_gap_ci), edges))
        else:  # the optimum at the target
            t = v.trajectory
            c = trajectory_weights(t["model"], t["widths"], t["target_width"],
                                   t.get("axis", "width"))
            out.append((name, t["estimate"], list(t["interval"]),
                        {w: float(x) for w, x in zip(t["widths"], c)}))
    return out


def _decides(name: str, est: float, ci: Sequence[float], shrink: float, v: Verdict) -> bool:
    lo, hi = est - shrink * (est - ci[0]), est + shrink * (ci[1] - est)
    tol = v.tolerance_log2
    if name == "drift":
        return (-tol <= lo and hi <= tol) or lo > tol or hi < -tol
    if name == "gap":
        return hi <= v.max_gap or lo > v.max_gap
    return max(est - lo, hi - est) <= tol


def _snr_after(v: Verdict, seeds: Mapping[int, int], added: Mapping[int, int]) -> float:
    """The curvature S/N predicted once `added[w]` more seeds train at every point of curve w:
    each curve's own (`Verdict.curvature_snr_by`, its σ from its own seeds) scaled by
    √(seeds after / before), the least of them; a shared curvature's σ is the seed mean's at
    the fewest seeds, so it grows only as the fewest do."""
    if v.curvature_snr_by:
        return min(s * math.sqrt((seeds[w] + added.get(w, 0)) / seeds[w])
                   for w, s in v.curvature_snr_by.items())
    before = min(seeds[w] for w in v.widths)
    after = min(seeds[w] + added.get(w, 0) for w in v.widths)
    return v.curvature_snr * math.sqrt(after / before)


def plan_round(v: Verdict, *, base_confidence: float, looks: int, seeds: Mapping[int, int],
               add: int, seconds_per_seed: Mapping[int, float], left: float,
               max_multiple: int = MAX_MULTIPLE) -> tuple[tuple[int, ...], int] | None:
    """The cheapest (widths, seeds to add at each): any set of the widths, `add` seeds or a
    multiple of it up to `max_multiple` × — such that every straddling interval, shrunk by the
    variance the seeds remove and widened to the next look's confidence, decides, and a
    curvature S/N under its limit (`"snr"` in `Verdict.straddling`) is predicted to reach it
    (`_snr_after`); None when nothing that fits in `left` seconds (`seconds_per_seed[w]`: one
    more seed at every point of width w) would, or nothing straddles."""
    what = _what_straddles(v)
    if what is None:
        return None
    quantities, snr, half = what
    widen = _z(look_confidence(base_confidence, looks + 1)) / _z(v.confidence)
    sets = [ws for k in range(1, len(v.widths) + 1)
            for ws in itertools.combinations(v.widths, k)]
    options = sorted(((ws, add * m) for ws in sets for m in range(1, max_multiple + 1)),
                     key=lambda o: o[1] * sum(seconds_per_seed[w] for w in o[0]))
    for ws, n in options:
        if n * sum(seconds_per_seed[w] for w in ws) > left:
            continue
        if _predicted(v, quantities, snr, half, widen, seeds, dict.fromkeys(ws, n)):
            return ws, n
    return None


def _what_straddles(v: Verdict) -> tuple[list, bool, dict[int, float]] | None:
    """What more seeds would have to decide (`_straddling`'s intervals, whether a curvature
    S/N is short) and each curve's vertex half-interval; None when nothing straddles or a
    vertex has no finite interval (nothing to shrink)."""
    quantities = _straddling(v)
    snr = "snr" in v.straddling
    half = {w: (v.best_log2_lr_ci[w][1] - v.best_log2_lr_ci[w][0]) / 2 for w in v.widths}
    if not (quantities or snr) or not all(math.isfinite(h) for h in half.values()):
        return None
    return quantities, snr, half


def _predicted(v: Verdict, quantities: list, snr: bool, half: Mapping[int, float],
               widen: float, seeds: Mapping[int, int], added: Mapping[int, int]) -> bool:
    """Whether `added[w]` more seeds at every point of curve w are predicted to decide every
    straddling quantity (and lift a short S/N to its limit), the estimates staying put."""
    keep = {w: seeds[w] / (seeds[w] + added.get(w, 0)) for w in v.widths}
    ok = not snr or _snr_after(v, seeds, added) >= v.min_curvature_snr
    for name, est, ci, c in quantities:
        now = sum(c.get(w, 0.0) ** 2 * half[w] ** 2 for w in v.widths)
        new = sum(c.get(w, 0.0) ** 2 * half[w] ** 2 * keep[w] for w in v.widths)
        shrink = widen * math.sqrt(new / now) if now > 0 else widen
        ok = ok and _decides(name, est, ci, shrink, v)
    return ok


def seeds_to_decide(v: Verdict, *, seeds: Mapping[int, int],
                    planned: Mapping[int, int] | None = None,
                    max_multiple: int = HINT_MULTIPLE) -> int | None:
    """What an inconclusive verdict would take, for the user who reruns it: the least k ≤
    `max_multiple` such that every curve at k × its `planned` seeds (a rerun's at 1 ×, the
    grid's settings; None: the `seeds` it has) is predicted to decide it. A curve that a seed
    round took past its plan counts the seeds it has against the rerun's k × planned (a rerun
    starts afresh). A rerun's first look, at the verdict's own confidence; the estimates staying
    where they are, so about even odds that it then passes: replayed on the 2026-12-07
    compare's runs, Qwen2.5's width grid, predicted 2 ×, passes 52 % of draws at 2 ×, Qwen3's,
    predicted 8 ×, 40 % at 8 ×; docs/verdict.md. None when more seeds are not what stands in
    the way (`Verdict.more_data_decides` false: an optimum not located, too few points, a
    disagreement of models) or when not even `max_multiple` × is predicted to."""
    what = _what_straddles(v) if v.more_data_decides else None
    if what is None:
        return None
    planned = seeds if planned is None else planned
    quantities, snr, half = what
    for k in range(2, max_multiple + 1):
        if _predicted(v, quantities, snr, half, 1.0, seeds,
                      {w: k * planned[w] - seeds[w] for w in v.widths}):
            return k
    return None


def decide_hint(v: Verdict, *, seeds: Mapping[int, int], seconds: Mapping[int, float],
                knob: Callable[[int], str], planned: Mapping[int, int] | None = None,
                max_multiple: int = HINT_MULTIPLE) -> str | None:
    """The "to decide it" line of an inconclusive verdict whose only obstacle is what more
    seeds decide: the rerun `knob(k)` names (every curve at k × its `planned` seeds,
    `seeds_to_decide`) and its price, each curve's `seconds` of training now × k × planned /
    the seeds it has; or, where not even `max_multiple` × is predicted to decide it, that (the
    static hint would mislead). None where more seeds are not the obstacle: the verdict's
    static hint (`Limits.decide_hint`) stands."""
    if v.outcome != "inconclusive" or not v.more_data_decides:
        return None
    planned = seeds if planned is None else planned
    now = sum(seconds.values())

    def price(k: int) -> float:
        return sum(t * k * planned[w] / seeds[w] for w, t in seconds.items())

    k = seeds_to_decide(v, seeds=seeds, planned=planned, max_multiple=max_multiple)
    if k is None:
        return (f"not even every curve at {max_multiple} × its planned seeds "
                f"(~{price(max_multiple):,.0f} trial-seconds for this grid) is predicted to "
                f"decide it at these curves' sizes and tokens")
    return (f"{knob(k)}: every curve at {k} × its planned seeds, ~{price(k):,.0f} "
            f"trial-seconds for this grid against {now:,.0f}, is predicted to decide it if the "
            f"estimates stay where they are (about even odds)")


def farther_hint(v: Verdict, *, seconds: Mapping[int, float], knob: str,
                 cost_ratio: float) -> str | None:
    """The "to decide it" line of an inconclusive verdict held by its trajectory models'
    disagreement at the target (their extrapolation, which more seeds at these sizes do not
    settle) and otherwise only by what more seeds decide (`Verdict.farther_decides`): one more
    curve nearer the target, `knob`, priced at `cost_ratio` × the farthest curve's `seconds`
    (FLOPs per token: ~4 × for a doubled width, 2 × for a doubled depth). None elsewhere (an
    optimum not located, too few points or curves): the static hint stands there."""
    if not v.farther_decides or not v.trajectory or not seconds:
        return None
    far, t = max(seconds), v.trajectory
    return (f"{knob}: one more curve nearer the target, ~{cost_ratio * seconds[far]:,.0f} "
            f"trial-seconds ({cost_ratio:g} × the {t.get('axis', 'width')}-{far} curve's "
            f"{seconds[far]:,.0f}); more seeds at these sizes do not settle models that disagree "
            f"by {t['disagreement']:.2f} octave at {t['target_width']}, a curve nearer it may")
