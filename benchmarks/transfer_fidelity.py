"""Does the optimal learning rate transfer across width — or depth? Measured side by side.

`--axis width` (default): μP vs SP at each width. `--axis depth`: the proxy family at one width
over `--depths`, once per depth parametrization `--alphas` (residual branches × (base_depth /
L)^α with CompleteP's lr and ε factors; α = 0 is width-only μP, ½ Depth-μP, 1 CompleteP),
and the figure `--figure` (one panel per α, one curve per depth).

For each parametrization and width, sweep log2(lr) on a half-octave grid, average the final
held-out loss over seeds, and fit the optimum with `transfer.judge.fit.fit_optimum`. When a width's
minimum is at the grid edge, the grid is extended on that side (up to --max-extend points), so
every reported optimum is bracketed or explicitly flagged.

Goals: μP |drift| <= 0.5 octave, SP |drift| >= 1.0 octave, μP best loss at the widest width <=
SP's. Depth goals: CompleteP (α = 1) |drift| <= 0.5 octave, and α = 0 drifts more than α = 1.
Each run is appended to runs.csv as it finishes; rerunning with the same --out skips finished
runs, so an interrupted benchmark resumes, and processes given one --depths each share one
--out (then a run with both depths writes the summary). `--set FIELD=VALUE` gives the family a
sweep's proxy shape (its target.yaml `provenance.proxy`), `--warmup` its warmup fraction.

    python benchmarks/transfer_fidelity.py --out benchmarks/out/fidelity
    python benchmarks/transfer_fidelity.py --axis depth --depths 2 8 --alphas 0 0.5 1 \
        --widths 64 --out benchmarks/out/depth --figure docs/figures/lr_transfer_depth.png
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

from proxies import TransformerFamily
from transfer.core.data import stdlib_corpus
from transfer.judge.curves import extend_each, grid
from transfer.judge.fit import fit_optimum
from transfer.judge.verdict import Limits, judge
from transfer.search.trainer import TrainSpec, train

STEP = 0.5  # grid spacing in log2(lr): half an octave
FIELDS = ["config", "parametrization", "width", "log2_lr", "seed", "val_loss", "diverged", "seconds",
          "n_layers", "depth_alpha"]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="directory for runs.csv and summary.json")
    p.add_argument("--widths", type=int, nargs="+", default=[64, 256])
    p.add_argument("--parametrizations", nargs="+", default=["mup", "sp"], choices=["mup", "sp"])
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--warmup", type=float, default=TrainSpec.warmup_fraction,
                   help="linear warmup, fraction of the steps")
    p.add_argument("--points", type=int, default=7, help="initial grid points per width")
    p.add_argument("--mup-centre", type=float, default=-7.0, help="log2 lr at the grid centre")
    p.add_argument("--sp-centre", type=float, default=-8.5, help="log2 lr at the base width")
    p.add_argument("--sp-shift", type=float, default=0.5,
                   help="SP's grid centre moves down this much per octave of width (SP's optimum "
                        "falls with width; starting lower saves extensions, the fit is unaffected)")
    p.add_argument("--max-extend", type=int, default=4, help="extra points per side at most")
    p.add_argument("--window", type=int, default=5, help="points in the parabola fit")
    p.add_argument("--n-layers", type=int, default=2)
    p.add_argument("--d-head", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--base-width", type=int, default=64)
    # μP's tunable multipliers; SP stays the textbook baseline with the family defaults.
    p.add_argument("--attn-mult", type=float, default=1.0, help="μP only")
    p.add_argument("--output-mult", type=float, default=1.0, help="μP only")
    p.add_argument("--init-std", type=float, default=0.02, help="μP only")
    p.add_argument("--input-mult", type=float, default=1.0, help="μP only")
    p.add_argument("--set", dest="fields", action="append", default=[], metavar="FIELD=VALUE",
                   help="any other TransformerFamily field, e.g. tied_embeddings=true "
                        "ffn_ratio=2.666667 kv_group=2 rope_theta=500000 (a sweep's proxy: "
                        "its target.yaml provenance.proxy); repeatable")
    p.add_argument("--axis", choices=["width", "depth"], default="width")
    p.add_argument("--depths", type=int, nargs="+", default=[2, 8], help="--axis depth")
    p.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.5, 1.0],
                   help="--axis depth: depth parametrizations (residual × m_L^-α)")
    p.add_argument("--base-depth", type=int, default=None,
                   help="--axis depth: m_L = L / base depth (default: the smallest depth)")
    p.add_argument("--figure", default=None, help="--axis depth: write the figure here")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads; 1 keeps shared cores from stalling each other")
    args = p.parse_args(argv)
    try:
        args.shape = dict(map(parse_field, args.fields))
    except KeyError as e:
        p.error(f"--set {e.args[0]!r}: expected FIELD=VALUE with FIELD a TransformerFamily field "
                "(proxies/transformer.py)")
    except ValueError as e:  # a float field given a non-number
        p.error(f"--set {' '.join(args.fields)}: {e}")
    try:
        family(args, "mup")
    except (TypeError, ValueError) as e:
        p.error(f"--set {' '.join(args.fields)}: {e}")
    if args.seeds < 1 or args.points < 3 or args.steps < 1:
        p.error(f"need --seeds >= 1, --points >= 3, --steps >= 1; got {args.seeds=}, "
                f"{args.points=}, {args.steps=}")
    return args


class Runs:
    """Finished runs keyed by (parametrization, width, log2_lr, seed), mirrored to runs.csv."""

    def __init__(self, path: Path):
        self.path = path
        self.rows: dict[tuple, dict] = {}
        if path.exists():
            with path.open() as f:
                for r in csv.DictReader(f):
                    r = {**r, "width": int(r["width"]), "log2_lr": float(r["log2_lr"]),
                         "seed": int(r["seed"]), "val_loss": float(r["val_loss"]),
                         "diverged": r["diverged"] == "True", "seconds": float(r["seconds"])}
                    self.rows[self.key(r)] = r

    @staticmethod
    def key(r: dict) -> tuple:
        return r["config"], r["width"], round(r["log2_lr"], 6), r["seed"]

    def add(self, row: dict) -> None:
        new = not self.path.exists()
        with self.path.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            if new:
                w.writeheader()
            w.writerow(row)
        self.rows[self.key(row)] = row


def family(args, parametrization: str) -> TransformerFamily:
    fam = TransformerFamily(n_layers=args.n_layers, d_head=args.d_head, seq_len=args.seq_len,
                            base_width=args.base_width, parametrization=parametrization)
    if args.shape:
        fam = fam.replace(**args.shape)
    if parametrization == "mup":
        fam = fam.replace(attn_mult=args.attn_mult, output_mult=args.output_mult,
                          init_std=args.init_std, input_mult=args.input_mult)
    return fam


def parse_field(text: str) -> tuple[str, object]:
    """`FIELD=VALUE` of --set, the value read as the field's default's type (a float field
    takes 1e-5; a bool one true/false), else as YAML. KeyError(text) when FIELD is not one."""
    import yaml

    name, sep, value = text.partition("=")
    defaults = {f.name: f.default for f in dataclasses.fields(TransformerFamily)}
    if not sep or name not in defaults:
        raise KeyError(text)
    default, parsed = defaults[name], yaml.safe_load(value)
    if isinstance(default, float) and not isinstance(parsed, bool):
        return name, float(parsed)
    return name, parsed


def config_id(args, fam: TransformerFamily) -> str:
    """Everything but width, lr and seed that decides a run's loss: runs are reused only when
    this matches, so one --out folder can hold several configurations without mixing them."""
    text = f"{fam!r} steps={args.steps} batch_size={args.batch_size}"
    if args.warmup != TrainSpec.warmup_fraction:  # the default keeps earlier runs' ids
        text += f" warmup={args.warmup}"
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def mean(losses: list[float]) -> float:
    """Seed average; inf if any seed diverged (a diverging lr is not a usable lr)."""
    return statistics.fmean(losses) if all(map(math.isfinite, losses)) else math.inf


def seed_losses(args, runs: Runs, fam, width: int, log2_lr: float, corpus) -> list[float]:
    """Final held-out loss of each seed at one grid point, training the missing ones."""
    losses = []
    for seed in range(args.seeds):
        key = (config_id(args, fam), width, round(log2_lr, 6), seed)
        if key not in runs.rows:
            spec = TrainSpec(width=width, lr=2.0 ** log2_lr, batch_size=args.batch_size,
                             tokens=args.batch_size * fam.seq_len * args.steps, n_evals=1,
                             warmup_fraction=args.warmup, seed=seed)
            t0 = time.perf_counter()
            r = train(fam, spec, corpus, device=args.device)
            runs.add({"config": key[0], "parametrization": fam.parametrization, "width": width,
                      "log2_lr": log2_lr, "seed": seed, "val_loss": r.val_loss,
                      "diverged": r.diverged, "seconds": round(time.perf_counter() - t0, 2),
                      "n_layers": fam.n_layers, "depth_alpha": fam.depth_alpha})
            print(f"  {fam.parametrization} w={width} L={fam.n_layers} α={fam.depth_alpha:g} "
                  f"log2_lr={log2_lr:+.1f} seed={seed}: "
                  f"{r.val_loss:.4f}{' (diverged)' if r.diverged else ''}", flush=True)
        losses.append(runs.rows[key]["val_loss"])
    return losses


def sweep_width(args, runs: Runs, fam, width: int, centre: float, corpus) -> dict:
    """The package's grid around `centre` (`transfer.judge.curves.grid`), extended by its
    `extend_each` while the minimum sits at an edge (≤ --max-extend points per side)."""
    xs = grid(centre, args.points, STEP)
    per_seed = {x: seed_losses(args, runs, fam, width, x, corpus) for x in xs}
    half = STEP * ((args.points - 1) / 2 + args.max_extend)
    bounds = {width: (centre - half, centre + half)}
    while new := extend_each({width: sorted(per_seed.items())}, step=STEP, bounds=bounds):
        for x in new[width]:
            per_seed[x] = seed_losses(args, runs, fam, width, x, corpus)
    xs = sorted(per_seed)
    losses = [mean(per_seed[x]) for x in xs]
    opt, best_loss, edge = fit_optimum(xs, losses, window=args.window)
    return {"width": width, "log2_lrs": xs, "losses": losses, "seed_losses": [per_seed[x] for x in xs],
            "optimum_log2_lr": opt, "best_loss": best_loss, "edge_hit": edge}


def drift_interval(args, results: dict, small: int, large: int, axis: str = "width"
                   ) -> dict[str, list[float]]:
    """The 90 % interval of the drift from the package's verdict (`transfer.judge.verdict`:
    shared-curvature parabola, parametric bootstrap), not a bootstrap over 2 seeds, which has
    3 distinct resamples per point (transfer.judge.shared_curvature)."""
    limits = Limits(axis=axis, fit_window=args.window, min_points=3, can_pass=True)
    out = {}
    for p, per in results.items():
        curves = {k: list(zip(per[k]["log2_lrs"], per[k]["seed_losses"])) for k in (small, large)}
        out[p] = list(judge(curves, None, per[small]["log2_lrs"][0], limits, None).drift_ci)
    return out


def summarise(args, results: dict, widths: list[int]) -> dict:
    small, large = min(widths), max(widths)
    out = {}
    for p, per_width in results.items():
        out[p] = {"drift": per_width[large]["optimum_log2_lr"] - per_width[small]["optimum_log2_lr"]}
    goals = {}
    if "mup" in out:
        goals["mup |drift| <= 0.5"] = abs(out["mup"]["drift"]) <= 0.5
    if "sp" in out:
        goals["sp |drift| >= 1.0"] = abs(out["sp"]["drift"]) >= 1.0
    if "mup" in out and "sp" in out:
        goals[f"mup best loss at {large} <= sp's"] = (
            results["mup"][large]["best_loss"] <= results["sp"][large]["best_loss"])
    return {"drift": {p: v["drift"] for p, v in out.items()}, "goals": goals,
            "drift_90pct": drift_interval(args, results, small, large)}


def markdown(args, results: dict, summary: dict) -> str:
    lines = [f"μP multipliers: attn_mult={args.attn_mult}, output_mult={args.output_mult}, "
             f"init_std={args.init_std}, input_mult={args.input_mult} (SP: family defaults); "
             f"{args.seeds} seeds, {args.steps} steps of {args.batch_size}×{args.seq_len}", "",
             "| parametrization | width | optimum log2(lr) | best loss | grid (log2 lr) | edge hit |",
             "|---|---|---|---|---|---|"]
    for p, per_width in results.items():
        for w, r in per_width.items():
            lines.append(f"| {p} | {w} | {r['optimum_log2_lr']:+.2f} | {r['best_loss']:.4f} | "
                         f"{r['log2_lrs'][0]:+.1f} … {r['log2_lrs'][-1]:+.1f} | {r['edge_hit']} |")
    lines.append("")
    ci = summary["drift_90pct"]
    lines += [f"- {p} drift (wide − narrow): {d:+.2f} octaves (90 % interval of the shared-curvature fit: "
              f"{ci[p][0]:+.2f} … {ci[p][1]:+.2f})" for p, d in summary["drift"].items()]
    lines += [f"- goal {g}: {'PASS' if ok else 'FAIL'}" for g, ok in summary["goals"].items()]
    return "\n".join(lines)


def depth_family(args, n_layers: int, alpha: float) -> TransformerFamily:
    """The μP family at `n_layers`; at the base depth every α is the same model (m_L = 1), so
    it is built with α = 0 there and its runs are shared by every α."""
    base = args.base_depth or min(args.depths)
    fam = family(args, "mup").replace(n_layers=n_layers, base_depth=base)
    return fam.replace(depth_alpha=0.0 if n_layers == base else alpha)


def depth_main(args, runs: Runs, corpus, out: Path) -> int:
    """Optimum vs depth for each α at one width: the depth axis of the same measurement."""
    width = args.widths[0]
    results: dict[str, dict[int, dict]] = {}
    for alpha in args.alphas:
        label = f"alpha={alpha:g}"
        results[label] = {}
        for d in sorted(args.depths):
            print(f"{label} depth {d}: grid centred at log2 lr {args.mup_centre:+.2f}", flush=True)
            results[label][d] = sweep_width(args, runs, depth_family(args, d, alpha), width,
                                            args.mup_centre, corpus)
    if len(set(args.depths)) < 2:  # a shard sharing runs.csv with others: nothing to compare
        print(f"one depth ({args.depths[0]}): its runs are in {runs.path}; run again with two "
              "--depths for the summary (finished runs are reused)")
        return 0
    small, large = min(args.depths), max(args.depths)
    drift = {p: r[large]["optimum_log2_lr"] - r[small]["optimum_log2_lr"]
             for p, r in results.items()}
    goals = {}
    if "alpha=1" in drift:
        goals["alpha=1 |drift| <= 0.5"] = abs(drift["alpha=1"]) <= 0.5
    if "alpha=1" in drift and "alpha=0" in drift:
        goals["alpha=0 |drift| > alpha=1 |drift|"] = abs(drift["alpha=0"]) > abs(drift["alpha=1"])
    summary = {"drift": drift, "goals": goals,
               "drift_90pct": drift_interval(args, results, small, large, axis="depth"),
               "verdict": {p: depth_verdict(args, r, small, large) for p, r in results.items()}}
    lines = [f"width {width}, {args.seeds} seeds, {args.steps} steps of "
             f"{args.batch_size}×{args.seq_len}, warmup {args.warmup:g}, base depth "
             f"{args.base_depth or small}", "",
             "| α | depth | optimum log2(lr) | best loss | grid (log2 lr) | edge hit |",
             "|---|---|---|---|---|---|"]
    for p, per in results.items():
        for d, r in per.items():
            lines.append(f"| {p.split('=')[1]} | {d} | {r['optimum_log2_lr']:+.2f} | "
                         f"{r['best_loss']:.4f} | {r['log2_lrs'][0]:+.1f} … "
                         f"{r['log2_lrs'][-1]:+.1f} | {r['edge_hit']} |")
    ci = summary["drift_90pct"]
    lines += [""] + [f"- {p} drift ({large} − {small} layers): {d:+.2f} octaves (90 % interval "
                     f"of the shared-curvature fit: {ci[p][0]:+.2f} … {ci[p][1]:+.2f})" for p, d in drift.items()]
    lines += [f"- goal {g}: {'PASS' if ok else 'FAIL'}" for g, ok in goals.items()]
    lines += [f"- the sweep's depth verdict on these curves (lr grid only, no coordinate check), "
              f"{p}: {v['outcome']}" + (f" — {'; '.join(v['reasons'])}" if v["reasons"] else "")
              for p, v in summary["verdict"].items()]
    (out / "summary.json").write_text(json.dumps(
        {"args": vars(args), "results": {p: {str(d): r for d, r in v.items()}
                                         for p, v in results.items()}, **summary}, indent=2))
    if args.figure:
        plot_depth(results, Path(args.figure), width)
    print("\n".join(lines))
    return 0


def depth_verdict(args, per_depth: dict, small: int, large: int) -> dict:
    """What `transfer.judge.verdict.judge` — the sweep's depth verdict — says of these curves, with
    its default limits (`Limits(axis="depth")`) and this grid's points as the fit window."""

    curves = {d: list(zip(per_depth[d]["log2_lrs"], per_depth[d]["seed_losses"]))
              for d in (small, large)}
    v = judge(curves, None, args.mup_centre, Limits(axis="depth", fit_window=args.points))
    return {"outcome": v.outcome, "drift_log2": v.drift_log2, "drift_ci": v.drift_ci,
            "loss_gap": v.loss_gap, "deeper_minus_shallow": v.wider_minus_narrow,
            "reasons": v.reasons}


