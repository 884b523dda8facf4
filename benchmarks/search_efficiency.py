"""Staged TPE + pruning vs a staged exhaustive grid: how much of the grid's compute does the sweep
need to land within 1 % of the grid's best held-out loss? Side by side in one run.

Both search the same stages, in the same order, over the same spaces (`conf/stages`), on the same
proxy, data, evaluation set and training seed, so a configuration gets the same loss from either.
The grid discretises each stage's space (log-spaced floats at --lr-step-log2, linear floats with
--linear-points, every categorical choice; a product only within a multi-parameter stage), trains
every point of stage 1, freezes the winner, then stage 2's grid, and so on — a staged grid, not a
joint one. TPE + pruning is the real thing: `transfer.cli.run.run_sweep` with `stages.stage.*.trials`
per stage and `pruner.kind=median|halving`, read back from its Optuna journal.

Compute is counted in trained tokens (the proxy width is fixed, so tokens ∝ FLOPs; batch sizes
are compared at equal tokens, and a pruned or diverged trial counts only the tokens it trained).
The share is the TPE run's cumulative tokens up to the first trial whose best-so-far loss is
within 1 % of the grid's best, over the grid's total tokens. Wall seconds are printed beside
tokens; on shared cores they are noise. Goal: share <= 0.30 for the default pruner.

    python benchmarks/search_efficiency.py --seeds 3
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import optuna
import torch
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from transfer.cli.run import run_sweep
from transfer.core.compose import compose
from transfer.core.errors import UserError
from transfer.run.planner import plan_sweep
from transfer.search import (
    PROBE_STEPS,
    Context,
    default_hparams,
    grid_points,
    run_training,
    stage_space,
)

GOAL = 0.30
SECTION = "## search_efficiency"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3, help="proxy.seed values 0..N-1: training "
                   "seed and TPE seed; each seed gets its own grid (its own loss landscape)")
    p.add_argument("--tokens", type=int, default=16 * 32 * 40,
                   help="tokens per trial (default: 40 steps at batch 16 on the tiny proxy)")
    p.add_argument("--n-evals", type=int, default=8, help="evaluations per trial: pruning points")
    p.add_argument("--trials", default="lr=8,batch_size=4,warmup=4",
                   help="TPE trials per stage (default: budget=default's counts)")
    p.add_argument("--stages", default="default", help="conf/stages preset")
    p.add_argument("--lr-step-log2", type=float, default=0.5,
                   help="grid spacing of log-scale floats, in octaves")
    p.add_argument("--linear-points", type=int, default=7, help="grid points of linear floats")
    p.add_argument("--pruners", nargs="+", default=["median", "halving", "none"],
                   choices=["median", "halving", "none"],
                   help="`none` is TPE alone: what pruning adds on top of it")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads; 1 keeps shared cores from stalling each other")
    p.add_argument("--results", default=str(Path(__file__).with_name("RESULTS.md")),
                   help="markdown file whose '## search_efficiency' section is (re)written")
    p.add_argument("--tolerances", type=float, nargs="+", default=[0.01, 0.02, 0.05],
                   help="relative gaps to the grid's best; the first is the goal's")
    p.add_argument("--no-write", action="store_true", help="print only")
    p.add_argument("--dump", help="also write every trial of both sides to this JSON file")
    p.add_argument("overrides", nargs="*", help="extra Hydra overrides for both sides")
    args = p.parse_args(argv)
    try:
        args.trial_counts = {k: int(v) for k, v in (kv.split("=") for kv in args.trials.split(","))}
    except ValueError:
        p.error(f"--trials must look like lr=8,batch_size=4; got {args.trials!r}")
    if args.seeds < 1 or args.lr_step_log2 <= 0 or args.linear_points < 2:
        p.error(f"need --seeds >= 1, --lr-step-log2 > 0, --linear-points >= 2; got "
                f"{args.seeds=}, {args.lr_step_log2=}, {args.linear_points=}")
    return args


def overrides(args, seed: int) -> list[str]:
    """Identical for the grid and the sweep, apart from what only the sweep reads."""
    return ["model=tiny", "budget=smoke", "hardware=cpu", f"stages={args.stages}",
            "validation.enabled=false", "progress=off", "reuse=off", f"proxy.seed={seed}",
            f"train.tokens={args.tokens}", f"train.n_evals={args.n_evals}",
            *(f"stages.stage.{s}.trials={n}" for s, n in args.trial_counts.items()),
            *args.overrides]


def compose_cfg(ovr: list[str]):
    return compose(ovr)


# ---- the staged grid ----------------------------------------------------------------------
def axis(p, args) -> list:
    """One parameter's grid points."""
    return grid_points(p, step_log2=args.lr_step_log2, linear_points=args.linear_points)


