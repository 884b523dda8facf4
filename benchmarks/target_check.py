"""Held-out targets bigger than every proxy: does the emitted interval cover the target's own
optimum?

For each target shape (width only, depth only, both) and parametrization:

1. The sweep emits for that target (`transfer.cli.run.run_sweep`, composed like the CLI, the
   default budget): the lr at the target width with its 90 % interval (`target.yaml`). The
   proxies do not depend on the target's width or depth, so the sweeps share one archived set
   of trials (reuse by fingerprint): only the emission differs.
2. The target trains exactly as the proxies did except for its shape: a `GraniteForCausalLM`
   from the run's `hf/config.json`, `transfer.apply.init_`, a plain `torch.optim.AdamW` over
   `transfer.apply.param_groups`, with the proxies' trial recipe from the package itself
   (`transfer.search.training.train_spec`: tokens, the batch and warmup winners, schedule through
   `transfer.search.trainer.lr_multiplier`, betas, clipping, and the weight decay of the same
   AdamW-timescale rule at every lr point), on the same data.
3. Its own lr curve: ≥ 7 half-octave points spanning the emitted interval and an octave beyond
   (capped at ±3 octaves of the estimate), 2 seeds, extended at an edge (the package's
   `extend_each`), fitted with the package's shared-curvature parabola and parametric bootstrap
   (`transfer.judge.shared_curvature.statistics`, one curve) over its basin (`basin_window`:
   7 points around the minimum, more where more lie within 6 % of the best loss).
4. Per target: its optimum with a 90 % interval, the emitted lr and interval, their distance,
   the loss gap at the emitted lr, and whether the emitted interval covers the optimum.

Every trained point is cached under --points (default --out/points; a rerun trains only what
is missing; benchmarks/points/target_check is the committed cache, so a curve measured on one
machine is not trained again on the next). Slow; not CI (a smoke-sized run is, through
tests/test_benchmarks.py):

    python benchmarks/target_check.py --out benchmarks/out/target_check \
        --points benchmarks/points/target_check
    python benchmarks/target_check.py --out /tmp/tc --archive <sweeps> --emit-only  # emission
    python benchmarks/target_check.py --out /tmp/tc --rejudge <sweeps>/<run> \
        --from benchmarks/points/summaries/<summary>.json   # this code's emission, no training
    python benchmarks/target_check.py --out /tmp/tc --from <summary>.json  # its table, again
    python benchmarks/target_check.py --out /tmp/tc --from <summary>.json --refit  # this fit
    python benchmarks/target_check.py --out /tmp/tc --smoke         # plumbing, ~2 min
    python benchmarks/target_check.py --out /tmp/tc --figure docs/figures/held_out_targets.png \
        --from benchmarks/points/summaries/both_mup.json benchmarks/points/summaries/width_sp.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import optuna
import torch
import torch.nn.functional as F

from transfer.cli.run import run_sweep
from transfer.core.compose import compose
from transfer.core.data import eval_batches, load_corpus, sample_batch
from transfer.judge.curves import bracket, extend_each, mean_curve
from transfer.judge.shared_curvature import (
    BASIN_EXCESS,
    fit_window,
    interaction_noise,
    interval,
    statistics,
)
from transfer.outputs import apply, hf, plots
from transfer.run.planner import plan_sweep
from transfer.search.trainer import lr_multiplier
from transfer.search.training import train_spec

# name → target shape. The targets are Llama 3.2 3B's architecture (model=3b: tied embeddings,
# rope θ 500000, SwiGLU 8/3) at other widths and depths, with the byte vocabulary; the proxy
# fields the 3B target derives are pinned (ffn ratio, kv group), so the emitting sweeps have the
# README main command's fingerprint and reuse its archived trials (--archive).
# "proxy" is the control: the stages' own shape, trained by this Granite loop instead of the
# project's trainer — a miss there is the implementation's, not width's or depth's.
# "deeper" is deeper than every depth the sweep's depth grid measures (budget=default: 2, 4, 8,
# 16 layers at width 32): the depth trajectory's extrapolation, held out; "deep" (16 layers) was
# that target when the grid stopped at 8 layers. "target_depth" is the 3B's own 28 layers. All
# but "proxy" sit at another width than the depth grid's, so they test the additive width ×
# depth form too.
TARGETS = {"width": {"d_model": 512, "n_layers": 2}, "depth": {"d_model": 64, "n_layers": 8},
           "deep": {"d_model": 64, "n_layers": 16}, "deeper": {"d_model": 64, "n_layers": 32},
           "target_depth": {"d_model": 64, "n_layers": 28},
           "both": {"d_model": 384, "n_layers": 4}, "proxy": {"d_model": 64, "n_layers": 2}}
SHAPE = {"model": "3b", "d_head": 16, "kv_group": 2, "ffn_ratio": 2.666667, "seq_len": 128,
         "budget": "default"}
# --model: the family whose architecture the targets keep, each pinned to what its proxies derive
# at width 64 (so the emitting sweeps reuse `python -m transfer.sweep model=<name>`'s trials).
# Qwen2.5 3B: ffn 11008 / 2048, 8 query heads per kv head, which the proxies reduce to 2 (the
# depth grid's width 32 has 2 heads: transfer.search.family._kv_group); the target trains as
# Qwen2ForCausalLM (hf/config.json is a Qwen2Config: q/k/v biases).
# Qwen3 4B: ffn 9728 / 2560, 4 query heads per kv head (2 in the proxies), q/k RMSNorm per head;
# Gemma 3 4B: ffn 10240 / 2560, 2 per kv head, q/k norm, sandwich norms, local layers with their
# own RoPE base (the window, 1024, is longer than the proxies' context). Both presets name a head
# dimension of their own (128, 256), so the target is pinned to the proxies' (`target_d_head`):
# the control is the proxies' own shape; they train as Qwen3ForCausalLM and Gemma3ForCausalLM.
MODEL_SHAPES = {"3b": SHAPE,
                "qwen2.5-3b": dict(SHAPE, model="qwen2.5-3b", kv_group=2, ffn_ratio=5.375),
                "qwen3-4b": dict(SHAPE, model="qwen3-4b", kv_group=2, ffn_ratio=3.8,
                                 target_d_head=True),
                "gemma3-4b": dict(SHAPE, model="gemma3-4b", kv_group=2, ffn_ratio=4.0,
                                  target_d_head=True)}
SMOKE_TARGETS = {"width": {"d_model": 128, "n_layers": 1}}
SMOKE_SHAPE = {"model": "tiny", "d_head": 8, "kv_group": 2, "ffn_ratio": 4, "seq_len": 32,
               "budget": "smoke"}
STEP = 0.5  # octaves between lr points, as the validator's grid
MIN_POINTS, BEYOND, MAX_SPAN, MAX_EXTEND = 7, 1.0, 3.0, 3


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="sweeps, cached points, summary.json")
    p.add_argument("--targets", nargs="+", default=None, help=f"of {', '.join(TARGETS)}")
    p.add_argument("--parametrizations", nargs="+", default=["mup", "sp"], choices=["mup", "sp"])
    p.add_argument("--points", type=Path, default=None,
                   help="the trained points' cache (default --out/points); the committed one, "
                        "benchmarks/points/target_check, keeps them across machines")
    p.add_argument("--emit-only", action="store_true",
                   help="only the emitting sweeps (reused from the archive): the emitted lr and "
                        "interval per target, no target trained")
    p.add_argument("--figure", type=Path, default=None,
                   help="write the held-out curves as a PNG: this run's, or those of --from")
    p.add_argument("--from", dest="summaries", type=Path, nargs="+", default=None,
                   help="summary.json files to draw with --figure instead of running")
    p.add_argument("--rejudge", type=Path, default=None, metavar="RUN_DIR",
                   help="re-emit for each target of --from from RUN_DIR's archived grids with "
                        "this checkout's verdict code, and compare with the targets' curves "
                        "there: nothing trained")
    p.add_argument("--refit", action="store_true",
                   help="with --from: each summary's curve refitted by this code (its emission "
                        "kept), written to --out/summary.json; nothing trained")
    p.add_argument("--interpolate", action="store_true",
                   help="with --rejudge: read depths inside the depth grid between its depths "
                        "(validation.depth_interpolate)")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="tiny sizes: the plumbing only")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--override", action="append", default=[], help="extra sweep override")
    p.add_argument("--model", default="3b", choices=sorted(MODEL_SHAPES),
                   help="the target family (default 3b: Llama 3.2 3B's, trained as Granite)")
    p.add_argument("--archive", type=Path, default=None,
                   help="the sweeps' archive (default --out/sweeps): one holding the README main "
                        "command's runs (μP and SP) re-emits for each target without training")
    args = p.parse_args(argv)
    table = SMOKE_TARGETS if args.smoke else TARGETS
    args.targets = args.targets or [t for t in table if t != "proxy"]
    bad = [t for t in args.targets if t not in table]
    if bad:
        p.error(f"unknown target {bad[0]!r}; available: {', '.join(table)}")
    if args.seeds < 2:
        p.error(f"--seeds must be >= 2 (one seed cannot tell noise from signal), got {args.seeds}")
    args.shape = SMOKE_SHAPE if args.smoke else MODEL_SHAPES[args.model]
    args.table = table
    return args


# ---- 1. the sweep that emits for the target ------------------------------------------------
def overrides(args, target: dict, parametrization: str) -> list[str]:
    s, heads = args.shape, target["d_model"] // args.shape["d_head"]
    family = "" if s["model"] in ("3b", "tiny") else f"{s['model']}-"  # 3b: the cache's names
    name = (f"target-check-{family}{target['d_model']}x{target['n_layers']}-{parametrization}-"
            f"{s['budget']}")
    ovr = [f"budget={s['budget']}", f"model={s['model']}", "model.name=target_check",
           f"name={name}",
           "model.source='benchmarks/target_check.py, not a published model'",
           f"model.d_model={target['d_model']}", f"model.n_layers={target['n_layers']}",
           f"model.n_heads={heads}", f"model.n_kv_heads={heads // s['kv_group']}",
           f"model.d_ff={round(s['ffn_ratio'] * target['d_model'])}",
           f"model.seq_len={s['seq_len']}", "model.vocab_size=256",
           f"proxy.ffn_ratio={s['ffn_ratio']}", f"proxy.kv_group={s['kv_group']}",
           f"proxy.parametrization={parametrization}",
           f"archive_dir={args.archive or args.out / 'sweeps'}", "progress=lines",
           *([f"model.d_head={s['d_head']}"] if s.get("target_d_head") else []),
           *args.override]
    return ovr


def sweep(args, target: dict, parametrization: str):
    """The emitting sweep (resumed or reused from the archive when already run)."""
    cfg = compose(overrides(args, target, parametrization))
    plan = plan_sweep(cfg)
    run_dir = plan.archive.run_dir(plan.name)
    if not (run_dir / "target.yaml").exists():
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        t = time.perf_counter()
        code = run_sweep(cfg)
        print(f"[{parametrization}] sweep exit {code} in {time.perf_counter() - t:.0f} s: "
              f"{run_dir}", flush=True)
    return cfg, plan, run_dir


# ---- 2. the target, trained as the proxies were ---------------------------------------------
def train_point(run_dir: Path, target: dict, cfg, hp: dict, corpus, *, log2_lr: float,
                seed: int) -> float:
    """Held-out loss of the target trained at base lr 2**log2_lr (every group's transferred lr
    moved with it), with the proxies' recipe at that lr."""
    seq_len = int(target["model"]["seq_len"])
    spec = train_spec(cfg, dict(hp, lr=2.0 ** log2_lr), width=int(target["model"]["d_model"]),
                      seed=seed, seq_len=seq_len)
    model = hf.hf_model(run_dir)  # the class hf/config.json names: Granite, Qwen2, Gemma 2
    apply.init_(model, target, seed=seed)
    groups = apply.param_groups(model, target)
    # The groups' lr in target.yaml are the launch lr (train.lr: lr_transferred × the horizon
    # and batch rules) times each group's μP/depth factor; the ratio to train.lr is that factor.
    # (Dividing by lr_transferred instead trained every point at lr_factor × its nominal lr:
    # 0.48× on the 3B targets, the −1.05 octave the first control measured.)
    base_lr, base_wd = float(target["train"]["lr"]), float(target["train"]["weight_decay"])
    for g in groups:
        scale = g["lr"] / base_lr  # the group's μP factor (hidden: 1 / width_mult, ...)
        g["lr"] = spec.lr * scale
        # the proxies' rule: λ·η the same in every group (μP scales λ by width_mult)
        g["weight_decay"] = spec.weight_decay / scale if base_wd > 0 else 0.0
    opt = torch.optim.AdamW(groups, betas=spec.betas)
    peak = [g["lr"] for g in opt.param_groups]
    gen = torch.Generator().manual_seed(spec.seed + 7919)  # the trainer's data order
    total = spec.steps(seq_len)
    model.train()
    for step in range(total):
        mult = lr_multiplier(step, total, spec)
        for g, lr in zip(opt.param_groups, peak):
            g["lr"] = lr * mult
        x, y = sample_batch(corpus.train, spec.batch_size, seq_len, gen)
        loss = F.cross_entropy(model(x).logits.float().flatten(0, 1), y.flatten())
        if not torch.isfinite(loss):
            return math.nan
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip)
        opt.step()
    model.eval()
    total_loss, n = 0.0, 0
    with torch.no_grad():
        for x, y in eval_batches(corpus.val, spec.eval_batches, spec.eval_batch_size, seq_len):
            total_loss += F.cross_entropy(model(x).logits.float().flatten(0, 1), y.flatten(),
                                          reduction="sum").item()
            n += y.numel()
    return total_loss / n


