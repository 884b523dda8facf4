"""The width and depth grids' designs replayed on real runs: trial-seconds against the interval at the
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
`--axis depth` replays the depth grid the same way (`validation_depth.json`; each depth's own
curvature, fitted here to its points, and asymmetry, as its verdict fits them; the target is
the target's depth, judged by `depth.depth_limits_from`): there a "wide" curve is a deeper one.

Designs (a width is "wide" past the first; every design extends a width at its edge as the
pipeline does, `validation.max_extend` steps at most):
  today        every width: `points` points, `step` apart, centred on the stages' pick
  focus        wide widths centred on the narrower width's fitted optimum once it is trained
  focus-5      focus, 5 points at the wide widths
  spread-5     focus, 5 points 0.75 octave apart at the wide widths (the vertex's variance
               falls with the spread while the curve stays parabolic)
  seeds-3/2    focus-5, 3 seeds at the narrowest width, 2 elsewhere (seeds where cheap)
  pick-spread-5  spread-5's points, every curve centred on the pick (no curve waits for
               another)
  spread-5-seeds spread-5, the grid's seeds on the first half of the curves, 2 on the rest
  pick-spread-5-seeds  pick-spread-5 with spread-5-seeds' seeds
  spread-all   spread-5, and the first curve's points 0.75 octave apart too
  spread-all-seeds  spread-all with spread-5-seeds' seeds
  spread-all-2x-first  spread-all-seeds with twice the seeds on the first curve
  spread-basin-N  spread-5, each later curve's 5 points spanning N of the curve before's lr
               basins (0.75-1.5 octaves apart; `plan.spread_step`); -seeds: spread-5-seeds'
  spread-basin-4-first-0.75  spread-basin-4-seeds, the first curve's points 0.75 octave apart
  spread-basin-4-first-2x    spread-basin-4-seeds, twice the seeds on the first curve
  spread-basin-4-first-0.75-2x  both
  spread-5-first-2x  spread-5, twice the seeds on the first curve (-3x: three times)
  first-2x-last-3    spread-basin-4-first-2x, 3 seeds on the last curve (the dearest)
  first-2x-last-4x3  the same with 4 points on the last curve
  skip-4, skip-8     spread-basin-4-first-2x without the 4-layer (8-layer) curve (`--axis
               depth`): three depths, the middle one's trial-seconds saved
  spread-5-all-2x, -4x, -8x  spread-5 with every curve at 2, 4 or 8 times its seeds: what a
               flat family's verdict costs to decide; depth-all-2x, -4x: the depth grid's
               default so
  last-3, last-3-basin, last-4-basin  spread-5 with the widest curve, the dearest, at 3 points
               (0.75 octave apart, or spread over 4 basins) or 4 (spread); wide-3-basin: every
               later curve at 3, spread; depth-last-3, depth-wide-3: the depth grid's default
               so (`--axis depth`)

    python benchmarks/design_replay.py --runs /tmp/cmpdef/sweeps/3b-mup-default-* --draws 200
    python benchmarks/design_replay.py --axis depth --runs /tmp/cmpdef/sweeps/*-default-*
    python benchmarks/design_replay.py --runs <run> --designs spread-5 --reasons  # why rejected
    python benchmarks/design_replay.py --table out1.json out2.json  # design × run, one table
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from transfer.judge.curves import extend_each, grid, mean_curve
from transfer.judge.shared_curvature import BASIN_EXCESS, fit_window, noise_groups
from transfer.judge.trajectory import predict
from transfer.judge.verdict import Limits, judge
from transfer.verdict.plan import CurvePlan, spread_step

COORD_OK = {"status": "passed", "passed": True, "max_abs_slope": 0.0}  # the lr verdict alone


@dataclass(frozen=True)
class Truth:
    """One real run's width grid, as the replay's truth."""

    name: str
    widths: tuple[int, ...]  # the curves' keys: widths, or depths on the depth grid
    vertex: dict[int, float]
    level: dict[int, float]
    curvature: dict[int, float]
    asymmetry: dict[int, float]
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
    axis: str = "width"
    # σ of a point past the basin on the high-lr side (> BASIN_EXCESS above the curve's best)
    # over the rest's, measured on the run's grid (`shared_curvature.noise_groups`): a design
    # that spreads its points puts more of them there
    past_ratio: float = 1.0


def curve_shape(points: dict, vertex: float, level: float, asymmetry: float) -> float:
    """A curve's curvature a in level + a·r^[x > vertex]·(x − vertex)², least squares over its
    seed-mean points within 1.5 octaves of the vertex (the depth verdict fits each curve its
    own, and its report keeps the asymmetry, not a)."""
    xs = np.array(points["log2_lr"], dtype=float)
    ys = np.array(points["loss"], dtype=float)
    keep = np.isfinite(ys) & (np.abs(xs - vertex) <= 1.5)
    d = xs[keep] - vertex
    basis = np.where(d > 0, asymmetry, 1.0) * d * d
    return float(max(np.dot(basis, ys[keep] - level) / max(np.dot(basis, basis), 1e-12), 1e-4))

def read_truth(run: Path, axis: str = "width") -> Truth:
    """The run folder's width grid (`validation.json`) or depth grid (`validation_depth.json`)
    as a `Truth`, its grid's points and step from config.yaml. The width grid's truth has one
    shared curvature and asymmetry, as its verdict fits it; the depth grid's, each curve its
    own (`depth_limits`: shared_shape False)."""
    depth = axis == "depth"
    v = json.loads((run / ("validation_depth.json" if depth else "validation.json")).read_text())
    val = yaml.safe_load((run / "config.yaml").read_text())["validation"]
    target = v["extrapolation"]["target_width"]
    widths = tuple(sorted(int(w) for w in v["curves"]))
    vertex = {int(w): float(x) for w, x in v["best_log2_lr"].items()}
    level = {int(w): float(x) for w, x in v["best_loss"].items()}
    target_opt = float(predict("converging", list(widths),
                               np.array([vertex[w] for w in widths]), target, axis))
    trials = pd.read_csv(run / "trials.csv")
    stage, key = ("validation_depth", "n_layers") if depth else ("validation", "width")
    grid_t = trials[trials["stage"] == stage]
    price = {int(w): float(g["seconds"].median()) for w, g in grid_t.groupby(key)}
    n = v["noise"]
    point = float(n["interaction_std"])
    seed = float(n.get("seed_std") or point)
    fit = v.get("fit") or {}
    shared = float(fit.get("asymmetry") or 1.0)
    shared = shared if math.isfinite(shared) else 1.0
    by = {int(w): float(r) for w, r in (fit.get("asymmetry_by_curve") or {}).items()}
    asym = {w: by.get(w, shared) if depth else shared for w in widths}
    curv = ({w: curve_shape(v["curves"][str(w)], vertex[w], level[w], asym[w]) for w in widths}
            if depth else dict.fromkeys(widths, float(v["curvature"])))
    return Truth(name=f"{run.name}:{axis}", widths=widths, vertex=vertex, level=level,
                 past_ratio=past_ratio(v["curves"], widths, int(val["points"])),  # limits_from
                 curvature=curv, asymmetry=asym,
                 point_std=point, seed_offset_std=math.sqrt(max(seed ** 2 - point ** 2, 0.0)),
                 pick=float(v["tuned_log2_lr"]), price=price, target_width=int(target),
                 target_optimum=target_opt, seeds=int(v["n_seeds"]),
                 points=int(val["points"]), step=float(val["step_log2"]),
                 max_extend=int(val["max_extend"]), axis=axis)


def past_ratio(curves: dict, keys: tuple[int, ...], window: int) -> float:
    """The run's points past the basin: their interaction σ over the rest's, as the verdict
    measures it (`shared_curvature.noise_groups` over the fit windows), 1 without seeds."""
    table, win = {}, {}
    for k in keys:
        c = curves[str(k)]
        xs, ys = np.asarray(c["log2_lr"], float), np.asarray(c["loss"], float)
        table[k] = {"log2_lr": xs.tolist(), "loss": ys.tolist(), "losses": c["losses"]}
        win[k] = fit_window(xs, ys, window)
    out, rest, _ = noise_groups(table, win, keys, BASIN_EXCESS)
    return max((max(out[k].get("rel_sd", [1.0])) for k in keys), default=1.0) \
        if math.isfinite(rest) else 1.0


# The width grid's default design (spread-5) and the depth grid's since a4474ff
# (spread-basin-4-first-2x): the later designs are each one of them with a change
SPREAD_5 = dict(focus=True, wide_points=5, wide_step=0.75, seeds=None)
DEPTH_DEFAULT = dict(focus=True, wide_points=5, wide_step=0.75, seeds="half", spread_basins=4.0,
                     max_step=1.5, first_seeds=2)

DESIGNS = {
    "today": dict(focus=False, wide_points=None, wide_step=None, seeds=None),
    "focus": dict(focus=True, wide_points=None, wide_step=None, seeds=None),
    "focus-5": dict(focus=True, wide_points=5, wide_step=None, seeds=None),
    "spread-5": dict(focus=True, wide_points=5, wide_step=0.75, seeds=None),
    "seeds-3/2": dict(focus=True, wide_points=5, wide_step=None, seeds=(3, 2)),
    # no focus: every curve centred on the pick at once (no curve waits for a narrower one)
    "pick-spread-5": dict(focus=False, wide_points=5, wide_step=0.75, seeds=None),
    # the depth grid's seeds where they are cheap: its own at the shallow half, 2 deeper
    "spread-5-seeds": dict(focus=True, wide_points=5, wide_step=0.75, seeds="half"),
    "pick-spread-5-seeds": dict(focus=False, wide_points=5, wide_step=0.75, seeds="half"),
    # the first curve spread too: its `points` points 0.75 octave apart around the pick (a
    # flat first curve's curvature S/N grows as the step squared while it stays parabolic)
    "spread-all": dict(focus=True, wide_points=5, wide_step=0.75, seeds=None, first_step=0.75),
    "spread-all-seeds": dict(focus=True, wide_points=5, wide_step=0.75, seeds="half",
                             first_step=0.75),
    # and twice the seeds on the first curve, the cheapest one, whose optimum anchors the
    # trajectory's far end
    "spread-all-2x-first": dict(focus=True, wide_points=5, wide_step=0.75, seeds="half",
                                first_step=0.75, first_seeds=2),
    # spread-5 (spread-5-seeds on the depth grid), each later curve's step spread to the
    # basin of the curve before it (`plan.spread_step`: its 5 points span `spread_basins`
    # basins, 0.75-1.5 octaves apart): a flat family's points spread with its basin
    "spread-basin-3": dict(focus=True, wide_points=5, wide_step=0.75, seeds=None,
                           spread_basins=3.0, max_step=1.5),
    "spread-basin-4": dict(focus=True, wide_points=5, wide_step=0.75, seeds=None,
                           spread_basins=4.0, max_step=1.5),
    "spread-basin-3-seeds": dict(focus=True, wide_points=5, wide_step=0.75, seeds="half",
                                 spread_basins=3.0, max_step=1.5),
    "spread-basin-4-seeds": dict(focus=True, wide_points=5, wide_step=0.75, seeds="half",
                                 spread_basins=4.0, max_step=1.5),
    # the default since f789016 on the depth grid (spread-basin-4-seeds), its first curve,
    # the cheapest, spread too (its 6 points 0.75 octave apart: 3.75 octaves) or at twice
    # its seeds: the 2-layer curve is what held Qwen2.5's depth verdict at f789016 (S/N 2.1)
    "spread-basin-4-first-0.75": dict(focus=True, wide_points=5, wide_step=0.75, seeds="half",
                                      spread_basins=4.0, max_step=1.5, first_step=0.75),
    "spread-basin-4-first-2x": dict(focus=True, wide_points=5, wide_step=0.75, seeds="half",
                                    spread_basins=4.0, max_step=1.5, first_seeds=2),
    "spread-basin-4-first-0.75-2x": dict(focus=True, wide_points=5, wide_step=0.75,
                                         seeds="half", spread_basins=4.0, max_step=1.5,
                                         first_step=0.75, first_seeds=2),
    # the width grid's default (spread-5) with the narrowest curve, the cheapest (~1/7 of the
    # widest's price a trial), at twice or three times its seeds: Gemma 2's width S/N sat at
    # 1.9 on its own seed noise (σ 0.039) at 216c39a and a4474ff
    "spread-5-first-2x": {**SPREAD_5, "first_seeds": 2},
    "spread-5-first-3x": {**SPREAD_5, "first_seeds": 3},
    # the default since a4474ff (spread-basin-4-first-2x) with the last curve, the widest or
    # deepest and dearest, at 3 seeds (5 or 4 points): the 16-layer curve held Qwen2.5's and
    # Gemma 2's depth verdicts there (S/N 2.3, 2.1)
    "first-2x-last-3": {**DEPTH_DEFAULT, "last_seeds": 3},
    "first-2x-last-4x3": {**DEPTH_DEFAULT, "last_seeds": 3, "last_points": 4},
    # the depth grid's default with one middle depth left out (its trial-seconds saved): does
    # the depth model still place the target's optimum from three depths?
    "skip-4": {**DEPTH_DEFAULT, "skip": (4,)},
    "skip-8": {**DEPTH_DEFAULT, "skip": (8,)},
    # the price of a decided verdict on a flat family: the width grid's default (spread-5)
    # with every curve at 2, 4 or 8 times its seeds, and the depth grid's default so
    **{f"spread-5-all-{k}x": {**SPREAD_5, "all_seeds": k} for k in (2, 4, 8)},
    # fewer points on the dearest curve (the widest, or the deepest), placed around the vertex
    # the curve before it showed: 3 points 0.75 octave apart, or 3 and 4 points spread over
    # the basin (`plan.spread_step`, up to 1.5 octaves apart): is the shared curvature enough
    # to place its vertex from 3?
    "last-3": {**SPREAD_5, "last_points": 3},
    "last-3-basin": {**SPREAD_5, "last_points": 3, "spread_basins": 4.0, "max_step": 1.5},
    "last-4-basin": {**SPREAD_5, "last_points": 4, "spread_basins": 4.0, "max_step": 1.5},
    "wide-3-basin": {**SPREAD_5, "wide_points": 3, "spread_basins": 4.0, "max_step": 1.5},
    "depth-last-3": {**DEPTH_DEFAULT, "last_points": 3},
    "depth-wide-3": {**DEPTH_DEFAULT, "wide_points": 3},
    **{f"depth-all-{k}x": {**DEPTH_DEFAULT, "all_seeds": k} for k in (2, 4)},
}


def replay(truth: Truth, design: dict, limits: Limits, rng: np.random.Generator) -> dict:
    """One validation of `truth` under `design`: (trial-seconds, outcome, interval, estimate)."""
    ws = tuple(w for w in truth.widths if w not in design.get("skip", ()))
    w0 = ws[0]
    seeds = {w: truth.seeds for w in ws}
    if design["seeds"] == "half":
        # by the truth's curves, so a skipped curve leaves every other curve's seeds as they are
        seeds = {w: truth.seeds if i < len(truth.widths) / 2 else 2
                 for i, w in enumerate(truth.widths) if w in ws}
    elif design["seeds"]:
        seeds = {w: design["seeds"][0] if w == w0 else design["seeds"][1] for w in ws}
    seeds[w0] *= int(design.get("first_seeds", 1))
    seeds = {w: n * int(design.get("all_seeds", 1)) for w, n in seeds.items()}
    if design.get("last_seeds"):
        seeds[ws[-1]] = int(design["last_seeds"])
    curves: dict[int, list] = {w: [] for w in ws}
    offsets = {w: rng.normal(0, truth.seed_offset_std, seeds[w]) for w in ws}
    seconds = 0.0

    def add(w, xs):
        nonlocal seconds
        for x in xs:
            d = x - truth.vertex[w]
            excess = truth.curvature[w] * (truth.asymmetry[w] if d > 0 else 1.0) * d * d
            past = d > 0 and excess > BASIN_EXCESS * truth.level[w]
            sd = truth.point_std * (truth.past_ratio if past else 1.0)
            curves[w].append((x, list(truth.level[w] + excess + offsets[w]
                                      + rng.normal(0, sd, seeds[w]))))
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
        if i == len(ws) - 1 and design.get("last_points"):
            n = int(design["last_points"])
        step = (design["wide_step"] if wide and design["wide_step"]
                else truth.step if wide else design.get("first_step") or truth.step)
        if wide and design["focus"]:
            xs, ys = mean_curve(curves[ws[i - 1]])
            fin = np.flatnonzero(np.isfinite(ys))
            centre = float(xs[fin[np.argmin(ys[fin])]]) if fin.size else pick
        if wide and design.get("spread_basins"):
            step = spread_step(curves[ws[i - 1]], CurvePlan(n, step, seeds[w]),
                               design["spread_basins"], design["max_step"])
        run_width(w, round(centre, 6), n, step)
    v = judge(curves, None, pick, limits, COORD_OK)
    t = v.trajectory or {}
    lo, hi = t.get("interval", [math.nan, math.nan])
    return {"seconds": seconds, "outcome": v.outcome, "lo": lo, "hi": hi,
            "estimate": t.get("estimate", math.nan),
            "reasons": v.reasons if v.outcome == "rejected" else []}


def limits_for(run: Path, truth: Truth) -> Limits:
    """The run's own verdict limits (its config.yaml's validation group, read as the pipeline
    reads it: `width.limits_from`, or `depth.depth_limits_from` on the depth grid) and its
    target width or depth."""
    from transfer.core.config import archived_validation
    from transfer.verdict.depth import depth_limits_from
    from transfer.verdict.width import limits_from

    cfg = yaml.safe_load((run / "config.yaml").read_text())
    val = archived_validation(cfg["validation"])
    param = cfg.get("proxy", {}).get("parametrization", "mup")
    if truth.axis == "depth":
        return depth_limits_from(val, truth.target_width, param)
    return limits_from(val, target_width=truth.target_width, parametrization=param)


# each axis's default design: the table's 1.00 ×
DEFAULTS = {"width": "spread-5", "depth": "spread-basin-4-first-2x"}


def table(rows: list[dict]) -> str:
    """Replayed rows (this script's `--out` files, merged) as one table per axis: a row per
    design, a column per run, each cell the design's trial-seconds × the default's on that run,
    its passed share, coverage and median interval width at the target (octaves)."""
    base = {r["run"]: r["seconds"] for r in rows
            if r["design"] == DEFAULTS[r["run"].rsplit(":", 1)[-1]]}
    runs = list(dict.fromkeys(r["run"] for r in rows if r["run"] in base))
    designs = list(dict.fromkeys(r["design"] for r in rows))
    out = []
    for axis in ("width", "depth"):
        rs = [x for x in runs if x.endswith(":" + axis)]
        if not rs:
            continue
        out += [f"{axis} grid: × the default's trial-seconds / passed / coverage / interval "
                "(octaves)", "", "| design | " + " | ".join(x.split(":")[0] for x in rs) + " |",
                "|---|" + "---|" * len(rs)]
        for d in designs:
            got = [next((r for r in rows if r["run"] == x and r["design"] == d), None) for x in rs]
            if None in got:
                continue
            out.append(f"| {d} | " + " | ".join(
                f"{r['seconds'] / base[x]:.2f} / {r['passed']:.0%} / {r['coverage']:.0%} / "
                + (f"{r['width']:.2f}" if math.isfinite(r["width"]) else "—")
                for x, r in zip(rs, got, strict=True)) + " |")
        out.append("")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", type=Path)
    ap.add_argument("--table", nargs="+", type=Path, metavar="JSON",
                    help="print the --out files given (merged) as one table per axis, design × "
                         "run, instead of replaying")
    ap.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--axis", choices=("width", "depth"), default="width",
                    help="the grid replayed: the width grid, or the depth grid (its curves "
                         "are depths; a 'wide' curve is a deeper one)")
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reasons", action="store_true",
                    help="after each row, the first reason of every rejected draw (a truth "
                         "drawn from a μP run that is rejected is a false rejection)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/out/design_replay.json"))
    args = ap.parse_args(argv)
    if args.table:
        print(table([r for f in args.table for r in json.loads(f.read_text())]))
        return
    if not args.runs:
        ap.error("--runs is required (or --table to print replayed rows)")
    if args.draws < 1:
        ap.error("--draws must be >= 1")
    rows = []
    print("| run | design | trial-seconds (median) | × today | interval width at the target "
          "(median, octaves) | coverage | passed / rejected / inconclusive |")
    print("|---|---|---|---|---|---|---|")
    for run in args.runs:
        need = "validation_depth.json" if args.axis == "depth" else "validation.json"
        if not (run / need).exists():
            ap.error(f"{run}: no {need} (a finished run folder is needed"
                     f"{', with the depth check on' if args.axis == 'depth' else ''})")
        try:
            truth = read_truth(run, args.axis)
        except (TypeError, ValueError) as e:  # a curve without a located optimum
            ap.error(f"{run}: its {args.axis} grid cannot be a truth (a curve without a "
                     f"located optimum: {e}); replay a run whose curves are all bracketed")
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
            if args.reasons:
                for i, g in enumerate(got):
                    if g["reasons"]:
                        print(f"  draw {i} rejected: {g['reasons'][0]}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
