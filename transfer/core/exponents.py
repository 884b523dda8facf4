"""The lr rules' exponents as distributions: what the launch lr's interval carries besides μP.

`train.lr` = `lr_transferred` × (D_target / D_proxy)^e_h × (B_target / B_proxy)^e_b. The emitted
lr uses one value of each exponent (`transfer.core.scaling`); the published values disagree,
even in sign, and they are applied over ~25 doublings of tokens and ~14 of batch, where ±0.05 in
e_h alone moves the lr by more than an octave. Here each exponent is a distribution: the value
the emitted lr uses as its median, and a 90 % interval that spans every source's value (the
paper's fitted interval where the source gives one, the spread between the sources where they
disagree, and the run's own horizon measurement).

Form: a two-piece normal, median at the value the emitted lr uses and each side's σ matched to
its end of the 90 % interval. The median keeps `train.lr` at the centre of the launch interval;
normal tails rather than a uniform's walls because three or four published values are a small
sample of what the exponent may be at a target none of them was fitted at. A symmetric interval
gives a plain normal.

Pure: numpy and the standard library; the sources are constants here, the measurement a value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from transfer.core.scaling import BJORCK_BETA, horizon_exponent, step_law_fixed_batch_exponent

__all__ = ["BATCH_SOURCES", "HORIZON_SOURCES", "ExponentDistribution", "ExponentSource",
           "batch_exponent", "horizon_exponent_distribution", "measured_exponent", "z_of"]

FORM = "two_piece_normal"
CONFIDENCE = 0.9  # every distribution's `interval` is its central 90 %


def z_of(confidence: float) -> float:
    """The standard normal's quantile at the upper end of a central `confidence` interval."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence=}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


@dataclass(frozen=True)
class ExponentSource:
    """One published value or measurement of an exponent: a point (low == high) or a range."""

    label: str
    low: float
    high: float

    def __post_init__(self) -> None:
        if not self.low <= self.high:
            raise ValueError(f"an exponent source needs low <= high, got {self.low=} {self.high=}")