def point_key(run_dir: Path, target: dict, log2_lr: float, seed: int, hp: dict) -> str:
    """A trained point's cache key: what `train_point` trains from — the target's shape, its
    μP block, each group's lr factor (to train.lr) and init, the proxies' winners (batch,
    warmup, …) — with the lr and seed; not the emitted lr itself, so a new emission of the same
    recipe (the depth part added to lr_transferred) reuses the points."""
    groups = [(g["name"], round(g["lr"] / float(target["train"]["lr"]), 9), g.get("init_std"))
              for g in target["param_groups"]]
    ident = json.dumps({"run": run_dir.name, "model": target["model"], "log2_lr": round(log2_lr, 6),
                        "seed": seed, "mup": target["mup"], "groups": groups,
                        "winners": {k: v for k, v in sorted(hp.items()) if k != "lr"},
                        "scale_basis": "train.lr"}, sort_keys=True, default=str)
    return hashlib.sha256(ident.encode()).hexdigest()[:20]


def cached_point(args, run_dir, target, cfg, hp, corpus, log2_lr, seed) -> float:
    path = (args.points or args.out / "points") / f"{point_key(run_dir, target, log2_lr, seed, hp)}.json"
    if path.exists():
        return float(json.loads(path.read_text())["loss"])
    t = time.perf_counter()
    loss = train_point(run_dir, target, cfg, hp, corpus, log2_lr=log2_lr, seed=seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"run": run_dir.name, "log2_lr": log2_lr, "seed": seed,
                                "loss": loss, "seconds": time.perf_counter() - t}))
    print(f"  log2 lr {log2_lr:+.2f} seed {seed}: {loss:.4f} ({time.perf_counter() - t:.0f} s)",
          flush=True)
    return loss


