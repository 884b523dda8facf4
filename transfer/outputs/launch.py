"""The launch lr's interval: the transferred lr's draws and the rules' exponents, drawn jointly.

log2(launch lr) = log2(transferred lr) + e_h · log2(D_target / D_proxy) + e_b · log2(B_target /
B_proxy). The transferred lr's draws are the validator's bootstrap draws at the target (their
quantiles, `lr_trajectory["draw_quantiles_log2"]`), sampled by inverse CDF; where the trajectory
gives none, a two-piece normal through its estimate and interval stands in, and the provenance
says so. The exponents are `transfer.core.exponents`' distributions. All draws are independent
of each other and come from one seeded generator: the same inputs give the same interval.

Each part's contribution (`train.lr_interval_parts`): its own central interval's half-width in
octaves of lr at the same confidence (width, depth: their own draws; horizon, batch: the
exponent's interval × the doublings it is carried over), and its share of the launch lr's
variance, counted as each part's half-width squared over their sum (exact for independent normal
parts; a robust stand-in for bootstrap draws with heavy tails, whose sample variance is not).
The verdict does not judge this interval: it is reported beside the lr.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from transfer.core.exponents import (
    ExponentDistribution,
    batch_exponent,
    horizon_exponent_distribution,
    measured_exponent,
)

__all__ = ["NEXT_MEASUREMENT", "WIDE_OCTAVES", "combine", "exponents", "launch_interval",
           "quantile_of", "sample_quantiles"]

SEED = 20240926  # fixed: the emitted interval is reproducible (no global RNG is touched)
N_DRAWS = 200_000  # Monte-Carlo error of a 5 % quantile ~0.01 of its σ
WIDE_OCTAVES = 2.0  # wider than this, one plain line says so: a launch lr off by 2× either way
PART_ORDER = ("width", "depth", "horizon", "batch")
NEXT_MEASUREMENT = {
    "width": "add seeds or widen the span of widths on the validation lr grid (validation.*, "
             "proxy.grid_widths)",
    "depth": "run the depth check over more depths or seeds (validation.depth_*)",
    "horizon": "measure the horizon law on the proxies: the lr optimum at ≥ 4 horizons spanning "
               "≥ 16× tokens, its exponent carried to the target",
    "batch": "measure the lr optimum at ≥ 3 batch sizes at equal tokens on the proxies, giving "
             "the lr's exponent in batch with its interval",
}


def sample_quantiles(quantiles: Sequence[float], rng: np.random.Generator, n: int) -> np.ndarray:
    """n draws by inverse CDF from equally spaced quantiles (at 0, 1/k, ..., 1): linear between
    neighbours; a draw in a segment with an infinite end takes that end (no vertex there)."""
    q = _checked(quantiles)
    k = len(q) - 1
    u = rng.random(n) * k
    i = np.minimum(u.astype(int), k - 1)
    return _between(q[i], q[i + 1], u - i)


def quantile_of(quantiles: Sequence[float], p: float) -> float:
    """The p-quantile read off equally spaced quantiles, linear between neighbours."""
    q = _checked(quantiles)
    k = len(q) - 1
    i = min(int(p * k), k - 1)
    return float(_between(q[i:i + 1], q[i + 1:i + 2], np.array([p * k - i]))[0])


def _checked(quantiles: Sequence[float]) -> np.ndarray:
    q = np.asarray(quantiles, dtype=float)
    if q.ndim != 1 or len(q) < 2 or np.isnan(q).any() or not np.all(q[1:] >= q[:-1]):
        raise ValueError("draw_quantiles_log2 must be >= 2 non-decreasing numbers (±inf allowed "
                         f"at the ends), got {len(q)} values")
    return q


def _between(lo: np.ndarray, hi: np.ndarray, f: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        x = lo + f * (hi - lo)
    return np.where(np.isinf(lo), lo, np.where(np.isinf(hi), hi, x))


def _share(half_widths: Mapping[str, float]) -> dict[str, float]:
    """Each part's half-width squared over their sum; infinite parts share it all equally."""
    infinite = [k for k, h in half_widths.items() if math.isinf(h)]
    if infinite:
        return {k: (1.0 / len(infinite) if k in infinite else 0.0) for k in half_widths}
    total = sum(h * h for h in half_widths.values())
    return {k: (h * h / total if total > 0 else 0.0) for k, h in half_widths.items()}


