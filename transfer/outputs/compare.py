"""Families compared from their archived runs: one row each, every metric with its interval.

Read from each run folder (validation.json, trials.csv, cost.json, target.yaml, config.yaml),
nothing trained here. Per family: the verdict and the launch lr with its interval; the proxies'
best loss at equal tokens (the widest grid width) and at equal FLOPs (each family's best loss over
its grid widths, interpolated in log FLOPs at a budget every family reached); stability: the lr
basin (octaves within 1 % of the best loss), the lr sensitivity of Wortsman et al. 2023 (arXiv
2309.14322) and the divergence margin; the coordinate checks' slopes; the target's cost. The
intervals are percentile bootstraps over the grid's seeds at `CONFIDENCE`. Where the leader's
interval overlaps another family's, the table says they cannot be told apart.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from transfer.archive.files import read_json, read_yaml
from transfer.judge.curves import basin_octaves

CONFIDENCE = 0.90
N_BOOT = 2000
# run.json's status → the verdict it records ("finished": validated)
STATUS = {"finished": "passed", "rejected": "rejected", "inconclusive": "inconclusive"}
# What a proxy-scale ranking is worth, said in every report.
RANKING_CAVEAT = (
    "Rankings at proxy scale are weak evidence of rankings at the target: DataDecide (Magnusson "
    "et al. 2025, arXiv 2504.11393) found that rankings of 150M-parameter runs predict the 1B "
    "winner about 80 % of the time, and these proxies have about 1M parameters. Read the loss "
    "columns as a check of each family's proxies, the transfer and stability columns as what "
    "`transfer` measures for the target.")

__all__ = ["CONFIDENCE", "RANKED", "RANKING_CAVEAT", "Family", "basin_octaves", "compare",
           "family_from_run", "finite", "leaders", "lr_sensitivity", "quiet", "seed_matrix"]


@dataclass
class Family:
    """One family's run, read as plain data."""

    model: str
    run: str
    status: str
    curves: dict[int, dict]  # width -> validation.json's curve (log2_lr, losses per seed)
    best_log2_lr: dict[int, float]
    best_log2_lr_ci: dict[int, list[float]]
    trials: pd.DataFrame
    vocab_size: int
    tokens: float
    coord: dict = field(default_factory=dict)
    depth_coord: dict = field(default_factory=dict)
    cost: dict = field(default_factory=dict)
    train: dict = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    # what would decide an inconclusive verdict, each naming its check (`Verdict.decide_with`:
    # the seeds predicted to decide it and their price, `transfer.judge.rounds.decide_hint`)
    decide: list[str] = field(default_factory=list)
    spans: str = ""  # target.yaml provenance.lr.interval_spans ("width only: …", …)


def _read(path: Path):
    """A run file as plain data (the archive's readers: a corrupt file is a one-line error),
    None where the run has no such file."""
    if not path.exists():
        return None
    return read_json(path) if path.suffix == ".json" else read_yaml(path)


def family_from_run(model: str, run_dir: Path) -> Family:
    """A finished run folder as a `Family`; ValueError naming what is missing."""
    v = _read(run_dir / "validation.json")
    if v is None or not v.get("curves"):
        raise ValueError(f"{run_dir}: no validation.json with lr curves (was the run finished, "
                         "with validation.enabled=true?)")
    cfg = _read(run_dir / "config.yaml") or {}
    run = _read(run_dir / "run.json") or {}
    depth = _read(run_dir / "validation_depth.json") or {}
    trials = pd.read_csv(run_dir / "trials.csv") if (run_dir / "trials.csv").exists() else \
        pd.DataFrame()
    target = _read(run_dir / "target.yaml") or {}
    return Family(
        model=model, run=run_dir.name,
        status=STATUS.get(str(run.get("status")), str(v.get("outcome"))),
        curves={int(w): c for w, c in v["curves"].items()},
        best_log2_lr={int(w): _number(x) for w, x in v.get("best_log2_lr", {}).items()},
        best_log2_lr_ci={int(w): [_number(x) for x in c]
                         for w, c in v.get("best_log2_lr_ci", {}).items()},
        trials=trials, vocab_size=int((cfg.get("derived") or {}).get("vocab_size", 256)),
        tokens=float((cfg.get("train") or {}).get("tokens", math.nan)),
        coord=v.get("coord_check") or {}, depth_coord=_depth_coord(depth),
        cost=(_read(run_dir / "cost.json") or {}).get("target", {}),
        train=target.get("train") or {},
        spans=str(((target.get("provenance") or {}).get("lr") or {}).get("interval_spans") or ""),
        reasons=_reasons(v, "width") + _reasons(depth, "depth"),
        decide=[f"{axis}: {d['decide_with']}" for axis, d in (("width", v), ("depth", depth))
                if d.get("outcome") == "inconclusive" and d.get("decide_with")])


