"""Gemma 2's soft-capped causal attention: the sigmoid form in the package against the
definition (cap · tanh(s / cap), `masked_fill`, softmax), forward + backward, side by side in one
run, at the default proxies' widest shape (batch 8, 16 heads, 128 tokens, head dim 16), one
thread, interleaved, median of `--repeats`.

    python benchmarks/capped_attention.py --repeats 10
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from proxies.transformer import capped_causal_attention


def definition(q, k, v, scale: float, cap: float):
    t = q.shape[-2]
    s = cap * torch.tanh(q @ k.transpose(-2, -1) * scale / cap)  # (B, H, T, T)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    return s.masked_fill(~causal, float("-inf")).softmax(-1) @ v


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--shape", type=int, nargs=4, default=[8, 16, 128, 16], metavar=("B", "H", "T", "D"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    scale, cap = 1 / 16, 50.0
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*args.shape, generator=gen).requires_grad_() for _ in range(3))
    g = torch.randn(*args.shape, generator=gen)
    cases = {"definition": definition, "package (sigmoid form)": capped_causal_attention}
    ms = {name: [] for name in cases}
    for r in range(args.repeats):
        for name in (list(cases) if r % 2 else list(cases)[::-1]):
            t0 = time.perf_counter()
            for _ in range(10):
                cases[name](q, k, v, scale, cap).backward(g)
            ms[name].append((time.perf_counter() - t0) / 10 * 1000)
    for name, xs in ms.items():
        print(f"{name}: median {statistics.median(xs):.1f} ms forward+backward (min {min(xs):.1f})")
    a, b = (statistics.median(ms[n]) for n in cases)
    print(f"speed-up {a / b:.2f}x")


if __name__ == "__main__":
    main()
