"""The coordinate check as a measurement: its max |slope| interval over seeds, and what it says
(passed / inconclusive / rejected) for correct μP families and for wrong ones.

For each preset's proxy family (as `python -m transfer.sweep model=<preset>` derives it, the
default budget's widths 32-256 and 4 steps), the width check (`transfer.verdict.coord.coord_check`)
and, for μP, the depth check (`depth_coord_check`, 2-16 layers at width 32) are run on
`--blocks` disjoint blocks of `--group` seeds (seeds 0..g-1, g..2g-1, ...: what
`validation.coord_seeds` sets), each with its 90 % interval and status at every `--limits`
value. The wrong models: SP (`--sp`) and embeddings × √width (`--sqrt-width`), whose rule says
they are not μP. The calibration this prints: a limit is sound where every μP block passes (or at
worst straddles) and every wrong block is rejected.

    python benchmarks/coord_seeds.py --models llama3.2-3b qwen2.5-3b gemma2-2b \
        --sp llama3.2-3b qwen2.5-3b --sqrt-width gemma2-2b --group 8 --blocks 3
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path

from transfer.core.compose import as_config, compose
from transfer.core.data import stdlib_corpus
from transfer.search.family import instantiate_family, plan_proxies
from transfer.verdict.coord import coord_check, coord_status, depth_coord_check

WIDTHS = [32, 64, 128, 256]
DEPTHS = [2, 4, 8, 16]


def family(model: str, parametrization: str, overrides: Sequence[str] = ()):
    """The proxy family of a preset, or of a config.json (a path: `model=hf`), with
    `overrides` (e.g. budget=smoke, whose proxies are smaller)."""
    target = ([f"model={model}"] if not Path(model).exists() else
              ["model=hf", f"model.config={model}", "model.train_tokens=1e12"])
    cfg = as_config(compose([*target, f"proxy.parametrization={parametrization}", *overrides]))
    return instantiate_family(cfg, plan_proxies(cfg), 256).family  # the byte corpus' vocabulary


class SqrtWidthEmbedding:
    """The preset's family with its embeddings × √width at every width (Gemma's own rule)."""

    def __init__(self, fam):
        self.fam, self.seq_len, self.parametrization = fam, fam.seq_len, fam.parametrization
        self.vocab_size = fam.vocab_size

    def check_width(self, width: int) -> None:
        self.fam.check_width(width)

    def build(self, width: int, seed: int = 0):
        return self.fam.replace(embedding_scale=math.sqrt(width)).build(width, seed=seed)


def cases(args) -> list[tuple[str, str, object]]:
    ov = args.override
    out = [(m, "mup", family(m, "mup", ov)) for m in args.models]
    out += [(m, "sp", family(m, "sp", ov)) for m in args.sp]
    out += [(m, "sqrt-width", SqrtWidthEmbedding(family(m, "mup", ov))) for m in args.sqrt_width]
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["llama3.2-3b", "qwen2.5-3b", "gemma2-2b"],
                    help="presets, or paths to config.json files (model=hf)")
    ap.add_argument("--override", nargs="*", default=[],
                    help="Hydra overrides for every model's proxies, e.g. budget=smoke")
    ap.add_argument("--widths", type=int, nargs="+", default=WIDTHS)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--no-depth", action="store_true", help="the width check only")
    ap.add_argument("--sp", nargs="*", default=["llama3.2-3b"], help="presets also run in SP")
    ap.add_argument("--sqrt-width", nargs="*", default=[],
                    help="presets also run with embeddings × √width")
    ap.add_argument("--group", type=int, default=8, help="seeds per check")
    ap.add_argument("--blocks", type=int, default=3, help="disjoint seed blocks per case")
    ap.add_argument("--limits", type=float, nargs="+", default=[0.25, 0.5])
    ap.add_argument("--lr", type=float, default=0.00727, help="Qwen's stage pick, 2^-7.1")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/out/coord_seeds.json"))
    args = ap.parse_args(argv)
    if args.group < 2 or args.blocks < 1:
        ap.error("--group must be >= 2 (an interval needs seeds) and --blocks >= 1")
    corpus = stdlib_corpus()
    rows = []
    for model, kind, fam in cases(args):
        axes = [("width", lambda s, fam=fam: coord_check(
            fam, widths=args.widths, corpus=corpus, steps=args.steps, lr=args.lr, seed=s,
            seeds=args.group))]
        if kind == "mup" and not args.no_depth:
            axes.append(("depth", lambda s, fam=fam: depth_coord_check(
                fam, depths=DEPTHS, width=32, corpus=corpus, steps=4, lr=args.lr, seed=s,
                seeds=args.group)))
        for axis, run in axes:
            for b in range(args.blocks):
                r = run(b * args.group)
                worst = max(r.slopes, key=lambda k: abs(r.slopes[k]))
                row = {"model": model, "kind": kind, "axis": axis, "seeds": [
                    b * args.group, (b + 1) * args.group - 1], "max_abs_slope": r.max_abs_slope,
                    "ci": list(r.slope_ci), "worst": worst,
                    "status": {str(lim): coord_status(r.slope_ci, lim, len(r.widths))
                               for lim in args.limits}}
                rows.append(row)
                print(f"{model} {kind} {axis} seeds {row['seeds'][0]}-{row['seeds'][1]}: "
                      f"{r.max_abs_slope:.2f} [{r.slope_ci[0]:.2f}, {r.slope_ci[1]:.2f}] "
                      f"({worst}); " + ", ".join(f"at {k}: {v}" for k, v in row["status"].items()),
                      flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
