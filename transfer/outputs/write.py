"""The results → the run folder: every file a run leaves, written in one place, through the archive.

A job hands `write_run` a `RunFiles` of plain data (the config, the trials, each JSON document,
the target, the plots as PNG bytes, the rendered report, the index row). Each file it is given
is written atomically by `transfer.archive`; the index row goes last, so a row that says a run
is done means its files are there. What each job writes:

- the sweep (`transfer.run.assemble`): config.yaml, trials.csv, validation.json (and
  validation_depth.json, horizon.json), cost.json, target.yaml, hf/config.json,
  base_shapes.bsh (μP), report.md, plots/;
- a sweep stopped by its spending cap: config.yaml, trials.csv, cost.json;
- `python -m transfer.validate` (a custom model): config.yaml, trials.csv, validation.json
  (and validation_depth.json), audit.json, base_shapes.bsh, report.md, plots/.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from transfer.archive import Archive
from transfer.outputs import hf
from transfer.outputs.emit import dump_yaml

PLOTS = "plots"  # the run folder's figures live under plots/
COORD_PLOT = f"{PLOTS}/coord_check.png"
REPORT_PLOTS = (f"{PLOTS}/lr_transfer.png", f"{PLOTS}/lr_trajectory.png", COORD_PLOT)  # report.md links these, when there


@dataclass(frozen=True)
class RunFiles:
    """What goes into a run folder; a field left None (or empty) writes no file."""

    config: dict  # config.yaml: transfer.run.planner.plain_config
    trials: pd.DataFrame  # trials.csv: one row per trial (transfer.run.assemble.trials_frame)
    row: dict  # the run's index row (Archive.record), recorded after every file
    cost: dict | None = None  # cost.json
    validation: dict | None = None  # validation.json: the width verdict (Verdict.to_dict)
    validation_depth: dict | None = None  # validation_depth.json
    horizon: dict | None = None  # horizon.json: the measured exponent and its fit
    audit: dict | None = None  # audit.json: a custom model's audit
    target: dict | None = None  # target.yaml, and hf/config.json made from it
    base_shapes: Callable[[Path], None] | None = None  # writes base_shapes.bsh at a path
    plots: Mapping[str, bytes] = field(default_factory=dict)  # file name under plots/ → PNG
    report: str | None = None  # report.md


def report_plots(archive: Archive, name: str, plots: Mapping[str, bytes]) -> list[str]:
    """The plots report.md links (relative paths): those in `plots` or already in the run
    folder (a resumed or reused run keeps its coordinate-check plot)."""
    return [p for p in REPORT_PLOTS
            if p.removeprefix(f"{PLOTS}/") in plots or archive.has(name, p)]


def write_run(archive: Archive, name: str, files: RunFiles) -> list[str]:
    """Write every file `files` holds into run `name`, then its index row. Returns one line
    per file skipped, saying why (hf/config.json without transformers, or an architecture
    Granite cannot express), for the caller to print."""
    for fname, png in files.plots.items():
        archive.write_bytes(name, f"{PLOTS}/{fname}", png)
    archive.write_yaml(name, "config.yaml", files.config)
    archive.write_text(name, "trials.csv", files.trials.to_csv(index=False))
    for relpath, doc in (("validation.json", files.validation),
                         ("validation_depth.json", files.validation_depth),
                         ("horizon.json", files.horizon), ("audit.json", files.audit),
                         ("cost.json", files.cost)):
        if doc is not None:
            archive.write_json(name, relpath, doc)
    notes = []
    if files.target is not None:
        text = io.StringIO()
        dump_yaml(files.target, text)
        archive.write_text(name, "target.yaml", text.getvalue())
    if files.base_shapes is not None:
        with tempfile.TemporaryDirectory() as tmp:  # mup writes the file itself
            files.base_shapes(Path(tmp) / "base_shapes.bsh")
            archive.copy_into(name, "base_shapes.bsh", Path(tmp) / "base_shapes.bsh")
    if files.report is not None:
        archive.write_text(name, "report.md", files.report)
    if files.target is not None and (note := hf.write_config(archive, name, files.target)):
        notes.append(note)
    archive.record(files.row)
    return notes
