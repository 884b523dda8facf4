"""Per-stage progress: a bar on a terminal, plain lines otherwise (logs, CI, workers).

The ETA is the predicted seconds of the trials still to run (each from the timing probe of its
own width, depth and token count), scaled by what this phase has measured so far (measured ÷
predicted over the trials this process finished in it: pruned trials and a probe that runs fast
or slow both show up there). Given trial by trial (`Left`: each unfinished trial's predicted
seconds and how long it has run, running ones first), it is the makespan of that work on the
workers sharing the study: a running trial counts what is left of it and the waiting ones go,
in order, to whichever worker frees first, so a stage's last trial is one trial long, not half
of one. A trial the pruner may stop (a stage's, past the pruner's start-up) carries its
probability of being stopped and its seconds if it is; the ETA is then the *expected* makespan
over those outcomes (not the makespan of expected lengths, which is short whenever the last
round of trials may or may not be cut), and a running trial that has run past the point where
it would have been stopped has survived it and is priced in full. Work that cannot start
before those trials end (a grid's growth rounds, queued only once the grid is whole) is
added after them (`then`). Where those coins spread the outcomes past ±25 % of the expected
value, the line shows their range beside it (`Span`: the 5th to 95th percentile), so a user
reads "0m06s (0m04s–0m08s)" where one trial the pruner may halve is left, not a point that is
off by a third whichever way it falls. Without a prediction it falls back to the phase's mean
seconds per finished trial.
"""

from __future__ import annotations

import heapq
import itertools
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# per unfinished trial: (predicted seconds, seconds run), or (predicted seconds, seconds run,
# probability the pruner stops it, predicted seconds if it is stopped)
Left = Sequence[tuple[float, ...]]
EXACT_OUTCOMES = 10  # up to 2**10 pruning outcomes enumerated; more are sampled (seeded)
SAMPLED_OUTCOMES = 1024


def makespan(seconds: Sequence[float], workers: int) -> float:
    """When the last of `seconds` ends on `workers` that each take the next one as they free
    (the first ones are the running trials: one worker each)."""
    free = [0.0] * max(1, int(workers))
    for s in seconds:
        heapq.heapreplace(free, free[0] + max(0.0, float(s)))
    return max(free)


@dataclass(frozen=True)
class Span:
    """Seconds still to run: the expected value, and the range `RANGE` of the outcomes that the
    pruner's cuts and a grid's growth rounds may still take (`low` = `high` = `expected` when
    nothing is left to chance)."""

    expected: float
    low: float
    high: float

    @classmethod
    def certain(cls, seconds: float) -> Span:
        return cls(seconds, seconds, seconds)

    def __add__(self, other: Span) -> Span:  # outcomes taken as independent: a wide range
        return Span(self.expected + other.expected, self.low + other.low, self.high + other.high)

    def __mul__(self, k: float) -> Span:
        return Span(self.expected * k, self.low * k, self.high * k)


RANGE = (0.05, 0.95)  # the outcomes' 5th to 95th percentile: the project's 90 %


def _quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order]) / weights.sum()
    return float(values[order][np.searchsorted(cum, q - 1e-9)])


def makespan_span(trials: Sequence[tuple[float, float, float]], workers: int) -> Span:
    """The `makespan` of `trials`, each (seconds left if it runs to the end, probability it is
    stopped, seconds left if it is), over every pruning outcome weighted by its probability:
    its expected value and its `RANGE`. Outcomes are enumerated when at most `EXACT_OUTCOMES`
    trials are uncertain, else `SAMPLED_OUTCOMES` draws from a fixed seed (the ETA must not
    flicker between updates)."""
    full = [short if p >= 1.0 else f for f, p, short in trials]  # a certain cut is its length
    open_ = [i for i, (_, p, _) in enumerate(trials) if 0.0 < p < 1.0]
    if not open_:
        return Span.certain(makespan(full, workers))
    if len(open_) <= EXACT_OUTCOMES:
        outcomes = list(itertools.product((False, True), repeat=len(open_)))
        draws = None
    else:
        rng = np.random.default_rng(0)
        p = np.array([trials[i][1] for i in open_])
        draws = rng.random((SAMPLED_OUTCOMES, len(open_))) < p
        outcomes = [tuple(row) for row in draws]
    values, weights = np.empty(len(outcomes)), np.ones(len(outcomes))
    for k, stopped in enumerate(outcomes):
        seconds = list(full)
        for i, s in zip(open_, stopped, strict=True):
            if s:
                seconds[i] = trials[i][2]
            if draws is None:
                weights[k] *= trials[i][1] if s else 1.0 - trials[i][1]
        values[k] = makespan(seconds, workers)
    return Span(float(values @ weights / weights.sum()), _quantile(values, weights, RANGE[0]),
                _quantile(values, weights, RANGE[1]))


