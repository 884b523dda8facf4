"""The horizon law measured by branched wsd cooldowns, on its own (issue 36).

    python benchmarks/horizon_law.py [--out horizon_law.json]

The `model=3b` proxies at width 64 on CPU with `budget=default`'s recipe (its batch, warmup
fraction, corpus, seeds' rule), under `scaling.schedule=wsd`: the lr grid (`--points` half-octave
points around `train.lr`, `--seeds` validation seeds, edge extension as the check's), each
(lr, seed) one warmup-stable-decay run branched into a cooldown at every horizon,
train.tokens × `--multiples` (default ¼ … 4: 37 … 600 steps of 2,048 tokens, 16×), trained by
`transfer.search.training.run_branched` (the check's own training), `--workers` processes of
one thread. The curves go through `transfer.judge.horizon_law.measure_law` (the check's fit):
the exponent of η* ∝ D^e with its 90 % interval, printed beside Bjorck et al.'s (−0.32) and
Step Law's at a fixed batch, every horizon's optimum, and written as JSON.

`--multiples` must span ≥ 16× (config check). The shortest horizon sets the warmup (the
recipe's fraction of its steps, held fixed beyond it), so ¼ × 307,200 tokens is the shortest
that leaves a constant phase: 1/16 of it is 9 steps.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

import torch

from transfer.core import scaling
from transfer.core.compose import compose
from transfer.core.config import check_config
from transfer.judge import horizon_law
from transfer.judge.curves import extend_points, grid
from transfer.run.planner import plan_sweep
from transfer.search import Context, default_hparams
from transfer.search.training import horizon_tokens, run_branched
from transfer.verdict.width import limits_from, lr_bounds, validation_seed

_CTX: dict = {}  # the forked workers' context and hyperparameters


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="3b")
    p.add_argument("--budget", default="default")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--points", type=int, default=8)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--multiples", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0, 4.0])
    p.add_argument("--max-extend", type=int, default=1, help="grid steps added per side")
    p.add_argument("--center-log2", type=float, default=None, help="default: log2 train.lr")
    p.add_argument("--tokens", type=int, default=None, help="train.tokens (default: budget's)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("horizon_law.json"))
    p.add_argument("--override", nargs="*", default=[], help="more config overrides")
    return p.parse_args(argv)


def context(args, archive: str) -> tuple[Context, dict]:
    """The run's config, proxies and corpus as a sweep plans them, and the recipe's hp."""
    mults = ",".join(repr(float(m)) for m in args.multiples)
    ov = [f"model={args.model}", f"budget={args.budget}", "hardware=cpu", "device=cpu",
          f"proxy.width={args.width}", "scaling.schedule=wsd",
          "validation.horizon_enabled=true", "validation.horizon_method=branched",
          f"validation.horizon_multiples=[{mults}]", f"validation.points={args.points}",
          f"validation.seeds={args.seeds}", f"validation.max_extend={args.max_extend}",
          f"archive_dir={archive}", "progress=off", *args.override]
    if args.tokens:
        ov.append(f"train.tokens={args.tokens}")
    plan = plan_sweep(compose(ov))
    check_config(plan.config)
    ctx = Context(cfg=plan.config, proxies=plan.proxies, corpus=plan.corpus, storage=None,
                  lock=contextlib.nullcontext, run_name="horizon-law", device="cpu")
    return ctx, default_hparams(plan.config)


def _point(job: tuple[float, int]) -> tuple[float, int, dict, float]:
    torch.set_num_threads(1)
    x, s = job
    ctx, hp = _CTX["ctx"], _CTX["hp"]
    res = run_branched(ctx, dict(hp, lr=2.0 ** x), width=ctx.proxies.width,
                       seed=validation_seed(ctx.cfg.proxy.seed, s))
    return x, s, res.losses(), res.seconds


def train_points(jobs: list[tuple[float, int]], workers: int, done: dict) -> None:
    """Every (log2 lr, seed) job's branch losses into `done`, `workers` forked processes."""
    pool = mp.get_context("fork").Pool(workers) if workers > 1 else None
    try:
        results = pool.imap_unordered(_point, jobs) if pool else map(_point, jobs)
        for x, s, losses, sec in results:
            done[(x, s)] = losses
            shown = " ".join(f"{v:.4f}" for v in losses.values())
            print(f"  log2 lr {x:+.2f} seed {s}: {shown} ({sec:.0f} s)", flush=True)
    finally:
        if pool:
            pool.close()
            pool.join()


