"""The ETA calibrated by the runs before it.

The probes price each planned trial within ~10 % (cost.json's `trial_timing`), yet the
whole-run prediction fell 14-38 % under the wall on the five families of the 2026-12-06 compare
(`216c39a`, benchmarks/RESULTS.md): what the probes cannot price is what the run decides as it
goes (seed rounds, edge extensions, the stages' batch winner) and the fixed work around the
trials (the stages' workers waiting on each other, the coordinate checks' model builds and
hooks, the report). Each phase's measured ÷ probe-predicted seconds is recorded in every
finished run's cost.json; the ETA scales the probes' phases by their mean over

- the archive's own runs of this budget and parametrization that reached a verdict (the
  `HISTORY` newest),
  and
- `cost.eta_prior[parametrization]`: the ratios a budget ships, measured on named runs
  (`benchmarks/eta_calibration.py` prints them from an archive), counted as
  `cost.eta_prior_runs` runs.

The ratios are expected values: a seed round runs in some grids and not others, so one run's
wall scatters about them (`benchmarks/eta_calibration.py` measures that, leaving each run out
of its own calibration). A phase a run skipped (the depth grid after a width rejection)
counts 0 for it. Nothing here changes what is trained or judged.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from transfer.archive.store import Archive, ArchiveError, newest_first
from transfer.core.config import ETA_PHASES as PHASES

HISTORY = 20  # archived runs read at most, newest first
ENDED = ("finished", "inconclusive", "rejected")  # a launch that ran to its verdict


@dataclass(frozen=True)
class Calibration:
    """Measured ÷ probe-predicted seconds per phase, and where they came from."""

    ratios: dict[str, float] = field(default_factory=dict)
    # the same for the re-prediction once the stages are done (`after_stages`): against the
    # rest priced at the stages' winners, whose batch the first prediction could not know
    after: dict[str, float] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)  # archived runs in the mean
    prior_runs: int = 0  # the budget's prior, counted as this many runs
    prior_source: str = ""

    def apply(self, phases: Mapping[str, float], after_stages: bool = False
              ) -> dict[str, float]:
        """`phases` each scaled by its ratio (1 where there is none); `after_stages`: by the
        re-prediction's."""
        ratios = self.after if after_stages else self.ratios
        return {k: float(s) * ratios.get(k, 1.0) for k, s in phases.items()}

    def describe(self) -> str:
        """How the printed prediction was scaled, in a few words."""
        if not self.ratios:
            return ("the probes alone: no earlier run of this budget and parametrization to scale "
                    "them by")
        parts = []
        if self.prior_runs:
            parts.append(f"the budget's {self.prior_runs} measured runs")
        if self.runs:
            parts.append(f"{len(self.runs)} archived run{'s' if len(self.runs) > 1 else ''}")
        return "the probes scaled as in " + " and ".join(parts)

    def to_dict(self) -> dict:
        return {"ratios": {k: round(v, 4) for k, v in self.ratios.items()},
                "after_stages": {k: round(v, 4) for k, v in self.after.items()},
                "archived_runs": list(self.runs), "prior_runs": self.prior_runs,
                "prior_source": self.prior_source}


def run_ratios(cost: Mapping, after_stages: bool = False) -> dict[str, float]:
    """One finished run's measured ÷ predicted wall seconds per phase, from its cost.json: the
    prediction made before training (`prediction.phases`, the probes' own; `after_stages`:
    the re-prediction's, `prediction.after_stages.phases`) against `phases` as measured; a
    predicted phase that did not run counts 0. Empty for a run with no such prediction (one
    made before it was recorded, or a re-emit) and for one that did not train its own stages
    (its trials copied from an archived run, or a resumed one): its prediction is of a part."""
    pred = (cost.get("prediction") or {})
    if not float((pred.get("phases") or {}).get("stages", 0.0) or 0.0) > 0:
        return {}
    if after_stages:
        pred = pred.get("after_stages") or {}
    pred = pred.get("phases") or {}
    measured = cost.get("phases") or {}
    return {k: float(measured.get(k, 0.0)) / float(pred[k]) for k in PHASES
            if float(pred.get(k, 0.0) or 0.0) > 0}


def combine(history: Iterable[Mapping[str, float]], prior: Mapping[str, float],
            prior_runs: int) -> dict[str, float]:
    """Per phase, the mean of the runs' ratios with the prior counted as `prior_runs` runs."""
    history = list(history)
    out = {}
    for k in PHASES:
        xs = [h[k] for h in history if k in h]
        w = prior_runs if k in prior else 0
        if w + len(xs):
            out[k] = (w * float(prior.get(k, 0.0)) + sum(xs)) / (w + len(xs))
    return out


def _history(archive: Archive, budget: str, parametrization: str) -> list[tuple[str, dict]]:
    """(name, cost.json) of the newest runs of this budget and parametrization that reached a
    verdict (`ENDED`) and trained what they predicted (not copied from another run)."""
    if not archive.root.is_dir():
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a broken folder is the archive check's to report
        runs = archive.runs()
    if runs.empty or "status" not in runs:
        return []
    runs = newest_first(runs[runs["status"].isin(ENDED)
                             & (runs.get("parametrization") == parametrization)])
    out = []
    for name in runs["name"]:
        if len(out) >= HISTORY:
            break
        try:
            run = archive.load_run(name)
        except (ArchiveError, OSError, ValueError):
            continue
        cfg, cost = run.get("config") or {}, run.get("cost") or {}
        if cfg.get("budget") != budget or run["run"].get("reused_from"):
            continue
        if run_ratios(cost):
            out.append((name, cost))
    return out


def calibration(archive: Archive, cfg) -> Calibration:
    """The ETA's calibration for a run of `cfg` (its budget, its parametrization) from
    `archive`'s history and the budget's priors (`cost.eta_prior`,
    `cost.eta_prior_after_stages`, counted as `cost.eta_prior_runs` runs)."""
    par = str(cfg.proxy.parametrization)
    prior = dict((cfg.cost.eta_prior or {}).get(par) or {})
    prior_after = dict((cfg.cost.eta_prior_after_stages or {}).get(par) or {})
    prior_runs = int(cfg.cost.eta_prior_runs) if prior or prior_after else 0
    history = _history(archive, str(cfg.budget), par)
    return Calibration(
        ratios=combine((run_ratios(c) for _, c in history), prior, prior_runs),
        after=combine((run_ratios(c, after_stages=True) for _, c in history), prior_after,
                      prior_runs),
        runs=[n for n, _ in history], prior_runs=prior_runs,
        prior_source=str(cfg.cost.eta_prior_source) if prior_runs else "")