def _number(x) -> float:
    """A number the run's files hold, NaN where they write null (an estimate the run lacks, a
    diverged seed: the JSON files and target.yaml alike)."""
    return math.nan if x is None else float(x)


def _reasons(verdict: Mapping, axis: str) -> list[str]:
    """A verdict's reasons (rejections first), each naming the check it came from."""
    return [f"{axis}: {r}" for r in list(verdict.get("rejected_because") or []) +
            list(verdict.get("inconclusive_because") or [])]


def _depth_coord(depth: Mapping) -> dict:
    """validation_depth.json's coordinate check across depth (a depth verdict's), or {}."""
    return dict(depth.get("coord_check") or {})


# ---- the metrics, each on one curve's seeds ------------------------------------------------
def seed_matrix(curve: Mapping) -> tuple[np.ndarray, np.ndarray]:
    """(log2 lrs (P,), losses (P, S)): the curve's points by seed, NaN where a seed is missing
    or diverged."""
    xs = np.asarray(curve["log2_lr"], dtype=float)
    n = max(len(s) for s in curve["losses"])
    ys = np.full((len(xs), n), np.nan)
    for i, s in enumerate(curve["losses"]):
        ys[i, :len(s)] = [_number(v) for v in s]
    return xs, ys


def lr_sensitivity(mean: np.ndarray, initial_loss: float) -> float:
    """Wortsman et al. 2023 (arXiv 2309.14322, Section 3.1): E over the lr grid (log-uniform) of
    min(loss, initial loss) − best loss; a diverged point counts as the initial loss."""
    y = np.where(np.isfinite(mean), np.minimum(mean, initial_loss), initial_loss)
    return float(np.mean(y - np.nanmin(mean))) if np.isfinite(mean).any() else math.nan


def _boot(ys: np.ndarray, stat, n_boot: int, seed: int) -> np.ndarray:
    """`stat(seed-mean curve)` over seed resamples (columns drawn with replacement)."""
    rng = np.random.default_rng(seed)
    s = ys.shape[1]
    out = np.empty(n_boot)
    for b in range(n_boot):
        cols = rng.integers(0, s, s)
        with quiet():
            out[b] = stat(np.nanmean(ys[:, cols], axis=1))
    return out


