"""Does the emitted lr hold on the target itself? Tune on proxies, train the target as Granite.

1. Tune on the μP proxies (the real sweep, `transfer.cli.run.run_sweep`, composed like the CLI), and
   on SP proxies as the baseline; or reuse archived runs (`--run-mup DIR --run-sp DIR`).
2. The target is larger than every proxy in width *and* depth (default d_model 512, 8 layers vs
   proxies of 64/256 wide, 2 layers; vocabulary 256, the stdlib byte corpus).
3. Train it as a `GraniteForCausalLM` built from the run's `hf/config.json`, initialised with
   `transfer.outputs.apply.init_` and optimised by a plain `torch.optim.AdamW` over
   `transfer.outputs.apply.param_groups` — no proxy or trainer code in the loop — at the emitted lr and
   at ±½ and ±1 octave around it (every group's lr shifted together), for several seeds.
4. Print the emitted lr's distance from the target's own fitted optimum (`transfer.verdict.fit.
   fit_optimum` on the seed-mean curve; interval by a paired bootstrap over seeds) and the loss
   gap at the emitted lr. Goals: μP |distance| <= 0.5 octave, gap <= 1 %; SP should miss.

The target trains with the proxies' trial recipe (tokens per trial, batch size winner, warmup
fraction, schedule, betas, grad clip): only width and depth change, which is what μP claims
to transfer across. The μP-transferred lr (`lr_transferred` of each group, when the emitter
also writes a horizon/batch-adjusted `lr`) is the one tested. Slow; not CI:

    python benchmarks/target_check.py --out benchmarks/out/target_check           # full
    python benchmarks/target_check.py --smoke --out /tmp/target_check_smoke        # ~1-2 min
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import optuna
import torch
import torch.nn.functional as F
import yaml

from transfer.cli.run import run_sweep
from transfer.outputs import apply, hf
from transfer.plan.compose import compose
from transfer.plan.data import eval_batches, load_corpus, sample_batch
from transfer.plan.planner import plan_sweep
from transfer.verdict.fit import fit_optimum

FULL = {"d_model": 512, "n_layers": 8, "d_head": 16, "kv_group": 2, "ffn_ratio": 4,
        "seq_len": 128, "proxy_size": "cpu", "budget": "default", "width": 64,
        "tokens": None, "trials": None, "validation": True}
# Plumbing only: proxies 32 wide, 1 layer; target 128 wide, 2 layers; a few trials. Means nothing.
SMOKE = {"d_model": 128, "n_layers": 2, "d_head": 8, "kv_group": 2, "ffn_ratio": 4,
         "seq_len": 32, "proxy_size": "tiny", "budget": "smoke", "width": 32,
         "tokens": 15360, "trials": {"lr": 4, "batch_size": 2, "warmup": 1}, "validation": False}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True,
                   help="folder for the sweeps, results_<parametrization>.json (a rerun with the "
                        "same runs, sizes, offsets and seeds reuses them), summary.json")
    p.add_argument("--smoke", action="store_true", help="tiny sizes: checks the plumbing only")
    p.add_argument("--run-mup", type=Path, help="archived μP run folder to reuse (no sweep)")
    p.add_argument("--run-sp", type=Path, help="archived SP run folder to reuse (no sweep)")
    p.add_argument("--parametrizations", nargs="+", default=["mup", "sp"], choices=["mup", "sp"])
    p.add_argument("--d-model", type=int, help="target width (default 512; smoke 128)")
    p.add_argument("--n-layers", type=int, help="target depth (default 8; smoke 2)")
    p.add_argument("--offsets", type=float, nargs="+", default=[-1.0, -0.5, 0.0, 0.5, 1.0],
                   help="log2 lr offsets from the emitted lr")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--tokens", type=int, help="target training tokens (default: the proxies')")
    p.add_argument("--eval-batches", type=int, default=8)
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    args = p.parse_args(argv)
    size = dict(SMOKE if args.smoke else FULL)
    size.update({k: v for k, v in (("d_model", args.d_model), ("n_layers", args.n_layers))
                 if v is not None})
    args.size = size
    if args.seeds < 2 or len(args.offsets) < 3 or 0.0 not in args.offsets:
        p.error(f"need --seeds >= 2 and >= 3 --offsets including 0; got {args.seeds=}, "
                f"{args.offsets=}")
    return args


# ---- 1. tune on the proxies ---------------------------------------------------------------
def overrides(args, parametrization: str) -> list[str]:
    s = args.size
    heads = s["d_model"] // s["d_head"]
    ovr = [f"budget={s['budget']}", "hardware=cpu", "model=tiny", "model.name=target_check",
           "model.source='benchmarks/target_check.py, not a published model'",
           f"model.d_model={s['d_model']}", f"model.n_layers={s['n_layers']}",
           f"model.n_heads={heads}", f"model.n_kv_heads={heads // s['kv_group']}",
           f"model.d_ff={s['ffn_ratio'] * s['d_model']}", f"model.seq_len={s['seq_len']}",
           f"proxy.size={s['proxy_size']}", f"proxy.width={s['width']}",
           f"proxy.parametrization={parametrization}", f"archive_dir={Path(args.out) / 'sweeps'}",
           f"name=target-check-{parametrization}-{'smoke' if args.smoke else 'full'}",
           "progress=lines", f"device={args.device}"]
    if s["tokens"]:
        ovr.append(f"train.tokens={s['tokens']}")
    for stage, n in (s["trials"] or {}).items():
        ovr.append(f"stages.stage.{stage}.trials={n}")
    # SP's emission is the stages' pick whether or not its grid runs (an SP verdict never
    # passes, and only a passed verdict replaces the pick by the grid's optimum): skip its grid.
    if not s["validation"] or parametrization == "sp":
        ovr.append("validation.enabled=false")
    return ovr


def tune(args, parametrization: str) -> Path:
    given = args.run_mup if parametrization == "mup" else args.run_sp
    if given is not None:
        return given
    cfg = compose(overrides(args, parametrization))
    plan = plan_sweep(cfg)
    t = time.perf_counter()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # as the CLI: progress lines only
    code = run_sweep(cfg)  # 0 validated, 3 rejected: either way target.yaml and hf/ are written
    run_dir = plan.archive.run_dir(plan.name)
    print(f"[{parametrization}] sweep exit {code} in {time.perf_counter() - t:.0f} s: {run_dir}",
          flush=True)
    return run_dir


# ---- 2. train the target as Granite, with transfer.outputs.apply and plain AdamW -----------------
def recipe(run_dir: Path, args) -> dict:
    """The proxies' trial recipe, read from the run folder."""
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    winners = json.loads((run_dir / "run.json").read_text())["winners"]
    tr = cfg["train"]
    return {"tokens": args.tokens or int(tr["tokens"]), "batch_size": int(winners["batch_size"]),
            "warmup_fraction": float(winners["warmup_fraction"]),
            "schedule": tr.get("schedule", "cosine"),
            "min_lr_fraction": float(tr.get("min_lr_fraction", 0.1)),
            "betas": tuple(tr.get("betas", (0.9, 0.95))), "grad_clip": float(tr.get("grad_clip", 1.0))}


