"""How much evidence the basin's noise weighting rests on: for each archived grid, the points
past the basin against the rest (`transfer.verdict.shared_curvature.noise_groups`, the fit
windows, `Limits.basin_excess` 0.06), their interaction σ ratio, each group's degrees of
freedom, and the one-sided F test's p-value that the past points scatter no more than the rest
(by simulation: numpy's F draws, no SciPy). The weighting applies whenever the ratio is > 1;
a p-value that is not small says that ratio is within what equal noise gives.

    python benchmarks/basin_noise_test.py <run folders>   # nothing trained
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from transfer.verdict.shared_curvature import _two_way, fit_window

BASIN_EXCESS = 0.06  # Limits.basin_excess at budget=default
DRAWS = 400_000


def groups(curves: dict, window: int) -> tuple[dict, dict]:
    """(sum of squares, degrees of freedom), each keyed by past-the-basin (True) or not."""
    ss, dof = {True: 0.0, False: 0.0}, {True: 0.0, False: 0.0}
    for c in curves.values():
        xs, ys = np.asarray(c["log2_lr"], float), np.asarray(c["loss"], float)
        idx = [i for i in fit_window(xs, ys, window) if np.isfinite(ys[i])]
        past = set()
        if idx:
            ib = min(idx, key=lambda i: ys[i])
            past = {i for i in idx if i > ib and ys[i] > ys[ib] + abs(ys[ib]) * BASIN_EXCESS}
        rows = [i for i in idx if len(c["losses"][i]) > 1 and np.all(np.isfinite(c["losses"][i]))]
        e = _two_way([c["losses"][i] for i in rows])
        if e is None:
            continue
        per_row = (e.shape[0] - 1) * (e.shape[1] - 1) / e.shape[0]
        for i, ei in zip(rows, e):
            ss[i in past] += float((ei * ei).sum())
            dof[i in past] += per_row
    return ss, dof


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--window", type=int, default=6,
                    help="the fit window's points (`validation.points`, as `limits_from` sets it)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    for run in args.runs:
        for name in ("validation.json", "validation_depth.json"):
            path = run / name
            if not path.is_file():
                continue
            ss, dof = groups(json.loads(path.read_text())["curves"], args.window)
            label = f"{run.name[:32]:32s} {'depth' if 'depth' in name else 'width'}"
            if dof[True] <= 0 or dof[False] <= 0:
                print(f"{label}  no points past the basin")
                continue
            f = (ss[True] / dof[True]) / (ss[False] / dof[False])
            p = float((rng.f(dof[True], dof[False], DRAWS) >= f).mean())
            print(f"{label}  σ ratio {math.sqrt(f):.2f}  dof {dof[True]:.1f} / {dof[False]:.1f}"
                  f"  p {p:.3g}")


if __name__ == "__main__":
    main()
