"""How much evidence the basin's noise weighting rests on: for each archived grid, the points
past the basin against the rest (`transfer.judge.shared_curvature.noise_groups`, the fit
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

from transfer.judge.shared_curvature import basin_groups, fit_window

BASIN_EXCESS = 0.06  # Limits.basin_excess at budget=default
DRAWS = 400_000


def groups(curves: dict, window: int) -> tuple[dict, dict]:
    """(sum of squares, degrees of freedom), each keyed by past-the-basin (True) or not, as the
    verdict groups them (`shared_curvature.basin_groups` over the fit windows)."""
    table = {k: {"loss": c["loss"], "losses": c["losses"]} for k, c in curves.items()}
    win = {k: fit_window(np.asarray(c["log2_lr"], float), np.asarray(c["loss"], float), window)
           for k, c in curves.items()}
    ss, dof, _ = basin_groups(table, win, list(curves), BASIN_EXCESS)
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
