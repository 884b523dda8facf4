"""Before training: warm-start a new run from an archived run with the same fingerprint.

The archived run's finished trials are copied into the new run's studies (and the coordinate
check's plot into its folder): a finished match re-emits only, a partial one continues where it
stopped. Only data is read: nothing named in the archived files is imported or executed.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import optuna

from transfer.archive import changed_parts, newest_first
from transfer.outputs.write import COORD_PLOT
from transfer.run.planner import Plan
from transfer.search import FINISHED
from transfer.search.storage import FINALIZE_CLAIM, JOURNAL_FILE, make_storage


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
            # the old run's finalize claim is not this run's: copied, it would make this run's
            # only worker wait for a writer that is the old run's process (alive when the old
            # run was swept in this same process, as target_check and notebooks do)
            if k != FINALIZE_CLAIM:
                dst.set_user_attr(k, v)
        n += len(trials)
    return n


def _candidates(plan: Plan, *, force: bool) -> tuple[dict | None, str | None]:
    """(the archived run to copy, None) — or (None, the line that says why the newest run with
    this config was not copied: other code decided its trials)."""
    same = [r for r in plan.archive.find(plan.fingerprint) if r["name"] != plan.name]
    if same:
        return same[0], None
    if not plan.config_fingerprint:
        return None, None
    df = plan.archive.runs()
    if "config_fingerprint" not in df:
        return None, None
    rows = df[(df["config_fingerprint"] == plan.config_fingerprint) & (df["name"] != plan.name)]
    rows = newest_first(rows).to_dict("records")
    if not rows:
        return None, None
    row = rows[0]
    old = row.get("code")
    if isinstance(old, str):
        try:
            old = json.loads(old) if old else None
        except json.JSONDecodeError:
            old = None
    changed = changed_parts(old if isinstance(old, dict) else None, plan.code)
    if force:
        return {**row, "changed": changed}, None
    return None, (f"reuse: not reusing archived run {row['name']!r}: same config, but its "
                  f"{', '.join(changed)} code changed since; reuse=force copies its trials anyway")


def reuse_archived(plan: Plan, run_dir: Path, *, force: bool = False) -> str | None:
    """Copy an archived run's trials into the new run's journal at `run_dir` when its
    fingerprint (config and code) is this run's — or, with `force`, its config only; either is
    recorded in run.json (`reused_from`). Returns the line to print, or None when there is
    nothing to reuse (or this very run is being resumed)."""
    if (run_dir / JOURNAL_FILE).exists():
        return None  # resuming this very run
    row, refused = _candidates(plan, force=force)
    if row is None:
        return refused
    src_dir = plan.archive.run_dir(row["name"])
    if not (src_dir / JOURNAL_FILE).exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:  # read a copy: the archive stays untouched
        Path(tmp, JOURNAL_FILE).write_bytes((src_dir / JOURNAL_FILE).read_bytes())
        src = make_storage({"kind": "journal"}, run_dir=Path(tmp))
        dst = make_storage({"kind": "journal"}, run_dir=run_dir)
        n = _copy_studies(src, row["name"], dst, plan.name)
    if plan.archive.has(row["name"], COORD_PLOT):  # its numbers came with the studies
        plan.archive.copy_into(plan.name, COORD_PLOT, src_dir / COORD_PLOT)
    forced = "changed" in row
    # recorded either way: the ETA's history leaves a run that copied its trials out of its
    # calibration (its wall is not what its trials cost)
    plan.archive.record({"name": plan.name, "reused_from": {
        "run": row["name"], "forced": forced, "changed": row.get("changed", []), "trials": n}})
    if not forced:
        return f"reuse: {n} finished trials from archived run {row['name']!r} (same fingerprint)"
    return (f"reuse: reuse=force: {n} finished trials from archived run {row['name']!r}, whose "
            f"{', '.join(row['changed'])} code differs from this one's (recorded in run.json)")