def plot_depth(results: dict, path: Path, width: int) -> None:
    """One panel per α: seed-mean loss vs log2 lr, one curve per depth, fitted optima dashed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4 * len(results), 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(results), sharey=True, squeeze=False)[0]
    for ax, (label, per) in zip(axes, results.items()):
        for d, r in per.items():
            ys = [y if math.isfinite(y) else float("nan") for y in r["losses"]]
            line = ax.plot(r["log2_lrs"], ys, marker="o", ms=3, label=f"{d} layers")[0]
            if math.isfinite(r["optimum_log2_lr"]):
                ax.axvline(r["optimum_log2_lr"], color=line.get_color(), ls="--", lw=1)
        ax.set(title=f"α = {label.split('=')[1]}", xlabel="log2 learning rate")
        ax.legend(fontsize="small")
    axes[0].set_ylabel(f"held-out loss (width {width}, seed mean)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    runs, corpus = Runs(out / "runs.csv"), stdlib_corpus()
    if args.axis == "depth":
        return depth_main(args, runs, corpus, out)
    results: dict[str, dict[int, dict]] = {}
    for p in args.parametrizations:
        fam = family(args, p)
        results[p] = {}
        for w in sorted(args.widths):
            centre = args.mup_centre if p == "mup" else (
                args.sp_centre - args.sp_shift * math.log2(w / args.base_width))
            print(f"{p} width {w}: grid centred at log2 lr {centre:+.2f}", flush=True)
            results[p][w] = sweep_width(args, runs, fam, w, centre, corpus)
    summary = summarise(args, results, args.widths)
    table = markdown(args, results, summary)
    (out / "summary.json").write_text(json.dumps(
        {"args": vars(args), "results": {p: {str(w): r for w, r in v.items()}
                                         for p, v in results.items()}, **summary}, indent=2))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
