"""Before training: warm-start a new run from an archived run with the same fingerprint.

The archived run's finished trials are copied into the new run's studies (and the coordinate
check's plot into its folder): a finished match re-emits only, a partial one continues where it
stopped. Only data is read: nothing named in the archived files is imported or executed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import optuna

from transfer.outputs.write import COORD_PLOT
from transfer.plan.planner import Plan
from transfer.search import FINISHED
from transfer.search.storage import JOURNAL_FILE, make_storage


def _copy_studies(src_storage, src_run: str, dst_storage, dst_run: str) -> int:
    """Copy the finished trials of every study of `src_run` under the new run's names."""
    n = 0
    for s in optuna.get_all_study_summaries(src_storage, include_best_trial=False):
        if not s.study_name.startswith(src_run + ":"):
            continue
        src = optuna.load_study(study_name=s.study_name, storage=src_storage)
        dst = optuna.create_study(study_name=dst_run + s.study_name[len(src_run):],
                                  storage=dst_storage, direction=src.direction,
                                  load_if_exists=True)
        trials = [t for t in src.get_trials(deepcopy=False) if t.state in FINISHED]
        dst.add_trials(trials)
        for k, v in src.user_attrs.items():
            dst.set_user_attr(k, v)
        n += len(trials)
    return n


def reuse_archived(plan: Plan, run_dir: Path) -> str | None:
    """Copy an archived same-fingerprint run's trials into the new run's journal at `run_dir`;
    returns the line to print, or None when there is nothing to reuse (or this very run is
    being resumed)."""
    if (run_dir / JOURNAL_FILE).exists():
        return None  # resuming this very run
    for row in plan.archive.find(plan.fingerprint):
        src_dir = plan.archive.run_dir(row["name"])
        if row["name"] == plan.name or not (src_dir / JOURNAL_FILE).exists():
            continue
        with tempfile.TemporaryDirectory() as tmp:  # read a copy: the archive stays untouched
            Path(tmp, JOURNAL_FILE).write_bytes((src_dir / JOURNAL_FILE).read_bytes())
            src = make_storage({"kind": "journal"}, run_dir=Path(tmp))
            dst = make_storage({"kind": "journal"}, run_dir=run_dir)
            n = _copy_studies(src, row["name"], dst, plan.name)
        if plan.archive.has(row["name"], COORD_PLOT):  # its numbers came with the studies
            plan.archive.copy_into(plan.name, COORD_PLOT, src_dir / COORD_PLOT)
        return f"reuse: {n} finished trials from archived run {row['name']!r} (same fingerprint)"
    return None