def transferred(target: dict) -> dict:
    """target.yaml with each group's lr the μP transfer of the tuned lr (see the docstring)."""
    t = json.loads(json.dumps(target))
    for g in t["param_groups"]:
        g["lr"] = g.get("lr_transferred", g["lr"])
    return t


def lr_factor(step: int, total: int, r: dict) -> float:
    warmup = int(r["warmup_fraction"] * total)
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    shape = 0.5 * (1 + math.cos(math.pi * progress)) if r["schedule"] == "cosine" else 1 - progress
    return r["min_lr_fraction"] + (1 - r["min_lr_fraction"]) * shape


def train_target(run_dir: Path, target: dict, r: dict, corpus, *, offset: float, seed: int,
                 args) -> float:
    """Final held-out loss of the target trained at 2**offset × every emitted group lr."""
    seq_len = int(target["model"]["seq_len"])
    model = hf.granite_model(run_dir).to(args.device)
    apply.init_(model, target, seed=seed)
    groups = apply.param_groups(model, target)
    for g in groups:
        g["lr"] *= 2.0 ** offset
    opt = torch.optim.AdamW(groups, betas=r["betas"])
    base = [g["lr"] for g in opt.param_groups]
    gen = torch.Generator().manual_seed(seed + 7919)  # data order, independent of the init
    steps = r["tokens"] // (r["batch_size"] * seq_len)
    model.train()
    for step in range(steps):
        for g, lr in zip(opt.param_groups, base):
            g["lr"] = lr * lr_factor(step, steps, r)
        x, y = sample_batch(corpus.train, r["batch_size"], seq_len, gen)
        logits = model(x.to(args.device)).logits  # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.to(args.device).flatten())
        if not torch.isfinite(loss):
            return math.nan
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), r["grad_clip"])
        opt.step()
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for x, y in eval_batches(corpus.val, args.eval_batches, 16, seq_len):
            logits = model(x.to(args.device)).logits
            total += F.cross_entropy(logits.float().flatten(0, 1), y.to(args.device).flatten(),
                                     reduction="sum").item()
            n += y.numel()
    return total / n