def cached_curve(args, run_dir: Path, target: dict, hp: dict) -> dict:
    """Every cached point of this target trained from this recipe (its key recomputed: the
    same shape, μP block, group factors and winners), at lrs every seed has: {(log2 lr, seed):
    loss}. A new emission of the same recipe centres its grid elsewhere; these points still
    belong to the target's curve."""
    found: dict = {}
    for f in (args.points or args.out / "points").glob("*.json"):
        d = json.loads(f.read_text())
        if d.get("run") == run_dir.name and d["seed"] < args.seeds and f.stem == point_key(
                run_dir, target, d["log2_lr"], d["seed"], hp):
            found[(round(float(d["log2_lr"]), 6), int(d["seed"]))] = float(d["loss"])
    xs = {x for x, _ in found}
    return {k: v for k, v in found.items()
            if all((k[0], s) in found for s in range(args.seeds)) and k[0] in xs}


def on_lattice(xs: list[float], points: dict) -> list[float]:
    """`xs` moved onto the half-octave lattice of the points already trained (none: as they
    are), so a new emission trains only the lrs its span adds."""
    if not points:
        return xs
    x0 = min(x for x, _ in points)
    return sorted({round(x0 + STEP * round((x - x0) / STEP), 6) for x in xs})


def lr_points(est: float, lo: float, hi: float) -> list[float]:
    """Half-octave points spanning the interval and an octave beyond, ≥ 7, ≤ ±3 of `est`."""
    lo = max(lo if math.isfinite(lo) else est, est - MAX_SPAN + BEYOND) - BEYOND
    hi = min(hi if math.isfinite(hi) else est, est + MAX_SPAN - BEYOND) + BEYOND
    n = max(MIN_POINTS, int(math.ceil((hi - lo) / STEP)) + 1)
    start = est - STEP * (n - 1) / 2 + STEP * round((lo + hi) / 2 / STEP - est / STEP)
    return [round(start + STEP * i, 6) for i in range(n)]


