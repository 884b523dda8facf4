"""Two CPU cores, two ways: one process with 2 torch threads vs 2 worker processes with 1
thread each (`workers=2`), measured side by side in one run on the default budget's proxies.

Each mode trains the same N trials (the sweep's trial spec: width, batch, tokens) and is timed
wall-clock; modes alternate within each repeat so drift on a shared machine hits both. Prints
trials per minute per mode and the ratio at each width (the stage width and the validation
width). The faster mode on a multi-core CPU is what `workers=auto` picks.

    python benchmarks/workers.py                          # widths 64 and 256, 4 trials, 2 repeats
    python benchmarks/workers.py --tokens 76800 --trials 4 --repeats 2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time

import torch
from omegaconf import OmegaConf

from transfer.core.compose import compose
from transfer.core.data import load_corpus
from transfer.search.family import instantiate_family, plan_proxies
from transfer.search.space import default_hparams
from transfer.search.trainer import train
from transfer.search.training import train_spec


def setup(overrides: list[str]):
    cfg = compose(overrides)
    corpus = load_corpus(**OmegaConf.to_container(cfg.data, resolve=True))
    plan = instantiate_family(cfg, plan_proxies(cfg), corpus.vocab_size)
    return cfg, plan, corpus


def _train_n(overrides: list[str], width: int, tokens: int, seeds: list[int], threads: int) -> None:
    torch.set_num_threads(threads)
    cfg, plan, corpus = setup(overrides)
    hp = default_hparams(cfg)
    for s in seeds:
        train(plan.family, train_spec(cfg, hp, width=width, seed=s, seq_len=plan.family.seq_len,
                         tokens=tokens), corpus,
              device="cpu")


def one_process(overrides, width, tokens, n) -> float:
    """n trials in one spawned process with 2 threads (spawned too, so start-up is alike)."""
    ctx = mp.get_context("spawn")
    t = time.perf_counter()
    p = ctx.Process(target=_train_n, args=(overrides, width, tokens, list(range(n)), 2))
    p.start()
    p.join()
    return time.perf_counter() - t


def two_processes(overrides, width, tokens, n) -> float:
    """The same n trials split over 2 spawned processes with 1 thread each."""
    ctx = mp.get_context("spawn")
    t = time.perf_counter()
    ps = [ctx.Process(target=_train_n, args=(overrides, width, tokens, list(range(i, n, 2)), 1))
          for i in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    return time.perf_counter() - t


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--widths", type=int, nargs="+", default=[64, 256])
    p.add_argument("--trials", type=int, default=4, help="trials per mode (even)")
    p.add_argument("--tokens", type=int, default=76800, help="tokens per trial (default ¼ of "
                   "budget=default's, same step time)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--model", default="3b")
    args = p.parse_args(argv)
    if args.trials < 2 or args.trials % 2:
        p.error(f"--trials must be an even number >= 2, got {args.trials=}")
    overrides = [f"model={args.model}", "budget=default", "hardware=cpu"]
    rows = []
    for width in args.widths:
        a, b = [], []
        for _ in range(args.repeats):
            a.append(one_process(overrides, width, args.tokens, args.trials))
            b.append(two_processes(overrides, width, args.tokens, args.trials))
        ma, mb = statistics.median(a), statistics.median(b)
        rows.append((width, ma, mb))
        print(f"width {width}: 1×2 threads {', '.join(f'{x:.1f}' for x in a)} s; "
              f"2×1 thread {', '.join(f'{x:.1f}' for x in b)} s", file=sys.stderr, flush=True)
    print(f"{args.trials} trials of {args.tokens:,} tokens each, median of {args.repeats} repeats")
    print("| width | 1 process × 2 threads (s) | 2 processes × 1 thread (s) | speed-up of 2×1 |")
    print("|---|---|---|---|")
    for width, ma, mb in rows:
        print(f"| {width} | {ma:.1f} | {mb:.1f} | {ma / mb:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
