"""Trainer overhead: `transfer.search.trainer.train` vs a bare PyTorch loop, side by side in one run.

Both train the same freshly built model on the same batches with the same optimizer, schedule and
clipping; the bare loop just has no bookkeeping (no per-step loss sync, divergence check, eval
scheduling or timing). Repeats are interleaved, alternating which goes first, so machine noise
hits both. Both count only training steps (the trainer's `train_seconds`; the bare loop's wall
time around its loop), and the bare loop's losses must equal the trainer's, so both did the same
work. Goal: median trainer tokens/s >= 0.95 × bare.

    python benchmarks/throughput.py --width 128 --steps 30 --repeats 5
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from proxies import TransformerFamily
from transfer.core.data import sample_batch, stdlib_corpus
from transfer.search.trainer import TrainSpec, lr_multiplier, make_optimizer, pick_device, train

GOAL = 0.95


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--parametrization", default="mup", choices=["mup", "sp"])
    p.add_argument("--n-layers", type=int, default=2)
    p.add_argument("--d-head", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = p.parse_args(argv)
    if args.steps < 2 or args.repeats < 1:
        p.error(f"need --steps >= 2 and --repeats >= 1, got {args.steps=}, {args.repeats=}")
    return args


def bare_loop(family, spec: TrainSpec, corpus, device: torch.device) -> tuple[float, list[float]]:
    """The same training as `train`, written as plainly as PyTorch allows: (seconds, losses)."""
    model = family.build(spec.width, seed=spec.seed, device=device)
    model.train()
    opt = make_optimizer(model, spec, family.parametrization, family)  # as the trainer does
    base_lrs = [g["lr"] for g in opt.param_groups]
    gen = torch.Generator().manual_seed(spec.seed + 7919)  # the trainer's data order
    total = spec.steps(family.seq_len)
    losses = []
    autocast = ((lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if device.type == "cuda"
                else contextlib.nullcontext)
    _sync(device)
    t0 = time.perf_counter()
    for step in range(total):
        mult = lr_multiplier(step, total, spec)
        for g, lr in zip(opt.param_groups, base_lrs):
            g["lr"] = lr * mult
        x, y = sample_batch(corpus.train, spec.batch_size, family.seq_len, gen)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with autocast():  # bf16 on CUDA, as in the trainer; nothing on CPU
            logits = model(x)  # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip)
        opt.step()
        losses.append(loss.detach())
    values = torch.stack(losses).tolist()  # one sync, at the end
    return time.perf_counter() - t0, values


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    fam = TransformerFamily(n_layers=args.n_layers, d_head=args.d_head, seq_len=args.seq_len,
                            base_width=min(64, args.width), parametrization=args.parametrization)
    tokens = args.batch_size * fam.seq_len * args.steps
    # A large divergence factor: this measures speed, not stability, at any lr.
    spec = TrainSpec(width=args.width, lr=2.0 ** -7, batch_size=args.batch_size, tokens=tokens,
                     n_evals=1, eval_batches=1, eval_batch_size=args.batch_size)
    corpus = stdlib_corpus()
    train(fam, spec, corpus, device=str(device))  # warm-up: allocator, kernels, lazy imports
    rates: dict[str, list[float]] = {"trainer": [], "bare": []}
    losses: dict[str, list[float]] = {}
    for r in range(args.repeats):
        for which in (("trainer", "bare") if r % 2 == 0 else ("bare", "trainer")):
            if which == "trainer":
                res = train(fam, spec, corpus, device=str(device))
                rates[which].append(res.tokens_per_s)
                losses[which] = res.train_losses
            else:
                seconds, losses[which] = bare_loop(fam, spec, corpus, device)
                rates[which].append(tokens / seconds)
        # Same losses step by step, or the two loops did not do the same work.
        torch.testing.assert_close(torch.tensor(losses["bare"]), torch.tensor(losses["trainer"]))
    med = {k: statistics.median(v) for k, v in rates.items()}
    ratio = med["trainer"] / med["bare"]
    # Each repeat runs both back to back, so its ratio cancels slow drifts in machine load.
    paired = statistics.median(t / b for t, b in zip(rates["trainer"], rates["bare"]))
    print(f"device {device}, {args.parametrization} width {args.width}, {args.steps} steps of "
          f"{args.batch_size}×{fam.seq_len} tokens, {args.repeats} interleaved repeats")
    print("| loop | median tokens/s | min | max |\n|---|---|---|---|")
    for k, v in rates.items():
        print(f"| {k} | {med[k]:,.0f} | {min(v):,.0f} | {max(v):,.0f} |")
    print(f"ratio of medians trainer/bare: {ratio:.3f}; median of per-repeat ratios: "
          f"{paired:.3f} (goal >= {GOAL}): {'PASS' if min(ratio, paired) >= GOAL else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
