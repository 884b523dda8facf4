"""How often the verdict is right: pass / reject / inconclusive rates on curves with known truth.

Synthetic learning-rate curves at the two validation widths, drawn the way the real grid is
measured: the validation budget's points, step, seeds and grid extension; an asymmetric
parabola in log2 lr (steeper above the optimum, as real curves are); a level offset per seed
shared by every point (the same seeds train every point); independent noise per (point, seed);
and a grid centred on a noisy stage pick. The noise, curvature and asymmetry default to what a
real run measured: pass its `validation.json` with `--from` to take them from another run.

Truths (the narrow optimum v0, the wide one v1 = v0 + drift):
  mup        optimum fixed                              → should pass
  sp         −0.6 octave per doubling of width          → should not pass
  flat       the lr has no effect                        → should not pass
  drifting   shallow curve, optimum moves −1 octave      → should not pass

Goal (issue 13): false pass ≤ 5 % for sp, flat and drifting; true pass ≥ 90 % for mup. The
"point rule" column is the verdict before issue 13 (pass when the point estimates of drift and
gap are inside their limits, no intervals, no curvature test) on the same draws.

    python benchmarks/validator_power.py                       # default budget, 500 draws each
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

import numpy as np

from transfer.curves import extend_points, grid
from transfer.validator import limits_from
from transfer.verdict import Limits, judge

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
    pick_std: float = 0.4  # octaves: the stage's pick around the narrow optimum

    @classmethod
    def from_validation(cls, path: Path) -> Noise:
        v = json.loads(path.read_text())
        n = v["noise"]
        point = float(n["interaction_std"])
        seed = float(n.get("seed_std") or point)
        return cls(point_std=point, seed_offset_std=math.sqrt(max(seed**2 - point**2, 0.0)),
                   curvature=float(v["curvature"]))


def loss(x: np.ndarray, v: float, a: float, asym: float) -> np.ndarray:
    d = x - v
    return np.where(d > 0, asym * a, a) * d * d


def draw(truth: str, v0: float, noise: Noise, design: dict, limits: Limits,
         rng: np.random.Generator) -> tuple:
    """One validation as the pipeline runs it: grid around the pick, extended until bracketed."""
    w0, w1 = design["widths"]
    drift = {"mup": 0.0, "sp": -0.6 * math.log2(w1 / w0), "flat": 0.0, "drifting": -1.0}[truth]
    a = {"flat": 0.0, "drifting": noise.curvature / 4}.get(truth, noise.curvature)
    vertex = {w0: v0, w1: v0 + drift}
    levels = {w0: 2.6, w1: 2.45}
    offsets = {w: rng.normal(0, noise.seed_offset_std, design["seeds"]) for w in (w0, w1)}
    centre = round(v0 + rng.normal(0, noise.pick_std), 6)
    half = design["step"] * ((design["points"] - 1) / 2 + design["max_extend"])
    lo, hi = centre - half, centre + half
    xs = grid(centre, design["points"], design["step"])
    curves = {w0: [], w1: []}

    def add(points):
        for w in (w0, w1):
            base = loss(np.asarray(points), vertex[w], a, noise.asymmetry) + levels[w]
            for x, y in zip(points, base):
                curves[w].append((x, list(y + offsets[w]
                                          + rng.normal(0, noise.point_std, design["seeds"]))))

    add(xs)
    while new := extend_points(curves, step=design["step"], lo=lo, hi=hi):
        add(new)
    v = judge(curves, None, centre, limits, COORD_OK)
    # The rule before issue 13: point estimates inside the limits, every optimum bracketed.
    old = (math.isfinite(v.drift_log2) and abs(v.drift_log2) <= limits.tolerance_log2
           and v.loss_gap <= limits.max_gap and all(v.bracketed.values()))
    return v.outcome, old, v.drift_log2


def design_of(budget: str) -> tuple[dict, Limits]:
    from hydra import compose, initialize_config_dir

    from transfer.config import register_configs, validation_width

    register_configs()
    conf = str(Path(__file__).resolve().parents[1] / "conf")
    with initialize_config_dir(config_dir=conf, version_base="1.3"):
        cfg = compose("config", overrides=[f"budget={budget}"])
    v, p = cfg.validation, cfg.proxy
    design = {"widths": (p.width, validation_width(p)), "points": v.points,
              "step": v.step_log2, "seeds": v.seeds, "max_extend": v.max_extend}
    return design, limits_from(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", default="default")
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--from", dest="source", type=Path, default=None,
                    help="a run's validation.json to take noise and curvature from")
    ap.add_argument("--seeds", type=int, default=None, help="override validation.seeds")
    ap.add_argument("--points", type=int, default=None, help="override validation.points")
    ap.add_argument("--point-std", type=float, default=None)
    args = ap.parse_args()
    design, limits = design_of(args.budget)
    if args.seeds:
        design["seeds"] = args.seeds
    if args.points:
        design["points"] = args.points
        limits = replace(limits, fit_window=args.points)
    noise = Noise.from_validation(args.source) if args.source else Noise()
    if args.point_std is not None:
        noise = replace(noise, point_std=args.point_std)
    rng = np.random.default_rng(args.seed)
    print(f"budget={args.budget}: widths {design['widths']}, {design['points']} points × "
          f"{design['step']} octave, {design['seeds']} seeds, ≤ {design['max_extend']} extension "
          f"steps per side; {noise}; {args.draws} draws each")
    print("| truth | pass | reject | inconclusive | point rule passes | drift sd (octaves) |")
    print("|---|---|---|---|---|---|")
    for truth in ("mup", "sp", "flat", "drifting"):
        outcomes, old, drifts = Counter(), 0, []
        for _ in range(args.draws):
            outcome, old_pass, d = draw(truth, -7.0, noise, design, limits, rng)
            outcomes[outcome] += 1
            old += old_pass
            if math.isfinite(d):
                drifts.append(d)
        n = args.draws
        print(f"| {truth} | {outcomes['passed'] / n:.1%} | {outcomes['rejected'] / n:.1%} | "
              f"{outcomes['inconclusive'] / n:.1%} | {old / n:.1%} | "
              f"{np.std(drifts) if drifts else math.nan:.2f} |")


if __name__ == "__main__":
    main()
