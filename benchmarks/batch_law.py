"""The batch law measured on the proxies: the lr optimum at ≥ 3 batch sizes at equal tokens (issue 36).

    python benchmarks/batch_law.py [--batches 8 16 32 64] [--out batch_law.json]

The `model=3b` proxies at `--width` (64) on CPU with `budget=<--budget>`'s recipe (its tokens,
warmup fraction, schedule, corpus, seeds' rule): the lr grid (`--points` half-octave points
around `train.lr`, `--seeds` validation seeds, edge extension as the checks') at every batch
size in `--batches`, each trial `train.tokens` long (so a larger batch takes fewer steps),
trained by `transfer.search.training.run_training` (the sweep's own trial), `--workers`
processes of one thread (`--target-yaml`: a sweep's target.yaml, whose batch doublings the
interval is carried over). The curves, keyed by batch, go through the horizon law's fit
(`transfer.judge.horizon_law.fit_law`: one curvature and asymmetry, an optimum per curve, the
slope of log2 η* over log2 B with its bootstrap interval): the exponent of η* ∝ B^e, printed
beside the √ rule's 0.5 (the emitted launch lr's, `scaling.batch_lr_rule=adam_sqrt`), the
linear rule's 1 and "no rise" 0 (`transfer.core.exponents.BATCH_SOURCES`), and carried over the
doublings from the proxies' batch to the target's (`train.batch_size` in tokens), as the launch
interval carries the rule's. Written as JSON. Slow (minutes); not CI.
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

from transfer.core.compose import compose
from transfer.core.config import check_config
from transfer.core.exponents import BATCH_SOURCES
from transfer.judge import horizon_law
from transfer.judge.curves import extend_points, grid
from transfer.run.planner import plan_sweep
from transfer.search import Context, default_hparams
from transfer.search.training import run_training
from transfer.verdict.width import limits_from, lr_bounds, validation_seed

_CTX: dict = {}  # the forked workers' context and hyperparameters


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="3b")
    p.add_argument("--budget", default="default")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--points", type=int, default=8)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--batches", type=int, nargs="+", default=[8, 16, 32, 64])
    p.add_argument("--max-extend", type=int, default=1, help="grid steps added per side")
    p.add_argument("--center-log2", type=float, default=None, help="default: log2 train.lr")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("batch_law.json"))
    p.add_argument("--target-yaml", type=Path, default=None,
                   help="a sweep's target.yaml: carry the interval over its batch doublings "
                        "(train.lr_factor_terms from_batch_tokens → to_batch_tokens)")
    p.add_argument("--override", nargs="*", default=[], help="more config overrides")
    args = p.parse_args(argv)
    b = sorted(set(args.batches))
    if len(b) < 3 or b[0] < 1 or b[-1] < 4 * b[0]:
        p.error(f"--batches needs >= 3 distinct sizes >= 1 spanning >= 4x, got {args.batches}")
    return args


def context(args, archive: str) -> tuple[Context, dict]:
    """The run's config, proxies and corpus as a sweep plans them, and the recipe's hp."""
    ov = [f"model={args.model}", f"budget={args.budget}", "hardware=cpu", "device=cpu",
          f"proxy.width={args.width}", f"validation.points={args.points}",
          f"validation.seeds={args.seeds}", f"validation.max_extend={args.max_extend}",
          f"archive_dir={archive}", "progress=off", *args.override]
    plan = plan_sweep(compose(ov))
    check_config(plan.config)
    ctx = Context(cfg=plan.config, proxies=plan.proxies, corpus=plan.corpus, storage=None,
                  lock=contextlib.nullcontext, run_name="batch-law", device="cpu")
    return ctx, default_hparams(plan.config)


def _point(job: tuple[float, int, int]) -> tuple[float, int, int, float, float]:
    torch.set_num_threads(1)
    x, s, b = job
    ctx, hp = _CTX["ctx"], _CTX["hp"]
    res = run_training(ctx, dict(hp, lr=2.0 ** x, batch_size=b), width=ctx.proxies.width,
                       seed=validation_seed(ctx.cfg.proxy.seed, s))
    loss = res.val_loss if not res.diverged and math.isfinite(res.val_loss) else math.nan
    return x, s, b, loss, res.seconds


def train_points(jobs: list[tuple[float, int, int]], workers: int, done: dict) -> None:
    """Every (log2 lr, seed, batch) job's final held-out loss into `done`."""
    pool = mp.get_context("fork").Pool(workers) if workers > 1 else None
    try:
        results = pool.imap_unordered(_point, jobs) if pool else map(_point, jobs)
        for x, s, b, loss, sec in results:
            done[(x, s, b)] = loss
            print(f"  batch {b} log2 lr {x:+.2f} seed {s}: {loss:.4f} ({sec:.0f} s)", flush=True)
    finally:
        if pool:
            pool.close()
            pool.join()