@contextlib.contextmanager
def quiet():
    """All-NaN slices (a seed draw that diverged everywhere) are NaN here, not warnings."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _ci(draws: np.ndarray, confidence: float) -> list[float]:
    d = draws[np.isfinite(draws)]
    if len(d) < 0.9 * len(draws) or not len(d):
        return [math.nan, math.nan]
    a = (1 - confidence) / 2
    return [float(np.quantile(d, a)), float(np.quantile(d, 1 - a))]


def _metric(ys: np.ndarray, stat, confidence: float, n_boot: int, seed: int) -> dict:
    with quiet():
        value = stat(np.nanmean(ys, axis=1))
    return {"value": float(value), "ci": _ci(_boot(ys, stat, n_boot, seed), confidence)}


def _flops_by_width(f: Family) -> dict[int, float]:
    """Each grid width's FLOPs per trial (trials.csv, the validation grid's median)."""
    t = f.trials
    if t.empty or "flops" not in t:
        return {}
    grid = t[(t["stage"] == "validation") & t["flops"].notna()]
    return {int(w): float(g["flops"].median()) for w, g in grid.groupby("width")}


def _loss_at_flops(f: Family, flops: float, confidence: float, n_boot: int) -> dict:
    """The best loss over the grid's widths, interpolated in log2 FLOPs at `flops` (each width's
    best seed-mean point; the same seed draw at every width)."""
    fl = _flops_by_width(f)
    widths = sorted(w for w in f.curves if w in fl)
    if len(widths) < 2:
        return {"value": math.nan, "ci": [math.nan, math.nan]}
    mats = [seed_matrix(f.curves[w])[1] for w in widths]
    s = min(m.shape[1] for m in mats)
    lx = np.log2([fl[w] for w in widths])

    def at(cols) -> float:
        best = [np.nanmin(np.nanmean(m[:, cols], axis=1)) for m in mats]
        return float(np.interp(math.log2(flops), lx, best))

    rng = np.random.default_rng(1)
    with quiet():
        value = at(np.arange(s))
        draws = np.array([at(rng.integers(0, s, s)) for _ in range(n_boot)])
    return {"value": value, "ci": _ci(draws, confidence)}


def _divergence(f: Family, width: int) -> dict:
    """Octaves from the optimum at `width` up to the lowest lr that diverged there (any stage or
    grid trial), or a lower bound (the highest lr that trained) where none did."""
    opt = f.best_log2_lr.get(width, math.nan)
    lo, hi = f.best_log2_lr_ci.get(width, [math.nan, math.nan])
    t = f.trials
    if t.empty or "diverged" not in t:
        return {"value": math.nan, "ci": [math.nan, math.nan], "bound": None}
    at = t[(t["width"] == width) & t["lr"].notna()]
    div = at[at["diverged"].astype(str).str.lower() == "true"]
    above = div[np.log2(div["lr"]) > opt] if math.isfinite(opt) else div
    if len(above):
        x = float(np.log2(above["lr"].min()))
        return {"value": x - opt, "ci": [x - hi, x - lo], "bound": None}
    trained = at[at["diverged"].astype(str).str.lower() != "true"]
    x = float(np.log2(trained["lr"].max())) if len(trained) else math.nan
    return {"value": x - opt, "ci": [math.nan, math.nan], "bound": "lower"}


def family_metrics(f: Family, *, flops: float | None, confidence: float = CONFIDENCE,
                   n_boot: int = N_BOOT) -> dict:
    """Every metric of one family, each {"value", "ci"} (and "bound" where it is one-sided)."""
    w = max(f.curves)
    xs, ys = seed_matrix(f.curves[w])
    l0 = math.log(f.vocab_size)
    basin_open = basin_octaves(xs, np.nanmean(ys, axis=1))[1]
    train = f.train
    lr_ci = [_number(x) for x in train.get("lr_interval") or [None, None]]
    out = {
        "model": f.model, "run": f.run, "verdict": f.status, "widest_proxy": w,
        "seeds": int(ys.shape[1]), "tokens": f.tokens,
        "lr": {"value": train.get("lr", math.nan), "ci": list(lr_ci)},
        "lr_transferred": {"value": train.get("lr_transferred", math.nan),
                           "spans": f.spans.split(":")[0],
                           "ci": [_number(x) for x in
                                  train.get("lr_transferred_interval") or [None, None]]},
        "loss_equal_tokens": _metric(ys, np.nanmin, confidence, n_boot, 0),
        "basin_octaves": {**_metric(ys, lambda m: basin_octaves(xs, m)[0], confidence, n_boot, 2),
                          "bound": "lower" if basin_open else None},
        "lr_sensitivity": _metric(ys, lambda m: lr_sensitivity(m, l0), confidence, n_boot, 3),
        "divergence_margin_octaves": _divergence(f, w),
        "coord_max_abs_slope": {"value": f.coord.get("max_abs_slope", math.nan),
                                "ci": list(f.coord.get("max_abs_slope_ci") or
                                           [math.nan, math.nan]),
                                "status": f.coord.get("status")},
        "depth_coord_max_abs_slope": {"value": f.depth_coord.get("max_abs_slope", math.nan),
                                      "ci": list(f.depth_coord.get("max_abs_slope_ci") or
                                                 [math.nan, math.nan])},
        "gpu_hours": f.cost.get("gpu_hours_with_buffer", math.nan),
        "days": f.cost.get("wall_days_with_buffer", math.nan),
        "usd": f.cost.get("usd_with_buffer", math.nan),
        "reasons": f.reasons,
        "decide_with": f.decide,
    }
    out["loss_equal_flops"] = (_loss_at_flops(f, flops, confidence, n_boot) if flops else
                               {"value": math.nan, "ci": [math.nan, math.nan]})
    return out


# ---- the table -------------------------------------------------------------------------------
# metric -> (heading, which way is better: -1 lower, +1 higher)
RANKED = {"loss_equal_tokens": ("best loss, equal tokens", -1),
          "loss_equal_flops": ("best loss, equal FLOPs", -1),
          "basin_octaves": ("lr basin (octaves within 1 %)", +1),
          "lr_sensitivity": ("lr sensitivity", -1),
          "divergence_margin_octaves": ("divergence margin (octaves)", +1)}


def _overlap(a: Sequence[float], b: Sequence[float]) -> bool:
    if not all(map(finite, (*a, *b))):
        return True  # an interval that is not finite cannot separate anything
    return a[0] <= b[1] and b[0] <= a[1]


def finite(x) -> bool:
    return x is not None and isinstance(x, int | float) and math.isfinite(x)


def leaders(rows: list[dict], metric: str, sign: int) -> dict:
    """The family whose value is best, and the families its interval cannot be told apart from
    (overlapping intervals). {"best": model or None, "tied": [models]}: best is None where the
    leader's interval overlaps another's."""
    have = [r for r in rows if finite(r[metric]["value"])]
    if len(have) < 2:
        return {"best": None, "tied": [r["model"] for r in have]}
    top = min(have, key=lambda r: -sign * r[metric]["value"])
    tied = [r["model"] for r in have if r is not top and _overlap(r[metric]["ci"],
                                                                   top[metric]["ci"])]
    return {"best": None if tied else top["model"], "tied": [top["model"], *tied] if tied else []}


def common_flops(families: list[Family]) -> float | None:
    """The largest FLOPs per trial that every family's grid reached (the smallest of their
    widest widths' FLOPs), inside each one's range; None without FLOPs."""
    ranges = [sorted(_flops_by_width(f).values()) for f in families]
    if not ranges or any(len(r) < 2 for r in ranges):
        return None
    lo, hi = max(r[0] for r in ranges), min(r[-1] for r in ranges)
    return hi if hi >= lo else None


def compare(families: list[Family], *, confidence: float = CONFIDENCE,
            n_boot: int = N_BOOT) -> dict:
    """The comparison as plain data: rows, the leaders per ranked metric, the caveat."""
    flops = common_flops(families)
    rows = [family_metrics(f, flops=flops, confidence=confidence, n_boot=n_boot)
            for f in families]
    return {"confidence": confidence, "equal_flops": flops,
            "rows": rows, "leaders": {m: leaders(rows, m, s) for m, (_, s) in RANKED.items()},
            "caveat": RANKING_CAVEAT,
            "definitions": {
                "loss_equal_tokens": "lowest seed-mean validation loss on the widest proxy's lr "
                                     "grid, every family at train.tokens",
                "loss_equal_flops": "each width's lowest seed-mean loss, interpolated in log2 "
                                    "FLOPs per trial at equal_flops (the largest every family "
                                    "reached)",
                "basin_octaves": "octaves of lr whose seed-mean loss is within 1 % of the best "
                                 "(edges interpolated); 'lower' where it reaches the grid's edge",
                "lr_sensitivity": "Wortsman et al. 2023 (arXiv 2309.14322): mean over the lr "
                                  "grid of min(loss, initial loss ln V) − best loss",
                "divergence_margin_octaves": "log2 of the lowest diverged lr above the "
                                             "optimum minus the optimum at the widest proxy; "
                                             "'lower' where nothing diverged",
                "intervals": f"{confidence:.0%} percentile bootstrap over the grid's seeds"}}
