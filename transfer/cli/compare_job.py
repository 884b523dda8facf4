"""The job behind `python -m transfer.compare`: plan every family (all input checked before
anything trains), run the sweeps that have no finished archived run, then compare them."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from transfer.archive import code_version
from transfer.archive.files import read_json
from transfer.core.compose import as_config, compose_checked
from transfer.core.errors import UserError
from transfer.outputs.compare import STATUS, compare, family_from_run
from transfer.outputs.compare_report import markdown, write_comparison
from transfer.run.planner import plan_sweep


def finished(run_dir: Path) -> bool:
    """A run folder whose sweep ended with a verdict (a run.json status `STATUS` maps to
    one): reused as it is."""
    path = run_dir / "run.json"
    if not (path.exists() and (run_dir / "validation.json").exists()):
        return False
    return read_json(path).get("status") in STATUS


def comparison_dir(archive_root: Path, runs: list[str]) -> Path:
    """The comparison's own folder: named by the runs it compares, in order."""
    key = hashlib.sha256("\n".join(runs).encode()).hexdigest()[:8]
    return archive_root / f"compare-{len(runs)}-{key}"


def run_compare(models: list[str], overrides: list[str]) -> int:
    """Every family's sweep (reused where finished), then the comparison; returns 0."""
    from transfer.cli.run import run_sweep

    # an override that does not compose is one line, before any family trains
    cfgs = [as_config(compose_checked([f"model={m}", *overrides])) for m in models]
    plans = [plan_sweep(c) for c in cfgs]  # every family's input checked before any trains
    for c in cfgs:
        if not c.validation.enabled:
            raise UserError("compare reads each family's lr grid: leave validation.enabled=true")
    run_dirs = []
    done_at = None  # when the last family trained here ended: a later one's startup runs from it
    for m, cfg, plan in zip(models, cfgs, plans):
        run_dir = plan.archive.run_dir(plan.name)
        if finished(run_dir):
            print(f"{m}: reusing the finished run {run_dir}", flush=True)
        else:
            print(f"{m}: running its sweep into {run_dir}", flush=True)
            run_sweep(cfg, startup=None if done_at is None else time.time() - done_at)
            done_at = time.time()
        run_dirs.append(run_dir)
    families = [family_from_run(m, d) for m, d in zip(models, run_dirs)]
    result = compare(families)
    out = comparison_dir(plans[0].archive.root, [d.name for d in run_dirs])
    write_comparison(out, families, result, commit=code_version())
    print(markdown(result, commit=code_version()))
    print(f"comparison written to {out} (compare.md, compare.json, plots/)", flush=True)
    return 0