# ---- 3. the target's own optimum ------------------------------------------------------------
def basin_window(xs, ys, least: int = MIN_POINTS, excess: float = BASIN_EXCESS) -> list[int]:
    """The points the target's parabola sees: as many around the minimum (`fit_window`) as the
    curve has points within `excess` of the best loss (its basin, as the judge's noise
    weighting draws it: `BASIN_EXCESS`), and never fewer than `least`. A fixed 7 half-octave
    points (3 octaves) sees only the floor of a basin wider than that, flat for its noise
    (Gemma 3's q/k-normed control: 12 points, 5.5 octaves, within 6 % of the best); the
    basin's walls are what place its vertex. Curves whose basin holds ≤ 7 points keep the 7.
    The fit's σ pools the seeds' scatter with its own residual, so a basin the parabola misses
    widens its interval."""
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    finite = np.isfinite(ys)
    if not finite.any():
        return []
    best = float(ys[finite].min())
    size = max(least, int(np.sum(finite & (ys <= best + abs(best) * excess))))
    return [int(i) for i in fit_window(xs, ys, size)]


def fit_curve(pts: list, seeds: int, tuned: float, width: int) -> dict:
    """The shared-curvature parabola on the target's own curve (`pts`: [(log2 lr, [loss per
    seed])]) over its basin (`basin_window`): vertex, its 90 % interval, the fitted loss at
    `tuned` against the best."""
    xs, ys = mean_curve(pts)
    table = {width: {"log2_lr": xs.tolist(), "loss": ys.tolist(),
                     "losses": [list(map(float, p[1])) for p in pts]}}
    below, above = bracket(xs, ys)
    win = {width: basin_window(xs, ys)}
    pure, dof = interaction_noise(table, [width])
    st = statistics(table, win, [width], pure / math.sqrt(seeds) if dof else None, dof, tuned,
                    confidence=0.9, n_boot=2000, boot_seed=0)
    lo, hi = interval(st["vertex_draws"][0], 0.9)
    return {"optimum_log2": st["v"][width], "optimum_ci": [lo, hi],
            "gap_at_emitted": st["gap_tuned"], "curvature_snr": st["snr"],
            "bracketed": not (below or above), "curve": table[width]}


