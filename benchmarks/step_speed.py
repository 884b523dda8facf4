"""Where a proxy's training step could go faster on this machine: the trainer's own step
(`transfer.search.trainer.Stepper`, eager float32 on CPU) against the same step under CPU bf16
autocast and under `torch.compile`, side by side in one run, at a target's proxy shapes.

Each variant trains the same freshly built proxy on the same batches; repeats are interleaved
so machine noise hits all of them. Per shape: median ms per step, the ratio to eager, how far
the last loss moved from eager's (bf16 changes the numbers every verdict reads; compile should
not), and for compile its one-off compile seconds and the trials it needs to pay them back
(a trial: `train.tokens` at the run's batch). This is the measurement behind "the grids cannot
reach 15 minutes by a faster step" (benchmarks/RESULTS.md).

    python benchmarks/step_speed.py --model qwen2.5-3b --shapes 64x2 256x2 32x16
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from transfer.core.compose import compose
from transfer.run.planner import plan_sweep
from transfer.search.trainer import Stepper, TrainSpec, lr_multiplier

VARIANTS = ("eager", "bf16", "compile")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="3b", help="a model preset (its proxy family)")
    p.add_argument("--shapes", nargs="+", default=["64x2", "256x2", "32x16"],
                   help="WIDTHxLAYERS: the width grid's ends at the stages' depth, the depth "
                        "grid's deepest")
    p.add_argument("--steps", type=int, default=20, help="timed steps per repeat")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--batch-size", type=int, default=None,
                   help="sequences a step (default: the preset's train.batch_size; the default "
                        "runs' grids trained at the stages' pick, 8)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (1: as each of a 2-core run's two workers)")
    args = p.parse_args(argv)
    for s in args.shapes:
        w, _, d = s.partition("x")
        if not (w.isdigit() and d.isdigit()):
            p.error(f"--shapes takes WIDTHxLAYERS, e.g. 64x2; got {s!r}")
    if (args.steps < 2 or args.repeats < 1 or args.threads < 1
            or (args.batch_size is not None and args.batch_size < 1)):
        p.error(f"need --steps >= 2, --repeats, --threads and --batch-size >= 1; got "
                f"{args.steps=}, {args.repeats=}, {args.threads=}, {args.batch_size=}")
    return args


def stepper(plan, width: int, layers: int, variant: str, steps: int, batch: int) -> Stepper:
    fam = plan.proxies.family.replace(n_layers=layers)
    spec = TrainSpec(width=width, lr=float(plan.config.train.lr), batch_size=batch,
                     tokens=batch * fam.seq_len * steps, warmup_fraction=0.0)
    run = Stepper(fam, spec, plan.corpus, torch.device("cpu"))
    if variant == "bf16":
        run.autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    elif variant == "compile":
        run.model = torch.compile(run.model)  # the same parameters: the optimizer holds them
    return run


def measure(plan, width: int, layers: int, variant: str, steps: int, batch: int
            ) -> tuple[float, float, float]:
    """(first-steps seconds: building, compiling; median seconds per timed step; last loss)."""
    run = stepper(plan, width, layers, variant, steps, batch)
    t0 = time.perf_counter()
    for _ in range(2):  # kernels, allocator; compile's graphs (forward and backward)
        run.step(1.0)
    first = time.perf_counter() - t0
    times, loss = [], float("nan")
    for s in range(steps):
        t = time.perf_counter()
        loss = run.step(lr_multiplier(s, steps, run.spec))
        times.append(time.perf_counter() - t)
    return first, statistics.median(times), loss


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    plan = plan_sweep(compose([f"model={args.model}"]))
    cfg = plan.config
    batch = args.batch_size or int(cfg.train.batch_size)
    steps_per_trial = int(cfg.train.tokens) // (batch * plan.proxies.family.seq_len)
    print(f"model={args.model}: its proxies, batch {batch} × "
          f"{plan.proxies.family.seq_len}, {torch.get_num_threads()} thread(s), "
          f"{args.repeats} interleaved repeats of {args.steps} steps; a trial is "
          f"{steps_per_trial} steps")
    print("| shape | variant | ms/step | × eager | last loss − eager's | first 2 steps (s) | "
          "trials to pay back |\n|---|---|---|---|---|---|---|")
    for shape in args.shapes:
        width, layers = (int(v) for v in shape.split("x"))
        per: dict[str, list] = {v: [] for v in args.variants}
        for r in range(args.repeats):
            order = args.variants if r % 2 == 0 else list(reversed(args.variants))
            for v in order:
                torch.manual_seed(0)
                per[v].append(measure(plan, width, layers, v, args.steps, batch))
        eager = statistics.median(m[1] for m in per["eager"]) if "eager" in per else None
        eager_loss = per["eager"][0][2] if "eager" in per else None
        for v, ms in per.items():
            step = statistics.median(m[1] for m in ms)
            first = ms[0][0]  # the first repeat's: cold in this process (a worker's first trial)
            ratio = f"{step / eager:.2f}" if eager else "—"
            dloss = f"{ms[0][2] - eager_loss:+.2e}" if eager_loss is not None else "—"
            payback = "—"
            if v == "compile" and eager:
                saved = eager - step  # per step, once compiled
                extra = first - 2 * eager  # the compile, over two eager steps
                payback = (f"{extra / (saved * steps_per_trial):.1f}" if saved > 0
                           else "never (no faster)")
            print(f"| {shape} | {v} | {step * 1e3:.1f} | {ratio} | {dloss} | {first:.1f} | "
                  f"{payback} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