@dataclass
class Trial:
    stage: str
    params: dict
    value: float | None  # final held-out loss; None when pruned or diverged
    tokens: int
    seconds: float
    hparams: dict  # everything trained with: the frozen values and this trial's params


@dataclass
class Search:
    trials: list[Trial] = field(default_factory=list)
    probe_tokens: int = 0

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.trials)

    @property
    def seconds(self) -> float:
        return sum(t.seconds for t in self.trials)

    @property
    def best(self) -> float:
        return min((t.value for t in self.trials if t.value is not None), default=math.inf)

    def winners(self) -> dict:
        """Each stage's best (loss, params), as the next stage froze it."""
        out = {}
        for t in self.trials:
            if t.value is not None and (t.stage not in out or t.value < out[t.stage][0]):
                out[t.stage] = (t.value, t.params)
        return out

    def repeats(self) -> int:
        """Trials that trained a configuration the search had already trained (same seed: the
        same loss again, no information)."""
        seen, n = set(), 0
        for t in self.trials:
            if t.tokens == 0:  # copied in (a stage's incumbent), not trained
                continue
            key = tuple(sorted(t.hparams.items()))
            n += key in seen
            seen.add(key)
        return n

    def landed(self, target: float) -> tuple[int, float, int] | None:
        """(tokens, seconds, trials) spent up to the first trial within `target`, if any."""
        tokens, seconds, best = 0, 0.0, math.inf
        for i, t in enumerate(self.trials):
            tokens, seconds = tokens + t.tokens, seconds + t.seconds
            if t.value is not None:
                best = min(best, t.value)
            if best <= target:
                return tokens, seconds, i + 1
        return None


def run_grid(cfg, args) -> Search:
    plan = plan_sweep(cfg)
    ctx = Context(cfg=cfg, proxies=plan.proxies, corpus=plan.corpus, storage=None, lock=None,
                  run_name="grid", device=cfg.device)
    hp, out = default_hparams(cfg), Search()
    for stage in cfg.stages.order:
        space = stage_space(cfg, stage, hp)
        names = list(space)
        stage_trials = []
        for values in itertools.product(*(axis(space[k], args) for k in names)):
            point = dict(zip(names, values))
            r = run_training(ctx, dict(hp, **point), width=plan.proxies.width, seed=cfg.proxy.seed)
            ok = not (r.diverged or r.stopped) and math.isfinite(r.val_loss)
            stage_trials.append(Trial(stage, point, r.val_loss if ok else None, r.tokens,
                                      r.seconds, dict(hp, **point)))
        done = [t for t in stage_trials if t.value is not None]
        if not done:
            raise UserError(f"every grid point of stage {stage!r} diverged; narrow its space")
        hp.update(min(done, key=lambda t: t.value).params)  # first minimum, like the sweep
        out.trials += stage_trials
    return out