def check(args, name: str, parametrization: str, corpus) -> dict:
    shape = args.table[name]
    cfg, plan, run_dir = sweep(args, shape, parametrization)
    target = apply.load_target(run_dir)
    lr = target["provenance"]["lr"]
    est = math.log2(float(target["train"]["lr_transferred"]))
    lo, hi = lr.get("interval_log2", [math.nan, math.nan])
    hp = json.loads((run_dir / "run.json").read_text())["winners"]
    width = int(shape["d_model"])
    if args.emit_only:
        print(f"{name} {width}x{shape['n_layers']} [{parametrization}]: emitted log2 lr "
              f"{est:.2f} [{lo:.2f}, {hi:.2f}] ({lr.get('model')}, {lr.get('source')}); "
              f"the interval spans {lr.get('interval_spans')}", flush=True)
        return {"target": name, "shape": shape, "parametrization": parametrization,
                "run": run_dir.name, "verdict": lr.get("source"), "emitted_log2": est,
                "emitted_interval_log2": [lo, hi], "model": lr.get("model"),
                "interval_spans": lr.get("interval_spans")}
    points = cached_curve(args, run_dir, target, hp)
    xs = on_lattice(lr_points(est, lo, hi), points)
    t = time.perf_counter()
    for _ in range(MAX_EXTEND + 1):
        for x in xs:
            for s in range(args.seeds):
                if (x, s) not in points:
                    points[(x, s)] = cached_point(args, run_dir, target, cfg, hp, corpus, x, s)
        curve = {width: sorted((x, [points[(x, s)] for s in range(args.seeds)])
                               for x in {x for x, _ in points})}
        new = extend_each(curve, step=STEP, bounds={width: (est - MAX_SPAN - 2, est + MAX_SPAN + 2)})
        if not new:
            break
        xs = new[width]
    fit = fit_curve(curve[width], args.seeds, est, width)  # the curve the last extension saw
    opt, (olo, ohi) = fit["optimum_log2"], fit["optimum_ci"]
    return {"target": name, "shape": shape, "parametrization": parametrization,
            "run": run_dir.name, "verdict": lr.get("source"),
            "emitted_log2": est, "emitted_interval_log2": [lo, hi],
            "model": lr.get("model"), "interval_spans": lr.get("interval_spans"),
            "target_optimum_log2": opt, "target_optimum_ci": [olo, ohi],
            "distance_log2": est - opt, "loss_gap_at_emitted": fit["gap_at_emitted"],
            "covered": bool(lo <= opt <= hi), "bracketed": fit["bracketed"],
            "curvature_snr": fit["curvature_snr"], "curve": fit["curve"],
            "seconds": time.perf_counter() - t}


