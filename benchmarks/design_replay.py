"""The width grid's designs replayed on real runs: trial-seconds against the interval at the
target and its coverage, so that a lever is chosen by its numbers.

Each run folder given (`--runs sweeps/<run> ...`, finished at `budget=default`) is read as the
truth of one replay: its widths' fitted optima (`validation.json: best_log2_lr`), the shared
curvature and asymmetry of its fit, its noise (interaction σ per point and seed, the seed
offsets), each width's best loss, the stages' pick, and each width's price, the median seconds
of its grid trials (`trials.csv`). The true optimum at the target is the run's own trajectory
estimate there (`converging` through the fitted optima), so coverage asks: does a design's
interval hold the answer the full grid found? Every draw is judged by the package's `judge`
(the same limits, the run's target width), and each design is priced at the replayed run's
trial seconds, summed over every point and seed it trains (extensions at an edge included).

Designs (a width is "wide" past the first; every design extends a width at its edge as the
pipeline does, `validation.max_extend` steps at most):
  today        every width: `points` points, `step` apart, centred on the stages' pick
  focus        wide widths centred on the narrower width's fitted optimum once it is trained
  focus-5      focus, 5 points at the wide widths
  spread-5     focus, 5 points 0.75 octave apart at the wide widths (the vertex's variance
               falls with the spread while the curve stays parabolic)
  seeds-3/2    focus-5, 3 seeds at the narrowest width, 2 elsewhere (seeds where cheap)

    python benchmarks/design_replay.py --runs /tmp/cmpdef/sweeps/3b-mup-default-* --draws 200
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import yaml

from transfer.verdict.curves import extend_each, grid, mean_curve
from transfer.verdict.judge import Limits, judge
from transfer.verdict.trajectory import predict

COORD_OK = {"status": "passed", "passed": True, "max_abs_slope": 0.0}  # the lr verdict alone


@dataclass(frozen=True)
class Truth:
    """One real run's width grid, as the replay's truth."""

    name: str
    widths: tuple[int, ...]
    vertex: dict[int, float]
    level: dict[int, float]
    curvature: float
    asymmetry: float
    point_std: float
    seed_offset_std: float
    pick: float
    price: dict[int, float]  # seconds per trial at each width
    target_width: int
    target_optimum: float
    seeds: int
    points: int
    step: float
    max_extend: int


def read_truth(run: Path) -> Truth:
    """The run folder's width grid as a `Truth`, its grid's points and step from config.yaml."""
    v = json.loads((run / "validation.json").read_text())
    val = yaml.safe_load((run / "config.yaml").read_text())["validation"]
    cfg_target = v["extrapolation"]["target_width"]
    widths = tuple(sorted(int(w) for w in v["curves"]))
    vertex = {int(w): float(x) for w, x in v["best_log2_lr"].items()}
    target_opt = float(predict("converging", list(widths),
                               np.array([vertex[w] for w in widths]), cfg_target))
    trials = pd.read_csv(run / "trials.csv")
    grid_t = trials[trials["stage"] == "validation"]
    price = {int(w): float(g["seconds"].median()) for w, g in grid_t.groupby("width")}
    n = v["noise"]
    point = float(n["interaction_std"])
    seed = float(n.get("seed_std") or point)
    asym = float((v.get("fit") or {}).get("asymmetry") or 1.0)
    return Truth(name=run.name, widths=widths, vertex=vertex,
                 level={int(w): float(x) for w, x in v["best_loss"].items()},
                 curvature=float(v["curvature"]), asymmetry=asym if math.isfinite(asym) else 1.0,
                 point_std=point, seed_offset_std=math.sqrt(max(seed ** 2 - point ** 2, 0.0)),
                 pick=float(v["tuned_log2_lr"]), price=price, target_width=int(cfg_target),
                 target_optimum=target_opt, seeds=int(v["n_seeds"]),
                 points=int(val["points"]), step=float(val["step_log2"]),
                 max_extend=int(val["max_extend"]))


DESIGNS = {
    "today": dict(focus=False, wide_points=None, wide_step=None, seeds=None),
    "focus": dict(focus=True, wide_points=None, wide_step=None, seeds=None),
    "focus-5": dict(focus=True, wide_points=5, wide_step=None, seeds=None),
    "spread-5": dict(focus=True, wide_points=5, wide_step=0.75, seeds=None),
    "seeds-3/2": dict(focus=True, wide_points=5, wide_step=None, seeds=(3, 2)),
}


def replay(truth: Truth, design: dict, limits: Limits, rng: np.random.Generator) -> dict:
    """One validation of `truth` under `design`: (trial-seconds, outcome, interval, estimate)."""
    ws, w0 = truth.widths, truth.widths[0]
    seeds = {w: (design["seeds"][0] if w == w0 else design["seeds"][1]) if design["seeds"]
             else truth.seeds for w in ws}
    curves: dict[int, list] = {w: [] for w in ws}
    offsets = {w: rng.normal(0, truth.seed_offset_std, seeds[w]) for w in ws}
    seconds = 0.0

    def add(w, xs):
        nonlocal seconds
        for x in xs:
            d = x - truth.vertex[w]
            base = truth.level[w] + truth.curvature * (truth.asymmetry if d > 0 else 1.0) * d * d
            curves[w].append((x, list(base + offsets[w]
                                      + rng.normal(0, truth.point_std, seeds[w]))))
            seconds += seeds[w] * truth.price.get(w, 0.0)

    def run_width(w, centre, n, step):
        half = step * ((n - 1) / 2 + truth.max_extend)
        add(w, grid(centre, n, step))
        while new := extend_each({w: curves[w]}, step=step, bounds={w: (centre - half,
                                                                         centre + half)}):
            add(w, new[w])

    pick = truth.pick + rng.normal(0, 0.05)  # the stages' pick, as the run drew it
    centre = pick
    for i, w in enumerate(ws):
        wide = i > 0
        n = design["wide_points"] if wide and design["wide_points"] else truth.points
        step = design["wide_step"] if wide and design["wide_step"] else truth.step
        if wide and design["focus"]:
            xs, ys = mean_curve(curves[ws[i - 1]])
            fin = np.flatnonzero(np.isfinite(ys))
            centre = float(xs[fin[np.argmin(ys[fin])]]) if fin.size else pick
        run_width(w, round(centre, 6), n, step)
    v = judge(curves, None, pick, limits, COORD_OK)
    t = v.trajectory or {}
    lo, hi = t.get("interval", [math.nan, math.nan])
    return {"seconds": seconds, "outcome": v.outcome, "lo": lo, "hi": hi,
            "estimate": t.get("estimate", math.nan)}


def limits_for(run: Path, truth: Truth) -> Limits:
    """The run's own verdict limits (its config.yaml's validation group, read as the pipeline
    reads it: transfer.verdict.width.limits_from) and its target width."""
    from transfer.verdict.width import limits_from

    val = yaml.safe_load((run / "config.yaml").read_text())["validation"]
    return limits_from(SimpleNamespace(**val), target_width=truth.target_width)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", type=Path, required=True)
    ap.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/out/design_replay.json"))
    args = ap.parse_args(argv)
    if args.draws < 1:
        ap.error("--draws must be >= 1")
    rows = []
    print("| run | design | trial-seconds (median) | × today | interval width at the target "
          "(median, octaves) | coverage | passed / rejected / inconclusive |")
    print("|---|---|---|---|---|---|---|")
    for run in args.runs:
        if not (run / "validation.json").exists():
            ap.error(f"{run}: no validation.json (a finished run folder is needed)")
        truth = read_truth(run)
        limits = limits_for(run, truth)
        base = None
        for name in args.designs:
            rng = np.random.default_rng(args.seed)
            got = [replay(truth, DESIGNS[name], limits, rng)
                   for _ in range(args.draws)]
            sec = float(np.median([g["seconds"] for g in got]))
            base = base or sec
            width = np.array([g["hi"] - g["lo"] for g in got])
            cover = np.mean([g["lo"] <= truth.target_optimum <= g["hi"] for g in got])
            out = {k: np.mean([g["outcome"] == k for g in got])
                   for k in ("passed", "rejected", "inconclusive")}
            row = {"run": truth.name, "design": name, "seconds": sec, "ratio": sec / base,
                   "width": float(np.median(width)), "finite": float(np.isfinite(width).mean()),
                   "coverage": float(cover), **{k: float(x) for k, x in out.items()}}
            rows.append(row)
            print(f"| {truth.name} | {name} | {sec:.0f} | {sec / base:.2f} | "
                  f"{row['width']:.2f} | {cover:.0%} | {out['passed']:.0%} / "
                  f"{out['rejected']:.0%} / {out['inconclusive']:.0%} |", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
