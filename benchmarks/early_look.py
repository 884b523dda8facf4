"""What the width grid's early look (`validation.early_reject`) says on archived runs' grids.

For each run folder given: its width grid's curves at the first two widths (as the focused
grid has them when it would lay out the third), judged as `transfer.verdict.width.
early_rejection` judges them (`early_look`: 1 − α/2, no target), and the whole grid as the run judged it.
A μP run whose early look rejects would have been stopped wrongly; an SP run's should reject.

    python benchmarks/early_look.py /tmp/cmp6/sweeps/*-default-*
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import optuna  # noqa: E402
import yaml  # noqa: E402
from optuna.storages import JournalStorage  # noqa: E402
from optuna.storages.journal import JournalFileBackend  # noqa: E402

from transfer.core.compose import as_config, compose  # noqa: E402
from transfer.judge.verdict import judge  # noqa: E402
from transfer.verdict.width import curves_from, early_look, limits_from  # noqa: E402


def look(run: Path) -> list[str]:
    """The early look's and the whole grid's verdict on one run's width grid."""
    saved = yaml.safe_load((run / "config.yaml").read_text())
    par = saved["proxy"]["parametrization"]
    # today's limits for the run's budget (an archived config may predate a field)
    v = as_config(compose([f"budget={saved.get('budget', 'default')}"])).validation
    winners = json.loads((run / "run.json").read_text()).get("winners") or {}
    centre = round(math.log2(float(winners["lr"])), 6) if winners.get("lr") else -7.0
    storage = JournalStorage(JournalFileBackend(str(run / "study.journal")))
    names = [s.study_name for s in optuna.get_all_study_summaries(storage)
             if s.study_name.endswith(":validation")]
    if not names:
        return [f"| {run.name} | no width grid | | |"]
    study = optuna.load_study(study_name=names[0], storage=storage)
    widths = sorted({t.params["width"] for t in study.get_trials(deepcopy=False)
                     if "width" in t.params})
    rows = []
    early = early_look(v, par, curves_from(study, widths[:2]), centre)  # as the run looks
    whole = judge(curves_from(study, widths), None, centre,
                  limits_from(v, parametrization=par), None)
    for ws, verdict in ((widths[:2], early), (widths, whole)):
        if verdict is None:
            rows.append(f"| {run.name} | {par} | {' → '.join(map(str, ws))} | too few curves |")
            continue
        lo, hi = verdict.drift_ci
        rows.append(f"| {run.name} | {par} | {' → '.join(map(str, ws))} at "
                    f"{verdict.confidence:.0%} | {verdict.outcome}: drift {verdict.drift_log2:+.2f} "
                    f"[{lo:+.2f}, {hi:+.2f}], gap {verdict.loss_gap:.2%} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run folders (sweeps/<run>)")
    args = ap.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    missing = [r for r in args.runs if not (r / "study.journal").is_file()]
    if missing:
        print(f"{missing[0]}: no study.journal; pass run folders of a journal-storage archive",
              file=sys.stderr)
        return 2
    print("| run | parametrization | widths judged | verdict |\n|---|---|---|---|")
    for run in args.runs:
        for row in look(run):
            print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