def rejudged_emission(run_dir: Path, shape: dict, interpolate: bool = False) -> dict:
    """The emission for `shape` (d_model × n_layers) from `run_dir`'s archived grids, judged by
    this checkout's code: the joint width × depth estimate as the run makes it
    (`transfer.verdict.depth.joint_from`: each verdict's curves, confidence and model), nothing
    trained. What a re-run of the same trials would emit for that target."""
    import yaml

    from transfer.core.config import archived_validation
    from transfer.verdict.depth import joint_from

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    width = json.loads((run_dir / "validation.json").read_text())
    deep = json.loads((run_dir / "validation_depth.json").read_text())
    v = archived_validation(cfg["validation"])
    v.depth_interpolate = bool(interpolate or v.depth_interpolate)
    j = joint_from(v, cfg["proxy"]["parametrization"],
                   {int(k): c for k, c in width["curves"].items()},
                   {int(k): c for k, c in deep["curves"].items()},
                   width_model=width["trajectory"]["model"],
                   confidence=max(width["confidence"], deep["confidence"]),
                   target_width=int(shape["d_model"]), target_depth=int(shape["n_layers"]),
                   depth_width=v.depth_width)
    return {"emitted_log2": j.estimate, "emitted_interval_log2": list(j.interval),
            "model": f"{j.width['model']} + {j.depth['model']}",
            "verdict": f"re-judged from {run_dir.name}'s grids (target_check --rejudge)"}


def refit(r: dict, emission: dict | None = None) -> dict:
    """A held-out result (a summary.json's: the target's own curve) with its optimum fitted by
    this code (`fit_curve`) and judged against `emission` (`rejudged_emission`'s keys; None:
    the result's own emission). Nothing trained."""
    e = emission or {k: r[k] for k in ("emitted_log2", "emitted_interval_log2")}
    lo, hi = e["emitted_interval_log2"]
    c = r["curve"]
    fit = fit_curve(list(zip(c["log2_lr"], c["losses"])), len(c["losses"][0]),
                    e["emitted_log2"], int(r["shape"]["d_model"]))
    opt = fit["optimum_log2"]
    return {**r, **e, "target_optimum_log2": opt, "target_optimum_ci": fit["optimum_ci"],
            "distance_log2": e["emitted_log2"] - opt,
            "loss_gap_at_emitted": fit["gap_at_emitted"], "covered": bool(lo <= opt <= hi),
            "bracketed": fit["bracketed"], "curvature_snr": fit["curvature_snr"]}


def rejudge(run_dir: Path, results: list[dict], interpolate: bool = False) -> list[dict]:
    """Each held-out result (a summary.json's: the target's own curve) against the emission
    this code makes for its shape from `run_dir`'s grids (`rejudged_emission`), the target's
    optimum refitted by this code (`refit`)."""
    return [refit(r, rejudged_emission(run_dir, r["shape"], interpolate)) for r in results]


def distance_interval(r: dict) -> tuple[float, float]:
    """The distance's interval with both sides' noise in it: "covered" asks whether the emitted
    interval holds the target's optimum, as if that optimum were exact, but a held-out curve has
    its own (2-4 seeds: ±0.3-0.8 octave on the deep targets). Each side's half-widths added in
    quadrature (emitted − target: the emitted interval's lower half with the target's upper,
    and the other way round); (−inf, inf) where either interval is unbounded. An approximation
    for two independent, roughly normal estimates, not a bootstrap of the pair."""
    e, (elo, ehi) = r["emitted_log2"], r["emitted_interval_log2"]
    t, (tlo, thi) = r["target_optimum_log2"], r["target_optimum_ci"]
    if not all(math.isfinite(v) for v in (elo, ehi, tlo, thi)):
        return -math.inf, math.inf
    d = e - t
    return d - math.hypot(e - elo, thi - t), d + math.hypot(ehi - e, t - tlo)