def _fmt_s(s: float) -> str:
    """Seconds as "4m05s" (or "1h02m"), rounded to the nearest second: floored, a 6.9-s ETA read
    as 6 s."""
    s = max(0, round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _span(seconds: float | Span) -> Span:
    return seconds if isinstance(seconds, Span) else Span.certain(float(seconds))


def _fmt_eta(span: Span) -> str:
    """The expected seconds left, and after them the range of the outcomes where it reaches
    past ±25 % of them by 2 s or more: "0m06s (0m04s–0m08s)" when one trial the pruner may halve
    is all that is left, a coin no single number is within ±25 % of."""
    e = span.expected
    if not math.isfinite(e):
        return "?"
    wide = span.high - span.low >= 2.0 and (span.low < 0.75 * e or span.high > 1.25 * e)
    return _fmt_s(e) + (f" ({_fmt_s(span.low)}–{_fmt_s(span.high)})" if wide else "")


class Progress:
    """`mode`: auto (bar if stderr is a terminal), bar, lines, off; `workers`: processes
    sharing each study (the remaining work is split over them)."""

    def __init__(self, mode: str = "auto", stream=None, *, workers: int = 1):
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if getattr(self.stream, "isatty", lambda: False)() else "lines"
        self.mode = mode
        self.workers = max(1, int(workers))
        self._bar = None
        self._name, self._total, self._t0, self._done0 = "", 0, time.monotonic(), 0
        self._predicted = self._measured = 0.0
        self._remaining: Left | None = None
        self._then = Span.certain(0.0)
        self._calibrated = False

    def stage_start(self, name: str, done: int, total: int,
                    remaining_seconds: Left | None = None, *, calibrated: bool = False,
                    then: float | Span = 0.0) -> None:
        """A phase begins (or restarts after its grid grew); `remaining_seconds`: the predicted
        seconds of its trials not finished yet, trial by trial (`Left`, running ones first) —
        `calibrated` when they are already scaled by what finished trials measured (a grid's
        `queued_trials`), so no second ratio applies; `then`: seconds of work that starts only
        once those trials are done (a grid's growth rounds, not queued yet): expected, or a
        `Span` with the range of its outcomes."""
        if name != self._name:  # a new phase: its own measured/predicted ratio
            self._predicted = self._measured = 0.0
        self._calibrated = calibrated
        self._then = _span(then)
        self._name, self._total, self._t0, self._done0 = name, total, time.monotonic(), done
        self._remaining = remaining_seconds
        if self.mode == "bar":
            from tqdm import tqdm  # only a terminal draws a bar: not imported for logs and CI

            if self._bar is not None:
                self._bar.close()
            self._bar = tqdm(total=total, initial=done, desc=f"stage {name}", file=self.stream,
                             leave=True, dynamic_ncols=True)
        elif self.mode == "lines":
            self.line(f"stage {name}: {done}/{total} trials done")

    @property
    def shown(self) -> bool:
        """Whether anything is printed: the ETA is worth computing (a worker's is "off")."""
        return self.mode != "off"

    def trial_done(self, predicted: float | None, seconds: float | None) -> None:
        """One trial of this process finished: what the probe predicted and what it took."""
        if predicted and seconds is not None and predicted > 0:
            self._predicted += predicted
            self._measured += seconds

    def ratio(self) -> float:
        """Measured ÷ predicted over this phase's finished trials (1 before the first)."""
        return self._measured / self._predicted if self._predicted > 0 else 1.0

    def eta(self, done: int, remaining_seconds: Left | None = None,
            then: float | Span | None = None) -> float:
        """The expected seconds this phase has left (`eta_span`)."""
        return self.eta_span(done, remaining_seconds, then).expected

    def eta_span(self, done: int, remaining_seconds: Left | None = None,
                 then: float | Span | None = None) -> Span:
        """The seconds this phase has left: expected, and the range of what the pruner and the
        grid's growth may still decide (`makespan_span`, plus `then`)."""
        if remaining_seconds is not None:
            self._remaining = remaining_seconds
        if then is not None:
            self._then = _span(then)
        if self._remaining is not None:
            ratio = 1.0 if self._calibrated else self.ratio()
            trials = []
            for s, ran, *stop in self._remaining:
                p, short = stop if stop else (0.0, s)
                full, short = s * ratio - ran, short * ratio - ran
                # running past where the pruner would have stopped it: it survived, runs on
                trials.append((full, p if short > 0.0 else 0.0, short))
            return makespan_span(trials, self.workers) + self._then * ratio
        if done <= self._done0:
            return Span.certain(math.nan)
        rate = (time.monotonic() - self._t0) / (done - self._done0)
        return Span.certain(rate * (self._total - done))

    def update(self, done: int, best: float | None, best_params: dict | None = None, *,
               remaining_seconds: Left | None = None, then: float | Span | None = None,
               total: int | None = None) -> None:
        """`remaining_seconds`: the predicted seconds of the trials still to run, now; `then`:
        the work that follows them (`stage_start`); `total`: the phase's trials, where another
        worker may have grown it since it started."""
        if total is not None:
            self._total = total
            if self._bar is not None:
                self._bar.total = total
        eta_s = _fmt_eta(self.eta_span(done, remaining_seconds, then))
        best_s = "—" if best is None else f"{best:.4f}"
        params = "" if not best_params else " (" + ", ".join(
            f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in best_params.items()) + ")"
        if self.mode == "bar" and self._bar is not None:
            self._bar.n = done
            self._bar.set_postfix_str(f"best {best_s}{params} eta {eta_s}")
        elif self.mode == "lines":
            self.line(f"stage {self._name}: {done}/{self._total} trials, best {best_s}{params}, "
                      f"eta {eta_s}")

    def stage_end(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def line(self, text: str) -> None:
        if self.mode != "off":
            print(text, file=self.stream, flush=True)
