"""How often the verdict is right: pass / reject / inconclusive rates on curves with known truth,
and how often the emitted interval at the target width covers the true optimum there.

Synthetic learning-rate curves at every grid width, drawn the way the real grid is
measured: the validation budget's points, step, seeds and grid extension; an asymmetric
parabola in log2 lr (steeper above the optimum, as real curves are); a level offset per seed
shared by every point (the same seeds train every point); independent noise per (point, seed);
and a grid centred on a noisy stage pick. The noise, curvature and asymmetry default to what a
real run measured: pass its `validation.json` with `--from` to take them from another run.

Truths (`vertex_law`: the optimum against width):
  mup          optimum fixed                                 → should pass
  converging   +0.5 octave from w0 to 4·w0, converging       → may pass; its interval must cover
  sp           −0.6 octave per doubling of width             → should not pass
  flat         the lr has no effect                          → should not pass
  drifting     shallow curve, −0.5 octave per doubling       → should not pass

Goal (issue 13): false pass ≤ 5 % for sp, flat and drifting; true pass ≥ 90 % for mup. The
"point rule" column is the verdict before issue 13 (pass when the point estimates of drift and
gap are inside their limits, no intervals, no curvature test) on the same draws.

`--compare` (issue 14: spend validation compute where the verdict needs it) also draws the
alternatives to the pipeline's grid, from the same seed: both widths extended together (the
grid before issue 14), 5 points instead of 7 at the wide width, and the wide grid centred on the
narrow curve's lowest point once that is trained; with the points each trains per width and the
cost in narrow-trial units (`--wide-cost`).

    python benchmarks/validator_power.py                       # default budget, 500 draws each
    python benchmarks/validator_power.py --compare --point-std 0.062   # at twice the noise
    python benchmarks/validator_power.py --budget thorough --draws 1000
    python benchmarks/validator_power.py --from sweeps/<run>/validation.json
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from transfer.judge.curves import extend_each, extend_points, grid, mean_curve
from transfer.judge.rounds import look_confidence, plan_round
from transfer.judge.verdict import REJECTED, Limits, judge
from transfer.verdict.plan import GridPlan, best_point, grid_plan
from transfer.verdict.width import early_look, limits_from, lr_bounds

COORD_OK = {"passed": True, "max_abs_slope": 0.0}  # the lr verdict alone is measured here


@dataclass(frozen=True)
class Noise:
    """What a real grid shows. Defaults: the default-budget μP run of `model=3b` recorded in
    the README (`validation.json`: interaction σ 0.031, seed σ 0.030, curvature 0.058 per
    octave², the stages' pick 0.42 octave from the fitted optimum)."""

    point_std: float = 0.031  # one seed at one point, seed offset removed (interaction σ)
    seed_offset_std: float = 0.01  # level offset per seed, shared by all points
    curvature: float = 0.058  # nats per octave² below the optimum
    asymmetry: float = 1.5  # curvature above the optimum / below it (the 256 curve: ~1.2)
    flat: float = 0.0  # half-width of a flat bottom around the optimum, in octaves
    pick_std: float = 0.4  # octaves: the stage's pick around the narrow optimum
    # σ of the points past the basin on the high-lr side (true loss more than `past_excess` of
    # its level above the optimum) over everyone else's: real grids measured ~4 (seed sd rms
    # 0.10 against 0.027, benchmarks/RESULTS.md, the basin's noise)
    past_ratio: float = 1.0
    past_excess: float = 0.06

    @classmethod
    def from_validation(cls, path: Path) -> Noise:
        v = json.loads(path.read_text())
        n = v["noise"]
        point = float(n["interaction_std"])
        seed = float(n.get("seed_std") or point)
        return cls(point_std=point, seed_offset_std=math.sqrt(max(seed**2 - point**2, 0.0)),
                   curvature=float(v["curvature"]))


def loss(x: np.ndarray, v: float, a: float, asym: float, flat: float = 0.0) -> np.ndarray:
    d = x - v
    d = np.sign(d) * np.maximum(np.abs(d) - flat, 0.0)  # a flat bottom `flat` either side
    return np.where(d > 0, asym * a, a) * d * d


TRUTHS = ("mup", "converging", "sp", "flat", "drifting", "sp_adam", "borderline")


def vertex_law(truth: str, v0: float, w0: int):
    """The true optimum against width for each truth: fixed (μP); converging, 0.5 octave from
    w0 to 4·w0 and 0.35 more to the limit (μP with a finite-width correction); −0.6 octave per
    doubling (SP); none (flat); −0.5 per doubling on a shallow curve (drifting)."""
    if truth == "converging":
        return lambda w: v0 + 1.0 * (1 - (w / w0) ** -0.5)
    slope = {"sp": -0.6, "drifting": -0.5, "sp_adam": -1.0, "borderline": -0.3}.get(truth, 0.0)
    return lambda w: v0 + slope * math.log2(w / w0)


def draw(truth: str, v0: float, noise: Noise, design: dict, limits: Limits,
         rng: np.random.Generator, parametrization: str = "mup") -> tuple:
    """One validation as the pipeline runs it, at every grid width: the narrow grid around the
    pick; the wider grids (`points_wide` points) around the pick, or — `focus` — around the
    narrow curve's lowest point once the narrow grid is trained; extended at an edge until
    bracketed — every width together, or (`extend_each`, the pipeline's; always with `focus`)
    only the width whose minimum is at the edge. Returns (outcome, old rule's pass, drift,
    points trained at the narrow width, at the wider ones, the emitted optimum at the target,
    its interval, the true optimum there, whether the early look stopped the grid). With the budget's `plan` (`validation.focus`), the
    pipeline's own grid (`pipeline_grid`): each wider curve its planned points, step and seeds,
    centred on the best point of the one before, and the early look before the widest."""
    widths = list(design["widths"])
    w0, wide = widths[0], widths[1:]
    law = vertex_law(truth, v0, w0)
    a = {"flat": 0.0, "drifting": noise.curvature / 4}.get(truth, noise.curvature)
    vertex = {w: law(w) for w in widths}
    levels = {w: 2.6 - 0.075 * i for i, w in enumerate(widths)}
    plan = design.get("plan")
    offsets = {w: rng.normal(0, noise.seed_offset_std,
                             plan[w].seeds if plan is not None else design["seeds"])
               for w in widths}
    centre = round(v0 + rng.normal(0, noise.pick_std), 6)
    step, focus = design["step"], design.get("focus", False)
    each = focus or design.get("extend_each", False)
    points_wide = design.get("points_wide") or design["points"]
    curves = {w: [] for w in widths}

    def add(w, points):
        excess = loss(np.asarray(points), vertex[w], a, noise.asymmetry, noise.flat)
        base = excess + levels[w]
        for x, y, e in zip(points, base, excess):
            s = noise.point_std * (noise.past_ratio if x > vertex[w] and e > noise.past_excess
                                   * levels[w] else 1.0)
            curves[w].append((x, list(y + offsets[w] + rng.normal(0, s, len(offsets[w])))))

    def bounds(c, n):  # the pipeline's: `validation.max_extend` steps beyond n points
        return lr_bounds(c, SimpleNamespace(step_log2=step, points=n,
                                            max_extend=design["max_extend"]))

    def extend(ws, lims):
        if not each:  # every width gets every point any one needs
            while new := extend_points({w: curves[w] for w in ws}, step=step, lo=lims[w0][0],
                                       hi=lims[w0][1]):
                for w in ws:
                    add(w, new)
            return
        while new := extend_each({w: curves[w] for w in ws}, step=step, bounds=lims):
            for w, xs in new.items():
                add(w, xs)

    lims = {w0: bounds(centre, design["points"])}
    if plan is not None:
        widths = pipeline_grid(plan, widths, centre, add, curves, design.get("early"),
                               parametrization)
        curves = {w: curves[w] for w in widths}
    elif focus:
        add(w0, grid(centre, design["points"], step))
        extend([w0], lims)
        xs, ys = mean_curve(curves[w0])
        fin = np.flatnonzero(np.isfinite(ys))
        c1 = float(xs[fin[np.argmin(ys[fin])]]) if fin.size else centre
        for w in wide:
            lims[w] = bounds(c1, points_wide)
            add(w, grid(c1, points_wide, step))
        extend(wide, lims)
    else:
        for w in wide:
            lims[w] = bounds(centre, points_wide)
        add(w0, grid(centre, design["points"], step))
        for w in wide:
            add(w, grid(centre, points_wide, step))
        extend(widths, lims)
    v = judge(curves, None, centre, limits, COORD_OK)
    # (max rounds, extra budget in narrow-trial seconds); none after an early rejection, as in
    # the pipeline
    stopped = len(widths) < len(design["widths"])
    rounds = None if stopped else design.get("rounds")
    looks, budget = 1, (rounds or (0, 0.0))[1]
    while rounds and looks <= rounds[0] and v.more_data_decides:
        seeds = {w: len(curves[w][0][1]) for w in widths}
        per_seed = {w: math.ceil(len(curves[w]) / design["workers"]) * design["trial_cost"][w]
                    for w in widths}  # one more seed at every point, on the workers
        plan = plan_round(v, base_confidence=design["confidence"], looks=looks, seeds=seeds,
                          add=design["seeds"], seconds_per_seed=per_seed, left=budget)
        if plan is None:
            break
        chosen, n = plan
        for w in chosen:  # n more seeds at every point of the width, new offsets
            budget -= n * per_seed[w]
            off = rng.normal(0, noise.seed_offset_std, n)
            for x, ys in curves[w]:
                base = loss(np.asarray([x]), vertex[w], a, noise.asymmetry, noise.flat)[0]
                ys.extend(base + levels[w] + off + rng.normal(0, noise.point_std, n))
        looks += 1
        v = judge(curves, None, centre, replace(limits, confidence=look_confidence(
            design["confidence"], looks)), COORD_OK)
    # The rule before issue 13: point estimates inside the limits, every optimum bracketed.
    old = (math.isfinite(v.drift_log2) and abs(v.drift_log2) <= limits.tolerance_log2
           and v.loss_gap <= limits.max_gap and all(v.bracketed.values()))
    t = v.trajectory or {}
    target = limits.target_width
    wide = widths[1:]
    return (v.outcome, old, v.drift_log2, len(curves[w0]), sum(len(curves[w]) for w in wide),
            t.get("estimate", math.nan), t.get("interval", [math.nan, math.nan]),
            law(target) if target else math.nan, stopped)


def pipeline_grid(plan: GridPlan, widths: list[int], centre: float, add, curves: dict,
                  early, parametrization: str) -> list[int]:
    """The width grid as `transfer.verdict.axis_grid` lays it out under `validation.focus`:
    each curve its `plan` points, step (`plan.step_after`) and seeds, the first centred on the
    stages' pick and each later one on the best point of the one before (`plan.best_point`),
    extended at its own edge within its own bounds; before each curve past the second, the
    early look (`transfer.verdict.width.early_look`, the budget's `validation` group `early`;
    None: off) on the widths measured, whose rejection stops the grid. Returns the widths
    measured."""
    for i, w in enumerate(widths):
        if i >= 2 and early is not None:
            look = early_look(early, parametrization, {k: curves[k] for k in widths[:i]},
                              centre)
            if look is not None and look.outcome == REJECTED:
                return widths[:i]
        before = curves[widths[i - 1]] if i else None
        found = best_point(before) if before else None  # the pipeline's `grow`
        c = centre if found is None else found
        cp = replace(plan[w], step=plan.step_after(w, before) if i else plan[w].step)
        bounds = {w: cp.bounds(c, plan.max_extend)}
        add(w, cp.xs(c))
        while new := extend_each({w: curves[w]}, step=cp.step, bounds=bounds):
            add(w, new[w])
    return widths


# The curve families the coverage table measures (issue 35): (truth, asymmetry, flat bottom,
# the parametrization whose trajectory model is emitted).
FAMILIES = {
    "symmetric": ("mup", 1.0, 0.0, "mup"),
    "asymmetric 1.5": ("mup", 1.5, 0.0, "mup"),
    "asymmetric 2": ("mup", 2.0, 0.0, "mup"),
    "flat-bottomed": ("mup", 1.5, 0.5, "mup"),
    "drifting optimum": ("converging", 1.5, 0.0, "mup"),
    "SP-like": ("sp_adam", 1.5, 0.0, "sp"),
}


def coverage(families, noise: Noise, design: dict, budget: str, model: str, draws: int,
             seed: int, limits_changes: dict | None = None,
             overrides: tuple[str, ...] = ()) -> list[dict]:
    """Per family: how often the emitted interval at the target covers the true optimum
    there, its mean width, the estimate's mean error (bias) and rms error, and the verdicts."""
    rows = []
    for name in families:
        truth, asym, flat, param = FAMILIES[name]
        _, limits = design_of(budget, model, param, overrides)
        limits = replace(limits, **(limits_changes or {}))
        rng = np.random.default_rng(seed)
        nz = replace(noise, asymmetry=asym, flat=flat)
        cover, widths, errs, outcomes, early = 0, [], [], Counter(), 0
        for _ in range(draws):
            outcome, _, _, _, _, est, (lo, hi), true, stopped = draw(
                truth, -7.0, nz, design, limits, rng, param)
            outcomes[outcome] += 1
            early += stopped
            cover += lo <= true <= hi
            widths.append(hi - lo)
            if math.isfinite(est):
                errs.append(est - true)
        w = np.asarray(widths)
        rows.append({"family": name, "sigma": noise.point_std, "draws": draws,
                     "coverage": cover / draws,
                     "width_median": float(np.median(w)),
                     "finite": float(np.isfinite(w).mean()),
                     "bias": float(np.mean(errs)) if errs else math.nan,
                     "rms": float(np.sqrt(np.mean(np.square(errs)))) if errs else math.nan,
                     "early_rejected": early / draws,
                     **{k: outcomes[k] / draws for k in ("passed", "rejected", "inconclusive")}})
    return rows


def print_coverage(rows: list[dict]) -> None:
    print("| family | point σ | coverage of the 90 % interval | median width (octaves) | "
          "bias (octaves) | rms error | pass / reject / inconclusive | stopped by the early "
          "look |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['family']} | {r['sigma']:.3f} | {r['coverage']:.1%} | "
              f"{r['width_median']:.2f} | {r['bias']:+.3f} | {r['rms']:.2f} | "
              f"{r['passed']:.0%} / {r['rejected']:.0%} / {r['inconclusive']:.0%} | "
              f"{r['early_rejected']:.1%} |")


def design_of(budget: str, model: str = "3b", parametrization: str = "mup",
              overrides: tuple[str, ...] = ()) -> tuple[dict, Limits]:
    """The budget's grid (every width, points, step, seeds, extension) and the verdict's
    limits, with the target width of `model` the trajectory is extrapolated to; `overrides`:
    command-line overrides on top (a design measured before it is the default)."""
    from transfer.core.compose import compose
    from transfer.core.config import grid_widths

    cfg = compose([f"budget={budget}", f"model={model}", *overrides])
    v, p = cfg.validation, cfg.proxy
    design = {"widths": tuple(grid_widths(p)), "points": v.points,
              "extend_each": True,  # the pipeline's extension: only the width that needs it
              "step": v.step_log2, "seeds": v.seeds, "max_extend": v.max_extend,
              "confidence": v.confidence, "max_extra_seconds": v.max_extra_seconds}
    if v.focus:  # the pipeline's focused grid and its early look (`pipeline_grid`)
        design["plan"] = grid_plan(v, design["widths"], v.seeds)
        design["early"] = v if v.early_reject else None
    return design, limits_from(v, target_width=int(cfg.model.d_model),
                               parametrization=parametrization)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", default="default")
    ap.add_argument("--model", default="3b", help="the target whose width the trajectory reaches")
    ap.add_argument("--override", nargs="+", default=[], metavar="KEY=VALUE",
                    help="config overrides on the budget, e.g. validation.spread_basins=4 "
                         "validation.max_step_log2=1.5")
    ap.add_argument("--truths", nargs="+", default=list(TRUTHS), choices=TRUTHS)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--from", dest="source", type=Path, default=None,
                    help="a run's validation.json to take noise and curvature from")
    ap.add_argument("--seeds", type=int, default=None, help="override validation.seeds")
    ap.add_argument("--points", type=int, default=None, help="override validation.points")
    ap.add_argument("--point-std", type=float, default=None)
    ap.add_argument("--compare", action="store_true",
                    help="also the designs issue 14 measured against the pipeline's, on draws "
                         "from the same seed: the grid before it (both widths extended "
                         "together), 5 points at the wide width, and the wide grid centred on "
                         "the narrow curve's lowest point")
    ap.add_argument("--wide-cost", type=float, default=5.6,
                    help="seconds of one wide trial / one narrow trial, for the cost column "
                         "(the default: a default-budget run's probes on 2 CPU cores, 47.2 s at "
                         "width 256 / 8.5 s at width 64, cost.json prediction.trial_seconds)")
    ap.add_argument("--coverage", action="store_true",
                    help="the coverage table instead (issue 35): every curve family at the "
                         "point σ of --sigmas")
    ap.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    ap.add_argument("--sigmas", nargs="+", type=float, default=[0.025, 0.05],
                    help="point σ for --coverage (default: the default runs' 0.020-0.030, and "
                         "twice that)")
    ap.add_argument("--json", type=Path, default=None, help="--coverage rows as JSON")
    ap.add_argument("--rounds", type=int, default=0,
                    help="also measure more where it decides (issue 35): up to this many seed "
                         "rounds within --extra-seconds, each look at 1 − α/k")
    ap.add_argument("--extra-seconds", type=float, default=None,
                    help="the rounds' budget in seconds (default: the budget's "
                         "validation.max_extra_seconds)")
    ap.add_argument("--trial-seconds", type=float, nargs="+", default=[10.0, 25.0, 70.0],
                    help="seconds of one trial at each grid width, narrowest first (default: "
                         "a default-budget run on 2 CPU cores, width 64 / 128 / 256)")
    ap.add_argument("--workers", type=int, default=2, help="workers the rounds' trials share")
    ap.add_argument("--past-ratio", type=float, default=1.0,
                    help="noise of the points past the basin on the high-lr side (loss more "
                         "than 6 %% above the optimum's) over the rest's (real grids: ~4)")
    ap.add_argument("--basin-excess", type=float, default=None,
                    help="the weighted fit's threshold (Limits.basin_excess; default: the "
                         "verdict's own, 0.06 since 216c39a)")
    args = ap.parse_args(argv)
    design, limits = design_of(args.budget, args.model, overrides=tuple(args.override))
    # the verdict's own weighting (Limits.basin_excess) unless one is named
    basin = {} if args.basin_excess is None else {"basin_excess": args.basin_excess}
    limits = replace(limits, **basin)
    if args.rounds:
        extra = (args.extra_seconds if args.extra_seconds is not None
                 else design["max_extra_seconds"])
        design["rounds"] = (args.rounds, extra)
        design["trial_cost"] = dict(zip(design["widths"], args.trial_seconds))
        design["workers"] = args.workers
    if args.coverage:
        rows = []
        for sigma in args.sigmas:
            rows += coverage(args.families, Noise(point_std=sigma, past_ratio=args.past_ratio),
                             design, args.budget, args.model, args.draws, args.seed, basin,
                             tuple(args.override))
        print(f"budget={args.budget}{''.join(' ' + o for o in args.override)}: widths {design['widths']}, target width "
              f"{limits.target_width}, {args.draws} draws per row")
        print_coverage(rows)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return
    if args.seeds:
        design["seeds"] = args.seeds
    if args.points:
        design["points"] = args.points
        limits = replace(limits, fit_window=args.points)
    noise = Noise.from_validation(args.source) if args.source else Noise()
    noise = replace(noise, past_ratio=args.past_ratio)
    if args.point_std is not None:
        noise = replace(noise, point_std=args.point_std)
    designs = {"configured": design}
    if args.compare:
        flat = dict(design, plan=None, early=None)  # issue 14's designs, before the plan
        designs = {"extended together (before)": dict(flat, extend_each=False),
                   "configured": design,
                   "5 points at the wide width": dict(flat, points_wide=5),
                   "wide grid at the narrow minimum": dict(flat, focus=True),
                   "both of the above": dict(flat, focus=True, points_wide=5)}
    print(f"budget={args.budget}: widths {design['widths']}, {design['points']} points × "
          f"{design['step']} octave, {design['seeds']} seeds, ≤ "
          f"{design['max_extend']} extension steps per side; {noise}; {args.draws} draws each")
    print(f"target width {limits.target_width} ({limits.trajectory_model} model)")
    print("| design | truth | pass | reject | inconclusive | point rule passes | drift sd "
          "(octaves) | interval covers the target's optimum | rms error at the target "
          "(octaves) | points narrow / wider | cost (narrow trials) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, d in designs.items():
        rng = np.random.default_rng(args.seed)
        for truth in args.truths:
            outcomes, old, drifts, n0, n1, cover, err = Counter(), 0, [], 0, 0, 0, []
            for _ in range(args.draws):
                outcome, old_pass, dr, k0, k1, est, (lo, hi), true, _ = draw(
                    truth, -7.0, noise, d, limits, rng)
                outcomes[outcome] += 1
                old += old_pass
                n0, n1 = n0 + k0, n1 + k1
                cover += lo <= true <= hi
                if math.isfinite(est):
                    err.append(est - true)
                if math.isfinite(dr):
                    drifts.append(dr)
            n = args.draws
            cost = d["seeds"] * (n0 + args.wide_cost * n1) / n
            print(f"| {name} | {truth} | {outcomes['passed'] / n:.1%} | "
                  f"{outcomes['rejected'] / n:.1%} | {outcomes['inconclusive'] / n:.1%} | "
                  f"{old / n:.1%} | {np.std(drifts) if drifts else math.nan:.2f} | "
                  f"{cover / n:.1%} | {np.sqrt(np.mean(np.square(err))) if err else math.nan:.2f} "
                  f"| {n0 / n:.1f} / {n1 / n:.1f} | {cost:.0f} |")


if __name__ == "__main__":
    main()