# ---- 3. the numbers -----------------------------------------------------------------------
def summarise(offsets: list[float], losses: np.ndarray, n_boot: int, seed: int = 0) -> dict:
    """losses: (points, seeds). Distance of the fitted optimum from offset 0 (a bound when the
    best point is at the grid's edge), and the loss gap at offset 0."""
    def fit(mean: np.ndarray) -> tuple[float, float, bool]:
        """The fitted optimum (a parabola through the 5 points nearest the minimum, as the
        validator fits); its loss is never above the best measured mean (a poor parabola must
        not make the gap negative)."""
        x, y, edge = fit_optimum(offsets, list(mean), window=min(5, len(offsets)))
        return x, min(y, float(np.nanmin(mean))), edge

    mean = np.nanmean(losses, axis=1)
    at = mean[offsets.index(0.0)]
    best_x, best_y, edge = fit(mean)
    rng = np.random.default_rng(seed)
    xs, gaps = [], []
    for _ in range(n_boot):  # paired: the same resampled seeds at every lr point
        cols = rng.integers(0, losses.shape[1], losses.shape[1])
        m = np.nanmean(losses[:, cols], axis=1)
        bx, by, _ = fit(m)
        xs.append(bx)
        gaps.append(m[offsets.index(0.0)] / by - 1)
    return {"distance_log2": best_x, "distance_ci": [float(np.percentile(xs, 5)),
                                                     float(np.percentile(xs, 95))],
            "loss_at_emitted": float(at), "fitted_best_loss": best_y,
            "loss_gap": float(at / best_y - 1), "loss_gap_ci": [float(np.percentile(gaps, 5)),
                                                                float(np.percentile(gaps, 95))],
            "edge_hit": edge, "mean_losses": [float(v) for v in mean]}


def table(results: dict, args) -> str:
    lines = ["| emission | emitted log2 lr (hidden) | distance from the target's optimum "
             "(90 % CI) | loss gap at emitted (90 % CI) | edge | seed-mean loss at log2 offset |",
             "|---|---|---|---|---|---|"]
    for param, r in results.items():
        s = r["summary"]
        lo, hi = s["distance_ci"]
        glo, ghi = s["loss_gap_ci"]
        lines.append(f"| {param} | {math.log2(r['hidden_lr']):.2f} | {s['distance_log2']:+.2f} "
                     f"[{lo:+.2f}, {hi:+.2f}] | {s['loss_gap']:.2%} [{glo:.2%}, {ghi:.2%}] | "
                     f"{'yes' if s['edge_hit'] else 'no'} | "
                     f"{', '.join(f'{o:+g}: {v:.3f}' for o, v in zip(r['offsets'], s['mean_losses']))} |")
    return "\n".join(lines)


def plot(results: dict, args, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for param, r in results.items():
        ax.plot(r["offsets"], r["summary"]["mean_losses"], "o-", label=param)
        ax.axvline(r["summary"]["distance_log2"], ls=":", color=ax.lines[-1].get_color())
    ax.axvline(0, color="k", lw=0.8)
    ax.set(xlabel="log2(lr / emitted lr)", ylabel="held-out loss (seed mean)",
           title=f"target {args.size['d_model']} wide, {args.size['n_layers']} layers (Granite)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if hf.transformers_or_none() is None:
        print(f"target_check needs transformers: {hf.INSTALL_HINT}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus("stdlib")
    results = {}
    for param in args.parametrizations:
        run_dir = tune(args, param)
        saved = out / f"results_{param}.json"  # one per parametrization: a rerun resumes
        done = {}  # offset -> per-seed losses already trained for this run, size and seeds
        if saved.exists():
            prev = json.loads(saved.read_text())
            if (prev["run_dir"], prev["seeds"], prev["size"]) == (str(run_dir), args.seeds,
                                                                  args.size):
                done = dict(zip(prev["offsets"], prev["losses"]))
        offsets = sorted(set(args.offsets) | set(done))  # a rerun may add offsets, never drops
        todo = [o for o in offsets if o not in done]
        if todo:
            print(f"[{param}] training offsets {todo} (reusing {sorted(done)})", flush=True)
        target = transferred(apply.load_target(run_dir))
        r = recipe(run_dir, args)
        t = time.perf_counter()
        for o in todo:
            done[o] = [train_target(run_dir, target, r, corpus, offset=o, seed=s, args=args)
                       for s in range(args.seeds)]
        losses = np.array([done[o] for o in offsets])
        hidden_lr = next(g["lr"] for g in target["param_groups"]
                         if g["name"] in ("hidden", "hidden_attn"))
        results[param] = {"run_dir": str(run_dir), "recipe": {**r, "betas": list(r["betas"])},
                          "hidden_lr": hidden_lr, "offsets": offsets, "losses": losses.tolist(),
                          "validated": target["provenance"]["validated"],
                          "summary": summarise(offsets, losses, args.bootstrap),
                          "seconds": time.perf_counter() - t}
        saved.write_text(json.dumps({**results[param], "seeds": args.seeds, "size": args.size},
                                    indent=2))
        print(f"[{param}] target trained at {len(todo)} new lrs × {args.seeds} seeds in "
              f"{results[param]['seconds']:.0f} s", flush=True)
    (out / "summary.json").write_text(json.dumps({"size": args.size, "results": results},
                                                 indent=2))
    plot(results, args, out / "target_check.png")
    print(("SMOKE (plumbing only, not evidence)\n" if args.smoke else "") + table(results, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