def _transferred(estimate_log2: float, trajectory: Mapping, confidence: float
                 ) -> tuple[Sequence[float] | ExponentDistribution, str]:
    """The transferred lr's draws: the bootstrap quantiles, or the two-piece normal fallback."""
    qs = trajectory.get("draw_quantiles_log2")
    if qs is not None:
        return qs, (f"measured on proxies: inverse-CDF draws from the {len(qs)} quantiles of the "
                    "transferred lr's bootstrap draws at the target (lr_trajectory)")
    lo, hi = (float(x) for x in trajectory["interval_log2"])
    lo, hi = min(lo, estimate_log2), max(hi, estimate_log2)  # a percentile interval may miss it
    dist = ExponentDistribution.from_interval(
        "width", "the transferred lr", estimate_log2, (lo, hi), confidence)
    return dist, (f"fallback: no bootstrap quantiles were given, so a two-piece normal through the "
                  f"transferred estimate 2^{estimate_log2:.2f} and its {confidence:.0%} interval "
                  f"2^[{lo:.2f}, {hi:.2f}] (lr_trajectory.interval_log2) stands in for its draws")


def _draw(x: Sequence[float] | ExponentDistribution, rng: np.random.Generator) -> np.ndarray:
    if isinstance(x, ExponentDistribution):
        return x.sample(rng, N_DRAWS)
    return sample_quantiles(x, rng, N_DRAWS)


def _half(x: Sequence[float] | ExponentDistribution, confidence: float) -> float:
    if isinstance(x, ExponentDistribution):
        return x.half_width(confidence)
    return (quantile_of(x, 0.5 + confidence / 2) - quantile_of(x, 0.5 - confidence / 2)) / 2


def exponents(terms: Mapping, scaling: Mapping, horizon: Mapping | None, *,
              confidence: float = 0.9) -> tuple[ExponentDistribution, ExponentDistribution]:
    """(horizon, batch) exponent distributions for the rules the emitted lr used (`terms`: the
    train block's `lr_factor_terms`, which say whether the horizon check's exponent was used).
    The horizon check's interval is at its own `confidence` (else `confidence`); a non-finite
    measurement is left out."""
    measured = None
    if horizon and horizon.get("exponent_ci") is not None:
        e, (lo, hi) = horizon.get("exponent"), horizon["exponent_ci"]
        if all(x is not None and math.isfinite(float(x)) for x in (e, lo, hi)):
            e, lo, hi = float(e), float(lo), float(hi)
            measured = measured_exponent(
                e, (min(lo, e), max(hi, e)),  # a percentile interval may miss its estimate
                float(horizon.get("confidence") or confidence),
                label=f"measured on proxies (this run's horizon check, {e:+.3f} "
                      f"[{lo:+.3f}, {hi:+.3f}])")
    use = terms.get("horizon_exponent_source") == "measured" and measured is not None
    e_h = horizon_exponent_distribution(scaling["horizon_rule"], float(scaling["horizon_beta"]),
                                        measured=measured, use_measured=use)
    return e_h, batch_exponent(scaling["batch_lr_rule"])


def _doublings(terms: Mapping, key_from: str, key_to: str) -> float:
    a, b = terms.get(key_from), terms.get(key_to)
    return math.log2(float(b) / float(a)) if a and b else 0.0


def launch_interval(*, estimate_log2: float, trajectory: Mapping, terms: Mapping,
                    scaling: Mapping, horizon: Mapping | None = None, seed: int = SEED) -> dict:
    """The launch lr's interval at the trajectory's confidence for the rules the emitted lr used
    (`terms`: the train block's `lr_factor_terms`; `scaling`: the rule set; `horizon`: the
    horizon check's result): `combine` of the transferred lr's draws and the rules' exponents."""
    c = float(trajectory["confidence"])
    transferred, t_source = _transferred(float(estimate_log2), trajectory, c)
    e_h, e_b = exponents(terms, scaling, horizon, confidence=c)
    return combine(transferred, t_source, e_h, e_b, confidence=c,
                   horizon_doublings=_doublings(terms, "from_tokens", "to_tokens"),
                   batch_doublings=_doublings(terms, "from_batch_tokens", "to_batch_tokens"),
                   parts=trajectory.get("parts"), seed=seed)


