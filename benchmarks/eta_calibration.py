"""How close the whole-run prediction comes to the wall, with and without the ETA's calibration.

For each run in the archives given (its cost.json: the probes' phases predicted before
training, `phases` as measured, the wall), the prediction three ways and the re-prediction, each against the wall
(startup and probes, spent before the prediction, added to every one):

  probes        the probes' phases alone (the ETA before `transfer.run.history`)
  left out     scaled by the mean ratios of the *other* runs given (the run's own left out:
                what a new run of a family would be told)
  in sample     scaled by the mean ratios of every run given
  after stages  the re-prediction printed once the stages are done (elapsed + the rest at
                the stages' winners), scaled by the other runs' re-prediction ratios

and, per parametrization and budget, each phase's mean measured ÷ predicted ratio: what a
budget ships as `cost.eta_prior` (with `--yaml`, in the form budget/*.yaml takes).

    python benchmarks/eta_calibration.py /tmp/cmp6/sweeps
    python benchmarks/eta_calibration.py /tmp/cmp6/sweeps /tmp/sp/sweeps --yaml
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transfer.archive.store import Archive  # noqa: E402
from transfer.run.history import ENDED, PHASES, Calibration, combine, run_ratios  # noqa: E402


def _runs(roots: list[str]) -> list[dict]:
    out = []
    for root in roots:
        archive = Archive(root)
        for name in archive.runs()["name"]:
            run = archive.load_run(name)
            cost, cfg = run.get("cost") or {}, run.get("config") or {}
            if run["run"]["status"] not in ENDED or run["run"].get("reused_from"):
                continue
            ratios = run_ratios(cost)
            if not ratios:
                continue
            pred = cost["prediction"]
            after = pred.get("after_stages") or {}
            out.append({"name": name, "ratios": ratios, "phases": pred["phases"],
                        "after_ratios": run_ratios(cost, after_stages=True),
                        "after": after.get("phases"), "elapsed": after.get("elapsed_seconds"),
                        "spent": sum((pred.get("spent_before") or {}).values()),
                        "wall": float(cost["measured_seconds"]),
                        "host": (cost.get("host") or {}).get("cpu") or "not recorded",
                        "key": (cfg.get("proxy", {}).get("parametrization"), cfg.get("budget"))})
    return out


def _predicted(run: dict, ratios: dict[str, float]) -> float:
    return run["spent"] + sum(Calibration(ratios=ratios).apply(run["phases"]).values())


def _after(run: dict, ratios: dict[str, float]) -> float:
    """The re-prediction once the stages are done, scaled by `ratios` (the re-predictions'
    own, as `transfer.run.predict.after_stages` scales it); NaN for a run that recorded none."""
    if not run["after"]:
        return float("nan")
    scaled = Calibration(after=ratios).apply(run["after"], after_stages=True)
    return run["elapsed"] + sum(scaled.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archives", nargs="+", help="archive folders (sweeps/)")
    ap.add_argument("--yaml", action="store_true", help="print the priors as budget yaml")
    args = ap.parse_args(argv)
    runs = _runs(args.archives)
    if not runs:
        print("no run with a recorded prediction in these archives", file=sys.stderr)
        return 2
    by = defaultdict(list)
    for r in runs:
        by[r["key"]].append(r)
    print(f"{'run':44s} {'wall s':>7s} {'probes':>8s} {'left out':>9s} {'in sample':>10s} "
          f"{'after stages, left out':>23s}  host")
    errs = defaultdict(list)
    for group in by.values():
        every = combine((r["ratios"] for r in group), {}, 0)
        for r in group:
            others = combine((o["ratios"] for o in group if o is not r), {}, 0)
            row = {"probes": _predicted(r, {}), "left out": _predicted(r, others),
                   "in sample": _predicted(r, every),
                   "after stages": _after(r, combine((o["after_ratios"] for o in group
                                                      if o is not r), {}, 0))}
            e = {k: v / r["wall"] - 1 for k, v in row.items()}
            for k, v in e.items():
                if v == v:  # not NaN
                    errs[k].append(v)
            print(f"{r['name']:44s} {r['wall']:7.0f} {e['probes']:+8.0%} "
                  f"{e['left out']:+9.0%} {e['in sample']:+10.0%} {e['after stages']:+23.0%}"
                  f"  {r['host']}"
                  + ("" if len(group) > 1 else "   (alone: left out = probes)"))
    for k, v in errs.items():
        print(f"{k:>10s}: mean |error| {sum(map(abs, v)) / len(v):.0%}, "
              f"worst {max(v, key=abs):+.0%}, within ±15 % {sum(abs(x) <= .15 for x in v)}"
              f"/{len(v)}")
    for (par, budget), group in by.items():
        print(f"\n{par} {budget} ({len(group)} runs): measured ÷ predicted per phase")
        if args.yaml:
            print("cost:")
        for key, field in (("eta_prior", "ratios"), ("eta_prior_after_stages", "after_ratios")):
            mean = combine((r[field] for r in group), {}, 0)
            ratios = ", ".join(f"{k}: {mean[k]:.2f}" for k in PHASES if k in mean)
            print(f"  {key}:\n    {par}: {{{ratios}}}" if args.yaml else f"  {key}: {ratios}")
        if args.yaml:
            print(f"  eta_prior_runs: {len(group)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
