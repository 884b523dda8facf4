"""Which widths the width verdict needs, judged on archived runs' grids, nothing trained.

The depth grid trains its shallowest curve at `validation.depth_width` (32 at the default budget)
and the stages' depth, with the stages' recipe: that curve is a width-grid curve at width 32,
already paid for. This re-judges each run's width verdict, and the joint emission at its target,
on sets of curves: the run's own widths (64, 128, 256), the depth grid's base curve in place of
the widest (32, 64, 128: the 256 curve is ~28 % of the main command's trial-seconds), beside it
(32, 64, 128, 256), and two widths alone. With `--held-out SUMMARY` each set's emission is also
compared with held-out targets' own optima (`benchmarks/target_check.py` summaries).

    python benchmarks/width_sets.py /tmp/cmp6_sweeps/*-mup-default-* \
        --held-out benchmarks/points/summaries/held_out_0bd59be_merged_mup.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from transfer.core.config import archived_validation  # noqa: E402
from transfer.judge.rounds import look_of  # noqa: E402
from transfer.judge.verdict import judge  # noqa: E402
from transfer.verdict.depth import joint_from  # noqa: E402
from transfer.verdict.width import limits_from  # noqa: E402

SETS = ("own", "base-32 for widest", "base-32 added", "base-32 + first", "first two")


def curve_sets(wc: dict, base: dict) -> dict:
    ws = sorted(wc)
    return {"own": {w: wc[w] for w in ws},
            "base-32 for widest": {32: base, **{w: wc[w] for w in ws[:-1]}},
            "base-32 added": {32: base, **{w: wc[w] for w in ws}},
            "base-32 + first": {32: base, ws[0]: wc[ws[0]]},
            "first two": {w: wc[w] for w in ws[:2]}}


def rows_for(run: Path, held: list[dict]) -> list[str]:
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    v = archived_validation(cfg["validation"])
    if int(v.depth_width) != 32:
        return [f"| {run.name} | depth grid at width {v.depth_width}, not 32 | | | |"]
    width = json.loads((run / "validation.json").read_text())
    deep = json.loads((run / "validation_depth.json").read_text())
    wc = {int(k): c for k, c in width["curves"].items()}
    dc = {int(k): c for k, c in deep["curves"].items()}
    tw = int(width["extrapolation"]["target_width"])
    td = int(deep["extrapolation"]["target_width"])
    par = cfg["proxy"]["parametrization"]
    looks = look_of(v.confidence, width["confidence"])
    trials = pd.read_csv(run / "trials.csv")
    price = trials[trials["stage"] == "validation"].groupby("width")["seconds"].sum().to_dict()
    depth_t = trials[trials["stage"] == "validation_depth"]
    price[32] = float(depth_t[depth_t["n_layers"] == min(dc)]["seconds"].sum())
    out = []
    for name, cur in curve_sets(wc, dc[min(dc)]).items():
        pairs = {w: [(x, list(ls)) for x, ls in zip(c["log2_lr"], c["losses"])]
                 for w, c in cur.items()}
        ver = judge(pairs, None, float(width["tuned_log2_lr"]),
                    limits_from(v, target_width=tw, parametrization=par, looks=looks),
                    width.get("coord_check"))
        model = (ver.trajectory or {}).get("model", "converging")
        conf = max(ver.confidence, deep["confidence"])

        def emit(w, d, cur=cur, model=model, conf=conf):
            return joint_from(v, par, cur, dc, width_model=model, confidence=conf,
                              target_width=w, target_depth=d, depth_width=v.depth_width)

        j = emit(tw, td)
        lo, hi = ver.drift_ci
        seconds = sum(price[w] for w in cur)
        emitted = (f"{j.estimate:+.2f} [{j.interval[0]:+.2f}, {j.interval[1]:+.2f}]"
                   if j is not None else "none")
        held_cells = []
        for h in held:
            s = h["shape"]
            e = emit(int(s["d_model"]), int(s["n_layers"]))
            if e is None:
                held_cells.append(f"{s['d_model']}×{s['n_layers']} none")
                continue
            truth = h["target_optimum_log2"]
            inside = e.interval[0] <= truth <= e.interval[1]
            held_cells.append(f"{s['d_model']}×{s['n_layers']} {e.estimate - truth:+.2f}"
                              f"{'' if inside else ' (out)'}")
        out.append(f"| {run.name} | {name} ({', '.join(map(str, sorted(cur)))}) | "
                   f"{ver.outcome} | {ver.drift_log2:+.2f} [{lo:+.2f}, {hi:+.2f}] | "
                   f"{ver.curvature_snr:.1f} | {tw} × {td}: {emitted} | "
                   f"{seconds:.0f} | {'; '.join(held_cells)} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run folders (sweeps/<run>)")
    ap.add_argument("--held-out", type=Path, default=None, metavar="SUMMARY",
                    help="a target_check summary.json: each target's emission against its optimum")
    args = ap.parse_args(argv)
    missing = [r for r in args.runs
               if not (r / "validation.json").is_file() or not (r / "validation_depth.json").is_file()]
    if missing:
        print(f"{missing[0]}: needs validation.json and validation_depth.json (a finished run "
              f"with its depth grid)", file=sys.stderr)
        return 2
    held = json.loads(args.held_out.read_text()) if args.held_out else []
    print("| run | widths | verdict | drift (90 %) | curvature S/N | emitted at the target | "
          "trial-seconds | held-out: emitted − optimum |\n|---|---|---|---|---|---|---|---|")
    for run in args.runs:
        print("\n".join(rows_for(run, held)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
