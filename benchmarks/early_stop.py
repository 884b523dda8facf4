"""Early prediction of a grid point's final loss, and what stopping the hopeless ones would save,
measured on archived runs' width and depth grids (issue: evidence per second, "early prediction").

Every grid trial reports its held-out loss at each of `train.n_evals` evaluations (the default
budget: 25, 50, 75 and 100 % of its steps, the first at the end of the 25 % warmup), and the
journal keeps them (Optuna's intermediate values). For each run folder given:

1. **Prediction.** Within each curve and seed, how the points' losses at 25, 50 and 75 % rank
   against their final losses (Spearman's ρ, averaged over curves), how often the point lowest
   at that fraction is the lowest at the end, and how far a point's excess over the curve's
   lowest moves from there to the end (the rms of final minus early excess, in % of the loss).
2. **Stopping.** The rule a runner could apply: at fraction k, stop a point whose loss exceeds by
   more than τ (relative) the lowest loss at k among the points of its curve and seed that
   started before it (what a worker can know then). Priced by the trial-seconds it saves (the
   unrun share of each stopped trial, `trials.csv`'s seconds), checked by the points it would have
   stopped that ended inside the basin (final excess under `Limits.basin_excess`, 6 %: the
   points the fit weights fully), and by the verdict: each grid re-judged with the stopped
   trials' points missing (a stopped trial leaves its point out of the seed-mean curve, as a
   pruned grid trial does in `width.curves_from`), against the run's own.

    python benchmarks/early_stop.py /tmp/cmp6_sweeps/*-default-*
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import optuna  # noqa: E402
import pandas as pd  # noqa: E402
import yaml  # noqa: E402
from optuna.storages import JournalStorage  # noqa: E402
from optuna.storages.journal import JournalFileBackend  # noqa: E402
from optuna.trial import TrialState  # noqa: E402

from transfer.core.config import archived_validation  # noqa: E402
from transfer.judge.rounds import look_of  # noqa: E402
from transfer.judge.shared_curvature import BASIN_EXCESS  # noqa: E402
from transfer.judge.verdict import judge  # noqa: E402
from transfer.verdict.depth import depth_limits_from  # noqa: E402
from transfer.verdict.width import limits_from  # noqa: E402

GRIDS = {"validation": ("width", "validation.json"),
         "validation-depth": ("n_layers", "validation_depth.json")}
TAUS = (0.03, 0.06, 0.10, 0.20)


def grid_trials(run: Path) -> dict[str, list[dict]]:
    """Each grid's finished trials: axis key, log2 lr, seed, intermediate losses, final, seconds."""
    storage = JournalStorage(JournalFileBackend(str(run / "study.journal")))
    table = pd.read_csv(run / "trials.csv")
    price = {(st, int(n)): float(s) for st, n, s in
             zip(table["stage"], table["number"], table["seconds"])}
    out = {}
    for s in optuna.get_all_study_summaries(storage):
        suffix = s.study_name.rsplit(":", 1)[-1]
        if suffix not in GRIDS:
            continue
        axis = GRIDS[suffix][0]
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        rows = []
        for t in study.get_trials(deepcopy=False):
            if t.state != TrialState.COMPLETE or axis not in t.params:
                continue
            secs = price.get((suffix.replace("-", "_"), t.number), math.nan)
            rows.append({"number": t.number, "key": int(t.params[axis]),
                         "x": float(t.params["log2_lr"]), "seed": int(t.params.get("seed", 0)),
                         "early": dict(t.intermediate_values), "final": float(t.value),
                         "seconds": secs})
        out[suffix] = rows
    return out


def groups(rows: list[dict]) -> dict:
    g = defaultdict(list)
    for r in rows:
        g[(r["key"], r["seed"])].append(r)
    return {k: sorted(v, key=lambda r: r["number"]) for k, v in g.items()}


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1]) if a.size > 2 else math.nan


def prediction(rows: list[dict], k: int) -> dict:
    """How the losses at evaluation `k` predict the final ones, within each curve and seed."""
    rhos, same, moves = [], [], []
    for pts in groups(rows).values():
        pts = [p for p in pts if k in p["early"] and math.isfinite(p["early"][k])
               and math.isfinite(p["final"])]
        if len(pts) < 3:
            continue
        e = np.array([p["early"][k] for p in pts])
        f = np.array([p["final"] for p in pts])
        rhos.append(spearman(e, f))
        same.append(int(np.argmin(e) == np.argmin(f)))
        moves += list(((f - f.min()) / f.min() - (e - e.min()) / e.min()) * 100)
    return {"rho": float(np.nanmean(rhos)) if rhos else math.nan,
            "same_best": float(np.mean(same)) if same else math.nan,
            "excess_move_rms": float(np.sqrt(np.mean(np.square(moves)))) if moves else math.nan,
            "curves": len(rhos)}


def stopped(rows: list[dict], k: int, tau: float) -> set[int]:
    """Trial numbers the rule stops at evaluation `k` with threshold `tau`."""
    out = set()
    for pts in groups(rows).values():
        for i, p in enumerate(pts):
            before = [q["early"][k] for q in pts[:i] if k in q["early"]
                      and math.isfinite(q["early"][k])]
            if before and k in p["early"] and p["early"][k] > min(before) * (1 + tau):
                out.add(p["number"])
    return out


