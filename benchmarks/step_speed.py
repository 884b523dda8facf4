"""Where a proxy's training step could go faster on this machine: the trainer's own step
(`transfer.search.trainer.Stepper`, eager float32 on CPU) against the same step under CPU bf16
autocast, under `torch.compile`, and stacked (`--stack` models of one shape, a curve's lr
points, trained in one step: `torch.func.stack_module_state` + `vmap(functional_call)`, each
model its own lr, AdamW and clipping on the stacked tensors), side by side in one run, at a
target's proxy shapes. A stacked step's time is divided by the models it trains: ms per model
step, the figure the others give.

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

VARIANTS = ("eager", "bf16", "compile", "stacked")


class StackedStepper:
    """`stack` models of one shape trained in one step (the lever "train one shape's lr × seed
    points in one process"): their parameters stacked along a leading dim, the forward
    `vmap`ped over them, per-model AdamW (the family's groups: lr factor, ε, decay) and
    gradient clipping on the stacked tensors. Model 0 has the eager variant's lr and seed, so
    its loss is compared with eager's; the others' lrs are a half octave apart above it."""

    def __init__(self, fam, spec: TrainSpec, corpus, stack: int):
        from torch.func import functional_call, stack_module_state, vmap

        self.spec, self.corpus, self.seq_len = spec, corpus, fam.seq_len
        models = [fam.build(spec.width, seed=spec.seed) for _ in range(stack)]
        self.template = models[0]
        self.params, self.buffers = stack_module_state(models)
        name = {id(p): n for n, p in models[0].named_parameters()}
        self.group = {name[id(p)]: (g["lr"] / spec.lr, g.get("eps", spec.eps),
                                    g.get("weight_decay", 0.0))
                      for g in fam.param_groups(models[0], lr=spec.lr, eps=spec.eps)
                      for p in g["params"]}
        self.lrs = torch.tensor([spec.lr * 2.0 ** (0.5 * k) for k in range(stack)])
        self.m = {n: torch.zeros_like(p) for n, p in self.params.items()}
        self.v = {n: torch.zeros_like(p) for n, p in self.params.items()}
        self.t = 0
        self.gen = torch.Generator().manual_seed(spec.seed + 7919)  # as Stepper's data order
        self.forward = vmap(lambda p, b, x: functional_call(self.template, (p, b), (x,)),
                            in_dims=(0, 0, None))

    def step(self, mult: float) -> float:
        import torch.nn.functional as F

        from transfer.core.data import sample_batch

        x, y = sample_batch(self.corpus.train, self.spec.batch_size, self.seq_len, self.gen)
        logits = self.forward(self.params, self.buffers, x)  # (stack, B, T, V)
        per = F.cross_entropy(logits.float().flatten(1, 2).transpose(1, 2),
                              y.flatten().expand(logits.shape[0], -1), reduction="none").mean(1)
        for p in self.params.values():
            p.grad = None
        per.sum().backward()
        sq = sum(p.grad.pow(2).flatten(1).sum(1) for p in self.params.values())
        clip = (self.spec.grad_clip / (sq.sqrt() + 1e-6)).clamp(max=1.0)
        self.t += 1
        b1, b2 = self.spec.betas
        with torch.no_grad():
            for n, p in self.params.items():
                shape = (-1,) + (1,) * (p.ndim - 1)
                g = p.grad * clip.view(shape)
                factor, eps, decay = self.group[n]
                lr = (self.lrs * factor * mult).view(shape)
                if decay:
                    p.mul_(1 - lr * decay)
                self.m[n].lerp_(g, 1 - b1)
                self.v[n].mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (self.v[n] / (1 - b2 ** self.t)).sqrt_().add_(eps)
                p.sub_(lr / (1 - b1 ** self.t) * self.m[n] / denom)
        return float(per[0].detach())


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
    p.add_argument("--stack", type=int, default=6,
                   help="models a stacked step trains (6: a curve's lr points at "
                        "budget=default)")
    args = p.parse_args(argv)
    for s in args.shapes:
        w, _, d = s.partition("x")
        if not (w.isdigit() and d.isdigit()):
            p.error(f"--shapes takes WIDTHxLAYERS, e.g. 64x2; got {s!r}")
    if (args.steps < 2 or args.repeats < 1 or args.threads < 1 or args.stack < 1
            or (args.batch_size is not None and args.batch_size < 1)):
        p.error(f"need --steps >= 2, --repeats, --threads, --stack and --batch-size >= 1; got "
                f"{args.steps=}, {args.repeats=}, {args.threads=}, {args.stack=}, "
                f"{args.batch_size=}")
    return args


def stepper(plan, width: int, layers: int, variant: str, steps: int, batch: int,
            stack: int = 1) -> Stepper | StackedStepper:
    fam = plan.proxies.family.replace(n_layers=layers)
    spec = TrainSpec(width=width, lr=float(plan.config.train.lr), batch_size=batch,
                     tokens=batch * fam.seq_len * steps, warmup_fraction=0.0)
    if variant == "stacked":
        return StackedStepper(fam, spec, plan.corpus, stack)
    run = Stepper(fam, spec, plan.corpus, torch.device("cpu"))
    if variant == "bf16":
        run.autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    elif variant == "compile":
        run.model = torch.compile(run.model)  # the same parameters: the optimizer holds them
    return run


def measure(plan, width: int, layers: int, variant: str, steps: int, batch: int,
            stack: int = 1) -> tuple[float, float, float]:
    """(first-steps seconds: building, compiling; median seconds per timed step, per model
    for a stacked step; last loss, model 0's for a stacked step)."""
    run = stepper(plan, width, layers, variant, steps, batch, stack)
    per = stack if variant == "stacked" else 1
    t0 = time.perf_counter()
    for _ in range(2):  # kernels, allocator; compile's graphs (forward and backward)
        run.step(1.0)
    first = time.perf_counter() - t0
    times, loss = [], float("nan")
    for s in range(steps):
        t = time.perf_counter()
        loss = run.step(lr_multiplier(s, steps, run.spec))
        times.append((time.perf_counter() - t) / per)
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
    print("| shape | variant | ms per model step | × eager | last loss − eager's | first 2 steps (s) | "
          "trials to pay back |\n|---|---|---|---|---|---|---|")
    for shape in args.shapes:
        width, layers = (int(v) for v in shape.split("x"))
        per: dict[str, list] = {v: [] for v in args.variants}
        for r in range(args.repeats):
            order = args.variants if r % 2 == 0 else list(reversed(args.variants))
            for v in order:
                torch.manual_seed(0)
                per[v].append(measure(plan, width, layers, v, args.steps, batch, args.stack))
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