def combine(transferred: Sequence[float] | ExponentDistribution, source: str,
            e_h: ExponentDistribution, e_b: ExponentDistribution, *, confidence: float,
            horizon_doublings: float, batch_doublings: float, parts: Mapping | None = None,
            seed: int = SEED) -> dict:
    """Draw log2 launch lr = transferred + e_h·horizon_doublings + e_b·batch_doublings jointly
    (`transferred`: quantiles of its draws, or a distribution; `source`: where it came from;
    `parts`: the width and depth parts' own quantiles, where given apart): `lr_interval`,
    `lr_interval_log2`, `lr_interval_parts` and `warning` (None unless wider than WIDE_OCTAVES)."""
    c, h, b = float(confidence), float(horizon_doublings), float(batch_doublings)
    rng = np.random.default_rng(seed)
    draws = _draw(transferred, rng) + e_h.sample(rng, N_DRAWS) * h + e_b.sample(rng, N_DRAWS) * b
    lo, hi = (float(x) for x in np.quantile(draws, [0.5 - c / 2, 0.5 + c / 2],
                                            method="inverted_cdf"))
    out = _width_parts(parts or {}, transferred, source, c)
    out["horizon"] = _rule_part(e_h, h, c, "D_target / D_proxy")
    out["batch"] = _rule_part(e_b, b, c, "B_target / B_proxy")
    for name, share in _share({k: p["half_width_octaves"] for k, p in out.items()}).items():
        out[name]["variance_share"] = share
    largest = max(out, key=lambda k: (out[k]["variance_share"], out[k]["half_width_octaves"]))
    return {"lr_interval": [2.0 ** lo, 2.0 ** hi], "lr_interval_log2": [lo, hi],
            "lr_interval_parts": {
                "confidence": c, "width_octaves": hi - lo, "largest": largest,
                "transferred_draws": source,
                **{k: out[k] for k in PART_ORDER if k in out}},
            "warning": _warning(lo, hi, c, largest, out[largest]["variance_share"])}


def _width_parts(given: Mapping, transferred, t_source: str, c: float) -> dict:
    """width (and depth, where the trajectory gives them apart): each part's own half-width."""
    out = {}
    for name in ("width", "depth"):
        qs = (given.get(name) or {}).get("draw_quantiles_log2")
        if qs is not None:
            out[name] = {"half_width_octaves": _half(qs, c),
                         "source": f"measured on proxies: the {name} part's bootstrap draws "
                                   f"({len(qs)} quantiles, lr_trajectory.parts.{name})"}
    if "width" not in out:  # no parts: the transferred lr's spread is the width trajectory's
        out["width"] = {"half_width_octaves": _half(transferred, c),
                        "source": t_source + "; the whole transferred lr counted as width"}
    return out


def _rule_part(dist: ExponentDistribution, doublings: float, c: float, ratio: str) -> dict:
    carried = (f"over log2({ratio}) = {doublings:.2f} doublings" if doublings else
               "not applied: the proxy's trial tokens or context are unknown, so no factor")
    return {"half_width_octaves": dist.half_width(c) * abs(doublings), "doublings": doublings,
            "exponent": dist.to_dict(), "source": f"{dist.source}, {carried}"}


def _warning(lo: float, hi: float, c: float, largest: str, share: float) -> str | None:
    if not hi - lo > WIDE_OCTAVES:
        return None
    wide = (f"{hi - lo:.1f} octaves wide" if math.isfinite(hi - lo)
            else "unbounded (draws without a vertex)")
    return (f"the launch lr's {c:.0%} interval is 2^[{lo:.1f}, {hi:.1f}], {wide} (over "
            f"{WIDE_OCTAVES:g} octaves): the largest part is {largest} ({share:.0%} of its "
            f"variance); to narrow it, {NEXT_MEASUREMENT[largest]}")