def curves_of(done: dict, horizons: list[int], seeds: int) -> dict:
    xs = sorted({x for x, _ in done})
    return {h: [(x, [done[(x, s)].get(h, math.inf) for s in range(seeds)]) for x in xs
                if all((x, s) in done for s in range(seeds))] for h in horizons}


def _finite(c: dict) -> dict:
    return {h: [(x, [y if math.isfinite(y) else math.nan for y in ys]) for x, ys in pts]
            for h, pts in c.items()}


def main(argv=None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as archive:
        ctx, hp = context(args, archive)
    cfg, v = ctx.cfg, ctx.cfg.validation
    horizons = horizon_tokens(cfg)
    center = round(args.center_log2 if args.center_log2 is not None
                   else math.log2(float(hp["lr"])), 6)
    lo, hi = lr_bounds(center, v)
    _CTX.update(ctx=ctx, hp=hp)
    steps = [t // (int(hp["batch_size"]) * ctx.proxies.family.seq_len) for t in horizons]
    print(f"horizon law: {args.model} proxies at width {args.width}, batch {hp['batch_size']}, "
          f"horizons {horizons} tokens ({steps} steps), wsd cooldown "
          f"{cfg.scaling.wsd_cooldown_fraction:g}, {args.points} points × {args.seeds} seeds "
          f"around log2 lr {center:+.2f}, {args.workers} workers", flush=True)
    done: dict = {}
    xs = grid(center, args.points, v.step_log2)
    for _ in range(args.max_extend + 1):
        train_points([(x, s) for s in range(args.seeds) for x in xs], args.workers, done)
        xs = extend_points(_finite(curves_of(done, horizons, args.seeds)), step=v.step_log2,
                           lo=lo, hi=hi)
        if not xs:
            break
        print(f"  an optimum at the grid's edge: extending to {xs}", flush=True)
    curves = _finite(curves_of(done, horizons, args.seeds))
    limits = limits_from(v)
    h = horizon_law.measure_law(
        curves, center, reference_tokens=float(cfg.train.tokens),
        target_tokens=float(cfg.model.train_tokens), rule="bjorck",
        beta=scaling.BJORCK_BETA, max_ci=float(v.horizon_max_ci),
        min_curvature_snr=float(v.min_curvature_snr),
        confidence=float(v.confidence), n_boot=limits.n_boot, boot_seed=limits.boot_seed,
        window=limits.fit_window, schedule="wsd")
    wall = time.perf_counter() - start
    step_law = scaling.step_law_fixed_batch_exponent()
    lo_e, hi_e = h["exponent_ci"]
    print(f"\nexponent of η* ∝ D^e over {horizons[0]}→{horizons[-1]} tokens "
          f"({h['octaves']:.0f} octaves): e = {h['exponent']:+.3f} "
          f"[{lo_e:+.3f}, {hi_e:+.3f}] ({h['confidence']:.0%}); Bjorck et al. "
          f"{-scaling.BJORCK_BETA:+.2f}; Step Law (fixed batch) {step_law:+.3f}")
    print("| tokens | steps | optimum log2 lr | 90 % interval | law residual | bracketed |")
    print("|---|---|---|---|---|---|")
    for t, n in zip(horizons, steps):
        k = str(t)
        ci = h["optima_ci"][k]
        print(f"| {t} | {n} | {h['optima_log2'][k]:+.2f} | [{ci[0]:+.2f}, {ci[1]:+.2f}] | "
              f"{h['law_residuals_log2'][k]:+.2f} | {h['bracketed'][k]} |")
    spread = h["lr_spread_at_target"]
    spread = "an unbounded number of" if spread is None else f"{spread:.1f}"
    print(f"curvature S/N {h['curvature_snr']:.1f}; carried to the target's "
          f"{float(cfg.model.train_tokens):.3g} tokens the interval spans "
          f"{spread} octaves of lr; tight: {h['tight']} ({'; '.join(h['reasons']) or 'yes'})"
          f"; wall {wall:.0f} s")
    out = {"command": " ".join(["python", "benchmarks/horizon_law.py", *(argv or sys.argv[1:])]),
           "model": args.model, "budget": args.budget, "width": args.width,
           "hparams": hp, "center_log2": center, "horizons": horizons, "steps": steps,
           "cooldown_fraction": float(cfg.scaling.wsd_cooldown_fraction),
           "bjorck_exponent": -scaling.BJORCK_BETA, "step_law_exponent": step_law,
           "result": h, "curves": {str(k): c for k, c in curves.items()},
           "wall_seconds": wall, "workers": args.workers}
    args.out.write_text(json.dumps(out, indent=1, default=float))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