def curves(rows: list[dict], drop: set[int]) -> dict:
    """The judge's curves (`width.curves_from`'s form): a dropped trial's loss is nan."""
    by: dict = {}
    for r in rows:
        loss = math.nan if r["number"] in drop else r["final"]
        by.setdefault(r["key"], {}).setdefault(r["x"], []).append((r["seed"], loss))
    return {key: sorted((x, [y for _, y in sorted(v)]) for x, v in xs.items())
            for key, xs in by.items()}


def setting(run: Path, grid: str) -> tuple:
    """What `grid`'s verdict was judged with, read once from the run folder: its limits (the
    run's validation group, at the look its saved verdict was taken at), the stages' pick and
    the coordinate check."""
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    v = archived_validation(cfg["validation"])
    saved = json.loads((run / GRIDS[grid][1]).read_text())
    target = (saved.get("extrapolation") or {}).get("target_width")
    par = cfg["proxy"]["parametrization"]
    looks = look_of(v.confidence, saved["confidence"])
    limits = (limits_from(v, target_width=target, parametrization=par, looks=looks)
              if grid == "validation" else depth_limits_from(v, target, par, looks))
    return limits, float(saved["tuned_log2_lr"]), saved.get("coord_check")


def verdict(judged: tuple, rows: list[dict], drop: set[int]):
    """The grid re-judged (`setting`'s limits) with the `drop`ped trials' points missing."""
    limits, tuned, coord = judged
    return judge(curves(rows, drop), None, tuned, limits, coord)


def describe(v) -> str:
    lo, hi = v.optimum_ci if v.optimum_ci else (math.nan, math.nan)
    return f"{v.outcome} {v.optimum_log2_lr:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run folders (sweeps/<run>)")
    ap.add_argument("--taus", nargs="+", type=float, default=list(TAUS))
    ap.add_argument("--summary", action="store_true",
                    help="one table over all runs: per grid, stopping point and τ, the trials "
                         "stopped, those ending inside the basin, the mean and largest share "
                         "of a grid's trial-seconds saved, and the verdicts changed")
    args = ap.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    missing = [r for r in args.runs
               if not ((r / "study.journal").is_file() and (r / "trials.csv").is_file())]
    if missing:
        print(f"{missing[0]}: no study.journal and trials.csv; pass run folders of a "
              f"journal-storage archive", file=sys.stderr)
        return 2
    pred, stop, agg = [], [], {}
    for run in args.runs:
        for grid, rows in grid_trials(run).items():
            if not rows:
                continue
            evals = sorted({k for r in rows for k in r["early"]})
            n = len(evals) + 1  # the last evaluation is the final value, not reported
            total = sum(r["seconds"] for r in rows)
            by_number = {r["number"]: r for r in rows}
            # a trial ends inside the basin: under BASIN_EXCESS above its curve and seed's best
            in_basin = {q["number"] for pts in groups(rows).values()
                        for q in pts if q["final"] < min(p["final"] for p in pts)
                        * (1 + BASIN_EXCESS)}
            judged = setting(run, grid)
            base = verdict(judged, rows, set())
            for k in evals:
                p = prediction(rows, k)
                pred.append(f"| {run.name} | {GRIDS[grid][0]} | {(k + 1) / n:.0%} | "
                            f"{p['rho']:.2f} | {p['same_best']:.0%} | "
                            f"{p['excess_move_rms']:.2f} | {p['curves']} |")
                for tau in args.taus:
                    drop = stopped(rows, k, tau)
                    saved_s = sum(by_number[t]["seconds"] * (1 - (k + 1) / n) for t in drop)
                    inside = len(drop & in_basin)
                    v = verdict(judged, rows, drop)
                    a = agg.setdefault((GRIDS[grid][0], (k + 1) / n, tau),
                                       {"stopped": 0, "trials": 0, "inside": 0, "saved": [],
                                        "changed": 0, "runs": 0})
                    a["stopped"] += len(drop)
                    a["trials"] += len(rows)
                    a["inside"] += inside
                    a["saved"].append(saved_s / total)
                    a["changed"] += int(v.outcome != base.outcome)
                    a["runs"] += 1
                    stop.append(f"| {run.name} | {GRIDS[grid][0]} | {(k + 1) / n:.0%} | "
                                f"{tau:.0%} | {len(drop)} / {len(rows)} | {inside} | "
                                f"{saved_s / total:.1%} | {describe(base)} | {describe(v)} |")
    if args.summary:
        print("| grid | stop at | τ | trials stopped | ending inside the basin | trial-seconds "
              "saved, mean (largest) | verdicts changed |\n|---|---|---|---|---|---|---|")
        for (grid, at, tau), a in sorted(agg.items()):
            print(f"| {grid} | {at:.0%} | {tau:.0%} | {a['stopped']} / {a['trials']} | "
                  f"{a['inside']} | {np.mean(a['saved']):.1%} ({max(a['saved']):.1%}) | "
                  f"{a['changed']} / {a['runs']} |")
        print()
    print("| run | grid | at | Spearman ρ with the final | lowest point the same | rms move of "
          "its excess to the end (%) | curves × seeds |\n|---|---|---|---|---|---|---|")
    print("\n".join(pred))
    print("\n| run | grid | stop at | τ | trials stopped | of them ending inside the basin | "
          "trial-seconds saved | verdict, all trials | verdict, stopped ones left out |\n"
          "|---|---|---|---|---|---|---|---|---|")
    print("\n".join(stop))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