def curves_of(done: dict, batches: list[int], seeds: int) -> dict:
    """batch -> [(log2 lr, [loss per seed])], the points every seed has finished."""
    return {b: [(x, [done[(x, s, b)] for s in range(seeds)])
                for x in sorted({x for x, _, bb in done if bb == b})
                if all((x, s, b) in done for s in range(seeds))] for b in batches}


def main(argv=None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as archive:
        ctx, hp = context(args, archive)
    cfg, v = ctx.cfg, ctx.cfg.validation
    batches = sorted(set(args.batches))
    center = round(args.center_log2 if args.center_log2 is not None
                   else math.log2(float(hp["lr"])), 6)
    lo, hi = lr_bounds(center, v)
    _CTX.update(ctx=ctx, hp=hp)
    seq = ctx.proxies.family.seq_len
    steps = [int(cfg.train.tokens) // (b * seq) for b in batches]
    print(f"batch law: {args.model} proxies at width {args.width}, {cfg.train.tokens} tokens a "
          f"trial, batches {batches} ({steps} steps), {args.points} points × {args.seeds} seeds "
          f"around log2 lr {center:+.2f}, {args.workers} workers", flush=True)
    done: dict = {}
    todo = {b: grid(center, args.points, v.step_log2) for b in batches}
    for _ in range(args.max_extend + 1):
        train_points([(x, s, b) for b, xs in todo.items() for s in range(args.seeds)
                      for x in xs], args.workers, done)
        curves = curves_of(done, batches, args.seeds)
        todo = {b: xs for b in batches
                if (xs := extend_points({b: curves[b]}, step=v.step_log2, lo=lo, hi=hi))}
        if not todo:
            break
        print(f"  an optimum at the grid's edge: extending {todo}", flush=True)
    curves = curves_of(done, batches, args.seeds)
    limits = limits_from(v)
    f = horizon_law.fit_law(curves, center, confidence=float(v.confidence),
                            n_boot=limits.n_boot, boot_seed=limits.boot_seed,
                            window=limits.fit_window)
    wall = time.perf_counter() - start
    e, (lo_e, hi_e) = f["exponent"], f["exponent_ci"]
    doublings = None
    if args.target_yaml:
        import yaml

        terms = yaml.safe_load(args.target_yaml.read_text())["train"]["lr_factor_terms"]
        doublings = math.log2(float(terms["to_batch_tokens"]) / float(terms["from_batch_tokens"]))
    print(f"\nexponent of η* ∝ B^e over batch {batches[0]}→{batches[-1]} at {cfg.train.tokens} "
          f"tokens: e = {e:+.3f} [{lo_e:+.3f}, {hi_e:+.3f}] ({f['confidence']:.0%}); "
          + "; ".join(f"{s.label.split(' (')[0]} {s.low:+.1f}" for s in BATCH_SOURCES))
    print("| batch | steps | optimum log2 lr | 90 % interval | law residual | bracketed |")
    print("|---|---|---|---|---|---|")
    for b, n in zip(batches, steps):
        ci = f["optima_ci"][b]
        print(f"| {b} | {n} | {f['optima_log2'][b]:+.2f} | [{ci[0]:+.2f}, {ci[1]:+.2f}] | "
              f"{f['residuals'][b]:+.2f} | {f['bracketed'][b]} |")
    spread = None
    if doublings is not None and math.isfinite(lo_e) and math.isfinite(hi_e):
        spread = (hi_e - lo_e) * doublings
    print(f"curvature S/N {f['curvature_snr']:.1f}; "
          + (f"carried {doublings:.1f} doublings to the target's batch the interval spans "
             f"{spread:.1f} octaves of lr; " if spread is not None else "")
          + f"wall {wall:.0f} s")
    out = {"command": " ".join(["python", "benchmarks/batch_law.py", *(argv or sys.argv[1:])]),
           "model": args.model, "budget": args.budget, "width": args.width, "hparams": hp,
           "center_log2": center, "batches": batches, "steps": steps,
           "tokens": int(cfg.train.tokens),
           "result": {k: val for k, val in f.items() if k != "tokens"},
           "target_doublings": doublings, "lr_spread_at_target": spread,
           "sources": [{"label": s.label, "exponent": s.low} for s in BATCH_SOURCES],
           "curves": {str(k): c for k, c in curves.items()}, "wall_seconds": wall,
           "workers": args.workers}
    args.out.write_text(json.dumps(out, indent=1, default=float))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
