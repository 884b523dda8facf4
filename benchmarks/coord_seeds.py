"""The coordinate check over seeds: how far one seed's slope scatters, and what averaging gives.

For each preset's proxy family (as `python -m transfer.sweep model=<preset>` derives it, the
default budget), the width check (`transfer.verdict.coord.coord_check`, widths 32-256) and the
depth check (`depth_coord_check`, 2-16 layers at width 32) are run one seed at a time, then with
their l1 averaged over groups of `--group` seeds (`seeds=` in the package: what
`validation.coord_seeds` sets). Printed per family: every single seed's max |slope|, each
group's, and the one over all seeds, with the limit (0.25). SP is the control that must fail.

    python benchmarks/coord_seeds.py --models llama3.2-3b qwen2.5-3b gemma2-2b --sp llama3.2-3b
"""

from __future__ import annotations

import argparse

from transfer.core.compose import as_config, compose
from transfer.core.data import stdlib_corpus
from transfer.search.family import instantiate_family, plan_proxies
from transfer.verdict.coord import coord_check, depth_coord_check

WIDTHS = [32, 64, 128, 256]
DEPTHS = [2, 4, 8, 16]


def family(model: str, parametrization: str):
    cfg = as_config(compose([f"model={model}", f"proxy.parametrization={parametrization}"]))
    return instantiate_family(cfg, plan_proxies(cfg), 256).family  # the byte corpus' vocabulary


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["llama3.2-3b", "qwen2.5-3b", "gemma2-2b"])
    ap.add_argument("--sp", nargs="*", default=["llama3.2-3b"], help="presets also run in SP")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--lr", type=float, default=0.00727, help="Qwen's stage pick, 2^-7.1")
    args = ap.parse_args(argv)
    corpus = stdlib_corpus()
    cases = [(m, "mup") for m in args.models] + [(m, "sp") for m in args.sp]
    for model, par in cases:
        fam = family(model, par)
        checks = [("width", lambda s, n, fam=fam: coord_check(
            fam, widths=WIDTHS, corpus=corpus, steps=4, lr=args.lr, seed=s, seeds=n))]
        if par == "mup":  # SP runs skip the depth grid
            checks.append(("depth", lambda s, n, fam=fam: depth_coord_check(
                fam, depths=DEPTHS, width=32, corpus=corpus, steps=4, lr=args.lr, seed=s,
                seeds=n)))
        for axis, run in checks:
            single = [run(s, 1).max_abs_slope for s in range(args.seeds)]
            groups = [run(s, args.group).max_abs_slope
                      for s in range(0, args.seeds - args.group + 1, args.group)]
            every = run(0, args.seeds)
            kind = max(every.slopes, key=lambda k: abs(every.slopes[k]))
            print(f"{model} {par} {axis}: one seed {', '.join(f'{x:.2f}' for x in single)} "
                  f"(range {min(single):.2f}-{max(single):.2f}); {args.group} seeds "
                  f"{', '.join(f'{x:.2f}' for x in groups)}; all {args.seeds}: "
                  f"{every.max_abs_slope:.2f} ({kind} {every.slopes[kind]:+.2f}); limit 0.25")


if __name__ == "__main__":
    main()