# ---- TPE + pruning through the real sweep -------------------------------------------------
def run_tpe(cfg) -> Search:
    code = run_sweep(cfg)
    if code != 0:
        raise RuntimeError(f"sweep exited with {code}")
    run_dir = Path(cfg.archive_dir) / next(p.name for p in Path(cfg.archive_dir).iterdir()
                                            if (p / "study.journal").exists())
    storage = JournalStorage(JournalFileBackend(str(run_dir / "study.journal")))
    out = Search()
    batch_sizes = set()
    for i, stage in enumerate(cfg.stages.order):
        study = optuna.load_study(study_name=f"{run_dir.name}:{i:02d}-{stage}", storage=storage)
        for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
            if t.state not in (TrialState.COMPLETE, TrialState.PRUNED):
                continue
            a = t.user_attrs
            value = t.value if t.state == TrialState.COMPLETE else None
            out.trials.append(Trial(stage, dict(t.params), value, int(a["tokens"]), a["seconds"],
                                    dict(a["hparams"])))
            batch_sizes.add(int(a["hparams"]["batch_size"]))
    seq = proxy_seq_len(cfg)
    # the sweep's "time a few steps first" probe, once per batch size: not search, but paid
    out.probe_tokens = sum(PROBE_STEPS * b * seq for b in batch_sizes)
    return out


def proxy_seq_len(cfg) -> int:
    from proxies.registry import size

    return cfg.proxy.seq_len or size(cfg.proxy.size)["seq_len"]