def consistent(lo: float, hi: float) -> str:
    """Whether a distance of 0 lies in [lo, hi]; "cannot tell" where it is unbounded."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "cannot tell (unbounded)"
    return "yes" if lo <= 0 <= hi else "no"


def table(results: list[dict]) -> str:
    lines = ["| target | shape | emission | emitted log2 lr [interval] | target optimum [90 %] | "
             "distance (oct.) [both sides' noise] | loss gap at emitted | covered | "
             "consistent |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lo, hi = r["emitted_interval_log2"]
        olo, ohi = r["target_optimum_ci"]
        dlo, dhi = distance_interval(r)
        lines.append(f"| {r['target']} | {r['shape']['d_model']}×{r['shape']['n_layers']} | "
                     f"{r['parametrization']} ({r['model']}) | {r['emitted_log2']:.2f} "
                     f"[{lo:.2f}, {hi:.2f}] | {r['target_optimum_log2']:.2f} [{olo:.2f}, {ohi:.2f}]"
                     f"{'' if r['bracketed'] else ' (edge)'} | {r['distance_log2']:+.2f} "
                     f"[{dlo:+.2f}, {dhi:+.2f}] | {r['loss_gap_at_emitted']:.2%} | "
                     f"{'yes' if r['covered'] else 'no'} | {consistent(dlo, dhi)} |")
    return "\n".join(lines)


def figure_png(results: list[dict]) -> bytes:
    """Each target's seed-mean curve against log2 lr, its fitted optimum (dot, 90 % bar) and
    the emitted lr with its interval (shaded), one panel per target."""
    fig = plots.figure(figsize=(4 * len(results), 3.4))
    for i, r in enumerate(results):
        ax = fig.add_subplot(1, len(results), i + 1)
        c = r["curve"]
        ax.plot(c["log2_lr"], c["loss"], "o-", color="C0", label="target's curve (seed mean)")
        lo, hi = r["emitted_interval_log2"]
        ax.axvspan(lo, hi, color="C1", alpha=0.25, label="emitted interval (its look)")
        ax.axvline(r["emitted_log2"], color="C1", label="emitted lr")
        olo, ohi = r["target_optimum_ci"]
        y = min(v for v in c["loss"] if math.isfinite(v))
        ax.errorbar([r["target_optimum_log2"]], [y], xerr=[[r["target_optimum_log2"] - olo],
                    [ohi - r["target_optimum_log2"]]], fmt="s", color="C3",
                    label="target's optimum, 90 %")
        ax.set_title(f"{r['target']} {r['shape']['d_model']}×{r['shape']['n_layers']} "
                     f"({r['parametrization']}): {r['distance_log2']:+.2f} oct.", fontsize=9)
        ax.set_xlabel("log2 lr")
        if i == 0:
            ax.set_ylabel("held-out loss")
            ax.legend(fontsize=7)
    return plots.png_bytes(fig, dpi=110)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.rejudge:
        if not args.summaries:
            print("--rejudge needs --from: the summary.json files holding the targets' curves",
                  file=sys.stderr)
            return 2
        results = rejudge(args.rejudge, [r for f in args.summaries
                                         for r in json.loads(f.read_text())],
                          args.interpolate)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps(results, indent=2))
        if args.figure:
            args.figure.write_bytes(figure_png(results))
        print(table(results))
        return 0
    if args.summaries:  # the table (and with --figure the figure) of summaries, nothing trained
        results = [r for f in args.summaries for r in json.loads(f.read_text())]
        if args.refit:
            results = [refit(r) for r in results]
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "summary.json").write_text(json.dumps(results, indent=2))
        if args.figure:
            args.figure.write_bytes(figure_png(results))
        print(table(results))
        return 0
    torch.set_num_threads(args.threads)
    if hf.transformers_or_none() is None:
        print(f"target_check needs transformers: {hf.INSTALL_HINT}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus("stdlib")
    results = [check(args, name, p, corpus) for p in args.parametrizations
               for name in args.targets]
    if args.emit_only:
        (args.out / "emitted.json").write_text(json.dumps(results, indent=2))
        return 0
    (args.out / "summary.json").write_text(json.dumps(results, indent=2))
    if args.figure:
        args.figure.write_bytes(figure_png(results))
    print(("SMOKE (plumbing only, not evidence)\n" if args.smoke else "") + table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