@dataclass(frozen=True)
class ExponentDistribution:
    """An lr rule's exponent: its source, the value the emitted lr uses (the median), a 90 %
    interval and the sampling form; `sources` lists every value the interval was widened to."""

    name: str  # "horizon": η ∝ D^e at a fixed batch; "batch": η ∝ B^e at a fixed horizon
    source: str
    central: float
    interval: tuple[float, float]  # central 90 %
    sources: tuple[ExponentSource, ...] = ()
    form: str = FORM
    why: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        lo, hi = self.interval
        if not lo <= self.central <= hi:
            raise ValueError(f"{self.name}: the central value must lie in its interval, got "
                             f"{self.central=} {self.interval=}")
        if self.form != FORM:
            raise ValueError(f"form must be {FORM!r}, got {self.form=}")

    @property
    def sigmas(self) -> tuple[float, float]:
        """(σ below the median, σ above): each side's normal, matched to its end of the 90 %."""
        z = z_of(CONFIDENCE)
        lo, hi = self.interval
        return (self.central - lo) / z, (hi - self.central) / z

    def quantile(self, q: float) -> float:
        """The q-quantile: half the mass on each side of the median, each side a half-normal."""
        if not 0.0 < q < 1.0:
            raise ValueError(f"q must be in (0, 1), got {q=}")
        below, above = self.sigmas
        z = NormalDist().inv_cdf(q)
        return self.central + (below if z < 0 else above) * z

    def half_width(self, confidence: float = CONFIDENCE) -> float:
        """Half the width of the central `confidence` interval."""
        return (self.quantile(0.5 + confidence / 2) - self.quantile(0.5 - confidence / 2)) / 2

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n draws (a standard normal draw, scaled by the σ of its side)."""
        below, above = self.sigmas
        z = rng.standard_normal(n)
        return self.central + np.where(z < 0, below, above) * z

    @classmethod
    def from_interval(cls, name: str, source: str, central: float, interval: Sequence[float],
                      confidence: float, why: str = "") -> ExponentDistribution:
        """The two-piece normal through `central` and an interval at `confidence`, restated at
        90 % (an end at ±inf stays there)."""
        lo, hi = (float(x) for x in interval)
        scale = z_of(CONFIDENCE) / z_of(confidence)
        c = float(central)
        return cls(name=name, source=source, central=c,
                   interval=(c - (c - lo) * scale, c + (hi - c) * scale), why=why)

    def to_dict(self) -> dict:
        return {"source": self.source, "central": self.central, "interval": list(self.interval),
                "confidence": CONFIDENCE, "form": self.form, "why": self.why,
                "sources": [{"label": s.label, "low": s.low, "high": s.high}
                            for s in self.sources]}


def _spread(name: str, source: str, central: float, sources: Sequence[ExponentSource],
            why: str) -> ExponentDistribution:
    """The distribution whose 90 % interval is the envelope of every source and the central."""
    lo = min([central] + [s.low for s in sources])
    hi = max([central] + [s.high for s in sources])
    return ExponentDistribution(name=name, source=source, central=central, interval=(lo, hi),
                                sources=tuple(sources), why=why)


# ---- horizon: η* ∝ D^e at a fixed batch ---------------------------------------------------
# Bjorck et al. 2025 (ICLR), arXiv 2409.19913: β = 0.32 for models ≥ 760M; the paper's fitted
# interval of β was not found in the stored material, so its own spread across model sizes
# stands in for it (Sec. 3: 0.40-0.70 below 760M). Step Law (Li et al. 2025, arXiv 2503.04715)
# fits η ∝ D^+0.307 at its optimal batch: at a fixed batch, through the √ rule, D^+0.0215.
HORIZON_SOURCES = (
    ExponentSource("Bjorck et al. 2025 (arXiv 2409.19913): β = 0.32, models ≥ 760M",
                   -BJORCK_BETA, -BJORCK_BETA),
    ExponentSource("Bjorck et al. 2025, Sec. 3: β 0.40-0.70 for models below 760M", -0.70, -0.40),
    ExponentSource("Step Law (Li et al. 2025, arXiv 2503.04715): η ∝ D^+0.307 at B(D) ∝ "
                   "D^0.571, i.e. D^+0.0215 at a fixed batch through the √ rule",
                   step_law_fixed_batch_exponent(), step_law_fixed_batch_exponent()),
)


def measured_exponent(exponent: float, interval: Sequence[float], confidence: float, *,
                      label: str) -> ExponentDistribution:
    """A measured exponent with its interval at `confidence`, as a two-piece normal (median the
    estimate, each side's σ from its end of the interval), restated at 90 %."""
    lo, hi = (float(x) for x in interval)
    e = float(exponent)
    if not (math.isfinite(e) and math.isfinite(lo) and math.isfinite(hi) and lo <= e <= hi):
        raise ValueError(f"a measured exponent needs a finite estimate inside its interval, got "
                         f"{exponent=} {interval=}")
    return ExponentDistribution.from_interval(
        "horizon", label, e, (lo, hi), confidence,
        why=f"the measurement's {confidence:.0%} interval, restated at {CONFIDENCE:.0%} for a "
            "two-piece normal")


def horizon_exponent_distribution(rule: str, beta: float = BJORCK_BETA, *,
                                  measured: ExponentDistribution | None = None,
                                  use_measured: bool = False) -> ExponentDistribution:
    """The horizon exponent the launch lr carries. Where the emitted lr uses the measurement
    (`use_measured`: the horizon check was tight), the measurement's own distribution; else the
    rule's value as median and, as 90 % interval, the envelope of the published values
    (HORIZON_SOURCES) and the measurement's interval, where it disagrees with them."""
    if use_measured:
        if measured is None:
            raise ValueError("use_measured needs the measured exponent")
        return measured
    central, label = horizon_exponent(rule, beta)
    sources = list(HORIZON_SOURCES)
    if measured is not None:
        lo, hi = measured.interval
        sources.append(ExponentSource(f"{measured.source} (90 %)", lo, hi))
    return _spread("horizon", f"rule: {label}, widened to the spread of the published values"
                   + (" and this run's horizon check" if measured is not None else ""),
                   central, sources,
                   why="the sources disagree (even in sign): the 90 % interval spans all of them")


# ---- batch: η* ∝ B^e at a fixed horizon ---------------------------------------------------
BATCH_SOURCES = (
    ExponentSource("√ rule (Malladi et al. 2022, arXiv 2205.10287: Adam's SDE), below the "
                   "critical batch", 0.5, 0.5),
    ExponentSource("linear rule (Goyal et al. 2017, arXiv 1706.02677, SGD; and η ∝ B keeps the "
                   "AdamW timescale B/(ηλD) at a fixed λ, Wang & Aitchison 2024)", 1.0, 1.0),
    ExponentSource("no rise past the critical batch (Power Lines, arXiv 2505.13738), a fall past "
                   "Adam's surge peak (Li et al. 2024, arXiv 2405.14578)", 0.0, 0.0),
)
BATCH_RULE_EXPONENTS = {"adam_sqrt": (0.5, "adam_sqrt_batch (Malladi et al. 2022)"),
                        "none": (0.0, "no_batch_adjustment")}


def batch_exponent(rule: str) -> ExponentDistribution:
    """The batch exponent the launch lr carries: the rule's value (`scaling.batch_lr_rule`) as
    median, the envelope of BATCH_SOURCES (0 to 1) as 90 % interval."""
    if rule not in BATCH_RULE_EXPONENTS:
        raise ValueError(f"scaling.batch_lr_rule={rule!r}; use one of "
                         f"{', '.join(BATCH_RULE_EXPONENTS)}")
    central, label = BATCH_RULE_EXPONENTS[rule]
    return _spread("batch", f"rule: {label}, widened to the spread of the published rules",
                   central, BATCH_SOURCES,
                   why="which rule holds depends on where the batch sits against the critical "
                       "one, which no proxy measured: the 90 % interval spans all three")