# ---- report -------------------------------------------------------------------------------
def measure(args) -> list[dict]:
    rows = []
    for seed in range(args.seeds):
        t0 = time.perf_counter()
        grid = run_grid(compose_cfg(overrides(args, seed)), args)
        row = {"seed": seed, "grid_trials": len(grid.trials), "grid_tokens": grid.tokens,
               "grid_seconds": grid.seconds, "grid_best": grid.best,
               "grid_winners": grid.winners(), "grid_repeats": grid.repeats(), "grid_detail": [t.__dict__ for t in grid.trials]}
        for pruner in args.pruners:
            with tempfile.TemporaryDirectory() as tmp:
                cfg = compose_cfg([*overrides(args, seed), f"pruner.kind={pruner}",
                                   f"archive_dir={tmp}/sweeps"])
                tpe = run_tpe(cfg)
            m = {"trials": len(tpe.trials), "tokens": tpe.tokens, "seconds": tpe.seconds,
                 "probe_tokens": tpe.probe_tokens, "best": tpe.best,
                 "gap": tpe.best / grid.best - 1,
                 "pruned": sum(t.value is None for t in tpe.trials),
                 "share_total": tpe.tokens / grid.tokens, "winners": tpe.winners(),
                 "repeats": tpe.repeats(), "share": {}, "detail": [t.__dict__ for t in tpe.trials]}
            for tol in args.tolerances:
                hit = tpe.landed(grid.best * (1 + tol))
                m["share"][tol] = None if hit is None else {
                    "tokens": hit[0] / grid.tokens, "seconds": hit[1] / grid.seconds,
                    "with_probes": (hit[0] + tpe.probe_tokens) / grid.tokens, "trials": hit[2]}
            row[pruner] = m
        rows.append(row)
        print(f"seed {seed}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return rows


def _share(hit: dict | None, key: str = "tokens") -> str:
    return "—" if hit is None else f"{hit[key]:.3f}"


def table(rows: list[dict], pruners: list[str], tols: list[float]) -> list[str]:
    head = " | ".join(f"share to {t:.0%}" for t in tols)
    out = [f"| seed | grid trials, tokens, best loss | pruner | TPE trials (pruned, repeats) | grid repeats | "
           f"{head} | share to {tols[0]:.0%} incl. probes / in seconds | whole sweep ÷ grid "
           "tokens | TPE best vs grid best |",
           "|---|---|---|---|---|" + "---|" * len(tols) + "---|---|---|"]
    for r in rows:
        for p in pruners:
            m = r[p]
            first = m["share"][tols[0]]
            out.append(f"| {r['seed']} | {r['grid_trials']}, {r['grid_tokens']:,}, "
                       f"{r['grid_best']:.4f} | {p} | {m['trials']} ({m['pruned']}, "
                       f"{m['repeats']}) | {r['grid_repeats']} | "
                       + " | ".join(_share(m["share"][t]) for t in tols)
                       + f" | {_share(first, 'with_probes')} / {_share(first, 'seconds')} | "
                       f"{m['share_total']:.3f} | {m['gap']:+.2%} |")
    return out


def _median(xs: list[float | None]) -> float | None:
    m = statistics.median(math.inf if x is None else x for x in xs)
    return None if math.isinf(m) else m


def summary(rows: list[dict], pruners: list[str], tols: list[float]
            ) -> tuple[list[str], str | None]:
    """One line per pruner; the better of the real pruners: per tolerance, tightest first, fewer
    misses then a lower median share; then a smaller median gap to the grid's best."""
    lines, keys = [], {}
    for p in pruners:
        per_tol, key = [], []
        for t in tols:
            shares = [None if r[p]["share"][t] is None else r[p]["share"][t]["tokens"]
                      for r in rows]
            misses, med = sum(s is None for s in shares), _median(shares)
            key += [misses, math.inf if med is None else med]
            per_tol.append(f"{t:.0%}: {len(shares) - misses}/{len(shares)} seeds, median share "
                           f"{'—' if med is None else f'{med:.3f}'}")
        gap = statistics.median(r[p]["gap"] for r in rows)
        met = sum(r[p]["share"][tols[0]] is not None
                  and r[p]["share"][tols[0]]["tokens"] <= GOAL for r in rows)
        lines.append(f"- **{p}**: reached {'; '.join(per_tol)}; median final gap {gap:+.2%}; "
                     f"goal (≤ {GOAL:.2f} of the grid's tokens to {tols[0]:.0%}) met on "
                     f"{met}/{len(rows)} seeds")
        if p != "none":
            keys[p] = (*key, gap)
    if not keys:
        return lines, None
    best = min(keys.values())
    winners = [p for p, k in keys.items() if k == best]
    return lines, winners[0] if len(winners) == 1 else None


def write_section(path: Path, text: str) -> None:
    """Replace this benchmark's section of RESULTS.md (other sections belong to others)."""
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    start = old.find(SECTION + "\n")
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + len(SECTION))
        new = old[:start] + text + (old[end + 1:] if end >= 0 else "")
    path.write_text(new if new.endswith("\n") else new + "\n")


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    started = time.perf_counter()
    rows = measure(args)
    if args.dump:
        Path(args.dump).write_text(json.dumps(rows, indent=1, default=str))
    tols = args.tolerances
    lines, better = summary(rows, args.pruners, tols)
    cmd = "python benchmarks/search_efficiency.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    cfg = compose_cfg(overrides(args, 0))
    grid_sizes = {s: len(list(itertools.product(*(axis(p, args) for p in stage_space(
        cfg, s, default_hparams(cfg)).values())))) for s in cfg.stages.order}
    verdict = (f"Better pruner here: **{better}**." if better else
               "No difference between the pruners at this resolution.")
    text = "\n".join([
        SECTION, "",
        f"Command: `{cmd.strip()}` ({time.perf_counter() - started:.0f} s on 2 shared CPU "
        f"cores, {torch.get_num_threads()} torch thread, {time.strftime('%Y-%m-%d')}).", "",
        f"Tiny proxy (width {cfg.proxy.width}, size `{cfg.proxy.size}`), {args.tokens:,} tokens "
        f"a trial ({args.tokens // (cfg.train.batch_size * proxy_seq_len(cfg))} steps at batch "
        f"{cfg.train.batch_size}), {args.n_evals} evaluations; stages `{args.stages}` = "
        f"{', '.join(cfg.stages.order)}. Grid points per stage: "
        f"{', '.join(f'{s} {n}' for s, n in grid_sizes.items())} (staged, winners frozen in "
        f"order). TPE trials per stage: {args.trials}. *Share to x %* = TPE's trained tokens "
        "until its best-so-far loss is within x % of the grid's best, ÷ the grid's total tokens "
        "(— = never got there); the sweep's timing probes are left out of it and shown beside "
        "it. *repeats*: trials that trained a configuration (every hyperparameter) the same "
        "search had already trained, at the same seed: the same loss again.",
        "", *table(rows, args.pruners, tols), "", *lines, "",
        verdict + " The schema default is `median`.", ""])
    print(text)
    if not args.no_write:
        write_section(Path(args.results), text)
        print(f"wrote the {SECTION!r} section of {args.results}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
